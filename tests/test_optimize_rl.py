"""The optimizer and its RL loop through the real openai client against the scripted server, and offline."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pandas as pd
import pytest
from fakeserver import TEST_KEY, model_tool_results, openai_settings
from test_optimize import PAGES, files, make_db, offline_settings, optimize_rows

from ragkit.core.csvio import read_csv, write_csv
from ragkit.optimize import MAX_ATTEMPTS, journal_dir
from ragkit.search import open_index

ORIGINAL = "appliances/fridge/care/page_011.md"
DECOY = "appliances/fridge/ice/page_020.md"
# The user's words ("ice box", "thaw") are not the manual's ("freezer", "defrost"): search misses the page.
QUESTION = "How often does the ice box thaw itself?"
RL_PAGES = {**PAGES, DECOY: ("Fridge manual", "ice", 20, "# Ice maker\nThe ice maker fills the ice box with "
                                                         "20 cubes. Empty the ice box often.")}


@pytest.fixture
def db(isolated_env) -> Path:
    return make_db(isolated_env, RL_PAGES)


class Model:
    """Plays the LLM for the scripted server. Folder proposals come from `propose(missed_page, n, prompt)`.
    The agent browses like a person (DESIGN §2): it lists the fridge manual's folders, searches inside the
    folder whose name shares the most words with the question (two at least; else it searches everything),
    then cites what `cite(question, ranked_paths)` picks (by default the top hit); the reading that writes the
    agent's answer cites that same page among the pages it is given."""

    def __init__(self, propose, cite=None) -> None:
        self.propose = propose
        self.cite = cite or (lambda q, paths: paths[:1])
        self.proposal_prompts: list[str] = []
        self.asked: list[str] = []
        self.found: dict[str, list[str]] = {}  # question -> the pages its last agent turn cited
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> dict:
        msgs = body["messages"]
        if "reorganise a document database" in str(msgs[0].get("content")):
            prompt = "\n".join(str(m.get("content")) for m in msgs if m["role"] == "user")
            page = re.search(r"Missed page: (.+)", prompt).group(1).strip()
            with self._lock:
                self.proposal_prompts.append(prompt)
                n = sum(1 for p in self.proposal_prompts if f"Missed page: {page}" in p)
            return {"content": json.dumps({"folder": self.propose(page, n, prompt), "reason": "scripted",
                                           "new_folder": True})}
        question = next(m["content"] for m in msgs if m["role"] == "user")
        if body.get("tools") is None:  # the reading that writes the agent's answer: the page it found says it
            question = question.removeprefix("Question: ").split("\n", 1)[0]
            blocks = re.findall(r"^=== Search result \[(\d+)\]: (.+?\.md) \(page", msgs[-1]["content"], re.MULTILINE)
            with self._lock:
                found = self.found.get(question, [])
            cited = [f"[{n}]" for n, path in blocks if path in found]
            return {"content": json.dumps({"answer": "Every 12 hours." if cited else "I cannot answer this from "
                                           "the documents.", "sources": cited, "refused": not cited})}
        tool_turns = len(model_tool_results(msgs))
        if tool_turns == 0:
            with self._lock:
                self.asked.append(question)
            return {"tool_calls": [("list_dir", {"path": "appliances/fridge"})]}
        if tool_turns == 1:
            words = set(re.findall(r"\w+", question.lower()))
            if {"ice", "thaw"} <= words:  # a model knows what the manual calls it
                words |= {"freezer", "defrosts"}
            folders = re.findall(r"^  (.+)/  \(", msgs[-1]["content"], re.MULTILINE)
            overlap = {f: len(words & set(f.rsplit("/", 1)[-1].lower().split())) for f in folders}
            best = max(folders, key=lambda f: overlap[f], default="")
            path = best if best and overlap[best] >= 2 else ""
            return {"tool_calls": [("search", {"query": question, "path": path, "k": 3})]}
        paths = re.findall(r"^\d+\. (.+?\.md) \(page", msgs[-1]["content"], re.MULTILINE)
        cited = self.cite(question, paths)
        with self._lock:
            self.found[question] = list(cited)
        return {"content": json.dumps({"answer": "Every 12 hours." if cited else "I cannot answer this from the "
                                       "documents.", "sources": cited, "refused": not cited})}


