"""The Index: one database's search state, its writers (refresh, add_page, remove_page) and search itself, put
together from the parts in this package."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ragkit.core.errors import DB_FLAG, RagError
from ragkit.core.models import SearchHit
from ragkit.core.pagefile import PageMeta, parse_page
from ragkit.core.paths import INGEST_MANIFEST, db_folder, resolve_in_db, strip_db_prefix
from ragkit.core.workers import follow_parent, starting_workers, stop_pool
from ragkit.search.analysis import ANALYSE_WORKERS, _analyse_many, _Analysed, _mp_methods
from ragkit.search.periods import period_terms
from ragkit.search.persistence import _gc_paused, _Listing, _Persistence, scan_pages
from ragkit.search.postings import _Grow, _Scoring, _Segment
from ragkit.search.query import (
    LAST_PAGE,
    may_show,
    one_edit,
    page_refs,
    years,
)
from ragkit.search.ranking import PAGE_REF_WEIGHT, PERIOD_WEIGHT, PHRASE_N, RERANK_N, _Ranking, fuse
from ragkit.search.snippets import make_snippet
from ragkit.search.statements import STATEMENT_TERMS
from ragkit.search.synonyms import Synonyms
from ragkit.search.understand import frame_weights, weighted_terms
from ragkit.search.vectors import _Meaning, _Vectors, get_embedder, word_terms

log = logging.getLogger(__name__)

REFRESH_EVERY = 30.0  # seconds: open_index() re-scans the files when its last scan is older


# --------------------------------------------------------------------------------------------- the index
class Index(_Persistence, _Scoring, _Ranking, _Meaning):
    """Thread-safe index of one database. Use `open_index(db)` to get the shared instance."""

    MERGE_SEGMENTS = 8  # merge the small segments once there are more than this

    def __init__(self, db: Path, *, progress: bool = True) -> None:
        self.db = Path(db).resolve()
        self.progress = progress
        self._lock = threading.RLock()  # guards the in-memory state and the connection
        self._write_lock = threading.Lock()  # one writer (refresh/add/remove) at a time in this process
        self.last_refresh = float("-inf")
        self._manifest_seen: tuple[int, int, int] | None = None  # the ingest manifest at the last scan: _ingested
        self._cache_path: Path | None = None  # None: the cache lives in memory (no snapshot either)
        self._conn = self._connect()
        # in-memory state, derived from the cache rows
        self._seq = 0
        self._data_version = -1
        self._term_ids: dict[str, int] = {}
        self._max_tid = 0
        self._rel_doc: dict[str, int] = {}  # alive rel -> doc id
        self._stat: dict[str, tuple[int, int, str]] = {}  # rel -> (mtime_ns, size, sha)
        self._rels: list[str] = []
        self._titles: list[str] = []
        self._pages = _Grow(np.int32)
        self._printed = _Grow(np.int32)  # doc id -> the number printed on the page when it differs, else 0
        self._alive = _Grow(np.bool_, False)
        self._dlen = _Grow(np.float32)
        self._dgroup = _Grow(np.int32)
        self._shas: list[str] = []
        self._group_ids: dict[str, int] = {}
        self._segments: list[_Segment] = []
        self._n_alive = 0
        self._len_sum = 0.0
        self._gen = 0  # bumped on every in-memory change (invalidates caches)
        self._prefix_cache: dict[tuple[str, int], np.ndarray] = {}
        self._cache: dict[str, tuple] = {}  # name -> (generation, value)
        self._vecs = _Vectors()  # page vectors in memory (all of the cache table's, loaded at the first need)
        self._vecs_loaded = False
        self._vec_of = _Grow(np.int64, -1)  # doc id -> its number in self._vecs, or -1
        self._vec_of_len = -1  # len(self._vecs) when self._vec_of was last completed
        self._embed_lock = threading.Lock()  # one thread computes vectors at a time; the others wait, then reuse
        self._said_unembedded = False
        self._fill_lock = threading.Lock()  # one background embedding thread (vectors.fill_in_background)
        self._filler: threading.Thread | None = None
        self._synonyms = Synonyms(self.db)  # built-in + DB/synonyms.txt (query expansion)
        self._listings: dict[str, _Listing] = {}  # folder listings of the last scan (see scan_pages)
        self._snap_rows = 0  # rows applied (or stats updated) since the state last matched a snapshot file
        self._snap_lock = threading.Lock()
        with self._lock, _gc_paused():
            self._load_snapshot()
            self._sync()
        # no snapshot here: the refresh (or first search) that follows writes one, with its folder listings

    # ----------------------------------------------------------------------------------------- writers
    def refresh(self, *, progress: bool | None = None) -> None:
        """Pick up page files added, changed (mtime/size, then content hash) or deleted since last time."""
        show = self.progress if progress is None else progress
        with self._write_lock:
            self.last_refresh = time.monotonic()
            self._manifest_seen = _manifest_stamp(self.db)  # before the scan: an ingest during it is seen next time
            self._maybe_sync(snapshot=False)  # the snapshot comes after the scan, with its folder listings
            known = dict(self._stat)
            todo: list[tuple[str, int, int]] = []
            before, listings = self._listings, dict(self._listings)
            racy: list[str] = []
            with _gc_paused():
                for rel, mtime_ns, size in scan_pages(self.db, listings, racy):
                    old = known.pop(rel, None)
                    if old is None or old[0] != mtime_ns or old[1] != size:
                        todo.append((rel, mtime_ns, size))
            self._listings = listings
            # folders listed afresh count as changes: enough of them and the next process gets a new snapshot
            self._snap_rows += sum(1 for k, v in listings.items() if before.get(k) is not v)
            removed = list(known)
            self._ingest(todo, removed, show)
            if racy and self._snapshot_due():
                # Folders written just before the scan (an ingest, then its indexing) could not be kept; after
                # a long indexing run they can: list them again now, so the snapshot has every listing.
                listings = dict(self._listings)
                with _gc_paused():
                    scan_pages(self.db, listings)
                self._listings = listings
        self._maybe_snapshot()

    def _ingest(self, todo: list[tuple[str, int, int]], removed: list[str], show: bool) -> None:
        items = [(rel, m, sz, (self._stat.get(rel) or (0, 0, None))[2]) for rel, m, sz in todo]
        chunks = [items[i : i + 500] for i in range(0, len(items), 500)]
        workers = min(ANALYSE_WORKERS, os.cpu_count() or 1, len(chunks))
        bar = None
        if show and len(todo) > 200:
            from ragkit.core.progress import progress_bar

            bar = progress_bar(total=len(todo), desc="indexing pages", unit="page", file=sys.stderr)
        pool = None
        try:
            # Processes only when this process has no other thread: fork is then safe, and spawn would
            # re-run a user's script that lacks a __main__ guard.
            if (workers > 1 and len(items) >= 2000 and threading.active_count() == 1
                    and "fork" in _mp_methods()):
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                with starting_workers(fork=True):
                    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                               initializer=follow_parent, initargs=(os.getpid(),))
                    # submit, not map: map's iterator cancels its futures when it is dropped, and the pool's
                    # thread then raises InvalidStateError (a traceback) marking them broken after Ctrl-C
                    futures = [pool.submit(_analyse_many, str(self.db), c) for c in chunks]
                results = (f.result() for f in futures)
            else:
                results = (_analyse_many(str(self.db), c) for c in chunks)
            batch: list[_Analysed] = []
            touched: list[tuple[str, int, int]] = []
            for chunk, res in zip(chunks, results, strict=True):
                for (rel, _m, _s, _o), r in zip(chunk, res, strict=True):
                    if r is None:
                        removed.append(rel)
                    elif isinstance(r, tuple):
                        touched.append((r[1], r[2], r[3]))  # same content, new stat: no re-analysis
                    else:
                        batch.append(r)
                if bar is not None:
                    bar.update(len(chunk))
                if len(batch) >= 2000:
                    self._write(batch, touched, [], sync=False)
                    batch, touched = [], []
            self._write(batch, touched, [r for r in removed if r in self._stat], sync=False)
            self._sync()
        except BaseException:
            if pool is not None:  # Ctrl-C or an error, perhaps while the pool was starting
                stop_pool(pool)
                pool = None
            raise
        finally:
            if pool is not None:
                pool.shutdown()
            if bar is not None:
                bar.close()

    def add_page(self, rel: str) -> None:
        """Index (or re-index) one page file now; it is searchable when this returns."""
        rel = self._rel(rel)
        full = self.db / rel
        if not full.is_file():
            raise RagError(f"cannot index {rel}: no such page file in {self.db}")
        with self._write_lock:
            st = full.stat()
            self._ingest([(rel, st.st_mtime_ns, st.st_size)], [], False)
        self._maybe_snapshot()
        # searchable by meaning too: a page added on purpose (the optimizer's copy, re-asked at once) must not
        # wait for the background filler; one page is a few ms to embed
        if self.semantic and get_embedder() is not None:
            with self._lock:
                d = self._rel_doc.get(rel)
                row = [(d, rel, self._shas[d])] if d is not None else []
            if row:
                self._vectors(row, compute=True, show_progress=False)

    def update_pages(self, written: list[str], removed: list[str]) -> None:
        """Pages a writer (an upload, a deletion) wrote and removed, applied now."""
        for rel in removed:
            self.remove_page(rel)
        for rel in written:
            self.add_page(rel)

    def remove_page(self, rel: str) -> None:
        """Forget one page now (whether or not its file still exists)."""
        rel = self._rel(rel)
        with self._write_lock:
            self._maybe_sync()
            if rel in self._stat:
                self._write([], [], [rel])
        self._maybe_snapshot()

    def _rel(self, rel: str) -> str:
        rel = strip_db_prefix(self.db, str(rel))
        full = resolve_in_db(self.db, rel)
        return full.relative_to(self.db).as_posix()

    # ----------------------------------------------------------------------------------------- readers
    def pages(self, prefix: str | None = None) -> list[str]:
        """Every indexed page (db-relative, sorted), or those under the folder `prefix`."""
        self._maybe_sync()
        with self._lock:
            cached = self._cache.get("pages")
            if cached is None or cached[0] != self._gen:
                self._cache["pages"] = cached = (self._gen, sorted(self._rel_doc))
            rels = cached[1]
        if prefix:
            p = self._prefix(prefix)
            rels = [r for r in rels if r == p or r.startswith(p + "/")] if p else rels
        return list(rels)

    def _prefix(self, path: str) -> str:
        return db_folder(self.db, path)

    def _prefix_mask(self, prefix: str) -> np.ndarray:
        key = (prefix, self._gen)
        m = self._prefix_cache.get(key)
        if m is None:
            pre = prefix + "/"
            m = np.fromiter((r == prefix or r.startswith(pre) for r in self._rels), dtype=bool,
                            count=len(self._rels))
            self._prefix_cache[key] = m
        return m

    def query_terms(self, query: str) -> Counter:
        """The query's weighted terms (understand.weighted_terms over this index's vocabulary)."""
        with self._lock:
            return weighted_terms(query, _Stats(self), self._synonyms)

    def _df(self, term: str) -> int:
        """How many live pages hold `term`. Called under the lock or with a stale answer being harmless."""
        found = self._postings(term)
        return 0 if found is None else int(np.count_nonzero(self._alive.view()[found[0]]))

    def _frame_w(self, term: str) -> float:
        """A term's question-frame weight (1 = not a frame word)."""
        return frame_weights([term], _Stats(self))[term]

    def search(self, query: str, k: int = 10, path: str | None = None, *,
               mode: str | None = None) -> list[SearchHit]:
        """Ranked pages for `query` (any language), optionally only under the folder `path`.

        mode: "keyword", "hybrid" (keyword candidates re-ranked by meaning, and pages much closer in meaning than
        all of them put first: see _dense_recall) or None = hybrid when the embedding model is available and not
        switched off (RAG_EMBED=0), else keyword.
        """
        prefix = self._prefix(path) if path else ""
        if self._ingested():  # an instance held across an ingest (a notebook) answers from the new pages too
            self.refresh(progress=False)
        self._maybe_sync()
        if k <= 0 or not query.strip():
            return []
        q = self.query_terms(query)
        emb = get_embedder() if mode != "keyword" and self.semantic else None
        dense = emb is not None
        # Inline, not on a thread: measured at 100k pages, a thread overlapping the keyword part made both
        # slower (GIL hand-offs), 62 ms vs 13 ms per hybrid query.
        with self._lock:
            scores, doc = self._keyword_scores(q)
            if prefix:
                inside = self._prefix_mask(prefix)
                scores, doc = np.where(inside, scores, 0.0), np.where(inside, doc, 0.0)
            worded = self._worded(q, len(scores)) if dense else None
            refs = page_refs(query) if PAGE_REF_WEIGHT else set()
            labels = [t for t in q if t.startswith("§")] if PAGE_REF_WEIGHT else []
            if (refs or labels) and scores.any():
                # the page's position in its file, or the number printed on it ("page 17" of a manual whose
                # printed numbering starts after a cover and a contents page)
                if refs:
                    named = np.isin(self._pages.view(), list(refs)) | np.isin(self._printed.view(), list(refs))
                else:
                    named = np.zeros(len(scores), bool)
                if LAST_PAGE in refs:
                    named |= self._last_pages()
                # "Figure 4" names the page whose caption is Figure 4, as "page 7" names page 7; every filing has a
                # balance sheet: a statement is named only in the document asked about (the best evidence)
                best = float(doc[self._alive.view()].max(initial=0.0)) if STATEMENT_TERMS & set(labels) else 0.0
                for label in labels:
                    if (found := self._postings(label)) is not None:
                        pages = found[0]
                        if label in STATEMENT_TERMS:
                            pages = pages[doc[pages] >= best] if best > 0 else pages[:0]
                        named[pages] = True
                # A named page may hold none of the query's words (a photo, a scan: "how many cars on page 3"):
                # it then stands on its document's evidence, so only documents that match the query compete.
                named &= (scores > 0) | ((doc > 0) & self._alive.view())
                scores = np.where(named, np.maximum(scores, doc) + PAGE_REF_WEIGHT * float(scores.max()), scores)
            scores = self._year_bonus(years(query), scores)
            periods = period_terms(query)
            scores = self._period_bonus(periods, scores)
            cand = self._top(scores, max(k, PHRASE_N, RERANK_N if dense else 0))
            rows = [(int(d), self._rels[d], self._shas[d]) for d in cand]
            kw = scores[cand].astype(np.float64)
            kw = self._phrase_bonus(query, rows, kw)
            # a neighbouring period's report of the same company shares nearly every word: it comes after
            conflict = self._period_conflicts(periods, self._dgroup.view()[cand])
            kw = np.where(conflict, kw * (1.0 - PERIOD_WEIGHT), kw)
        order = np.lexsort((np.arange(len(rows)), -kw))
        rows, kw = [rows[i] for i in order], kw[order]
        ranking = ["keyword"] * len(rows)
        unembedded = 0
        if dense:
            rows, kw = rows[: max(k, RERANK_N)], kw[: max(k, RERANK_N)]
            sims = self._dense_sims(emb, query, rows) if rows else np.zeros(0)
            if sims is not None:
                if rows:
                    fused = fuse(kw, sims)
                    order = np.lexsort((np.arange(len(rows)), -fused))
                    rows, kw = [rows[i] for i in order], fused[order]
                n = len(rows)
                rows, kw = self._with_recalled(emb, query, prefix, rows, kw, sims, k, worded)
                ranking = ["meaning"] * (len(rows) - n) + ["hybrid"] * n
            # said with every hit: meaning weighs only pages that have a vector (a search never changes its
            # ranking between two calls without saying why)
            unembedded = self.lacking_in_scope(prefix)
        with self._lock:
            lasts = self._last_pages() if LAST_PAGE in refs else None
            picked = [(rel, int(self._pages.a[d]), self._titles[d], float(score), how,
                       lasts is not None and bool(lasts[d]))
                      for (d, rel, _sha), score, how in zip(rows, kw, ranking, strict=False)]
        out = []
        for rel, page, title, score, how, last in picked:  # the first k that may be shown (query.may_show)
            if len(out) >= k:
                break
            meta, body = self._read(rel)
            if not may_show(body, page, meta.printed_page, refs, lambda last=last: last):
                continue
            out.append(SearchHit(path=rel, page=page, title=title, score=round(score, 4),
                                 snippet=make_snippet(body, q), printed_page=meta.printed_page, ranking=how,
                                 unembedded=unembedded))
        return out

    def _worded(self, q: Counter, n: int) -> np.ndarray:
        """The pages holding a word of the query (vectors.word_terms), of n slots. Called under the lock."""
        out = np.zeros(n, bool)
        for term in word_terms(q):
            if (found := self._postings(term)) is not None:
                out[found[0]] = True
        return out

    def snippet(self, rel: str, q: Counter | str, width: int = 200) -> str:
        """A short window of the page around the best-matching query terms, CJK line breaks joined."""
        return make_snippet(self._read(rel)[1], q, width)

    def _read(self, rel: str) -> tuple[PageMeta, str]:
        """A page file's front matter and body (empty when it is gone)."""
        try:
            return parse_page((self.db / rel).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return PageMeta(), ""

    def _ingested(self) -> bool:
        """Whether an ingest (in this process or another) changed the database since the last scan: the next
        open_index re-scans at once instead of after REFRESH_EVERY (page files edited by hand wait for that)."""
        return _manifest_stamp(self.db) != self._manifest_seen

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._conn.close()
        with _INSTANCES_LOCK:
            if _INSTANCES.get(self.db) is self:
                del _INSTANCES[self.db]


class _Stats:
    """understand.TermStats over the embedded index (called under its lock)."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self.n = index._n_alive

    def known(self, terms) -> set[str]:
        return {t for t in terms if t in self._index._term_ids}

    def df(self, terms) -> dict[str, int]:
        return {t: self._index._df(t) for t in terms}

    def near(self, words) -> dict[str, set[str]]:
        ids = self._index._term_ids
        found = {w: {v for v in one_edit(w) if v in ids} for w in words}
        return {w: vs for w, vs in found.items() if vs}


# --------------------------------------------------------------------------------------------- module API
_INSTANCES: dict[Path, Index] = {}
_INSTANCES_LOCK = threading.Lock()


def open_embedded(db: Path, *, refresh: bool = True, progress: bool = True) -> Index:
    """The shared embedded index of `db` in this process, created (and brought up to date with the files) on
    first use."""
    root = Path(db).resolve()
    if not root.is_dir():
        raise RagError(f"database folder not found: {db} (run `rag ingest` first or pass db=)", flags=DB_FLAG)
    with _INSTANCES_LOCK:
        idx = _INSTANCES.get(root)
        if idx is None:
            idx = _INSTANCES[root] = Index(root, progress=progress)
        # Once any caller asked for the progress lines (the CLI does), the shared instance shows them: a quiet
        # library call opening it first (an evaluator, a scorer) must not silence the command's indexing.
        idx.progress = idx.progress or progress
    # A later open in a long-lived process also notices files changed by hand or by `rag ingest` meanwhile
    # (a stat of every page; cheap, but not on every call).
    if refresh and (time.monotonic() - idx.last_refresh > REFRESH_EVERY or idx._ingested()):
        idx.refresh()
    return idx


def _manifest_stamp(db: Path) -> tuple[int, int, int] | None:
    """The ingest manifest's identity (inode, mtime, size): an ingest or prune that wrote or removed a page
    replaced it (atomically: a new inode). None when there is none."""
    try:
        st = (db / ".ragkit" / INGEST_MANIFEST).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
