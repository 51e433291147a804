"""Document frequencies of the terms over the whole database, and of every document its terms, names, folders and
the years its first pages name, cached per database in DB/.ragkit/ and updated when pages change."""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.answer.extractive.terms import term_set
from ragkit.core.pagefile import FRONT_PAGES, parse_page
from ragkit.core.paths import atomic_write_text, iter_pages, resolve_in_db
from ragkit.search.periods import era_years, period_terms

# -- corpus statistics (document frequencies), cached per database --------------------------------------
STATS_FILE = "offline-df.json"  # under DB/.ragkit/, next to the index: a cache derived from the pages
STATS_VERSION = 8  # bump when term_set or what is kept changes
_SAVE_AFTER = 50  # write the cache file when at least this many pages were (re)read
YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


@dataclass
class _Stats:
    pages: dict[str, tuple[int, int]] = field(default_factory=dict)  # rel -> (mtime_ns, size) when read
    df: Counter = field(default_factory=Counter)
    docs: dict[str, set[str]] = field(default_factory=dict)  # document (document_id) -> every term of its pages
    front: dict[str, set[str]] = field(default_factory=dict)  # document -> the years its first FRONT_PAGES name
    names: dict[str, set[str]] = field(default_factory=dict)  # document -> the terms of its title, folder and file
    folders: dict[str, set[str]] = field(default_factory=dict)  # document -> the folders (doc_key) of its pages
    periods: dict[str, set[str]] = field(default_factory=dict)  # document -> the periods its first pages report


_STATS: dict[str, _Stats] = {}
_STATS_LOCK = threading.Lock()


def doc_key(rel: str) -> str:
    """The document a page belongs to: its <category>/<document> folders (DESIGN §1)."""
    parts = rel.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:-1])


def document_id(rel: str, source: str = "") -> str:
    """Which document a page is part of: the file it was converted from (its front matter's `source`), which the
    optimizer's copies in other folders share; its <category>/<document> folders when it names none."""
    return source or doc_key(rel)


def read_page(db: Path, rel: str) -> str | None:
    try:
        return resolve_in_db(db, rel).read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def _signature(db: Path, rel: str) -> tuple[int, int]:
    try:
        st = (db / rel).stat()
        return st.st_mtime_ns, st.st_size
    except OSError:
        return 0, 0


def _load_stats(db: Path, universe: set[str]) -> _Stats | None:
    """The cached statistics if every page they counted is still there, unchanged."""
    try:
        data = json.loads((db / ".ragkit" / STATS_FILE).read_text(encoding="utf-8"))
        if data.get("version") != STATS_VERSION:
            return None
        pages = {rel: (int(sig[0]), int(sig[1])) for rel, sig in data["pages"].items()}
        if not set(pages) <= universe or any(_signature(db, rel) != sig for rel, sig in pages.items()):
            return None
        return _Stats(pages, Counter({t: int(c) for t, c in data["df"].items()}),
                      {d: set(terms) for d, terms in data["docs"].items()},
                      {d: set(years) for d, years in data["front"].items()},
                      {d: set(terms) for d, terms in data["names"].items()},
                      {d: set(f) for d, f in data["folders"].items()},
                      {d: set(p) for d, p in data["periods"].items()})
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def _save_stats(db: Path, st: _Stats) -> None:
    try:
        doc = {"version": STATS_VERSION, "pages": {r: list(sig) for r, sig in sorted(st.pages.items())},
               "df": dict(sorted(st.df.items())), "docs": {d: sorted(t) for d, t in sorted(st.docs.items())},
               "front": {d: sorted(y) for d, y in sorted(st.front.items())},
               "names": {d: sorted(t) for d, t in sorted(st.names.items())},
               "folders": {d: sorted(f) for d, f in sorted(st.folders.items())},
               "periods": {d: sorted(p) for d, p in sorted(st.periods.items())}}
        atomic_write_text(db / ".ragkit" / STATS_FILE, json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
    except OSError:
        pass  # a read-only database still answers; it just recounts next time


def corpus_stats(db: Path, index) -> tuple[int, Counter]:
    """(number of pages, document frequency per term) over the whole database (see _stats)."""
    st = _stats(db, index)
    return len(st.pages), st.df


@dataclass(frozen=True)
class Documents:
    """What the database's documents hold, by document_id (see _stats): every term of each one's pages; the
    years (1900-2099; an era year such as 令和5年 as its Western year) its first FRONT_PAGES pages name, the years
    a report covers ("for the fiscal year ended December 31, 2015", "surveys conducted in 2018"); the terms of
    the names it goes by (its title, its folder, its file: "Netflix, Inc.", NIKE_2021_10K); and the folders its
    pages sit in; the fiscal periods its first pages report (search.periods' terms: "§fy2025q3"). Read-only for
    callers."""

    terms: dict[str, set[str]]
    front_years: dict[str, set[str]]
    names: dict[str, set[str]]
    folders: dict[str, set[str]]
    periods: dict[str, set[str]]


def documents(db: Path, index) -> Documents:
    """The documents of the whole database, brought up to date: a snapshot, so a page of a new document counted
    meanwhile (an upload) cannot change it."""
    st = _stats(db, index)
    with _STATS_LOCK:
        return Documents(dict(st.docs), dict(st.front), dict(st.names), dict(st.folders), dict(st.periods))


def _stats(db: Path, index) -> _Stats:
    """The statistics of the whole database, brought up to date.

    Kept in memory per database and in DB/.ragkit/offline-df.json (so a new `rag ask` process does not
    re-read every page). Pages added later (the optimizer's copies) are counted incrementally; when a
    counted page disappears or its file changed (checked when the cache file is loaded) the counts are
    rebuilt. Within one process a page edited in place keeps its old counts until then: they are
    weights, not answers.
    """
    try:
        universe = set(index.pages())
    except Exception:  # an index without a page list: fall back to the files themselves
        universe = set(iter_pages(db))
    key = str(db.resolve())
    with _STATS_LOCK:
        st = _STATS.get(key)
        if st is None or not set(st.pages) <= universe:
            st = _load_stats(db, universe) or _Stats()
            _STATS[key] = st
        todo = sorted(universe - set(st.pages))
        for rel in todo:
            sig = _signature(db, rel)
            raw = read_page(db, rel)
            if raw is not None:
                terms = term_set(raw)
                st.df.update(terms)
                meta, body = parse_page(raw)
                doc = document_id(rel, meta.source)
                st.docs.setdefault(doc, set()).update(terms)
                folder = doc_key(rel)
                st.folders.setdefault(doc, set()).add(folder)
                named = f"{meta.document}\n{folder.rsplit('/', 1)[-1]}\n{Path(meta.source).stem if meta.source else ''}"
                st.names.setdefault(doc, set()).update(term_set(named))
                if meta.page and meta.page <= FRONT_PAGES:
                    st.front.setdefault(doc, set()).update(YEAR.findall(body), era_years(body))
                    # as the index reads them (search/analysis.py): the folders, the document's title, the page
                    st.periods.setdefault(doc, set()).update(period_terms(f"{folder}\n{meta.document}\n{body}"))
            st.pages[rel] = sig
        if len(todo) >= _SAVE_AFTER:
            _save_stats(db, st)
        return st


def idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))
