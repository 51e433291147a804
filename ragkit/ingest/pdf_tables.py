"""Tables in a PDF page's lines: baselines split into cells, figure tables (financial statements: a label and
figures per row, columns found from where the figures sit, years and periods on the header row) and other
tables whose text lines up in columns."""

from __future__ import annotations

import re

from ragkit.ingest.pages import join_breaks
from ragkit.ingest.pdf_layout import BULLETS, join_wrapped

_BULLET_ONLY = re.compile(f"^\\s*[{BULLETS}]\\s*$")
_CURRENCY = re.compile(r"^(?:[$€£¥￥₹₩]|US\$|R\$|S\$|HK\$|A\$|C\$|Rs\.?|RM)$")
_NUMBER = re.compile(
    r"^[(\[]?\s*[-–—−+△▲]?\s*(?:[$€£¥￥₹₩]|US\$|R\$|S\$|HK\$|A\$|C\$|Rs\.?)?\s*[-–—−△▲]?\s*\(?\s*"
    r"(?:\d{1,3}(?:[,.']\d{3})+|\d+)(?:[.,]\d+)?\s*\)?\s*(?:%|‰|pts?|bps|x|倍|円|元|원)?\s*[)\]]?\s*"
    r"(?:\*{1,3}|\([a-z1-9]\)|[¹²³⁴⁵⁶⁷⁸⁹†‡])?$", re.IGNORECASE)
_DASH = re.compile(r"^(?:(?:[$€£¥￥₹₩]\s*)?[-–—−]{1,3}\s*%?|n/?a|nm|n/m|nil|\*)$", re.IGNORECASE)
_YEAR = re.compile(r"^(?:19|20)\d\d$")
_LEADERS = re.compile(r"\s*(?:\.\s?){3,}\s*$|\s*[…·]{2,}\s*$")
_SHORT_VALUE = 12  # a text cell among figures ("Yes", "NA", "Nil") is a value up to this many characters
# a figure followed by the letters of the rows it differs from significantly ("8bd", "65b", "7bc": survey tables)
_MARKED = re.compile(r"^\d[\d.,]*%?[a-f]{1,4}$")


def md_cell(text: str) -> str:
    return join_breaks(text).replace("|", "\\|").strip()


def numeric(text: str) -> bool:
    return len(text) < 40 and _NUMBER.match(text) is not None


# ------------------------------------------------------------------------------------------------- rows


def rows(lines: list[list]) -> list[list]:
    """Merge lines that sit on one baseline, left to right, into rows [x0, y0, x1, y1, size, bold, cells] where
    cells = [[x0, x1, text], ...] split at wide horizontal gaps (table columns), before a figure or a currency
    sign that follows a figure, with a lone currency sign joined to the figure after it ("$ 6,779,511")."""
    out: list[list] = []
    for _bno, x0, y0, x1, y1, size, bold, text in lines:
        text = text.strip()
        last = out[-1] if out else None
        # on the row's baseline, or inside its height (a raised footnote mark: "(1)")
        if last and x0 >= last[2] - 1 and (abs(y1 - last[3]) < 2 or size <= last[4] and y0 >= last[1] - 1
                                           and y1 <= last[3] + 1 and last[3] - last[1] <= 2 * last[4]):
            cell = last[6][-1]
            gap = x0 - last[2]
            new = gap > 1.5 * max(size, 1) or (  # a wide gap, or a figure after a figure or a label
                gap > 0.4 * max(size, 1) and _figure_token(text.split()[0])
                and (_figure_token(cell[2].split()[-1]) or not numeric(cell[2])))
            if new and not _BULLET_ONLY.match(cell[2]):
                last[6].append([x0, x1, text])
            else:
                cell[1], cell[2] = x1, cell[2] + " " + text
            last[2], last[4] = x1, max(last[4], size)
            last[5] = last[5] and bold
        else:
            out.append([x0, y0, x1, y1, size, bold, [[x0, x1, text]]])
    for row in out:
        if len(row[6]) > 1 or ". ." in (t := row[6][0][2]) or "..." in t or "…" in t or "··" in t:
            row[6] = _tidy(row[6])
    return out


def _has_leaders(text: str) -> bool:
    return ("..." in text or ". ." in text or "…" in text or "··" in text) and _LEADERS.search(text) is not None


