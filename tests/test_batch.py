"""`rag batch` / `rag eval`: input encodings, columns, scoring, failures, judge errors, resume, re-scoring.

The real paths run here: the offline provider end to end, and the real `openai` client against the scripted
OpenAI-compatible server (agent strategy: one search tool call, then the final JSON answer).
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading
from pathlib import Path

import pytest
from fakeserver import model_tool_results, openai_settings
from pagetree import write_pages
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.cli.render import print_batch_report
from ragkit.core.config import Settings
from ragkit.core.csvio import read_csv
from ragkit.core.errors import RagError
from ragkit.core.models import Answer, Source, Usage
from ragkit.core.pagefile import PageMeta, render_page
from ragkit.evaluate import batch as B
from ragkit.evaluate.checkpoint import Checkpoint, checkpoint_path
from ragkit.evaluate.rescore import run_eval
from ragkit.evaluate.scoring import OPT_REF_COLUMNS, Scorer

PAGES = {
    "家電/冷蔵庫/操作と機能/page_001.md": ("冷蔵庫 取扱説明書", "操作と機能", 1,
                                  "# 温度の設定\n冷蔵室の温度は「強」「中」「弱」の3段階で設定できます。工場出荷時は「中」です。"),
    "家電/冷蔵庫/お手入れ/page_002.md": ("冷蔵庫 取扱説明書", "お手入れ", 2,
                                 "# 製氷機のお手入れ\n給水タンクは週に1回水洗いしてください。"),
    "manuals/router/setup/page_001.md": ("Router Guide", "Setup", 1,
                                         "# Resetting the router\nTo reset the router, hold the reset button "
                                         "for 10 seconds until the light blinks."),
    "manuals/router/wifi/page_002.md": ("Router Guide", "WiFi", 2,
                                        "# Changing the WiFi password\nOpen the admin page at 192.168.0.1 and "
                                        "choose Wireless > Security."),
}
ROUTER = "database/manuals/router/setup/page_001.md"
WIFI = "database/manuals/router/wifi/page_002.md"
FRIDGE = "database/家電/冷蔵庫/操作と機能/page_001.md"
HEADER = ["Question", "Ground Truth", "Reference Document", "Page", "Checklist"]
DESIGN_COLUMNS = [
    "RAG Answer", "Retrieved Files", "Checklist Recall", "Checklist Precision", "Checklist TP", "Checklist FP",
    "Checklist FN", "Ref Recall", "Ref Precision", "Ref Specificity", "Ref TP", "Ref TN", "Ref FP", "Ref FN",
    "Evaluation Reason",
]


@pytest.fixture(autouse=True)
def keyword_search_only(monkeypatch):
    """The index's dense re-ranking loads an embedding model (seconds on a busy machine); these tests are
    about the runner, so search by keywords only."""
    monkeypatch.setenv("RAG_EMBED", "0")


# -- helpers (also used by test_batch_resume.py) ----------------------------------------------------------
def make_db(root: Path) -> Path:
    return write_pages(root / "database", PAGES, source="x.pdf")


def write_input(path: Path, rows: list[list[str]], *, encoding: str = "utf-8") -> Path:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    path.write_bytes(buf.getvalue().encode(encoding))
    return path


def raw_rows(path: Path) -> list[list[str]]:
    """The results CSV exactly as a spreadsheet gets it (no unescaping)."""
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def offline(db: Path, tmp: Path, **kw) -> Settings:
    return Settings(db=db, results=tmp / "results", provider="offline", model="offline", judge_model="offline",
                    cache=False, **kw)


def is_judge(body: dict) -> bool:
    return isinstance(body.get("response_format"), dict)


def judge_kind(body: dict) -> str:
    rf = body.get("response_format") or {}
    return (rf.get("json_schema") or {}).get("name") or rf.get("type", "")


def agent_responder(answers: dict[str, tuple[str, list[str]]], *, judge=None, log: list | None = None,
                    lock: threading.Lock | None = None):
    """Agent strategy script: first turn -> one `search` tool call; after a tool result -> the final JSON answer
    {answer, sources, refused}; a request without tools (the reading of the pages that writes the agent's answer,
    or the naive pass) -> the same answer. `log` gets the question of every agent turn that answers. Judge calls
    (response_format set) go to `judge(body)`."""
    lock = lock or threading.Lock()

    def respond(body: dict):
        msgs = body.get("messages") or []
        if is_judge(body):
            return judge(body) if judge else {"status": 500}
        question = next(m["content"] for m in msgs if m.get("role") == "user")
        if body.get("tools") is None:  # the naive pass: its user message holds the question and the pages
            question = next((q for q in answers if f"Question: {q}\n" in question), question)
        elif not model_tool_results(msgs):
            return {"tool_calls": [("search", {"query": question})]}
        text, sources = answers[question]
        if log is not None and body.get("tools") is not None:
            with lock:
                log.append(question)
        return {"content": json.dumps({"answer": text, "sources": sources, "refused": not sources},
                                      ensure_ascii=False),
                "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}

    return respond


def checklist_judge(covered: bool = True):
    def judge(body: dict):
        user = body["messages"][-1]["content"]
        n = user.count("\n", user.index("Checklist (")) if "Checklist (" in user else 1
        if judge_kind(body) == "checklist_verdict":
            items = [{"item": i, "covered": covered, "evidence": "x"} for i in range(1, n + 1)]
            return {"content": json.dumps({"items": items, "extra_points": [], "reason": "ok"})}
        if judge_kind(body) == "rubric_verdict":
            return {"content": json.dumps({"accuracy": 0.9, "completeness": 0.8, "citations": 0.8,
                                           "context_relevance": 0.9, "reasoning": {}, "issues": [],
                                           "strengths": []})}
        if judge_kind(body) == "folder_proposal":  # the optimizer, after a batch that missed a page
            return {"content": json.dumps({"folder": "manuals/router/help", "reason": "r", "new_folder": True})}
        return {"content": json.dumps({"correct": True, "reason": "same"})}

    return judge


# -- input handling ---------------------------------------------------------------------------------------
def test_offline_end_to_end_shift_jis_blank_rows_duplicates(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "質問.csv", [
        HEADER,
        ["How do I reset the router?", "Hold the reset button for 10 seconds.", ROUTER, "1",
         "hold the reset button\n10 seconds"],
        ["", "", "", "", ""],
        ["冷蔵室の温度は何段階で設定できますか？", "3段階（強・中・弱）", FRIDGE, "1", "3段階\n強・中・弱"],
        ["   ", "ignored", ROUTER, "", ""],
        ["What is the capital of France?", "", "", "", ""],
        ["How do I reset the router?", "Hold the reset button for 10 seconds.", ROUTER, "1", "hold the reset button"],
    ], encoding="cp932")
    report = B.run_batch(inp, offline(db, isolated_env), progress=False)

    assert report.skipped_blank == 2
    assert [r["Question"] for r in report.rows] == [
        "How do I reset the router?", "冷蔵室の温度は何段階で設定できますか？", "What is the capital of France?",
        "How do I reset the router?"]
    assert not report.errors, report.errors
    assert report.results_path.name.startswith("質問_results_") and report.results_path.parent.name == "results"
    assert report.summary_path == report.results_path.with_name(report.results_path.stem + "_summary.csv")
    assert report.results_path.read_bytes().startswith(b"\xef\xbb\xbf")  # utf-8-sig

    df = read_csv(report.results_path)
    assert len(df) == 4
    first, _, unanswerable, dup = df.to_dict("records")
    # both duplicate questions answered, each scored against its own checklist
    assert first["RAG Answer"] and dup["RAG Answer"]
    assert first["Checklist TP"] == "2" and dup["Checklist TP"] == "1"
    assert first["Retrieved Files"].splitlines()[0] == ROUTER
    assert first["Ref TP"] == "1" and first["Ref Recall"] == "1.0"
    # Ref TN counts the universe: every page of the database not required and not retrieved
    retrieved = set(first["Retrieved Files"].splitlines())
    assert int(first["Ref TN"]) == len(PAGES) - len(retrieved | {ROUTER})
    # an unanswerable question that is refused: TN = 1, recall/precision undefined -> empty cells
    assert unanswerable["Refused"] == "True" and unanswerable["Checklist TN"] == "1"
    assert unanswerable["Checklist Recall"] == "" and unanswerable["Ref Recall"] == ""
    assert "correctly refused" in unanswerable["Evaluation Reason"]

    summary = {r["Metric"]: r for r in read_csv(report.summary_path).to_dict("records")}
    assert summary["Questions"]["Total"] == "4"
    assert summary["Skipped blank rows"]["Total"] == "2"
    assert summary["Errors"]["Total"] == "0"
    assert summary["Ref Recall"]["Rows"] != "" and "Wall time (s)" in summary and "Total cost (USD)" in summary
    # a finished run without errors removes its checkpoint: the same command starts fresh next time
    assert not list((isolated_env / "results" / ".checkpoints").glob("*.jsonl"))


def test_bom_input_without_ground_truth_gives_answers_only(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question", "Note"], ["How do I reset the router?", "メモ"]],
                      encoding="utf-8-sig")
    report = B.run_batch(inp, offline(db, isolated_env), progress=False)
    rows = raw_rows(report.results_path)
    header, row = rows[0], dict(zip(rows[0], rows[1], strict=True))
    assert header[:2] == ["Question", "Note"] and header[2:2 + len(DESIGN_COLUMNS)] == DESIGN_COLUMNS
    assert row["Note"] == "メモ" and row["RAG Answer"]
    for col in ("Checklist Recall", "Ref Recall", "Ref TP", "Evaluation Reason", "Contain Match"):
        assert row[col] == "", col


def test_missing_question_column_is_one_line_listing_columns(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "bad.csv", [["質問", "Answer"], ["x", "y"]], encoding="cp932")
    with pytest.raises(RagError) as e:
        B.run_batch(inp, offline(db, isolated_env), progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "'Question'" in msg and "'質問'" in msg and "'Answer'" in msg
    result = CliRunner().invoke(app, ["batch", str(inp), "--db", str(db), "--provider", "offline"])
    assert result.exit_code == 1
    assert "missing column 'Question'" in result.output and "Traceback" not in result.output
    assert not (isolated_env / "results").exists() or not list((isolated_env / "results").glob("*.csv"))


def test_only_blank_questions_is_an_error(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], [""], ["  "]])
    with pytest.raises(RagError, match="no questions"):
        B.run_batch(inp, offline(db, isolated_env), progress=False)


def test_column_order_is_exactly_design_4(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [
        ["Question", "Ground Truth", "Reference Document", "Optimized Reference Document", "Page", "Checklist",
         "Owner"],
        ["How do I reset the router?", "Hold the reset button.", ROUTER, ROUTER, "1", "reset button", "me"]])
    report = B.run_batch(inp, offline(db, isolated_env), progress=False)
    header = raw_rows(report.results_path)[0]
    n_in = 7
    assert header[:n_in] == ["Question", "Ground Truth", "Reference Document", "Optimized Reference Document",
                             "Page", "Checklist", "Owner"]
    assert header[n_in:n_in + 15] == DESIGN_COLUMNS
    rest = header[n_in + 15:]
    assert rest[:6] == ["Checklist F1", "Checklist Accuracy", "Checklist Specificity", "Checklist TN", "Ref F1",
                        "Ref Accuracy"]
    assert [c for c in rest if c.startswith("Opt Ref")] == OPT_REF_COLUMNS
    for c in ("Judge Overall", "Contain Match", "LLM Accuracy", "Refused", "Pages Read", "Steps", "Input Tokens",
              "Output Tokens", "Cost USD", "Latency ms"):
        assert c in rest
    assert rest[-2:] == ["Error", "Judge Error"] and "Attempts" not in header
    assert len(header) == len(set(header))
    row = dict(zip(header, raw_rows(report.results_path)[1], strict=True))
    assert row["Opt Ref TP"] == "1" and row["Owner"] == "me"


def test_results_csv_as_input_replaces_its_computed_columns(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, ["How do I reset the router?", "x", ROUTER, "1", "reset"]])
    first = B.run_batch(inp, offline(db, isolated_env), progress=False)
    again = B.run_batch(first.results_path, offline(db, isolated_env), progress=False)
    header = raw_rows(again.results_path)[0]
    assert len(header) == len(set(header)) and header.count("RAG Answer") == 1
    assert again.results_path != first.results_path and first.results_path.exists()


def test_undefined_ratios_are_empty_cells_and_formulas_escaped(isolated_env, scripted_server):
    db = make_db(isolated_env)
    q1, q2 = "Q1 formula?", "Q2 dash?"
    inp = write_input(isolated_env / "q.csv", [HEADER, [q1, "", "", "", ""], [q2, "", ROUTER, "", "reset"]])
    answers = {q1: ('=HYPERLINK("http://x")', ["manuals/router/wifi/page_002.md"]),
               q2: ("-1 is not the answer", [])}
    scripted_server.set_responder(agent_responder(answers, judge=checklist_judge()))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results")
    report = B.run_batch(inp, settings, progress=False)
    assert not report.errors, report.errors
    rows = raw_rows(report.results_path)
    header = rows[0]
    r1, r2 = (dict(zip(header, r, strict=True)) for r in rows[1:])
    assert r1["RAG Answer"] == "'=HYPERLINK(\"http://x\")"  # a spreadsheet shows it, never runs it
    # unanswerable and answered: FP = 1, others 0; Recall = 0/0 is undefined, Precision = 0/1
    assert (r1["Checklist FP"], r1["Checklist Recall"], r1["Checklist Precision"]) == ("1", "", "0.0")
    assert r1["Checklist F1"] == "0.0" and r1["Checklist Specificity"] == "0.0"  # 2TP/(2TP+FP+FN) = 0/1
    assert r1["Ref Recall"] == "" and r1["Ref Precision"] == "0.0" and r1["Ref FP"] == "1"
    # answerable and refused (nothing cited): FN = all items; nothing retrieved: Ref Precision undefined
    assert r2["Refused"] == "True" and r2["Checklist FN"] == "1" and r2["Checklist Precision"] == ""
    assert r2["Ref Precision"] == "" and r2["Ref Recall"] == "0.0"
    assert not any(v.lower() in ("nan", "none") for r in rows for v in r)
    # ragkit reads its own file back without the apostrophe
    assert read_csv(report.results_path)["RAG Answer"].tolist()[0] == '=HYPERLINK("http://x")'


def test_formula_looking_cells_of_every_kind_are_escaped(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question", "Note"], ["How do I reset the router?", "@SUM(1)"]])
    texts = ["+1 call me", "-cmd|' /C calc'!A0", "@import"]

    def answer_fn(question, settings, *, strategy, index, provider):
        return Answer(question=question, answer=texts.pop(0), refused=False)

    for expected in ["'+1 call me", "'-cmd|' /C calc'!A0", "'@import"]:
        report = B.run_batch(inp, offline(db, isolated_env), progress=False, answer_fn=answer_fn)
        row = dict(zip(*raw_rows(report.results_path)[:2], strict=True))
        assert row["RAG Answer"] == expected and row["Note"] == "'@SUM(1)"


def test_resume_flag_without_checkpoint_fails(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"]])
    with pytest.raises(RagError, match="no interrupted run to resume"):
        B.run_batch(inp, offline(db, isolated_env), progress=False, resume=True)


def test_torn_checkpoint_line_is_ignored_and_finished_rows_kept(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"], ["WiFi password?"],
                                               ["Third question?"]])
    settings = offline(db, isolated_env)
    calls: list[str] = []
    interrupt = {"on": True}

    def answer_fn(question, settings, *, strategy, index, provider):
        calls.append(question)
        if question == "WiFi password?" and interrupt["on"]:
            interrupt["on"] = False
            raise KeyboardInterrupt  # the user presses Ctrl-C while this row runs
        return Answer(question=question, answer=f"answer to {question}", refused=False,
                      usage=Usage(10, 5, 0.001, 1))

    with pytest.raises(KeyboardInterrupt):
        B.run_batch(inp, settings.with_(workers=1), progress=False, answer_fn=answer_fn)
    ck = next((isolated_env / "results" / ".checkpoints").glob("q-*.jsonl"))
    assert len(ck.read_text(encoding="utf-8").splitlines()) == 1  # the first row was saved at once
    with ck.open("ab") as fh:
        fh.write(b'{"v": 1, "i": 2, "q": "Third que')  # kill -9 in the middle of a write
    report = B.run_batch(inp, settings.with_(workers=1), progress=False, answer_fn=answer_fn)
    assert calls == ["How do I reset the router?", "WiFi password?", "WiFi password?", "Third question?"]
    assert report.resumed == 1 and not report.errors
    assert [r["RAG Answer"] for r in report.rows] == [f"answer to {q}" for q in
                                                       ("How do I reset the router?", "WiFi password?",
                                                        "Third question?")]
    assert report.answer_usage.input_tokens == 30  # resumed rows count in the totals
    assert not ck.exists()


def test_second_process_on_same_checkpoint_is_refused(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"]])
    settings = offline(db, isolated_env)
    import pandas as pd

    from ragkit.evaluate.checkpoint import checkpoint_material
    from ragkit.evaluate.results import embeddings_label
    from ragkit.search import open_index

    df = pd.DataFrame({"Question": ["How do I reset the router?"]})
    # the key batch uses: the agent's k is its start pages, and whether meaning takes part in search
    material = checkpoint_material(settings, inp, df, strategy="agent", k=settings.start_pages,
                                   embeddings=embeddings_label(open_index(db, progress=False)))
    path = checkpoint_path(settings, inp, df, strategy="agent", material=material)
    holder = Checkpoint(path)
    holder.open()
    try:
        with pytest.raises(RagError, match="another `rag batch` is running"):
            B.run_batch(inp, settings, progress=False)
    finally:
        holder.close()


# -- the real openai client against the scripted server ----------------------------------------------------
QUESTIONS = {
    "How do I reset the router?": ("Hold the reset button for 10 seconds. (manuals/router/setup/page_001.md)",
                                   ["manuals/router/setup/page_001.md"]),
    "How do I change the WiFi password?": ("Open 192.168.0.1, Wireless > Security.",
                                           ["manuals/router/wifi/page_002.md"]),
    "冷蔵室の温度は？": ("強・中・弱の3段階です。", ["家電/冷蔵庫/操作と機能/page_001.md"]),
}


def _qrows(with_checklist: bool = True) -> list[list[str]]:
    refs = {"How do I reset the router?": ROUTER, "How do I change the WiFi password?": WIFI,
            "冷蔵室の温度は？": FRIDGE}
    if with_checklist:
        return [["Question", "Reference Document", "Checklist"]] + [[q, refs[q], "key point one\nkey point two"]
                                                                     for q in QUESTIONS]
    return [["Question", "Reference Document"]] + [[q, refs[q]] for q in QUESTIONS]


def test_failing_question_does_not_stop_batch_and_is_retried(isolated_env, scripted_server):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", _qrows(with_checklist=False))
    log: list[str] = []
    ok = agent_responder(QUESTIONS, log=log)
    broken = {"on": True}

    def respond(body):
        user = next((m["content"] for m in body["messages"] if m.get("role") == "user"), "")
        if broken["on"] and user == "How do I change the WiFi password?":
            return {"status": 500}
        return ok(body)

    scripted_server.set_responder(respond)
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results", workers=3)
    report = B.run_batch(inp, settings, progress=False)
    assert len(report.errors) == 1 and "row 3" in report.errors[0] and "HTTP 500" in report.errors[0]
    by_q = {r["Question"]: r for r in report.rows}
    assert by_q["How do I change the WiFi password?"]["Error"]
    assert by_q["How do I change the WiFi password?"]["Ref Recall"] in ("", None)
    assert by_q["How do I reset the router?"]["Ref Recall"] == 1.0 and not by_q["How do I reset the router?"]["Error"]
    assert sorted(log) == sorted(["How do I reset the router?", "冷蔵室の温度は？"])
    assert report.results_path.exists() and report.checkpoint_kept and report.checkpoint_path.exists()
    # 3 attempts (DESIGN §3) for the failing call, every one answered 500
    assert scripted_server.statuses.count(500) == 3
    assert report.answer_usage.input_tokens > 0 and report.answer_usage.cost_usd > 0

    # the CLI: exit 1 after finishing the others, the retry hint printed
    # (same checkpoint: the CLI builds equal settings from the environment)
    broken["on"] = False
    again = B.run_batch(inp, settings, progress=False)
    assert not again.errors and again.resumed == 2
    assert log.count("How do I change the WiFi password?") == 1  # only the failed row was asked again
    assert log.count("How do I reset the router?") == 1
    assert again.results_path != report.results_path and not again.checkpoint_path.exists()
    assert len(read_csv(again.results_path)) == 3


def test_cli_exit_1_when_a_row_fails(isolated_env, scripted_server, monkeypatch):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", _qrows(with_checklist=False))
    ok = agent_responder(QUESTIONS)

    def respond(body):
        user = next((m["content"] for m in body["messages"] if m.get("role") == "user"), "")
        return {"status": 500} if user == "冷蔵室の温度は？" else ok(body)

    scripted_server.set_responder(respond)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-KEY")
    monkeypatch.setenv("OPENAI_API_BASE", scripted_server.base_url)
    import ragkit.cli
    import ragkit.core.config

    def fast_retries(**kw):  # the CLI's settings, with the test server's short backoff
        return ragkit.core.config.load_settings(**kw).with_(retry_base_delay=0.01, retry_max_delay=0.05)

    monkeypatch.setattr(ragkit.cli, "load_settings", fast_retries)
    result = CliRunner().invoke(app, ["batch", str(inp), "--db", str(db), "--no-cache", "--workers", "2"])
    assert result.exit_code == 1, result.output
    assert "1 error" in result.output and "run the same command again" in result.output
    assert "results:" in result.output and "summary:" in result.output and "sk-test-SECRET-KEY" not in result.output
    results = list((isolated_env / "results").glob("q_results_*[0-9].csv"))
    assert len(results) == 1 and "sk-test-SECRET-KEY" not in results[0].read_text(encoding="utf-8-sig")


def test_invalid_judge_json_is_retried_then_recorded_answer_kept(isolated_env, scripted_server):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", _qrows(with_checklist=True))
    judge_calls: list[str] = []
    lock = threading.Lock()
    good = checklist_judge(covered=True)
    mode = {"bad": True}

    def judge(body):
        with lock:
            judge_calls.append(judge_kind(body))
        user = body["messages"][-1]["content"]
        if mode["bad"] and "冷蔵室" in user:
            return {"content": "Sure! Item 1 is covered, item 2 is not."}  # not JSON, every time
        return good(body)

    log: list[str] = []
    scripted_server.set_responder(agent_responder(QUESTIONS, judge=judge, log=log))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results", workers=3)
    report = B.run_batch(inp, settings, progress=False)
    row = next(r for r in report.rows if r["Question"] == "冷蔵室の温度は？")
    assert row["RAG Answer"] == "強・中・弱の3段階です。"  # the answer is kept
    assert "checklist judge failed" in row["Judge Error"] and "no valid JSON" in row["Judge Error"]
    assert row["Checklist Recall"] in ("", None) and row["Ref Recall"] == 1.0
    assert len(report.errors) == 1 and "Judge Error" not in report.errors[0]
    assert judge_calls.count("checklist_verdict") == 2 + 3  # two good rows once, the bad one 3 attempts
    ok = next(r for r in report.rows if r["Question"] == "How do I reset the router?")
    assert ok["Checklist TP"] == 2 and ok["Checklist Recall"] == 1.0 and not ok["Judge Error"]
    assert report.judge_usage.input_tokens > 0

    # rerun: the failed judging is retried from the saved answer, nothing is asked again
    mode["bad"] = False
    asked_before = list(log)
    again = B.run_batch(inp, settings, progress=False)
    assert log == asked_before
    assert not again.errors
    row = next(r for r in again.rows if r["Question"] == "冷蔵室の温度は？")
    assert row["Checklist Recall"] == 1.0 and not row["Judge Error"]


def test_rubric_contain_match_and_llm_accuracy_with_ground_truth(isolated_env, scripted_server):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [
        HEADER, ["How do I reset the router?", "hold the reset button for 10 seconds", ROUTER, "1", "reset button"]])
    scripted_server.set_responder(agent_responder(QUESTIONS, judge=checklist_judge()))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results")
    report = B.run_batch(inp, settings, progress=False)
    assert not report.errors, report.errors
    row = raw_rows(report.results_path)
    row = dict(zip(row[0], row[1], strict=True))
    assert row["Judge Accuracy"] == "0.9" and row["Judge Overall"] != "" and row["Judge Passed"] == "True"
    assert row["Contain Match"] == "True" and row["LLM Accuracy"] == "True"
    assert row["Judged By"] == settings.judge_model  # a judge measured this row (not the refusal rule)
    assert "judge 0." in row["Evaluation Reason"]
    assert int(row["Judge Input Tokens"]) > 0 and float(row["Cost USD"]) > 0
    kinds = [judge_kind(b) for b in scripted_server.requests if is_judge(b)]
    assert sorted(kinds) == ["accuracy_verdict", "checklist_verdict", "rubric_verdict"]
    # the judge uses the judge model
    assert all(b["model"] == settings.judge_model for b in scripted_server.requests if is_judge(b))
    # the run record names both models; the report shows the judged figure as a measurement
    from ragkit.evaluate.runinfo import read_run_info
    from ragkit.reports.html import write_report

    info = read_run_info(report.results_path)
    assert (info.provider, info.model, info.judge_model, info.strategy) == (
        "openai", settings.model, settings.judge_model, "agent")
    html = write_report([report.results_path], isolated_env / "r.html").read_text(encoding="utf-8")
    assert "judged (1)" in html and "class=\"rule\"" not in html  # no refusal was passed by rule here


def test_contain_match_reads_the_answer_not_its_citations(isolated_env):
    db = make_db(isolated_env)
    # the offline answer quotes the reset sentence and cites ".../setup/page_001.md p.1"; "001" and "1" are
    # only in the citation, "10 seconds" is in the answer
    inp = write_input(isolated_env / "q.csv", [
        HEADER, ["How do I reset the router?", "10 seconds", ROUTER, "1", ""],
        ["How long do I hold the reset button of the router?", "001", ROUTER, "1", ""]])
    report = B.run_batch(inp, offline(db, isolated_env), progress=False)
    rows = {r["Question"]: r for r in report.rows}
    assert "page_001.md" in rows["How do I reset the router?"]["RAG Answer"]
    assert str(rows["How do I reset the router?"]["Contain Match"]) == "True"
    assert "page_001.md" in rows["How long do I hold the reset button of the router?"]["RAG Answer"]
    assert str(rows["How long do I hold the reset button of the router?"]["Contain Match"]) == "False"


def test_eval_rescores_without_asking(isolated_env, scripted_server):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", _qrows(with_checklist=True))
    scripted_server.set_responder(agent_responder(QUESTIONS, judge=checklist_judge(covered=True)))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results")
    first = B.run_batch(inp, settings, progress=False)
    assert not first.errors
    n_before = len(scripted_server.requests)

    scripted_server.set_responder(agent_responder(QUESTIONS, judge=checklist_judge(covered=False)))
    report = run_eval(first.results_path, settings.with_(judge_model="judge-2"), progress=False)
    new = scripted_server.requests[n_before:]
    assert new and all(is_judge(b) and "tools" not in b for b in new)  # only judge calls
    assert {b["model"] for b in new} == {"judge-2"}
    assert len(new) == 3  # one checklist verdict per row
    assert report.results_path.name.startswith(first.results_path.stem + "_eval_")
    assert first.results_path.exists() and report.summary_path.exists()
    assert [r["RAG Answer"] for r in report.rows] == [r["RAG Answer"] for r in first.rows]
    assert all(r["Checklist Recall"] == 0.0 for r in report.rows)  # the new judge's verdict
    assert all(r["Ref Recall"] == 1.0 for r in report.rows)
    # the answer's own figures are those of the batch that produced it
    assert [str(r["Input Tokens"]) for r in report.rows] == [str(r["Input Tokens"]) for r in first.rows]
    # its totals: the answers' tokens as the batch measured them (not asked again) plus this run's judges
    assert report.answer_usage.input_tokens == sum(int(r["Input Tokens"]) for r in first.rows) > 0
    assert report.usage.input_tokens == report.answer_usage.input_tokens + report.judge_usage.input_tokens
    assert report.judge_usage.input_tokens > 0


def test_eval_offline_on_another_database(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, ["How do I reset the router?", "x", ROUTER, "1", "reset"]])
    first = B.run_batch(inp, offline(db, isolated_env), progress=False)
    extra = db / "manuals" / "router" / "extra" / "page_003.md"
    extra.parent.mkdir(parents=True)
    extra.write_text(render_page(PageMeta(page=3), "# More\nanother page"), encoding="utf-8")
    from ragkit.search import open_index

    open_index(db).refresh(progress=False)
    report = run_eval(first.results_path, offline(db, isolated_env), progress=False)
    assert int(report.rows[0]["Ref TN"]) == int(read_csv(first.results_path)["Ref TN"][0]) + 1  # new universe
    assert report.rows[0]["RAG Answer"] == first.rows[0]["RAG Answer"]


def _edit_answers(src: Path, dest: Path, edits: dict[int, str]) -> Path:
    """A results CSV as a user edits it in a spreadsheet: some RAG Answer cells replaced, the rest as written."""
    with src.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    col = rows[0].index("RAG Answer")
    for i, text in edits.items():
        rows[i + 1][col] = text
    return write_input(dest, rows, encoding="utf-8-sig")


def test_eval_of_edited_answers_derives_refused_from_the_new_text(isolated_env):
    """`rag eval` kept the batch's Refused of an answer the user had replaced (a refusal made an answer, or the
    other way round): now an answer unlike the recorded one (the run record's fingerprints; without a record, a
    Refused cell its text contradicts) is read as written, and its Confidence is unknown."""
    db = make_db(isolated_env)
    settings = offline(db, isolated_env)
    inp = write_input(isolated_env / "q.csv", [
        HEADER,
        ["How do I reset the router?", "Hold the reset button.", ROUTER, "1", "hold the reset button"],
        ["What is the capital of France?", "", "", "", ""],
        ["How do I change the WiFi password?", "Open the admin page.", WIFI, "2", "admin page"],
    ])
    first = B.run_batch(inp, settings, progress=False)
    assert [r["Refused"] for r in first.rows] == ["False", "True", "False"], first.rows
    assert all(first.rows[i]["Confidence"] != "" for i in range(3))
    edits = {0: "I cannot answer this from the documents.", 1: "The capital of France is Paris.",
             2: first.rows[2]["RAG Answer"] + "\nChecked by hand."}
    # edited in place: the run record beside it names the recorded answers
    edited = _edit_answers(first.results_path, first.results_path, edits)
    report = run_eval(edited, settings, progress=False)
    rows = report.rows
    assert [r["Refused"] for r in rows] == ["True", "False", "False"]
    assert [r["Confidence"] for r in rows] == ["", "", ""]
    assert [str(rows[0]["Checklist FN"]), str(rows[1]["Checklist FP"]), str(rows[1]["Checklist TN"])] == ["1", "1", "0"]
    assert any("3 answer(s) differ from the answers its run record holds" in n for n in report.run.notes)
    # the eval's own record names the answers it scored, so a second eval finds nothing edited
    again = run_eval(report.results_path, settings, progress=False)
    assert [r["Refused"] for r in again.rows] == ["True", "False", "False"] and not any(
        "edited" in n for n in again.run.notes)
    # an edited copy without its record: a Refused cell that its text contradicts is read from the text
    copy = _edit_answers(first.results_path, isolated_env / "copy.csv", {})
    report = run_eval(copy, settings, progress=False)
    assert [r["Refused"] for r in report.rows] == ["True", "False", "False"]
    assert [r["Confidence"] == "" for r in report.rows] == [True, True, False]


def test_rescore_recomputes_answer_and_judge_columns(isolated_env):
    db = make_db(isolated_env)
    settings = offline(db, isolated_env)
    row = {"Question": "How do I reset the router?", "Reference Document": ROUTER,
           "Checklist": "hold the reset button\n10 seconds", "RAG Answer": "old", "Checklist TP": 0,
           "Ref TP": 1, "Ref TN": 3, "Ref FP": 0, "Ref FN": 0, "Attempts": 2}
    answer = Answer(question=row["Question"], answer="Hold the reset button for 10 seconds.", refused=False,
                    sources=[Source(path=ROUTER, page=1)], steps=3, usage=Usage(100, 10, None, 2))
    out, _ = Scorer.create(settings, row.keys()).rescore(row, answer)
    assert out["RAG Answer"] == answer.answer and out["Retrieved Files"] == ROUTER
    assert out["Checklist TP"] == "2" or out["Checklist TP"] == 2
    assert out["Attempts"] == 2 and out["Ref TP"] == 1 and out["Steps"] == 3
    assert out["Cost USD"] == "" and out["Input Tokens"] == 100  # unknown cost stays empty, never 0
    assert "refs 1/1 found" in out["Evaluation Reason"] and row["RAG Answer"] == "old"


def test_unknown_model_cost_is_unknown_not_zero(isolated_env, scripted_server):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"]])
    scripted_server.set_responder(agent_responder(QUESTIONS))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results", model="my-local-llama")
    report = B.run_batch(inp, settings, progress=False)
    assert not report.errors and report.usage.input_tokens > 0 and report.usage.cost_usd is None
    assert report.rows[0]["Cost USD"] == "" and int(report.rows[0]["Input Tokens"]) > 0
    summary = {r["Metric"]: r["Total"] for r in read_csv(report.summary_path).to_dict("records")}
    assert summary["Total cost (USD)"] == "unknown" and summary["Answer cost (USD)"] == "unknown"
    from rich.console import Console

    console = Console(record=True, width=120)
    print_batch_report(report, console)
    text = console.export_text()
    assert "cost: unknown" in text and str(report.results_path) in text and "wall time:" in text


def test_a_row_from_the_cache_of_an_unpriced_model_has_an_unknown_cost(isolated_env, scripted_server):
    """A row answered from the response cache said Cost USD 0.000000 while the summary said the cost is unknown
    (a model without a price): both say unknown now."""
    db = make_db(isolated_env)
    scripted_server.set_responder(agent_responder(QUESTIONS))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results", model="my-local-llama",
                               cache=True, cache_dir=isolated_env / "cache")
    first, second = list(QUESTIONS)[:2]
    B.run_batch(write_input(isolated_env / "q1.csv", [["Question"], [first]]), settings, progress=False)
    calls = len(scripted_server.requests)
    report = B.run_batch(write_input(isolated_env / "q2.csv", [["Question"], [first], [second]]), settings,
                         progress=False)
    cached, fresh = report.rows
    assert int(cached["Input Tokens"]) == 0 and int(fresh["Input Tokens"]) > 0  # the first from the cache
    assert len(scripted_server.requests) > calls
    assert cached["Cost USD"] == "" and fresh["Cost USD"] == ""
    summary = {r["Metric"]: r["Total"] for r in read_csv(report.summary_path).to_dict("records")}
    assert summary["Answer cost (USD)"] == "unknown"


def test_progress_bar_shows_running_recalls_on_stderr(isolated_env, capsys):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, ["How do I reset the router?", "x", ROUTER, "1",
                                                       "hold the reset button"]])
    B.run_batch(inp, offline(db, isolated_env), progress=True)
    captured = capsys.readouterr()
    assert "batch" in captured.err and "ref_recall=1.00" in captured.err and "checklist_recall=1.00" in captured.err
    assert "ref_recall" not in captured.out


def test_enable_rl_adds_attempts_and_optimizer_figures(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [
        HEADER,
        ["How do I reset the router?", "Hold the reset button.", ROUTER, "1", "reset button"],
        ["冷蔵室の温度は何段階で設定できますか？", "3段階", FRIDGE, "1", "3段階"],
    ])
    report = B.run_batch(inp, offline(db, isolated_env), enable_rl=True, progress=False)
    assert report.optimize is not None and report.optimize.enable_rl
    header = raw_rows(report.results_path)[0]
    assert header[-3:] == ["Attempts", "Error", "Judge Error"]
    summary = {r["Metric"]: r["Total"] for r in read_csv(report.summary_path).to_dict("records")}
    assert header[-4] == "Optimize Split"
    assert sorted(r["Optimize Split"] for r in report.rows) == ["held-out", "train"]
    for key in ("Optimize Rows Analysed", "Optimize Copies Created", "Optimize Copies Kept",
                "Optimize Copies Rolled Back", "Train Ref Recall Before Optimize", "Train Ref Recall After Optimize",
                "Held-out Ref Recall Before Optimize", "Held-out Ref Recall After Optimize"):
        assert key in summary, key
    assert summary["Optimize Rows Analysed"] == str(report.optimize.analysed)
    assert [r["Question"] for r in report.rows][0] == "How do I reset the router?"
    assert report.rows[0]["Attempts"] == 0  # found at once: never re-asked
    # the Attempts figure covers the rows the optimizer worked on, not the 0s of the rows it never re-asked
    attempts = {r["Metric"]: r for r in read_csv(report.summary_path).to_dict("records")}["Attempts"]
    worked = [int(r["Attempts"]) for r in report.rows if int(r["Attempts"] or 0)]
    assert attempts["Rows"] == str(len(worked)) and attempts["Covers"] != ""


def test_enable_rl_without_reference_column_is_a_usage_error(isolated_env):
    from ragkit.core.errors import UsageError

    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"]])
    with pytest.raises(UsageError, match="needs ground truth"):
        B.run_batch(inp, offline(db, isolated_env), enable_rl=True, progress=False)


def test_every_question_of_a_batch_ranks_on_the_same_index_state(isolated_env, monkeypatch):
    """A search ranks by keywords while its candidates lack vectors (they are filled in the background), so a
    batch on a fresh database embeds every page before its first question: the first row and a rerun rank as
    the last row does."""
    from ragkit.answer import ask
    from ragkit.search import get_embedder, open_index

    monkeypatch.setenv("RAG_EMBED", "1")  # this test is about the vectors the module's fixture turns off
    if get_embedder() is None:
        pytest.skip("the embedding package is not installed: no vectors to wait for")
    db = make_db(isolated_env)
    index = open_index(db, progress=False)
    assert index.missing_vectors() == len(PAGES)  # fresh: nothing embedded yet
    missing_at_each_question: list[int] = []

    def answer(question, settings, **kw):
        missing_at_each_question.append(kw["index"].missing_vectors())
        return ask(question, settings, **kw)

    inp = write_input(isolated_env / "q.csv", [HEADER, ["How do I reset the router?", "", ROUTER, "1", ""],
                                                ["冷蔵室の温度は？", "", FRIDGE, "1", ""]])
    B.run_batch(inp, offline(db, isolated_env), progress=False, index=index, answer_fn=answer)
    assert missing_at_each_question == [0, 0]


def test_print_path_gives_each_run_its_own_file_after_earlier_runs(sample_db_copy, isolated_env):
    """genqa, batch and eval with --print-path print the CSV they wrote, alone on stdout, however many
    questions, results, summary and eval files results/ already holds (a glob picked the wrong one)."""
    import subprocess
    import sys

    def rag(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_"))} | {"RAG_EMBED": "0"}
        res = subprocess.run([sys.executable, "-m", "ragkit.cli", *args, "--print-path"], cwd=isolated_env,
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        assert "written to" in res.stderr or "summary" in res.stderr  # the report is still shown, on stderr
        lines = res.stdout.splitlines()
        assert len(lines) == 1 and (isolated_env / lines[0]).is_file(), res.stdout
        return lines[0]

    for _ in range(2):
        q = rag("genqa", "database", "--max", "4")
        r = rag("batch", q)
        e = rag("eval", r)
        assert "_results_" not in q and not q.endswith("_summary.csv")
        assert Path(r).name.startswith(Path(q).stem + "_results_") and not r.endswith("_summary.csv")
        assert Path(e).name.startswith(Path(r).stem + "_eval_") and not e.endswith("_summary.csv")


# -- a page is a page whatever form its path is written in (DESIGN §1, §5) --------------------------------
PASSWORDS = "policies/information_security_policy/3. Passwords and Authentication/page_004.md"
REMOTE = "policies/information_security_policy/4. Remote Access/page_005.md"
ACCEPTABLE = "policies/information_security_policy/5. Acceptable Use/page_006.md"
KOREAN = "공지/사무실_이전_안내/pages_001-002/page_001.md"  # Hangul: its NFD form differs in every syllable


def _forms(db: Path, rel: str) -> dict[str, str]:
    """Every accepted way of writing one page of the database `db` (which lies at ./database)."""
    import unicodedata

    return {"project": f"database/{rel}", "db-relative": rel, "absolute": str(db.resolve() / rel),
            "NFD": unicodedata.normalize("NFD", f"database/{rel}")}


def _eval(db: Path, tmp: Path, rows: list[dict]) -> dict[str, dict]:
    """`rag eval` (run_eval) of a results CSV holding `rows`; the scored rows by question."""
    import pandas as pd

    from ragkit.core.csvio import write_csv

    cols = ["Question", "Reference Document", "Optimized Reference Document", "RAG Answer", "Retrieved Files",
            "Refused"]
    df = pd.DataFrame([{"RAG Answer": "Some answer.", "Refused": "False", **r} for r in rows]).reindex(
        columns=[c for c in cols if any(c in r for r in rows) or c in ("RAG Answer", "Refused")], fill_value="")
    path = tmp / "given_results_20260101_000000.csv"
    write_csv(df, path)
    report = run_eval(path, offline(db, tmp), progress=False)
    assert not report.errors, report.errors
    return {r["Question"]: r for r in report.rows}


def _counts(row: dict, prefix: str = "Ref") -> tuple[int, int, int, int]:
    return tuple(int(float(row[f"{prefix} {k}"])) for k in ("TP", "FN", "FP", "TN"))


def test_missed_page_in_another_form_is_a_false_negative_not_also_a_true_negative(sample_db_copy, isolated_env):
    """Audit finding 1: a required page written db-relative or absolute and missed was an FN and also a TN (the
    universe was compared as text): TP+TN+FP+FN 44 over 43 pages. Now each form gives TN = universe - 2."""
    from ragkit.core.paths import iter_pages

    db = sample_db_copy
    n = len(iter_pages(db))
    rows = [{"Question": f"{form}, missed", "Reference Document": ref, "Retrieved Files": f"database/{ACCEPTABLE}"}
            for form, ref in {**_forms(db, PASSWORDS), "NFD": _forms(db, KOREAN)["NFD"]}.items()]
    got = _eval(db, isolated_env, rows)
    for q, row in got.items():
        assert _counts(row) == (0, 1, 1, n - 2), q  # TN: not the required page, not the retrieved one
        assert float(row["Ref Specificity"]) == pytest.approx((n - 2) / (n - 1), abs=1e-4), q
        assert float(row["Ref Accuracy"]) == pytest.approx((n - 2) / n, abs=1e-4), q


def test_optimized_reference_in_another_form_matches_the_same_page(sample_db_copy, isolated_env):
    """Audit finding 2: `Opt Ref` compared path text: the page retrieved as `database/...` but written db-relative
    or absolute in `Optimized Reference Document` scored Recall 0, FP 1. Now Opt Ref is Ref: TP 1, TN n - 1."""
    from ragkit.core.paths import iter_pages

    db = sample_db_copy
    n = len(iter_pages(db))
    forms = _forms(db, PASSWORDS)
    rows = [{"Question": f"opt {form}", "Reference Document": forms["project"], "Optimized Reference Document": ref,
             "Retrieved Files": forms["project"]} for form, ref in forms.items()]
    got = _eval(db, isolated_env, rows)
    for q, row in got.items():
        assert _counts(row) == _counts(row, "Opt Ref") == (1, 0, 0, n - 1), q
        assert float(row["Opt Ref Recall"]) == 1.0, q


def test_wrong_page_retrieved_in_two_forms_is_one_false_positive(sample_db_copy, isolated_env):
    """Audit finding 4: one wrong page in `Retrieved Files` as `database/...` and in another form counted as 2 FP.
    A page retrieved twice counts once: FP 1."""
    from ragkit.core.paths import iter_pages

    db = sample_db_copy
    n = len(iter_pages(db))
    wrong = _forms(db, ACCEPTABLE)
    rows = [{"Question": f"twice {form} {ref_cell != ''}", "Reference Document": ref_cell,
             "Retrieved Files": f"{wrong['project']}\n{wrong[form]}"}
            for form in ("absolute", "db-relative") for ref_cell in (f"database/{PASSWORDS}", "")]
    got = _eval(db, isolated_env, rows)
    for q, row in got.items():
        answerable = q.endswith("True")
        assert _counts(row) == ((0, 1, 1, n - 2) if answerable else (0, 0, 1, n - 1)), q
        assert float(row["Ref Specificity"]) == pytest.approx((n - 2) / (n - 1) if answerable else (n - 1) / n, abs=1e-4), q


def test_groups_that_share_a_page_are_one_required_page(sample_db_copy, isolated_env):
    """Audit finding 10: `A|A2;A` or `A|A2` and `A2` on the next line counted as 2 required pages. Groups that
    name one page (in any form) are one: TP 1 or FN 1."""
    from ragkit.core.paths import iter_pages

    db = sample_db_copy
    n = len(iter_pages(db))
    a, a2 = _forms(db, PASSWORDS), _forms(db, REMOTE)
    rows = [
        {"Question": "A|A2;A, A retrieved", "Reference Document": f"{a['project']}|{a2['project']};{a['project']}",
         "Retrieved Files": a["project"]},
        {"Question": "A|A2 then A2, A2 retrieved", "Reference Document": f"{a['project']}|{a2['project']}\n"
                                                                         f"{a2['absolute']}",
         "Retrieved Files": a2["project"]},
        {"Question": "A|A2;A, nothing retrieved", "Reference Document": f"{a['project']}|{a2['project']};{a['db-relative']}",
         "Retrieved Files": ""},
    ]
    got = _eval(db, isolated_env, rows)
    assert _counts(got["A|A2;A, A retrieved"]) == (1, 0, 0, n - 2)
    assert _counts(got["A|A2 then A2, A2 retrieved"]) == (1, 0, 0, n - 2)
    assert _counts(got["A|A2;A, nothing retrieved"]) == (0, 1, 0, n - 2)


def test_batch_from_outside_the_project_counts_each_page_once(sample_db, isolated_env):
    """Audit findings 1 and 2 through `rag batch --db /abs/database` run from another folder (the database is
    named by absolute paths there) on `database/...` and db-relative references: Ref and Opt Ref TN count the
    required pages once (TN = universe - required - FP), and Opt Ref equals Ref for the same cell."""
    from ragkit.core.paths import iter_pages

    n = len(iter_pages(sample_db))
    q = "When working from home, how do I reach internal systems, and how long can a VPN session last?"
    for refs in (f"database/{REMOTE}\ndatabase/{PASSWORDS}", f"{REMOTE}\n{PASSWORDS}"):
        inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document", "Optimized Reference Document"],
                                                   [q, refs, refs]])
        res = CliRunner().invoke(app, ["batch", str(inp), "--db", str(sample_db), "--print-path"])
        assert res.exit_code == 0, res.output
        row = read_csv(Path(res.stdout.strip().splitlines()[-1])).to_dict("records")[0]
        retrieved = row["Retrieved Files"].splitlines()
        assert retrieved and all(p.startswith(str(sample_db.resolve())) for p in retrieved)
        tp, fn, fp, tn = _counts(row)
        assert tp + fn == 2 and tn == n - 2 - fp, (refs, row["Retrieved Files"])
        assert _counts(row, "Opt Ref") == (tp, fn, fp, tn)


# -- what the summary says it measured ------------------------------------------------------------------------
def _summary(report) -> dict[str, dict]:
    return {r["Metric"]: r for r in read_csv(report.summary_path).to_dict("records")}


def _report_text(report) -> str:
    from rich.console import Console

    console = Console(record=True, width=200)
    print_batch_report(report, console)
    return console.export_text()


def test_eval_summary_names_who_answered_from_the_record_and_repeats_it(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, ["How do I reset the router?", "x", ROUTER, "1", "reset"]])
    first = B.run_batch(inp, offline(db, isolated_env), progress=False)
    batch_summary = _summary(first)
    # the summary repeats the run record (docs/reports.md): kind, date and input too
    assert batch_summary["Kind"]["Total"] == "batch" and batch_summary["Input"]["Total"] == str(inp)
    assert batch_summary["Date"]["Total"] == json.loads(first.run_path.read_text(encoding="utf-8"))["date"]
    # the results were answered by another provider (their record says so); this eval only judges, offline
    record = json.loads(first.run_path.read_text(encoding="utf-8"))
    record.update(provider="openai", model="gpt-4o-mini", strategy="naive", k=8, engine=None)
    first.run_path.write_text(json.dumps(record), encoding="utf-8")
    report = run_eval(first.results_path, offline(db, isolated_env), progress=False)
    summary = _summary(report)
    assert (summary["Provider"]["Total"], summary["Model"]["Total"], summary["Strategy"]["Total"],
            summary["k"]["Total"]) == ("openai", "gpt-4o-mini", "naive", "8")
    eval_record = json.loads(report.run_path.read_text(encoding="utf-8"))
    assert (eval_record["provider"], eval_record["model"], eval_record["strategy"]) == ("openai", "gpt-4o-mini",
                                                                                       "naive")
    assert summary["Kind"]["Total"] == "eval" and summary["Input"]["Total"] == str(first.results_path)
    assert summary["Date"]["Total"] == eval_record["date"]
    # results without a record: who answered is unknown, and the summary says so rather than naming this run's
    bare = isolated_env / "old_results.csv"
    bare.write_bytes(first.results_path.read_bytes())
    summary = _summary(run_eval(bare, offline(db, isolated_env), progress=False))
    assert (summary["Provider"]["Total"], summary["Model"]["Total"], summary["Strategy"]["Total"]) == (
        "unknown", "unknown", "unknown")


def _results_rows(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    return [["Question", "Ground Truth", "Reference Document", "Checklist", *header], *rows]


def test_eval_summary_carries_the_answers_tokens_and_cost(isolated_env):
    db = make_db(isolated_env)
    cols = ["RAG Answer", "Retrieved Files", "Refused", "Input Tokens", "Output Tokens", "Cost USD", "Latency ms",
            "Steps"]
    answer = "Hold the reset button for 10 seconds."
    results = write_input(isolated_env / "x_results.csv", _results_rows(cols, [
        [f"q{i}", "10 seconds", ROUTER, "reset button", answer, ROUTER, "False", "100", "20", "0.010000", "1500", "4"]
        for i in range(3)]))
    report = run_eval(results, offline(db, isolated_env), progress=False)
    assert not report.errors, report.errors
    summary = _summary(report)
    totals = {m: summary[m]["Total"] for m in ("Answer input tokens", "Answer output tokens", "Answer cost (USD)",
                                               "Total input tokens", "Total output tokens", "Total tokens",
                                               "Total cost (USD)")}
    assert totals == {"Answer input tokens": "300", "Answer output tokens": "60", "Answer cost (USD)": "0.030000",
                      "Total input tokens": "300", "Total output tokens": "60", "Total tokens": "360",
                      "Total cost (USD)": "0.030000"}
    assert "not asked again" in summary["Answer input tokens"]["Covers"]
    assert "not asked again" in summary["Total tokens"]["Covers"]
    assert summary["Steps"]["Mean"] == "4.0" and summary["Latency ms"]["Mean"] == "1500.0"
    text = _report_text(report)
    assert "tokens: 300 in / 60 out" in text and "cost: $0.0300" in text


def test_eval_leaves_the_figures_its_input_lacks_unknown(isolated_env):
    db = make_db(isolated_env)
    results = write_input(isolated_env / "x_results.csv", _results_rows(
        ["RAG Answer", "Retrieved Files", "Refused"],
        [["How do I reset the router?", "10 seconds", ROUTER, "reset button", "Hold the reset button for 10 seconds.",
          ROUTER, "False"]]))
    report = run_eval(results, offline(db, isolated_env), progress=False)
    row = raw_rows(report.results_path)
    row = dict(zip(row[0], row[1], strict=True))
    # unknown, as Cost USD already was: never an invented 0 that the summary then averages
    assert [row[c] for c in ("Confidence", "Steps", "Latency ms", "Input Tokens", "Output Tokens", "Cost USD")] == \
        [""] * 6
    summary = _summary(report)
    for m in ("Confidence", "Steps", "Latency ms", "Max Loops Reached"):
        assert (summary[m]["Mean"], summary[m]["Rows"], summary[m]["Covers"]) == ("", "0", "none"), m
    assert summary["Answer input tokens"]["Total"] == "unknown" and summary["Total tokens"]["Total"] == "unknown"
    assert summary["Answer cost (USD)"]["Total"] == "unknown"
    assert "tokens: answers unknown" in _report_text(report)


def test_judge_rows_say_they_cover_the_judged_rows_only(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [
        HEADER,
        ["How do I reset the router?", "10 seconds", ROUTER, "1", "reset button"],
        ["How do I change the WiFi password?", "192.168.0.1", WIFI, "2", "admin page"],
        ["What is the capital of Mars?", "The documents do not say.", "", "", ""],
    ])
    report = B.run_batch(inp, offline(db, isolated_env), progress=False)
    assert [r["Judged By"] for r in report.rows] == ["", "", "rule"]  # the offline engine refused the third
    for rep in (report, run_eval(report.results_path, offline(db, isolated_env), progress=False)):
        summary = _summary(rep)
        assert summary["Contain Match"]["Rows"] == "2"
        assert summary["Contain Match"]["Covers"] == "answerable (judged; the 1 passed by rule left out)"
        assert summary["Refused"]["Covers"] == "all"  # every row has it
        assert summary["Passed by rule"]["Total"] == "1"


def test_an_empty_optimized_cell_scores_opt_ref_as_ref(isolated_env):
    db = make_db(isolated_env)
    cols = ["RAG Answer", "Retrieved Files", "Refused"]
    rows = [["How do I reset the router?", "x", ROUTER, ROUTER, "", "Hold the reset button.", ROUTER, "False"],
            ["How do I change the WiFi password?", "x", WIFI, "", "", "Hold the reset button.", ROUTER, "False"],
            ["What is the capital of Mars?", "x", "", "", "", "I cannot answer this from the documents.", "", "True"]]
    results = write_input(isolated_env / "x_results.csv", [
        ["Question", "Ground Truth", "Reference Document", "Optimized Reference Document", "Checklist", *cols], *rows])
    report = run_eval(results, offline(db, isolated_env), progress=False)
    for r in report.rows:  # an empty cell: the optimizer left the row's pages as they were
        assert {c: r[c] for c in OPT_REF_COLUMNS} == {c: r[c.removeprefix("Opt ")] for c in OPT_REF_COLUMNS}
    summary = _summary(report)
    for m in ("Recall", "Precision", "TP", "FN"):
        ref, opt = summary[f"Ref {m}"], summary[f"Opt Ref {m}"]
        assert (opt["Mean"], opt["Micro"], opt["Rows"], opt["Covers"]) == (
            ref["Mean"], ref["Micro"], ref["Rows"], ref["Covers"]), m
    assert summary["Opt Ref Recall"]["Rows"] == "2" and summary["Opt Ref Recall"]["Mean"] == "0.5"


def test_one_pass_optimize_says_opt_ref_covers_every_row_and_nothing_was_asked_again(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [
        HEADER,
        ["How do I reset the router?", "10 seconds", f"{ROUTER}\n{WIFI}", "", "reset button"],
        ["How do I change the WiFi password?", "192.168.0.1", WIFI, "2", "admin page"],
        ["冷蔵室の温度は何段階で設定できますか？", "3段階", FRIDGE, "1", "3段階"],
    ])
    report = B.run_batch(inp, offline(db, isolated_env), optimize=True, holdout=0.0, progress=False)
    assert report.optimize is not None and report.optimize.kept, report.errors
    summary = _summary(report)
    assert (summary["Opt Ref Recall"]["Rows"], summary["Opt Ref Recall"]["Covers"]) == (
        summary["Ref Recall"]["Rows"], summary["Ref Recall"]["Covers"])
    text = _report_text(report)
    assert "Opt Ref Recall" in text and "(after optimize)" not in text


def test_eval_without_a_refused_column_tells_a_partial_answer_from_a_refusal(isolated_env):
    db = make_db(isolated_env)
    results = write_input(isolated_env / "x_results.csv", _results_rows(["RAG Answer", "Retrieved Files"], [
        ["How do I reset the router and what is its WiFi channel?", "x", ROUTER,
         "Hold the reset button for 10 seconds\nThe WiFi channel is 6",
         "Hold the reset button for 10 seconds. I cannot answer the second part from the documents.", ROUTER],
        ["火星の首都はどこですか？", "x", "", "", "文書からはお答えできません。", ""],
        ["What is the capital of Mars?", "x", "", "", "The documents do not contain this information.", ""],
        ["What is the capital of Venus?", "x", "", "", "I cannot answer this from the documents.", ""],
    ]))
    report = run_eval(results, offline(db, isolated_env), progress=False)
    got = [tuple(str(r[c]) for c in ("Refused", "Checklist TP", "Checklist FN", "Checklist FP", "Checklist TN"))
           for r in report.rows]
    assert got[0] == ("False", "1", "1", "0", "0")  # answered, one of two items: not a refusal (TP 0, FN 2)
    assert got[1:] == [("True", "0", "0", "0", "1")] * 3  # refusals of what the documents cannot answer


def test_eval_judge_that_repeats_its_prompt_example_is_a_judge_error_not_a_zero(isolated_env, scripted_server):
    """Report s52 H3: a weak judge copied the rubric prompt's example (0.0 everywhere, issues ["specific problems
    found"]) for correct, cited answers; eval wrote Judge Overall 0.0, Judge Passed False, no Judge Error, and
    the summary averaged the zeros into a 0.000 pass rate."""
    from ragkit.evaluate.judges.rubric import COPIED_EXAMPLE

    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [
        HEADER, ["How do I reset the router?", "hold the reset button for 10 seconds", ROUTER, "1", "reset button"]])
    first = B.run_batch(inp, offline(db, isolated_env), progress=False)
    good = checklist_judge()
    echoed = json.dumps({"accuracy": 0.0, "completeness": 0.0, "citations": 0.0, "context_relevance": 0.0,
                         "reasoning": {"accuracy": "..."}, "issues": ["specific problems found"],
                         "strengths": ["specific strengths"]})

    def judge(body):
        if judge_kind(body) == "rubric_verdict":
            return {"content": echoed}
        if judge_kind(body) == "accuracy_verdict":
            return {"content": json.dumps({"correct": True, "reason": "same fact"})}
        return good(body)

    scripted_server.set_responder(agent_responder(QUESTIONS, judge=judge))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results")
    report = run_eval(first.results_path, settings, progress=False)
    row = report.rows[0]
    assert COPIED_EXAMPLE in row["Judge Error"] and "rubric judge failed" in row["Judge Error"]
    assert all(row[c] in ("", None) for c in ("Judge Accuracy", "Judge Overall", "Judge Passed", "Judge Issues"))
    assert str(row["LLM Accuracy"]) == "True" and str(row["Contain Match"]) == "True"  # the other judges stand
    summary = _summary(report)
    assert str(summary["Judge errors"]["Total"]) == "1"
    assert str(summary["Judge Passed"]["Rows"]) == "0" and pd_empty(summary["Judge Passed"]["Mean"])
    assert summary["Judge Overall"]["Covers"] == "not measured (the judge failed on 1 row(s))"
    text = _report_text(report)
    assert "Judge pass rate" not in text and "1 error" in text and "repeated the prompt's example" in text


def pd_empty(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and value != value)


def test_wrong_database_hint_keeps_an_absolute_path_absolute(isolated_env):
    """Report s52 M5: references written as absolute paths into one database, run against another holding the same
    pages: the hint said `try --db work/bench/s52-user/db` (no leading /), a folder that does not exist."""
    first = make_db(isolated_env / "a").resolve()
    other = make_db(isolated_env / "b").resolve()
    inp = write_input(isolated_env / "q.csv", [
        ["Question", "Reference Document"],
        ["How do I reset the router?", str(first / "manuals/router/setup/page_001.md")]])
    with pytest.raises(RagError) as e:
        B.run_batch(inp, offline(other, isolated_env), progress=False)
    msg = str(e.value)
    assert f"hint: they exist under {first}, so try db={first}" in msg, msg
    result = CliRunner().invoke(app, ["batch", str(inp), "--db", str(other), "--provider", "offline"])
    assert result.exit_code == 1 and f"--db {first}" in " ".join(result.output.split()), result.output


def test_a_reference_that_is_a_link_out_of_the_database_is_named_so(isolated_env):
    """Report s56-sec L4: a Reference Document that is a symlink out of the database (refused, rightly) got the hint
    "they exist under ../db, so try --db ../db", the --db already given."""
    db = make_db(isolated_env / "a")
    outside = isolated_env / "outside.md"
    outside.write_text("# Secret\nOUTSIDE-CANARY\n")
    (db / "manuals/router/setup/leak.md").symlink_to(outside)
    ref = "a/database/manuals/router/setup/leak.md"
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"], ["How do I reset the router?", ref]])
    with pytest.raises(RagError) as e:
        B.run_batch(inp, offline(Path("a/database"), isolated_env), progress=False)
    msg = str(e.value)
    assert msg.endswith(f"; hint: {ref} is a symbolic link that leads out of the database, and only the pages inside "
                        "it count; nothing was asked"), msg
    assert "try --db" not in msg


def test_refused_steps_and_latency_cover_the_answered_rows_when_some_failed(isolated_env):
    """Report s54 M6: with rows that failed (an answer error), Refused, Steps and Latency were averaged over every
    row, failed ones included (Refused 1/84 where 1 of the 11 answered was refused); they cover the answered rows
    now and say how many failed rows were left out. L4: no judge ran (the lexical checks): the summary says
    `Judge model` none, as the run record's null does, not "offline"."""
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"], ["冷蔵室の温度は？"],
                                               ["How do I change the WiFi password?"], ["Where is the manual?"]])

    def answer_fn(question: str, settings, **_kw) -> Answer:
        if question.startswith(("How do I change", "Where")):  # the cluster went away: no answer
            return Answer(question=question, answer="", refused=False, steps=0, latency_ms=50_000.0,
                          error="OpenSearch at http://127.0.0.1:1 is unreachable")
        refused = question.startswith("冷蔵")
        return Answer(question=question, answer="" if refused else "Hold the reset button.", refused=refused,
                      steps=4, latency_ms=100.0)

    report = B.run_batch(inp, offline(db, isolated_env), progress=False, answer_fn=answer_fn)
    assert len(report.errors) == 2
    summary = _summary(report)
    assert summary["Answered"]["Total"] == "2" and summary["Answer errors"]["Total"] == "2"
    for metric, mean in (("Refused", 0.5), ("Steps", 4.0), ("Latency ms", 100.0)):
        row = summary[metric]
        assert float(row["Mean"]) == pytest.approx(mean) and row["Rows"] == "2", row
        assert "the 2 with an answer error left out" in row["Covers"], row
    assert summary["Judge model"]["Total"] == "none"
    assert json.loads(report.run_path.read_text(encoding="utf-8"))["judge_model"] is None


