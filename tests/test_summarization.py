"""Summarization tasks: ROUGE-2 and word count (offline, Japanese too), G-Eval parsing and its criteria cache
(the real openai client against the scripted server), batch rows with a Task column, their summary section and
report section."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from fakeserver import openai_settings
from test_tools import make_db
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.config import Settings
from ragkit.evaluate import batch as B
from ragkit.evaluate.judges.geval import CRITERIA_FILE, parse_criteria, parse_score
from ragkit.evaluate.rouge import rouge2_f1, rouge_tokens, word_count

RESET_REF = "database/manuals/router/setup/page_003.md"
FIRMWARE_REF = "database/manuals/router/setup/page_004.md"
REFERENCE = "Hold the RESET button for 10 seconds until the LED blinks orange. Update the firmware from the admin page."
REQUEST = "Summarise how to reset and update the router."


@pytest.fixture(autouse=True)
def keyword_only_index(monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")


@pytest.fixture
def db(isolated_env) -> Path:
    return make_db(isolated_env)


def write_csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False, encoding="utf-8")
    return path


# -- ROUGE-2 and word count --------------------------------------------------------------------------------
def test_rouge2_f1_by_hand_and_for_japanese():
    # bigrams: cand {the cat, cat sat, sat on, on the, the mat}, ref {the cat, cat lay, lay on, on the, the mat}
    assert rouge2_f1("The cat sat on the mat.", "the cat lay on the mat") == pytest.approx(0.6)
    assert rouge2_f1("the mat", "the cat lay on the mat") == pytest.approx(2 * (1 / 5) * 1 / (1 / 5 + 1))
    # counts are clipped: repeating a bigram does not raise the score past the reference's count
    assert rouge2_f1("the cat the cat the cat", "the cat") == pytest.approx(2 * 1 * (1 / 5) / (1 + 1 / 5))
    # Japanese: one token per character, so a summary without spaces is measured
    assert rouge_tokens("冷蔵室は約2℃") == ["冷", "蔵", "室", "は", "約", "2", "c"]
    assert rouge2_f1("冷蔵室は約2℃です", "冷蔵室の温度は約2℃") > 0.4
    assert rouge2_f1("製氷機", "冷蔵室") == 0.0
    assert rouge2_f1("anything", "one") is None  # no reference bigram: undefined, not 0
    assert word_count("Passwords need 14 characters, don't reuse them.") == 7
    assert word_count("製氷皿の水を毎日交換") == 10


# -- G-Eval parsing ------------------------------------------------------------------------------------------
def test_geval_reply_parsing():
    good = {"criteria": [{"name": f"C{i}", "description": "d"} for i in range(5)]}
    assert [c.name for c in parse_criteria(good)] == ["C0", "C1", "C2", "C3", "C4"]
    with pytest.raises(ValueError, match="exactly 5"):
        parse_criteria({"criteria": good["criteria"][:4]})
    score, reasoning, codes = parse_score({"criteria": [{"name": "Numbers", "reasoning": "the 10 s\nmatch"}],
                                           "score": "2", "error_codes": ["h", "N", "XX", "N"]})
    assert (score, reasoning, codes) == (2, "Numbers: the 10 s match", ["H", "N"])
    # codes are for scores under 3 only
    assert parse_score({"score": 4, "error_codes": ["O"]})[2] == []
    assert parse_score({"score": 1, "error_codes": "O; V"})[2] == ["O", "V"]
    for bad in (0, 6, 3.5, "five", None, True):
        with pytest.raises(ValueError, match="integer from 1 to 5"):
            parse_score({"score": bad})


# -- batch: offline -------------------------------------------------------------------------------------------
def test_offline_batch_scores_summaries_with_rouge_and_page_recall(db, isolated_env):
    inp = write_csv(isolated_env / "tasks.csv", [
        {"Question": "How long do I hold the RESET button?", "Task": "", "Reference Summary": "",
         "Reference Document": RESET_REF},
        {"Question": REQUEST, "Task": "summarization", "Reference Summary": REFERENCE,
         "Reference Document": f"{RESET_REF}\n{FIRMWARE_REF}"},
    ])
    settings = Settings(db=db, results=isolated_env / "results", provider="offline", model="offline",
                        judge_model="offline")
    report = B.run_batch(inp, settings, strategy="arag", progress=False)
    assert not report.errors
    qa, summ = report.rows
    assert qa["ROUGE-2 F1"] == "" and qa["G-Eval Faithfulness"] == ""  # a qa row is not a summary
    assert 0 < float(summ["ROUGE-2 F1"]) < 1 and int(summ["Word Count"]) > 5
    assert summ["G-Eval Faithfulness"] == summ["G-Eval Coverage"] == "not measured"
    assert float(summ["Ref Recall"]) > 0 and summ["Ref Precision"] != ""
    assert "ROUGE-2 F1" in summ["Evaluation Reason"] and "G-Eval not measured" in summ["Evaluation Reason"]
    by = {r["Metric"]: r for r in report.summary}
    assert by["Summarization ROUGE-2 F1"]["Rows"] == 1 and by["Summarization ROUGE-2 F1"]["Covers"] == "summarization"
    assert by["Summarization Page Recall"]["Mean"] == float(summ["Ref Recall"])
    assert by["Summarization G-Eval"]["Total"] == "not measured"
    assert by["Ref Recall"]["Rows"] == 1  # the QA metrics cover the qa row only
    cols = list(pd.read_csv(report.results_path, encoding="utf-8-sig").columns)
    assert cols.index("ROUGE-2 F1") > cols.index("LLM Accuracy") and "G-Eval Error Codes" in cols
    # rag report gives them their own section
    r = CliRunner().invoke(app, ["report", str(report.results_path), "-o", str(isolated_env / "r.html")])
    assert r.exit_code == 0, r.output
    html = (isolated_env / "r.html").read_text(encoding="utf-8")
    assert '<section id="summarization">' in html and "ROUGE-2 F1" in html


def test_a_bad_task_is_one_line_naming_row_and_column(db, isolated_env):
    write_csv(isolated_env / "bad.csv", [{"Question": "q1", "Task": "qa"}, {"Question": "q2", "Task": "summary"}])
    r = CliRunner().invoke(app, ["batch", "bad.csv"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "bad.csv: row 3, column 'Task': 'summary' is not a task (qa or summarization" in " ".join(r.output.split())


# -- batch: G-Eval against the scripted server ------------------------------------------------------------------
SUMMARY = json.dumps({"answer": "Hold RESET for 10 seconds; the LED blinks orange. Update the firmware at 192.168.0.1.",
                      "sources": ["manuals/router/setup/page_003.md", "manuals/router/setup/page_004.md"],
                      "refused": False})


def _responder(scores: dict[str, dict]):
    def respond(body: dict) -> dict:
        system = body["messages"][0]["content"]
        if "You design evaluation criteria" in system:
            dim = "faithfulness" if "faithfulness of a query-focused" in system else "coverage"
            return {"content": json.dumps({"criteria": [{"name": f"{dim} {i}", "description": "check"}
                                                        for i in range(1, 6)]})}
        if "You evaluate the faithfulness" in system:
            return {"content": json.dumps(scores["faithfulness"])}
        if "You evaluate the coverage" in system:
            return {"content": json.dumps(scores["coverage"])}
        return {"content": SUMMARY}  # the answer (naive: one call)
    return respond


def test_geval_scores_and_caches_its_criteria_in_the_results_folder(db, isolated_env, scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.set_responder(_responder({
        "faithfulness": {"criteria": [{"name": "faithfulness 1", "reasoning": "all stated"}], "score": 5,
                         "error_codes": ["H"]},
        "coverage": {"criteria": [{"name": "coverage 1", "reasoning": "omits the password"}], "score": 2,
                     "error_codes": ["O", "ZZ"]}}))
    inp = write_csv(isolated_env / "tasks.csv", [
        {"Question": REQUEST, "Task": "summarization", "Reference Summary": REFERENCE,
         "Reference Document": f"{RESET_REF}\n{FIRMWARE_REF}"}])
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results", workers=1)
    report = B.run_batch(inp, settings, strategy="naive", progress=False)
    assert not report.errors, report.errors
    row = report.rows[0]
    assert row["G-Eval Faithfulness"] == 5 and row["G-Eval Coverage"] == 2
    assert row["G-Eval Error Codes"] == "O"  # H came with a score of 5; ZZ is no code of the taxonomy
    assert row["G-Eval Coverage Reasoning"] == "coverage 1: omits the password"
    assert float(row["Ref Recall"]) == 1.0 and float(row["ROUGE-2 F1"]) > 0
    assert "faithfulness 5/5, coverage 2/5, errors O" in row["Evaluation Reason"]
    cache = json.loads((isolated_env / "results" / CRITERIA_FILE).read_text(encoding="utf-8"))
    assert set(cache) == {"faithfulness|gpt-4o-mini", "coverage|gpt-4o-mini"}
    assert [c["name"] for c in cache["coverage|gpt-4o-mini"]] == [f"coverage {i}" for i in range(1, 6)]
    # the material: the summary's cited pages for faithfulness, the reference summary for coverage
    scored = [r for r in scripted_server.requests if "You evaluate" in r["messages"][0]["content"]]
    assert "Hold the RESET button for 10 seconds" in scored[0]["messages"][1]["content"]
    assert "Reference summary:\n" + REFERENCE in scored[1]["messages"][1]["content"]
    assert "5. coverage 5: check" in scored[1]["messages"][0]["content"]
    by = {r["Metric"]: r for r in report.summary}
    assert by["Summarization G-Eval Coverage"]["Mean"] == 2.0 and "Summarization G-Eval" not in by

    # a second run into the same results folder writes no criteria again: they come from the cache
    from ragkit.evaluate import summarization as S

    S._GEVALS.clear()  # a new process would start with none in memory
    before = len(scripted_server.requests)
    write_csv(isolated_env / "tasks2.csv", [
        {"Question": REQUEST + " Briefly.", "Task": "summarization", "Reference Summary": REFERENCE,
         "Reference Document": RESET_REF}])
    report = B.run_batch(isolated_env / "tasks2.csv", settings, strategy="naive", progress=False)
    new = scripted_server.requests[before:]
    assert not any("You design evaluation criteria" in r["messages"][0]["content"] for r in new)
    assert len(new) == 3 and report.rows[0]["G-Eval Faithfulness"] == 5


def test_a_judge_that_never_gives_a_score_is_a_judge_error_not_a_lost_summary(db, isolated_env, scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.set_responder(_responder({"faithfulness": {"score": 9}, "coverage": {"score": "n/a"}}))
    inp = write_csv(isolated_env / "tasks.csv", [
        {"Question": REQUEST, "Task": "summarization", "Reference Document": RESET_REF}])
    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results", workers=1)
    report = B.run_batch(inp, settings, strategy="naive", progress=False)
    row = report.rows[0]
    assert row["RAG Answer"].startswith("Hold RESET") and row["G-Eval Faithfulness"] == ""
    assert "G-Eval faithfulness failed" in row["Judge Error"] and "integer from 1 to 5" in row["Judge Error"]
    assert row["ROUGE-2 F1"] == ""  # no reference summary: undefined


# -- rag genqa --task summarization ------------------------------------------------------------------------------
def test_genqa_writes_summarization_items_offline_that_batch_reads(db, isolated_env):
    r = CliRunner().invoke(app, ["genqa", "database", "--task", "summarization", "--max", "3"])
    assert r.exit_code == 0, r.output
    path = next((isolated_env / "results").glob("database_summaries_*.csv"))
    df = pd.read_csv(path, encoding="utf-8-sig", keep_default_na=False)
    assert list(df.columns)[:5] == ["Question", "Task", "Reference Summary", "Reference Document", "Page"]
    assert len(df) >= 1 and set(df["Task"]) == {"summarization"}
    router = df[df["Question"].str.contains("Router Guide")].iloc[0]
    assert router["Question"].startswith("Summarise what Router Guide says about Setup (pages 3-4)")
    # the extractive reference is the pages' own leading sentences, and it names both pages
    assert "Hold the RESET button for 10 seconds" in router["Reference Summary"]
    assert router["Reference Document"].splitlines() == [RESET_REF, FIRMWARE_REF] and router["Page"] == "3\n4"
    # the file is a question CSV rag batch scores as summarization rows
    r = CliRunner().invoke(app, ["batch", str(path), "--strategy", "naive"])
    assert r.exit_code == 0, r.output
    # named as in the summary CSV, and G-Eval "not measured" as the CSV says (user report s55 M5)
    assert "Summarization ROUGE-2 F1" in r.output and "Summary ROUGE-2 F1" not in r.output
    geval = next(x for x in r.output.splitlines() if "Summarization G-Eval" in x)
    assert "not measured" in geval
    assert CliRunner().invoke(app, ["genqa", "database", "--task", "essay"]).exit_code == 2


def test_genqa_summarization_with_a_model(db, isolated_env, scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.set_responder(lambda body: {"content": json.dumps({
        "request": "How are the router reset and firmware update done?",
        "summary": "Hold RESET for 10 seconds until the LED blinks orange; update the firmware at 192.168.0.1."})})
    from ragkit.genqa import generate_questions

    settings = openai_settings(scripted_server, db=db, results=isolated_env / "results")
    report = generate_questions(db, settings, max_questions=2, task="summarization", progress=False)
    assert not report.errors and len(report.questions) == 2 and report.usage.calls >= 2
    first = scripted_server.requests[0]["messages"]
    assert "reference summary of about 150 words" in " ".join(first[0]["content"].split())
    assert "=== database/" in first[1]["content"]
    df = pd.read_csv(report.path, encoding="utf-8-sig", keep_default_na=False)
    assert df.loc[0, "Question"] == "How are the router reset and firmware update done?"
    assert df.loc[0, "Reference Summary"].startswith("Hold RESET") and df.loc[0, "Reference Document"]


def test_offline_request_names_a_heading_not_a_page_range_folder():
    from ragkit.genqa.common import PageInfo
    from ragkit.genqa.summaries import offline_item

    body = "# Battery care\n\nCharge the watch for two hours before its first use. Keep the charger contacts dry."
    group = [PageInfo(rel=f"pdfs/watch/pages_011-020/page_01{n}.md", page=10 + n, doc="watch.pdf",
                      doc_title="Watch Manual", section="pages_011-020", body=body if n == 4 else "Plain text page "
                      "with a sentence long enough to be quoted in a reference summary.", lang="en")
             for n in (4, 5)]
    item = offline_item(group)
    assert item is not None
    assert item.question.startswith("Summarise what Watch Manual says about Battery care (pages 14-15)")
    assert "pages_011" not in item.question
    one = [PageInfo(rel="pdfs/watch/page_021/page_021.md", page=21, doc="watch.pdf", doc_title="Watch Manual",
                    section="page_021", body=body, lang="en")]  # a range of one page
    item = offline_item(one)
    assert item is not None and "page_021" not in item.question, item