def _tidy(cells: list[list]) -> list[list]:
    """Dot leaders dropped; figures and currency signs run together in one piece ("32,765  $") split into one
    cell per figure, each currency sign joined to the figure after it ("$ 6,779,511")."""
    out: list[list] = []
    pending = ""  # a currency sign waiting for its figure
    for x0, x1, text in cells:
        if _has_leaders(text):
            text = _LEADERS.sub("", text).strip()
        if not text:
            continue
        tokens = text.split()
        if _CURRENCY.match(tokens[-1]) and len(tokens) > 1 and not all(_figure_token(t) for t in tokens):
            pending, tokens = tokens[-1], tokens[:-1]  # "Net sales $": the sign belongs to the next figure
            text = " ".join(tokens)
            out.append([x0, x1, text])
            continue
        if text in ("%", "%)") and out and numeric(out[-1][2]):
            out[-1][1], out[-1][2] = x1, out[-1][2] + text  # "-3" "%": a percent sign set apart
            continue
        if not all(_figure_token(t) for t in tokens):
            if pending:
                out.append([x0, x0, pending])
                pending = ""
            out.append([x0, x1, text])
            continue
        step = (x1 - x0) / max(len(text), 1)
        pos = 0
        for t in tokens:  # figures, dashes and currency signs: one cell per figure
            at = text.index(t, pos)
            pos = at + len(t)
            if _CURRENCY.match(t):
                pending = t
                continue
            out.append([x0 + at * step, x0 + pos * step, f"{pending} {t}" if pending else t])
            pending = ""
    if pending:
        out.append([cells[-1][1], cells[-1][1], pending])
    return out or [[cells[0][0], cells[-1][1], ""]]


def _figure_token(t: str) -> bool:
    return bool(_CURRENCY.match(t) or _DASH.match(t)) or (numeric(t) and len(t) > 1)


# ------------------------------------------------------------------------------------------ figure tables


def _classify(row: list) -> tuple[str, list, list] | None:
    """("fig", label cells, value cells) for a row of figures (or dashes) after an optional label, ("years", ...)
    for a row whose figures are all years (a header), else None."""
    cells = row[6]
    if len(cells) == 1 and not numeric(cells[0][2]):
        return None
    first = next((k for k, c in enumerate(cells) if numeric(c[2]) or _DASH.match(c[2])), None)
    if first is None:
        return None
    values = cells[first:]
    if not all(numeric(c[2]) or _DASH.match(c[2]) or len(c[2]) <= _SHORT_VALUE for c in values):
        return None
    figures = [c for c in values if numeric(c[2])]
    if not figures and not first:
        return None
    kind = "years" if figures and all(_YEAR.match(c[2]) for c in figures) and len(figures) == len(values) else "fig"
    return kind, cells[:first], values


def _starts(entry: tuple[str, list, list] | None) -> bool:
    """A row a figure table can start at: figures after a label, or several figures."""
    return bool(entry) and entry[0] == "fig" and any(numeric(c[2]) for c in entry[2]) \
        and (bool(entry[1]) or len(entry[2]) >= 2)


