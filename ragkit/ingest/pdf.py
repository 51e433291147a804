"""PDF -> one markdown page per PDF page: lines with their font sizes, read in column order, headings, bullets,
paragraphs, tables (pdf_tables), printed page numbers and running lines (pdf_margins), the document's title."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ragkit.core.pagefile import NO_TEXT_MARKER
from ragkit.core.text import HAN_KANA, ITEM_NUMBER
from ragkit.ingest.limits import LimitError, check_page_text, is_memory_error, memory_message
from ragkit.ingest.pages import (
    ConvertError,
    DocResult,
    Job,
    emit_pages,
    heading_sections,
    join_breaks,
    outline_sections,
    range_sections,
    reason_line,
)
from ragkit.ingest.pdf_layout import BULLETS, join_wrapped, reading_order
from ragkit.ingest.pdf_margins import Margins, band_folios, line_key, printed_numbers
from ragkit.ingest.pdf_rules import page_rules, tables
from ragkit.ingest.pdf_tables import aligned_table, figure_tables
from ragkit.ingest.pdf_tables import rows as table_rows

__all__ = ["convert_pdf", "document_title", "part_heading", "printed_numbers", "title_like"]

_BULLET_RE = re.compile(f"^\\s*[{BULLETS}]\\s*|^\\s*[-*]\\s+")
_HEADING_RATIO = 1.15
_WRAPS_ANYWHERE = re.compile(f"[{HAN_KANA}\u3000-\u303f\uff00-\uffef]")  # Japanese, Chinese: no word breaks
_RULED = "\x00ruled:"  # the text of the line record that stands where a ruled table goes


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
            if text[0].isspace():  # a line set in with spaces starts where its text does (a first-line indent)
                x0 = _visible_x0(spans, x0)
            out.append([bno, x0, y0, x1, y1, size, bold, text])
    return out


def _visible_x0(spans: list[dict], x0: float) -> float:
    """Where a line's text starts when it begins with spaces: at its first span that holds text, moved past that
    span's own leading spaces by their share of its characters (the dict gives no character positions)."""
    for s in spans:
        t = s["text"]
        if t.strip():
            lead = len(t) - len(t.lstrip())
            sx0, sx1 = s["bbox"][0], s["bbox"][2]
            return sx0 + (sx1 - sx0) * lead / len(t) if lead else sx0
    return x0


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


_HEAD_END = re.compile(r"[.。,、:：;；]$")


_SENTENCE_END = re.compile(r"[.!?。！？:：…\"”’)]$")
_FULL_STOP = re.compile(r"[.!?。！？][\"”’」)]?$")
# the number of an article at a line's start: "제3조", "第3条", "Article 3"
_ARTICLE = re.compile(r"^\s*(?:제\s?\d+\s?조|第\s?[\d一二三四五六七八九十百]+\s?条|Article\s+\d+)")
# an item of a law-style list at a line's start: its number, a space, its text ("一 都道府県知事の…", "イ 事業所得")
_ITEM = re.compile(f"^[ \t\u3000]*{ITEM_NUMBER}[ \t\u3000]+[{HAN_KANA}]{{2}}")


def _first_word_width(text: str, width: float) -> float:
    """The width the first word of a line `width` wide takes with the space before it: one character in Japanese
    or Chinese, which wrap anywhere (Korean wraps between words)."""
    text = text.strip()
    if not text:
        return width
    word = 1 if _WRAPS_ANYWHERE.match(text) else len(text.split(None, 1)[0]) + 1
    return width * word / len(text)


