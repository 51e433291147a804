"""PDF/DOCX/PPTX -> one markdown file per page under DB/<category>/<document>/<section>/page_NNN.md.

INTERFACE (owned by the ingest work; others rely on it):

    ingest_sources(sources: list[Path], *, db: Path, category: str | None = None, force: bool = False,
                   workers: int | None = None, progress: bool = True) -> IngestReport
    print_report(report: IngestReport, console) -> None
    IngestReport.failed -> list of failed documents (non-empty => exit status 1)

Decisions (DESIGN §1 is the contract; these fill in what it leaves open):

- category: the name of the folder that directly contains the source (for a file given on the command line
  and for a file lying at the root of a walked folder this is its own parent folder), or `--category`.
  document: the file's stem. Both go through `paths.sanitize_name` (NFC, no separators/control/<>:"|?*,
  at most 80 characters, Japanese stays Japanese).
- The front matter's `document` is the document's title: PDF/Office metadata title, else its first
  heading, else the stem.
- PDF sections: the top-level entries of `doc.get_toc()` (the smallest level present; when that level has a
  single entry, e.g. the document's own title, and the next has several, the next level). A page belongs
  to the last top-level entry starting on or before it, except that a page on which several top-level
  entries start belongs to the first of them (its top part reads as that section); the following pages
  belong to the last one. Pages before the first entry go to the section "front matter". Entries
  pointing outside the document are ignored.
- No outline (PDF, PPTX without sections, DOCX without headings): fixed ranges of 10 pages named
  "pages_001-010", "pages_011-020", ... (deterministic, never one folder per page).
- PPTX: one page per slide; sections are the deck's own PowerPoint sections when it has them, else the
  10-slide ranges above. DOCX: split on explicit page breaks and on Word's last-rendered page breaks
  (markers injected into a copy of word/document.xml before markitdown converts it); a document with
  neither is split at its top-level headings (one "page" per heading). DOCX sections are the top-level
  headings.
- Two different section titles whose sanitised names collide get distinct folders ("Name", "Name (2)").
  The same title appearing twice shares one folder.
- Two sources that map to the same <category>/<document> folder (e.g. manual.pdf and manual.docx side
  by side): the one ingested first keeps the folder; the other FAILS with a line naming both (rename one
  or give it a --category). Nothing is silently overwritten. A source whose recorded owner no longer
  exists on disk (a moved/renamed file) takes the folder over and the stale pages are removed.
- Incremental: DB/.ragkit/ingest-manifest.json records, per source (absolute path), its sha256, its
  folder, the page files it wrote and the CONVERTER_VERSION that wrote them. Unchanged (same hash, same
  folder) -> skipped, with one line naming those an earlier converter wrote (--force updates them); changed -> new pages
  written, then the old pages it wrote that were not rewritten are removed, and folders left empty by
  that removal are removed too. Nothing else is ever deleted. A source that fails keeps its old pages.
  One ingest at a time per database (a lock file under DB/.ragkit/; a second ingest waits).
- Front matter `source`: the path relative to the working directory when the file lies inside it, else
  absolute. Walking a folder skips hidden entries, Office lock files (~$x.docx) and other file types
  (counted as ignored); a file given explicitly with another type fails.
- Documents are converted in worker processes (forkserver on Linux: forking a process that already runs
  threads can deadlock), biggest first; page files are written tmp + rename (atomic for readers).
- Pages without a text layer are written with `pagefile.NO_TEXT_MARKER` and counted; not a failure.
- Front matter `printed_page` (PDF only, only when it differs from `page`): the PDF's page labels when it has
  them, else a number alone (or at one end of a header/footer line) in the top or bottom 12% of the page that
  a page one or two away confirms (`printed_numbers`). Measured against the 14 MMLongBench PDFs that carry
  labels: the text-found numbers agree on 855 pages and differ on 13.
- Line-break joining (PDF only: DOCX/PPTX text has no wrapping artefacts and its line breaks separate
  bullet points): wrapped lines of one paragraph are joined (nothing between Japanese/Chinese characters,
  a space elsewhere); whitespace between two Han/Kana characters is removed (`text.join_cjk_breaks`),
  but between two Hangul syllables spaces are kept, because Korean separates words with spaces.
- PDF markdown: headings from font size (sizes >= 1.15x the document's body size that set short lines,
  largest = `#`; a bold line of its own at body size, short and without closing punctuation, is the
  next level down), bullets (•・●○■□▪◆◇-*) as `- ` items, tables where text lines up in >= 2 columns over >= 2 rows (wrapped
  cells joined). PyMuPDF's `find_tables` is not used: it cost 0.1-6 s per page here, 20-1000x the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import stat
import time
import unicodedata
import zipfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core.errors import RagError
from ragkit.core.pagefile import NO_TEXT_MARKER, PageMeta, render_page
from ragkit.core.paths import MAX_NAME, atomic_write_text, page_filename, sanitize_name
from ragkit.core.text import HAN_KANA, HANGUL, join_cjk_breaks, one_line, strip_controls
from ragkit.core.workers import alive, follow_parent, starting_workers, stop_pool

SUPPORTED = (".pdf", ".docx", ".pptx")
MANIFEST = "ingest-manifest.json"
# What the page files written for one unchanged source look like. Bump it when that changes, and say what in
# CONVERTER_CHANGES: a database ingested by an earlier ragkit is then told that `--force` brings it up to date
# (an unchanged source is still never rewritten unasked). Manifest entries without the field are version 1.
CONVERTER_VERSION = 2
CONVERTER_CHANGES = {2: "printed page numbers"}
FRONT_SECTION = "front matter"
RANGE_SIZE = 10  # pages per fallback section
_MAX_REASON = 240


@dataclass
class IngestReport:
    sources: int = 0  # documents considered (after expanding folders)
    documents: int = 0  # documents (re)ingested in this run
    pages: int = 0  # page files written in this run
    skipped: int = 0  # unchanged documents left alone
    outdated: list[str] = field(default_factory=list)  # of those, the ones an earlier converter wrote
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    pages_without_text: int = 0
    written: list[str] = field(default_factory=list)  # db-relative page paths written
    removed: list[str] = field(default_factory=list)  # db-relative page paths removed (stale)
    ignored: list[str] = field(default_factory=list)  # files of other types met while walking folders
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (path, what may be lost): ingested anyway
    seconds: float = 0.0
    db: str = ""
    # per worker process: pid -> (peak RSS KiB, CPU seconds); what a benchmark needs to size the run
    workers: dict[int, tuple[int, float]] = field(default_factory=dict)


@dataclass
class _Job:
    src: str  # absolute path
    shown: str  # path as shown to the user / written into front matter
    kind: str  # ".pdf" | ".docx" | ".pptx"
    db: str
    folder: str  # db-relative "<category>/<document>"


@dataclass
class _DocResult:
    src: str
    shown: str
    folder: str
    pages: list[str] = field(default_factory=list)  # db-relative
    no_text: int = 0
    error: str | None = None
    warning: str | None = None  # ingested, but something may be missing (a repaired PDF)
    worker: tuple[int, int, float] = (0, 0, 0.0)  # (pid, peak RSS KiB, CPU seconds) of the process


# ----------------------------------------------------------------------------------------------- helpers


def _shown_path(p: Path) -> str:
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _one_line(msg: object) -> str:
    return one_line(msg, _MAX_REASON)


_HANGUL_BREAK = re.compile(f"(?<=[{HANGUL}])[ \t]*\n[ \t]*(?=[{HANGUL}])")


def join_breaks(text: str) -> str:
    """CJK line-break joining for PDF text: `text.join_cjk_breaks` (Han/Kana), and a line break between
    two Hangul syllables becomes one space (Korean separates words with spaces)."""
    return join_cjk_breaks(_HANGUL_BREAK.sub(" ", text))


def _unique_names(titles: list[str]) -> dict[str, str]:
    """Map each distinct title to a folder name; distinct titles whose sanitised names collide
    (also case-insensitively, for macOS/Windows) get "Name (2)", "Name (3)"."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for t in titles:
        if t in out:
            continue
        base = sanitize_name(t, fallback="section")
        name, n = base, 2
        while name.casefold() in used:
            suffix = f" ({n})"
            name = base[: MAX_NAME - len(suffix)].rstrip() + suffix
            n += 1
        used.add(name.casefold())
        out[t] = name
    return out