# -- the run record says what it measured (user report s55: H2/H3 record half, M1, M2, M6, M7) -----------------
def _record(report) -> dict:
    return json.loads(report.run_path.read_text(encoding="utf-8"))


def test_record_fingerprints_the_question_set_the_database_and_the_settings(isolated_env, monkeypatch):
    """The record named the input by its relative path only and not the database's content: an edited answer key
    or a grown database read as two runs differing by date. Now: questions_sha256 (same for the same questions in
    Shift_JIS, another for an edited Checklist), database pages/sha256/converter, input_path, budgets, commit."""
    from ragkit.core.provenance import ragkit_commit

    monkeypatch.setenv("RAG_EMBED", "0")
    db = make_db(isolated_env)
    rows = [HEADER, ["冷蔵室の温度は何段階で設定できますか？", "3段階", FRIDGE, "1", "3段階"],
            ["How do I reset the router?", "Hold the button", ROUTER, "1", "hold the reset button"]]
    utf8 = write_input(isolated_env / "q.csv", rows)
    sjis = write_input(isolated_env / "q_sjis.csv", rows, encoding="cp932")
    edited = write_input(isolated_env / "q_edit.csv", [*rows[:2], [*rows[2][:4], "something else entirely"]])
    settings = offline(db, isolated_env)
    a = _record(B.run_batch(utf8, settings, progress=False))
    b = _record(B.run_batch(sjis, settings, progress=False))
    c = _record(B.run_batch(edited, settings, progress=False))
    assert a["questions_sha256"] and a["questions_sha256"] == b["questions_sha256"] != c["questions_sha256"]
    assert a["input_path"] == str(utf8.resolve()) and a["input"] == str(utf8)
    assert a["database_pages"] == len(list(db.rglob("page_*.md"))) and a["database_sha256"]
    assert a["max_steps"] == settings.max_steps and a["max_tokens"] == settings.max_tokens
    assert a["embeddings"] == "off" and a["api_host"] is None and a["cached_calls"] == 0
    assert a["commit"] == ragkit_commit()
    # the database grows under the same path: the universe is another one, and the record says so
    (db / "manuals" / "router" / "setup" / "page_009.md").write_text(
        (db / ROUTER.removeprefix("database/")).read_text(encoding="utf-8"), encoding="utf-8")
    d = _record(B.run_batch(utf8, settings, progress=False))
    assert d["database_pages"] == a["database_pages"] + 1 and d["database_sha256"] != a["database_sha256"]
    assert d["database"] == a["database"] and d["questions_sha256"] == a["questions_sha256"]
    from ragkit.evaluate.runinfo import RunInfo, differing_fields

    ra, rc, rd = (RunInfo.from_json(x) for x in (a, c, d))
    # compare's `differ`: not the date alone
    assert set(differing_fields([ra, rc])) - {"date"} == {"questions_sha256"}
    assert set(differing_fields([ra, rd])) - {"date"} == {"database_sha256"}