def rows_for(db: Path, questions: list[tuple[str, str, str]]) -> list[dict]:
    """Batch-like result rows: (question, reference page, page the first run retrieved)."""
    return [{"Question": q, "Reference Document": f"database/{ref}", "Retrieved Files": f"database/{got}"}
            for q, ref, got in questions]


def write_input(db: Path, rows: list[dict]) -> Path:
    csv = db.parent / "questions.csv"
    write_csv(pd.DataFrame([{"Question": r["Question"], "Reference Document": r["Reference Document"]}
                            for r in rows]), csv)
    return csv


def test_batch_with_rl_keeps_the_copy_that_lets_the_agent_find_the_page(db, scripted_server):
    from ragkit.evaluate.batch import run_batch

    model = Model(lambda page, n, prompt: "appliances/fridge/freezer defrosts")
    scripted_server.set_responder(model)
    csv = db.parent / "questions.csv"
    write_csv(pd.DataFrame([{"Question": QUESTION, "Reference Document": f"database/{ORIGINAL}"}]), csv)
    before_csv = csv.read_bytes()
    settings = openai_settings(scripted_server, db=db, results=db.parent / "results", workers=2)
    report = run_batch(csv, settings, enable_rl=True, progress=False)

    assert report.errors == [] and scripted_server.unscripted == 0
    copy = "appliances/fridge/freezer defrosts/page_011.md"
    assert files(db) - set(RL_PAGES) == {copy}  # the one copy that helped, nothing else
    assert oct((db / copy).stat().st_mode & 0o777) == oct((db / ORIGINAL).stat().st_mode & 0o777)
    assert copy in open_index(db).pages()
    opt = report.optimize
    assert (opt.analysed, opt.fixed, opt.created, opt.kept, opt.rolled_back) == (1, 1, 1, 1, 0)
    assert (opt.recall_before, opt.recall_after) == (0.0, 1.0)
    cell = f"database/{ORIGINAL}|database/{copy}"
    # the input CSV names the copy; the previous version is kept as a backup
    assert list(read_csv(csv)["Optimized Reference Document"]) == [cell]
    assert opt.backup_path.read_bytes() == before_csv
    # the results show the final attempt
    res = read_csv(report.results_path)
    row = res.iloc[0]
    assert row["Attempts"] == "1" and row["Optimized Reference Document"] == cell
    assert row["Retrieved Files"] == f"database/{copy}" and row["Opt Ref Recall"] == "1.0"
    # the copy has the original's content: a CSV naming only the original still counts it as found
    assert row["Ref Recall"] == "1.0"
    summary = read_csv(report.summary_path)
    text = summary.to_csv()
    assert "Train Ref Recall Before Optimize" in text and "Optimize Copies Kept" in text
    # the model saw the question, the page (trimmed) and the folder tree with page counts
    prompt = model.proposal_prompts[0]
    assert QUESTION in prompt and "automatically every 12 hours" in prompt
    listing = prompt.split("page counts include sub-folders):\n", 1)[1].splitlines()
    assert listing[:3] == ["appliances/ (6 pages)", "appliances/fridge/ (5 pages)", "appliances/fridge/care/ (2 pages)"]
    assert "appliances/washer/basics/ (1 page)" in listing
    assert "finance" not in prompt  # only the page's own scope
    assert TEST_KEY not in text and TEST_KEY not in res.to_csv()
    assert list(journal_dir(db).glob("*.jsonl")) == []


