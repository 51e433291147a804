"""Ruled tables on a PDF page: a grid drawn with rules (thin lines or rectangles, as Word and Excel draw cell
borders, and as Japanese forms and plans set their 項目 / 内容 / 期限 columns), read cell by cell. Text that
wraps inside a cell stays in that cell, where reading baselines across the page would splice the cells of one
row into one sentence.

    page_rules(page, lines) -> grids | None     # None on most pages, cheaply (the drawings are not read)
    tables(grids, lines) -> [RuledTable(bbox, markdown, line_ids)]
    ruled_tables(page, lines)                   # the two
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from ragkit.ingest.pdf_layout import join_wrapped
from ragkit.ingest.pdf_tables import md_cell, numeric

_THIN = 2.5  # a rule is at most this thick (points)
_MIN_RULE = 6.0  # and at least this long
_SNAP = 2.0  # rules within this distance are one rule; a rule reaches a crossing within it
_MIN_PIECES = 3  # a baseline shared by this many pieces of text: cells side by side ...
_MIN_WORDS = 2  # ... this many of them words ...
_WORD = re.compile(r"[^\W\d_]{2}")
_MIN_SHARED = 3  # ... on this many baselines, before the page's drawings are read (they cost ~half the text's)
_MIN_FILLED = 0.5  # a table has text in at least this share of its cells
_MAX_CROSSING = 0.05  # and at most this share of its lines run across a rule
_MIN_FULL_ROWS = 2  # rows with text in >= 2 cells that a table has at least
_MAX_FIGURES = 3  # figures one under another in a cell: its rows are not ruled
_MAX_ITEMS = 3000  # drawing pieces on a page past which it is read as a map or a chart, not searched for tables
_MAX_RULES = 400  # more rules of one direction, once merged, than any table draws


@dataclass
class RuledTable:
    bbox: tuple[float, float, float, float]
    markdown: str
    line_ids: set[int]  # the indexes of the page's line records the table holds
    lines: list[list] = field(default_factory=list)  # those records, once taken from the page
    after: list[list] = field(default_factory=list)  # the page's other records that follow it in the PDF's order


def _may_hold_grid(lines: list[list]) -> bool:
    """Whether several baselines carry >= 3 separate pieces of text, two of them words: what a table with cells
    side by side gives, and a page of running text (one or two columns) or of figures beside their labels (a
    financial statement: pdf_tables reads it) does not."""
    pieces: dict[int, list[str]] = {}
    for ln in lines:
        pieces.setdefault(round(ln[4]), []).append(ln[7])
    shared = 0
    for texts in pieces.values():
        if len(texts) >= _MIN_PIECES and sum(1 for t in texts if _WORD.search(t)) >= _MIN_WORDS:
            shared += 1
            if shared >= _MIN_SHARED:
                return True
    return False


def _segments(page) -> tuple[list[list[float]], list[list[float]]]:
    """(horizontal [y, x0, x1], vertical [x, y0, y1]) rules of the page's drawings: thin filled rectangles,
    straight lines and the edges of stroked rectangles."""
    hs: list[list[float]] = []
    vs: list[list[float]] = []
    items = 0
    for path in page.get_cdrawings():
        its = path.get("items", ())
        items += len(its)
        if items > _MAX_ITEMS:
            return [], []  # a map or a chart: reading every piece costs more than the page's text
        stroked = "s" in (path.get("type") or "")
        for item in its:
            kind = item[0]
            if kind == "c":
                continue  # a curve
            if kind == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                if abs(ay - by) <= 1 and abs(ax - bx) >= _MIN_RULE:
                    hs.append([(ay + by) / 2, min(ax, bx), max(ax, bx)])
                elif abs(ax - bx) <= 1 and abs(ay - by) >= _MIN_RULE:
                    vs.append([(ax + bx) / 2, min(ay, by), max(ay, by)])
            elif kind == "re":
                x0, y0, x1, y1 = item[1]
                w, h = abs(x1 - x0), abs(y1 - y0)
                x0, x1, y0, y1 = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
                if h <= _THIN and w >= _MIN_RULE:
                    hs.append([(y0 + y1) / 2, x0, x1])
                elif w <= _THIN and h >= _MIN_RULE:
                    vs.append([(x0 + x1) / 2, y0, y1])
                elif stroked and w >= _MIN_RULE and h >= _MIN_RULE:  # a cell drawn as a box
                    hs += [[y0, x0, x1], [y1, x0, x1]]
                    vs += [[x0, y0, y1], [x1, y0, y1]]
    return _merge(hs), _merge(vs)


def _merge(segs: list[list[float]]) -> list[list[float]]:
    """Collinear rules that touch or overlap, as one (a border drawn cell by cell)."""
    out: list[list[float]] = []
    for pos, a, b in sorted(segs):
        for s in reversed(out[-8:]):
            if abs(s[0] - pos) <= _SNAP and a <= s[2] + _SNAP and b >= s[1] - _SNAP:
                s[1], s[2] = min(s[1], a), max(s[2], b)
                break
        else:
            out.append([pos, a, b])
    return out


def _grids(hs: list[list[float]], vs: list[list[float]]) -> list[tuple[list[list[float]], list[list[float]]]]:
    """The rules that cross one another, grouped: each group with >= 3 horizontal and >= 3 vertical rules (two
    rows and two columns of cells at least) is a grid."""
    n = len(hs)
    sets = _Sets()
    xs = [s[0] for s in vs]  # vs is sorted by x (_merge)
    for i, (y, hx0, hx1) in enumerate(hs):
        for j in range(bisect_left(xs, hx0 - _SNAP), bisect_right(xs, hx1 + _SNAP)):
            if vs[j][1] - _SNAP <= y <= vs[j][2] + _SNAP:
                sets.join(i, n + j)
    groups: dict[int, tuple[list, list]] = {}
    for i, s in enumerate(hs):
        groups.setdefault(sets.find(i), ([], []))[0].append(s)
    for j, s in enumerate(vs):
        groups.setdefault(sets.find(n + j), ([], []))[1].append(s)
    return [g for g in groups.values() if len(_cuts([s[0] for s in g[0]])) >= 3
            and len(_cuts([s[0] for s in g[1]])) >= 3]


class _Sets:
    """Disjoint sets of hashable, ordered items (union-find): the smaller item of two joined sets names them."""

    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        parent = self.parent
        while parent.get(x, x) != x:
            parent[x] = x = parent.get(parent[x], parent[x])
        return x

    def join(self, a: Any, b: Any) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def _cuts(positions: list[float]) -> list[float]:
    """Distinct positions (within _SNAP of each other: one), sorted."""
    out: list[float] = []
    for p in sorted(positions):
        if not out or p - out[-1] > _SNAP:
            out.append(p)
    return out


def _covers(segs: list[list[float]], pos: float, at: float) -> bool:
    """Whether a rule at `pos` runs across `at` (a horizontal rule across a column's middle x, or a vertical one
    across a row's middle y)."""
    return any(abs(s[0] - pos) <= _SNAP and s[1] - _SNAP <= at <= s[2] + _SNAP for s in segs)


def _crosses(vs: list[list[float]], ln: list) -> bool:
    """Whether a vertical rule runs through the middle of a line of text (a cell's text never crosses its rules)."""
    ymid = (ln[2] + ln[4]) / 2
    return any(ln[1] + 2 * _SNAP < s[0] < ln[3] - 2 * _SNAP and s[1] <= ymid <= s[2] for s in vs)


def _scattered(lns: list[list]) -> bool:
    """Whether a cell holds pieces of text side by side, apart (labels of a map or a figure): the lines of a
    cell's text stand one under the other."""
    if len(lns) < 2:
        return False
    by_y = sorted(lns, key=lambda ln: ln[2])
    for i, a in enumerate(by_y):
        for b in by_y[i + 1 : i + 6]:
            if b[2] >= a[4] - 0.3 * (a[4] - a[2]):
                break  # below a: the next line of the text
            gap = max(b[1] - a[3], a[1] - b[3])
            if gap > 2 * max(a[5], b[5]):
                return True
    return False


def _stacked(lns: list[list]) -> bool:
    """Whether a cell holds several figures one under another: rows of a table ruled only around its columns."""
    return sum(1 for ln in lns if numeric(ln[7].strip())) >= _MAX_FIGURES


def _table(hs: list[list[float]], vs: list[list[float]], lines: list[list]) -> RuledTable | None:
    ys, xs = _cuts([s[0] for s in hs]), _cuts([s[0] for s in vs])
    nr, nc = len(ys) - 1, len(xs) - 1
    # merged cells: no rule between two neighbours joins them (a row across all columns, an item over rows); a
    # merged cell is named by its top-left cell
    merged = _Sets()
    top = merged.find
    for r in range(nr):
        ymid = (ys[r] + ys[r + 1]) / 2
        for c in range(nc):
            xmid = (xs[c] + xs[c + 1]) / 2
            if c + 1 < nc and not _covers(vs, xs[c + 1], ymid):
                merged.join((r, c), (r, c + 1))
            if r + 1 < nr and not _covers(hs, ys[r + 1], xmid):
                merged.join((r, c), (r + 1, c))
    texts: dict[tuple[int, int], list[list]] = {}
    held: set[int] = set()
    for k, ln in enumerate(lines):
        cx, cy = (ln[1] + ln[3]) / 2, (ln[2] + ln[4]) / 2
        if not (xs[0] < cx < xs[-1] and ys[0] < cy < ys[-1]):
            continue
        r = next(i for i in range(nr) if cy < ys[i + 1])
        c = next(i for i in range(nc) if cx < xs[i + 1])
        texts.setdefault(top((r, c)), []).append(ln)
        held.add(k)
    if len(texts) < 2:
        return None  # a box around one text (a frame, a note): no table
    cells = {top((r, c)) for r in range(nr) for c in range(nc)}
    crossing = sum(1 for k in held if _crosses(vs, lines[k]))
    if len(texts) < _MIN_FILLED * len(cells) or crossing > _MAX_CROSSING * len(held) \
            or any(_scattered(lns) or _stacked(lns) for lns in texts.values()):
        # rules that text runs across, mostly empty cells, labels strewn in a cell (a map, a chart, a form), or
        # figures one under another in a cell (rows the rules do not part: pdf_tables reads them by baseline)
        return None
    grid = [[""] * nc for _ in range(nr)]
    for cell, lns in texts.items():
        text = ""
        for ln in sorted(lns, key=lambda ln: (round(ln[4]), ln[1])):
            text = join_wrapped(text, ln[7].strip())
        grid[cell[0]][cell[1]] = md_cell(text)
    if not any(_WORD.search(t) for row in grid for t in row):
        return None  # figures only: the labels of a chart's grid
    if sum(1 for row in grid if sum(1 for t in row if t) >= 2) < _MIN_FULL_ROWS:
        return None  # no two rows hold two cells each: boxes of a diagram, each holding its label
    keep_cols = [c for c in range(nc) if any(row[c] for row in grid)]
    body = [[row[c] for c in keep_cols] for row in grid if any(row[c] for c in keep_cols)]
    if len(body) < 2 or len(keep_cols) < 2:
        return None
    md = ["| " + " | ".join(body[0]) + " |", "|" + "---|" * len(keep_cols)]
    md += ["| " + " | ".join(row) + " |" for row in body[1:]]
    return RuledTable((xs[0], ys[0], xs[-1], ys[-1]), "\n".join(md), held)


def page_rules(page, lines: list[list]) -> tuple[list[list[float]], list[list[float]]] | None:
    """The page's grids of rules ([(horizontal rules, vertical rules)], see `tables`), or None: only a page whose
    text (`lines`: [block, x0, y0, x1, y1, size, bold, text]) sits in cells side by side has its drawings read."""
    if not _may_hold_grid(lines):
        return None
    hs, vs = _segments(page)
    if not (3 <= len(hs) <= _MAX_RULES and 3 <= len(vs) <= _MAX_RULES):
        return None  # too few for a grid, or so many that the drawing is a chart
    return _grids(hs, vs) or None


def tables(grids, lines: list[list]) -> list[RuledTable]:
    """The ruled tables of page_rules' grids over the page's line records `lines`, each with its markdown and the
    indexes of the lines it holds."""
    return [t for ghs, gvs in grids if (t := _table(ghs, gvs, lines)) is not None]


def ruled_tables(page, lines: list[list]) -> list[RuledTable]:
    """page_rules, then tables: the ruled tables of a page."""
    grids = page_rules(page, lines)
    return tables(grids, lines) if grids else []