class _Block:
    """The heading, list item or paragraph being assembled: its text and the geometry of its lines."""

    __slots__ = ("at", "inner", "kind", "left", "level", "lines", "right", "running", "size", "text", "x1", "y1")

    def __init__(self, kind: str, text: str, x0: float, x1: float, y1: float, size: float, level: int = 0):
        self.kind, self.text, self.size, self.level = kind, text, size, level
        self.x1, self.y1 = x1, y1  # the last line's right end and bottom
        self.left = x0 + size if kind == "li" else x0 - size * 2.5  # lines further left start something new
        self.inner = x0  # the left edge of the lines after the first
        self.right = x1  # the widest line's right end
        self.lines = 1
        self.at: int | None = None  # its place among the parts when it was reopened (continued in a column)
        self.running = False  # a heading made of running lines only: written as plain text

    def add(self, text: str, x0: float, x1: float, y1: float) -> None:
        self.text = join_wrapped(self.text, text)
        self.inner = x0 if self.lines == 1 else min(self.inner, x0)
        self.x1, self.y1, self.right = x1, y1, max(self.right, x1)
        self.lines += 1

    def ends_before(self, x0: float, x1: float, text: str) -> bool:
        """Whether a paragraph ends before the line `text` at x0..x1: the line is indented (a first-line indent)
        while reaching the paragraph's right edge, or the last line stopped short after a full stop. After a
        single line, an indented line that runs on past it by 4 ems and by more than its first word needs: the
        first line was broken on purpose (a numbered heading in body type, 「２ 成分の配合の禁止」 over
        「　化粧品は、…」), not wrapped. After a full stop, a line that starts with an article's number ("제3조");
        after anything, a list item's number and a space ("一 都道府県知事の…": a wrapped line never starts so)."""
        if self.kind != "p":
            return False
        if _ARTICLE.match(text) and _FULL_STOP.search(self.text):
            return True  # after a full stop, the next article starts: a paragraph of its own
        if _ITEM.match(text):
            return True
        size = self.size
        if self.lines == 1:
            return x0 > self.inner + 0.6 * size and x1 - self.x1 > max(4 * size, _first_word_width(text, x1 - x0))
        indent = x0 > self.inner + 0.6 * size and x1 >= self.right - 1.5 * size
        short = self.x1 < self.right - max(4 * size, 0.25 * (self.right - self.inner)) \
            and bool(_SENTENCE_END.search(self.text))
        return indent or short

    def open(self) -> bool:
        """A paragraph whose last line runs to its right edge without closing the sentence: cut by a column."""
        return self.kind == "p" and self.x1 >= self.right - 2 * self.size and not _SENTENCE_END.search(self.text)


def _pdf_page_markdown(lines: list[list], levels: dict[float, int], body_size: float = 0.0, width: float = 0.0,
                       running: frozenset | set = frozenset(), ruled: list[str] | None = None) -> str:
    """Markdown of one page from its line records: read in column order, figure tables and aligned tables,
    headings by font size (never a running line's text), bullets, paragraphs with wrapped lines joined (a
    first-line indent or a short last line ends one; a paragraph cut by a column break goes on). A record whose
    text is _RULED + n stands for the ruled table `ruled[n]` (pdf_rules), already in markdown."""
    rows = table_rows(reading_order(lines, width) if width else lines)
    tables = figure_tables(rows)
    parts: list[str] = []
    cur: _Block | None = None
    cut: _Block | None = None  # a paragraph that stopped mid-sentence at the foot of a column
    bold_level = min(len(levels) + 1, 4)

    def flush():
        nonlocal cur, cut
        if cur is None:
            return
        if cur.kind == "li" and parts and parts[-1].startswith("- "):
            parts[-1] += "\n" + cur.text  # keep one list together (a tight markdown list)
        else:
            text = "#" * cur.level + " " + cur.text if cur.kind == "h" and not cur.running else cur.text
            if cur.at is None:
                cur.at = len(parts)
                parts.append(text)
            else:
                parts[cur.at] = text
        if cur.open():
            cut = cur
        elif not (cut and cur.kind == "p" and cur.size < cut.size):  # a footnote may stand between
            cut = None
        cur = None

    i = 0
    while i < len(rows):
        x0, y0, x1, y1, size, bold, cells = rows[i]
        md, nxt = tables.get(i, ("", i))
        if ruled and cells[0][2].startswith(_RULED):
            md, nxt = ruled[int(cells[0][2][len(_RULED):])], i + 1
        elif not md and len(cells) > 1:
            md, nxt = aligned_table(rows, i)
        if md:
            flush()
            cut = None
            parts.append(md)
            i = nxt
            continue
        i += 1
        text = " | ".join(c[2] for c in cells).strip()
        if not text:
            continue
        # line boxes of one paragraph may overlap a little (ascenders/descenders): a small negative gap
        close = cur is not None and abs(size - cur.size) <= 0.5 and -0.6 * size <= y0 - cur.y1 < size * 0.9
        level = levels.get(size)
        if not level and bold and body_size and size >= body_size - 0.5 and len(text) <= 80 and len(cells) == 1 \
                and not _HEAD_END.search(text) and any(ch.isalpha() for ch in text):
            level = bold_level  # a bold line of its own at body size: a minor heading
        # a running line's words are never a heading of their own, so never a page's title; over a heading in the
        # same type ("ACME, INC." over "CONSOLIDATED STATEMENTS OF OPERATIONS") they are part of it
        run = bool(level) and (line_key(text), size) in running
        if level and len(text) <= 120:
            if close and cur.kind == "h" and cur.level == level:  # a heading wrapped over lines
                cur.add(text, x0, x1, y1)
                cur.running = cur.running and run
                if cur.lines > 3 or len(cur.text) > 200:  # too long for a heading: large-print text
                    cur.kind = "p"
                continue
            if close and cur.kind == "p" and cur.size == size:  # large-print paragraph continues
                cur.add(text, x0, x1, y1)
                continue
            flush()
            cut = None
            cur = _Block("h", text, x0, x1, y1, size, level)
            cur.running = run
            continue
        m = _BULLET_RE.match(text)
        if m:
            flush()
            cut = None
            cur = _Block("li", "- " + text[m.end():].strip(), x0, x1, y1, size)
            continue
        if close and cur.kind != "h" and x0 >= cur.left - size * 0.6 and not cur.ends_before(x0, x1, text):
            cur.add(text, x0, x1, y1)
            continue
        flush()
        if cut is not None and text[:1].islower() and text[:1].isascii() and cut.size == size \
                and y0 < cut.y1 - size and len(parts) - cut.at <= 3:  # goes on at the top of the next column
            cur, cut = cut, None
            cur.add(text, x0, x1, y1)
            cur.left, cur.inner, cur.right = x0 - size * 2.5, x0, x1  # the new column's edges
            continue
        cur = _Block("p", text, x0, x1, y1, size)
    flush()
    # joined per block: a line break that separates a heading from its text is structure, not wrapping
    return "\n\n".join(p if p.startswith("| ") else join_breaks(p) for p in parts)


