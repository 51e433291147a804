"""Persistence: the SQLite cache under DB/.ragkit/ (rows per page, sequence numbers, the term table), the
snapshot file that a new process starts from, the directory scan, and syncing the in-memory state with the cache."""

from __future__ import annotations

import gc
import json
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ragkit.search.analysis import ANALYSIS_VERSION, _Analysed, _pairs
from ragkit.search.postings import _Grow, _pack, _Segment, _unpack_many
from ragkit.search.vectors import EMBED_VERSION

log = logging.getLogger(__name__)

CACHE_DIR = ".ragkit"
CACHE_FILE = "index.sqlite"
# The in-memory state (postings, per-page arrays, paths, terms) as of one cache sequence number: loaded on open
# instead of re-reading every row, then only the rows written after it are applied. numpy arrays and JSON only.
SNAPSHOT_FILE = "index.snapshot.npz"
SNAPSHOT_FORMAT = 1
SNAPSHOT_MIN_ROWS = 1000  # rewrite it once this many rows (or 2% of the pages, if more) changed since



# A folder listing is reused while the folder's (inode, mtime, ctime) is unchanged: adding, removing or renaming
# an entry changes them (ctime cannot be set back by hand). A folder changed within RACY_NS of the scan could
# change again within one timestamp tick, so its listing is not kept; nor one holding a symlink.
RACY_NS = 2_000_000_000
_Listing = tuple[tuple[int, int, int], list[str], list[str]]  # (folder key, subfolder names, page file names)


def scan_pages(root: Path, listings: dict[str, _Listing] | None = None,
               racy: list[str] | None = None, under: str = "") -> list[tuple[str, int, int]]:
    """(db-relative path, mtime_ns, size) of every page file (under the db-relative folder `under`, when given),
    like paths.iter_pages (hidden folders and files skipped, no symlink that leads out of the database) but with
    the stat from the directory scan.

    `listings` (db-relative folder -> listing), when given, is used and updated: an unchanged folder is not
    listed again, only its page files' stats are read (on some file systems listing is the slow part).
    `racy` collects the folders listed but too recently changed to keep."""
    root = root.resolve()
    out: list[tuple[str, int, int]] = []
    under = under.strip("/")
    stack = [(f"{under}/", str(root / under))] if under else [("", str(root))]
    now = time.time_ns()
    new: dict[str, _Listing] = {}
    stat, sep = os.stat, os.sep
    while stack:
        rel_dir, path = stack.pop()
        try:
            dst = os.stat(path)
        except OSError:
            continue
        key = (dst.st_ino, dst.st_mtime_ns, dst.st_ctime_ns)
        old = listings.get(rel_dir) if listings is not None else None
        if old is not None and old[0] == key:
            new[rel_dir] = old
            base = path + sep
            for name in old[1]:
                stack.append((f"{rel_dir}{name}/", base + name))
            for name in old[2]:
                try:
                    st = stat(base + name)
                except OSError:
                    continue
                out.append((rel_dir + name, st.st_mtime_ns, st.st_size))
            continue
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        dirs: list[str] = []
        files: list[str] = []
        linked = False
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                if e.is_symlink():  # like os.walk: no symlinked folders (no loops); files only inside the db
                    linked = True
                    target = Path(e.path).resolve()
                    if e.is_dir() or root not in target.parents:
                        continue
                rel = f"{rel_dir}{e.name}"
                if e.is_dir():
                    stack.append((rel + "/", e.path))
                    dirs.append(e.name)
                elif e.name.endswith(".md") and e.is_file():
                    st = e.stat()
                    out.append((rel, st.st_mtime_ns, st.st_size))
                    files.append(e.name)
            except OSError:
                linked = True  # an entry that could not be read: list the folder again next time
                continue
        if not linked and max(dst.st_mtime_ns, dst.st_ctime_ns) < now - RACY_NS:
            new[rel_dir] = (key, dirs, files)
        elif racy is not None and not linked:
            racy.append(rel_dir)
    if listings is not None:
        listings.clear()
        listings.update(new)
    out.sort()
    return out


