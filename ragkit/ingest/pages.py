"""One document's pages: the conversion job and its result, the report of a run, the section folders
(outline entries, numbered chapter headings or fixed ranges), and writing the page files atomically (the `rag ingest` process writes
them; a conversion worker only renders them)."""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core.config import Limits
from ragkit.core.pagefile import NO_TEXT_MARKER, RUNNING_SEP, PageMeta, render_page
from ragkit.core.paths import MAX_NAME, page_filename, sanitize_name
from ragkit.core.text import HANGUL, join_cjk_breaks, one_line, strip_controls
from ragkit.core.workers import alive

FRONT_SECTION = "front matter"
RANGE_SIZE = 10  # pages per fallback section
_MAX_REASON = 240
# a page file being written: `.page_008.md.<pid>.tmp`, renamed when complete
_TEMPORARY = re.compile(r"^\.(page_\d+\.md)\.(\d+)\.tmp$")


class ConvertError(Exception):
    """An expected, user-facing reason a document cannot be ingested."""


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
    # copies of a re-converted or removed document's pages elsewhere in its category (ingest.copies): rewritten
    # from the new page of the same number, or removed when there is none
    copies_refreshed: list[str] = field(default_factory=list)
    copies_removed: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # files of other types met while walking folders
    hidden: list[str] = field(default_factory=list)  # hidden files and folders skipped while walking folders
    temporaries: int = 0  # page files half-written by an interrupted ingest, removed by this one
    # documents recorded from a file under the folders ingested that is gone (renamed, deleted): their folders;
    # `pruned` when --prune removed them, else `orphans` (kept)
    orphans: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (path, what may be lost): ingested anyway
    seconds: float = 0.0
    db: str = ""
    # per worker process: pid -> (peak RSS KiB, CPU seconds); what a benchmark needs to size the run
    workers: dict[int, tuple[int, float]] = field(default_factory=dict)

    def index_changes(self) -> tuple[list[str], list[str]]:
        """(written, removed) page files, copies included: what an index must apply."""
        return [*self.written, *self.copies_refreshed], [*self.removed, *self.copies_removed]


@dataclass
class Job:
    src: str  # absolute path
    shown: str  # path as shown to the user / written into front matter
    kind: str  # ".pdf" | ".docx" | ".pptx"
    db: str
    folder: str  # db-relative "<category>/<document>"
    limits: Limits = field(default_factory=Limits)


@dataclass
class DocResult:
    src: str
    shown: str
    folder: str
    pages: list[str] = field(default_factory=list)  # db-relative
    texts: list[str] = field(default_factory=list)  # each page file's content, until the pages are written
    no_text: int = 0
    error: str | None = None
    warning: str | None = None  # ingested, but something may be missing (a repaired PDF)
    worker: tuple[int, int, float] = (0, 0, 0.0)  # (pid, peak RSS KiB, CPU seconds) of the process


# ----------------------------------------------------------------------------------------------- helpers


def shown_path(p: Path) -> str:
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def reason_line(msg: object) -> str:
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


def range_sections(n_pages: int) -> list[str]:
    """Fallback sections: fixed page ranges, e.g. pages_001-010; a range of one page (the last of 11 pages, a
    one-page document) is page_011, not pages_011-011."""
    width = max(3, len(str(n_pages)))
    out = []
    for p in range(1, n_pages + 1):
        start = (p - 1) // RANGE_SIZE * RANGE_SIZE + 1
        end = min(start + RANGE_SIZE - 1, n_pages)
        out.append(f"pages_{start:0{width}d}-{end:0{width}d}" if end > start else f"page_{start:0{width}d}")
    return out


def section_level(levels: list[int]) -> int | None:
    """The heading or outline level whose entries are a document's sections: the top one, or the next when the
    top level's only entry is the document itself ("Manual" over its chapters, a DOCX's Title over its Heading
    1s)."""
    if not levels:
        return None
    top = min(levels)
    while levels.count(top) == 1 and levels.count(top + 1) >= 2:
        top += 1
    return top


def outline_sections(toc: list, n_pages: int) -> list[str] | None:
    """Section title per page (index 0 = page 1) from a `get_toc(simple=True)` list, or None when the
    outline has no usable entry."""
    entries = [(int(e[0]), str(e[1]).strip(), int(e[2])) for e in toc if len(e) >= 3]
    entries = [e for e in entries if 1 <= e[2] <= n_pages]
    if not entries:
        return None
    top = section_level([e[0] for e in entries])
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


# A chapter's number at the start of a heading: "第1章", "第２編", "제3장", "Chapter 4", "Part II", "1 Introduction",
# "１． はじめに". Sub-numbers ("4.1", "第2節", "제3조") are not chapters; neither is a year ("2019 Annual Report").
_CHAPTER = re.compile(
    r"^(?:第\s*(?P<ja>[0-9一二三四五六七八九十]+)\s*(?P<jak>[章編部])"
    r"|제\s*(?P<ko>[0-9]+)\s*(?P<kok>[장편부])"
    r"|(?P<word>chapter|part)\s+(?P<wn>[0-9]+|[ivx]+)\b"
    r"|(?P<num>[0-9]{1,2})(?![0-9]|[.．][0-9])[.．、)]?(?=\s|$))", re.I)
_KANJI_DIGITS = {c: i for i, c in enumerate("〇一二三四五六七八九")}
_ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5, "vi": 6, "vii": 7, "viii": 8, "ix": 9, "x": 10}
_MD_HEADING = re.compile(r"^(#{1,6}) +(.+?)\s*$", re.MULTILINE)