def _range_sections(n_pages: int) -> list[str]:
    """Fallback sections: fixed page ranges, e.g. pages_001-010."""
    width = max(3, len(str(n_pages)))
    out = []
    for p in range(1, n_pages + 1):
        start = (p - 1) // RANGE_SIZE * RANGE_SIZE + 1
        end = min(start + RANGE_SIZE - 1, n_pages)
        out.append(f"pages_{start:0{width}d}-{end:0{width}d}")
    return out


def outline_sections(toc: list, n_pages: int) -> list[str] | None:
    """Section title per page (index 0 = page 1) from a `get_toc(simple=True)` list, or None when the
    outline has no usable entry."""
    entries = [(int(e[0]), str(e[1]).strip(), int(e[2])) for e in toc if len(e) >= 3]
    entries = [e for e in entries if 1 <= e[2] <= n_pages]
    if not entries:
        return None
    top = min(e[0] for e in entries)
    # an outline whose only top entry is the document itself ("Manual" > chapters): use the chapters
    while sum(1 for e in entries if e[0] == top) == 1 and sum(1 for e in entries if e[0] == top + 1) >= 2:
        top += 1
    tops = [(title or "untitled", page) for lvl, title, page in entries if lvl == top]
    tops.sort(key=lambda e: e[1])  # stable: entries on one page keep their outline order
    first_on: dict[int, str] = {}
    last_on: dict[int, str] = {}
    for title, page in tops:
        first_on.setdefault(page, title)
        last_on[page] = title
    out: list[str] = []
    current = FRONT_SECTION
    for p in range(1, n_pages + 1):
        if p in first_on:
            out.append(first_on[p])
            current = last_on[p]
        else:
            out.append(current)
    return out


