"""`rag batch` interrupted for real: Ctrl-C, then kill -9, then the same command again.

`uv run rag batch` runs as a subprocess against the scripted server, which lives in this test process and so
sees every request of every run. The server holds back the answers of chosen questions (a gate) so that the
signals land mid-run deterministically: some rows are finished and in the checkpoint, two are in flight,
the rest not started. No answer is ever delivered to a process that is then killed, so "answered exactly
once" can be checked strictly on the server side.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from fakeserver import TEST_KEY, model_tool_results
from test_batch import ROUTER, make_db, write_input

from ragkit.core.csvio import read_csv

REPO = Path(__file__).resolve().parents[1]


def rag_command() -> list[str]:
    uv = shutil.which("uv")
    if uv:
        return [uv, "run", "--no-sync", "--project", str(REPO), "rag"]
    return [sys.executable, "-m", "ragkit.cli"]  # pragma: no cover - uv is how the project runs


def valid_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    n = 0
    for line in path.read_bytes().split(b"\n"):
        try:
            json.loads(line)
            n += 1
        except ValueError:
            pass
    return n


def wait_for(cond, what: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"rag batch exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def ctrl_c_after_rows(monkeypatch, n: int, *, by_signal: bool = False):
    """Ctrl-C a batch the moment its n-th row is in the checkpoint: SIGINT to this process (`by_signal`, as a
    terminal sends it), else KeyboardInterrupt raised where the row was saved. Returns what undoes it (the
    next run of the test goes on uninterrupted)."""
    from ragkit.evaluate.checkpoint import Checkpoint

    append, calls = Checkpoint.append, []

    def append_then_ctrl_c(self, record):
        append(self, record)
        calls.append(record)
        if len(calls) == n:
            if by_signal:
                os.kill(os.getpid(), signal.SIGINT)
            else:
                raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoint, "append", append_then_ctrl_c)
    return lambda: monkeypatch.setattr(Checkpoint, "append", append)


def test_ctrl_c_then_kill_9_then_rerun_answers_every_question_once(isolated_env, scripted_server):
    db = make_db(isolated_env)
    questions = [f"Question {i}: how do I reset the router?" for i in range(8)]
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"]] + [[q, ROUTER] for q in questions])

    lock = threading.Lock()
    delivered: Counter[str] = Counter()  # final answers the server sent
    state = {"allowed": set(questions[:2]), "gate": threading.Event(), "held": set()}

    def respond(body: dict):
        msgs = body.get("messages") or []
        question = next(m["content"] for m in msgs if m.get("role") == "user")
        reading = body.get("tools") is None  # the reading of the pages that writes the agent's answer
        if reading:
            question = question.removeprefix("Question: ").split("\n", 1)[0]
        with lock:
            allowed, gate = question in state["allowed"], state["gate"]
            if not allowed:
                state["held"].add(question)
        if not allowed:
            gate.wait(120)  # held until the client is gone; then this reply goes nowhere
            return {"status": 503}
        if not reading and not model_tool_results(msgs):
            return {"tool_calls": [("search", {"query": question})]}
        if not reading:
            with lock:
                delivered[question] += 1
        return {"content": json.dumps({"answer": "Hold the reset button for 10 seconds.",
                                       "sources": ["manuals/router/setup/page_001.md"], "refused": False})}

    scripted_server.set_responder(respond)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_"))}
    env.update(OPENAI_API_KEY=TEST_KEY, OPENAI_API_BASE=scripted_server.base_url, RAG_EMBED="0",
               RAG_CACHE_DIR=str(isolated_env / "cache"), PYTHONUNBUFFERED="1")
    cmd = [*rag_command(), "batch", str(inp), "--db", str(db), "--workers", "2", "--no-cache"]
    checkpoints = isolated_env / "results" / ".checkpoints"

    def checkpoint() -> Path | None:
        found = list(checkpoints.glob("q-*.jsonl")) if checkpoints.is_dir() else []
        return found[0] if found else None

    def start() -> subprocess.Popen:
        return subprocess.Popen(cmd, cwd=isolated_env, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)  # its own process group: uv and python

    def in_checkpoint(n: int):
        return lambda: (ck := checkpoint()) is not None and valid_lines(ck) >= n and len(state["held"]) >= 2

    # 1) Ctrl-C with 2 rows finished and 2 in flight: exits promptly, says how to continue
    proc = start()
    try:
        wait_for(in_checkpoint(2), "2 finished rows and 2 in flight", proc)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # in-flight requests are held forever: must not wait for them
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out, err)
    assert "run the same command again to continue" in err and "Traceback" not in err
    assert valid_lines(checkpoint()) == 2
    assert not list((isolated_env / "results").glob("*.csv"))
    with lock:
        state["gate"].set()
        state.update(allowed=set(questions[:4]), gate=threading.Event(), held=set())

    # 2) the same command again, then kill -9 with 2 more rows finished and 2 in flight
    proc = start()
    try:
        wait_for(in_checkpoint(4), "4 finished rows and 2 in flight", proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    ck = checkpoint()
    assert valid_lines(ck) == 4
    with ck.open("ab") as fh:  # as if the kill had landed in the middle of writing a fifth line
        fh.write(b'{"v": 1, "i": 4, "q": "Question 4: how do I re')
    with lock:
        state["gate"].set()
        state.update(allowed=set(questions), gate=threading.Event(), held=set())

    # 3) the same command again runs to the end
    done = subprocess.run(cmd, cwd=isolated_env, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "resumed from checkpoint: 4" in done.stdout
    assert delivered == Counter({q: 1 for q in questions})  # every question answered exactly once, overall
    results = list((isolated_env / "results").glob("q_results_*[0-9].csv"))
    assert len(results) == 1 and str(results[0].relative_to(isolated_env)) in done.stdout
    df = read_csv(results[0])
    assert df["Question"].tolist() == questions  # each row once, in input order
    assert (df["Ref Recall"] == "1.0").all() and (df["Error"] == "").all()
    assert checkpoint() is None  # a complete run leaves no checkpoint: the next run starts fresh


def test_rerun_after_ctrl_c_that_kept_copies_measures_them(isolated_env, monkeypatch):
    """`rag batch --optimize` stopped after its copies were kept (while measuring them), then the same command
    again: it resumed its rows, reused the copies (none made twice, no row twice, the CSV's cells as they were)
    but said "no copy was kept, so the database is as it was: after = before", which the copies of the
    interrupted run made false: the rows were answered before them. It now measures after again."""
    from test_batch import FRIDGE, WIFI, offline

    from ragkit.evaluate import batch as B
    from ragkit.evaluate import heldout

    monkeypatch.setenv("RAG_EMBED", "0")
    db = make_db(isolated_env)
    header = ["Question", "Reference Document"]
    inp = write_input(isolated_env / "q.csv", [header, ["How do I reset the router?", WIFI],
                                               ["How do I change the WiFi password?", ROUTER],
                                               ["冷蔵室の温度は何段階で設定できますか？", FRIDGE]])
    settings = offline(db, isolated_env)
    pages_before = sorted(p.relative_to(db).as_posix() for p in db.rglob("page_*.md"))
    measure = heldout.measure

    def ctrl_c_after(items, settings, **kw):
        if kw.get("label", "").endswith("(after)"):
            raise KeyboardInterrupt
        return measure(items, settings, **kw)

    monkeypatch.setattr(heldout, "measure", ctrl_c_after)
    try:
        B.run_batch(inp, settings, optimize=True, progress=False)
        raise AssertionError("the first run was meant to be interrupted")
    except KeyboardInterrupt:
        pass
    copies = sorted(set(p.relative_to(db).as_posix() for p in db.rglob("page_*.md")) - set(pages_before))
    assert copies  # the interrupted run kept its copies
    cells = read_csv(inp)["Optimized Reference Document"].tolist()
    monkeypatch.setattr(heldout, "measure", measure)

    report = B.run_batch(inp, settings, optimize=True, progress=False)
    assert report.resumed == 3 and [r["Question"] for r in report.rows] == [
        "How do I reset the router?", "How do I change the WiFi password?", "冷蔵室の温度は何段階で設定できますか？"]
    assert sorted(set(p.relative_to(db).as_posix() for p in db.rglob("page_*.md")) - set(pages_before)) == copies
    assert read_csv(inp)["Optimized Reference Document"].tolist() == cells  # no copy named twice
    assert [r["Optimized Reference Document"] for r in report.rows] == cells
    assert not report.measure.unchanged  # the copies came after the answers: after is measured, not assumed
    assert any("answered before an interrupted run" in n for n in report.optimize.notes)


def test_ctrl_c_message_counts_the_rows_the_checkpoint_holds(isolated_env, monkeypatch, capsys):
    """A Ctrl-C right after a row was written to the checkpoint said "stopped: 1 of 3 rows are saved" and the rerun
    "resuming: 2 finished rows": the row was saved but not yet counted. Saving and counting are one step now."""

    from test_batch import offline

    from ragkit.evaluate import batch as B

    monkeypatch.setenv("RAG_EMBED", "0")
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"]] +
                      [[f"Question {i}: how do I reset the router?", ROUTER] for i in range(3)])
    ctrl_c_after_rows(monkeypatch, 2, by_signal=True)
    try:
        B.run_batch(inp, offline(db, isolated_env, workers=1), progress=True)
        raise AssertionError("the run was meant to be interrupted")
    except KeyboardInterrupt:
        pass
    saved = valid_lines(next((isolated_env / "results" / ".checkpoints").glob("q-*.jsonl")))
    assert saved == 2 and "stopped: 2 of 3 rows are saved" in capsys.readouterr().err


def test_ctrl_c_then_other_settings_starts_afresh_and_says_why(isolated_env, monkeypatch, capsys):
    """Ctrl-C a run with --context-tokens 3000, then run with 32000: the checkpoint was keyed without the
    settings that change answers, so the second run resumed the 3000 rows into a file whose record said 32000
    (user report s55 H1: Ref Recall 0.767, a figure no configuration produces). Now it starts afresh, names the
    unfinished run and the setting that differs, and the first run's command still resumes its rows."""
    from dataclasses import replace

    from test_batch import offline

    from ragkit.evaluate import batch as B

    monkeypatch.setenv("RAG_EMBED", "0")
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"]] +
                      [[f"Question {i}: how do I reset the router?", ROUTER] for i in range(4)])
    small = replace(offline(db, isolated_env, workers=1), context_tokens=3000)
    uninterrupted = ctrl_c_after_rows(monkeypatch, 2)
    try:
        B.run_batch(inp, small, strategy="longctx", progress=False)
        raise AssertionError("the run was meant to be interrupted")
    except KeyboardInterrupt:
        pass
    uninterrupted()
    capsys.readouterr()

    big = replace(small, context_tokens=32000)
    from ragkit.core.errors import RagError

    try:  # --resume insists on resuming: refused, naming the run it could have meant and what differs
        B.run_batch(inp, big, strategy="longctx", progress=False, resume=True)
        raise AssertionError("--resume with other settings was meant to fail")
    except RagError as e:
        assert "other settings (context_tokens 3000 -> 32000)" in str(e) and "\n" not in str(e)
    report = B.run_batch(inp, big, strategy="longctx", progress=True)
    err = capsys.readouterr().err
    assert report.resumed == 0 and report.run.context_tokens == 32000
    assert "not resuming the unfinished run" in err and "context_tokens 3000 -> 32000" in err
    assert "resuming:" not in err
    again = B.run_batch(inp, small, strategy="longctx", progress=False)  # the first command resumes its rows
    assert again.resumed == 2 and again.run.context_tokens == 3000
