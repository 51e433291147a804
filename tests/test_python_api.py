"""ragkit from Python (report s55-pyuser M1, M4-M6): the stage packages name their entry points, `run_batch` takes
questions in memory and a provider object, a report's rows come back typed, and library calls are quiet unless
asked (the CLI asks). docs/python.md's script runs in test_docs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_batch import FRIDGE, HEADER, ROUTER, make_db, offline, raw_rows, write_input
from typer.testing import CliRunner

from ragkit.core.errors import RagError, UsageError
from ragkit.core.llm import MockModel
from ragkit.evaluate import batch as B

RESET = "How do I reset the router?"
FRIDGE_Q = "冷蔵室の温度は何段階で設定できますか？"


@pytest.fixture(autouse=True)
def keyword_search_only(monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")


def test_the_stage_packages_name_their_entry_points():
    from ragkit.evaluate import BatchReport, load_run, run_batch, run_eval
    from ragkit.evaluate.batch import run_batch as defined
    from ragkit.reports import compare_files, format_json, write_report
    from ragkit.reports.html import write_report as html_write

    assert run_batch is defined and write_report is html_write
    assert all(callable(f) for f in (run_eval, load_run, compare_files, format_json)) and BatchReport.records
    with pytest.raises(ImportError):
        from ragkit.evaluate import no_such_name  # noqa: F401


def test_run_batch_takes_questions_in_memory_and_records_them_as_a_csv_would_be(isolated_env):
    """A list of strings or dicts (the CSV's columns) runs as the same rows in a CSV do: same scores, same
    question-set digest; the run record says the input was in memory (no file to point at)."""
    db = make_db(isolated_env)
    rows = [[RESET, "Hold the reset button.", ROUTER, "1", "reset button"],
            [FRIDGE_Q, "3段階", FRIDGE, "", "3段階"]]
    inp = write_input(isolated_env / "q.csv", [HEADER, *rows])
    from_csv = B.run_batch(inp, offline(db, isolated_env), strategy="naive")
    dicts = [dict(zip(HEADER, r, strict=True)) for r in rows]
    in_memory = B.run_batch(dicts, offline(db, isolated_env / "m"), strategy="naive")
    cols = ["Question", "Ref Recall", "Ref Precision", "Checklist Recall", "Refused", "Retrieved Files"]
    assert [{c: r[c] for c in cols} for r in in_memory.rows] == [{c: r[c] for c in cols} for r in from_csv.rows]
    assert in_memory.run.questions_sha256 == from_csv.run.questions_sha256
    assert in_memory.run.input == "(in memory)" and in_memory.run.input_path is None
    assert in_memory.results_path.name.startswith("questions_results_")
    assert json.loads(in_memory.run_path.read_text(encoding="utf-8"))["input"] == "(in memory)"
    plain = B.run_batch([RESET, "   ", FRIDGE_Q], offline(db, isolated_env / "s"), strategy="naive")
    assert [r["Question"] for r in plain.rows] == [RESET, FRIDGE_Q] and plain.skipped_blank == 1
    # a DataFrame as pandas reads the CSV (Page 1.0 and NaN) is the same question set
    framed = B.run_batch(pd.read_csv(inp), offline(db, isolated_env / "f"), strategy="naive")
    assert framed.run.questions_sha256 == from_csv.run.questions_sha256


def test_questions_in_memory_are_checked_as_a_csv_is(isolated_env):
    db = make_db(isolated_env)
    settings = offline(db, isolated_env)
    with pytest.raises(UsageError, match=r"questions\[1\]: a question string or a dict"):
        B.run_batch([RESET, 3], settings)
    with pytest.raises(RagError, match=r"\(in memory\): missing column 'Question'; columns found: 'Query'"):
        B.run_batch([{"Query": RESET}], settings)
    with pytest.raises(RagError, match=r"\(in memory\): row 2, column 'Page'"):
        B.run_batch([{"Question": RESET, "Page": "one"}], settings)
    with pytest.raises(RagError, match=r"\(in memory\): 1 reference page"):
        B.run_batch([{"Question": RESET, "Reference Document": "database/nope/page_001.md"}], settings)
    with pytest.raises(UsageError, match="give run_batch a CSV path"):
        B.run_batch([{"Question": RESET, "Reference Document": ROUTER}], settings, optimize=True)


def test_run_batch_takes_a_provider_object(isolated_env):
    """As ask(provider=...): the object answers (the settings name the offline engine), and the run says who."""
    db = make_db(isolated_env)
    model = MockModel()
    model.enqueue(content=json.dumps({"answer": "Hold the reset button for 10 seconds [1].", "sources": ["[1]"],
                                      "refused": False}))
    report = B.run_batch([RESET], offline(db, isolated_env), strategy="naive", provider=model)
    assert report.rows[0]["RAG Answer"].startswith("Hold the reset button for 10 seconds")
    assert len(model.requests) == 1 and not report.errors
    assert report.provider == "mock" and report.run.provider == "mock" and report.run.model == "mock"
    assert report.run.engine is None  # not the offline engine's answers
    # the same questions with the settings' own provider are another run: nothing is resumed from this one
    again = B.run_batch([RESET], offline(db, isolated_env), strategy="naive")
    assert again.resumed == 0 and "offline" in again.rows[0]["RAG Answer"].lower()


def test_records_are_typed_and_the_csv_keeps_its_cells(isolated_env):
    """M5: `rows` are the CSV's cells ('' for an undefined metric, 'False', '0.000000'); records() gives float or
    None, bool and float, so pandas averages a metric column; the file on disk is unchanged."""
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, [RESET, "Hold the reset button.", ROUTER, "1", "reset"],
                                               ["What colour is the router?", "", "", "", ""]])
    report = B.run_batch(inp, offline(db, isolated_env), strategy="naive")
    assert report.rows[1]["Ref Recall"] == "" and report.rows[0]["Refused"] in ("True", "False")
    typed = report.records()
    assert typed[0]["Ref Recall"] == 1.0 and typed[1]["Ref Recall"] is None
    assert isinstance(typed[0]["Refused"], bool) and isinstance(typed[0]["Cost USD"], float)
    assert isinstance(typed[0]["Ref TP"], float) and typed[0]["RAG Answer"] == report.rows[0]["RAG Answer"]
    df = pd.DataFrame(typed)
    assert df["Ref Recall"].mean() == pd.read_csv(report.results_path)["Ref Recall"].mean() == 1.0
    assert df["Refused"].dtype == bool
    on_disk = raw_rows(report.results_path)
    header = on_disk[0]
    assert on_disk[2][header.index("Ref Recall")] == "" and on_disk[1][header.index("Cost USD")] == "0.000000"
    assert on_disk[1][header.index("Refused")] in ("True", "False")


def test_library_calls_are_quiet_unless_asked(isolated_env, capsys):
    """M6: run_batch, run_eval and open_index printed progress to stderr by default (the index's embedding lines
    on a later search too); a library call is quiet now, and progress=True still shows it."""
    from ragkit.evaluate.rescore import run_eval
    from ragkit.search import open_index

    db = make_db(isolated_env)
    assert open_index(db).progress is False  # what its later searches' embedding lines follow
    inp = write_input(isolated_env / "q.csv", [HEADER, [RESET, "Hold the reset button.", ROUTER, "1", "reset"]])
    settings = offline(db, isolated_env)
    report = B.run_batch(inp, settings, strategy="naive")
    run_eval(report.results_path, settings)
    assert capsys.readouterr().err == ""
    B.run_batch(inp, offline(db, isolated_env / "again"), strategy="naive", progress=True)
    assert "batch: 1/1 q" in capsys.readouterr().err


def test_the_cli_still_shows_progress(isolated_env):
    from ragkit.cli import app

    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, [RESET, "Hold the reset button.", ROUTER, "1", "reset"]])
    res = CliRunner().invoke(app, ["batch", str(inp), "--db", str(db), "--provider", "offline", "--strategy",
                                   "naive", "--results", str(isolated_env / "results")])
    assert res.exit_code == 0, res.output
    assert "batch: 1/1 q" in res.stderr
    res = CliRunner().invoke(app, ["eval", str(sorted((isolated_env / "results").glob("q_results_*[0-9].csv"))[0]),
                                   "--db", str(db), "--provider", "offline", "--results", str(isolated_env / "r2")])
    assert res.exit_code == 0, res.output
    assert "eval: 1/1" in res.stderr or "1/1" in res.stderr


def test_errors_name_the_argument_a_caller_passed_and_rag_its_flag(isolated_env):
    """A Python caller was told of flags it does not have (`pass --db`, `--max`, `(--encoding)`); the message now
    names the argument, and `rag` prints the same error with its flag (RagError.cli_message)."""
    from ragkit.cli import app
    from ragkit.core.csvio import read_csv
    from ragkit.search import open_index

    with pytest.raises(RagError) as got:
        open_index(isolated_env / "no_db")
    assert str(got.value).endswith("(run `rag ingest` first or pass db=)")
    assert got.value.cli_message().endswith("(run `rag ingest` first or pass --db)")
    res = CliRunner().invoke(app, ["search", "pumps", "--db", "no_db"])
    assert res.exit_code == 1 and res.stderr == "error: database folder not found: no_db (run `rag ingest` first or pass --db)\n"

    sjis = isolated_env / "sjis.csv"
    sjis.write_bytes("Question\n温度は？\n".encode("cp932"))
    with pytest.raises(RagError) as got:
        read_csv(sjis, encoding="utf-8")
    assert "is not valid utf-8 (encoding=)" in str(got.value) and "--encoding" not in str(got.value)
    assert "is not valid utf-8 (--encoding)" in got.value.cli_message()

    with pytest.raises(UsageError) as got:
        B.run_batch(["q"], offline(make_db(isolated_env), isolated_env), strategy="search", k=0)
    assert (str(got.value), got.value.cli_message()) == ("k= must be at least 1, got 0", "-k must be at least 1, got 0")