def _write_page(path: Path, text: str) -> None:
    """tmp + rename (atomic for readers); no fsync per page, which would cost more than the extraction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", newline="")
        if _PARENT is not None and not alive(_PARENT):  # orphaned: write nothing more (see follow_parent)
            tmp.unlink(missing_ok=True)
            os._exit(1)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _emit_pages(job: _Job, title: str, bodies: list[str], sections: list[str],
                printed: list[str] | None = None) -> _DocResult:
    res = _DocResult(job.src, job.shown, job.folder)
    # nothing a document wrote may drive a terminal later: control characters never reach a page file
    title = one_line(title)
    sections = [one_line(s) for s in sections]
    names = _unique_names(sections)
    total = len(bodies)
    db = Path(job.db)
    for i, body in enumerate(bodies, start=1):
        body = strip_controls(body).strip()
        if not body or body == NO_TEXT_MARKER:
            body = NO_TEXT_MARKER
            res.no_text += 1
        sec = sections[i - 1]
        rel = f"{job.folder}/{names[sec]}/{page_filename(i, total)}"
        label = printed[i - 1].strip() if printed and i <= len(printed) else ""
        meta = PageMeta(source=job.shown, document=title, section=sec, page=i,
                        printed_page="" if label == str(i) else label)
        _write_page(db / rel, render_page(meta, body))
        res.pages.append(rel)
    return res


# ------------------------------------------------------------------------------------------------- PDF

_BULLETS = "•・●○■□▪◆◇◦‣∙"
_BULLET_RE = re.compile(f"^\\s*[{_BULLETS}]\\s*|^\\s*[-*]\\s+")
_HEADING_RATIO = 1.15


def _pdf_lines(page, flags: int) -> list[list]:
    """Compact line records: [block_no, x0, y0, x1, y1, size, bold, text]."""
    d = page.get_text("dict", flags=flags)
    out = []
    for bno, block in enumerate(d["blocks"]):
        if block.get("type", 0) != 0:
            continue
        for line in block["lines"]:
            spans = line["spans"]
            if len(spans) == 1:  # the common case, kept cheap
                s = spans[0]
                text = s["text"]
                if not text.strip():
                    continue
                size = round(s["size"] * 2) / 2
                bold = bool(s["flags"] & 16) or "Bold" in s["font"]
            else:
                text = "".join(s["text"] for s in spans)
                if not text.strip():
                    continue
                # the size that covers most characters of the line
                sizes: dict[float, int] = {}
                bold = True
                for s in spans:
                    if s["text"].strip():
                        k = round(s["size"] * 2) / 2
                        sizes[k] = sizes.get(k, 0) + len(s["text"])
                        bold = bold and (bool(s["flags"] & 16) or "Bold" in s["font"])
                size = max(sizes, key=sizes.__getitem__)
            x0, y0, x1, y1 = line["bbox"]
            out.append([bno, x0, y0, x1, y1, size, bold, text])
    return out


def _heading_levels(all_lines: list[list[list]]) -> tuple[float, dict[float, int]]:
    """(body font size, {heading font size: markdown level}) for a whole document. The body size covers
    the most characters; heading sizes are clearly larger and set short lines (a large font that runs
    long lines is display text or code, not a heading)."""
    chars: Counter = Counter()
    nlines: Counter = Counter()
    for lines in all_lines:
        for ln in lines:
            chars[ln[5]] += len(ln[7])
            nlines[ln[5]] += 1
    if not chars:
        return 0.0, {}
    body = chars.most_common(1)[0][0]
    big = sorted((s for s in chars if s >= body * _HEADING_RATIO and chars[s] / nlines[s] <= 60), reverse=True)
    return body, {s: min(i + 1, 4) for i, s in enumerate(big)}


_JOIN_TIGHT = re.compile(f"[{HAN_KANA}\u3000-\u303f\uff00-\uffef]")


def _join_wrapped(a: str, b: str) -> str:
    """Join a wrapped line to its paragraph: nothing between Japanese/Chinese characters, a space
    elsewhere (English, Korean); a hyphen at a line end before a lower-case letter is removed."""
    if not a:
        return b
    if not b:
        return a
    if a.endswith("-") and len(a) > 1 and a[-2].isalpha() and b[0].islower():
        return a[:-1] + b  # "delegat-" + "ing": soft hyphenation at a line end
    if _JOIN_TIGHT.match(a[-1]) or _JOIN_TIGHT.match(b[0]):
        return a + b
    return a + " " + b


def _rows(lines: list[list]) -> list[list]:
    """Merge lines that sit on one baseline, left to right, into rows [x0, y0, x1, y1, size, bold, cells]
    where cells = [[x0, x1, text], ...] split at wide horizontal gaps (table columns)."""
    rows: list[list] = []
    for _bno, x0, y0, x1, y1, size, bold, text in lines:
        text = text.strip()
        last = rows[-1] if rows else None
        if last and abs(y1 - last[3]) < 2 and x0 >= last[2] - 1:
            cell = last[6][-1]
            if x0 - last[2] > 1.5 * max(size, 1) and not _BULLET_ONLY.match(cell[2]):
                last[6].append([x0, x1, text])
            else:
                cell[1], cell[2] = x1, cell[2] + " " + text
            last[2], last[4] = x1, max(last[4], size)
            last[5] = last[5] and bold
        else:
            rows.append([x0, y0, x1, y1, size, bold, [[x0, x1, text]]])
    return rows


_BULLET_ONLY = re.compile(f"^\\s*[{_BULLETS}]\\s*$")


def _md_cell(text: str) -> str:
    return join_breaks(text).replace("|", "\\|").strip()


def _take_table(rows: list[list], i: int) -> tuple[str, int]:
    """A table made of rows[i:] when they line up in >= 2 columns over >= 2 rows: (markdown, next index),
    else ("", i). Rows whose cells miss the first column continue the previous row (wrapped cells)."""
    first = rows[i]
    if len(first[6]) < 2:
        return "", i
    size = first[4] or 10
    cols = [c[0] for c in first[6]]
    tol = size * 1.5

    def col_of(x: float) -> int | None:
        best = min(range(len(cols)), key=lambda k: abs(cols[k] - x))
        return best if abs(cols[best] - x) <= tol else None

    table = [[c[2] for c in first[6]]]
    bottom = first[3]
    j = i + 1
    while j < len(rows):
        x0, y0, _x1, y1, rsize, _bold, cells = rows[j]
        gap = y0 - bottom
        if gap < -2 or gap > 2.2 * size or abs(rsize - size) > 2:
            break
        idx = [col_of(c[0]) for c in cells]
        if None in idx or len(set(idx)) != len(idx):
            break
        if 0 in idx and len(cells) >= 2:
            row = [""] * len(cols)
            for k, c in zip(idx, cells, strict=True):
                row[k] = c[2]
            table.append(row)
        elif gap < 0.8 * size:  # a wrapped cell: continue the previous row
            for k, c in zip(idx, cells, strict=True):
                table[-1][k] = _join_wrapped(table[-1][k], c[2])
        else:
            break
        bottom = y1
        j += 1
    if len(table) < 2:
        return "", i
    lines = ["| " + " | ".join(_md_cell(c) for c in table[0]) + " |",
             "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table[1:]]
    return "\n".join(lines), j


_HEAD_END = re.compile(r"[.。,、:：;；]$")


def _pdf_page_markdown(lines: list[list], levels: dict[float, int], body_size: float = 0.0) -> str:
    """Markdown of one page from its line records: headings by font size, bullets, paragraphs with wrapped
    lines joined, and tables where text lines up in columns (no find_tables: it costs seconds per page)."""
    rows = _rows(lines)
    parts: list[str] = []
    cur: list = []  # [kind, text, left, y1, size, level, rows]
    bold_level = min(len(levels) + 1, 4)

    def flush():
        if cur:
            kind, text, _left, _y1, _size, level, _n = cur
            if kind == "li" and parts and parts[-1].startswith("- "):
                parts[-1] += "\n" + text  # keep one list together (a tight markdown list)
            else:
                parts.append("#" * level + " " + text if kind == "h" else text)
            cur.clear()

    i = 0
    while i < len(rows):
        x0, y0, x1, y1, size, bold, cells = rows[i]
        if len(cells) > 1:
            md, nxt = _take_table(rows, i)
            if md:
                flush()
                parts.append(md)
                i = nxt
                continue
        i += 1
        text = " | ".join(c[2] for c in cells).strip()
        if not text:
            continue
        # line boxes of one paragraph may overlap a little (ascenders/descenders): a small negative gap
        close = bool(cur) and abs(size - cur[4]) <= 0.5 and -0.6 * size <= y0 - cur[3] < size * 0.9
        level = levels.get(size)
        if not level and bold and body_size and size >= body_size - 0.5 and len(text) <= 80 and len(cells) == 1 \
                and not _HEAD_END.search(text) and any(ch.isalpha() for ch in text):
            level = bold_level  # a bold line of its own at body size: a minor heading
        if level and len(text) <= 120:
            if close and cur[0] == "h" and cur[5] == level:  # a heading wrapped over lines
                cur[1] = _join_wrapped(cur[1], text)
                cur[3], cur[6] = y1, cur[6] + 1
                if cur[6] > 3 or len(cur[1]) > 200:  # too long for a heading: large-print text
                    cur[0] = "p"
                continue
            if close and cur[0] == "p" and cur[4] == size:  # large-print paragraph continues
                cur[1] = _join_wrapped(cur[1], text)
                cur[3] = y1
                continue
            flush()
            cur[:] = ["h", text, x0, y1, size, level, 1]
            continue
        m = _BULLET_RE.match(text)
        if m:
            flush()
            cur[:] = ["li", "- " + text[m.end() :].strip(), x0 + size, y1, size, 0, 1]
            continue
        if close and cur[0] != "h" and x0 >= cur[2] - size * 0.6:
            cur[1] = _join_wrapped(cur[1], text)
            cur[3] = y1
            continue
        flush()
        cur[:] = ["p", text, x0 - size * 2.5, y1, size, 0, 1]  # left: allow a first-line indent
    flush()
    # joined per block: a line break that separates a heading from its text is structure, not wrapping
    return "\n\n".join(p if p.startswith("| ") else join_breaks(p) for p in parts)


# A folio: the page's printed number, alone in the top or bottom band ("12", "- 12 -", "Page 12", "12 / 40",
# "12ページ", "p.12", "12쪽"), or at one end of a running header or footer ("12 | Annual Report",
# "Case 21-13199 Filed 01/05/2022 Page: 12 of 17").
_FOLIO = re.compile(r"^\s*(?:page|p\.|pg\.?|ページ|페이지)?\s*[-–—(\[]?\s*(\d{1,4})\s*[-–—)\]]?\s*"
                    r"(?:/\s*\d{1,4}|ページ|頁|페이지|쪽)?\s*$", re.IGNORECASE)
_FOLIO_EDGE = re.compile(r"^\s*(\d{1,4})\s*[|│·•]\s*\S.*$|^.*\S\s*[|│·•]\s*(\d{1,4})\s*$"
                         r"|^.*\bpage\s*:?\s*(\d{1,4})(?:\s*(?:of|/)\s*\d{1,4})?\s*$", re.IGNORECASE)
_FOLIO_BAND = 0.12  # share of the page height at the top and at the bottom where folios are looked for
_FOLIO_GAP = 4  # pages between two agreeing folios that take their numbering (chapter openers, full-page art)


def _folio_candidates(lines: list[list], height: float) -> set[int]:
    """Numbers that could be the page's printed number: standing alone, or at one end of a header or footer."""
    out: set[int] = set()
    for ln in lines:
        if ln[4] < _FOLIO_BAND * height or ln[2] > (1 - _FOLIO_BAND) * height:
            text = unicodedata.normalize("NFKC", ln[7])  # full-width digits and brackets: "（１９）"
            m = _FOLIO.match(text) or _FOLIO_EDGE.match(text)
            if m:
                out.add(int(next(g for g in m.groups() if g)))
    return out


