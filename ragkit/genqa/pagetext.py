"""Reading a page's markdown for question generation: blocks of (heading, paragraphs, tables), and the
numbers and content terms of a text in Japanese, Korean and English."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ragkit.core.text import STOPWORDS, join_cjk_breaks, normalize

HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_BOLD_LINE = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
# a list item's mark, or a footnote's ("[^1]: ", a DOCX's footnote at the foot of its page): a paragraph of its own
_BULLET = re.compile(r"^\s*(?:[-*+•・·●■□◆◇○]|\d{1,2}[.)]|\[\^[^\]\s]{1,12}\]:)\s+")
_NOTE_MARK = re.compile(r"\[\^[^\]\s]{1,12}\]")  # a footnote's mark in the text: "定める。[^1]"
_INLINE_BULLET = re.compile(r"(?<=\S)\s+(?=[·•●▪]\s)")  # "... quarter. · Managers ..." on one line
_LEADER = re.compile(r"(\.{4,}|…{2,}|・{4,}|_{4,}|-{4,}|\s\.\s\.\s)")


def _clean_inline(s: str) -> str:
    s = re.sub(r"<!--.*?-->", " ", s)
    s = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", s)
    s = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"<br\s*/?>", " ", s, flags=re.I)
    s = re.sub(r"(\*\*|__|`)", "", s)
    s = re.sub(r"(?<![\w*])\*(?=\S)([^*]+)(?<=\S)\*", r"\1", s)
    s = _NOTE_MARK.sub("", _BULLET.sub("", s))
    return re.sub(r"\s+", " ", join_cjk_breaks(s)).strip()


def plain_text(body: str) -> str:
    lines = [_clean_inline(line.replace("|", " ")) for line in body.splitlines() if not _TABLE_SEP.match(line)]
    return "\n".join(line for line in lines if line)


@dataclass
class _Block:
    heading: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[list[list[str]]] = field(default_factory=list)
    steps: list[list[str]] = field(default_factory=list)  # numbered lists "1. ... 2. ..." (2+ items, in order)


_STEP = re.compile(r"^\s*(\d{1,2})[.)]\s+\S")


def parse_blocks(body: str, skip: set[str] | frozenset[str] = frozenset()) -> list[_Block]:
    """The page as (heading, paragraphs, tables) blocks; list items and lines are paragraphs of their own
    when they end a sentence, otherwise consecutive lines are joined. Lines whose shape is in `skip`
    (running headers and footers) are left out."""
    blocks = [_Block(heading="")]
    para: list[str] = []
    table: list[list[str]] = []
    run: list[str] = []  # the numbered list being read
    step_no = [0]  # the number of the paragraph being read when it opened with "N." (0: not a step)

    def flush_run() -> None:
        if len(run) >= 2:
            blocks[-1].steps.append(list(run))
        run.clear()

    def flush_para() -> None:
        if para:
            text = _clean_inline(" ".join(para))
            if text:
                blocks[-1].paragraphs.append(text)
                if step_no[0]:
                    if step_no[0] == 1:
                        flush_run()
                    if step_no[0] == len(run) + 1:
                        run.append(text)
                    else:
                        flush_run()
            para.clear()
        step_no[0] = 0

    def flush_table() -> None:
        if table:
            blocks[-1].tables.append([list(r) for r in table])
            table.clear()

    lines = [part for raw in body.splitlines() for part in _INLINE_BULLET.split(raw)
             if not (skip and line_shape(raw) in skip)]
    for line in lines:
        if "<!--" in line and "-->" in line and not _clean_inline(line):
            continue
        if line.strip().startswith("|"):
            flush_para()
            if _TABLE_SEP.match(line):
                continue
            cells = [_clean_inline(c) for c in line.strip().strip("|").split("|")]
            table.append(cells)
            continue
        flush_table()
        m = HEADING_LINE.match(line) or _BOLD_LINE.match(line)
        if m:
            flush_para()
            flush_run()
            heading = _clean_inline(m.group(1))
            blocks.append(_Block(heading=heading))
            if len(heading) > 60:  # slide text run together into one heading: it is content too
                blocks[-1].paragraphs.append(heading)
            continue
        if not line.strip():
            continue  # extractors put blank lines inside sentences; sentences end at punctuation instead
        if _BULLET.match(line):
            flush_para()
            s = _STEP.match(line)
            step_no[0] = int(s.group(1)) if s else 0
            if not s:
                flush_run()
        para.append(line.strip())
        if re.search(r"[.。!?！？:：]\s*$", line):
            flush_para()
    flush_para()
    flush_run()
    flush_table()
    return [b for b in blocks if b.heading or b.paragraphs or b.tables]


# -- terms --------------------------------------------------------------------------------------------
_UNITS = (
    "%|％|℃|°C|°F|時間|時|分間|分|秒|日間|日|年間|年度|年|か月|ヶ月|ヵ月|カ月|週間|月|回|個|枚|度|円|人|件|文字|桁|台|本|"
    "km|cm|mm|kg|ml|mL|L|W|V|Hz|dB|GB|MB|KB|TB|시간|시|분|초|일|년|개월|월|원|개|명|회|자|세|주|권|학점|점|층|호선|호|번|면"
)
_NUMBER = re.compile(
    rf"(?<![A-Za-z0-9.])(?:[$¥€£]\s?)?\d+(?:[.,:/]\d+)*(?:\s?(?:{_UNITS})|\s(?P<word>[A-Za-z][a-z]{{2,12}}))?"
)
_EN_UNITS = frozenset(
    """hour day minute second week month year character digit attempt time percent user item page copy
    person people meter metre mile inch foot feet degree kilogram gram liter litre volt watt byte""".split())
_JA_TERM = re.compile(r"[一-龥々〆ヵヶァ-ヴー]{2,}")
_KATAKANA_ONLY = re.compile(r"[ァ-ヴー]+")
_KANJI_ONLY = re.compile(r"[一-龥々〆]+")
_OKURIGANA = frozenset("ちきりいえめけれうくつるむぎびみわら")
_JA_UNIT_PREFIX = re.compile(r"^(?:年間|時間|日間|週間|ヶ月|ヵ月|カ月|年|月|日|時|分|秒|回|個|枚|度|円|人|件|台|本|割|倍|号|階)"
                             r"(?:以上|以内|以下|未満|程度|前|後|間|目)?")
_HANGUL_WORD = re.compile(r"[가-힣]{2,}")
_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'][A-Za-z0-9]+)*")
_KO_PARTICLES = sorted(
    "으로부터 에서는 으로는 에게서 까지의 에서의 에서도 께서 으로 에서 에게 까지 부터 보다 처럼 과의 와의 이나 이며 이고 하고 께 "
    "은 는 이 가 을 를 에 의 와 과 도 로 만".split(), key=len, reverse=True)
_KO_GENERIC = frozenset("동안 오전 오후 최대 최소 이내 이상 이하 경우 사용 이용 시간 관련 대한 통해 위해 다음 모든 각각 "
                        "해당 내용 기타 및 등".split())
_KO_VERBAL = re.compile(r"(?:(?<=..)(?:할|한|된)|릴|될|하여|으면|이며|면서|니다|세요|하여|해야|하는|되는|있는|없는|하면|되면|하고|했다|한다|된다|합니|입니|습니|하며|으며|"
                        r"지만|에는|해서|하기|되어|하지|않는|않고)$")  # verb forms, not terms
_JA_GENERIC = frozenset("未満 超過 前後 以降 以前 目安 全体 最初 最後 最大 最小 以内 程度 場合 使用 必要 方法 以下 以上 注意 確認 可能 対応 各種 一部 全部 全て 当社 本書 本製品 製品 "
                        "内容 記載 説明 関連 目的 対象 実施 状態 時間 次の 下記 上記 項目 部分 手順 以外".split())
_EN_GENERIC = STOPWORDS | frozenset(
    """must shall may might all any each other such also used use using only more most will within without
    including include includes e.g i.e etc page section document documents following see refer per via
    one two three new make made need needs required require requires well like just your you our we us
    his her him she he they them if else after before upon under over between during very much many
    some most same own both either neither every may also while where therefore however least
    last first next able none nor almost whether quite rather among along across toward towards sure make makes take takes give gives keep keeps kept get gets got set sets put
    puts go goes come comes see sees seen say says said know known want wants look looks find finds
    found tell tells ask asks work works seem seems feel feels try tries leave leaves call calls good
    better best bad worse high low large small big little long short old young early late true false
    possible certain clear full whole different similar several various usually always never often
    once twice back away again still even already yet ever soon now here today""".split())


def _ko_stem(word: str) -> str:
    for p in _KO_PARTICLES:
        if word.endswith(p) and len(word) - len(p) >= 1:
            return word[: -len(p)]
    return word


def _unit_like(word: str) -> bool:
    """"days", "hours", "characters": a unit or a counted plural noun after a number (not "5 failed")."""
    single = word[:-1] if word.endswith("s") else word
    return single in _EN_UNITS or (len(word) >= 5 and word.endswith("s") and not word.endswith("ss"))


def numbers_in(text: str) -> list[str]:
    """Numbers with their unit as written ("540L", "12 characters", "90 days", "3월"); a bare one-digit
    number (list numbering) is left out."""
    out = []
    for m in _NUMBER.finditer(text):
        s = m.group(0).strip()
        word = (m.group("word") or "").lower()
        if word and (word in _EN_GENERIC or not _unit_like(word)):
            s = s[: m.start("word") - m.start()].strip()
        if re.fullmatch(r"\d", s):
            continue
        if s not in out:
            out.append(s)
    return out


def terms_in(text: str, phrase_ok: Callable[[str], bool] | None = None) -> list[str]:
    """Content terms in order of appearance: katakana words, kanji compounds, Korean word stems, Latin
    words (and two-word English phrases), model codes. No numbers, no function words."""
    found: list[tuple[int, str]] = []
    for m in _JA_TERM.finditer(text):  # kanji/katakana runs: "自動製氷機", "給水タンク", "ドアパッキン"
        t = m.group(0).strip("ー")
        if m.start() and text[m.start() - 1].isdigit():  # "10日全国発売" -> "全国発売", "14日以内" -> ""
            t = _JA_UNIT_PREFIX.sub("", t)
        nxt = text[m.end(): m.end() + 1]
        if nxt and nxt in _OKURIGANA and _KANJI_ONLY.fullmatch(t) and len(t) >= 3:
            t = t[:-1]  # "製造打ち切り": the last kanji is a verb stem, "製造" is the term
        if len(t) >= 2 and t not in _JA_GENERIC and not (len(t) == 2 and _KATAKANA_ONLY.fullmatch(t)):
            found.append((m.start(), t))
    for m in _HANGUL_WORD.finditer(text):
        w = m.group(0)
        if m.start() and text[m.start() - 1].isdigit():
            continue  # "9시부터", "14일이며": the unit of a number, not a term
        if _KO_VERBAL.search(w):
            continue
        stem = _ko_stem(w)
        if len(stem) >= 2 and stem not in _KO_GENERIC:
            found.append((m.start(), stem))
    latin = [(m.start(), m.group(0)) for m in _LATIN.finditer(text)]
    prev: tuple[int, str] | None = None
    for start, w in latin:
        low = w.lower()
        if low in _EN_GENERIC or len(w) < 3:
            prev = None
            continue
        found.append((start, w))
        if prev is not None and re.fullmatch(r"\s+", text[prev[0] + len(prev[1]): start]):
            phrase = f"{prev[1]} {w}"  # "security incident", "Access Control"; not "teams complete"
            if (prev[1][:1].isupper() and w[:1].isupper()) or (phrase_ok is not None and phrase_ok(phrase)):
                found.append((prev[0], phrase))
        prev = (start, w)
    out: list[str] = []
    seen: set[str] = set()
    for _, t in sorted(found, key=lambda x: x[0]):
        k = t.casefold()
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out


def is_boilerplate(sentence: str) -> bool:
    s = sentence.strip()
    return bool(_LEADER.search(s)) or len(s) < 8 or bool(re.fullmatch(r"[\d\s/\-–.|()]+", s)) \
        or bool(re.search(r"\b(?:page|p\.)\s*\d+\s*(?:of|/)\s*\d+\b", s, re.I))


def line_shape(sentence: str) -> str:
    return re.sub(r"\d+", "#", normalize(sentence)).strip()