def test_record_of_a_database_names_its_converter(isolated_env):
    from ragkit.core.provenance import converter_versions

    db = make_db(isolated_env)
    state = db / ".ragkit"
    state.mkdir(exist_ok=True)
    (state / "ingest-manifest.json").write_text(json.dumps({"sources": {"a.pdf": {"converter": 9},
                                                                        "b.pdf": {"converter": 9}}}))
    assert converter_versions(db) == 9
    (state / "ingest-manifest.json").write_text(json.dumps({"sources": {"a.pdf": {"converter": 9}, "b.pdf": {}}}))
    assert converter_versions(db) == [1, 9]  # mixed: an entry without the field is version 1


def test_older_records_without_the_new_fields_read_as_unknown_not_as_a_difference():
    from ragkit.evaluate.runinfo import RunInfo, differing_fields

    old = RunInfo.from_json({"kind": "batch", "strategy": "agent", "model": "offline", "k": 5, "date": "x"})
    new = RunInfo(kind="batch", strategy="agent", model="offline", k=5, date="y", max_steps=12, commit="a" * 40,
                  questions_sha256="q", database_sha256="d", converter=9, embeddings="off", max_tokens=60000)
    assert old.questions_sha256 is None and old.commit is None
    assert differing_fields([old, new]) == ["date"]
    assert "max_steps" in differing_fields([new, RunInfo(**{**new.to_json(), "max_steps": 1})])