def test_a_copy_that_never_helps_is_rolled_back_five_times(db, scripted_server):
    model = Model(lambda page, n, prompt: f"appliances/try {n}", cite=lambda q, paths: [DECOY])
    scripted_server.set_responder(model)
    rows = rows_for(db, [(QUESTION, ORIGINAL, DECOY)])
    csv = write_input(db, rows)
    before_csv = csv.read_bytes()
    index = open_index(db)
    report = optimize_rows(rows, input_csv=csv, settings=openai_settings(scripted_server, db=db),
                             enable_rl=True, index=index, progress=False)
    assert report.errors == []
    assert len(model.asked) == MAX_ATTEMPTS and len(model.proposal_prompts) == MAX_ATTEMPTS
    assert (report.created, report.kept, report.rolled_back, report.fixed) == (5, 0, 5, 0)
    assert [c.copy for c in report.copies] == [f"appliances/try {n}/page_011.md" for n in range(1, 6)]
    assert all(c.outcome == "rolled_back" for c in report.copies)
    # nothing left: no file, no folder, no index entry, no journal; the input CSV untouched
    assert files(db) == set(RL_PAGES) and set(index.pages()) == set(RL_PAGES)
    assert not any(p.name.startswith("try") for p in (db / "appliances").iterdir())
    assert list(journal_dir(db).glob("*.jsonl")) == []
    assert csv.read_bytes() == before_csv and report.csv_path is None
    # each later attempt was told what failed before
    last = model.proposal_prompts[-1]
    assert "Earlier attempts that did NOT help" in last
    assert all(f"appliances/try {n}:" in last for n in range(1, 5))
    assert f"retrieved {DECOY}" in last
    row = report.rows[0]
    assert row["Attempts"] == MAX_ATTEMPTS and "Optimized Reference Document" not in row
    assert row["Ref Recall"] == 0.0 and report.recall_after == 0.0


def test_hostile_proposals_never_leave_the_database(db, scripted_server, tmp_path):
    hostile = {
        "appliances/fridge/care/page_011.md": ["../../etc", "/etc/cron.d"],
        "appliances/fridge/care/page_010.md": ["appliances\\..\\..\\x", "appliances/x\x00y"],
        "appliances/fridge/setup/page_001.md": ["CON"],
        "appliances/fridge/setup/page_002.md": ["y" * 300],
        "appliances/washer/basics/page_001.md": ["finance/stolen", "C:/Windows/Temp"],
    }
    model = Model(lambda page, n, prompt: hostile[page][n - 1])
    scripted_server.set_responder(model)
    rows = rows_for(db, [(f"question about {p}", p, DECOY) for p in hostile])
    csv = write_input(db, rows)
    outside_before = {p for p in tmp_path.rglob("*") if db not in p.parents}
    report = optimize_rows(rows, input_csv=csv, settings=openai_settings(scripted_server, db=db),
                             enable_rl=False, progress=False)
    assert report.errors == []
    # outside the database only the input CSV's backup appeared
    assert {p for p in tmp_path.rglob("*") if db not in p.parents} - outside_before == {report.backup_path}
    made = {c.original: c for c in report.copies}
    assert made["appliances/fridge/setup/page_001.md"].copy == "appliances/_CON/page_001.md"
    assert made["appliances/fridge/setup/page_002.md"].copy == f"appliances/{'y' * 60}/page_002.md"
    for page in ("appliances/fridge/care/page_011.md", "appliances/fridge/care/page_010.md",
                 "appliances/washer/basics/page_001.md"):  # twice refused: the deterministic rule decides
        assert made[page].proposer == "fallback" and made[page].copy.startswith("appliances/")
        assert "refused" in made[page].reason
    assert all(c.copy.startswith("appliances/") for c in report.copies)
    assert files(db) - set(RL_PAGES) == {c.copy for c in report.copies}
    refusals = [p for p in model.proposal_prompts if "That folder was refused" in p]
    assert len(refusals) == 3  # the model was told why, once per refused first proposal


