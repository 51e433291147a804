"""The lexical checklist judge (offline, deterministic, CJK-aware): does the answer carry each key point's
content units (stemmed words, numbers, CJK bigrams), and which of its sentences match no key point."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragkit.core.models import Usage
from ragkit.core.text import CJK_RE, STOPWORDS, is_refusal, normalize, split_sentences, tokenize

COVER_THRESHOLD = 0.6
SENTENCE_MATCH = 0.5
MIN_POINT_UNITS = 2
HIRAGANA_BIGRAM_WEIGHT = 0.25
EVIDENCE_CHARS = 200


@dataclass
class ChecklistVerdict:
    covered: list[bool]
    evidence: list[str]
    extra_points: list[str]
    reason: str
    usage: Usage = field(default_factory=Usage)
    judge: str = "lexical"  # "llm" | "lexical"
    items: list[str] = field(default_factory=list)

    @property
    def n_covered(self) -> int:
        return sum(1 for c in self.covered if c)

    @property
    def n_extra(self) -> int:
        return len(self.extra_points)

    @property
    def missed(self) -> list[str]:
        return [item for item, c in zip(self.items, self.covered, strict=False) if not c]


# -- text cleaning shared by the lexical judge -----------------------------------------------------------
_DOC_PATH = re.compile(r"[^\s()\[\]<>{}「」『』（）【】\"'`,;、。]+\.(?:md|pdf|docx?|pptx?|txt)\b", re.I)
_EMPTY_BRACKETS = re.compile(r"[\[(（【]\s*(?:(?:p|page|pages|pp)\.?\s*[\d\-–, ]*|[\d, ]*)\s*[\])）】]", re.I)
_SOURCES_LINE = re.compile(
    r"^\s*(?:[#*>\-\s]*)(?:sources?|references?|citations?|retrieved(?: files)?|出典|参照|参考(?:資料)?|"
    r"根拠|来源|출처|참고(?: 자료)?|근거)\s*[:：]", re.I)
# the offline engine's notice (any wording that says the answer came without a model)
_NOTICE = re.compile(
    r"\boffline\b.*\b(?:provider|engine|mode|extractive|model|key)\b|\bextractive\b.*\b(?:offline|no model)\b|"
    r"\bno (?:llm|model)\b|オフライン|오프라인", re.I)
# a bracketed notice "[offline provider: extractive answer]" or a leading "Offline answer (no model): " is cut
# out of its sentence, which may still carry content
_NOTICE_BRACKET = re.compile(r"[\[(（【][^\])）】\n]*(?:offline|オフライン|오프라인)[^\])）】\n]*[\])）】]", re.I)
_NOTICE_PREFIX = re.compile(r"^\W*(?:offline|オフライン|오프라인)[^:：\n]{0,80}[:：]\s*", re.I)
# page references ("see page 8", "p. 12", "8ページ", "12페이지") are citations, not key points
_PAGE_REF = re.compile(r"\b(?:see\s+)?(?:pages?|pp?\.)\s*\d+(?:\s*[-–,]\s*\d+)*|\d+\s*(?:ページ|頁|페이지|쪽)", re.I)
_MARKUP = re.compile(r"^\s*(?:[#>]+|[-*•・●]|\d+[.)])\s*|\*\*|__|`")


def _clean_lines(answer: str) -> list[str]:
    """Answer sentences without citations, sources lists, notices, refusals and markdown decoration."""
    out: list[str] = []
    skipping_sources = False
    for line in (answer or "").splitlines():
        if _SOURCES_LINE.match(line):
            skipping_sources = True  # a "Sources:" block runs to the next blank line
            continue
        if skipping_sources:
            if line.strip():
                continue
            skipping_sources = False
        line = _NOTICE_BRACKET.sub(" ", line)
        for sentence in split_sentences(line):
            sentence = _NOTICE_PREFIX.sub("", sentence)
            if _NOTICE.search(sentence) or is_refusal(sentence):
                continue
            s = _DOC_PATH.sub(" ", sentence)
            s = _EMPTY_BRACKETS.sub(" ", s)
            s = _MARKUP.sub(" ", s).strip(" \t-–—:：")
            if s and any(ch.isalnum() for ch in s):
                out.append(" ".join(s.split()))
    return out


def answer_text_for_judging(answer: str) -> str:
    """The answer as the lexical judge reads it (citations, sources lists, notices removed)."""
    return "\n".join(_clean_lines(answer))


# -- lexical units -------------------------------------------------------------------------------------
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_HIRA = re.compile("[\u3040-\u309f]")


def _numbers(norm: str) -> list[str]:
    out = []
    for m in _NUMBER.finditer(norm):
        s = m.group(0)
        if _THOUSANDS.fullmatch(s):
            s = s.replace(",", "")
        for part in s.split(","):  # "1,2" (not thousands) is two numbers
            if "." in part:
                part = part.rstrip("0").rstrip(".") or "0"
            part = part.lstrip("0") or "0"
            out.append(part)
    return out


def _stem(word: str) -> str:
    # Bolder than text.stem on purpose: judging asks whether an answer says the same thing, so "stored" must
    # meet "store"; search measured worse recall with the final "e" dropped, so it keeps it.
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word.endswith("ss")):
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


# text.normalize joins whitespace between CJK characters (a Japanese line-wrap artefact); Korean separates
# words with spaces, so keep those as a non-space separator or "필터를 매달" would make the bigram "를매".
_KO_SPACE = re.compile("(?<=[\uac00-\ud7af])[ \t\u3000]+(?=[\uac00-\ud7af])")


def _judge_normalize(text: str) -> str:
    """normalize(), with Korean word spaces kept as U+2581 (a non-word character, so tokenize splits there;
    tokenize normalises again and would join a plain space)."""
    return normalize(_KO_SPACE.sub("\u2581", text))


@dataclass
class _Bag:
    """The lexical content of a text: weighted units, numbers and CJK content characters."""

    units: dict[str, float]
    numbers: set[str]
    chars: set[str]
    all_chars: set[str]

    @classmethod
    def of(cls, text: str) -> _Bag:
        norm = _judge_normalize(text)
        units: dict[str, float] = {}
        for tok in tokenize(norm, drop_stopwords=True):
            if CJK_RE.match(tok):
                hira = len(_HIRA.findall(tok))
                units["c:" + tok] = HIRAGANA_BIGRAM_WEIGHT if hira == len(tok) and len(tok) > 1 else 1.0
            elif tok.isdigit():
                continue  # numbers are taken whole below ("1,000", "2.5")
            elif len(tok) >= 2 and tok not in STOPWORDS and not any(ch.isdigit() for ch in tok[:1]):
                units["w:" + _stem(tok)] = 1.0
            elif len(tok) >= 2 and any(ch.isdigit() for ch in tok):
                units["w:" + tok] = 1.0  # model numbers like "54xg"
        numbers = set(_numbers(norm))
        for n in numbers:
            units["n:" + n] = 1.0
        all_chars = {ch for ch in norm if CJK_RE.match(ch)}
        content = {ch for ch in all_chars if not _HIRA.match(ch)}
        return cls(units=units, numbers=numbers, chars=content or all_chars, all_chars=all_chars)

    @property
    def size(self) -> float:
        return sum(self.units.values())


def _score(item: _Bag, target: _Bag) -> float:
    """How much of `item` the target text contains, in [0, 1] (see the module docstring)."""
    total = item.size
    if total == 0 and not item.chars:
        return 0.0
    unit_recall = sum(w for u, w in item.units.items() if u in target.units) / total if total else 0.0
    if item.chars:
        char_recall = len(item.chars & target.all_chars) / len(item.chars)
        return (unit_recall + char_recall) / 2 if total else char_recall
    return unit_recall


def _covers(item: _Bag, target: _Bag) -> bool:
    return item.numbers <= target.numbers and _score(item, target) >= COVER_THRESHOLD


def lexical_checklist(answer: str, items: list[str]) -> ChecklistVerdict:
    """Deterministic CJK-aware checklist judge (thresholds in the module docstring)."""
    sentences = _clean_lines(answer)
    whole = _Bag.of("\n".join(sentences))
    sentence_bags = [_Bag.of(s) for s in sentences]
    item_bags = [_Bag.of(it) for it in items]
    covered: list[bool] = []
    evidence: list[str] = []
    for bag in item_bags:
        ok = bool(bag.units or bag.chars) and _covers(bag, whole)
        covered.append(ok)
        best = ""
        if ok and sentences:
            i = max(range(len(sentences)), key=lambda k: _score(bag, sentence_bags[k]))
            best = sentences[i][:EVIDENCE_CHARS]
        evidence.append(best)
    extra: list[str] = []
    for s in sentences:
        sb = _Bag.of(_PAGE_REF.sub(" ", s))
        if sb.size < MIN_POINT_UNITS and len(sb.chars) < 2 * MIN_POINT_UNITS:
            continue  # too small to be a key point ("Yes.", "See page 8.")
        if any(_score(ib, sb) >= SENTENCE_MATCH or _score(sb, ib) >= SENTENCE_MATCH for ib in item_bags):
            continue
        point = s[:EVIDENCE_CHARS]
        if point not in extra:
            extra.append(point)
    n = sum(covered)
    reason = f"lexical: {n}/{len(items)} items covered, {len(extra)} extra point(s)"
    return ChecklistVerdict(covered=covered, evidence=evidence, extra_points=extra, reason=reason,
                            usage=Usage(), judge="lexical", items=list(items))
