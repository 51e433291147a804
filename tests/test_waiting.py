"""A local model on a CPU takes minutes per request (user report s57): what the commands say while they wait, the
model the server says answered, and Ctrl-C in the middle of a request. The real openai client against the
scripted server (tests/fakeserver.py)."""

from __future__ import annotations

import json

import pytest
from fakeserver import TEST_KEY, interrupted_while_waiting, openai_settings
from pagetree import write_pages
from test_batch import ROUTER, make_db, write_input
from test_tools import index_for
from typer.testing import CliRunner

from ragkit.answer import ask
from ragkit.cli import app
from ragkit.core import waiting

ANSWER = json.dumps({"answer": "Hold the RESET button for 10 seconds.", "sources": ["[1]"], "refused": False})


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    """No embedding model; the heartbeat looks often and a line is due after a fraction of a second (in a pipe
    it waits 30 s), so a scripted reply delayed by one second is a long wait; warnings start afresh."""
    monkeypatch.setenv("RAG_EMBED", "0")
    monkeypatch.setattr(waiting, "TICK", 0.05)
    monkeypatch.setattr(waiting, "PLAIN_EVERY", 0.2)
    monkeypatch.setattr(waiting, "_warned", set())


def _env(monkeypatch, server) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)


def test_ask_in_a_pipe_says_it_waits_on_the_model_and_keeps_stdout_json(isolated_env, monkeypatch, scripted_server):
    """s57 H2: `rag ask` printed nothing on stderr for 4 minutes while the model worked."""
    make_db(isolated_env)
    _env(monkeypatch, scripted_server)
    scripted_server.enqueue(content=ANSWER, delay=1.0)
    result = CliRunner().invoke(app, ["ask", "How do I reset the router?", "--strategy", "naive", "--format", "json",
                                      "--no-cache"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["answer"] == "Hold the RESET button for 10 seconds."  # stdout: the JSON alone
    lines = [ln for ln in result.stderr.splitlines() if "waiting for the model" in ln]
    assert lines and lines[0].startswith("ask: ") and "\r" not in result.stderr, result.stderr


def test_heartbeat_on_a_terminal_draws_a_live_line_and_clears_it(monkeypatch):
    import io

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(waiting, "LIVE_AFTER", 0.0)
    out = Tty()
    beat = waiting.Heartbeat(lambda w: f"ask: {waiting.waiting_text(w)}", file=out)
    with waiting.doing("agent turn 2"), waiting.calling():
        beat.beat()
    beat.stop()
    text = out.getvalue()
    assert text.startswith("\rask: agent turn 2, waiting for the model 0 s") and text.endswith("\r\x1b[K"), text


def test_the_model_the_server_says_answered_is_recorded_and_warned_once(isolated_env, scripted_server, capsys):
    """s57 M1: llama-server serves its one model whatever name is asked; a typo in RAG_MODEL became the label."""
    db = make_db(isolated_env)
    settings = openai_settings(scripted_server, db=db, model="qwen-nonexistent")
    for _ in range(2):
        scripted_server.enqueue(content=ANSWER, model="qwen2.5-coder-1.5b")
        a = ask("How do I reset the router?", settings, strategy="naive", index=index_for(db))
        assert a.error is None and a.model == "qwen-nonexistent" and a.served_model == "qwen2.5-coder-1.5b"
        assert a.to_json()["metadata"]["served_model"] == "qwen2.5-coder-1.5b"
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if "server answered with" in ln]
    assert warnings == ["warning: asked for model 'qwen-nonexistent', the server answered with 'qwen2.5-coder-1.5b'; "
                        "the run records 'qwen2.5-coder-1.5b' as the model that answered (set "
                        "RAG_MODEL=qwen2.5-coder-1.5b to name it)"]


def test_a_dated_snapshot_of_the_model_asked_for_is_no_other_model(isolated_env, scripted_server, capsys):
    db = make_db(isolated_env)
    scripted_server.enqueue(content=ANSWER, model="gpt-4o-mini-2024-07-18")  # what OpenAI answers to gpt-4o-mini
    a = ask("How do I reset the router?", openai_settings(scripted_server, db=db, model="gpt-4o-mini"),
            strategy="naive", index=index_for(db))
    assert a.served_model is None and "served_model" not in a.to_json()["metadata"]
    assert "server answered with" not in capsys.readouterr().err


def test_batch_run_record_names_the_served_model(isolated_env, scripted_server):
    from ragkit.evaluate.batch import run_batch

    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"], ["How do I reset it?", ROUTER]])
    scripted_server.set_responder(lambda body: {"content": ANSWER, "model": "qwen2.5-coder-1.5b"})
    settings = openai_settings(scripted_server, db=db, model="qwen-nonexistent", judge_model="qwen-nonexistent",
                               results=isolated_env / "results", workers=1)
    report = run_batch(inp, settings, strategy="naive")
    assert report.run.model == "qwen-nonexistent" and report.run.served_model == "qwen2.5-coder-1.5b"
    record = json.loads(next((isolated_env / "results").glob("*.run.json")).read_text(encoding="utf-8"))
    assert record["served_model"] == "qwen2.5-coder-1.5b"


def test_batch_interrupted_before_any_row_says_so_in_one_line_and_the_rerun_says_what_it_found(
        isolated_env, monkeypatch):
    """s57 M3: Ctrl-C with 0 rows saved printed "stopped: 0 of 5 rows are saved ..." and then "interrupted;
    finished work is on disk ..."; the rerun said nothing about the 0 rows it found."""
    from ragkit.evaluate import batch as B

    make_db(isolated_env)
    write_input(isolated_env / "q.csv", [["Question", "Reference Document"]] +
                [[f"Question {i}: how do I reset the router?", ROUTER] for i in range(3)])
    run_job = B._run_job

    def ctrl_c(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(B, "_run_job", ctrl_c)
    first = CliRunner().invoke(app, ["batch", "q.csv", "--provider", "offline", "--workers", "1"])
    assert first.exit_code == 130
    assert [ln for ln in first.stderr.strip().splitlines() if not ln.startswith("provider:")] == [
        "stopped: none of the 3 rows was finished, so none is saved; run the same command again to start over"]
    monkeypatch.setattr(B, "_run_job", run_job)
    again = CliRunner().invoke(app, ["batch", "q.csv", "--provider", "offline", "--workers", "1"])
    assert again.exit_code == 0, again.output
    assert "resuming: 0 finished rows of 3 from " in again.stderr and "; 3 to answer" in again.stderr


def test_ask_json_interrupted_prints_a_json_error(isolated_env, monkeypatch):
    """s57 L3: `rag ask --format json` stopped by Ctrl-C wrote nothing on stdout; other failures write {"error"}."""
    import ragkit.answer

    make_db(isolated_env)

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ragkit.answer, "ask", ctrl_c)
    result = CliRunner().invoke(app, ["ask", "How do I reset the router?", "--format", "json"])
    assert result.exit_code == 130 and json.loads(result.stdout) == {"error": "interrupted"}


def test_ctrl_c_stops_genqa_while_a_request_is_in_flight(isolated_env):
    """s57 M2: SIGINT left `rag genqa` waiting for its in-flight request (RAG_TIMEOUT, here 120 s): its worker
    threads were joined. The model here accepts the request and never answers."""
    vpn = ("Remote access. Staff reach internal systems only through the company VPN with multi-factor "
           "authentication. VPN sessions disconnect after 8 hours and must be started again. ") * 2
    logs = ("Retention. Backups are kept for 35 days in a second data centre. Security and access logs are kept "
            "for 13 months and reviewed every quarter by the security team. ") * 2
    write_pages(isolated_env / "database", {"d/doc/s/page_001.md": ("doc", "s", 1, vpn),
                                            "d/doc/s/page_002.md": ("doc", "s", 2, logs)})
    done = interrupted_while_waiting(["genqa", "database/d/doc", "--max", "2"], isolated_env / "cache", wait=30)
    proc, out, err = done, done.stdout, done.stderr
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == ("interrupted; no question was confirmed yet, so no question file was "
                                            "written"), err
    assert "Traceback" not in err and out == "", (out, err)