def printed_numbers(candidates: list[set[int]]) -> list[str]:
    """The printed page number of each page ("" when unknown), from each page's folio candidates.

    A candidate counts only when a page one or two away carries the number that follows from it, so a year
    or a figure number in a footer does not; pages in a short gap between two agreeing folios take the
    numbering they share. Several runs are fine (front matter, then the body from 1)."""
    n = len(candidates)
    offset: list[int | None] = [None] * n
    for i, cands in enumerate(candidates):
        for v in sorted(cands):
            if any(0 <= i + d < n and v + d in candidates[i + d] for d in (-2, -1, 1, 2)):
                offset[i] = i - v
                break
    known = [i for i in range(n) if offset[i] is not None]
    for a, b in zip(known, known[1:], strict=False):
        if 1 < b - a <= _FOLIO_GAP + 1 and offset[a] == offset[b]:
            for i in range(a + 1, b):
                offset[i] = offset[a]
    return [str(i - o) if o is not None and i - o >= 1 else "" for i, o in enumerate(offset)]


def _printed_pages(doc, candidates: list[set[int]]) -> list[str]:
    """Each page's printed number or label ("" when unknown): the PDF's own page labels when it has them
    ("iii", "17", "A-3"), else the folios found in the text. A reader says "page 17" for the number printed
    on the page, which is often not the page's position in the file."""
    try:
        if doc.get_page_labels():
            return [doc[i].get_label() or "" for i in range(doc.page_count)]
    except Exception:  # noqa: BLE001 - labels are a bonus; a damaged label tree falls back to the text
        pass
    return printed_numbers(candidates)


_GENERIC_TITLES = frozenset(
    "untitled|untitled document|document|title|contents|table of contents|index|cover|slide 1|presentation|"
    "目次|表紙|목차|표지".split("|"))
_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*#*$", re.MULTILINE)