def _columns(spans: list[tuple[float, float]], nrows: int) -> list[list[float]]:
    """Columns from the x-extents of the figures: where the figures of several rows overlap (aligned right, left
    or centred, a column's figures overlap those above and below). A figure whose extent was only estimated (one
    of several in one piece of text) may bridge two columns in one row: it does not join them; a figure that
    overlaps no column makes one of its own."""
    if not spans:
        return []
    lo = int(min(a for a, _b in spans))
    hi = int(max(b for _a, b in spans)) + 2
    delta = [0] * (hi - lo + 2)
    for a, b in spans:
        delta[int(a) - lo] += 1
        delta[int(b) - lo + 1] -= 1
    bridge = 0 if nrows < 4 else max(1, nrows // 5)  # rows that may cover the gap between two columns
    cols: list[list[float]] = []
    run = 0
    for x in range(hi - lo + 1):
        run += delta[x]
        if run > bridge:
            if cols and cols[-1][1] >= lo + x - 1:
                cols[-1][1] = lo + x
            else:
                cols.append([lo + x, lo + x])
    for a, b in sorted(spans):
        if not any(c[0] <= b and a <= c[1] for c in cols):
            cols.append([a, b])
            cols.sort()
    return cols


def _col_of(cols: list[list[float]], x0: float, x1: float) -> int:
    def score(k: int) -> float:
        a, b = cols[k]
        return min(b, x1) - max(a, x0) - (0 if b >= x0 and a <= x1 else abs((a + b) / 2 - (x0 + x1) / 2))
    return max(range(len(cols)), key=score)


def figure_tables(rs: list[list]) -> dict[int, tuple[str, int]]:
    """{first row index: (markdown, index after the table)} for the figure tables among a page's rows."""
    out: dict[int, tuple[str, int]] = {}
    if sum(1 for r in rs if len(r[6]) > 1) < 2:
        return out  # fewer than two rows of two cells: no table (most pages of prose)
    info = [_classify(r) for r in rs]
    floor, i = 0, 0
    while i < len(rs):
        if not _starts(info[i]):
            i += 1
            continue
        first = i
        while first - 1 >= floor and info[first - 1] and info[first - 1][0] == "fig" \
                and 0 <= rs[first][1] - rs[first - 1][3] <= 2.5 * (rs[first][4] or 10):
            first -= 1  # rows of dashes only ("Dividend yield | —% | —%") above the first figures
        body, end, inferred = _extend(rs, info, first)
        figs = [k for k in body if info[k]]
        cols = _columns([(c[0], c[1]) for k in figs for c in info[k][2]], len(figs))
        head, lead = _header(rs, info, first, floor, cols)
        if len(figs) < 3 and not (len(cols) >= 2 and (len(figs) == 2 or head)):
            i += 1  # too little to be a table: one row of figures without a header over them
            continue
        start = min([*head, *lead, first])
        for k, entry in inferred.items():
            info[k] = entry
        out[start] = (_render(rs, info, head, lead + body, cols), end)
        floor = i = end
    return out


def _value_left(info: list, ks: list[int]) -> float:
    return min(c[0] for k in ks if info[k] for c in info[k][2])


def _extend(rs: list[list], info: list, i: int) -> tuple[list[int], int, dict[int, tuple[str, list, list]]]:
    """The body rows of the table whose first figure row is i: figure rows, label rows between them (a caption
    such as "Other income (expense):" or the first line of a wrapped label) and the rows of short words in the
    figure columns that end it (`_word_values`; returned apart, as {row: entry}, to be read as figure rows once
    the table is taken). A row of years below starts the next table, and so do rows of words right over figures
    ("NEI Reasons | Prop. (%)": they head it), but not a row of figures marked with letters ("a 65-69 | 8bd |
    6bcd"), which is one of its rows wherever it stands."""
    size = rs[i][4] or 10
    body, pending, words = [i], [], []
    inferred: dict[int, tuple[str, list, list]] = {}
    marked: dict[int, tuple[str, list, list]] = {}
    left = _value_left(info, [i])
    heads = False  # the rows of words stand over figures
    j = i + 1
    while j < len(rs):
        r = rs[j]
        gap = r[1] - rs[j - 1][3]
        if gap > 2.5 * size or gap < -size or abs(r[4] - size) > 2.5:
            break
        if not info[j] and (entry := _word_values(r, info, body, left, size)):
            inferred[j] = entry
            if words or not all(_MARKED.match(c[2]) for c in entry[2]):
                words.append(j)
            else:  # figures marked with letters: a row of the table, wherever it stands (not a header)
                marked[j] = entry
                body += [*pending, j]
                pending = []
        elif words:
            heads = bool(info[j]) and info[j][0] == "fig"
            break
        elif info[j] and info[j][0] == "fig":
            body += [*pending, j]
            pending = []
            left = min(left, _value_left(info, [j]))
        elif not info[j] and len(pending) < 3 and (_label_only(r, left, size) or _wraps_into(rs, info, j)):
            pending.append(j)
        else:
            break
        j += 1
    if words and not heads:
        body += [*pending, *words]
        return body, body[-1] + 1, inferred
    return body, body[-1] + 1, marked


def _word_values(r: list, info: list, body: list[int], left: float, size: float) -> tuple[str, list, list] | None:
    """("fig", label cells, value cells) for a row that holds a label and, in the figure columns of the table's
    figure rows, short words instead of figures ("교통비 | 실비 | 실비 | 실비", "Shipping | Free | At cost"), else
    None: a row of the table that states no amount."""
    cells = r[6]
    if len(cells) < 2 or cells[0][1] > left + 0.5 * size:
        return None
    spans = [(c[0], c[1]) for k in body if info[k] for c in info[k][2]]
    if not all(len(c[2]) <= _SHORT_VALUE and any(a - size <= c[1] and c[0] <= b + size for a, b in spans)
               for c in cells[1:]):
        return None
    return "fig", cells[:1], cells[1:]


def _label_only(r: list, left: float, size: float) -> bool:
    return r[2] <= left + 0.5 * size and len(" ".join(c[2] for c in r[6])) <= 120


def _wraps_into(rs: list[list], info: list, j: int, depth: int = 0) -> bool:
    """A label too long for its column that continues on the next row, the row that carries its figures: the next
    label starts in lower case, or this line fills most of the labels' column and does not end a caption. A label
    of three lines, left of the figures, wraps into its middle line when that starts in lower case (a narrow
    labels' column holds short labels of their own that fill it; a note under a figure is no label)."""
    if j + 1 >= len(rs) or len(rs[j][6]) != 1 or rs[j + 1][1] - rs[j][3] >= (rs[j][4] or 10):
        return False
    r, nxt = rs[j], rs[j + 1]
    if not info[j + 1] and depth < 1 and nxt[6][0][2][:1].islower() and _wraps_into(rs, info, j + 1, depth + 1):
        return r[0] < _value_left(info, [j + 2])
    if not info[j + 1] or info[j + 1][0] != "fig" or not info[j + 1][1]:
        return False
    text = r[6][0][2].rstrip()
    full = r[2] - r[0] > 0.6 * (_value_left(info, [j + 1]) - r[0]) and not text.endswith(":")
    return info[j + 1][1][0][2][:1].islower() or full


def _center(c: list) -> float:
    return (c[0] + c[1]) / 2


def _over(c: list, left: float, size: float) -> bool:
    """A cell over the figure columns (not in the labels' column): centred over them, or reaching into them."""
    return _center(c) >= left - size or c[1] > left + size


def _header(rs: list[list], info: list, i: int, floor: int, cols: list[list[float]]) -> tuple[list[int], list[int]]:
    """(header rows, label rows between the header and row i) among the rows just before the table's first row
    i, above it on the page. Header rows hold years or short text over the figure columns ("Year ended December
    31,", "2015", "% Change"), in any order (a column's header may be a block of its own); label rows between
    them add to the label column's header, those below them are the table's first rows. Without a header only
    captions ("OPERATING ACTIVITIES:") join the table. A line alone that reaches from the labels into the
    columns is a title centred over the page, not a header."""
    size = rs[i][4] or 10
    left = cols[0][0]
    top = rs[i][1]  # the top of what was taken so far
    seen: list[tuple[int, bool]] = []  # (row, is a header row), nearest first
    k = i - 1
    while k >= floor and len(seen) < 16:
        r = rs[k]
        if r[3] > rs[i][1] + size or r[3] < top - 2.0 * size or any(len(c[2]) > 60 for c in r[6]):
            break  # below the table's first row, too far above, or prose
        # a row of years over the figures is the header even when the years sit left of right-aligned figures
        over = any(_over(c, left, size) for c in r[6]) or _year_row(info[k], len(cols))
        if over and len(r[6]) == 1 and _center(r[6][0]) < left - size:
            break  # one line from the labels into the columns: a title
        if over and (info[k] is None or info[k][0] == "years"):
            seen.append((k, True))
        elif not over and info[k] is None:
            seen.append((k, False))
        else:
            break
        top = min(top, r[1])
        k -= 1
    heads = [k for k, is_head in seen if is_head]
    if not heads:
        lead: list[int] = []
        for k, _h in seen:
            if not " ".join(c[2] for c in rs[k][6]).rstrip().endswith(":"):
                break
            lead.insert(0, k)
        return [], lead
    head_top = min(rs[k][1] for k in heads)
    head_bottom = max(rs[k][3] for k in heads)
    head = sorted((k for k, _h in seen if rs[k][1] >= head_top - 1 and rs[k][3] <= head_bottom + 1),
                  key=lambda k: (rs[k][1], rs[k][0]))
    lead = sorted((k for k, is_head in seen if not is_head and rs[k][1] > head_bottom), key=lambda k: rs[k][1])
    return head, lead


def _year_row(entry: tuple[str, list, list] | None, n: int) -> bool:
    """A header row of one year per figure column, and nothing else: "2019 | 2018 | 2017"."""
    return bool(entry) and entry[0] == "years" and not entry[1] and len(entry[2]) == n >= 2


def _render(rs: list[list], info: list, head: list[int], body: list[int], cols: list[list[float]]) -> str:
    n = len(cols)
    years = [c for k in head if _year_row(info[k], n) for c in info[k][2]]
    left = min([cols[0][0]] + [c[0] for c in years])
    middle, width = (left + cols[-1][1]) / 2, cols[-1][1] - left
    top = [""] * (n + 1)

    def put(m: int, text: str) -> None:
        top[m] = (top[m] + " " + text).strip()

    # the header's cells in lines as the eye reads them (a column's header may be a block of its own), top down
    cells = sorted(((rs[k][1], rs[k][3], rs[k][4] or 10, c) for k in head for c in rs[k][6]), key=lambda t: t[0])
    visual: list[list[tuple]] = []
    for t in cells:
        if visual and t[0] < max(u[1] for u in visual[-1]) - 0.3 * (t[1] - t[0]):
            visual[-1].append(t)
        else:
            visual.append([t])
    for vrow in visual:
        over = [t[3] for t in vrow if _over(t[3], left, t[2])]
        for t in vrow:
            if t[3] not in over:
                put(0, t[3][2])
        if len(over) == n and all(t[3] in years for t in vrow):
            for m, c in enumerate(sorted(over, key=lambda c: c[0])):  # one year per column, in order
                put(m + 1, c[2])
            continue
        for c in sorted(over, key=lambda c: c[0]):
            touched = [m for m in range(n) if min(cols[m][1], c[1]) - max(cols[m][0], c[0]) > 0]
            if len(over) == 1 and len(touched) >= 2 and abs(_center(c) - middle) <= 0.15 * width:
                put(0, c[2])  # one caption centred over all the columns: "Year ended December 31,"
            elif 2 <= len(touched) < n or len(touched) >= 2 and len(over) > 1:
                for m in touched:  # a group's header over some of the columns: each of them says it
                    put(m + 1, c[2])
            elif len(over) == 1 and n >= 2 and not _YEAR.match(c[2]):
                put(0, c[2])  # one caption over all the columns: "Year ended December 31,"
            else:
                put(_col_of(cols, c[0], c[1]) + 1, c[2])
    lines = ["| " + " | ".join(md_cell(c) for c in top) + " |", "|" + "---|" * (n + 1)]
    carry = ""
    for k in body:
        r = rs[k]
        if not info[k]:
            text = " ".join(c[2] for c in r[6])
            if k + 1 in body and _wraps_into(rs, info, k):
                carry = join_wrapped(carry, text)
                continue
            cells = [join_wrapped(carry, text)] + [""] * n
        else:
            labels, values = info[k][1], info[k][2]
            cells = [join_wrapped(carry, " ".join(c[2] for c in labels))] + [""] * n
            for c in values:
                m = _col_of(cols, c[0], c[1]) + 1
                cells[m] = (cells[m] + " " + c[2]).strip()
        carry = ""
        lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ aligned tables


def aligned_table(rs: list[list], i: int) -> tuple[str, int]:
    """A table made of rows[i:] when they line up in >= 2 columns over >= 2 rows: (markdown, next index),
    else ("", i). Rows whose cells miss the first column continue the previous row (wrapped cells)."""
    first = rs[i]
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
    while j < len(rs):
        x0, y0, _x1, y1, rsize, _bold, cells = rs[j]
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
                table[-1][k] = join_wrapped(table[-1][k], c[2])
        else:
            break
        bottom = y1
        j += 1
    if len(table) < 2:
        return "", i
    lines = ["| " + " | ".join(md_cell(c) for c in table[0]) + " |",
             "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in table[1:]]
    return "\n".join(lines), j