@contextmanager
def _gc_paused():
    """Loading creates hundreds of thousands of small objects and no cycles: the collector's passes over them
    (measured: 40% of a snapshot load) are pure cost."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Persistence:
    """Cache, snapshot and sync methods of Index (a part of Index: the attributes are Index's)."""

    # ----------------------------------------------------------------------------------------- storage
    def _connect(self) -> sqlite3.Connection:
        cache = self.db / CACHE_DIR / CACHE_FILE
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            conn = self._open_sqlite(cache)
        except (OSError, sqlite3.DatabaseError) as e:
            if isinstance(e, sqlite3.DatabaseError) and cache.exists():
                # A corrupt cache is only a cache: start again from the files.
                log.warning("index cache %s unusable (%s); rebuilding it", cache, e)
                for suffix in ("", "-wal", "-shm"):
                    Path(str(cache) + suffix).unlink(missing_ok=True)
                try:
                    return self._open_sqlite(cache)
                except (OSError, sqlite3.DatabaseError):
                    pass
            log.warning("cannot write the index cache under %s (%s); keeping it in memory", cache.parent, e)
            conn = self._open_sqlite(None)
        return conn

    def _open_sqlite(self, path: Path | None) -> sqlite3.Connection:
        self._cache_path = path
        conn = sqlite3.connect(str(path) if path else ":memory:", timeout=60, check_same_thread=False,
                               isolation_level=None)
        conn.execute("PRAGMA busy_timeout=60000")
        if path:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = conn.execute("SELECT value FROM meta WHERE key='analysis'").fetchone()
            if row is None or row[0] != ANALYSIS_VERSION:
                for t in ("pages", "deleted", "terms"):
                    conn.execute(f"DROP TABLE IF EXISTS {t}")
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('analysis', ?)", (ANALYSIS_VERSION,))
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('seq', '0')")
                # a new identity: a snapshot of the old tables (other term ids, other seqs) never matches it
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('cache_id', ?)", (os.urandom(12).hex(),))
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('cache_id', ?)", (os.urandom(12).hex(),))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS pages (rel TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                "mtime_ns INTEGER, size INTEGER, sha TEXT, page INTEGER, title TEXT, grp TEXT, "
                "lens TEXT, terms BLOB, pairs BLOB, printed INTEGER)"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS pages_seq ON pages(seq)")
            conn.execute("CREATE TABLE IF NOT EXISTS deleted (rel TEXT PRIMARY KEY, seq INTEGER NOT NULL)")
            conn.execute("CREATE INDEX IF NOT EXISTS deleted_seq ON deleted(seq)")
            conn.execute("CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, term TEXT UNIQUE NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key='embed'").fetchone()
            if row is None or row[0] != EMBED_VERSION:
                conn.execute("DROP TABLE IF EXISTS emb")
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('embed', ?)", (EMBED_VERSION,))
            conn.execute("CREATE TABLE IF NOT EXISTS emb (sha TEXT PRIMARY KEY, vec BLOB)")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            raise
        return conn

    def _load_terms(self) -> None:
        rows = self._conn.execute("SELECT id, term FROM terms WHERE id > ?", (self._max_tid,)).fetchall()
        for tid, term in rows:
            self._term_ids[term] = tid
            if tid > self._max_tid:
                self._max_tid = tid

    def _write(self, added: list[_Analysed], touched: list[tuple[str, int, int]], removed: list[str], *,
               sync: bool = True) -> None:
        """One write transaction: new/changed pages, pages whose stat changed but not content, deletions.
        sync=False leaves the in-memory state behind (a bulk refresh syncs once at the end: one segment)."""
        if not (added or touched or removed):
            return
        conn = self._conn
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._load_terms()  # another process may have added terms
                seq = int(conn.execute("SELECT value FROM meta WHERE key='seq'").fetchone()[0]) + 1
                new_terms: list[tuple[int, str]] = []
                rows = []
                ids = self._term_ids
                for a in added:
                    tid_list = []
                    for term in a.terms:
                        tid = ids.get(term)
                        if tid is None:
                            self._max_tid += 1
                            tid = ids[term] = self._max_tid
                            new_terms.append((tid, term))
                        tid_list.append(tid)
                    tids = np.array(tid_list, dtype=np.int32)
                    counts = np.array(list(a.terms.values()), dtype=np.uint16).reshape(len(tid_list), 3)
                    pairs = _pairs(np.array([ids[t] for t in a.seq], dtype=np.int64))
                    rows.append((a.rel, seq, a.mtime_ns, a.size, a.sha, a.page, a.title, a.group,
                                 json.dumps(a.lens), _pack(tids, counts), pairs.tobytes(), a.printed))
                conn.executemany("INSERT INTO terms (id, term) VALUES (?, ?)", new_terms)
                conn.executemany("INSERT OR REPLACE INTO pages VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
                conn.executemany("DELETE FROM deleted WHERE rel=?", [(a.rel,) for a in added])
                conn.executemany("UPDATE pages SET mtime_ns=?, size=? WHERE rel=?",
                                 [(m, s, r) for r, m, s in touched])
                conn.executemany("DELETE FROM pages WHERE rel=?", [(r,) for r in removed])
                conn.executemany("INSERT OR REPLACE INTO deleted VALUES (?, ?)", [(r, seq) for r in removed])
                conn.execute("UPDATE meta SET value=? WHERE key='seq'", (str(seq),))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                # our term-id counter ran ahead of the table: reload the committed terms
                self._term_ids, self._max_tid = {}, 0
                self._load_terms()
                raise
            for r, m, s in touched:
                if r in self._stat:
                    self._stat[r] = (m, s, self._stat[r][2])
            self._snap_rows += len(touched)  # other processes learn new stats only from a snapshot
            if sync:
                self._sync()

    # ----------------------------------------------------------------------------------------- snapshot
    def _snapshot_path(self) -> Path | None:
        return None if self._cache_path is None else self._cache_path.parent / SNAPSHOT_FILE

    def _cache_meta(self) -> tuple[int, str]:
        rows = dict(self._conn.execute("SELECT key, value FROM meta WHERE key IN ('seq', 'cache_id')").fetchall())
        return int(rows.get("seq") or 0), str(rows.get("cache_id") or "")

    def _load_snapshot(self) -> bool:
        """Start from the snapshot file when it belongs to this cache (same identity, analysis version and
        format, a sequence number the cache has reached, not too much changed since). Anything else (missing,
        corrupt, foreign, stale) leaves the state empty: the rows are then loaded in full."""
        path = self._snapshot_path()
        if path is None or self._seq or not path.is_file():
            return False
        try:
            with np.load(path, allow_pickle=False) as z:  # never pickle: a database may come from anyone
                meta = json.loads(bytes(z["meta"]).decode("utf-8"))
                if (meta.get("format") != SNAPSHOT_FORMAT or meta.get("analysis") != ANALYSIS_VERSION):
                    return False
                seq, cache_id = self._cache_meta()
                snap_seq = int(meta["seq"])
                if meta.get("cache_id") != cache_id or not 0 < snap_seq <= seq:
                    return False
                n_alive = int(meta["n_alive"])
                changed = self._conn.execute("SELECT COUNT(*) FROM pages INDEXED BY pages_seq WHERE seq > ?",
                                             (snap_seq,)).fetchone()[0]
                if changed > max(SNAPSHOT_MIN_ROWS, n_alive // 2):
                    log.info("index snapshot is %d rows behind; loading the cache in full", changed)
                    return False
                state = self._check_snapshot(z, meta)
        except Exception as e:  # noqa: BLE001 - a snapshot is only a shortcut: any defect means the long way
            log.info("index snapshot %s unusable (%s); loading the cache in full", path, e)
            return False
        (rels, titles, shas, groups, terms, term_ids, pages, printed, alive, dlen, dgroup, mtime, size,
         segments, listings) = state
        alive_docs = np.flatnonzero(alive).tolist()
        rel_doc = {rels[d]: d for d in alive_docs}
        if len(rel_doc) != len(alive_docs) or len(alive_docs) != n_alive:
            log.info("index snapshot %s inconsistent; loading the cache in full", path)
            return False
        mt, sz = mtime.tolist(), size.tolist()
        self._rel_doc = rel_doc
        self._stat = {rels[d]: (mt[d], sz[d], shas[d]) for d in alive_docs}
        self._rels, self._titles, self._shas = rels, titles, shas
        self._group_ids = {g: i for i, g in enumerate(groups)}
        self._term_ids = dict(zip(terms, term_ids.tolist(), strict=True))
        self._max_tid = int(meta["max_tid"])
        self._pages = _Grow.of(pages)
        self._printed = _Grow.of(printed)
        self._alive = _Grow.of(alive, False)
        self._dlen = _Grow.of(dlen)
        self._dgroup = _Grow.of(dgroup)
        self._segments = segments
        self._listings = listings
        self._n_alive = n_alive
        self._len_sum = float(meta["len_sum"])
        self._seq = snap_seq
        self._snap_rows = 0
        return True

    @staticmethod
    def _check_snapshot(z, meta: dict) -> tuple:
        """The snapshot's arrays in their working types, after checks that every id in them is in range (a
        damaged or hand-made file must not make searches fail later)."""
        strings = json.loads(bytes(z["strings"]).decode("utf-8"))
        rels, titles, shas, groups, terms = (strings[k] for k in ("rels", "titles", "shas", "groups", "terms"))
        n = len(rels)
        if not all(isinstance(x, list) for x in (rels, titles, shas, groups, terms)):
            raise ValueError("string tables are not lists")
        if len(titles) != n or len(shas) != n:
            raise ValueError("per-page tables differ in length")
        joined = "\0" + "\0".join(rels) + "\0"  # TypeError unless all are strings
        if (joined.count("\0") != n + 1 or "\0/" in joined or (n and "\0\0" in joined)
                or any(x in joined for x in ("\0..\0", "\0../", "/../", "/..\0"))):
            raise ValueError("a page path is not a plain relative path inside the database")
        per_doc = {"pages": np.int32, "printed": np.int32, "alive": np.bool_, "dlen": np.float32, "dgroup": np.int32,
                   "mtime": np.int64, "size": np.int64}
        arrs = {}
        for k, dt in per_doc.items():
            a = z[k]
            if a.shape != (n,) or a.dtype != dt:
                raise ValueError(f"{k}: shape {a.shape} dtype {a.dtype}")
            arrs[k] = a
        if n and not (0 <= int(arrs["dgroup"].min()) and int(arrs["dgroup"].max()) < len(groups)):
            raise ValueError("group id out of range")
        term_ids = z["term_ids"]
        max_tid = int(meta["max_tid"])
        if term_ids.shape != (len(terms),) or term_ids.dtype != np.int32:
            raise ValueError("term ids")
        if len(terms) and (int(term_ids.min()) < 1 or int(term_ids.max()) > max_tid):
            raise ValueError("term id out of range")
        segments = []
        for i in range(int(meta["segments"])):
            tids, ptr, docs, tfs = (z[f"s{i}_{k}"] for k in ("tids", "ptr", "docs", "tfs"))
            ndocs = int(meta["seg_ndocs"][i])
            if (tids.dtype != np.int32 or ptr.dtype != np.int64 or docs.dtype != np.int32
                    or tfs.dtype not in (np.float32, np.uint16) or ptr.shape != (len(tids) + 1,)
                    or docs.shape != tfs.shape or ptr[0] != 0 or ptr[-1] != len(docs)):
                raise ValueError(f"segment {i} layout")
            if len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= n):
                raise ValueError(f"segment {i}: page id out of range")
            if len(tids) > 1 and not (np.all(np.diff(tids) > 0) and np.all(np.diff(ptr) >= 0)):
                raise ValueError(f"segment {i}: not sorted")
            segments.append(_Segment(tids, ptr, docs, tfs.astype(np.float32, copy=False), ndocs))
        return (rels, titles, shas, groups, terms, term_ids, arrs["pages"], arrs["printed"], arrs["alive"],
                arrs["dlen"],
                arrs["dgroup"], arrs["mtime"], arrs["size"], segments, _Persistence._check_listings(z, strings))

    @staticmethod
    def _check_listings(z, strings: dict) -> dict[str, _Listing]:
        """The folder listings of the snapshot's last scan; names are checked to be plain entry names (no
        separators, nothing hidden), so a hand-made file cannot point the scan outside the database."""
        folders, subs, files = strings.get("folders"), strings.get("subfolders"), strings.get("files")
        if folders is None or "folder_keys" not in z.files or "folder_counts" not in z.files:
            return {}
        keys, counts = z["folder_keys"], z["folder_counts"]
        if not (isinstance(folders, list) and isinstance(subs, list) and isinstance(files, list)
                and keys.shape == (len(folders), 3) and counts.shape == (len(folders), 2)
                and int(counts.min(initial=0)) >= 0
                and counts.sum(axis=0).tolist() == [len(subs), len(files)]):
            raise ValueError("folder listings differ in length")

        def plain(names, suffix: str = "") -> bool:
            """Every name a non-empty str, not hidden, without a separator or NUL (checked on one joined string):
            a hand-made file must not point the scan outside the database."""
            try:
                joined = "\0" + "\0".join(names) + "\0"
            except TypeError:
                return False
            return (joined.count("\0") == len(names) + 1 and "\0\0" not in joined and "\0." not in joined
                    and os.sep not in joined and not (os.altsep and os.altsep in joined)
                    and joined.count(suffix + "\0") >= len(names))

        if not (all(isinstance(f, str) for f in folders) and (not subs or plain(subs))
                and (not files or plain(files, ".md"))):
            raise ValueError("bad folder listing")
        so = [0, *np.cumsum(counts[:, 0]).tolist()]
        fo = [0, *np.cumsum(counts[:, 1]).tolist()]
        out: dict[str, _Listing] = {
            folder: ((k[0], k[1], k[2]), subs[so[i] : so[i + 1]], files[fo[i] : fo[i + 1]])
            for i, (folder, k) in enumerate(zip(folders, keys.tolist(), strict=True))}
        return out

    def _snapshot_due(self) -> bool:
        return self._snap_rows >= max(SNAPSHOT_MIN_ROWS, self._n_alive // 50)

    def _maybe_snapshot(self, *, force: bool = False) -> bool:
        """Write a snapshot when enough changed since the last one (a bulk load, thousands of writes). The
        state is copied under the lock and written outside it: searches wait only for the copy."""
        if not (force or self._snapshot_due()):  # checked first: this runs on every search
            return False
        path = self._snapshot_path()
        if path is None:
            return False
        if not self._snap_lock.acquire(blocking=False):
            return False  # another thread of this process is writing one
        try:
            with self._lock:
                if not self._seq:
                    return False
                _, cache_id = self._cache_meta()
                n = len(self._rels)
                mtime = np.zeros(n, np.int64)
                size = np.zeros(n, np.int64)
                for rel, d in self._rel_doc.items():
                    m, sz, _sha = self._stat[rel]
                    mtime[d], size[d] = m, sz
                terms = list(self._term_ids)
                segs = list(self._segments)
                meta = {"format": SNAPSHOT_FORMAT, "analysis": ANALYSIS_VERSION, "cache_id": cache_id,
                        "seq": self._seq, "n_alive": self._n_alive, "len_sum": self._len_sum,
                        "max_tid": self._max_tid, "segments": len(segs), "seg_ndocs": [s.ndocs for s in segs]}
                listings = dict(self._listings)
                strings = {"rels": self._rels[:n], "titles": self._titles[:n], "shas": self._shas[:n],
                           "groups": list(self._group_ids), "terms": terms, "folders": list(listings),
                           "subfolders": [x for v in listings.values() for x in v[1]],
                           "files": [x for v in listings.values() for x in v[2]]}
                arrays = {"pages": self._pages.view().copy(), "printed": self._printed.view().copy(),
                          "alive": self._alive.view().copy(),
                          "dlen": self._dlen.view().copy(), "dgroup": self._dgroup.view().copy(),
                          "mtime": mtime, "size": size,
                          "term_ids": np.fromiter(self._term_ids.values(), np.int32, len(terms)),
                          "folder_keys": np.array([v[0] for v in listings.values()], np.int64).reshape(-1, 3),
                          "folder_counts": np.array([(len(v[1]), len(v[2])) for v in listings.values()],
                                                    np.int64).reshape(-1, 2)}
                self._snap_rows = 0
            for i, sg in enumerate(segs):
                # term frequencies are whole weighted counts: 2 bytes each when they fit
                small = len(sg.tfs) and float(sg.tfs.max()) < 65536 and np.array_equal(sg.tfs, np.rint(sg.tfs))
                arrays.update({f"s{i}_tids": sg.tids, f"s{i}_ptr": sg.ptr, f"s{i}_docs": sg.docs,
                               f"s{i}_tfs": sg.tfs.astype(np.uint16) if small else sg.tfs})
            arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
            arrays["strings"] = np.frombuffer(
                json.dumps(strings, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), np.uint8)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                with open(tmp, "wb") as f:
                    np.savez(f, **arrays)
                os.replace(tmp, path)  # readers see the old file or the new one, never half of one
            except OSError as e:
                log.info("cannot write the index snapshot %s (%s)", path, e)
                tmp.unlink(missing_ok=True)
                return False
            return True
        finally:
            self._snap_lock.release()

    # ----------------------------------------------------------------------------------------- sync
    def _maybe_sync(self, *, snapshot: bool = True) -> None:
        """Apply what other processes wrote since we last looked (cheap when nothing changed)."""
        with self._lock:
            dv = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if dv != self._data_version:
                self._sync()
        if snapshot:
            self._maybe_snapshot()  # another process's bulk write: the next process starts from it

    def _sync(self) -> None:
        """Bring the in-memory state up to the cache's current sequence number."""
        with self._lock:
            conn = self._conn
            self._data_version = conn.execute("PRAGMA data_version").fetchone()[0]
            # one read transaction: the rows read are exactly those of `seq` (a snapshot relies on it)
            conn.execute("BEGIN")
            try:
                self._sync_rows(conn)
            finally:
                conn.execute("COMMIT")

    def _sync_rows(self, conn: sqlite3.Connection) -> None:
        seq = int(conn.execute("SELECT value FROM meta WHERE key='seq'").fetchone()[0])
        if seq == self._seq:
            return
        self._load_terms()
        gone = conn.execute("SELECT rel FROM deleted WHERE seq > ?", (self._seq,)).fetchall()
        for (rel,) in gone:
            self._drop(rel)
        self._snap_rows += len(gone)
        tid_parts, doc_parts, tf_parts = [], [], []
        # A first load streams every row in path order; later syncs find the few changed rows by their
        # sequence number (without INDEXED BY, SQLite would scan all pages in path order).
        sql = ("SELECT rel, seq, mtime_ns, size, sha, page, title, grp, lens, terms, printed FROM pages "
               + ("WHERE seq > ? ORDER BY rel" if self._seq == 0 else
                  "INDEXED BY pages_seq WHERE seq > ? ORDER BY rel"))
        cur = conn.execute(sql, (self._seq,))
        n_rows = 0
        while True:
            # a few thousand rows at a time, each batch unpacked with a handful of numpy operations
            chunk = cur.fetchmany(4096)
            if not chunk:
                break
            rels, _s, mtimes, sizes, shas, pages, titles, grps, lens, blobs, printed = zip(*chunk, strict=True)
            for rel in rels:
                self._drop(rel)
            doc0, m = len(self._rels), len(rels)
            dls = np.array(json.loads("[" + ",".join(lens) + "]"), dtype=np.int64).reshape(m, 3).sum(axis=1)
            dls_f = dls.astype(np.float64).tolist()
            self._rels.extend(rels)
            self._titles.extend(t or "" for t in titles)
            self._shas.extend(shas)
            self._pages.extend([p or 0 for p in pages])
            self._printed.extend([p or 0 for p in printed])
            self._alive.extend([True] * m)
            self._dlen.extend(dls_f)
            gids = self._group_ids
            self._dgroup.extend([gids.setdefault(g, len(gids)) for g in grps])
            self._rel_doc.update(zip(rels, range(doc0, doc0 + m), strict=True))
            self._stat.update(zip(rels, zip(mtimes, sizes, shas, strict=True), strict=True))
            self._n_alive += m
            for dl in dls_f:  # the same order of additions as one page at a time (identical scores)
                self._len_sum += dl
            tids, docs, tfs = _unpack_many(blobs, doc0)
            tid_parts.append(tids)
            doc_parts.append(docs)
            tf_parts.append(tfs)
            n_rows += m
        if tid_parts:
            self._segments.append(_Segment.build(tid_parts, doc_parts, tf_parts, n_rows))
            self._merge_if_needed()
        self._snap_rows += n_rows
        self._seq = seq
        self._gen += 1
        self._prefix_cache.clear()

    def _drop(self, rel: str) -> None:
        doc = self._rel_doc.pop(rel, None)
        if doc is None:
            return
        self._stat.pop(rel, None)
        self._alive.a[doc] = False
        self._n_alive -= 1
        self._len_sum -= float(self._dlen.a[doc])

    def _merge_if_needed(self) -> None:
        segs = self._segments
        if len(segs) <= self.MERGE_SEGMENTS:
            return
        alive = self._alive.view()
        segs.sort(key=lambda s: s.ndocs, reverse=True)
        big, small = segs[0], segs[1:]
        # Tiered: merge everything when the small ones together are a good part of the big one.
        group = segs if sum(s.ndocs for s in small) * 4 > big.ndocs else small
        parts = [s.expanded() for s in group]
        t = np.concatenate([p[0] for p in parts])
        d = np.concatenate([p[1] for p in parts])
        f = np.concatenate([p[2] for p in parts])
        keep = alive[d]
        merged = _Segment.build([t[keep]], [d[keep]], [f[keep]], int(len(np.unique(d[keep]))))
        self._segments = ([] if group is segs else [big]) + [merged]