def title_like(text: str) -> bool:
    """Whether a PDF's metadata title (or a heading) reads as a document title: not empty or generic
    ("Contents", "Untitled"), not an id or a file name ("0001065280-16-000047", "report_v2.pdf",
    "PH_2016.06.08_Economy-Final"), not a section of someone's site ("About Pew Research Center")."""
    s = " ".join(text.split())
    low = s.lower().removeprefix("microsoft word - ").strip()
    if not (2 < len(low) <= 200) or low in _GENERIC_TITLES or low.startswith("about "):
        return False
    if re.search(r"\.(pdf|docx?|pptx?|xlsx?|indd|qxd)$", low) or (" " not in low and re.search(r"[_/\\]", low)):
        return False
    letters = sum(ch.isalpha() for ch in low)
    return letters >= 3 and letters >= len(low.replace(" ", "")) / 2


def document_title(meta_title: str, first_page: str, stem: str) -> str:
    """The front matter's `document`: the PDF metadata title when it is title-like, else the first page's
    dominant heading (its largest, then first), else the file name."""
    if title_like(meta_title or ""):
        return " ".join(meta_title.split())
    heads = [(len(m[1]), " ".join(m[2].replace("*", "").split())) for m in _HEADING.finditer(first_page or "")]
    heads = [h for h in heads if title_like(h[1])]
    if heads:
        return min(heads, key=lambda h: h[0])[1][:200]
    return stem


def _convert_pdf(job: _Job) -> _DocResult:
    import pymupdf

    path = Path(job.src)
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if b"%PDF-" not in head:
        raise _Fail("not a PDF file (no %PDF header)")
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as e:
        reason = _one_line(e) if str(path) not in str(e) else "MuPDF cannot open it"
        raise _Fail(f"corrupt PDF ({reason})") from None
    with doc:
        if doc.needs_pass:
            raise _Fail("encrypted PDF (a password is required to open it)")
        n = doc.page_count
        if n == 0:
            raise _Fail("PDF has no pages")
        flags = pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_IMAGES
        all_lines: list[list[list]] = []
        folios: list[set[int]] = []
        broken: dict[int, str] = {}
        for i in range(n):
            lines: list[list] = []
            height = 0.0
            try:
                page = doc[i]
                height = page.rect.height
                lines = _pdf_lines(page, flags)
            except Exception as e:
                broken[i] = _one_line(e)
            all_lines.append(lines)
            folios.append(_folio_candidates(lines, height))
        body_size, levels = _heading_levels(all_lines)
        bodies: list[str] = []
        first_heading = ""
        for i in range(n):
            if i in broken:
                bodies.append(f"{NO_TEXT_MARKER}\n<!-- ragkit: page could not be read: {broken[i]} -->")
                continue
            if not all_lines[i]:
                bodies.append(NO_TEXT_MARKER)
                continue
            try:
                md = _pdf_page_markdown(all_lines[i], levels, body_size)
            except Exception:
                md = join_breaks("\n".join(ln[7] for ln in all_lines[i]))
            if not first_heading:
                m = re.search(r"^#{1,6} (.+)$", md, re.MULTILINE)
                if m:
                    first_heading = m.group(1).strip()
            bodies.append(md)
        try:
            toc = doc.get_toc(simple=True)
        except Exception:
            toc = []
        sections = outline_sections(toc, n) or _range_sections(n)
        title = document_title((doc.metadata or {}).get("title") or "", bodies[0] if bodies else "", path.stem)
        printed = _printed_pages(doc, folios)
        repaired = doc.is_repaired
    res = _emit_pages(job, title, bodies, sections, printed)
    if repaired:  # MuPDF rebuilt a damaged file (truncated, broken xref): what it could not rebuild is gone
        blank = f"{res.no_text} of {n} page(s) have no text" if res.no_text else f"all {n} page(s) have text"
        res.warning = (f"damaged PDF repaired by MuPDF: {n} page(s) recovered, {blank}; content past the damage "
                       "may be missing")
    return res


# ---------------------------------------------------------------------------------------------- Office

_BREAK_TOKEN = "RAGKITPAGEBREAKX9"
_BREAK_XML = f'</w:r><w:r><w:t xml:space="preserve"> {_BREAK_TOKEN} </w:t></w:r><w:r>'
_DOCX_BREAK_RE = re.compile(r'<w:br\s+w:type="page"\s*/>|<w:lastRenderedPageBreak\s*/>')
_TITLE_RE = re.compile(r"<dc:title>([^<]*)</dc:title>")


def _office_title(zf: zipfile.ZipFile) -> str:
    try:
        core = zf.read("docProps/core.xml").decode("utf-8", "replace")
    except KeyError:
        return ""
    m = _TITLE_RE.search(core)
    import html

    return html.unescape(m.group(1)).strip() if m else ""


def _markitdown(data: bytes, ext: str) -> str:
    from markitdown import MarkItDown, StreamInfo

    res = MarkItDown(enable_plugins=False).convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=ext))
    return res.markdown or ""


def _open_zip(path: Path, kind: str) -> tuple[bytes, zipfile.ZipFile]:
    data = path.read_bytes()
    if not data.startswith(b"PK"):
        raise _Fail(f"not a {kind} file (not a zip archive)")
    try:
        return data, zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise _Fail(f"corrupt {kind} ({_one_line(e)})") from None


_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _top_heading_level(md: str) -> int | None:
    levels = [len(m.group(1)) for m in _MD_HEADING.finditer(md)]
    return min(levels) if levels else None