def test_k_with_a_strategy_that_ignores_it_is_a_usage_error(isolated_env):
    """`rag batch --strategy naive -k 3` ran with naive's 5 hits and recorded k 5 (user report s55 M1)."""
    make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"]])
    r = CliRunner().invoke(app, ["batch", str(inp), "--provider", "offline", "--strategy", "naive", "-k", "3"])
    assert r.exit_code == 2 and "--strategy naive does not take it" in r.output
    assert not (isolated_env / "results").exists() or not list((isolated_env / "results").glob("*.csv"))
    r = CliRunner().invoke(app, ["batch", str(inp), "--provider", "offline", "--strategy", "search", "-k", "3"])
    assert r.exit_code == 0, r.output
    [res] = (isolated_env / "results").glob("q_results_*.run.json")
    assert json.loads(res.read_text())["k"] == 3


def test_eval_against_another_database_keeps_the_one_that_answered(isolated_env, monkeypatch):
    """`rag eval --db OTHER` recorded only OTHER: the answers' database was lost (user report s55 M7)."""
    import shutil
    from dataclasses import replace

    monkeypatch.setenv("RAG_EMBED", "0")
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, ["How do I reset the router?", "", ROUTER, "1", "reset"]])
    settings = offline(db, isolated_env)
    report = B.run_batch(inp, settings, progress=False)
    assert _record(run_eval(report.results_path, settings, progress=False))["answered_database"] is None
    other = isolated_env / "other"
    shutil.copytree(db, other / "database")
    monkeypatch.chdir(other)  # the references are relative to where rag runs
    shutil.copy(report.results_path, other / "r.csv")
    shutil.copy(report.run_path, other / "r.run.json")
    ev = _record(run_eval(other / "r.csv", replace(settings, db=Path("database")), progress=False))
    assert ev["answered_database"] == str(db.resolve()) and ev["database"] == str((other / "database").resolve())
    assert ev["questions_sha256"] == _record(report)["questions_sha256"]  # the same questions, re-scored


