"""The A-RAG paper's three tools over the page tree (a chunk is a page; its db-relative path is the metadata
prefix): keyword_search, semantic_search, chunk_read. Read-only and confined to the database like the agent's
Toolbox, whose schemas and dispatch they share; each docstring is the description the model reads.

    ARagTools(db, index): keyword_search, semantic_search, chunk_read, schemas(), call(name, arguments) -> str,
    read_set (the chunks this question has read), pages_read
"""

from __future__ import annotations

import re
import threading
import unicodedata
from pathlib import Path
from typing import Any

from ragkit.answer.tools import Toolbox, _n
from ragkit.core.errors import PathEscapeError
from ragkit.core.pagefile import first_heading, parse_page
from ragkit.core.paths import page_number, resolve_in_db
from ragkit.core.text import join_cjk_breaks

ARAG_TOOL_NAMES = ("keyword_search", "semantic_search", "chunk_read")
TOP_K = 5  # results per search (the seed's top_k)
MAX_K = 20
MAX_KEYWORDS = 12
MAX_READ = 3  # chunks per chunk_read call (a page shows at most 10,000 characters)
SNIPPET_CHARS = 200
_SPLIT = re.compile(r"[,;、，；\n]+")


def _norm(text: str) -> str:
    """NFKC, CJK line breaks joined: the form both the chunks and the keywords are matched in (a label's space
    too, so that "第2章勤務" finds "第2章 勤務")."""
    return join_cjk_breaks(unicodedata.normalize("NFKC", text), keep_labels=False)


def parse_keywords(keywords: str) -> list[str]:
    """The keywords of a keyword_search argument: comma (or 、 ; newline) separated phrases; one phrase of
    several words also counts its words one by one. Lower-cased, deduplicated, longest first."""
    parts = [" ".join(p.split()) for p in _SPLIT.split(_norm(str(keywords or "")))]
    parts = [p for p in parts if p]
    if len(parts) == 1 and " " in parts[0]:
        parts += parts[0].split()
    out: list[str] = []
    for p in parts:
        p = p.lower()
        if p not in out:
            out.append(p)
    return sorted(out, key=len, reverse=True)[:MAX_KEYWORDS]


def keyword_score(keywords: list[str], text_lower: str) -> tuple[int, dict[str, int]]:
    """The seed's exact-match score Σ count(k, chunk) × len(k), and the count of each keyword found."""
    counts = {k: text_lower.count(k) for k in keywords}
    counts = {k: c for k, c in counts.items() if c}
    return sum(c * len(k) for k, c in counts.items()), counts