def _kanji_number(s: str) -> int | None:
    if s.isdigit():
        return int(s)
    if "十" in s:  # 十, 十二, 二十, 二十三
        tens, _, ones = s.partition("十")
        t = _KANJI_DIGITS.get(tens, 0 if tens else 1) if len(tens) <= 1 else None
        o = _KANJI_DIGITS.get(ones, 0) if len(ones) <= 1 else None
        return None if t is None or o is None or (tens and not t) else t * 10 + o
    return _KANJI_DIGITS.get(s) if len(s) == 1 else None


def chapter_of(text: str) -> tuple[str, int, bool] | None:
    """(numbering scheme, chapter number, the heading is the label alone) of a heading, or None."""
    t = unicodedata.normalize("NFKC", text).replace("*", "").strip()
    m = _CHAPTER.match(t)
    if not m:
        return None
    if m["ja"]:
        scheme, n = "第" + m["jak"], _kanji_number(m["ja"])
    elif m["ko"]:
        scheme, n = "제" + m["kok"], int(m["ko"])
    elif m["word"]:
        w = m["wn"].lower()
        scheme, n = m["word"].lower(), int(w) if w.isdigit() else _ROMAN.get(w)
    else:
        scheme, n = "number", int(m["num"])
    if not n:
        return None
    return scheme, n, not t[m.end():].strip(" .．:：、")


def heading_sections(bodies: list[str]) -> list[str] | None:
    """Section title per page from a document's numbered chapter headings, for a PDF without an outline: the
    headings of one level and one numbering scheme ("第1章", "1 Introduction", "Chapter 1") whose numbers run
    1, 2, 3, ... in page order, at least two of them; a heading that is the label alone ("## 第1章" over "# 総則")
    takes the page's next heading as its title. A page holding three or more chapters' headings (a table of
    contents) starts none; a run that starts past the document's first third does not count. None when there
    is no such run: the caller falls back to page ranges."""
    runs: dict[tuple[int, str], list[tuple[str, int]]] = {}  # (level, scheme) -> [(title, page)]
    expect: dict[tuple[int, str], int] = {}
    for page, body in enumerate(bodies, 1):
        heads = [(len(m[1]), m[2]) for m in _MD_HEADING.finditer(body or "")]
        found: list[tuple[int, str, int, str]] = []
        for j, (level, text) in enumerate(heads):
            c = chapter_of(text)
            if c is None:
                continue
            scheme, n, bare = c
            title = " ".join(text.replace("*", "").split())
            if bare and j + 1 < len(heads) and chapter_of(heads[j + 1][1]) is None:
                title = f"{title} {' '.join(heads[j + 1][1].replace('*', '').split())}"
            found.append((level, scheme, n, title))
        per_scheme: dict[tuple[int, str], int] = {}
        for level, scheme, _n, _t in found:
            per_scheme[(level, scheme)] = per_scheme.get((level, scheme), 0) + 1
        for level, scheme, n, title in found:
            key = (level, scheme)
            if per_scheme[key] >= 3:
                continue  # a table of contents
            if n == expect.get(key, 1):
                runs.setdefault(key, []).append((title, page))
                expect[key] = n + 1
    # a document's chapters start in its first third: a run that starts later is numbered notes or steps
    # inside one part (a filing's notes to its statements), and would leave the rest as "front matter"
    runs = {key: run for key, run in runs.items() if len(run) >= 2 and run[0][1] - 1 <= len(bodies) // 3}
    best = max(runs.items(), key=lambda kv: (len(kv[1]), -kv[0][0]), default=None)
    if best is None:
        return None
    return outline_sections([(1, title, page) for title, page in best[1]], len(bodies))


def write_page(path: Path, text: str) -> None:
    """tmp + rename (atomic for readers); no fsync per page, which would cost more than the extraction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", newline="")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_temporaries(db: Path) -> int:
    """Remove the half-written page files (`.page_008.md.<pid>.tmp`) that an ingest killed while writing left
    behind, when their writer is gone. Called under the ingest lock. Returns how many were removed."""
    removed = 0
    for dirpath, dirnames, filenames in os.walk(db):
        dirnames[:] = [d for d in dirnames if d != ".ragkit"]
        for name in filenames:
            m = _TEMPORARY.match(name)
            if m and (int(m.group(2)) == os.getpid() or not alive(int(m.group(2)))):
                try:
                    os.unlink(os.path.join(dirpath, name))
                    removed += 1
                except OSError:
                    pass
    return removed


def emit_pages(job: Job, title: str, bodies: list[str], sections: list[str],
                printed: list[str] | None = None, running: list[list[str]] | None = None) -> DocResult:
    """The document's page files (paths and contents), rendered; `rag ingest` writes them. `printed` holds each
    page's printed number, `running` the running header and footer lines the converter took out of its body."""
    res = DocResult(job.src, job.shown, job.folder)
    # nothing a document wrote may drive a terminal later: control characters never reach a page file
    title = one_line(title)
    sections = [one_line(s) for s in sections]
    names = _unique_names(sections)
    total = len(bodies)
    for i, body in enumerate(bodies, start=1):
        body = strip_controls(body).strip()
        if not body or body == NO_TEXT_MARKER:
            body = NO_TEXT_MARKER
            res.no_text += 1
        sec = sections[i - 1]
        rel = f"{job.folder}/{names[sec]}/{page_filename(i, total)}"
        label = printed[i - 1].strip() if printed and i <= len(printed) else ""
        lines = running[i - 1] if running and i <= len(running) else []
        meta = PageMeta(source=job.shown, document=title, section=sec, page=i,
                        printed_page="" if label == str(i) else label,
                        running=RUNNING_SEP.join(one_line(t) for t in lines))
        res.texts.append(render_page(meta, body))
        res.pages.append(rel)
    return res
