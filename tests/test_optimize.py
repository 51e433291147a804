"""Folder optimization without the agent: proposals made safe, copies, the journal, the input CSV."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from pagetree import write_pages

from ragkit.core.config import Settings
from ragkit.core.csvio import read_csv, write_csv
from ragkit.core.errors import PathEscapeError
from ragkit.core.paths import iter_pages, page_keys
from ragkit.optimize import (
    CopyManager,
    Journal,
    add_alias,
    folder_listing,
    journal_dir,
    key_phrase,
    offline_proposals,
    optimize_missed,
    recover_journal,
    validate_folder,
)
from ragkit.search import open_index

REPO = Path(__file__).resolve().parents[1]

PAGES = {
    "appliances/fridge/setup/page_001.md": ("Fridge manual", "setup", 1,
                                            "# Installing the fridge\nPlace the fridge on a level floor. "
                                            "Leave 5 cm of space behind it for air."),
    "appliances/fridge/setup/page_002.md": ("Fridge manual", "setup", 2,
                                            "# Connecting water\nConnect the water line to the inlet valve "
                                            "at the back."),
    "appliances/fridge/care/page_010.md": ("Fridge manual", "care", 10,
                                           "# Cleaning\nWipe the shelves with a soft cloth and mild soap."),
    "appliances/fridge/care/page_011.md": ("Fridge manual", "care", 11,
                                           "# Defrosting\nThe freezer defrosts automatically every 12 hours."),
    "appliances/washer/basics/page_001.md": ("Washer manual", "basics", 1,
                                             "# Programs\nThe cotton program washes at 40 degrees."),
    "finance/report2024/summary/page_003.md": ("Annual report", "summary", 3,
                                               "# Revenue\nRevenue grew 12 percent in 2024."),
}


def make_db(root: Path, pages: dict = PAGES) -> Path:
    return write_pages(root / "database", pages)


@pytest.fixture
def db(isolated_env) -> Path:
    return make_db(isolated_env)


def offline_settings(db: Path, **kw) -> Settings:
    return Settings(db=db, provider="offline", provider_reason="test", cache=False, **kw)


def optimize_rows(rows: list[dict], *, settings: Settings, index=None, strategy: str = "agent", **kw):
    """optimize_missed with the asker and scorer a batch gives it (the batch's answer function and scorer)."""
    from ragkit.answer import ask
    from ragkit.core.llm import get_provider
    from ragkit.evaluate.scoring import Scorer

    index = index if index is not None else open_index(settings.db)
    provider = get_provider(settings)
    scorer = Scorer.create(settings, rows[0].keys() if rows else (), index=index)
    return optimize_missed(rows, settings=settings, scorer=scorer, index=index, provider=provider,
                           asker=lambda q: ask(q, settings, strategy=strategy, index=index, provider=provider), **kw)


def files(db: Path) -> set[str]:
    return set(iter_pages(db))


# -- proposals made safe ------------------------------------------------------------------------------
ORIGINAL = "appliances/fridge/care/page_011.md"


@pytest.mark.parametrize("raw", [
    "../../etc", "appliances/../../etc", "/etc", "/tmp/x", "C:/Windows", "~/x", "appliances\\x",
    "..\\..\\etc", "appliances/x\x00y", "", "   ", None, 42,
    "finance/hidden",  # another category
    "appliances/fridge/care",  # where the page already is
    "appliances/a/b/c/d/e",  # too deep
    "appliances/fridge/care/page_011.md/x",  # runs into a file
])
def test_hostile_folders_are_refused(db, raw):
    with pytest.raises((ValueError, PathEscapeError)):
        validate_folder(db, raw, original=ORIGINAL)


@pytest.mark.parametrize(("raw", "want"), [
    ("defrost help", "appliances/defrost help"),  # relative to the scope
    ("appliances/fridge/defrost", "appliances/fridge/defrost"),
    ("database/appliances/fridge/defrost", "appliances/fridge/defrost"),  # Reference Document form
    ("./appliances//fridge/./defrost/", "appliances/fridge/defrost"),
    ("appliances/fridge/defrost/page_011.md", "appliances/fridge/defrost"),  # a page path: its folder
    ("appliances/CON", "appliances/_CON"),
    ("appliances/aux.txt", "appliances/_aux.txt"),
    ("appliances/.ragkit", "appliances/ragkit"),  # never a hidden folder the index skips
    ("appliances/a<b>:c|d?*e", "appliances/a b c d e"),
    ("appliances/tab\there\nnewline", "appliances/tab here newline"),
    ("冷蔵庫 霜取り", "appliances/冷蔵庫 霜取り"),
])
def test_proposals_are_sanitised_inside_the_scope(db, raw, want):
    assert validate_folder(db, raw, original=ORIGINAL) == want


def test_long_names_are_cut_and_paths_bounded(db):
    folder = validate_folder(db, "appliances/" + "x" * 300, original=ORIGINAL)
    assert folder == "appliances/" + "x" * 60
    with pytest.raises(ValueError, match="too long"):
        validate_folder(db, "/".join(["y" * 60] * 4), original=ORIGINAL)


def test_symlink_out_of_the_scope_is_refused(db, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (db / "appliances" / "link").symlink_to(outside)
    (db / "appliances" / "tofinance").symlink_to(db / "finance")
    with pytest.raises(PathEscapeError):
        validate_folder(db, "appliances/link/x", original=ORIGINAL)
    with pytest.raises(PathEscapeError):
        validate_folder(db, "appliances/tofinance/x", original=ORIGINAL)


def test_invisible_names_are_dropped_and_a_folder_that_is_the_scope_says_so(db):
    """Report s56-sec L3: `\u202eevil`, `\u200b` and a lone combining mark (`.\u0301.` became `\u0301`) were
    accepted as folder names, invisible or shown reversed. L6: `appliances/...` was refused with "'appliances'
    leaves 'appliances'"."""
    assert validate_folder(db, "appliances/\u202eevil\u202c", original=ORIGINAL) == "appliances/evil"
    assert validate_folder(db, "appliances/.\u0301./x\u200b", original=ORIGINAL) == "appliances/x"
    for raw, dropped in (("appliances/...", "..."), ("appliances/\u200b", "\u200b"),
                         ("appliances/.\u0301.", ".\u0301.")):
        with pytest.raises(ValueError) as e:
            validate_folder(db, raw, original=ORIGINAL)
        assert str(e.value) == (f"{raw!r} names 'appliances' itself once {dropped!r} (no usable folder name) is "
                                "dropped; name a folder inside it")


def test_key_phrase_per_language():
    assert key_phrase("How often does the freezer defrost automatically?") == "freezer defrost automatically"
    assert key_phrase("製氷機の掃除方法を教えてください") == "製氷機 掃除方法"
    assert key_phrase("냉장고의 온도를 어떻게 설정합니까?") == "냉장고 온도 설정합니까"
    assert key_phrase("???") == "questions"
    assert len(key_phrase("supercalifragilistic " * 20)) <= 60


def test_offline_proposals_are_deterministic_and_valid(db):
    text = (db / ORIGINAL).read_text(encoding="utf-8")
    q = "Does the freezer in the ice box thaw by itself?"
    props = offline_proposals(q, ORIGINAL, text)
    assert props == offline_proposals(q, ORIGINAL, text)
    # names come from the page and what the question asks: "freezer" is on the page; "ice box", "thaw" and
    # "itself" are the asker's words, not the page's, and name nothing
    assert [f for f, _ in props] == [
        "appliances/fridge/freezer",  # the asked terms, in the page's document
        "appliances/fridge/Defrosting",  # the page heading
        "appliances/freezer",
        "appliances/fridge/care/freezer",
        "appliances/fridge/defrosting freezer defrosts",  # the page's own key terms
        "appliances/fridge/freezer Defrosting",  # asked terms with the page heading
        "appliances/freezer Defrosting",
        "appliances/defrosting freezer defrosts",
    ]
    folders = [validate_folder(db, f, original=ORIGINAL) for f, _ in props]
    assert len(set(folders)) == len(folders)


def test_folder_names_from_a_heading_are_short_topics_cut_at_a_natural_boundary(db):
    """A folder the optimizer made was a page's first line cut at 60 characters, mid-sentence:
    `４ 防腐剤、紫外線吸収剤及びタール色素の配合の制限化粧品に配合される防腐剤（化粧品中の微生物の発育を抑制することを目的と`.
    A name from a heading is now its topic: no leading number, up to the first clause end (（ 。 「 ：), within
    24 characters in Japanese (40 otherwise) cut where a word ends."""
    line = ("４ 防腐剤、紫外線吸収剤及びタール色素の配合の制限化粧品に配合される防腐剤（化粧品中の微生物の発育を抑制する"
            "ことを目的とする成分をいう。）は、別表第３に掲げる成分以外のものを配合してはならない。")
    page = "化粧品/化粧品基準/本文/page_004.md"
    (db / "化粧品/化粧品基準/本文").mkdir(parents=True)
    (db / page).write_text(f"---\npage: 4\n---\n{line}\n", encoding="utf-8")
    folders = [f for f, _ in offline_proposals("防腐剤の配合の制限は？", page, (db / page).read_text(encoding="utf-8"))]
    assert "化粧品/化粧品基準/防腐剤、紫外線吸収剤及びタール色素の配合" in folders
    assert all(len(f.rsplit("/", 1)[-1]) <= 40 for f in folders), folders
    from ragkit.optimize import topic_name

    assert topic_name("1.2 Installing the refrigerator on a level floor, with space behind it") == \
        "Installing the refrigerator on a level"
    assert topic_name("第3章 冷蔵室の温度設定：3段階") == "冷蔵室の温度設定"
    assert topic_name("Defrosting (automatic)") == "Defrosting"
    assert topic_name("냉장고 온도 설정 방법과 주의 사항에 대하여 자세히 알아보는 페이지입니다") == "냉장고 온도 설정 방법과 주의 사항에 대하여"


def test_folder_names_never_copy_the_questions_typos(db):
    text = (db / ORIGINAL).read_text(encoding="utf-8")
    props = offline_proposals("How oftn does the frezer defrost automaticaly?", ORIGINAL, text)
    words = {w.casefold() for f, _ in props for w in f.replace("/", " ").split()}
    assert not words & {"oftn", "frezer", "automaticaly", "defrost"}  # typos, and "defrost" as the page spells it
    assert props[0][0] == "appliances/fridge/defrosts"


def test_a_models_folder_with_words_not_on_the_page_is_refused(db):
    from ragkit.optimize import check_folder_words

    text = (db / ORIGINAL).read_text(encoding="utf-8")
    q = "How often does the frezer defrost in the ice box?"
    for bad in ("appliances/fridge/frezer", "appliances/fridge/ice box"):
        with pytest.raises(ValueError, match="from the question but the page does not contain it"):
            check_folder_words(db, bad, text, ORIGINAL, q)
    check_folder_words(db, "appliances/fridge/freezer defrosts", text, ORIGINAL, q)  # the page's words
    check_folder_words(db, "appliances/fridge/thawing", text, ORIGINAL, q)  # the model's own word
    check_folder_words(db, "appliances/fridge/care", text, ORIGINAL, q)  # an existing folder


def test_folder_listing_is_bounded_and_focused():
    pages = [f"cat/doc{d}/sec{s}/page_{p:03d}.md" for d in range(30) for s in range(3) for p in range(2)]
    text = folder_listing(pages, "cat", "cat/doc7", max_entries=10)
    lines = text.splitlines()
    assert len(lines) == 11 and lines[-1].startswith("... ") and "more folders not shown" in lines[-1]
    assert lines[:3] == ["cat/ (180 pages)", "cat/doc7/ (6 pages)", "cat/doc7/sec0/ (2 pages)"]
    full = folder_listing(pages, "cat", max_entries=1000, max_depth=1)
    assert "cat/ (180 pages)" in full and "sec0" not in full


def test_add_alias_keeps_other_groups():
    cell = "database/a/p1.md\ndatabase/b/p2.md|database/b/x/p2.md"
    out = add_alias(cell, "database/b/p2.md", "database/b/new/p2.md")
    assert out == "database/a/p1.md\ndatabase/b/p2.md|database/b/x/p2.md|database/b/new/p2.md"
    assert add_alias(out, "database/b/p2.md", "database/b/new/p2.md") == out  # idempotent
    assert add_alias("database/a/p1.md;database/b/p2.md", "database/a/p1.md", "c.md") == \
        "database/a/p1.md|c.md;database/b/p2.md"


# -- copies ------------------------------------------------------------------------------------------
def test_copy_never_overwrites_and_index_learns_at_once(db):
    index = open_index(db)
    cm = CopyManager(db, index, Journal(db))
    rel1, created1 = cm.place("appliances/fridge/setup/page_001.md", "appliances/start here", "a")
    rel2, created2 = cm.place("appliances/washer/basics/page_001.md", "appliances/start here", "b")
    assert (rel1, rel2) == ("appliances/start here/page_001.md", "appliances/start here/page_001_2.md")
    assert created1 and created2
    assert "Programs" in (db / rel2).read_text(encoding="utf-8")
    assert "Installing" in (db / rel1).read_text(encoding="utf-8")
    assert {rel1, rel2} <= set(index.pages())
    assert rel2 in [h.path for h in index.search("cotton program")]
    assert cm.release(rel2, "b", keep=False) == "rolled_back"
    assert not (db / rel2).exists() and rel2 not in index.pages()
    assert cm.release(rel1, "a", keep=True) == "kept"
    assert cm.state == {rel1: "kept", rel2: "rolled_back"}


def test_two_workers_share_one_copy_of_the_same_page(db):
    index = open_index(db)
    cm = CopyManager(db, index, Journal(db))
    before = files(db)
    barrier = threading.Barrier(8)
    out: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        barrier.wait()
        r = cm.place(ORIGINAL, "appliances/defrost", n)
        with lock:
            out.append(r)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r for r, _ in out} == {"appliances/defrost/page_011.md"}
    assert sum(created for _, created in out) == 1  # one file, shared by all eight claims
    assert files(db) - before == {"appliances/defrost/page_011.md"}
    for n in range(7):  # every claim but the last given up: the copy stays
        assert cm.release("appliances/defrost/page_011.md", n, keep=False) == "pending"
    assert (db / "appliances/defrost/page_011.md").is_file()
    assert cm.release("appliances/defrost/page_011.md", 7, keep=False) == "rolled_back"
    assert files(db) == before and not (db / "appliances/defrost").exists()
    assert "appliances/defrost/page_011.md" not in index.pages()


def test_reader_of_a_rolled_back_copy_gets_a_clean_not_found(db):
    from ragkit.answer.tools import Toolbox

    index = open_index(db)
    cm = CopyManager(db, index, Journal(db))
    rel, _ = cm.place(ORIGINAL, "appliances/defrost", "a")
    box = Toolbox(db, index)
    assert "automatically every 12 hours" in box.call("read_page", json.dumps({"path": rel}))
    hits_before = [h.path for h in index.search("freezer defrosts")]
    assert rel in hits_before
    cm.release(rel, "a", keep=False)
    out = box.call("read_page", json.dumps({"path": rel}))
    assert out.startswith("Error: no page")
    assert rel not in [h.path for h in index.search("freezer defrosts")]
    assert index.snippet(rel, "freezer") == ""  # a hit fetched before the rollback reads nothing, no crash


def test_copies_come_and_go_while_others_read(db):
    """Readers (search, read_page, the offline engine) never crash while copies are placed and rolled back."""
    from ragkit.answer.extractive import answer_offline
    from ragkit.answer.tools import Toolbox

    index = open_index(db)
    cm = CopyManager(db, index, Journal(db))
    stop = threading.Event()
    problems: list[str] = []

    def reader() -> None:
        box = Toolbox(db, index)
        while not stop.is_set():
            try:
                for h in index.search("freezer defrosts automatically", k=5):
                    out = box.call("read_page", json.dumps({"path": h.path}))
                    if not (out.startswith("Page file:") or out.startswith("Error:")):
                        problems.append(out[:100])
                answer_offline("How often does the freezer defrost?", index, db)
            except Exception as e:  # noqa: BLE001 - the point of the test
                problems.append(repr(e))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for n in range(15):
            rel, _ = cm.place(ORIGINAL, f"appliances/defrost {n % 3}", n)
            cm.release(rel, n, keep=False)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert problems == []
    assert files(db) == set(PAGES) and set(index.pages()) == set(PAGES)


# -- the journal --------------------------------------------------------------------------------------
_CRASH = """
import os, sys
from pathlib import Path
from ragkit.search import open_index
from ragkit.optimize import CopyManager, Journal
db = Path(sys.argv[1])
cm = CopyManager(db, open_index(db), Journal(db))
kept, _ = cm.place("appliances/fridge/setup/page_001.md", "appliances/kept folder", "k")
cm.release(kept, "k", keep=True)
cm.place("appliances/fridge/care/page_011.md", "appliances/fridge/defrost", "a")
cm.place("appliances/washer/basics/page_001.md", "appliances/new/deep/folder", "b")
edited, _ = cm.place("appliances/fridge/care/page_010.md", "appliances/edited", "c")
(db / edited).write_text("edited by the user", encoding="utf-8")
os._exit(1)  # a crash: no rollback, no clean-up
"""


def crash_run(db: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(db)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr


def test_crash_leaves_nothing_behind_the_next_run_says_so(db, caplog):
    crash_run(db)
    left = files(db) - set(PAGES)
    assert left == {"appliances/kept folder/page_001.md", "appliances/fridge/defrost/page_011.md",
                    "appliances/new/deep/folder/page_001.md", "appliances/edited/page_010.md"}
    assert len(list(journal_dir(db).glob("*.jsonl"))) == 1
    index = open_index(db)
    assert "appliances/fridge/defrost/page_011.md" in index.pages()  # the crashed run's index entries
    # the next run starts with the recovery and reports it
    rows = [{"Question": "q", "Reference Document": "", "Retrieved Files": ""}]
    csv = db.parent / "q.csv"
    write_csv(pd.DataFrame(rows), csv)
    report = optimize_rows(rows, input_csv=csv, settings=offline_settings(db), enable_rl=False,
                             index=index, progress=False)
    assert sorted(report.recovered) == ["appliances/fridge/defrost/page_011.md",
                                        "appliances/new/deep/folder/page_001.md"]
    assert report.notes == ["removed 2 unconfirmed copies left by an interrupted run"]
    assert report.summary()["Optimize Copies Recovered"] == 2
    assert files(db) - set(PAGES) == {"appliances/kept folder/page_001.md",  # confirmed: stays
                                      "appliances/edited/page_010.md"}  # edited since: never destroyed
    assert not (db / "appliances/new").exists()  # folders the copy created are gone too
    assert (db / "appliances/fridge").is_dir()
    assert set(index.pages()) == files(db)
    assert "edited since" in caplog.text and "removed 2 unconfirmed copies" in caplog.text
    assert list(journal_dir(db).glob("*.jsonl")) == []
    assert recover_journal(db, index) == []  # nothing twice


def test_journal_of_a_live_process_is_left_alone(db):
    j = Journal(db)
    cm = CopyManager(db, open_index(db), j)
    rel, _ = cm.place(ORIGINAL, "appliances/defrost", "a")
    assert recover_journal(db) == []  # this process is alive: its copy is still being judged
    assert (db / rel).is_file()
    cm.release(rel, "a", keep=False)
    j.close()
    assert list(journal_dir(db).glob("*.jsonl")) == []


def test_tampered_journal_cannot_delete_outside(db, tmp_path):
    victim = tmp_path / "victim.md"
    victim.write_text("x", encoding="utf-8")
    journal_dir(db).mkdir(parents=True)
    lines = [{"event": "run", "pid": 999999999, "host": "elsewhere"},
             {"event": "created", "id": "1", "path": "../../victim.md", "sha256": "", "dirs": ["../.."]},
             {"event": "created", "id": "2", "path": str(victim), "sha256": "", "dirs": []}]
    (journal_dir(db) / "1-x.jsonl").write_text("\n".join(json.dumps(e) for e in lines) + "\n{broken",
                                               encoding="utf-8")
    assert recover_journal(db) == []
    assert victim.is_file() and files(db) == set(PAGES)


# -- one pass without RL ------------------------------------------------------------------------------
def test_offline_pass_copies_missed_pages_and_updates_the_csv(db):
    ref = "database/appliances/fridge/care/page_011.md"
    df = pd.DataFrame([
        {"Question": "How often does the freezer defrost?", "Reference Document": ref, "Page": "11"},
        {"Question": "Where do I put the fridge?", "Reference Document": "database/appliances/fridge/setup/"
                                                                           "page_001.md", "Page": "1"},
        {"Question": "What is the GDP of Mars?", "Reference Document": "", "Page": ""},
    ])
    csv = db.parent / "questions.csv"
    write_csv(df, csv)
    original_bytes = csv.read_bytes()
    rows = df.to_dict("records")
    rows[0]["Retrieved Files"] = "database/appliances/fridge/care/page_010.md"  # missed
    rows[1]["Retrieved Files"] = "database/appliances/fridge/setup/page_001.md"  # found
    rows[2]["Retrieved Files"] = ""
    index = open_index(db)
    report = optimize_rows(rows, input_csv=csv, settings=offline_settings(db), enable_rl=False,
                             index=index, progress=False)
    assert report.errors == []
    copy = "appliances/fridge/freezer defrosts/page_011.md"  # the page's words ("defrosts"), not the question's
    assert (report.analysed, report.created, report.kept, report.rolled_back) == (1, 1, 1, 0)
    assert report.recall_before == pytest.approx(0.5) and report.recall_after is None
    assert files(db) - set(PAGES) == {copy}
    assert copy in index.pages()
    cell = f"{ref}|database/{copy}"
    assert report.rows[0]["Optimized Reference Document"] == cell
    assert "Attempts" not in report.rows[0]
    saved = read_csv(csv)
    # the new column goes last: the user's columns keep their places (spreadsheet formulas point at them)
    assert list(saved.columns) == ["Question", "Reference Document", "Page", "Optimized Reference Document"]
    assert list(saved["Optimized Reference Document"]) == [cell, "", ""]
    assert report.backup_path is not None and report.backup_path.read_bytes() == original_bytes
    assert list(journal_dir(db).glob("*.jsonl")) == []
    # a second pass over the same results reuses the copy instead of making another one
    again = optimize_rows(rows, input_csv=csv, settings=offline_settings(db), enable_rl=False,
                            index=index, progress=False)
    assert again.created == 0 and files(db) - set(PAGES) == {copy}


def test_input_csv_that_cannot_be_updated_is_one_error_and_no_copy_is_left(db):
    ref = "database/appliances/fridge/care/page_011.md"
    rows = [{"Question": "How often does the freezer defrost?", "Reference Document": ref,
             "Retrieved Files": "database/appliances/fridge/care/page_010.md"}]
    gone = db.parent / "moved-away.csv"  # the input CSV vanished while the batch ran
    report = optimize_rows(rows, input_csv=gone, settings=offline_settings(db), enable_rl=False,
                             progress=False)
    assert report.errors == [f"{gone}: no such file; the copies made for it were removed"]
    assert files(db) == set(PAGES) and set(open_index(db).pages()) == set(PAGES)
    assert (report.created, report.kept, report.rolled_back) == (1, 0, 1)
    assert list(journal_dir(db).glob("*.jsonl")) == []


def test_ctrl_c_as_the_csv_is_written_leaves_the_copies_it_names(db, monkeypatch):
    """A real SIGINT that lands right after the input CSV names the copies (before they were confirmed) made the
    clean-up remove them: the CSV named pages that no longer existed. The CSV write, the confirmation and the
    run's record are now one step that Ctrl-C waits for; the interruption comes after it."""
    import signal

    from ragkit.optimize import run as optimize_run

    ref = "database/appliances/fridge/care/page_011.md"
    df = pd.DataFrame([{"Question": "How often does the freezer defrost?", "Reference Document": ref}])
    csv = db.parent / "questions.csv"
    write_csv(df, csv)
    rows = df.to_dict("records")
    rows[0]["Retrieved Files"] = "database/appliances/fridge/care/page_010.md"  # missed
    written = optimize_run.update_input_csv

    def then_ctrl_c(*args, **kwargs):
        edit = written(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered to this (the main) thread
        return edit

    monkeypatch.setattr(optimize_run, "update_input_csv", then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        optimize_rows(rows, input_csv=csv, settings=offline_settings(db), enable_rl=False, progress=False)
    cell = read_csv(csv)["Optimized Reference Document"][0]
    named = cell.split("|")[1:]
    assert named and all((db.parent / p).is_file() for p in named), cell  # every copy the CSV names exists
    assert list(journal_dir(db).glob("*.jsonl")) == []
    from ragkit.optimize.history import list_runs

    assert [c["path"] for run in list_runs(db) for c in run["copies"]] == [p.removeprefix("database/")
                                                                         for p in named]  # undo can remove them


def test_optimize_from_outside_the_project_extends_the_original_group(sample_db, tmp_path, isolated_env):
    """Audit finding 3: `rag batch q.csv --db /abs/database --optimize` run from another folder did not find the
    original `database/...` page (the copy is named by an absolute path there) and appended a third group for two
    pages; the next run scored Opt Ref Recall 0.0. The copy now joins its original's group, and the next run
    scores the page it found (Opt Ref TP 1, FN 1 for the one page still missed)."""
    import shutil

    from typer.testing import CliRunner

    from ragkit.cli import app
    from ragkit.core.references import reference_groups

    db = tmp_path / "elsewhere" / "database"
    shutil.copytree(sample_db, db)
    remote = "database/policies/information_security_policy/4. Remote Access/page_005.md"
    passwords = "database/policies/information_security_policy/3. Passwords and Authentication/page_004.md"
    q = "When working from home, how do I reach internal systems, and how long can a VPN session last? " \
        "Is MFA needed for the VPN?"
    csv = isolated_env / "q.csv"
    write_csv(pd.DataFrame([{"Question": q, "Reference Document": f"{remote}\n{passwords}"}]), csv)
    first = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--optimize", "--print-path"])
    assert first.exit_code == 0, first.output
    before = read_csv(Path(first.stdout.strip().splitlines()[-1])).to_dict("records")[0]
    assert int(before["Ref FN"]) == 1  # the offline agent misses the passwords page

    cell = read_csv(csv)["Optimized Reference Document"][0]
    groups = reference_groups(cell)
    assert len(groups) == 2, cell
    assert groups[0] == [remote] and groups[1][0] == passwords and len(groups[1]) == 2
    copy = groups[1][1]  # named like its original, `database/...`
    assert copy.startswith("database/") and (db.parent / copy).read_bytes() == (db.parent / passwords).read_bytes()

    again = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--print-path"])
    assert again.exit_code == 0, again.output
    row = read_csv(Path(again.stdout.strip().splitlines()[-1])).to_dict("records")[0]
    n = len(iter_pages(db))
    found = {p for p in row["Retrieved Files"].splitlines()}
    assert (int(row["Opt Ref TP"]), int(row["Opt Ref FN"])) == (1, 1), (cell, found)
    assert float(row["Opt Ref Recall"]) == 0.5
    assert int(row["Opt Ref TN"]) == n - 3 - int(row["Opt Ref FP"])  # page, its copy and the other page
    assert int(row["Ref TN"]) == n - 2 - int(row["Ref FP"])  # a copy not named is just another page


def test_a_copy_is_named_like_its_original(db):
    """The tester's cell read `docs/.../page_002.md|/work/.../optdb/docs/.../page_002.md`: a database-relative
    original next to an absolute copy. A copy is now written in its original's form."""
    from ragkit.core.paths import reference_like, reference_path

    page, copy = ORIGINAL, "appliances/fridge/defrost/page_011.md"
    root = db.resolve().as_posix()
    for written, want in [(page, copy), (f"database/{page}", f"database/{copy}"),
                          (f"{root}/{page}", f"{root}/{copy}"), (f"./database/{page}", f"./database/{copy}"),
                          ("database\\" + page.replace("/", "\\"), "database\\" + copy.replace("/", "\\")),
                          ("database/appliances/fridge/care/page_099.md", reference_path(db, copy))]:  # no such page
        assert reference_like(db, written, copy) == want, written
    cell = f"database/appliances/fridge/setup/page_001.md;{page}"
    assert add_alias(cell, f"database/{page}", lambda w: reference_like(db, w, copy), key=page_keys(db)) == \
        f"database/appliances/fridge/setup/page_001.md;{page}|{copy}"