def test_a_rerun_from_the_response_cache_says_so_and_names_the_endpoint(isolated_env, scripted_server):
    """The same command twice against a model: the second run's latency and tokens came from the response cache
    (0.1 s against 129 s) and nothing said so; the endpoint was not recorded (user report s55 M6)."""
    db = make_db(isolated_env)
    q = "How do I reset the router?"
    inp = write_input(isolated_env / "q.csv", [HEADER, [q, "", ROUTER, "1", "reset"]])
    scripted_server.set_responder(agent_responder({q: ("Hold the reset button.", [ROUTER.removeprefix(
        "database/")])}, judge=checklist_judge()))
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results", cache=True,
                               cache_dir=isolated_env / "cache")
    first = B.run_batch(inp, settings, strategy="naive", progress=False)
    sent = len(scripted_server.requests)
    second = B.run_batch(inp, settings, strategy="naive", progress=False)
    assert len(scripted_server.requests) == sent  # every call replayed
    one, two = _record(first), _record(second)
    assert one["cached_calls"] == 0 and two["cached_calls"] == sent
    host = scripted_server.base_url.removesuffix("/v1")
    assert one["api_host"] == two["api_host"] == host
    note = f"{sent} of {sent} calls from the cache: latency and tokens are not a measurement"
    assert note in two["notes"] and not any("from the cache" in n for n in one["notes"])
    summary = read_csv(second.summary_path).to_dict("records")
    assert {"Metric": "Note", "Total": note} in [{"Metric": r["Metric"], "Total": r["Total"]} for r in summary]