def test_two_rows_missing_the_same_page_share_one_copy(db, scripted_server):
    other = "When does the ice box thaw?"
    # the agent finds the copy for QUESTION only; for the other question it keeps citing the decoy
    model = Model(lambda page, n, prompt: "appliances/fridge/freezer defrosts",
                  cite=lambda q, paths: paths[:1] if q == QUESTION else [DECOY])
    scripted_server.set_responder(model)
    rows = rows_for(db, [(QUESTION, ORIGINAL, DECOY), (other, ORIGINAL, DECOY)])
    csv = write_input(db, rows)
    index = open_index(db)
    report = optimize_rows(rows, input_csv=csv, settings=openai_settings(scripted_server, db=db, workers=2),
                             enable_rl=True, index=index, progress=False)
    assert report.errors == []
    copy = "appliances/fridge/freezer defrosts/page_011.md"
    assert files(db) - set(RL_PAGES) == {copy} and copy in index.pages()
    assert report.kept == 1
    assert report.rows[0]["Optimized Reference Document"] == f"database/{ORIGINAL}|database/{copy}"
    assert report.rows[0]["Attempts"] == 1
    assert 2 <= report.rows[1]["Attempts"] <= MAX_ATTEMPTS  # tried until no folder was left or 5 attempts
    assert "Optimized Reference Document" not in report.rows[1]
    assert list(read_csv(csv)["Optimized Reference Document"]) == [f"database/{ORIGINAL}|database/{copy}", ""]
    assert report.fixed == 1 and report.recall_after == 0.5


def test_model_failure_is_a_row_error_and_leaves_nothing(db, scripted_server):
    scripted_server.set_responder(lambda body: {"status": 400, "_message": "bad request (scripted)"})
    rows = rows_for(db, [(QUESTION, ORIGINAL, DECOY)])
    csv = write_input(db, rows)
    report = optimize_rows(rows, input_csv=csv, settings=openai_settings(scripted_server, db=db),
                             enable_rl=True, progress=False)
    assert len(report.errors) == 1 and report.errors[0].startswith("row 2: attempt 1:")
    assert TEST_KEY not in report.errors[0]
    assert files(db) == set(RL_PAGES) and report.created == 0


# -- offline ------------------------------------------------------------------------------------------
def test_offline_rl_loop_end_to_end(db):
    """The whole loop without a model: the batch's offline answer misses the page, the deterministic
    proposer tries its folders in order, every re-ask is scored, and what did not help is removed."""
    from ragkit.answer import ask
    from ragkit.optimize import offline_proposals

    settings = offline_settings(db)
    index = open_index(db)
    first = ask(QUESTION, settings, index=index)
    assert first.refused  # the page says "freezer defrosts", the user asks about the "ice box" thawing
    rows = [{"Question": QUESTION, "Reference Document": f"database/{ORIGINAL}",
             "Retrieved Files": "\n".join(s.path for s in first.sources)}]
    csv = write_input(db, rows)
    before_csv = csv.read_bytes()
    report = optimize_rows(rows, input_csv=csv, settings=settings, enable_rl=True, index=index, progress=False)
    expected = [f"{f}/page_011.md" for f, _ in offline_proposals(QUESTION, ORIGINAL,
                                                                 (db / ORIGINAL).read_text("utf-8"))]
    # the question's words ("ice box", "thaw") are not on the page, so no folder may carry them: the
    # deterministic proposer names folders with the page's heading and key terms, which this offline engine
    # may or may not then find. Either way every attempt is scored and only a copy that helped remains.
    attempts = report.rows[0]["Attempts"]
    assert report.errors == [] and report.analysed == 1 and 1 <= attempts <= MAX_ATTEMPTS
    assert [c.copy for c in report.copies] == expected[:attempts]
    assert not any(w in c.copy for c in report.copies for w in ("ice", "box", "thaw"))
    assert {c.proposer for c in report.copies} == {"offline"}
    kept = [c.copy for c in report.copies if c.outcome == "kept"]
    assert (report.created, report.kept, report.rolled_back) == (attempts, len(kept), attempts - len(kept))
    assert len(kept) <= 1 and files(db) == set(RL_PAGES) | set(kept) and set(index.pages()) == files(db)
    for c in report.copies:  # a rolled-back copy leaves no folder behind
        if c.outcome == "rolled_back":
            assert not (db / c.copy).parent.exists()
    if kept:
        assert f"database/{ORIGINAL}|database/{kept[0]}" in csv.read_text("utf-8-sig")
        assert report.rows[0]["Opt Ref Recall"] == 1.0 and report.recall_after == 1.0
    else:
        assert csv.read_bytes() == before_csv and report.recall_after == 0.0
    # results never list a file that is gone
    for cell in (report.rows[0]["Retrieved Files"], report.rows[0].get("Pages Read", "")):
        for path in filter(None, str(cell).splitlines()):
            assert (db.parent / path).is_file(), path


