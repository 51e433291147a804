"""What the margins of a PDF's pages carry, found by comparing the pages of one document: printed page numbers
(folios) and running headers and footers. Running lines leave the page body; the converter keeps them in the
front matter (`running`)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

# A folio: the page's printed number, alone in the top or bottom band ("12", "- 12 -", "Page 12", "12 / 40",
# "12ページ", "p.12", "12쪽"), or at one end of a running header or footer ("12 | Annual Report",
# "Case 21-13199 Filed 01/05/2022 Page: 12 of 17").
_FOLIO = re.compile(r"^\s*(?:page|p\.|pg\.?|ページ|페이지)?\s*[-–—(\[]?\s*(\d{1,4})\s*[-–—)\]]?\s*"
                    r"(?:/\s*\d{1,4}|ページ|頁|페이지|쪽)?\s*$", re.IGNORECASE)
_FOLIO_EDGE = re.compile(r"^\s*(\d{1,4})\s*[|│·•]\s*\S.*$|^.*\S\s*[|│·•]\s*(\d{1,4})\s*$"
                         r"|^.*\bpage\s*:?\s*(\d{1,4})(?:\s*(?:of|/)\s*\d{1,4})?\s*$", re.IGNORECASE)
_FOLIO_BAND = 0.12  # share of the page height at the top and at the bottom where folios are looked for
_FOLIO_GAP = 4  # pages between two agreeing folios that take their numbering (chapter openers, full-page art)
EDGE_GROUPS = 4  # lines (on one baseline) looked at from each end of a page for running lines and folios
MIN_PAGES = 3  # a line at the same end of this many pages, in the same type size, is a running line
_MAX_PIECES = 2  # a baseline with more pieces besides the page number is a table's header row, not a running line
_GAP = 2.0  # most space (in type sizes) between two running lines at one edge
_EDGE_BAND = 0.15  # share of the page height at the top and at the bottom where running lines sit
_DIGITS = re.compile(r"\d+")
_LETTER = re.compile(r"[^\W\d_]")
_PREFIXED = re.compile(r"^\s*([A-Z]{1,2}) ?[-–] ?(\d{1,4})\s*$")  # "F-25": a page of the financial statements
_FIRST_NUMBER = re.compile(r"^\s*(\d{1,4})(?=\s|$)")
_LAST_NUMBER = re.compile(r"(?:^|[\s\-–—])(\d{1,4})\s*$")  # "FORM 10-K 17", "F-25"; not "0.3"


def _folio_number(text: str) -> int | None:
    text = unicodedata.normalize("NFKC", text)  # full-width digits and brackets: "（１９）"
    m = _FOLIO.match(text) or _FOLIO_EDGE.match(text)
    return int(next(g for g in m.groups() if g)) if m else None


def band_folios(lines: list[list], height: float) -> set[int]:
    """Numbers that could be the page's printed number: standing alone, or at one end of a header or footer, in
    the top or bottom band of the page."""
    out: set[int] = set()
    for ln in lines:
        if ln[4] < _FOLIO_BAND * height or ln[2] > (1 - _FOLIO_BAND) * height:
            n = _folio_number(ln[7])
            if n is not None:
                out.add(n)
    return out


def printed_numbers(candidates: list[set[int]]) -> list[str]:
    """The printed page number of each page ("" when unknown), from each page's folio candidates.

    A candidate counts only when a page one or two away carries the number that follows from it, so a year
    or a figure number in a footer does not; of several, the one most of those pages agree with (a chapter
    number in a running header changes once per chapter), then the numbering most pages follow. Pages in a short
    gap between two agreeing folios take the numbering they share. Several runs are fine (front matter, then the body from 1)."""
    n = len(candidates)
    offset: list[int | None] = [None] * n
    agreeing = [[(sum(1 for d in (-2, -1, 1, 2) if 0 <= i + d < n and v + d in candidates[i + d]), v)
                 for v in cands] for i, cands in enumerate(candidates)]
    runs = Counter(i - v for i, pairs in enumerate(agreeing) for a, v in pairs if a)  # pages per numbering
    for i, pairs in enumerate(agreeing):
        # the number most neighbours agree with (a chapter number agrees with one), then the numbering most
        # pages follow
        best = max(pairs, key=lambda p: (p[0], runs[i - p[1]], -p[1]), default=(0, 0))
        if best[0]:
            offset[i] = i - best[1]
    known = [i for i in range(n) if offset[i] is not None]
    for a, b in zip(known, known[1:], strict=False):
        if 1 < b - a <= _FOLIO_GAP + 1 and offset[a] == offset[b]:
            for i in range(a + 1, b):
                offset[i] = offset[a]
    return [str(i - o) if o is not None and i - o >= 1 else "" for i, o in enumerate(offset)]


# ------------------------------------------------------------------------------------------ running lines


def _baselines(lines: list[list]) -> list[list[int]]:
    """Indices of a page's line records grouped by baseline, top to bottom."""
    order = sorted(range(len(lines)), key=lambda k: (lines[k][4], lines[k][1]))
    groups: list[list[int]] = []
    bottom = -1e9
    for k in order:
        ln = lines[k]
        if groups and ln[4] - bottom < 0.5 * max(ln[4] - ln[2], 1.0):  # overlaps the group's line
            groups[-1].append(k)
            bottom = max(bottom, ln[4])
        else:
            groups.append([k])
            bottom = ln[4]
    return groups


