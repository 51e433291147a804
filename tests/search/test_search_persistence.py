"""Persistence: the cache, incremental updates, processes, snapshots and the directory scan."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from search_fixtures import fresh, top, write_page

from ragkit.core.errors import PathEscapeError, RagError
from ragkit.search import persistence
from ragkit.search.index import Index


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


_WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from search_fixtures import write_page
from ragkit.search import Index
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


def results(idx: Index) -> list:
    return [[(h.path, h.page, h.title, h.score, h.snippet) for h in idx.search(q)] for q in SNAP_QUERIES]


@pytest.fixture
def snap(monkeypatch):
    """Snapshots even for the tiny test databases (the default waits for a thousand changed rows)."""
    monkeypatch.setattr(persistence, "SNAPSHOT_MIN_ROWS", 1)
    return lambda db: db / ".ragkit" / persistence.SNAPSHOT_FILE


def test_reopen_starts_from_the_snapshot_and_finds_the_same(db, snap, monkeypatch):
    a = fresh(db)
    assert snap(db).is_file()  # written after the first load
    full = results(a)
    loaded = []
    real = Index._load_snapshot
    monkeypatch.setattr(Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    b = fresh(db)
    assert loaded == [True]
    assert results(b) == full and b.pages() == a.pages()
    assert b._term_ids == a._term_ids and b._stat == a._stat


def test_changes_after_the_snapshot_are_seen_on_reopen(db, snap, monkeypatch):
    a = fresh(db)
    other = fresh(db)  # "another process" writing after the snapshot
    monkeypatch.setattr(persistence, "SNAPSHOT_MIN_ROWS", 10_000)  # no new snapshot: reopen must apply the rows
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
        monkeypatch.setattr(persistence, "ANALYSIS_VERSION", "test-other")  # the cache itself is rebuilt too
    elif damage == "stale":
        monkeypatch.setattr(persistence, "SNAPSHOT_MIN_ROWS", 10_000)
        other = fresh(db)
        for i in range(8):  # more rows changed since the snapshot than it holds pages
            write_page(db, f"english/router/more/page_{i + 10:03d}.md", f"# More {i}\nmore text {i}", page=i + 10)
            other.add_page(f"english/router/more/page_{i + 10:03d}.md")
        expected = results(other)
        monkeypatch.setattr(persistence, "SNAPSHOT_MIN_ROWS", 1)
    loaded = []
    real = Index._load_snapshot
    monkeypatch.setattr(Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    b = fresh(db)
    assert loaded == [False]
    assert results(b) == expected
    assert path.is_file()  # and a good one is written again
    monkeypatch.undo()


def test_a_snapshot_is_never_unpickled(db, snap):

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
    first = persistence.scan_pages(db, listings, racy)  # the fixture's folders were written a moment ago
    assert "english/router/setup/" in racy and "english/router/setup/" not in listings
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: listed.append(Path(p).name) or real(p))
    assert persistence.scan_pages(db, listings) == first
    assert {"setup", "safety", "router"} <= set(listed)  # listed again, not taken from the listings
    monkeypatch.setattr(persistence, "RACY_NS", -10**9)  # as if the changes were now long enough ago to trust
    persistence.scan_pages(db, listings)
    listed.clear()
    assert persistence.scan_pages(db, listings) == first and listed == []


def test_unchanged_folders_are_not_listed_again(db, monkeypatch):
    monkeypatch.setattr(persistence, "RACY_NS", -10**9)  # the test's folders are seconds old: trust them anyway
    backdate_folders(db)
    listings: dict = {}
    first = persistence.scan_pages(db, listings)
    assert first == persistence.scan_pages(db) and len(first) == 6
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p: listed.append(Path(p).name) or real(p))
    assert persistence.scan_pages(db, listings) == first and listed == []
    # edited in place (the folder is unchanged): seen by the file's own stat
    write_page(db, "english/router/setup/page_005.md", "# Changed\nA much longer text than before, now.", page=5)
    # one page added, one removed: only their folders are listed again
    write_page(db, "家電/洗濯機/使い方/page_009.md", "# 追加\n新しいページ", page=9)
    (db / "english/router/safety/page_006.md").unlink()
    listed.clear()
    now = persistence.scan_pages(db, listings)
    assert sorted(listed) == ["safety", "使い方"]
    monkeypatch.setattr(os, "scandir", real)
    assert now == persistence.scan_pages(db) and now != first
    stats_now, stats_first = ({r: (m, sz) for r, m, sz in x} for x in (now, first))
    assert stats_now["english/router/setup/page_005.md"] != stats_first["english/router/setup/page_005.md"]


def test_reopen_with_the_snapshot_still_sees_edits_made_by_hand(db, snap, monkeypatch):
    monkeypatch.setattr(persistence, "RACY_NS", -10**9)
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

    monkeypatch.setattr(persistence, "RACY_NS", -10**9)
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
    real = Index._load_snapshot
    monkeypatch.setattr(Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    idx = fresh(db)
    assert loaded == [False]
    assert idx.search("hunter2") == [] and len(idx.pages()) == 6