def test_offline_loop_stops_cleanly_when_no_folder_is_left(isolated_env):
    db = make_db(isolated_env, {"notes/page_001.md": ("Notes", "", 1, "# Fridge\nThe fridge hums quietly."),
                                "notes/page_002.md": ("Notes", "", 2, "# Washer\nThe washer spins fast.")})
    rows = [{"Question": "What colour is the sky?", "Reference Document":
             "database/notes/page_001.md", "Retrieved Files": ""}]
    csv = write_input(db, rows)
    report = optimize_rows(rows, input_csv=csv, settings=offline_settings(db), enable_rl=True, progress=False)
    # only two distinct folders exist for a page directly under its category: two attempts, then it stops
    assert report.errors == [] and report.rows[0]["Attempts"] == 2
    # the question's words are not on the page: the page's heading and its own key terms name the folders
    assert [c.copy for c in report.copies] == ["notes/Fridge/page_001.md", "notes/fridge hums quietly/page_001.md"]
    assert (report.created, report.rolled_back, report.kept) == (2, 2, 0)
    assert files(db) == {"notes/page_001.md", "notes/page_002.md"}


# -- the before/after figures --------------------------------------------------------------------------
FREEZER_Q = "How often does the freezer defrost?"
MISSED_Q = "Which gizmo reboots the washer?"  # no word of the washer page: the offline engine misses it
WASHER = "appliances/washer/basics/page_001.md"


def _earlier_copy(db: Path) -> str:
    """A copy an earlier run kept (the optimizer's own CopyManager), named in the CSV's optimized cell."""
    from ragkit.optimize import CopyManager, Journal

    journal = Journal(db)
    manager = CopyManager(db, open_index(db), journal)
    rel, _ = manager.place(ORIGINAL, "appliances/fridge/freezer defrosts", "earlier run")
    manager.release(rel, "earlier run", keep=True)
    journal.close()
    return rel


def _counting_ask(calls: list[str]):
    """The real agent.ask, counted: how many questions a run asked."""
    from ragkit.answer import ask

    def answer(question, settings, **kw):
        calls.append(question)
        return ask(question, settings, **kw)
    return answer


@pytest.mark.parametrize("mode", ["enable_rl", "optimize"])
def test_after_counts_an_earlier_runs_copy_as_the_batch_does(db, mode):
    """A second `--enable-rl --holdout 0` kept nothing and left the database byte-identical, yet printed "before
    0.625 -> after 0.500": the batch's Ref Recall counts a retrieved copy (byte-for-byte the page) as the page,
    the re-asked "after" counted only this run's copies. Now both count it; with nothing kept after = before
    and no question is asked again; with a copy kept (--optimize here) the re-ask counts the earlier copy too."""
    from ragkit.evaluate.batch import run_batch

    copy = _earlier_copy(db)
    csv = db.parent / "questions.csv"
    write_csv(pd.DataFrame([
        {"Question": FREEZER_Q, "Reference Document": f"database/{ORIGINAL}",
         "Optimized Reference Document": f"database/{ORIGINAL}|database/{copy}"},
        {"Question": MISSED_Q, "Reference Document": f"database/{WASHER}", "Optimized Reference Document": ""},
    ]), csv)
    calls: list[str] = []
    settings = offline_settings(db, results=db.parent / "results", workers=1)
    report = run_batch(csv, settings, holdout=0, progress=False, answer_fn=_counting_ask(calls), **{mode: True})
    assert report.errors == []
    assert [r["Ref Recall"] for r in report.rows] == [1.0, 0.0]  # the batch found the page through the copy
    train = report.measure.get("train")
    assert (train.before, train.rows_before) == (0.5, 2)
    assert (train.after, train.rows_after) == (0.5, 2), report.measure.lines()
    summary = {r["Metric"]: r for r in read_csv(report.summary_path).to_dict("records")}
    assert float(summary["Train Ref Recall After Optimize"]["Mean"]) == 0.5
    if mode == "enable_rl":
        assert report.optimize.kept == 0 and report.optimize.rolled_back > 0
        assert report.measure.unchanged and "after = before" in report.measure.lines()[-1]
        assert calls.count(FREEZER_Q) == 1  # asked by the batch only: nothing was asked again to measure
    else:
        assert report.optimize.kept == 1 and not report.measure.unchanged
        assert calls.count(FREEZER_Q) == 2  # the batch, then the "after" measurement


