"""Sentence vectors for A-RAG's semantic_search: each page's sentences embedded with the search's own model
(get_embedder), kept with the index cache in DB/.ragkit/sentences.sqlite keyed by the page's content hash, so a
question embeds only itself; a new or changed page is embedded on first use, a deleted one is never looked up.

    sentence_index(db) -> SentenceIndex | None (None: no embedding model)   # one shared instance per database
    SentenceIndex.search(query, pages, k) -> [(rel, score, best sentence)]  # max-pooled sentence cosines
    SentenceIndex.similarity(query, texts) -> [cosine of each text]           # texts embedded now, not kept
    SentenceIndex.past_the_cut(rel, text) -> [text] when a long page's kept sentences never saw it, else []
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.core.pagefile import parse_page
from ragkit.core.paths import resolve_in_db
from ragkit.core.text import join_cjk_breaks, split_sentences
from ragkit.search.vectors import EMBED_VERSION, get_embedder

SENTENCE_FILE = "sentences.sqlite"
SENTENCE_VERSION = f"{EMBED_VERSION}|sent:300/64/abbr/brackets"  # a change of model or of the cut re-embeds every page
MAX_SENTENCE_CHARS = 300  # a longer "sentence" (a table row run, a list) is cut here
MAX_SENTENCES = 64  # per page (the first ones)
MIN_SENTENCE_CHARS = 3
EMBED_BATCH = 64


def page_sentences(text: str) -> list[str]:
    """The sentences of a page file's text (front matter removed), as they are embedded."""
    _, body = parse_page(text)
    out = []
    # a label's space joined too ("第2章 勤務" as "第2章勤務"): the sentences embedded stay those SENTENCE_VERSION names
    for s in split_sentences(join_cjk_breaks(body, keep_labels=False)):
        s = " ".join(s.lstrip("#>*-| ").split())
        if len(s) >= MIN_SENTENCE_CHARS:
            out.append(s[:MAX_SENTENCE_CHARS])
        if len(out) >= MAX_SENTENCES:
            break
    return out