class _ChunkTexts:
    """Page bodies of one database in matching form, cached by (mtime, size): keyword_search scans every chunk."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: dict[str, tuple[int, int, str, str, str]] = {}  # rel -> (mtime, size, text, lower, title)

    def get(self, db: Path, rel: str) -> tuple[str, str, str] | None:
        try:
            full = resolve_in_db(db, rel)
            st = full.stat()
        except (OSError, PathEscapeError):
            return None
        with self._lock:
            known = self._texts.get(rel)
        if known and known[:2] == (st.st_mtime_ns, st.st_size):
            return known[2:]
        try:
            _, body = parse_page(full.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return None
        text = _norm(body)
        entry = (st.st_mtime_ns, st.st_size, text, text.lower(), first_heading(text))
        with self._lock:
            self._texts[rel] = entry
        return entry[2:]


_CHUNKS: dict[str, _ChunkTexts] = {}
_CHUNKS_LOCK = threading.Lock()


def chunk_texts(db: Path) -> _ChunkTexts:
    key = str(Path(db).resolve())
    with _CHUNKS_LOCK:
        return _CHUNKS.setdefault(key, _ChunkTexts())


def highlight(text: str, keywords: list[str], width: int = SNIPPET_CHARS) -> str:
    """A window of `text` around its first keyword (the longest found), keywords marked **like this**."""
    low = text.lower()
    found = [(low.find(k), k) for k in keywords if k and low.find(k) >= 0]
    if not found:
        return " ".join(text[:width].split())
    at = min(i for i, k in found if len(k) == max(len(k2) for _, k2 in found))
    a = max(0, at - width // 3)
    window = " ".join(text[a:a + width].split())
    pattern = re.compile("|".join(re.escape(k) for k in sorted({k for _, k in found}, key=len, reverse=True)),
                         re.IGNORECASE)
    marked = pattern.sub(lambda m: f"**{m.group(0)}**", window)
    return ("…" if a else "") + marked + ("…" if a + width < len(text) else "")


class ARagTools(Toolbox):
    """keyword_search, semantic_search and chunk_read of one question (its read set lives here)."""

    names = ARAG_TOOL_NAMES
    max_result_chars = 32_000  # three full pages

    def __init__(self, db: Path, index: Any) -> None:
        super().__init__(db, index)
        self.read_set: set[str] = set()
        self.sentences: Any = None  # the SentenceIndex, opened on the first semantic_search
        self.semantic_note = ""  # why semantic_search fell back to the index's search, when it did

    def _chunk_line(self, i: int, rel: str, score: str, title: str) -> str:
        read = " [already read]" if rel in self.read_set else ""
        title = f" — {title}" if title else ""
        return f"{i}. [{rel}] (page {page_number(rel) or 0}, score {score}){title}{read}"

    def keyword_search(self, keywords: str, k: int = TOP_K) -> str:
        """Find chunks (pages) that contain exact keywords. A chunk scores the sum over keywords of
        (occurrences in the chunk x keyword length), so longer, specific keywords weigh more. Returns the top
        chunks with their path and a snippet with the keywords marked **like this**. Good for names, numbers,
        codes and exact terms.

        Args:
            keywords: One or more keywords or short phrases, separated by commas, e.g. "RESET button, LED".
                Use the documents' language and wording.
            k: How many chunks to return (1-20).
        """
        words = parse_keywords(keywords)
        if not words:
            return "Error: no keywords given. Give one or more keywords separated by commas."
        k = max(1, min(MAX_K, int(k)))
        store = chunk_texts(self.db)
        scored = []
        for rel in self.index.pages():
            got = store.get(self.db, rel)
            if got is None:
                continue
            text, low, title = got
            score, counts = keyword_score(words, low)
            if score:
                scored.append((score, rel, text, title, counts))
        scored.sort(key=lambda t: (-t[0], t[1]))
        if not scored:
            return f"No chunk contains any of {words}. Try other or shorter keywords, or semantic_search."
        lines = [f"{_n(min(k, len(scored)), 'chunk')} of {len(scored)} matching {words}:"]
        for i, (score, rel, text, title, counts) in enumerate(scored[:k], 1):
            lines.append(self._chunk_line(i, rel, str(score), title))
            lines.append(f"   matches: {', '.join(f'{w}×{c}' for w, c in counts.items())}")
            lines.append(f"   {highlight(text, list(counts))}")
        return "\n".join(lines)

    def semantic_search(self, query: str, k: int = TOP_K) -> str:
        """Find chunks (pages) by meaning: every sentence of every chunk is compared with the query, and a
        chunk scores as its closest sentence. Returns the top chunks with their path and that sentence. Good
        for paraphrases, questions in other words, or another language than the documents.

        Args:
            query: What to look for, as a phrase or a question.
            k: How many chunks to return (1-20).
        """
        if not str(query).strip():
            return "Error: the query is empty."
        k = max(1, min(MAX_K, int(k)))
        if self.sentences is None:
            from ragkit.search.sentences import sentence_index

            self.sentences = sentence_index(self.db) or False
        if self.sentences is False:  # no embedding model here: the index's own search stands in, and says so
            self.semantic_note = "no embedding model (RAG_EMBED=0 or not installed): the index's search stood in"
            hits = self.index.search(query, k=k)
            found = [(h.path, h.score, h.snippet) for h in hits]
            head = f"[{self.semantic_note}]\n"
        else:
            found = self.sentences.search(query, self.index.pages(), k=k)
            head = ""
        if not found:
            return head + f"No chunk is close to {query!r}. Try keyword_search."
        lines = [head + f"{_n(len(found), 'chunk')} closest to {query!r}:"]
        store = chunk_texts(self.db)
        for i, (rel, score, sentence) in enumerate(found, 1):
            got = store.get(self.db, rel)
            lines.append(self._chunk_line(i, rel, f"{score:.3f}", got[2] if got else ""))
            lines.append(f"   closest sentence: {' '.join(str(sentence).split())[:SNIPPET_CHARS]}")
        return "\n".join(lines)

    def chunk_read(self, paths: str) -> str:
        """Read the full text of one or more chunks (pages) by their path, as the searches show it. A chunk
        already read for this question is skipped with a note (its text is in an earlier result). Answer only
        from chunks you have read, and cite them by path.

        Args:
            paths: Up to 3 chunk paths separated by commas, e.g. "manuals/router/setup/page_003.md".
        """
        wanted = [p.strip().strip("[]`\"'") for p in re.split(r"[,;\n]+", str(paths or ""))]
        wanted = [p for p in wanted if p]
        if not wanted:
            return "Error: give one or more chunk paths, as keyword_search or semantic_search showed them."
        out = []
        for p in wanted[:MAX_READ]:
            try:
                _, rel = self._resolve(p)
            except PathEscapeError as e:
                out.append(f"Error: {e}. Chunk paths are relative to the database root and stay inside it.")
                continue
            if rel in self.read_set:
                out.append(f"[{rel}: already read for this question; skipped (its text is in an earlier result)]")
                continue
            text = self.read_page(p)
            if not text.startswith("Error"):
                self.read_set.add(rel)
            out.append(text)
        if len(wanted) > MAX_READ:
            out.append(f"[{len(wanted) - MAX_READ} more paths not read: at most {MAX_READ} per call]")
        return "\n\n".join(out)
