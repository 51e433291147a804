"""One document's pages: the conversion job and its result, the report of a run, the section folders
(outline entries or fixed ranges), and writing the page files atomically (the `rag ingest` process writes
them; a conversion worker only renders them)."""

from __future__ import annotations

import os
import re
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
    """Fallback sections: fixed page ranges, e.g. pages_001-010."""
    width = max(3, len(str(n_pages)))
    out = []
    for p in range(1, n_pages + 1):
        start = (p - 1) // RANGE_SIZE * RANGE_SIZE + 1
        end = min(start + RANGE_SIZE - 1, n_pages)
        out.append(f"pages_{start:0{width}d}-{end:0{width}d}")
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
