"""Page files as cluster documents: one per page (the spec's fields, ragkit's pre-analysed terms, the page's
vector) and one per source document (all its pages' terms, its card, the year it reports)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ragkit.core.pagefile import FRONT_PAGES, parse_page
from ragkit.core.text import STOPWORDS
from ragkit.search.analysis import ANALYSIS_VERSION, _analyse, _folder_text
from ragkit.search.postings import CARD_PAGES, FIELD_WEIGHTS
from ragkit.search.snippets import display_text
from ragkit.search.vectors import EMBED_CHARS, EMBED_CHUNK, EMBED_DIM

FULL_TEXT_CHARS = 20_000  # the page with its neighbours, cut here
_YEAR_TERM = re.compile(r"(?:19[9]\d|20[0-3]\d|2040)")
_PERIOD = re.compile(r"§(?:fy|q|h|end)\d")


def doc_id(rel: str) -> str:
    """A page's id in the cluster: a hash of its db-relative path (ids have a length limit; paths do not)."""
    return hashlib.sha1(rel.encode("utf-8")).hexdigest()


def stored_sha(content_sha: str) -> str:
    """What a page document's `sha` holds: the page's content hash and the analysis its terms come from, so a sync
    notices both a changed page and a new ragkit's analysis of an unchanged one."""
    return f"{content_sha}:{ANALYSIS_VERSION}"


def same_content(stored: str, other: str) -> bool:
    """Whether two stored shas (of this or an earlier ragkit, which stored the content hash alone) are of one text."""
    return bool(stored) and stored.partition(":")[0] == other.partition(":")[0]


def file_id(group: str) -> str:
    return hashlib.sha1(group.encode("utf-8")).hexdigest()[:20]


@dataclass
class PageTerms:
    """What a page adds to its document's index document."""

    group: str
    page: int
    terms: Counter  # weighted term frequencies
    year_counts: Counter  # year terms on the page (for the document's report year)


@dataclass
class PageDoc:
    rel: str
    sha: str  # stored_sha()
    group: str
    page: int
    source: dict  # the page document's _source, without its vector
    chunks: list[str]  # the text its vector is made of
    terms: Counter  # weighted term frequencies (for the document's own index document)
    year_counts: Counter  # year terms on the page (for the document's report year)

    def slim(self) -> PageTerms:
        return PageTerms(self.group, self.page, self.terms, self.year_counts)


def pair_tokens(seq: list[str]) -> list[str]:
    """Adjacent term pairs of a page's body terms, one token each ("operating+profit"): the phrase signal."""
    seq = [t for t in seq if t not in STOPWORDS]
    return sorted({f"{a}+{b}" for a, b in zip(seq[:-1], seq[1:], strict=True)})


def read_page_doc(db: Path, rel: str, neighbours: tuple[str, str] = ("", "")) -> PageDoc | None:
    """The cluster document of one page file, or None when the file is gone."""
    try:
        raw = (db / rel).read_bytes()
    except OSError:
        return None
    a = _analyse(rel, raw, 0, len(raw))
    meta, body = parse_page(raw.decode("utf-8", errors="replace"))
    weighted: Counter = Counter()
    for term, counts in a.terms.items():
        weighted[term] = int(sum(w * c for w, c in zip(FIELD_WEIGHTS.tolist(), counts, strict=True)))
    rk = " ".join(t for t, n in sorted(weighted.items()) for _ in range(n))
    text = display_text(body)
    chunk_src = text[:EMBED_CHARS]
    chunks = [chunk_src[i: i + EMBED_CHUNK] for i in range(0, len(chunk_src), EMBED_CHUNK)] or [""]
    before, after = neighbours
    full = "\n\n".join(x for x in (before, text, after) if x)[:FULL_TEXT_CHARS]
    source = meta.source or ""
    parts = rel.split("/")
    years = Counter({t: n for t, n in weighted.items() if _YEAR_TERM.fullmatch(t)})
    doc = {
        "path": rel,
        "file_id": file_id(a.group),
        "filename": Path(source).name if source else (parts[-2] if len(parts) > 1 else rel),
        "document": "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:-1]),
        "path_words": _folder_text(rel),
        "title": a.title,
        "page": a.page,
        "printed_page": meta.printed_page or "",
        "content": text,
        "full_text": full,
        "rk": rk,
        "rk_pairs": " ".join(pair_tokens(a.seq)),
        "sha": stored_sha(a.sha),
        "indexed_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return PageDoc(rel=rel, sha=stored_sha(a.sha), group=a.group, page=a.page, source=doc, chunks=chunks, terms=weighted,
                   year_counts=years)


def chunk_blob(chunk_vectors: np.ndarray) -> str:
    """A page's chunk vectors as the cluster stores them: float16, one after the other, base64."""
    return base64.b64encode(np.asarray(chunk_vectors, dtype="<f2").tobytes()).decode("ascii")


def chunk_vectors(blob: str) -> np.ndarray | None:
    """chunk_blob's vectors again (rows of EMBED_DIM float32), or None when the blob is not whole."""
    try:
        raw = base64.b64decode(blob, validate=True)
    except (ValueError, TypeError):
        return None
    if not raw or len(raw) % (2 * EMBED_DIM):
        return None
    return np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(-1, EMBED_DIM)


def page_vector(chunk_vectors: np.ndarray) -> list[float]:
    """One vector for a page: the mean of its chunks' vectors, unit length."""
    v = np.asarray(chunk_vectors, dtype=np.float32).mean(axis=0)
    v /= max(float(np.linalg.norm(v)), 1e-9)
    return [round(float(x), 6) for x in v]


def document_doc(group: str, pages: Iterable[PageTerms]) -> dict:
    """The document's own index document: every page's terms, its card (first CARD_PAGES pages), the year its
    first FRONT_PAGES pages name most (the later one on a tie), and its page count."""
    pages = list(pages)
    every: Counter = Counter()
    card: Counter = Counter()
    years: Counter = Counter()
    periods: set[str] = set()
    for p in pages:
        every.update(p.terms)
        if 1 <= p.page <= CARD_PAGES:
            card.update(p.terms)
        if 1 <= p.page <= FRONT_PAGES:
            years.update(p.year_counts)
            periods.update(t for t in p.terms if _PERIOD.match(t))
    report_year = max(years.items(), key=lambda kv: (kv[1], kv[0]))[0] if years else None
    return {
        "file_id": file_id(group),
        "rk": " ".join(t for t, n in sorted(every.items()) for _ in range(n)),
        "rk_card": " ".join(t for t, n in sorted(card.items()) for _ in range(n)),
        "report_year": int(report_year) if report_year else None,
        "pages": len(pages),
        "last_page": max((p.page for p in pages), default=0),
        "periods": sorted(periods),  # the fiscal periods its first pages report (search/periods.py)
    }