def _convert_docx(job: _Job) -> _DocResult:
    path = Path(job.src)
    data, zf = _open_zip(path, "DOCX")
    with zf:
        try:
            xml = zf.read("word/document.xml").decode("utf-8")
        except KeyError:
            raise _Fail("corrupt DOCX (no word/document.xml)") from None
        title = _office_title(zf)
        n_breaks = len(_DOCX_BREAK_RE.findall(xml))
        if n_breaks:
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
                for item in zf.infolist():
                    payload = zf.read(item.filename)
                    if item.filename == "word/document.xml":
                        payload = _DOCX_BREAK_RE.sub(_BREAK_XML, xml).encode("utf-8")
                    out.writestr(item, payload)
            data = buf.getvalue()
    try:
        md = _markitdown(data, ".docx")
    except Exception as e:
        raise _Fail(f"corrupt DOCX ({_one_line(e)})") from None
    top = _top_heading_level(md)
    if n_breaks:
        chunks = re.split(rf"[*_\\]*{_BREAK_TOKEN}[*_\\]*", md)
        # a hard break followed by Word's rendered-break marker gives an empty chunk: one break, not two
        bodies = [chunks[0]] + [c for c in chunks[1:] if c.strip()]
        if not bodies[0].strip() and len(bodies) > 1:
            bodies = bodies[1:]
    elif top:
        bodies, cur = [], []
        for line in md.splitlines():
            m = _MD_HEADING.match(line)
            if m and len(m.group(1)) == top and any(x.strip() for x in cur):
                bodies.append("\n".join(cur))
                cur = []
            cur.append(line)
        bodies.append("\n".join(cur))
    else:
        bodies = [md]
    bodies = [b.strip() for b in bodies]
    # sections: the top-level heading in force at the top of each page
    sections: list[str] = []
    current = None
    first_heading = ""
    for b in bodies:
        heads = [m for m in _MD_HEADING.finditer(b) if top and len(m.group(1)) == top]
        if not first_heading:
            m = _MD_HEADING.search(b)
            first_heading = m.group(2).strip() if m else ""
        # as for PDF outlines: a page belongs to the first top-level heading on it, else to the one in force
        page_sec = heads[0].group(2).strip() if heads else current
        if heads:
            current = heads[-1].group(2).strip()
        sections.append(page_sec or FRONT_SECTION)
    if top is None:
        sections = _range_sections(len(bodies))
    return _emit_pages(job, title or first_heading or path.stem, bodies, sections)


_SLIDE_RE = re.compile(r"<!--\s*Slide number:\s*(\d+)\s*-->")
_SLD_ID_RE = re.compile(r'<p:sldId\b[^>]*\bid="(\d+)"')
_PPT_SECTION_RE = re.compile(r'<p14:section\b[^>]*\bname="([^"]*)"[^>]*>(.*?)</p14:section>', re.DOTALL)
_SECTION_SLD_RE = re.compile(r'<p14:sldId\b[^>]*\bid="(\d+)"')


def _pptx_sections(zf: zipfile.ZipFile, n: int) -> list[str] | None:
    """The deck's own PowerPoint sections (p14:sectionLst), one title per slide, or None."""
    try:
        pres = zf.read("ppt/presentation.xml").decode("utf-8")
    except KeyError:
        return None
    order = _SLD_ID_RE.findall(pres.split("<p:sldIdLst>", 1)[-1].split("</p:sldIdLst>", 1)[0])
    found = _PPT_SECTION_RE.findall(pres)
    if not found or len(order) != n:
        return None
    import html

    by_id = {sid: html.unescape(name).strip() or "untitled" for name, body in found
             for sid in _SECTION_SLD_RE.findall(body)}
    out, current = [], FRONT_SECTION
    for sid in order:
        current = by_id.get(sid, current)
        out.append(current)
    return out


def _convert_pptx(job: _Job) -> _DocResult:
    path = Path(job.src)
    data, zf = _open_zip(path, "PPTX")
    with zf:
        title = _office_title(zf)
        try:
            md = _markitdown(data, ".pptx")
        except Exception as e:
            raise _Fail(f"corrupt PPTX ({_one_line(e)})") from None
        parts = _SLIDE_RE.split(md)
        # parts = [before, num1, body1, num2, body2, ...]
        bodies = [parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)]
        if not bodies:
            raise _Fail("PPTX has no slides")
        sections = _pptx_sections(zf, len(bodies)) or _range_sections(len(bodies))
    first_heading = ""
    for b in bodies:
        m = _MD_HEADING.search(b)
        if m:
            first_heading = m.group(2).strip()
            break
    return _emit_pages(job, title or first_heading or path.stem, bodies, sections)


# ----------------------------------------------------------------------------------------------- worker


class _Fail(Exception):
    """An expected, user-facing reason a document cannot be ingested."""


_PARENT: int | None = None  # in a worker process: the pid of the `rag ingest` that started it


def _init_worker(parent: int | None = None) -> None:
    global _PARENT
    if parent is not None and parent != os.getpid():
        _PARENT = parent
        follow_parent(parent)  # a killed `rag ingest` must not leave workers that go on writing pages
    with contextlib.suppress(Exception):
        import pymupdf

        pymupdf.TOOLS.mupdf_display_errors(False)
        pymupdf.TOOLS.mupdf_display_warnings(False)
        pymupdf.no_recommend_layout()  # find_tables would print an advert to stdout


def _process(job: _Job) -> _DocResult:
    """Runs in a worker process: never raises, the reason travels back as one line."""
    res = _convert(job)
    with contextlib.suppress(Exception):
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        res.worker = (os.getpid(), ru.ru_maxrss, ru.ru_utime + ru.ru_stime)
    return res


def _convert(job: _Job) -> _DocResult:
    try:
        if job.kind == ".pdf":
            return _convert_pdf(job)
        if job.kind == ".docx":
            return _convert_docx(job)
        return _convert_pptx(job)
    except _Fail as e:
        return _DocResult(job.src, job.shown, job.folder, error=str(e))
    except OSError as e:
        return _DocResult(job.src, job.shown, job.folder, error=f"cannot read file ({_one_line(e.strerror or e)})")
    except MemoryError:
        return _DocResult(job.src, job.shown, job.folder, error="out of memory while converting")
    except Exception as e:  # a converter bug must not take the whole run down
        return _DocResult(job.src, job.shown, job.folder, error=f"{type(e).__name__}: {_one_line(e)}")


# --------------------------------------------------------------------------------------------- manifest


def _hash_file(path: Path) -> tuple[str, bytes]:
    """(sha256, the first KiB)."""
    h = hashlib.sha256()
    head = b""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            if not head:
                head = chunk[:1024]
            h.update(chunk)
    return h.hexdigest(), head


def _sniff(head: bytes, kind: str) -> str | None:
    """Why the first bytes cannot be this kind of document, or None."""
    if not head:
        return "empty file (0 bytes)"
    if kind == ".pdf" and b"%PDF-" not in head:
        return "not a PDF file (no %PDF header)"
    if kind in (".docx", ".pptx") and not head.startswith(b"PK"):
        return f"not a {kind[1:].upper()} file (not a zip archive)"
    return None