def test_nothing_to_copy_names_the_training_rows_and_asks_nothing_again(db):
    """`--optimize` said "no missed reference pages; nothing to do" although a held-out row had missed one, then
    asked every question again. Now it says what it looked at, and asks nothing again."""
    from typer.testing import CliRunner

    from ragkit.cli import app

    csv = db.parent / "questions.csv"
    write_csv(pd.DataFrame([{"Question": FREEZER_Q, "Reference Document": f"database/{ORIGINAL}"},
                            {"Question": MISSED_Q, "Reference Document": f"database/{WASHER}"}]), csv)
    result = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--results", str(db.parent / "res"),
                                      "--provider", "offline", "--optimize", "--holdout", "0.5"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert ("optimize: no missed reference pages among the 1 training row(s) (1 held-out row(s) missed one: "
            "held-out rows measure the copies, they never drive one); nothing copied") in out
    assert "after = before (no question asked again)" in out
    assert "nothing to do" not in out


def test_optimize_lists_its_copies_and_undo_removes_them(db):
    """`--optimize --holdout 0` kept 4 copies that helped nothing, named none of them, and nothing undid them.
    Now the run prints every copy it kept and the command that undoes it; `rag optimize undo` removes them,
    the folders they made, their index entries and their aliases in the input CSV, and the next batch runs."""
    from typer.testing import CliRunner

    from ragkit.cli import app

    csv = db.parent / "questions.csv"
    write_csv(pd.DataFrame([{"Question": FREEZER_Q, "Reference Document": f"database/{ORIGINAL}"},
                            {"Question": MISSED_Q, "Reference Document": f"database/{WASHER}"}]), csv)
    before_pages = set(open_index(db).pages())
    before_csv = csv.read_bytes()
    run = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--results", str(db.parent / "res"),
                                   "--provider", "offline", "--optimize", "--holdout", "0"])
    assert run.exit_code == 0, run.output
    out = " ".join(run.output.split())
    copies = re.findall(r"optimize: kept copy database/(\S.*?\.md)", run.output)
    assert copies and all((db / c).is_file() for c in copies), run.output
    assert "--optimize keeps every copy it makes" in out
    run_id = re.search(r"`rag optimize undo (\S+) --db ", out).group(1)
    assert "Optimized Reference Document" in read_csv(csv).columns
    listed = CliRunner().invoke(app, ["optimize", "undo", "--list", "--db", str(db)])
    assert run_id in listed.output and f"{len(copies)} copies" in listed.output

    # the page was converted again meanwhile: ingest rewrote the copy from it (ingest.copies); still the run's copy
    refreshed = (db / WASHER).read_text(encoding="utf-8") + "A new line.\n"
    (db / WASHER).write_text(refreshed, encoding="utf-8")
    (db / copies[0]).write_text(refreshed, encoding="utf-8")
    undo = CliRunner().invoke(app, ["optimize", "undo", "--db", str(db)])
    assert undo.exit_code == 0, undo.output
    assert f"optimize undo {run_id}: removed {len(copies)} copies" in undo.output
    assert files(db) == set(RL_PAGES) and set(open_index(db).pages()) == before_pages
    assert csv.read_bytes() == before_csv and f"restored {csv} as it was before the run" in undo.output
    assert "no optimization run" in CliRunner().invoke(app, ["optimize", "undo", "--list", "--db", str(db)]).output
    again = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--results", str(db.parent / "res"),
                                     "--provider", "offline"])
    assert again.exit_code == 0, again.output


