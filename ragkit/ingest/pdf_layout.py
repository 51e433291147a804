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


def reading_order(lines: list[list], width: float) -> list[list]:
    """The page's line records in reading order. On a page set in columns, the PDF's text blocks are read column
    by column, band by band between blocks that span the columns (a title, a full-width figure); a page whose
    left and right blocks start on the same baselines is a table, and any other page keeps the PDF's order."""
    if len(lines) < 2 * _MIN_COLUMN_LINES or width <= 0:
        return lines
    gutters = _gutters(lines, width)
    if not gutters:
        return lines
    boxes: dict[int, list[float]] = {}
    for ln in lines:
        b = boxes.setdefault(ln[0], [ln[1], ln[2], ln[3], ln[4]])
        b[0], b[1], b[2], b[3] = min(b[0], ln[1]), min(b[1], ln[2]), max(b[2], ln[3]), max(b[3], ln[4])
    column: dict[int, int] = {}
    for bno, (x0, y0, x1, y1) in boxes.items():
        inside = [k for k in range(len(gutters) + 1)
                  if (k == 0 or x0 >= gutters[k - 1] - 2) and (k == len(gutters) or x1 <= gutters[k] + 2)]
        column[bno] = inside[0] if inside else -1  # -1: spans a gutter
        if y1 - y0 > 3 * (x1 - x0) and x1 - x0 < 0.1 * width:
            column[bno] = -2  # set vertically in a margin ("arXiv:2303.05039v2 [cs.IR]"): read last
    starts: dict[int, set[int]] = {}
    for bno, c in column.items():
        if c >= 0:
            starts.setdefault(c, set()).add(round(boxes[bno][1] / 2))
    if len(starts) >= 2:
        a, b = sorted(starts.values(), key=len)[:2]
        if len(a) >= 3 and len(a & b) >= 0.5 * len(a):  # rows side by side: a table, read row by row
            return lines
    spans = sorted(boxes[b][1] for b, c in column.items() if c == -1)

    def key(bno: int) -> tuple[int, int, float]:
        y0 = boxes[bno][1]
        if column[bno] == -2:
            return (len(spans) + 1, 0, y0)
        band = sum(1 for s in spans if s < y0)
        return (band, len(gutters) + 1, y0) if column[bno] < 0 else (band, column[bno], y0)

    order = sorted(boxes, key=key)
    if order == list(boxes):
        return lines
    rank = {b: n for n, b in enumerate(order)}
    return sorted(lines, key=lambda ln: rank[ln[0]])  # stable: a block's lines keep their order
