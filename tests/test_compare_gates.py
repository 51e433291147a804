"""rag compare (deltas against hand-computed values, paired tests) and the quality gates (exit 3)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.errors import UsageError
from ragkit.evaluate import gates as G
from ragkit.evaluate.runs import bootstrap_ci, load_run, mcnemar, paired_bootstrap
from ragkit.reports.compare import compare_files, format_markdown

COLS = ["Question", "Reference Document", "RAG Answer", "Retrieved Files", "Checklist Recall", "Ref Recall",
        "Contain Match", "Refused", "Latency ms", "Error"]


def write_results(path: Path, rows: list[dict], cols: list[str] = COLS) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\r\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: r.get(c, "") for c in cols})
    path.write_bytes(buf.getvalue().encode("utf-8-sig"))
    return path


def row(q: str, ref: str | float, chk: str | float, contain: str, *, refused: str = "False",
        doc: str = "database/cat/doc/sec/page_001.md") -> dict:
    return {"Question": q, "Reference Document": doc, "RAG Answer": "a", "Ref Recall": ref,
            "Checklist Recall": chk, "Contain Match": contain, "Refused": refused, "Latency ms": "100"}


@pytest.fixture
def two_runs(isolated_env) -> tuple[Path, Path]:
    # hand-computed: Ref Recall old (1 + 0 + 0.5 + 1 + 1) / 5 = 0.7, new (1 + 1 + 1 + 0 + 1) / 5 = 0.8
    # Checklist Recall: q5 is undefined in the new run, so the delta covers q1-q4 only:
    #   old (1 + 0.5 + 0.5 + 1) / 4 = 0.75, new (1 + 1 + 0.5 + 0) / 4 = 0.625, delta -0.125
    # Contain Match: 1->0 on q1, q4, q5 (b = 3), 0->1 on none (c = 0): McNemar p = 2 * 0.5**3 = 0.25
    old = write_results(isolated_env / "old.csv", [
        row("q1", 1, 1, "True"), row("q2", 0, 0.5, "False"), row("q3", 0.5, 0.5, "False"),
        row("q4", 1, 1, "True"), row("q5", 1, 1, "True"), row("only-old", 1, 1, "True")])
    new = write_results(isolated_env / "new.csv", [
        row("q1", 1, 1, "False"), row("q2", 1, 1, "False"), row("q3", 1, 0.5, "False"),
        row("q4", 0, 0, "False"), row("q5", 1, "", "False"), row("only-new", 0, 0, "False")])
    return old, new


def test_deltas_match_hand_computed_values(two_runs):
    cmp = compare_files(*two_runs)
    assert (cmp.paired, cmp.only_old, cmp.only_new) == (5, 1, 1)
    ref = cmp.metric("Ref Recall")
    assert ref.n == 5 and ref.old == pytest.approx(0.7) and ref.new == pytest.approx(0.8)
    assert ref.delta == pytest.approx(0.1) and ref.test == "paired bootstrap"
    assert (ref.worse, ref.better) == (1, 2)
    chk = cmp.metric("Checklist Recall")
    assert chk.n == 4 and chk.old == pytest.approx(0.75) and chk.new == pytest.approx(0.625)
    assert chk.delta == pytest.approx(-0.125)
    cm = cmp.metric("Contain Match")
    assert cm.test == "mcnemar" and (cm.worse, cm.better) == (3, 0) and cm.p == pytest.approx(0.25)
    assert cm.delta == pytest.approx(-0.6)
    assert cmp.metric("Latency ms") is None  # not a quality
    # per question: q2, q3 better; q4 worse (both recalls and contain fell); q1, q5 worse (contain fell)
    assert sorted(q.question for q in cmp.better) == ["q2", "q3"]
    assert sorted(q.question for q in cmp.worse) == ["q1", "q4", "q5"]
    q4 = next(q for q in cmp.worse if q.question == "q4")
    assert q4.changes["Ref Recall"] == (1.0, 0.0) and q4.new_row == 4


def test_statistics_by_hand():
    assert mcnemar(0, 0) == 1.0
    assert mcnemar(4, 0) == pytest.approx(2 / 16)
    assert mcnemar(1, 2) == pytest.approx(1.0)  # 2 * (1 + 3) / 8, capped at 1
    assert mcnemar(1, 9) == pytest.approx(2 * (1 + 10) / 1024)
    ci, p = paired_bootstrap([0.5, 0.5, 0.5], resamples=500)
    assert ci == (0.5, 0.5) and p == pytest.approx(1 / 500)  # every resample is above 0
    ci, p = paired_bootstrap([0.0, 0.0])
    assert p == 1.0
    ci, p = paired_bootstrap([1.0, -1.0, 1.0, -1.0] * 5)
    assert ci[0] < 0 < ci[1] and p > 0.5
    lo, hi = bootstrap_ci([0.0, 1.0] * 20)
    assert 0.3 < lo < 0.5 < hi < 0.7
    assert bootstrap_ci([1.0]) is None


def test_compare_cli_formats(two_runs):
    old, new = two_runs
    r = CliRunner().invoke(app, ["compare", str(old), str(new)])
    assert r.exit_code == 0, r.output
    assert "Ref Recall" in r.output and "+0.100" in r.output and "-0.125" in r.output
    assert "worse: 3 question(s)" in r.output and "better: 2 question(s)" in r.output
    r = CliRunner().invoke(app, ["compare", str(old), str(new), "--format", "json"])
    data = json.loads(r.output)
    m = {x["metric"]: x for x in data["metrics"]}
    assert m["Ref Recall"]["delta"] == pytest.approx(0.1) and m["Contain Match"]["p"] == pytest.approx(0.25)
    assert {q["question"] for q in data["worse"]} == {"q1", "q4", "q5"}
    r = CliRunner().invoke(app, ["compare", str(old), str(new), "--format", "markdown"])
    assert r.exit_code == 0 and "| Ref Recall | 5 | 0.700 | 0.800 | +0.100 |" in r.output
    assert "<summary>Worse: 3 question(s)</summary>" in r.output
    r = CliRunner().invoke(app, ["compare", str(old), str(new), "--format", "xml"])
    assert r.exit_code == 2


def test_markdown_escapes_pipes(isolated_env):
    old = write_results(isolated_env / "o.csv", [row("a | b", 1, 1, "True")])
    new = write_results(isolated_env / "n.csv", [row("a | b", 0, 1, "True")])
    md = format_markdown(compare_files(old, new))
    assert "a \\| b" in md


def test_fail_on_regression_exit_codes(two_runs):
    old, new = two_runs
    runner = CliRunner()
    # bare flag: any drop fails (Checklist Recall -0.125, Contain Match -0.6)
    r = runner.invoke(app, ["compare", str(old), str(new), "--fail-on-regression"])
    assert r.exit_code == 3
    failed = [ln for ln in r.stderr.splitlines() if ln.startswith("gate failed")]
    assert len(failed) == 2 and any("Checklist Recall" in ln for ln in failed)
    assert any("Contain Match" in ln for ln in failed)
    # a tolerance larger than the checklist drop leaves only Contain Match
    r = runner.invoke(app, ["compare", str(old), str(new), "--fail-on-regression", "0.2"])
    assert r.exit_code == 3 and r.stderr.count("gate failed") == 1 and "Contain Match" in r.stderr
    r = runner.invoke(app, ["compare", str(old), str(new), "--fail-on-regression", "0.7"])
    assert r.exit_code == 0, r.output
    # the flag before the files, bare
    r = runner.invoke(app, ["compare", "--fail-on-regression", str(old), str(new)])
    assert r.exit_code == 3
    # the other way round only Ref Recall fell (-0.1), within a tolerance of 0.15
    r = runner.invoke(app, ["compare", str(new), str(old), "--fail-on-regression", "0.15"])
    assert r.exit_code == 0, r.stderr


def test_a_fall_in_confidence_is_no_regression(isolated_env):
    """--fail-on-regression 0.02 failed on 'Confidence fell 0.5906 -> 0.4511': how sure the answerer was is
    shown, but is not a quality the gate checks."""
    cols = [*COLS, "Confidence"]
    old = write_results(isolated_env / "o.csv", [row("q1", 1, 1, "True") | {"Confidence": "0.9"},
                                                 row("q2", 1, 1, "True") | {"Confidence": "0.3"}], cols)
    new = write_results(isolated_env / "n.csv", [row("q1", 1, 1, "True") | {"Confidence": "0.4"},
                                                 row("q2", 1, 1, "True") | {"Confidence": "0.2"}], cols)
    assert compare_files(old, new).metric("Confidence").delta == pytest.approx(-0.3)  # still shown
    r = CliRunner().invoke(app, ["compare", str(old), str(new), "--fail-on-regression", "0.02"])
    assert r.exit_code == 0 and "gate failed" not in r.output, r.output


def test_a_numeric_input_column_is_no_metric(isolated_env):
    """A question sheet's own `No` column (row numbers, renumbered after a question was deleted) failed
    `--fail-on-regression` with "No fell 4.0000 -> 3.0000" while every metric was unchanged, and showed in every
    compare table; `--fail-under No=...` rejects it. Only ragkit's metric columns are compared; input columns
    (numbers or not) pass through."""
    cols = ["No", "Question", "優先度", *COLS[1:]]
    qs = [row(f"q{i}", 1, 1, "True") for i in range(1, 6)]
    old = write_results(isolated_env / "o.csv", [r | {"No": str(i + 2), "優先度": "3"} for i, r in enumerate(qs)],
                        cols)
    new = write_results(isolated_env / "n.csv", [r | {"No": str(i + 1), "優先度": "1"} for i, r in enumerate(qs)],
                        cols)
    run = load_run(new)
    assert run.rows[0].get("No") == "1" and run.rows[0].get("優先度") == "1"  # carried as the input had it
    assert "No" not in run.metrics() and "優先度" not in run.metrics() and "Ref Recall" in run.metrics()
    assert run.resolve("No") is None
    with pytest.raises(UsageError, match="no such metric column"):
        G.check_gates(run, G.parse_gates(["No=1"]))
    cmp = compare_files(old, new)
    assert [m.metric for m in cmp.metrics if m.metric in ("No", "優先度")] == []
    assert cmp.metric("Ref Recall").delta == 0
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(old), str(new), "--fail-on-regression"])
    assert r.exit_code == 0 and "gate failed" not in r.stderr, r.stderr
    assert not any(ln.split()[0] in ("No", "優先度") for ln in r.stdout.splitlines() if ln.strip())
    r = runner.invoke(app, ["compare", str(old), str(new), "--format", "markdown"])
    assert r.exit_code == 0 and "| Ref Recall |" in r.stdout and "| No |" not in r.stdout
    assert "| 優先度 |" not in r.stdout
    r = runner.invoke(app, ["compare", str(old), str(new), "--format", "json"])
    assert {m["metric"] for m in json.loads(r.stdout)["metrics"]} & {"No", "優先度"} == set()


def test_compare_bad_input_is_one_line(isolated_env):
    bad = isolated_env / "bad.csv"
    bad.write_text("Name,RAG Answer\nx,y\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["compare", str(bad), str(bad)])
    assert r.exit_code == 1 and "missing column 'Question'; columns found: 'Name', 'RAG Answer'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = CliRunner().invoke(app, ["compare", str(isolated_env / "none.csv"), str(bad)])
    assert r.exit_code == 1 and "no such file" in r.stderr and "Traceback" not in r.output


def test_report_and_compare_say_alike_that_a_file_is_no_results_csv(isolated_env):
    """`rag report typo.csv` (a question CSV with `Questoin`) said "missing column 'Question'" where `rag compare`
    says what the file is: no results CSV. One check serves both (and a question CSV spelt right)."""
    typo = isolated_env / "typo.csv"
    typo.write_text("Questoin,Ground Truth\nHow long must passwords be?,14\n", encoding="utf-8")
    questions = isolated_env / "questions.csv"
    questions.write_text("No,Question,Ground Truth\n1,How long must passwords be?,14\n", encoding="utf-8")
    want = "not a results CSV (no 'RAG Answer', 'Ref Recall' or 'Checklist Recall' column); run `rag batch` first"
    for path in (typo, questions):
        for args in (["report", str(path), "-o", str(isolated_env / "r.html")], ["compare", str(path), str(path)]):
            r = CliRunner().invoke(app, args)
            assert r.exit_code == 1 and r.stderr.strip() == f"error: {path}: {want}", (args, r.stderr)
    assert not (isolated_env / "r.html").exists()


def test_repeated_questions_pair_by_occurrence_and_disjoint_files_are_an_error(isolated_env):
    old = write_results(isolated_env / "o.csv", [row("same", 1, 1, "True"), row("same", 0, 1, "True")])
    new = write_results(isolated_env / "n.csv", [row("same", 1, 1, "True"), row("same", 1, 1, "True")])
    cmp = compare_files(old, new)
    assert cmp.paired == 2 and [q.old_row for q in cmp.better] == [2]
    other = write_results(isolated_env / "x.csv", [row("different", 1, 1, "True")])
    r = CliRunner().invoke(app, ["compare", str(old), str(other), "--fail-on-regression"])
    assert r.exit_code == 1 and "no question in common" in r.stderr


def test_parse_gates():
    assert G.parse_gate("Ref Recall=0.8") == G.Gate("Ref Recall", 0.8)
    assert G.parse_gate("ref_recall = 90%") == G.Gate("ref_recall", 0.9)
    for bad in ("Ref Recall", "=0.8", "Ref Recall=high", "Ref Recall=nan"):
        with pytest.raises(UsageError):
            G.parse_gate(bad)


def test_gates_on_a_results_file(two_runs):
    old, _ = two_runs
    run = load_run(old)
    res = G.check_gates(run, G.parse_gates(["ref-recall=0.7", "Checklist Recall=0.85", "contain match=0.5"]))
    assert [r.passed for r in res] == [True, False, True]  # 0.75 / 0.833 / 0.667 over 6 rows
    assert res[1].line().startswith("gate failed: Checklist Recall 0.8333 < 0.85")
    with pytest.raises(UsageError, match="no such metric column"):
        G.check_gates(run, G.parse_gates(["Judge Overall=0.5"]))
    with pytest.raises(UsageError, match="no such metric"):
        G.check_names(G.parse_gates(["Recal=0.5"]), ["Ref Recall", "Checklist Recall"])


PAGES = {
    "cat/doc/sec/page_001.md": ("doc", "sec", 1, "The ice maker needs about 24 hours to make its first ice."),
    "cat/doc/sec/page_002.md": ("doc", "sec", 2, "Replace the water filter every 3 months; model HF-2201."),
}


def _batch_setup(root: Path) -> Path:
    from pagetree import write_pages

    write_pages(root / "database", PAGES, source="x.pdf")
    q = root / "q.csv"
    q.write_text("Question,Ground Truth,Reference Document,Checklist\n"
                 "How often do I replace the water filter?,Every 3 months.,"
                 "database/cat/doc/sec/page_002.md,every 3 months\n", encoding="utf-8")
    return q


def test_batch_fail_under_exits_3_with_one_line_per_failed_gate(isolated_env, monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")
    q = _batch_setup(isolated_env)
    runner = CliRunner()
    # a typo is a usage error before anything runs
    r = runner.invoke(app, ["batch", str(q), "--provider", "offline", "--fail-under", "Ref Recal=0.5"])
    assert r.exit_code == 2 and not (isolated_env / "results").exists()
    r = runner.invoke(app, ["batch", str(q), "--provider", "offline", "--fail-under", "Ref Recall=0.5"])
    assert r.exit_code == 0, r.output
    assert "gate passed: Ref Recall 1.0000 >= 0.5" in r.output
    # the offline engine answers (Refused 0) short of certain (Confidence below 1): two failed gates, two lines,
    # exit 3
    r = runner.invoke(app, ["batch", str(q), "--provider", "offline", "--fail-under", "Refused=1",
                            "--fail-under", "confidence=1", "--fail-under", "Checklist Recall=0"])
    assert r.exit_code == 3, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("gate failed")]
    assert len(lines) == 2 and "Refused 0.0000 < 1" in lines[0] and "Confidence" in lines[1]
    results = sorted((isolated_env / "results").glob("q_results_*[0-9].csv"))
    # the verdicts are in the run record too, for a CI step that reads JSON (the same figures as the lines)
    record = json.loads(results[-1].with_name(results[-1].stem + ".run.json").read_text(encoding="utf-8"))
    assert [(g["metric"], g["threshold"], g["failed"]) for g in record["gates"]] == [
        ("Refused", 1.0, True), ("Confidence", 1.0, True), ("Checklist Recall", 0.0, False)]
    assert record["gates"][0]["value"] == 0.0 and record["gates"][0]["rows"] == 1
    # eval takes the same gates on the re-scored file
    r = runner.invoke(app, ["eval", str(results[-1]), "--provider", "offline", "--fail-under", "Refused=1"])
    assert r.exit_code == 3 and "gate failed: Refused" in r.stderr
    r = runner.invoke(app, ["eval", str(results[-1]), "--provider", "offline", "--fail-under", "Ref Recall=1"])
    assert r.exit_code == 0, r.output
    evaluated = sorted((isolated_env / "results").glob("*.run.json"), key=lambda p: p.stat().st_mtime)[-1]
    assert json.loads(evaluated.read_text(encoding="utf-8"))["gates"] == [
        {"metric": "Ref Recall", "value": 1.0, "threshold": 1.0, "rows": 1, "failed": False}]


def test_run_batch_returns_and_records_its_gates(isolated_env, monkeypatch):
    """The library does the gate work: run_batch(gates=...) gives the verdicts, and a run without gates records none."""
    from ragkit.core.config import load_settings
    from ragkit.evaluate.batch import run_batch
    from ragkit.evaluate.runinfo import read_run_info

    monkeypatch.setenv("RAG_EMBED", "0")
    q = _batch_setup(isolated_env)
    settings = load_settings(db=isolated_env / "database", results=isolated_env / "results", provider="offline")
    report = run_batch(q, settings, gates=["Ref Recall=90%", G.Gate("Refused", 1.0)])
    assert [(r.column, r.passed) for r in report.gates] == [("Ref Recall", True), ("Refused", False)]
    assert read_run_info(report.results_path).gates == [r.to_json() for r in report.gates]
    plain = run_batch(q, settings)
    assert plain.gates == [] and read_run_info(plain.results_path).gates is None


@pytest.mark.parametrize(("spec", "says"), [
    ("Ref Recall=80", "write 80% or 0.8"),  # a percent without % (the likely CI typo)
    ("Ref Recall=2", "can never be met"),
    ("judge_overall=1.5", "can never be met"),
    ("Contain Match=-0.1", "always passes"),
    ("G-Eval Faithfulness=6", "score from 1 to 5"),
    ("G-Eval Coverage=0.5", "always passes"),
    ("Steps=-1", "0 or more"),
    ("Ref FN=-2", "0 or more"),
])
def test_a_threshold_outside_the_metric_range_is_a_usage_error(spec, says):
    with pytest.raises(UsageError, match=says):
        G.as_gates([spec])


def test_thresholds_inside_the_range_pass_the_check():
    gates = G.as_gates(["Ref Recall=80%", "Ref Recall=1", "Ref Recall=0", "Latency ms=5000", "Steps=3",
                        "Input Tokens=120000", "G-Eval Coverage=4", "Judge Cost USD=0.5"])
    assert len(gates) == 8


def test_batch_refuses_a_percent_without_sign_before_running(isolated_env, monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")
    q = _batch_setup(isolated_env)
    r = CliRunner().invoke(app, ["batch", str(q), "--provider", "offline", "--fail-under", "Ref Recall=80"])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip().splitlines() == [
        "error: --fail-under 'Ref Recall=80': Ref Recall is a share from 0 to 1, so 80 can never be met; "
        "write 80% or 0.8"]
    assert not (isolated_env / "results").exists()  # nothing ran


def test_compare_json_carries_the_gate_verdicts(two_runs):
    """A CI step reads what failed from the JSON, not from stderr: one gate per quality metric with a delta."""
    old, new = two_runs
    r = CliRunner().invoke(app, ["compare", str(old), str(new), "--format", "json", "--fail-on-regression", "0.2"])
    assert r.exit_code == 3
    data = json.loads(r.stdout)
    assert data["gate_failed"] is True
    gates = {g["metric"]: g for g in data["gates"]}
    assert set(gates) == {"Ref Recall", "Checklist Recall", "Contain Match"}  # Refused has no direction
    cm = gates["Contain Match"]
    assert cm["failed"] and cm["threshold"] == 0.2 and cm["n"] == 5
    assert (cm["old"], cm["new"]) == (0.6, 0.0) and abs(cm["delta"] + 0.6) < 1e-9 and cm["p"] == 0.25
    assert not gates["Checklist Recall"]["failed"] and abs(gates["Checklist Recall"]["delta"] + 0.125) < 1e-9
    assert not gates["Ref Recall"]["failed"]
    # the stderr lines are the failed gates, one each
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("gate failed")] == [
        "gate failed: Contain Match fell 0.6000 -> 0.0000 (-0.6000, more than 0.2; p=0.25, 5 paired)"]
    # no gate asked: none checked
    plain = json.loads(CliRunner().invoke(app, ["compare", str(old), str(new), "--format", "json"]).stdout)
    assert plain["gates"] == [] and plain["gate_failed"] is None


def test_compare_files_checks_the_gates_itself(two_runs):
    cmp = compare_files(*two_runs, fail_on_regression=0)
    assert cmp.gate_failed and [g.metric for g in cmp.gates if g.failed] == ["Checklist Recall", "Contain Match"]
    assert compare_files(*two_runs, fail_on_regression=0.7).gate_failed is False
    with pytest.raises(UsageError, match="0 or more"):
        compare_files(*two_runs, fail_on_regression=-0.1)


@pytest.mark.parametrize("where", ["after", "before"])
def test_a_delta_that_is_no_number_says_so(two_runs, where):
    old, new = two_runs
    args = ([str(old), str(new), "--fail-on-regression", "abc"] if where == "after"
            else ["--fail-on-regression", "abc", str(old), str(new)])
    r = CliRunner().invoke(app, ["compare", *args])
    assert r.exit_code == 2
    assert r.stderr.strip().startswith("error: --fail-on-regression: 'abc' is not a number (see ")
    assert len(r.stderr.strip().splitlines()) == 1