def line_key(text: str) -> str:
    """What stays the same when a running line repeats: case, spacing and numbers ignored; a line without letters
    ("6/3/2020", "* * *") must repeat exactly."""
    t = " ".join((text if text.isascii() else unicodedata.normalize("NFKC", text)).split())
    k = _DIGITS.sub("#", t.casefold())
    return k if _LETTER.search(k) else ("=" + t if len(t) > 1 else "")


class Margins:
    """The pages' edges, compared across one document: per page the baselines at each end, the keys that repeat
    there, and the folios they carry."""

    def __init__(self, pages: list[list[list]], heights: list[float]):
        self.pages = pages
        self.heights = heights
        self.edges: list[tuple[list[list[int]], list[list[int]]]] = []  # per page: (top groups, bottom groups)
        self.keys: list[dict[int, tuple[str, float]]] = []  # per page: the key of each line at an edge
        self.upright: list[list[int]] = []  # per page: lines set vertically
        count: Counter = Counter()
        middles: list[list[int]] = []
        for lines in pages:
            groups = _baselines(lines)
            top, bottom = groups[:EDGE_GROUPS], groups[::-1][:EDGE_GROUPS]
            self.edges.append((top, bottom))
            middles.append([k for g in groups[2:-2] for k in g])
            keys = {k: (line_key(lines[k][7]), lines[k][5]) for gs in (top, bottom) for g in gs for k in g}
            upright = [k for k, ln in enumerate(lines) if ln[4] - ln[2] > 3 * max(ln[3] - ln[1], 1) > 0
                       and len(ln[7]) > 3]  # set vertically along a margin: "Downloaded from ..."
            keys.update((k, (line_key(lines[k][7]), lines[k][5])) for k in upright)
            self.keys.append(keys)
            self.upright.append(upright)
            seen = {(end, keys[k]) for end, gs in (("T", top), ("B", bottom)) for g in gs for k in g}
            seen.update(("V", keys[k]) for k in upright)
            count.update(s for s in seen if s[1][0])
        # words that head or foot pages but stand inside as often, away from the page's edges ("Parameters" in
        # an API reference), are the text's own
        contested = {s[1] for s, c in count.items() if c >= MIN_PAGES}
        inside: Counter = Counter()
        if contested:
            shortest = min(len(k[0]) for k in contested) - 4
            longest = max(len(k[0]) for k in contested) + 8
            sizes = {k[1] for k in contested}
            for lines, middle, h in zip(pages, middles, heights, strict=True):
                inside.update({key for k in middle if lines[k][5] in sizes and shortest <= len(lines[k][7]) <= longest
                               and _EDGE_BAND * h < lines[k][2] and lines[k][4] < (1 - _EDGE_BAND) * h
                               and (key := (line_key(lines[k][7]), lines[k][5])) in contested})
        self.repeated = {s for s, c in count.items() if c >= MIN_PAGES and inside[s[1]] < c}
        self.numbers: list[dict[int, int | None]] = [  # per page: the folio each line at an edge reads as
            {k: _folio_number(lines[k][7]) for k in keys} for lines, keys in zip(pages, self.keys, strict=True)]

    def folio_candidates(self) -> list[set[int]]:
        """Per page: numbers in the top or bottom band, and numbers standing alone or at one end of the lines at
        either end of the page (a footer that follows the text, half-way down a short page), and numbers at
        one end of a running line ("2021 FORM 10-K 17")."""
        out = []
        for i, (lines, h, (top, bottom)) in enumerate(zip(self.pages, self.heights, self.edges, strict=True)):
            numbers = self.numbers[i]
            cands = {n for n in numbers.values() if n is not None}
            cands |= band_folios([ln for k, ln in enumerate(lines) if k not in numbers], h)
            for end, groups in (("T", top), ("B", bottom)):
                for g in groups:
                    for k in g:
                        cands.update(self._carried(i, end, k))
            out.append(cands)
        return out

    def _carried(self, i: int, end: str, k: int) -> tuple[int, ...]:
        """The numbers line k of page i may print as the page number: alone, at one end of a header or footer,
        or at either end of a running line ("2021 FORM 10-K 17", "F-25")."""
        n = self.numbers[i][k]
        if n is not None:
            return (n,)
        if (end, self.keys[i][k]) in self.repeated:
            text = self.pages[i][k][7]
            return tuple(int(m[1]) for m in (_FIRST_NUMBER.search(text), _LAST_NUMBER.search(text)) if m)
        return ()

    def running(self, printed: list[str]) -> tuple[list[list[list]], list[list[str]], set[tuple[str, float]]]:
        """(each page's lines without its running lines, each page's running lines, the keys of the lines taken).

        Lines set vertically that repeat go too. A page that would be left with nothing keeps its lines."""
        kept, running = [], []
        taken: set[tuple[str, float]] = set()
        for i, (lines, (top, bottom)) in enumerate(zip(self.pages, self.edges, strict=True)):
            drop: set[int] = {k for k in self.upright[i] if ("V", self.keys[i][k]) in self.repeated}
            for end, groups in (("T", top), ("B", bottom)):
                drop.update(self._walk(i, end, groups, _int(printed[i])))
            if not drop or len(drop) == len(lines):
                kept.append(lines)
                running.append([])
                continue
            kept.append([ln for k, ln in enumerate(lines) if k not in drop])
            taken.update(self.keys[i][k] for k in drop)
            shown = [k for g in top for k in g if k in drop] + [k for g in bottom[::-1] for k in g if k in drop] \
                + [k for k in self.upright[i] if k in drop]
            texts = []
            for k in shown:
                t = " ".join(lines[k][7].split())
                t_nfkc = unicodedata.normalize("NFKC", t)
                bare = _FOLIO.match(t_nfkc) or _PREFIXED.match(t_nfkc)  # the page number: printed_page says it
                if t and t not in texts and not (bare and int(bare.groups()[-1]) == _int(printed[i])):
                    texts.append(t)
            running.append(texts)
        return kept, running, taken

    def labels(self, printed: list[str]) -> list[str]:
        """The printed numbers with the prefix a page's header or footer gives them: "F-25" for 25."""
        out = list(printed)
        for i, (lines, numbers) in enumerate(zip(self.pages, self.numbers, strict=True)):
            v = _int(printed[i])
            for k in numbers if v is not None else ():
                m = _PREFIXED.match(unicodedata.normalize("NFKC", lines[k][7]))
                if m and int(m[2]) == v:
                    out[i] = f"{m[1]}-{v}"
                    break
        return out

    def _walk(self, i: int, end: str, groups: list[list[int]], number: int | None) -> list[int]:
        """The running lines at one end of page i: baselines from the edge inwards while every piece on them
        repeats at that end of other pages or is the page's printed number, within the page's margin band (or
        below a page number that follows the text), close together, and not a table's header row."""
        lines, keys = self.pages[i], self.keys[i]
        band = _EDGE_BAND * self.heights[i]
        out: list[int] = []
        edge = None  # the inner edge of the running lines taken so far
        anchored = False  # a page number was taken: a footer may follow the text up the page
        for n, g in enumerate(groups):
            folio = [number is not None and number in self._carried(i, end, k) for k in g]
            if not all(f or (end, keys[k]) in self.repeated for k, f in zip(g, folio, strict=True)):
                break
            top, bottom = min(lines[k][2] for k in g), max(lines[k][4] for k in g)
            size = max(lines[k][5] for k in g)
            if not anchored and not any(folio) and (bottom > band if end == "T" else top < self.heights[i] - band):
                break
            near, far = (top, bottom) if end == "T" else (bottom, top)
            if edge is not None and abs(near - edge) > _GAP * size:
                break  # running lines sit together at the page's edge: this one is the text's
            pieces = [k for k, f in zip(g, folio, strict=True) if not f]
            if len(pieces) > _MAX_PIECES or len(pieces) >= 2 and n + 1 < len(groups) \
                    and _aligned(lines, pieces, groups[n + 1]):
                break  # a table's header row, repeated on every page of the table
            anchored = anchored or any(folio)
            edge = far
            out += g
        return out


def _aligned(lines: list[list], pieces: list[int], nxt: list[int]) -> bool:
    """Whether the next baseline starts pieces where these start: a header row over its table's columns."""
    starts = [lines[k][1] for k in pieces]
    return sum(1 for k in nxt if any(abs(lines[k][1] - x) <= 3 for x in starts)) >= 2


def _int(s: str) -> int | None:
    return int(s) if s.isdigit() else None