def _page_rules(page, lines: list[list]):
    """pdf_rules.page_rules, or None when the page's drawings cannot be read."""
    try:
        return page_rules(page, lines)
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 - a ruled table is a bonus; the page is read as before
        return None


def _take_ruled(grids, lines: list[list], ruled: dict[int, list], i: int) -> list[list]:
    """The page's line records without those its ruled tables hold (the tables go to `ruled[i]`). A drawing this
    reading misjudges leaves the lines as they are."""
    try:
        found = tables(grids, lines)
    except Exception:  # noqa: BLE001 - a ruled table is a bonus; the lines are read as before
        return lines
    if not found:
        return lines
    held = set().union(*(t.line_ids for t in found))
    for t in found:
        t.lines = [lines[k] for k in sorted(t.line_ids)]
        first = min(t.line_ids)
        t.after = [ln for k, ln in enumerate(lines) if k > first and k not in held]  # the table goes before them
    ruled[i] = found
    return [ln for k, ln in enumerate(lines) if k not in held]


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


# a heading numbered as one part of a document ("1. Passwords", "2.3 Scope", "Chapter 1", "第1章 総則", "제1장"):
# a section's heading, never the whole document's title (a year, "2019 Annual Report", is no part number)
_PART_HEADING = re.compile(
    r"^(?:(?:chapter|section|part|article|appendix)\s+[\dIVXivxA-Z]+\b|\d{1,2}(?:\.\d{1,2})*[.)]?\s"
    r"|第\s*[0-9０-９一二三四五六七八九十百]+\s*[章節条編部款項]|제\s*\d+\s*[장절조편부관항])", re.I)


def part_heading(text: str) -> bool:
    """Whether a heading is numbered as one part of a document ("1. Passwords", "Chapter 1", "第1章 総則")."""
    return bool(_PART_HEADING.match(text))


def document_title(meta_title: str, first_page: str, stem: str) -> str:
    """The front matter's `document`: the PDF metadata title when it is title-like, else the first page's
    dominant heading (its largest, then first), else the file name, which is also the title when that heading
    is numbered as a part of the document (the first page opens with chapter 1)."""
    if title_like(meta_title or ""):
        return " ".join(meta_title.split())
    heads = [(len(m[1]), " ".join(m[2].replace("*", "").split())) for m in _HEADING.finditer(first_page or "")]
    heads = [h for h in heads if title_like(h[1])]
    if heads:
        top = min(heads, key=lambda h: h[0])[1]
        if not part_heading(top):  # else the first page opens with chapter 1: no title printed on it
            return top[:200]
    return stem


