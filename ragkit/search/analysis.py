"""Text analysis of one page file: its fields (folder path, headings and captions, body), their terms, the
caption labels ("Figure 4" -> "§figure4"), the term pairs of the phrase signal, and the title and document group
the page belongs to. Runs in worker processes when thousands of pages changed at once."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragkit.core.pagefile import MARKER_LINE, first_heading, parse_page
from ragkit.core.paths import page_number
from ragkit.core.text import STOPWORDS, name_forms, normalize, search_terms
from ragkit.search.periods import reported_periods
from ragkit.search.statements import page_statements

ANALYSE_WORKERS = 2  # processes that read and tokenise pages when thousands changed at once
# Bump when the analysis (tokenizer, fields, blob layout, period terms) changes: the embedded index's cache is then
# rebuilt from the files, and a cluster re-analyses its pages on the next sync (their vectors are kept).
ANALYSIS_VERSION = "20"  # 11-12: capitalised words keep their unstemmed form, not counted in the page length;
# 13: fiscal period terms (search/periods.py); 14: the second quarter and the half year are one report, 中間決算;
# 15: financial statement terms (search/statements.py); 16: a statement of condition is a balance sheet;
# 17: Korean fiscal periods (2024년 3분기, 상반기); 18: a filing's quarter from its year to date ("six months ended");
# 19: a first quarter's three months alone; 20: a year to date ending in a month's first days closes the month before

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


def _label(kind: str, num: str, sub: str | None = None) -> str:
    return f"§{_LABEL_KINDS[kind]}{int(num)}" + (f".{int(sub)}" if sub else "")


def caption_label(caption: str) -> str | None:
    """The term for a caption's own label: "Figure 4: Querying process" -> "§figure4", "図3 製氷室" ->
    "§figure3", "Table 2-1" and "Table 2.1" -> "§table2.1"."""
    m = _LABEL.match(normalize(caption))
    return _label(m[1], m[2], m[3]) if m else None


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


_RANGE_FOLDER = re.compile(r"pages_\d+-\d+|page_\d+")


def _folder_text(rel: str) -> str:
    """The folder names of a page path, as searchable text (category, document, section...). The page-range
    folders of a document without an outline ("pages_011-020", "page_021") say nothing: a query's "page" would match them
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
        body = MARKER_LINE.sub("", body)
    captions = _CAPTION_LINE.findall(body)
    fields = (
        _folder_text(rel),
        "\n".join(_HEADING_LINE.findall(body) + captions),
        body,
    )
    labels = [t for t in map(caption_label, captions) if t]
    # the fiscal periods a page reports count as headings do ("2025年3月期 第3四半期", "FY2024 Q3")
    labels += reported_periods(f"{fields[0]}\n{meta.document}\n{body}")
    labels += page_statements(body)  # "§balance": the page is a balance sheet
    counts: dict[str, list[int]] = {}
    lens = []
    for fi, ftext in enumerate(fields):
        names = name_forms(ftext)
        toks = search_terms(ftext, names=names) + (labels if fi == 1 else [])
        if fi == 2:
            seq = [t for t in toks if t not in STOPWORDS and t not in names]
        # a name's unstemmed form rides along with its stem: it does not make the page longer (Title Case
        # table rows of a financial statement would otherwise count twice)
        lens.append(len(toks) - sum(1 for t in toks if t in names))
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


def _pairs(ids: np.ndarray) -> np.ndarray:
    """Sorted unique adjacent term-id pairs (a << 32 | b) of a term sequence: a cheap phrase/proximity signal
    ("operating profit", "causal graph"; for CJK bigrams a pair is a trigram). Ids < 0 (unknown) never pair."""
    ids = ids.astype(np.int64)
    a, b = ids[:-1], ids[1:]
    ok = (a >= 0) & (b >= 0)
    return np.unique((a[ok] << 32) | b[ok]).astype("<u8")


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

