"""Reading order and text flow on a PDF page: columns read one after the other, and wrapped lines joined into
their paragraph."""

from __future__ import annotations

import re

from ragkit.core.text import HAN_KANA

BULLETS = "•・●○■□▪◆◇◦‣∙"
_JOIN_TIGHT = re.compile(f"[{HAN_KANA}\u3000-\u303f\uff00-\uffef]")
_WIDE = 0.2  # a line at least this share of the page wide is running text (evidence of a column)
_MIN_COLUMN_LINES = 4  # running-text lines each side of a gutter that make a page multi-column
_CROSSING = 0.1  # share of running-text lines that may cross a gutter (titles, full-width figures, captions)
_SENTENCE_END = re.compile(r"[.!?。！？…][\"”’)]?$")
_OPEN_END = re.compile(r"[.!?。！？:：;；…\"”’)]$")  # a line ending so may close its sentence or a caption
_FIGURES = re.compile(r"^[\d\s.,:;%‰()\[\]$€£¥₩+\-–—−/*]+$")  # a line of figures, dashes or signs only
_PROSE_WRAPS = 0.3  # share of a column's lines that wrap mid-sentence onto the next line of the column


def join_wrapped(a: str, b: str) -> str:
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


def _gutters(lines: list[list], width: float) -> list[float]:
    """x positions of the gaps between text columns: where (almost) no running-text line crosses, in the middle
    of the page, with enough running text on each side."""
    wide = [ln for ln in lines if ln[3] - ln[1] >= _WIDE * width]
    if len(wide) < 2 * _MIN_COLUMN_LINES:
        return []
    mid, slack = width / 2, 0.1 * width  # no running text on one side of the middle: one column (most pages)
    if sum(1 for ln in wide if ln[3] <= mid + slack) < _MIN_COLUMN_LINES \
            or sum(1 for ln in wide if ln[1] >= mid - slack) < _MIN_COLUMN_LINES:
        return []
    w = int(width) + 2
    delta = [0] * (w + 1)
    for ln in wide:
        delta[min(max(int(ln[1]), 0), w)] += 1
        delta[min(max(int(ln[3]) + 1, 0), w)] -= 1
    cover, run = [0] * w, 0
    for x in range(w):
        run += delta[x]
        cover[x] = run
    limit = int(_CROSSING * len(wide))
    out: list[float] = []
    x, hi = int(0.15 * width), int(0.85 * width)
    while x < hi:
        if cover[x] <= limit:
            start = x
            while x < hi and cover[x] <= limit:
                x += 1
            out.append((start + x) / 2)
        x += 1
    bounds = [0.0, *out, width]
    keep = []
    for k, g in enumerate(out):  # each side of a gutter holds a column of running text
        a, b, c = bounds[k], g, bounds[k + 2]
        left = sum(1 for ln in wide if ln[1] >= a - 1 and ln[3] <= b)
        right = sum(1 for ln in wide if ln[1] >= b and ln[3] <= c + 1)
        if left >= _MIN_COLUMN_LINES and right >= _MIN_COLUMN_LINES:
            keep.append(g)
    return keep


def _prose_columns(lines: list[list], col: list[int], ncols: int) -> bool:
    """Whether every column of the page reads as running text: in each, >= 30% of its lines stop mid-sentence at
    the column's right edge and go on in the line just below, in the same column and type; at least one line
    ends a sentence; and none is a figure. The lines of a table's cells stand in rows apart, or hold figures, or
    are short; a table of wrapped sentences on shared baselines is read as columns too."""
    for k in range(ncols):
        mine = sorted((ln for ln, c in zip(lines, col, strict=True) if c == k), key=lambda ln: (ln[2], ln[1]))
        if len(mine) < _MIN_COLUMN_LINES or any(_FIGURES.match(ln[7].strip()) for ln in mine):
            return False
        left, right = min(ln[1] for ln in mine), max(ln[3] for ln in mine)
        wraps = 0
        for a, b in zip(mine, mine[1:], strict=False):
            size = a[5] or 10
            text = a[7].strip()
            if abs(b[5] - a[5]) <= 0.5 and -0.6 * size <= b[2] - a[4] < 0.9 * size and not _OPEN_END.search(text) \
                    and a[3] >= right - max(4 * size, 0.25 * (right - left)) and abs(b[1] - left) <= 3 * size:
                wraps += 1
        if wraps < _PROSE_WRAPS * len(mine) or not any(_SENTENCE_END.search(ln[7].strip()) for ln in mine):
            return False
    return True


