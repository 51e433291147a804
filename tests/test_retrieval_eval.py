"""`rag batch --strategy search`: retrieval alone, ranking metrics per row and in the summary, no model."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
from fakeserver import openai_settings
from pagetree import write_pages
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.config import Settings
from ragkit.evaluate.batch import run_batch
from ragkit.evaluate.rankmetrics import rank_metrics

PAGES = {
    "manuals/router/setup/page_001.md": ("Router Guide", "Setup", 1,
                                         "# Resetting the router\nHold the reset button for 10 seconds."),
    "manuals/router/wifi/page_002.md": ("Router Guide", "WiFi", 2,
                                        "# Changing the WiFi password\nOpen the admin page, choose Security."),
    "manuals/router/power/page_003.md": ("Router Guide", "Power", 3,
                                         "# Power supply\nUse only the power adapter in the box."),
    "manuals/fridge/ice/page_004.md": ("Fridge", "Ice", 4, "# Ice maker\nClean the ice maker tank weekly."),
}
SETUP, WIFI, POWER, ICE = (f"database/{r}" for r in PAGES)


@pytest.fixture(autouse=True)
def keyword_only(monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")


# -- the metrics ----------------------------------------------------------------------------------------
def test_rank_metrics_count_each_required_page_once_at_its_best_rank():
    ranked = ["x.md", "b.md", "a_copy.md", "a.md", "c.md"]
    m = rank_metrics("a.md|a_copy.md\nb.md\nz.md", ranked, k=3)
    assert m["Recall@k"] == pytest.approx(2 / 3)  # a (through its copy) and b among the first 3; z missing
    assert m["Hit@k"] == 1.0
    assert m["MRR"] == pytest.approx(1 / 2)  # b at rank 2
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # 3 groups, k = 3
    assert m["nDCG@k"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)


def test_rank_metrics_beyond_k_and_without_required_pages():
    m = rank_metrics("c.md", ["a.md", "b.md", "c.md"], k=2)
    assert m == {"Recall@k": 0.0, "Hit@k": 0.0, "MRR": 0.0, "nDCG@k": 0.0}
    assert rank_metrics("", ["a.md"], k=5) == {"Recall@k": None, "Hit@k": None, "MRR": None, "nDCG@k": None}
    assert rank_metrics("./a.md", ["a.md"], k=1)["nDCG@k"] == 1.0  # paths compared in normalised form


# -- the batch strategy ---------------------------------------------------------------------------------
def _csv(path: Path, rows: list[list[str]]) -> Path:
    buf = io.StringIO()
    csv.writer(buf).writerows([["Question", "Ground Truth", "Reference Document"], *rows])
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_batch_search_ranks_pages_and_scores_them_without_any_model(tmp_path, scripted_server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = write_pages(tmp_path / "database", PAGES, source="x.pdf")
    q = _csv(tmp_path / "q.csv", [
        ["How do I reset the router with the reset button?", "hold 10 s", SETUP],
        ["How do I change the WiFi password?", "admin page", f"{WIFI}\n{POWER}"],
        ["What is the capital of France?", "", ""],
    ])
    # a real openai provider whose server has nothing scripted: any model call would fail the row
    settings = openai_settings(scripted_server, db=db, results=tmp_path / "results", workers=2)
    report = run_batch(q, settings, strategy="search", k=2, progress=False)
    assert report.errors == [] and scripted_server.requests == []
    rows = {r["Question"][:10]: r for r in report.rows}
    reset, wifi, france = rows["How do I r"], rows["How do I c"], rows["What is th"]
    assert reset["Retrieved Files"].split("\n")[0] == SETUP and len(reset["Retrieved Files"].split("\n")) <= 2
    assert float(reset["Ref MRR"]) == 1.0 and float(reset["Ref Recall@k"]) == 1.0
    assert wifi["Retrieved Files"].split("\n")[0] == WIFI
    assert float(wifi["Ref Hit@k"]) == 1.0
    # two required pages: recall@2 is 1/2 unless the power page is second; nDCG says where it stands
    assert float(wifi["Ref Recall@k"]) in (0.5, 1.0)
    assert france["Ref MRR"] == "" and france["Ref nDCG@k"] == ""  # no required page: undefined, empty
    assert reset["RAG Answer"] == "" and reset["Judge Overall"] == "" and reset["Input Tokens"] in (0, "0")
    summary = {r["Metric"]: r for r in report.summary}
    assert float(summary["Ref MRR"]["Mean"]) == pytest.approx((1.0 + float(wifi["Ref MRR"])) / 2)
    assert summary["Ref nDCG@k"]["Rows"] in (2, "2")
    assert summary["Strategy"]["Total"] == "search" and summary["k"]["Total"] == 2  # one label, k its own row
    header = next(csv.reader(io.StringIO(report.results_path.read_text(encoding="utf-8-sig"))))
    assert header.index("Ref Recall@k") > header.index("Ref Accuracy")


def test_cli_batch_strategy_search_and_k(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_pages(tmp_path / "database", PAGES, source="x.pdf")
    q = _csv(tmp_path / "q.csv", [["Ice maker tank cleaning", "weekly", ICE]])
    res = CliRunner().invoke(app, ["batch", str(q), "--strategy", "search", "-k", "1"])
    assert res.exit_code == 0, res.output
    out = [p for p in sorted((tmp_path / "results").glob("q_results_*.csv")) if "_summary" not in p.name]
    text = out[-1].read_text(encoding="utf-8-sig")
    assert ICE in text and POWER not in text  # -k 1: one page
    res = CliRunner().invoke(app, ["batch", str(q), "--strategy", "search", "-k", "0"])
    assert res.exit_code == 2
    res = CliRunner().invoke(app, ["batch", str(q), "--strategy", "nearest"])
    assert res.exit_code == 2 and "search" in res.output


def test_a_retrieval_only_run_reports_retrieval_figures_only_and_compare_lists_no_answer_metric(tmp_path, monkeypatch):
    """Report s52 L4: `--strategy search` reported "Refused, unanswerable 0.000", Refused/Confidence/Steps of 0 and
    the offline checklist note for a run that answered nothing, and `rag compare` listed "Refused 0.417 -> 0.000"."""
    from ragkit.reports.compare import compare_files

    monkeypatch.chdir(tmp_path)
    write_pages(tmp_path / "database", PAGES, source="x.pdf")
    q = tmp_path / "q.csv"
    q.write_text("Question,Ground Truth,Reference Document,Checklist,Generated By\n"
                 f"How do I reset the router?,Hold the reset button for 10 seconds.,{SETUP},"
                 "Hold the reset button for 10 seconds.,offline genqa\n"
                 "What is the capital of France?,,,,offline genqa\n", encoding="utf-8")
    agent = CliRunner().invoke(app, ["batch", str(q), "--provider", "offline", "--print-path"])
    res = CliRunner().invoke(app, ["batch", str(q), "--strategy", "search", "--provider", "offline"])
    assert agent.exit_code == 0 and res.exit_code == 0, agent.output + res.output
    assert "Refused" not in res.output and "Checklist" not in res.output and "Ref Recall" in res.output
    results = [p for p in sorted((tmp_path / "results").glob("q_results_*.csv")) if "_summary" not in p.name]
    old, new = results
    rows = list(csv.DictReader(io.StringIO(new.read_text(encoding="utf-8-sig"))))
    assert all(r[c] == "" for r in rows for c in ("Refused", "Confidence", "Steps"))  # nothing answered
    summary = list(csv.DictReader(io.StringIO(new.with_name(new.stem + "_summary.csv").read_text(
        encoding="utf-8-sig"))))
    metrics = [r["Metric"] for r in summary if r["Rows"] != ""]
    assert metrics and all(m.startswith("Ref ") or m == "Latency ms" for m in metrics), metrics
    assert not [r for r in summary if r["Metric"] == "Note"]
    listed = {m.metric for m in compare_files(old, new).metrics}
    assert "Ref Recall" in listed and not listed & {"Refused", "Confidence", "Checklist Recall"}, listed
    # a search run written before its answer columns were left empty held Refused False and Confidence 0
    for r in rows:
        r.update(Refused="False", Confidence="0.0", Steps="0")
    with new.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    listed = {m.metric for m in compare_files(old, new).metrics}
    assert "Ref Recall" in listed and not listed & {"Refused", "Confidence"}, listed


def test_a_retrieval_only_run_names_no_model_or_judge_and_its_eval_and_compare_stay_retrieval_only(tmp_path,
                                                                                                   monkeypatch):
    """A `--strategy search` run's summary still had Answered, Answer/Judge errors, tokens and cost, Provider,
    Model, Judge model and Context tokens rows, and its run record named the --provider's model and judge, which
    it never asked: `rag compare` labelled it "search · gpt-4o-mini". `rag eval` of its results lost its ranking
    figures (Ref MRR...) and would judge the answers it never had."""
    import json

    from ragkit.reports.compare import compare_files, format_text

    monkeypatch.chdir(tmp_path)
    write_pages(tmp_path / "database", PAGES, source="x.pdf")
    q = _csv(tmp_path / "q.csv", [["How do I reset the router with the reset button?", "hold 10 s", SETUP],
                                  ["What is the capital of France?", "", ""]])
    agent = CliRunner().invoke(app, ["batch", str(q), "--provider", "offline"])
    res = CliRunner().invoke(app, ["batch", str(q), "--strategy", "search", "--provider", "offline"])
    assert agent.exit_code == 0 and res.exit_code == 0, agent.output + res.output
    assert "retrieval only: no model calls" in res.output
    old, new = [p for p in sorted((tmp_path / "results").glob("q_results_*.csv")) if "_summary" not in p.name]
    answer_rows = {"Answered", "Answer errors", "Judge errors", "Answer input tokens", "Answer cost (USD)",
                   "Judge input tokens", "Judge cost (USD)", "Provider", "Model", "Judge model", "Context tokens"}

    def summary_of(results: Path) -> dict[str, dict]:
        text = results.with_name(results.stem + "_summary.csv").read_text(encoding="utf-8-sig")
        return {r["Metric"]: r for r in csv.DictReader(io.StringIO(text))}

    # an answering run has them all (Context tokens: longctx's budget only, not the agent's)
    assert answer_rows - {"Context tokens"} <= set(summary_of(old)) and "Context tokens" not in summary_of(old)
    summary = summary_of(new)
    assert not answer_rows & set(summary), sorted(answer_rows & set(summary))
    assert summary["Strategy"]["Total"] == "search" and summary["k"]["Total"] == "10"
    assert summary["Errors"]["Total"] == "0"
    record = json.loads(new.with_name(new.stem + ".run.json").read_text(encoding="utf-8"))
    assert {record[f] for f in ("provider", "model", "judge_model", "context_tokens")} == {None}
    # rag eval of the search results re-scores its ranking figures, and reports as the run did
    ev = CliRunner().invoke(app, ["eval", str(new), "--provider", "offline"])
    assert ev.exit_code == 0, ev.output
    evaluated = next(p for p in (tmp_path / "results").glob("q_results_*_eval_*.csv") if "_summary" not in p.name)
    ev_summary = summary_of(evaluated)
    assert float(ev_summary["Ref MRR"]["Mean"]) == float(summary["Ref MRR"]["Mean"]) == 1.0
    assert not answer_rows & set(ev_summary), sorted(answer_rows & set(ev_summary))
    # the strategy has one label in the batch's summary and in the eval's, k its own row in both
    assert [ev_summary[m]["Total"] for m in ("Strategy", "k")] == [summary[m]["Total"] for m in ("Strategy", "k")]
    # a search run recorded before named the provider given, its model, a judge and a context size
    record.update(provider="openai", model="gpt-4o-mini", judge_model="gpt-4o-mini", context_tokens=32000)
    new.with_name(new.stem + ".run.json").write_text(json.dumps(record), encoding="utf-8")
    cmp = compare_files(old, new)
    assert cmp.new_label == "search", cmp.new_label
    text = format_text(cmp)
    assert "gpt-4o-mini" not in text and "32000" not in text.split("new:")[1].split("\n")[1], text


def test_progress_of_a_search_run_shows_ranking_figures(tmp_path, monkeypatch, capsys):
    """A search run has no checklist figure: its progress bar shows Ref Recall and MRR, which it has."""
    monkeypatch.chdir(tmp_path)
    db = write_pages(tmp_path / "database", PAGES, source="x.pdf")
    q = _csv(tmp_path / "q.csv", [["How do I reset the router with the reset button?", "hold 10 s", SETUP]])
    run_batch(q, Settings(provider="offline", db=db, results=tmp_path / "results"), strategy="search", k=2,
              progress=True)
    err = capsys.readouterr().err
    assert "ref_recall=1.00" in err and "mrr=1.00" in err and "checklist_recall" not in err