def _converter_of(entry: dict) -> int:
    v = entry.get("converter", 1)
    return v if isinstance(v, int) else 1


def outdated_note(report: IngestReport) -> str:
    """One line for the unchanged documents an earlier ragkit converted, or ""."""
    if not report.outdated:
        return ""
    what = ", ".join(CONVERTER_CHANGES[v] for v in sorted(CONVERTER_CHANGES))
    n = len(report.outdated)
    return (f"{n} unchanged document{'s' if n > 1 else ''} (e.g. {report.outdated[0]}) "
            f"{'were' if n > 1 else 'was'} converted by an earlier ragkit; ingest again with --force to "
            f"update {'their' if n > 1 else 'its'} pages ({what})")


def _load_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("sources"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"version": 1, "sources": {}}


def _save_manifest(path: Path, manifest: dict) -> None:
    atomic_write_text(path, json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True))


@contextlib.contextmanager
def _db_lock(state_dir: Path):
    """One ingest at a time per database; a second one waits (POSIX; no-op elsewhere)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    with open(state_dir / "ingest.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove_pages(db: Path, rels: list[str], keep: set[str]) -> list[str]:
    """Delete page files this ingest wrote earlier (never anything else), then the folders that became
    empty, up to (not including) the database root."""
    removed = []
    dirs: set[Path] = set()
    for rel in rels:
        if rel in keep:
            continue
        p = db / rel
        try:
            p.unlink()
            removed.append(rel)
            dirs.add(p.parent)
        except FileNotFoundError:
            dirs.add(p.parent)
        except OSError:
            pass
    root = db.resolve()
    for d in sorted(dirs, key=lambda x: len(x.parts), reverse=True):
        cur = d
        while cur.resolve() != root and root in cur.resolve().parents:
            try:
                cur.rmdir()  # only succeeds when empty
            except OSError:
                break
            cur = cur.parent
    return removed


def forget_document(db: Path, folder: str, pages: list[str], *, sources_under: Path | None = None) -> list[str]:
    """Remove a document from `db`: its page files (only page files), the folders left empty, and its
    ingest-manifest entries, under the ingest lock, so a running ingest neither races nor re-adds it. A
    recorded source file is deleted too when it lies under `sources_under` (uploads `rag serve` keeps); a
    source in the user's own folders never is. Returns the pages removed; the caller updates its index."""
    state = db / ".ragkit"
    with _db_lock(state):
        removed = _remove_pages(db, pages, set())
        manifest_path = state / MANIFEST
        manifest = _load_manifest(manifest_path)
        sources = manifest["sources"]
        gone = [k for k, v in sources.items() if isinstance(v, dict) and v.get("folder") == folder]
        for key in gone:
            del sources[key]
            if sources_under is not None and sources_under.resolve() in Path(key).resolve().parents:
                Path(key).unlink(missing_ok=True)
        if gone:
            _save_manifest(manifest_path, manifest)
    return removed


# ------------------------------------------------------------------------------------------ collecting


def _collect(sources: list[Path], category: str | None, report: IngestReport) -> list[tuple[Path, str, str]]:
    """(absolute path, kind, category) per document, in a deterministic order; bad sources go to
    report.failed."""
    out: list[tuple[Path, str, str]] = []
    seen: set[Path] = set()

    def add(p: Path, cat_folder: Path):
        ap = p.absolute()
        if ap in seen:
            return
        seen.add(ap)
        cat = sanitize_name(category, fallback="uncategorized") if category else sanitize_name(
            cat_folder.name or "root", fallback="uncategorized")
        out.append((ap, p.suffix.lower(), cat))

    for src in sources:
        src = Path(src)
        shown = _shown_path(src.absolute())
        if src.is_symlink() and not src.exists():
            report.failed.append((shown, "cannot read file (broken symbolic link)"))
            continue
        if not src.exists():
            report.failed.append((shown, "no such file or folder"))
            continue
        if src.is_dir():
            found = 0
            for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for f in sorted(filenames):
                    if f.startswith((".", "~$")):
                        continue
                    p = Path(dirpath) / f
                    if p.suffix.lower() not in SUPPORTED:
                        report.ignored.append(_shown_path(p.absolute()))
                        continue
                    found += 1
                    if p.is_symlink() and not p.exists():
                        report.failed.append((_shown_path(p.absolute()), "cannot read file (broken symbolic link)"))
                        continue
                    add(p, p.absolute().parent)
            if not found:
                report.failed.append((shown, "no PDF, DOCX or PPTX files in this folder"))
            continue
        if src.suffix.lower() not in SUPPORTED:
            report.failed.append((shown, f"unsupported file type {src.suffix or '(none)'!r}; use PDF, DOCX or PPTX"))
            continue
        add(src, src.absolute().parent)
    return out


# -------------------------------------------------------------------------------------------------- main


