"""A page as units the engine can quote: sentences, list items and table rows (read as `header: value`), each
with its heading path as context."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragkit.answer.extractive.terms import HAN, HIRA, KATA
from ragkit.core import text as T
from ragkit.core.pagefile import NO_TEXT_MARKER

MAX_UNIT_CHARS = 400  # longer sentences are cut into windows


_WRAP_END = re.compile(f"[{HAN}{HIRA}{KATA}]$")
_WRAP_START = re.compile(f"[{HAN}{HIRA}{KATA}]")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*([-*+•·・●○■□◆◇▪▶►※]|\d{1,3}[.)）]|[①-⑳]|\(\d{1,3}\))\s*")
_BULLET = re.compile(r"^\s*(?:[-*+]\s+|[•·・●○■□◆◇▪▶►]\s*)")  # a bullet is dropped from the quote; numbers stay
_MD_NOISE = re.compile(r"\*\*|__|`|<br\s*/?>|<!--.*?-->", re.IGNORECASE)


# -- page units ----------------------------------------------------------------------------------------
@dataclass
class Unit:
    text: str  # what is quoted
    context: str  # heading path (and table header) it sits under
    rel: str
    rank: int  # page rank among candidates (0 = best)
    pos: int  # order within the page
    is_heading: bool = False
    terms: set[str] = field(default_factory=set)
    ctx_terms: set[str] = field(default_factory=set)
    score: float = 0.0
    coverage: float = 0.0


def _clean(s: str) -> str:
    return re.sub(r"\s+", " ", _MD_NOISE.sub("", s)).strip()


def _cells(row: str) -> list[str]:
    return [_clean(c) for c in row.strip().strip("|").split("|")]


def _windows(sentence: str) -> list[str]:
    """Cut an over-long 'sentence' (a run-on extraction without punctuation) at spaces or commas."""
    if len(sentence) <= MAX_UNIT_CHARS:
        return [sentence]
    out, rest = [], sentence
    while len(rest) > MAX_UNIT_CHARS:
        cut = max(rest.rfind(" ", 0, MAX_UNIT_CHARS), rest.rfind("、", 0, MAX_UNIT_CHARS),
                  rest.rfind(",", 0, MAX_UNIT_CHARS))
        cut = cut if cut > MAX_UNIT_CHARS // 2 else MAX_UNIT_CHARS
        out.append(rest[:cut].strip())
        rest = rest[cut:].strip(" 、,")
    if rest:
        out.append(rest)
    return out


def page_units(body: str, rel: str, rank: int, title: str) -> list[Unit]:
    """Sentences, list items and table rows of a page body, each with its heading path as context."""
    units: list[Unit] = []
    headings: list[tuple[int, str]] = []
    para: list[str] = []
    header: list[str] | None = None

    def ctx() -> str:
        return " / ".join([title] + [h for _, h in headings])

    def flush() -> None:
        if not para:
            return
        joined = para[0]
        for line in para[1:]:
            # a line break inside Japanese/Chinese text is a wrap, not a space (Korean keeps its spaces)
            glue = "" if _WRAP_END.search(joined) and _WRAP_START.match(line) else " "
            joined += glue + line
        para.clear()
        for sent in T.split_sentences(joined):
            for piece in _windows(_clean(sent)):
                if piece:
                    units.append(Unit(piece, ctx(), rel, rank, len(units)))

    for line in body.splitlines():
        if not line.strip() or line.strip() == NO_TEXT_MARKER:
            flush()
            header = None
            continue
        m = _HEADING.match(line)
        if m:
            flush()
            header = None
            level, h = len(m.group(1)), _clean(m.group(2))
            headings[:] = [x for x in headings if x[0] < level]
            units.append(Unit(h, ctx(), rel, rank, len(units), is_heading=True))
            headings.append((level, h))
            continue
        if _TABLE_ROW.match(line):
            flush()
            if _TABLE_SEP.match(line):
                continue
            cells = _cells(line)
            if header is None:
                header = cells
                row_text = " | ".join(c for c in cells if c)
                context = ctx()
            else:
                pairs = [f"{h}: {c}" if h and h != c else c for h, c in zip(header, cells, strict=False) if c]
                pairs += [c for c in cells[len(header):] if c]
                row_text = "; ".join(pairs)
                context = ctx() + " / " + " ".join(header)
            if row_text:
                units.append(Unit(row_text, context, rel, rank, len(units)))
            continue
        header = None
        if _LIST_ITEM.match(line):
            flush()
        para.append(_BULLET.sub("", line).strip())
    flush()
    return units
