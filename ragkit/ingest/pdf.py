"""PDF -> one markdown page per PDF page: lines with their font sizes, headings, bullets, aligned columns as
tables, printed page numbers, and the document's title."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path

from ragkit.core.pagefile import NO_TEXT_MARKER
from ragkit.core.text import HAN_KANA
from ragkit.ingest.limits import LimitError, check_page_text, is_memory_error, memory_message
from ragkit.ingest.pages import (
    ConvertError,
    DocResult,
    Job,
    emit_pages,
    join_breaks,
    outline_sections,
    range_sections,
    reason_line,
)

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
        folios: list[set[int]] = []
        broken: dict[int, str] = {}
        for i in range(n):
            lines: list[list] = []
            height = 0.0
            try:
                page = doc[i]
                height = page.rect.height
                check_page_text(doc, page, i + 1, job.limits)  # before MuPDF holds all of its text
                pymupdf.TOOLS.reset_mupdf_warnings()
                lines = _pdf_lines(page, flags)
                if is_memory_error(pymupdf.TOOLS.mupdf_warnings()):
                    raise LimitError(memory_message(job.limits))
            except LimitError:
                raise
            except Exception as e:
                if is_memory_error(e):
                    raise LimitError(memory_message(job.limits)) from None
                broken[i] = reason_line(e)
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
        sections = outline_sections(toc, n) or range_sections(n)
        title = document_title((doc.metadata or {}).get("title") or "", bodies[0] if bodies else "", path.stem)
        printed = _printed_pages(doc, folios)
        repaired = doc.is_repaired
    res = emit_pages(job, title, bodies, sections, printed)
    if repaired:  # MuPDF rebuilt a damaged file (truncated, broken xref): what it could not rebuild is gone
        blank = f"{res.no_text} of {n} page(s) have no text" if res.no_text else f"all {n} page(s) have text"
        res.warning = (f"damaged PDF repaired by MuPDF: {n} page(s) recovered, {blank}; content past the damage "
                       "may be missing")
    return res