def _blocks(lines: list[list], ids: list[tuple[int, int]], inside, width: float) -> tuple[dict, dict]:
    """({block id: box}, {block id: its column, -1 across a gutter, -2 set vertically in a margin})."""
    boxes: dict[tuple[int, int], list[float]] = {}
    for ln, b_id in zip(lines, ids, strict=True):
        b = boxes.setdefault(b_id, [ln[1], ln[2], ln[3], ln[4]])
        b[0], b[1], b[2], b[3] = min(b[0], ln[1]), min(b[1], ln[2]), max(b[2], ln[3]), max(b[3], ln[4])
    column: dict[tuple[int, int], int] = {}
    for b_id, (x0, y0, x1, y1) in boxes.items():
        column[b_id] = inside(x0, x1)
        if y1 - y0 > 3 * (x1 - x0) and x1 - x0 < 0.1 * width:
            column[b_id] = -2  # set vertically in a margin ("arXiv:2303.05039v2 [cs.IR]"): read last
    return boxes, column


def reading_order(lines: list[list], width: float) -> list[list]:
    """The page's line records in reading order. On a page set in columns, the PDF's text blocks are read column
    by column, band by band between blocks that span the columns (a title, a full-width figure); a page whose
    left and right blocks start on the same baselines is a table, and any other page keeps the PDF's order. A page
    whose blocks mostly each hold lines of both columns side by side (one block per baseline) is read column by
    column, each such block split at the gutter, when every column runs as prose (`_prose_columns`)."""
    if len(lines) < 2 * _MIN_COLUMN_LINES or width <= 0:
        return lines
    gutters = _gutters(lines, width)
    if not gutters:
        return lines

    def inside(x0: float, x1: float) -> int:  # the column a box lies in, -1 when it crosses a gutter
        cols = [k for k in range(len(gutters) + 1)
                if (k == 0 or x0 >= gutters[k - 1] - 2) and (k == len(gutters) or x1 <= gutters[k] + 2)]
        return cols[0] if cols else -1

    line_col = [inside(ln[1], ln[3]) for ln in lines]
    ids = [(ln[0], 0) for ln in lines]
    boxes, column = _blocks(lines, ids, inside, width)
    starts: dict[int, set[int]] = {}
    for b_id, c in column.items():
        if c >= 0:
            starts.setdefault(c, set()).add(round(boxes[b_id][1] / 2))
    table = False
    if len(starts) >= 2:
        a, b = sorted(starts.values(), key=len)[:2]
        table = len(a) >= 3 and len(a & b) >= 0.5 * len(a)  # rows side by side: a table, read row by row
    # blocks that hold lines of two columns side by side, none crossing a gutter (PyMuPDF makes one block of a
    # baseline when the columns share their baselines): the page's columns, or a table's rows
    side = {b_id[0] for b_id, c in column.items() if c == -1} - {ln[0] for ln, c in zip(lines, line_col,
                                                                                       strict=True) if c < 0}
    in_cols = sum(1 for c in line_col if c >= 0)
    paired = sum(1 for ln, c in zip(lines, line_col, strict=True) if c >= 0 and ln[0] in side)
    if paired >= 0.5 * in_cols and _prose_columns(lines, line_col, len(gutters) + 1):
        ids = [(ln[0], c if ln[0] in side else 0) for ln, c in zip(lines, line_col, strict=True)]
        boxes, column = _blocks(lines, ids, inside, width)
    elif table:
        return lines
    spans = sorted(boxes[b][1] for b, c in column.items() if c == -1)

    def key(b_id: tuple[int, int]) -> tuple[int, int, float]:
        y0 = boxes[b_id][1]
        if column[b_id] == -2:
            return (len(spans) + 1, 0, y0)
        band = sum(1 for s in spans if s < y0)
        return (band, len(gutters) + 1, y0) if column[b_id] < 0 else (band, column[b_id], y0)

    order = sorted(boxes, key=key)
    if order == list(boxes):
        return lines
    rank = {b: n for n, b in enumerate(order)}
    pos = sorted(range(len(lines)), key=lambda k: rank[ids[k]])  # stable: a block's lines keep their order
    return [lines[k] for k in pos]
