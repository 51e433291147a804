"""Evaluation you can trust (issue 17): read-only runs, optimization measured on held-out questions, honest
summaries, strict CSVs. The offline provider runs end to end; the judge rule runs against the scripted server."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from fakeserver import openai_settings
from test_batch import (
    FRIDGE,
    HEADER,
    ROUTER,
    WIFI,
    agent_responder,
    judge_kind,
    make_db,
    offline,
    raw_rows,
    write_input,
)
from typer.testing import CliRunner

from ragkit.answer import ask
from ragkit.cli import app
from ragkit.core.csvio import read_csv
from ragkit.core.errors import RagError, UsageError
from ragkit.evaluate import batch as B
from ragkit.evaluate.metrics import COUNT_KEYS, parse_number, ratios
from ragkit.evaluate.rescore import run_eval


@pytest.fixture(autouse=True)
def keyword_search_only(monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")


def tree(db: Path) -> dict[str, str]:
    """Every file and folder under the database (the index cache aside) with a checksum."""
    out = {}
    for p in sorted(db.rglob("*")):
        rel = p.relative_to(db).as_posix()
        if rel.startswith(".ragkit"):
            continue
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


QUESTIONS = [
    HEADER,
    ["How do I reset the router?", "Hold the reset button for 10 seconds.", ROUTER, "1", "hold reset 10 seconds"],
    ["How can I change the WiFi password?", "Open the admin page.", WIFI, "2", "admin page"],
    ["冷蔵室の温度は何段階で設定できますか？", "3段階", FRIDGE, "1", "3段階"],
    ["What is the warranty period of the toaster?", "", "", "", ""],
    ["Which light blinks during a router reset?", "The light blinks.", ROUTER, "1", "light blinks"],
]


# -- read-only by default -------------------------------------------------------------------------------
def test_plain_batch_changes_neither_the_database_nor_the_input(isolated_env):
    db = make_db(isolated_env)
    # a question whose page the offline engine cannot find: the words are not on the page
    inp = write_input(isolated_env / "q.csv", [HEADER, *QUESTIONS[1:],
                                               ["Which gizmo reboots it?", "", WIFI, "2", "gizmo"]])
    before_csv, before_db = inp.read_bytes(), tree(db)
    result = CliRunner().invoke(app, ["batch", str(inp), "--db", str(db), "--results", "res",
                                      "--provider", "offline"])
    assert result.exit_code == 0, result.output
    assert inp.read_bytes() == before_csv and tree(db) == before_db
    assert not list(isolated_env.glob("q.csv.bak*"))
    line = next(x for x in result.output.splitlines() if "were missed" in x)
    assert "nothing was changed" in line and "--optimize" in line and "--enable-rl" in line
    summary = {r["Metric"]: r for r in read_csv(next(Path("res").glob("*_summary.csv"))).to_dict("records")}
    assert "Opt Ref Recall" not in result.output and "Optimize Rows Analysed" not in summary
    assert int(summary["Reference pages missed (not optimized)"]["Total"]) >= 1


def test_optimize_flags_are_checked(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", QUESTIONS)
    s = offline(db, isolated_env)
    for kw, msg in ((dict(holdout=0.5), "add optimize=True or enable_rl=True"),
                    (dict(validate=inp), "add optimize=True or enable_rl=True"),
                    (dict(optimize=True, enable_rl=True), "exclusive"),
                    (dict(optimize=True, holdout=0.5, validate=inp), "not both"),
                    (dict(optimize=True, holdout=1.0), r"\[0, 1\)")):
        with pytest.raises(UsageError, match=msg):
            B.run_batch(inp, s, progress=False, **kw)


def test_optimize_copies_only_for_training_misses_and_reports_held_out_recall(isolated_env):
    db = make_db(isolated_env)
    rows = [HEADER] + [[f"Which gizmo number {i} reboots it?", "", WIFI if i % 2 else ROUTER, "", "x"]
                       for i in range(8)]
    inp = write_input(isolated_env / "q.csv", rows)
    before_db = tree(db)
    report = B.run_batch(inp, offline(db, isolated_env), optimize=True, holdout=0.5, progress=False)
    assert not report.errors, report.errors
    split = {r["Question"]: r["Optimize Split"] for r in report.rows}
    assert sorted(split.values()).count("held-out") == 4
    # the same split again: deterministic
    from ragkit.evaluate.heldout import split_holdout

    again = split_holdout([{"Question": r[0], "Reference Document": r[2]} for r in rows[1:]], 0.5)
    assert {rows[1 + i][0] for i in again} == {q for q, s in split.items() if s == "held-out"}
    # copies were made for training misses only; held-out rows drove none
    opt = report.optimize
    driven = {c.question for c in opt.copies}
    assert driven and all(split[q] == "train" for q in driven)
    new = set(tree(db)) - set(before_db)
    assert new and all(not p.endswith(".md") or any(c.copy == p for c in opt.copies) for p in new)
    # copies keep the permissions of the ingested page
    for c in opt.copies:
        assert (db / c.copy).stat().st_mode & 0o777 == (db / c.original).stat().st_mode & 0o777
    # held-out before/after in the report and the summary CSV, labelled as such
    m = report.measure
    held = m.get("held-out")
    assert held is not None and held.rows_before == 4 and held.rows_after == 4
    assert held.before is not None and held.after is not None
    summary = {r["Metric"]: r for r in read_csv(report.summary_path).to_dict("records")}
    for name in ("Held-out Ref Recall Before Optimize", "Held-out Ref Recall After Optimize",
                 "Train Ref Recall Before Optimize", "Train Ref Recall After Optimize"):
        assert name in summary and summary[name]["Rows"] == "4", name
    assert "held-out questions (drove no copy)" in summary["Held-out Ref Recall After Optimize"]["Covers"]
    assert float(summary["Held-out Ref Recall Before Optimize"]["Mean"]) == pytest.approx(held.before, abs=1e-4)
    # the input CSV names the copies, and its previous version is kept
    assert opt.backup_path is not None and opt.backup_path.is_file()


def test_validate_csv_measures_the_copies(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [HEADER, ["Which gizmo reboots it?", "", ROUTER, "", ""]])
    val = write_input(isolated_env / "v.csv", [["Question", "Reference Document"],
                                               ["Which gizmo restarts the router?", ROUTER],
                                               ["How do I reset the router?", ROUTER]])
    report = B.run_batch(inp, offline(db, isolated_env), optimize=True, validate=val, progress=False)
    assert not report.errors, report.errors
    v = report.measure.get("validate")
    assert v is not None and v.rows_before == 2 and v.rows_after == 2
    assert report.measure.get("held-out") is None and "Optimize Split" not in report.rows[0]
    text = read_csv(report.summary_path).to_csv()
    assert "Validate Ref Recall Before Optimize" in text and "Validate Ref Recall After Optimize" in text


# -- strict CSV reading ---------------------------------------------------------------------------------
def _run(isolated_env, data: bytes, name: str = "q.csv", **kw):
    db = make_db(isolated_env)
    path = isolated_env / name
    path.write_bytes(data)
    return B.run_batch(path, offline(db, isolated_env), progress=False, **kw)


@pytest.mark.parametrize("typo, right", [("Refrence Document", "Reference Document"),
                                         ("Ground Trth", "Ground Truth"), ("Chcklist", "Checklist"),
                                         ("Questoin", "Question")])
def test_near_miss_column_is_an_error_naming_both(isolated_env, typo, right):
    first = "" if typo == "Questoin" else "Question,"
    data = f"{first}{typo}\r\n{'How do I reset the router?,' if first else ''}x\r\n".encode()
    with pytest.raises(RagError, match=f"column '{typo}' looks like '{right}'"):
        _run(isolated_env, data)


def test_a_known_column_in_another_case_or_spacing_is_read_as_that_column(isolated_env):
    data = (f"question,reference_document,ground truth,CHECKLIST\r\n"
            f"How do I reset the router?,{ROUTER},Hold the button,hold the reset button\r\n").encode()
    row = _run(isolated_env, data).rows[0]
    assert row["Reference Document"] == ROUTER and row["Ground Truth"] == "Hold the button"
    assert row["Checklist"] == "hold the reset button" and "question" not in row
    assert row["RAG Answer"] and row["Ref Recall"] == 1.0


def test_a_column_written_twice_in_two_spellings_is_an_error(isolated_env):
    data = b"Question,question\r\nHow do I reset the router?,How?\r\n"
    with pytest.raises(RagError, match="column 'Question' appears twice \\(as 'Question' and 'question'\\)"):
        _run(isolated_env, data)


def test_unknown_columns_pass_through(isolated_env):
    data = f"Question,Reference Document,My Notes\r\nHow do I reset the router?,{ROUTER},keep me\r\n".encode()
    report = _run(isolated_env, data)
    assert report.rows[0]["My Notes"] == "keep me"


def test_a_row_with_an_extra_field_names_the_row(isolated_env):
    data = (f"Question,Reference Document\r\nHow do I reset the router?,{ROUTER}\r\n"
            f"How, exactly, do I reset it?,{ROUTER}\r\n").encode()
    with pytest.raises(RagError, match=r"row 3 \(line 3\) has 4 fields but the header has 2"):
        _run(isolated_env, data)


def test_utf16_semicolon_and_tab_files_are_read(isolated_env):
    db = make_db(isolated_env)
    text = f"Question;Reference Document\r\n冷蔵室の温度は何段階で設定できますか？;{FRIDGE}\r\n"
    for i, (data, note) in enumerate(((text.encode("utf-16"), "utf-16 BOM ;"),
                                      (text.replace(";", "\t").encode("utf-8"), "tab"))):
        path = isolated_env / f"q{i}.csv"
        path.write_bytes(data)
        report = B.run_batch(path, offline(db, isolated_env), progress=False)
        assert report.rows[0]["Question"] == "冷蔵室の温度は何段階で設定できますか？", note
        assert report.rows[0]["Reference Document"] == FRIDGE, note


def test_undecodable_file_names_the_likely_encoding_and_how_to_read_it(isolated_env):
    with pytest.raises(RagError, match=r"not UTF-8, Shift_JIS/CP932 or CP949; it looks like Windows-1252 \(CP1252\).*"
                                       "read it with encoding='cp1252'"):
        _run(isolated_env, b"Question\r\n\x82\xff\xfe\x80 bad\r\n")


def test_a_separator_that_hides_the_question_column_says_what_was_found(isolated_env):
    with pytest.raises(RagError, match=r"missing column 'Question'.*comma-separated; the header also contains semicolons"):
        _run(isolated_env, b"Frage,Antwort;Question\r\na,b;c\r\n")


def test_page_must_be_numbers_or_empty(isolated_env):
    data = (f"Question,Reference Document,Page\r\nHow do I reset the router?,{ROUTER},1;1-4\r\n"
            f"How can I change the WiFi password?,{WIFI},two\r\n").encode()
    with pytest.raises(RagError, match=r"row 3, column 'Page': 'two' is not a page number"):
        _run(isolated_env, data)


def test_missing_references_are_one_error_before_any_question_is_asked(isolated_env):
    db = make_db(isolated_env)
    asked: list[str] = []

    def counting(question, settings, **kw):
        asked.append(question)
        return ask(question, settings, **kw)

    inp = write_input(isolated_env / "q.csv", [
        ["Question", "Reference Document"],
        ["How do I reset the router?", "olddb/manuals/router/setup/page_001.md"],
        ["How can I change the WiFi password?", "olddb/manuals/router/wifi/page_002.md"],
        ["冷蔵室の温度は？", FRIDGE],
    ])
    with pytest.raises(RagError) as e:
        B.run_batch(inp, offline(db, isolated_env), progress=False, answer_fn=counting)
    msg = str(e.value)
    assert "2 reference page(s) not found" in msg and "row 2: olddb/manuals/router/setup/page_001.md" in msg
    assert "row 3:" in msg and "nothing was asked" in msg and "\n" not in msg
    assert "database/... instead of olddb/..." in msg  # the hint: the pages exist under another prefix
    assert asked == []
    # through the CLI: exit 1, one line, no checkpoint or results written
    result = CliRunner().invoke(app, ["batch", str(inp), "--db", str(db), "--results", "res",
                                      "--provider", "offline"])
    assert result.exit_code == 1 and "reference page(s) not found" in result.output
    assert not Path("res").exists() or not list(Path("res").rglob("*.csv"))


def test_a_reference_to_a_page_moved_to_another_section_says_where_it_is_now(isolated_env):
    """Re-ingesting a document can move its pages to other section folders (converter 9: chapter headings as
    sections). Here no ingest recorded what the page held (moved by hand, or by an older ragkit): the error names
    the page of its number, in the CSV's own form, as a page to check by hand, not as where it is now
    (test_refs_update: moves an ingest recorded are followed by their text)."""
    db = make_db(isolated_env)
    old = FRIDGE.replace("操作と機能", "pages_001-010")
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"], ["冷蔵室の温度は？", old]])
    with pytest.raises(RagError) as e:
        B.run_batch(inp, offline(db, isolated_env), progress=False)
    msg = str(e.value)
    assert f"row 2: {old}" in msg and f"hint: {old}: its document's pages moved, and no record says" in msg
    assert f"check by hand whether it is now {FRIDGE} (the same page number)" in msg and "\n" not in msg
    assert " is now " not in msg.split("check by hand")[0]


def test_eval_checks_references_and_pages_as_batch_does(isolated_env):
    """rag eval scored a missing reference silently (Ref Recall 0) and took Page 'p.3' and a Page no reference
    names; now the same one-line errors as rag batch, exit 1, and nothing written."""
    db = make_db(isolated_env)
    head = ["Question", "Reference Document", "Page", "RAG Answer", "Retrieved Files"]
    cases = {
        "missing": (["How do I reset the router?", "database/pdfs/ない文書/page_001.md", "1", "x", ROUTER],
                    r"1 reference page\(s\) not found in the database folder '.*database': row 2: "
                    r"database/pdfs/ない文書/page_001.md.*; nothing was scored"),
        "format": (["How do I reset the router?", ROUTER, "p.3", "x", ROUTER],
                   r"row 2, column 'Page': 'p.3' is not a page number"),
        "other page": (["How do I reset the router?", ROUTER, "7", "x", ROUTER],
                       r"row 2, column 'Page': 7 is not a page of its 'Reference Document' \(page 1\)"),
    }
    for name, (row, pattern) in cases.items():
        inp = write_input(isolated_env / f"{name}.csv", [head, row])
        with pytest.raises(RagError, match=pattern):
            run_eval(inp, offline(db, isolated_env), progress=False)
        result = CliRunner().invoke(app, ["eval", str(inp), "--db", str(db), "--results", "res",
                                          "--provider", "offline"])
        assert result.exit_code == 1 and re.search(pattern, result.output), (name, result.output)
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2
        with pytest.raises(RagError, match=pattern.replace("nothing was scored", "nothing was asked")):
            B.run_batch(inp, offline(db, isolated_env), progress=False)  # the same check in batch
    assert not Path("res").exists() or not list(Path("res").rglob("*.csv"))


def test_references_written_from_another_working_directory_still_name_their_pages(isolated_env, monkeypatch):
    """genqa names pages as they are seen from where it ran ("database/manuals/..."); run from elsewhere with
    --db pointing at that database, the batch found none of them. The database folder's name followed by a page
    that exists under it is that page."""
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"],
                                               ["How do I reset the router?", ROUTER]])
    away = isolated_env / "elsewhere"
    away.mkdir()
    monkeypatch.chdir(away)
    report = B.run_batch(inp, offline(db, away), progress=False)
    rows = read_csv(report.results_path)
    assert rows["Ref TP"].tolist() == ["1"], rows[["Ref TP", "Ref FN", "Retrieved Files"]].to_dict("records")
    # a page that exists under neither reading is still named as missing
    bad = write_input(isolated_env / "bad.csv", [["Question", "Reference Document"],
                                                 ["How do I reset the router?", "database/manuals/none.md"]])
    with pytest.raises(RagError, match="1 reference page"):
        B.run_batch(bad, offline(db, away), progress=False)


def test_references_in_another_database_suggest_db(isolated_env):
    make_db(isolated_env)
    other = make_db(isolated_env / "elsewhere")  # a second database with .ragkit after indexing
    from ragkit.search import open_index

    open_index(other, progress=False)
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"],
                                               ["How do I reset the router?",
                                                "elsewhere/database/manuals/router/setup/page_001.md"]])
    with pytest.raises(RagError, match="try db="):
        B.run_batch(inp, offline(isolated_env / "database", isolated_env), progress=False)


# -- metrics as DESIGN §5 says ---------------------------------------------------------------------------
def test_refusal_of_an_unanswerable_question_passes_whatever_the_judge_says(isolated_env, scripted_server):
    db = make_db(isolated_env)
    q_un, q_ans = "What is the warranty period of the toaster?", "How do I reset the router?"
    inp = write_input(isolated_env / "q.csv", [HEADER, [q_un, "The documents do not say.", "", "", ""],
                                               [q_ans, "Hold the reset button.", ROUTER, "1", "hold reset"]])
    answers = {q_un: ("I cannot answer this from the documents.", []), q_ans: ("I cannot answer this.", [])}
    calls: list[str] = []

    def harsh_judge(body: dict):  # a small model scoring everything 0, as seen on the issue
        calls.append(judge_kind(body))
        if judge_kind(body) == "checklist_verdict":
            return {"content": json.dumps({"items": [{"item": 1, "covered": False, "evidence": ""}],
                                           "extra_points": [], "reason": "no"})}
        if judge_kind(body) == "rubric_verdict":
            return {"content": json.dumps({"accuracy": 0, "completeness": 0, "citations": 0,
                                           "context_relevance": 0, "reasoning": {}, "issues": [],
                                           "strengths": []})}
        return {"content": json.dumps({"correct": False, "reason": "no"})}

    scripted_server.set_responder(agent_responder(answers, judge=harsh_judge))
    report = B.run_batch(inp, openai_settings(scripted_server, db=db, results=isolated_env / "results"),
                         progress=False)
    assert not report.errors, report.errors
    un, ans = report.rows
    assert un["Refused"] == "True" and un["Judge Passed"] == "True" and un["Judge Overall"] == 1.0
    assert un["LLM Accuracy"] == "True" and un["Checklist TN"] == 1
    assert ans["Refused"] == "True" and ans["Judge Passed"] == "False"  # a refusal of an answerable one fails
    assert calls.count("rubric_verdict") == 1  # the rule asked no judge for the unanswerable row
    summary = {r["Metric"]: r for r in report.summary}
    assert summary["Refusal Rate Unanswerable"]["Mean"] == 1.0 and summary["Refusal Rate Answerable"]["Mean"] == 1.0
    assert summary["Refusal Rate Unanswerable"]["Covers"] == "unanswerable"


def test_headline_shows_what_a_user_needs_first(isolated_env):
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", QUESTIONS)
    result = CliRunner().invoke(app, ["batch", str(inp), "--db", str(db), "--results", "res",
                                      "--provider", "offline"])
    assert result.exit_code == 0, result.output
    out = result.output
    for label in ("Ref Recall", "Checklist Recall", "Checklist Precision", "Refused, answerable",
                  "Refused, unanswerable", "covers"):
        assert label in out, label
    for hidden in ("Ref Accuracy", "Ref TN", "Opt Ref"):
        assert hidden not in out, hidden


def test_results_recomputed_independently_agree_row_by_row(isolated_env):
    """From the results CSV alone: every ratio from its four counts, and the summary from the rows."""
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", QUESTIONS)
    report = B.run_batch(inp, offline(db, isolated_env), progress=False)
    rows = read_csv(report.results_path).to_dict("records")
    universe = sum(1 for _ in db.rglob("page_*.md"))
    for r in rows:
        for prefix in ("Checklist", "Ref"):
            c = {k: int(r[f"{prefix} {k}"]) for k in COUNT_KEYS}
            tp, fp, fn = c["TP"], c["FP"], c["FN"]
            want = {"Recall": tp / (tp + fn) if tp + fn else None,
                    "Precision": tp / (tp + fp) if tp + fp else None,
                    "F1": 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None}
            for k, v in want.items():
                got = parse_number(r[f"{prefix} {k}"])
                assert (got is None) == (v is None) and (v is None or got == pytest.approx(v, abs=1e-4)), \
                    (r["Question"], prefix, k)
        retrieved = [x for x in r["Retrieved Files"].splitlines() if x]
        assert int(r["Ref TN"]) + int(r["Ref FP"]) + int(r["Ref TP"]) + int(r["Ref FN"]) <= universe + len(retrieved)
    summary = {s["Metric"]: s for s in read_csv(report.summary_path).to_dict("records")}
    for metric in ("Checklist Recall", "Checklist F1", "Ref Recall", "Ref Precision"):
        vals = [parse_number(r[metric]) for r in rows if parse_number(r[metric]) is not None]
        assert float(summary[metric]["Mean"]) == pytest.approx(sum(vals) / len(vals), abs=1e-4)
        assert int(summary[metric]["Rows"]) == len(vals)
        prefix, name = metric.rsplit(" ", 1)
        sums = {k: sum(int(r[f"{prefix} {k}"]) for r in rows) for k in COUNT_KEYS}
        micro = ratios(sums["TP"], sums["TN"], sums["FP"], sums["FN"])[name]
        assert float(summary[metric]["Micro"]) == pytest.approx(micro, abs=1e-4)
    # mean F1 is never above both mean recall and mean precision any more
    f1 = float(summary["Checklist F1"]["Mean"])
    assert f1 <= max(float(summary["Checklist Recall"]["Mean"]), float(summary["Checklist Precision"]["Mean"]))
    assert summary["Checklist Recall"]["Covers"] == "answerable"
    assert raw_rows(report.results_path)[0][:5] == HEADER


# -- rollback leaves no empty folder ---------------------------------------------------------------------
def test_rollback_removes_folders_created_for_earlier_copies(isolated_env):
    from ragkit.optimize import CopyManager, Journal
    from ragkit.search import open_index

    db = make_db(isolated_env)
    index = open_index(db, progress=False)
    cm = CopyManager(db, index, Journal(db))
    a, _ = cm.place("manuals/router/setup/page_001.md", "manuals/new topic/deeper", ("row", 1))
    b, _ = cm.place("manuals/router/wifi/page_002.md", "manuals/new topic/deeper", ("row", 2))
    assert cm.release(a, ("row", 1), keep=False) == "rolled_back"
    assert (db / "manuals/new topic/deeper").is_dir()  # b is still there
    assert cm.release(b, ("row", 2), keep=False) == "rolled_back"
    assert not (db / "manuals/new topic").exists()  # b's own record had no folders: they were made for a


def test_an_answer_citing_a_copy_found_the_original(isolated_env):
    """The issue's second CSV: it names the original page, the answer cites the optimizer's copy of it."""
    import shutil

    from ragkit.evaluate.scoring import with_copies

    db = make_db(isolated_env)
    copy = db / "manuals/router/reset help/page_001.md"
    copy.parent.mkdir(parents=True)
    shutil.copy2(db / "manuals/router/setup/page_001.md", copy)
    cited = "database/manuals/router/reset help/page_001.md"
    assert with_copies(ROUTER, [cited], db) == f"{ROUTER}|{cited}"
    assert with_copies(WIFI, [cited], db) == WIFI  # different content: never merged
    edited = db / "manuals/router/edited/page_001.md"
    edited.parent.mkdir(parents=True)
    edited.write_bytes(copy.read_bytes() + b"\nmore")
    assert with_copies(ROUTER, ["database/manuals/router/edited/page_001.md"], db) == ROUTER


def test_a_folder_that_is_no_database_is_named_and_left_untouched(isolated_env):
    """`--db` given a folder of PDFs (or an empty one): search said "no matching pages" with exit 0 and wrote an
    index (.ragkit) into it; a file given as --db was named as an unreadable index configuration."""
    pdfs = isolated_env / "my-pdfs"
    pdfs.mkdir()
    (pdfs / "report.pdf").write_bytes(b"%PDF-1.4\n")
    inp = write_input(isolated_env / "q.csv", [["Question"], ["How do I reset the router?"]])
    runner = CliRunner()
    for args in (["search", "router"], ["search", "--embed", "router"], ["ask", "How do I reset the router?"],
                 ["batch", str(inp)]):
        result = runner.invoke(app, [*args, "--db", str(pdfs), "--provider", "offline"] if args[0] != "search"
                               else [*args, "--db", str(pdfs)])
        assert result.exit_code == 1, (args, result.output)
        assert f"{pdfs}: not a ragkit database (no page files)" in result.output, result.output
        assert "Traceback" not in result.output
    assert sorted(p.name for p in pdfs.iterdir()) == ["report.pdf"]  # no .ragkit written into it
    afile = isolated_env / "afile"
    afile.write_text("x")
    for args in (["search", "router", "--db", str(afile)], ["ingest", str(pdfs), "--db", str(afile)]):
        result = runner.invoke(app, args)
        assert result.exit_code != 0 and f"{afile}: is a file, not a database folder" in result.output, \
            result.output
    # a database is still a database: page files, or an index of one that has none left
    db = make_db(isolated_env)
    assert runner.invoke(app, ["search", "router", "--db", str(db)]).exit_code == 0