class SentenceIndex:
    """Sentence vectors of one database's pages: in memory by content hash, persisted in SQLite."""

    def __init__(self, db: Path, embedder: Any) -> None:
        self.db = Path(db)
        self.embedder = embedder
        self._lock = threading.Lock()
        self._mem: dict[str, tuple[list[str], np.ndarray]] = {}
        self._shas: dict[str, tuple[int, int, str]] = {}  # rel -> (mtime_ns, size, content sha)
        self._path = self.db / ".ragkit" / SENTENCE_FILE
        self.embedded = 0  # pages embedded by this process (the rest came from the cache)

    def _connect(self) -> sqlite3.Connection:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path, timeout=30)
        conn.execute("CREATE TABLE IF NOT EXISTS sentences (sha TEXT PRIMARY KEY, version TEXT NOT NULL, "
                     "sentences TEXT NOT NULL, vectors BLOB NOT NULL)")
        return conn

    def _vectors(self, rels: list[str]) -> dict[str, tuple[list[str], np.ndarray]]:
        """rel -> (sentences, unit vectors) for every readable page of `rels`, embedding what is missing."""
        shas: dict[str, str] = {}
        texts: dict[str, str] = {}
        for rel in rels:
            try:
                full = resolve_in_db(self.db, rel)
                st = full.stat()
                known = self._shas.get(rel)
                if known and known[:2] == (st.st_mtime_ns, st.st_size) and known[2] in self._mem:
                    shas[rel] = known[2]
                    continue
                raw = full.read_bytes()
            except OSError:
                continue  # removed meanwhile
            sha = hashlib.sha1(raw).hexdigest()
            self._shas[rel] = (st.st_mtime_ns, st.st_size, sha)
            shas[rel] = sha
            if sha not in self._mem:
                texts[sha] = raw.decode("utf-8", errors="replace")
        with self._lock:
            need = [s for s in texts if s not in self._mem]
            if need:
                self._load(need)
                need = [s for s in need if s not in self._mem]
            if need:
                self._embed({s: texts[s] for s in need})
            return {rel: self._mem[sha] for rel, sha in shas.items() if sha in self._mem}

    def _load(self, shas: list[str]) -> None:
        if not self._path.is_file():
            return
        try:
            conn = self._connect()
        except (sqlite3.Error, OSError):
            return  # unreadable: embed anew (and try to store)
        try:
            for i in range(0, len(shas), 500):
                part = shas[i:i + 500]
                q = ("SELECT sha, sentences, vectors FROM sentences WHERE version = ? AND sha IN "
                     f"({','.join('?' * len(part))})")
                for sha, sents, blob in conn.execute(q, [SENTENCE_VERSION, *part]):
                    sentences = json.loads(sents)
                    mat = np.frombuffer(blob, dtype=np.float32).reshape(len(sentences), -1) if sentences \
                        else np.zeros((0, 1), np.float32)
                    self._mem[sha] = (sentences, mat)
        except (sqlite3.Error, ValueError):
            pass  # a torn or foreign file: what is missing is embedded anew
        finally:
            conn.close()

    def _embed(self, texts: dict[str, str]) -> None:
        per_page = {sha: page_sentences(t) for sha, t in texts.items()}
        flat = [s for sents in per_page.values() for s in sents]
        vecs = [self.embedder.encode(flat[i:i + EMBED_BATCH]) for i in range(0, len(flat), EMBED_BATCH)]
        mat = np.concatenate(vecs).astype(np.float32) if vecs else np.zeros((0, 1), np.float32)
        rows, at = [], 0
        for sha, sents in per_page.items():
            part = mat[at:at + len(sents)] if sents else np.zeros((0, 1), np.float32)
            at += len(sents)
            self._mem[sha] = (sents, part)
            rows.append((sha, SENTENCE_VERSION, json.dumps(sents, ensure_ascii=False), part.tobytes()))
        self.embedded += len(per_page)
        try:
            conn = self._connect()
            try:
                with conn:  # one transaction: all of this batch or nothing
                    conn.executemany("INSERT OR REPLACE INTO sentences VALUES (?, ?, ?, ?)", rows)
            finally:
                conn.close()
        except (sqlite3.Error, OSError):
            pass  # a read-only database still answers; the vectors stay in memory

    def search(self, query: str, pages: list[str], k: int = 5) -> list[tuple[str, float, str]]:
        """The `k` pages of `pages` whose closest sentence is closest to `query` (cosine), best first, each with
        that sentence."""
        qv = self.embedder.encode_query(query)
        scored = []
        for rel, (sents, mat) in self._vectors(pages).items():
            if not sents:
                continue
            sims = mat @ qv
            i = int(np.argmax(sims))
            scored.append((rel, float(sims[i]), sents[i]))
        scored.sort(key=lambda t: (-t[1], t[0]))
        return scored[:k]

    def similarity(self, query: str, texts: list[str]) -> list[float]:
        """The cosine between `query` and each of `texts` (embedded now, not kept)."""
        if not texts:
            return []
        qv = self.embedder.encode_query(query)
        return [float(x) for x in self.embedder.encode(texts) @ qv]

    def past_the_cut(self, rel: str, text: str) -> list[str]:
        """[text] (taken from page `rel`) when none of the page's kept sentences begins like it and the page has
        more sentences than MAX_SENTENCES (what its vectors never saw); [] otherwise."""
        sents = self._vectors([rel]).get(rel, ([], None))[0]
        if len(sents) < MAX_SENTENCES:
            return []
        head = " ".join(text.split())[:40]
        return [] if any(s.startswith(head) for s in sents) else [text]

    def ensure(self, pages: list[str]) -> int:
        """Embed every page of `pages` lacking vectors now (a batch does this once before its questions);
        returns how many this process embedded."""
        before = self.embedded
        self._vectors(pages)
        return self.embedded - before


_SHARED: dict[str, SentenceIndex] = {}
_SHARED_LOCK = threading.Lock()


def sentence_index(db: Path) -> SentenceIndex | None:
    """The shared SentenceIndex of `db`, or None when there is no embedding model (RAG_EMBED=0, not installed)."""
    emb = get_embedder()
    if emb is None:
        return None
    key = str(Path(db).resolve())
    with _SHARED_LOCK:
        si = _SHARED.get(key)
        if si is None or si.embedder is not emb:
            si = _SHARED[key] = SentenceIndex(Path(db), emb)
        return si
