"""Runs that say what they are: every results file has a `<results>.run.json` (batch and eval), compare and
report label runs by what differs, judge columns separate what a judge measured from refusals passed by rule,
and offline genqa's checklists answered offline carry their caveat. Driven through the CLI on the sample corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import browser  # noqa: F401 - the pytest fixture
from typer.testing import CliRunner

from ragkit import __version__
from ragkit.cli import app
from ragkit.core.csvio import read_csv
from ragkit.evaluate.runinfo import QUOTING_NOTE, RunInfo, read_run_info, run_info_path, run_labels
from ragkit.evaluate.runs import load_run, load_runs

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def cli(*args: str):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


def batch(strategy: str) -> Path:
    r = cli("batch", str(EXAMPLES / "questions.csv"), "--provider", "offline", "--strategy", strategy,
            "--workers", "2")
    [line] = [x for x in r.stdout.splitlines() if x.startswith("results: ")]
    assert f"run record: {run_info_path(line.removeprefix('results: '))}" in r.stdout
    return Path(line.removeprefix("results: "))


@pytest.fixture
def two_runs(sample_db_copy) -> tuple[Path, Path]:
    return batch("agent"), batch("longctx")


def test_a_batch_writes_its_run_record_and_separates_rule_from_judge(two_runs, sample_db_copy):
    agent, longctx = two_runs
    info = read_run_info(agent)
    assert run_info_path(agent) == agent.with_name(agent.stem + ".run.json") and run_info_path(agent).is_file()
    assert (info.kind, info.strategy, info.provider, info.model) == ("batch", "agent", "offline", "offline")
    # the agent fills no context up to a budget: no context tokens in its record (only longctx's)
    assert info.judge_model is None and info.k == 5 and info.context_tokens is None
    assert read_run_info(longctx).context_tokens == 32_000
    assert info.version == __version__ and info.database == str(sample_db_copy.resolve())
    assert info.date and info.engine == "offline-extractive" and info.questions == 18
    assert read_run_info(longctx).strategy == "longctx" and read_run_info(longctx).k is None
    df = read_csv(agent)
    unanswerable = df[df["Reference Document"] == ""]
    refused = unanswerable[unanswerable["Refused"] == "True"]
    assert len(refused) >= 1 and set(refused["Judged By"]) == {"rule"}
    assert set(df[df["Reference Document"] != ""]["Judged By"]) == {""}  # offline: no judge measured them
    assert df["Confidence"].map(lambda v: 0.0 <= float(v) <= 1.0).all()
    summary = {r["Metric"]: r for r in read_csv(agent.with_name(agent.stem + "_summary.csv")).to_dict("records")}
    # the refusals passed by rule are counted apart; no judge measured anything else: not a 1.000 measurement
    assert summary["Passed by rule"]["Total"] == str(len(refused))
    for m in ("Judge Overall", "Judge Passed", "LLM Accuracy"):
        assert summary[m]["Mean"] == "" and summary[m]["Rows"] == "0"
        assert summary[m]["Covers"] == "not measured (no judge)"
    assert summary["Strategy"]["Total"] == "agent" and summary["k"]["Total"] == "5"
    # which backend searched (report s54 M2): the record and the summary name it
    assert info.index == "embedded" and summary["Index"]["Total"] == "embedded"


def test_compare_labels_the_runs_by_what_differs_and_shows_their_records(two_runs):
    agent, longctx = two_runs
    out = cli("compare", str(agent), str(longctx)).stdout
    assert out.splitlines()[0].startswith("old: agent · offline  (") and agent.name in out.splitlines()[0]
    assert out.splitlines()[2].startswith("new: longctx · offline  (")
    old_line, new_line = out.splitlines()[1], out.splitlines()[3]
    assert old_line.startswith("     strategy agent, provider offline, model offline, judge –, k 5, ragkit ")
    assert "context tokens" not in old_line and "context tokens 32000" in new_line
    # each run's code, pages and questions, short as in labels (ops s57 L4)
    rec = read_run_info(agent)
    assert old_line.endswith(f", pages {rec.database_sha256[:8]}, questions {rec.questions_sha256[:8]}")
    assert rec.commit is None or f", commit {rec.commit[:8]}" in old_line
    assert "Judge Overall: not measured in agent · offline and longctx · offline" in out
    assert "\nJudge Overall " not in out  # no row of figures for it
    doc = json.loads(cli("compare", str(agent), str(longctx), "--format", "json").stdout)
    assert doc["old_label"] == "agent · offline" and doc["new_run"]["strategy"] == "longctx"
    # the date (to the second) differs too, unless both runs ended in the same second
    dated = ["date"] if read_run_info(agent).date != read_run_info(longctx).date else []
    assert doc["differ"] == ["strategy", "k", *dated] and "Judge Overall" in doc["not_measured"]
    md = cli("compare", str(agent), str(longctx), "--format", "markdown").stdout
    assert md.startswith("### rag compare: agent · offline → longctx · offline")


def test_eval_records_who_answered_from_the_record_of_what_it_rescored(two_runs, isolated_env):
    agent, _ = two_runs
    r = cli("eval", str(agent), "--provider", "offline")
    [line] = [x for x in r.stdout.splitlines() if x.startswith("results: ")]
    info = read_run_info(line.removeprefix("results: "))
    assert (info.kind, info.strategy, info.model, info.k) == ("eval", "agent", "offline", 5)
    assert info.input == str(agent)
    # a results file without a record: its eval says so, and compare/report fall back to the file name
    bare = isolated_env / "old_results.csv"
    bare.write_bytes(agent.read_bytes())
    r = cli("eval", str(bare), "--provider", "offline")
    [line] = [x for x in r.stdout.splitlines() if x.startswith("results: ")]
    again = read_run_info(line.removeprefix("results: "))
    assert again.strategy is None and any("no run record" in n for n in again.notes)
    assert "note: old_results.csv has no run record: who answered it is unknown" in r.stdout
    assert load_runs([bare, agent])[0].name == "old_results"


def test_labels_say_what_differs_and_stay_unique():
    a = RunInfo(strategy="agent", model="qwen2.5-coder-1.5b", provider="openai", k=5, date="2026-11-25T10:00")
    b = RunInfo(strategy="longctx", model="qwen2.5-coder-1.5b", provider="openai", k=None, date="2026-11-25T11:00")
    assert run_labels([a, b], ["x", "y"]) == ["agent · qwen2.5-coder-1.5b", "longctx · qwen2.5-coder-1.5b"]
    c = RunInfo(strategy="agent", model="gpt-4o-mini", provider="openai", judge_model="gpt-4o", k=5,
                date="2026-11-25T12:00")
    assert run_labels([a, c], ["x", "y"]) == ["agent · qwen2.5-coder-1.5b · no judge model",
                                              "agent · gpt-4o-mini · judge gpt-4o"]
    same = RunInfo(strategy="agent", model="m", date="2026-11-25T09:00:00+00:00")
    later = RunInfo(strategy="agent", model="m", date="2026-11-25T10:30:00+00:00")
    assert run_labels([same, later], ["x", "y"]) == ["agent · m · 2026-11-25 09:00", "agent · m · 2026-11-25 10:30"]
    assert run_labels([same, same], ["x", "y"]) == ["agent · m · 2026-11-25 09:00", "agent · m · 2026-11-25 09:00 #2"]
    assert run_labels([None, a], ["old_results", "y"]) == ["old_results", "agent · qwen2.5-coder-1.5b"]


def test_offline_genqa_then_offline_batch_says_checklist_recall_measures_quoting(sample_db_copy, isolated_env):
    r = cli("genqa", "database", "--provider", "offline", "--max", "6")
    [line] = [x for x in r.stdout.splitlines() if "questions_" in x and x.strip().endswith(".csv")]
    questions = Path(line.split()[-1])
    assert set(read_csv(questions)["Generated By"]) == {"offline genqa"}
    r = cli("batch", str(questions), "--provider", "offline", "--workers", "2")
    assert "note: Checklist Recall measures quoting, not answering" in r.stdout
    [line] = [x for x in r.stdout.splitlines() if x.startswith("results: ")]
    results = Path(line.removeprefix("results: "))
    info = read_run_info(results)
    assert info.checklists_by == "offline genqa" and info.notes == [QUOTING_NOTE]
    summary = read_csv(results.with_name(results.stem + "_summary.csv"))
    assert QUOTING_NOTE in set(summary[summary["Metric"] == "Note"]["Total"])
    # answered by a model (not the offline engine), the same checklists carry no such note
    assert read_run_info(batch("agent")).notes == []


def test_old_results_without_judged_by_infer_the_rule_rows(two_runs, isolated_env):
    agent, _ = two_runs
    df = read_csv(agent).drop(columns=["Judged By"])
    old = isolated_env / "older_results.csv"
    df.to_csv(old, index=False)
    run = load_run(old)
    assert run.passed_by_rule("Judge Overall") >= 1 and run.values("Judge Overall") == []


def test_report_of_two_runs_labelled_by_what_differs_in_headless_chromium(two_runs, isolated_env,
                                                                          browser):  # noqa: F811
    agent, longctx = two_runs
    out = isolated_env / "report.html"
    cli("report", str(agent), str(longctx), "-o", str(out))
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.resolve().as_uri())
    page.wait_for_load_state("load")
    assert errors == []
    runs = page.locator("#runs").inner_text()
    assert "agent · offline" in runs and "longctx · offline" in runs and "32000" in runs
    assert page.locator("#runs td.differs").count() >= 2  # strategy (and date) marked as what differs
    head = page.locator("#headline tr").first.inner_text()
    assert "agent · offline" in head and "longctx · offline" in head and agent.stem not in head
    overall = page.locator("#headline tr", has_text="Judge Overall").inner_text()
    assert "not measured" in overall and "passed by rule (" in overall and "1.000" not in overall
    # confidence against correctness: both runs have a Confidence column and reference pages
    assert page.locator("#calibration svg.rel circle").count() >= 2
    cal = page.locator("#calibration").inner_text()
    assert "a right page cited" in cal and "expected calibration error" in cal
    assert "longctx · offline against agent · offline" in page.locator("#wins").inner_text()
    page.close()


def test_a_batch_says_how_many_refusals_asked_which_document_was_meant(sample_db_copy, isolated_env):
    """この資料で説明されている製品は何ですか？ names no document, and the refrigerator manual and the product
    briefing both hold its words: the offline engine refuses it and names them, and the run says so."""
    from ragkit.evaluate.runinfo import which_document_note

    csv = isolated_env / "q.csv"
    csv.write_text("Question\nこの資料で説明されている製品は何ですか？\n冷蔵室の温度設定を「強」にすると、庫内はだいたい何度になりますか？\n",
                   encoding="utf-8")
    r = cli("batch", str(csv), "--provider", "offline", "--workers", "2")
    note = which_document_note(1)
    assert f"note: {note}" in " ".join(r.stdout.split())
    [line] = [x for x in r.stdout.splitlines() if x.startswith("results: ")]
    results = Path(line.removeprefix("results: "))
    assert read_run_info(results).notes == [note]
    summary = read_csv(results.with_name(results.stem + "_summary.csv"))
    assert note in set(summary[summary["Metric"] == "Note"]["Total"])
    answers = read_csv(results)
    assert list(answers["Refused"]) == ["True", "False"]


def test_runs_that_differ_only_by_backend_are_labelled_by_it_and_older_records_read_as_before():
    """Report s54 M2: a before/after-migration pair (the same folder, embedded then OpenSearch) had the same label
    and record line; the index tells them apart now. A record written before the field (None) is unknown, not
    different: it reads as before."""
    from ragkit.reports.compare import run_line

    os_label = "opensearch http://127.0.0.1:9200/team (analysis ragkit)"
    a = RunInfo(strategy="agent", model="offline", database="/db", index="embedded", date="2026-11-27T14:46:00")
    b = RunInfo(strategy="agent", model="offline", database="/db", index=os_label, date="2026-11-27T14:47:00")
    assert run_labels([a, b], ["x", "y"]) == ["agent · offline · index embedded", f"agent · offline · index {os_label}"]
    assert f"index {os_label}" in run_line(b)
    old = RunInfo.from_json({"strategy": "agent", "model": "offline", "database": "/db", "date": "2026-11-27T14:40"})
    assert old.index is None and "index" not in run_line(old)
    assert run_labels([old, a], ["x", "y"]) == ["agent · offline · 2026-11-27 14:40", "agent · offline · 2026-11-27 14:46"]