def test_optimize_keeps_a_shift_jis_sheet_as_it_was_and_undo_gives_its_bytes_back(db):
    """The tester's sheet (s53, M1): `--optimize` rewrote their Shift_JIS/CRLF question CSV as UTF-8 with a BOM,
    put `Optimized Reference Document` before 担当者/メモ, dropped the padding column, and named the copy by an
    absolute path next to a database-relative original; `rag optimize undo` then wrote it a second time instead
    of giving the original back. Now each row keeps its bytes and gets the column at its end, the copy is named
    like its original, and undo restores the file byte for byte, or, when the user changed it since, takes out
    only the aliases and says so."""
    from typer.testing import CliRunner

    from ragkit.cli import app
    from ragkit.core.references import reference_groups

    csv = db.parent / "questions.csv"
    sheet = ("No,Question,Reference Document,担当者,メモ,\r\n"
             f"1,{MISSED_Q},{WASHER},山田,髙橋さん確認済み①,\r\n"  # the page named relative to the database
             ",,,,,\r\n"
             f"2,{FREEZER_Q},database/{ORIGINAL},佐藤,～,\r\n")  # ... and relative to the project
    original = sheet.encode("cp932").replace("髙".encode("cp932"), b"\xee\xe0")  # NEC-selected code, as Excel's
    csv.write_bytes(original)
    batch = ["batch", str(csv), "--db", str(db), "--results", str(db.parent / "res"), "--provider", "offline",
             "--optimize", "--holdout", "0"]

    def optimized() -> bytes:
        run = CliRunner().invoke(app, batch)
        assert run.exit_code == 0, run.output
        return csv.read_bytes()

    after = optimized()
    old, new = original.split(b"\r\n"), after.split(b"\r\n")
    assert len(new) == len(old) and all(n.startswith(o) for o, n in zip(old, new, strict=True)), after
    assert new[0] == old[0] + b",Optimized Reference Document"
    df = read_csv(csv)
    assert list(df.columns) == ["No", "Question", "Reference Document", "担当者", "メモ",
                                "Optimized Reference Document"]
    cells = dict(zip(df["Question"], df["Optimized Reference Document"], strict=True))
    assert reference_groups(cells[MISSED_Q])[0][0] == WASHER
    copy = reference_groups(cells[MISSED_Q])[0][1]
    assert (db / copy).is_file() and not copy.startswith(("database/", "/"))  # named like its original
    assert all(a.startswith("database/") for g in reference_groups(cells[FREEZER_Q]) for a in g)

    # the user edits a memo after the run: undo cannot give the old bytes back, only takes the aliases out
    edited = after.replace("佐藤".encode("cp932"), "鈴木".encode("cp932"))
    csv.write_bytes(edited)
    undo = CliRunner().invoke(app, ["optimize", "undo", "--db", str(db)])
    assert undo.exit_code == 0, undo.output
    assert "was not restored byte for byte (it was changed since the run)" in " ".join(undo.output.split())
    reverted = csv.read_bytes()
    assert reverted.split(b"\r\n")[0] == new[0] and "鈴木".encode("cp932") in reverted
    assert set(read_csv(csv)["Optimized Reference Document"]) == {""} and (db / copy).exists() is False

    # unchanged since the run: undo gives the file back as it was, byte for byte
    assert optimized() != reverted
    undo = CliRunner().invoke(app, ["optimize", "undo", "--db", str(db)])
    assert undo.exit_code == 0, undo.output
    assert csv.read_bytes() == reverted and "as it was before the run (byte for byte" in " ".join(undo.output.split())
