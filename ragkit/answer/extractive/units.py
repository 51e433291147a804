"""A page as units the engine can quote: sentences, list items and table rows (read as `header: value`), each
with its heading path as context, the paragraph it belongs to, and whether it is a line that only titles what
follows (a PDF's section heading, a table of contents' entry). `qualifies(text)`: whether a sentence opens by
qualifying the one before it ("ただし、...", "However, ...")."""

from __future__ import annotations

import itertools
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
# a footnote's marks ("定める。[^1]", "[^1]: 本規則でいう…", as a DOCX's footnotes are written) are no words either
_MD_NOISE = re.compile(r"\*\*|__|`|<br\s*/?>|<!--.*?-->|\[\^[^\]\s]{1,12}\](?::\s*)?", re.IGNORECASE)
TITLE_CHARS = 80  # a line titling what follows is short; a longer line without a full stop is text
_SENTENCE_DONE = re.compile(r"[.!?。！？」』)）\]]\s*$")
_DOT_LEADER = re.compile(r"(?:\.\s?){4,}|…{2,}|‥{2,}|・{4,}|·{4,}")  # a table of contents' entry
# A sentence that opens by qualifying the one before it: an exception, a condition or a limit of what it says
# ("ただし、保育所に入所できない場合は、子が2歳に達するまで延長できる。" after "…子が1歳に達するまで…").
_QUALIFIER = re.compile(
    r"^(?:ただし|但し|ただ[、，,]|なお(?!さら)|もっとも[、，,]|この場合|"
    r"다만|단[,，]|이때|이\s?경우|그러나|"
    r"但是|但|不过|除非|"
    r"however\b|but\b|except\b|unless\b|provided\s+(?:that|however)\b|notwithstanding\b|nevertheless\b|"
    r"(?:this|these|that|the\s+foregoing|such)\s+(?:\w+\s+){0,2}(?:does|do|shall|will)\s+not\s+apply\b|"
    r"in\s+(?:that|this|such\s+a)\s+case\b|otherwise\b|if\s+not\b)",
    re.IGNORECASE)


def qualifies(text: str) -> bool:
    """Whether a sentence opens by qualifying the one before it (ただし, なお, 다만, However, Except, unless, This does
    not apply, ...): quoted without it, the sentence before may say the opposite of the rule for some readers."""
    return bool(_QUALIFIER.match(text.lstrip("「『\"'(（ ")))


# -- page units ----------------------------------------------------------------------------------------
@dataclass
class Unit:
    text: str  # what is quoted
    context: str  # heading path (and table header) it sits under
    rel: str
    rank: int  # page rank among candidates (0 = best)
    pos: int  # order within the page
    is_heading: bool = False
    para: int = -1  # the paragraph (or list item) it belongs to: sentences of one paragraph share it
    title: bool = False  # a line that only titles what follows, not a sentence (see _titles)
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
    paras = itertools.count()  # a new number per paragraph, list item, heading and table row
    lone: set[int] = set()  # paragraphs of one line (a title line stands on its own)
    bullets: set[int] = set()  # bulleted list items: an item of a list is never a title ("- 이사 날짜: 3월 14일")
    bullet = [False]  # the paragraph being read opened with a bullet

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
        number = next(paras)
        if len(para) == 1:
            lone.add(number)
        if bullet[0]:
            bullets.add(number)
            bullet[0] = False
        para.clear()
        for sent in T.split_sentences(joined):
            for piece in _windows(_clean(sent)):
                if piece:
                    units.append(Unit(piece, ctx(), rel, rank, len(units), para=number))

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
            units.append(Unit(h, ctx(), rel, rank, len(units), is_heading=True, para=next(paras)))
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
                units.append(Unit(row_text, context, rel, rank, len(units), para=next(paras)))
            continue
        header = None
        if _LIST_ITEM.match(line):
            flush()
            bullet[0] = bool(_BULLET.match(line))
        para.append(_BULLET.sub("", line).strip())
    flush()
    _titles(units, lone - bullets)
    return units


def _titles(units: list[Unit], lone: set[int]) -> None:
    """Mark the lines that only title what follows: a table of contents' entry (a dot leader), and a short line
    standing as a paragraph of its own, with no full stop, followed by a paragraph of sentences ("２.１ クラウド・
    バイ・デフォルト原則" above "政府情報システムは、…とする。": a PDF's headings are lines like this, not markdown
    headings). Quoted alone, such a line names what is asked and explains nothing."""
    contents = {u.para for u in units if not u.is_heading and len(u.text) <= TITLE_CHARS and _DOT_LEADER.search(u.text)}
    for i, u in enumerate(units):
        if u.para in contents:  # the entry and its page number ("２.１ … ........ 4" is cut at ". ")
            u.title = True
            continue
        if u.is_heading or len(u.text) > TITLE_CHARS:
            continue
        if u.para not in lone or _SENTENCE_DONE.search(u.text) or i + 1 >= len(units) or (
                i and units[i - 1].para == u.para):
            continue  # a sentence, the last line, or not the whole paragraph
        nxt = units[i + 1]
        if nxt.para != u.para and not nxt.is_heading and _SENTENCE_DONE.search(nxt.text):
            u.title = True