def ingest_sources(
    sources: list[Path],
    *,
    db: Path,
    category: str | None = None,
    force: bool = False,
    workers: int | None = None,
    progress: bool = True,
) -> IngestReport:
    """Ingest files and folders into the page tree; see the module docstring for the rules."""
    t0 = time.perf_counter()
    if not sources:
        raise RagError("nothing to ingest: give one or more PDF/DOCX/PPTX files or folders")
    db = Path(db)
    if db.exists() and not db.is_dir():
        raise RagError(f"{db}: the database path exists and is not a folder")
    report = IngestReport(db=_shown_path(db.absolute()))
    docs = _collect(list(sources), category, report)
    report.sources = len(docs)
    if not docs and len(report.failed) == len(sources) and len(sources) == 1:
        path, reason = report.failed[0]
        raise RagError(f"{path}: {reason}")
    if not docs and not report.failed:
        raise RagError("no PDF, DOCX or PPTX files found in " + ", ".join(str(s) for s in sources))

    db.mkdir(parents=True, exist_ok=True)
    state = db / ".ragkit"
    with _db_lock(state):
        manifest = _load_manifest(state / MANIFEST)
        recorded: dict = manifest["sources"]
        run_keys = {str(p) for p, _, _ in docs}
        # folders owned by sources outside this run that still exist
        claimed: dict[str, str] = {}
        stale_owner: dict[str, str] = {}
        for key, entry in recorded.items():
            if key in run_keys:
                continue
            folder = entry.get("folder", "")
            if os.path.exists(key):
                claimed[folder.casefold()] = key
            else:
                stale_owner[folder.casefold()] = key

        jobs: list[_Job] = []
        hashes: dict[str, str] = {}
        stale_pages: list[str] = []
        takeover: dict[str, str] = {}  # source -> the vanished source whose folder it takes over
        for path, kind, cat in docs:
            key = str(path)
            shown = _shown_path(path)
            try:
                st = path.stat()
                if not stat.S_ISREG(st.st_mode):
                    report.failed.append((shown, "not a regular file"))
                    continue
                digest, head = _hash_file(path)
            except OSError as e:
                report.failed.append((shown, f"cannot read file ({_one_line(e.strerror or e)})"))
                continue
            bad = _sniff(head, kind)
            if bad:  # checked before the folder is claimed, so a non-document never blocks a real one
                report.failed.append((shown, bad))
                continue
            folder = f"{cat}/{sanitize_name(path.stem, fallback='document')}"
            owner = claimed.get(folder.casefold())
            if owner and owner != key:
                report.failed.append((shown, f"would go to the same folder {folder} as {_shown_path(Path(owner))}; "
                                              "rename one of them or ingest it with --category"))
                continue
            claimed[folder.casefold()] = key
            old = stale_owner.pop(folder.casefold(), None)
            if old:  # a moved/renamed source: its pages are superseded once this one is ingested
                takeover[key] = old
            prev = recorded.get(key)
            if prev and not force and prev.get("sha256") == digest and prev.get("folder") == folder:
                report.skipped += 1
                if _converter_of(prev) < CONVERTER_VERSION:
                    report.outdated.append(shown)
                continue
            hashes[key] = digest
            jobs.append(_Job(key, shown, kind, str(db.absolute()), folder))

        written: set[str] = set()
        try:
            for res in _run_jobs(jobs, workers, progress):
                if res.worker[0]:
                    report.workers[res.worker[0]] = res.worker[1:]
                if res.error:
                    report.failed.append((res.shown, res.error))
                    continue
                if res.warning:
                    report.warnings.append((res.shown, res.warning))
                report.documents += 1
                report.pages += len(res.pages)
                report.pages_without_text += res.no_text
                report.written.extend(res.pages)
                written.update(res.pages)
                prev = recorded.get(res.src)
                if prev:
                    stale_pages.extend(prev.get("pages", []))
                if res.src in takeover:
                    stale_pages.extend(recorded.pop(takeover[res.src], {}).get("pages", []))
                recorded[res.src] = {
                    "sha256": hashes[res.src],
                    "folder": res.folder,
                    "pages": res.pages,
                    "converter": CONVERTER_VERSION,
                    "ingested_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
        finally:
            report.removed = _remove_pages(db, stale_pages, written)
            _save_manifest(state / MANIFEST, manifest)
    report.seconds = time.perf_counter() - t0
    return report


def _run_jobs(jobs: list[_Job], workers: int | None, progress: bool):
    from ragkit.core.progress import progress_bar

    if not jobs:
        return
    n_workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    # biggest first, so one large document does not finish alone at the end
    jobs = sorted(jobs, key=lambda j: -_size(j.src))
    bar = progress_bar(total=len(jobs), unit="doc", desc="ingest", disable=not progress, leave=False)
    try:
        if n_workers == 1:
            _init_worker()
            for job in jobs:
                res = _process(job)
                bar.update(1)
                yield res
            return
        pool = None
        try:
            with starting_workers():
                pool = ProcessPoolExecutor(max_workers=n_workers, initializer=_init_worker,
                                           initargs=(os.getpid(),), mp_context=_mp_context())
                futures = [pool.submit(_process, job) for job in jobs]
            for fut in as_completed(futures):
                bar.update(1)
                yield fut.result()
        except BaseException:
            # Ctrl-C or an error, perhaps while the pool was starting: stop now, not after the running
            # documents are written. A document cut short is not in the manifest, so the next run converts it
            # again.
            if pool is not None:
                stop_pool(pool)
            raise
        pool.shutdown()
    finally:
        bar.close()


def _mp_context():
    """forkserver on Linux: forking a process that already runs threads (markitdown's imports start some,
    so do test runners and servers) can deadlock the child; a fresh server process cannot."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["ragkit.ingest"])
        return ctx
    return None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


_SHOW_IGNORED = 10  # names listed before "and N more"


def print_report(report: IngestReport, console) -> None:
    """A summary table, then one line per failure."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"rag ingest -> {escape(strip_controls(report.db))}", title_justify="left")
    for col in ("documents", "pages", "skipped (unchanged)", "failed", "pages without text", "seconds"):
        table.add_column(col, justify="right")
    table.add_row(
        str(report.documents), str(report.pages), str(report.skipped), str(len(report.failed)),
        str(report.pages_without_text), f"{report.seconds:.1f}",
    )
    console.print(table)
    if report.removed:
        console.print(f"removed {len(report.removed)} outdated page file(s)", highlight=False)
    if report.ignored:
        shown = ", ".join(report.ignored[:_SHOW_IGNORED])
        more = f" and {len(report.ignored) - _SHOW_IGNORED} more" if len(report.ignored) > _SHOW_IGNORED else ""
        console.print(f"ignored {len(report.ignored)} file(s) of other types: {strip_controls(shown)}{more}",
                      highlight=False, markup=False)
    for path, warning in report.warnings:
        console.print(f"warning: {strip_controls(path)}: {warning}", highlight=False, markup=False)
    if report.outdated:
        console.print(outdated_note(report), highlight=False, markup=False, soft_wrap=True)
    for path, reason in report.failed:
        console.print(f"failed: {strip_controls(path)}: {one_line(reason)}", highlight=False, markup=False,
                      soft_wrap=True)