def convert_pdf(job: Job) -> DocResult:
    import pymupdf

    path = Path(job.src)
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if b"%PDF-" not in head:
        raise ConvertError("not a PDF file (no %PDF header)")
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as e:
        reason = reason_line(e) if str(path) not in str(e) else "MuPDF cannot open it"
        raise ConvertError(f"corrupt PDF ({reason})") from None
    with doc:
        if doc.needs_pass:
            raise ConvertError("encrypted PDF (a password is required to open it)")
        n = doc.page_count
        if n == 0:
            raise ConvertError("PDF has no pages")
        flags = pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_IMAGES
        all_lines: list[list[list]] = []
        sizes: list[tuple[float, float]] = []
        broken: dict[int, str] = {}
        grids: dict[int, list] = {}  # page -> the grids its drawings rule (pdf_rules), on the few that may have one
        for i in range(n):
            lines: list[list] = []
            width = height = 0.0
            try:
                page = doc[i]
                width, height = page.rect.width, page.rect.height
                check_page_text(doc, page, i + 1, job.limits)  # before MuPDF holds all of its text
                pymupdf.TOOLS.reset_mupdf_warnings()
                lines = _pdf_lines(page, flags)
                if is_memory_error(pymupdf.TOOLS.mupdf_warnings()):
                    raise LimitError(memory_message(job.limits))
                grids[i] = _page_rules(page, lines)
            except LimitError:
                raise
            except Exception as e:
                if is_memory_error(e):
                    raise LimitError(memory_message(job.limits)) from None
                broken[i] = reason_line(e)
            all_lines.append(lines)
            sizes.append((width, height))
        try:
            margins = Margins(all_lines, [h for _w, h in sizes])
            printed = _printed_pages(doc, margins.folio_candidates())
            all_lines, running, running_keys = margins.running(printed)
            printed = margins.labels(printed)
        except MemoryError:
            raise
        except Exception:  # noqa: BLE001 - a layout this reading misjudges keeps its margins in the text
            heights = [h for _w, h in sizes]
            printed = _printed_pages(doc, [band_folios(ln, h) for ln, h in zip(all_lines, heights, strict=True)])
            running, running_keys = [[] for _ in all_lines], set()
        ruled: dict[int, list] = {}  # page -> its ruled tables, whose lines leave the page's line records
        for i, g in grids.items():  # after the margins: a running header boxed in with rules is no table's
            if g:
                all_lines[i] = _take_ruled(g, all_lines[i], ruled, i)
        body_size, levels = _heading_levels(
            [lines + [ln for t in ruled.get(i, ()) for ln in t.lines] for i, lines in enumerate(all_lines)])
        for i, tables in ruled.items():  # each table where its first line was, in the page's order
            size = body_size or 10.0
            at = {id(ln): j for j, ln in enumerate(all_lines[i])}
            places = [(next((at[id(ln)] for ln in t.after if id(ln) in at), len(all_lines[i])), k)
                      for k, t in enumerate(tables)]
            for j, k in sorted(places, reverse=True):
                t = tables[k]
                all_lines[i].insert(j, [-1, t.bbox[0], t.bbox[1], t.bbox[2], t.bbox[1] + size, size, False,
                                        f"{_RULED}{k}"])
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
                md = _pdf_page_markdown(all_lines[i], levels, body_size, sizes[i][0], running_keys,
                                        [t.markdown for t in ruled.get(i, ())])
            except Exception:
                md = join_breaks("\n".join(ln[7] for ln in all_lines[i] if not ln[7].startswith(_RULED)))
            if not first_heading:
                m = re.search(r"^#{1,6} (.+)$", md, re.MULTILINE)
                if m:
                    first_heading = m.group(1).strip()
            bodies.append(md)
        try:
            toc = doc.get_toc(simple=True)
        except Exception:
            toc = []
        sections = outline_sections(toc, n) or heading_sections(bodies) or range_sections(n)
        title = document_title((doc.metadata or {}).get("title") or "", bodies[0] if bodies else "", path.stem)
        repaired = doc.is_repaired
    res = emit_pages(job, title, bodies, sections, printed, running)
    if repaired:  # MuPDF rebuilt a damaged file (truncated, broken xref): what it could not rebuild is gone
        blank = f"{res.no_text} of {n} page(s) have no text" if res.no_text else f"all {n} page(s) have text"
        res.warning = (f"damaged PDF repaired by MuPDF: {n} page(s) recovered, {blank}; content past the damage "
                       "may be missing")
    return res
