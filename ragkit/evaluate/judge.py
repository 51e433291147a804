"""Judges: the checklist judge (LLM, and a CJK-aware lexical one for offline), the LLM-as-judge rubric of
seed 002, and seed 004's Contain-Match and LLM-Accuracy.

INTERFACE (owned by the metrics work; batch relies on it):

    judge_checklist(provider, question: str, answer: str, items: list[str]) -> ChecklistVerdict
        # provider.is_offline -> lexical_checklist; LLM: JSON {items: [{covered, evidence}], extra_points}
        # retried on invalid JSON (llm.chat_json), then RagError
    lexical_checklist(answer: str, items: list[str]) -> ChecklistVerdict
    judge_rubric(provider, *, question, expected, answer, sources, required_info) -> RubricVerdict | None
        # None for an offline provider (no model to judge with)
    contain_match(answer: str, ground_truth: str) -> bool
    llm_accuracy(provider, *, question, ground_truth, answer) -> tuple[bool | None, Usage]

Also here (additions): `evaluation_reason(...)` (the one-line `Evaluation Reason` cell), `RubricConfig`
(weights, thresholds, hallucination rules; `RubricConfig.from_env()` reads RAG_HALLUCINATION_PATTERNS),
`HallucinationRule`, `find_hallucinations`, `RubricVerdict.columns()` (the judge's result-CSV cells) and
`answer_text_for_judging` (the answer without citations and notices, as the lexical judge sees it).

Lexical checklist judge (offline; deterministic). Text goes through text.normalize (NFKC, casefold, CJK
line-break joins) after citations (paths ending .md/.pdf/...), "Sources:" lines and the offline notice are
removed. An item's content units are: Latin words of >= 2 letters minus stopwords, lightly stemmed
("cleaning" ~ "cleaned" ~ "clean"); numbers ("1,000" = "1000", "2.50" = "2.5"); CJK character bigrams
(a bigram of two hiragana, mostly particles/okurigana, weighs 0.25; every other unit weighs 1).
- unit recall = matched weight / total weight (a unit matches when the answer has it);
- items with CJK text also get char recall = share of the item's kanji/katakana/hangul characters
  (hiragana too if the item has nothing else) found in the answer; score = (unit recall + char recall) / 2,
  which forgives inflection ("洗う"/"洗い") and Korean particles ("필터를"/"필터는");
- covered  <=>  every number of the item appears in the answer  AND  score >= COVER_THRESHOLD (0.6).
Extra points: the answer's sentences (same cleaning) with >= MIN_POINT_UNITS (2) content units that match no
item, where a sentence matches an item when either covers the other with score >= SENTENCE_MATCH (0.5).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragkit.core.errors import RagError
from ragkit.core.llm import chat_json, json_array, json_object, json_type
from ragkit.core.models import Usage
from ragkit.core.text import CJK_RE, STOPWORDS, is_refusal, normalize, one_line, split_sentences, tokenize

COVER_THRESHOLD = 0.6
SENTENCE_MATCH = 0.5
MIN_POINT_UNITS = 2
HIRAGANA_BIGRAM_WEIGHT = 0.25
EVIDENCE_CHARS = 200


# == checklist ========================================================================================
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


# -- LLM checklist judge -------------------------------------------------------------------------------
CHECKLIST_SCHEMA: dict = json_object({
    "items": json_array(json_object({"item": json_type("integer"), "covered": json_type("boolean"),
                                     "evidence": json_type("string")})),
    "extra_points": json_array(json_type("string")),
    "reason": json_type("string"),
}, required=["items", "extra_points"])

_CHECKLIST_SYSTEM = """You grade an answer against a checklist of key points, strictly and fairly.
For each numbered checklist item decide whether the answer states it. The same meaning counts: paraphrases,
another language, equivalent units or rounding. A vague, partial or contradicting statement does not count.
For a covered item quote the shortest passage of the answer that covers it as evidence (copied verbatim);
for an item that is not covered the evidence is "".
Then list the answer's extra key points: distinct factual statements or instructions in the answer that match
no checklist item. Do not list citations, file paths, page references, greetings, disclaimers, notices that
the answer was generated offline, or restatements of the question.
Reply with JSON only:
{"items": [{"item": 1, "covered": true, "evidence": "..."}, ...], "extra_points": ["..."],
 "reason": "one short sentence"}
with exactly one entry per checklist item, numbered as given."""


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    raise ValueError(f"{where}: 'covered' must be true or false, got {value!r}")


def _parse_checklist(data: dict, n: int) -> tuple[list[bool], list[str], list[str], str]:
    """Validate the judge's JSON; ValueError says what is wrong (fed back to the model)."""
    entries = data.get("items")
    if not isinstance(entries, list):
        raise ValueError("'items' must be a list with one entry per checklist item")
    slots: list[dict | None] = [None] * n
    numbered = all(isinstance(e, dict) and isinstance(e.get("item"), int) and not isinstance(e.get("item"), bool)
                   for e in entries)
    for pos, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"items[{pos}] must be an object with item, covered, evidence")
        idx = e["item"] - 1 if numbered else pos
        if not 0 <= idx < n:
            raise ValueError(f"items[{pos}] refers to checklist item {idx + 1}, but there are {n} items")
        if slots[idx] is not None:
            raise ValueError(f"checklist item {idx + 1} is graded twice")
        slots[idx] = e
    missing = [str(i + 1) for i, s in enumerate(slots) if s is None]
    if missing:
        raise ValueError(f"checklist item(s) {', '.join(missing)} not graded; grade all {n} items")
    covered = [_as_bool(s.get("covered"), f"item {i + 1}") for i, s in enumerate(slots) if s is not None]
    evidence = [" ".join(str(s.get("evidence") or "").split())[:EVIDENCE_CHARS] if c else ""
                for s, c in zip(slots, covered, strict=True) if s is not None]
    raw_extra = data.get("extra_points") or []
    if not isinstance(raw_extra, list):
        raise ValueError("'extra_points' must be a list of strings")
    extra: list[str] = []
    for p in raw_extra:
        text = " ".join(str(p.get("point", "") if isinstance(p, dict) else p).split())
        if text and text not in extra:
            extra.append(text[:EVIDENCE_CHARS])
    reason = " ".join(str(data.get("reason") or "").split())[:300]
    return covered, evidence, extra, reason


def judge_checklist(provider, question: str, answer: str, items: list[str]) -> ChecklistVerdict:
    """Which checklist items the answer covers, with evidence, and the answer's extra key points.

    An offline provider gets the lexical judge. No items or an empty answer need no model: nothing covered.
    Invalid or incomplete JSON is retried (3 attempts, the problem told to the model), then RagError.
    """
    items = [str(i) for i in items]
    if provider is None or getattr(provider, "is_offline", False):
        return lexical_checklist(answer, items)
    if not items or not (answer or "").strip():
        return ChecklistVerdict(covered=[False] * len(items), evidence=[""] * len(items), extra_points=[],
                                reason="nothing to judge" if not items else "empty answer", usage=Usage(),
                                judge="llm", items=items)
    numbered = "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))
    user = f"Question:\n{question}\n\nAnswer:\n<<<\n{answer}\n>>>\n\nChecklist ({len(items)} items):\n{numbered}"
    parsed: dict[str, Any] = {}

    def validate(data: dict) -> None:
        parsed["v"] = _parse_checklist(data, len(items))

    _, usage = chat_json(provider, [{"role": "system", "content": _CHECKLIST_SYSTEM},
                                    {"role": "user", "content": user}],
                         schema=CHECKLIST_SCHEMA, schema_name="checklist_verdict", validate=validate)
    covered, evidence, extra, reason = parsed["v"]
    if not reason:
        reason = f"{sum(covered)}/{len(items)} items covered, {len(extra)} extra point(s)"
    return ChecklistVerdict(covered=covered, evidence=evidence, extra_points=extra, reason=reason, usage=usage,
                            judge="llm", items=items)


# == rubric (seed 002) =================================================================================
RUBRIC_METRICS = ("accuracy", "completeness", "citations", "context_relevance")
DEFAULT_WEIGHTS = {"accuracy": 0.35, "completeness": 0.25, "citations": 0.20, "context_relevance": 0.20}
DEFAULT_THRESHOLDS = {"accuracy": 0.85, "completeness": 0.75, "citations": 0.70, "context_relevance": 0.75}
DEFAULT_PASS_OVERALL = 0.80
HALLUCINATION_ENV = "RAG_HALLUCINATION_PATTERNS"


@dataclass(frozen=True)
class HallucinationRule:
    """A regex over the answer; a match forces accuracy down to `cap` (seed 002: fake phone number -> 0.0).

    unless_in_sources: a match whose text also appears in the sources or the expected answer is a fact, not a
    hallucination. digits: compare only the digits ("03-1234-5678" = "03 1234 5678").
    """

    name: str
    pattern: re.Pattern
    cap: float = 0.0
    unless_in_sources: bool = True
    digits: bool = False


# "02-XXXX-XXXX": a placeholder number is never a fact
PLACEHOLDER_PHONE = re.compile(r"(?<![\w-])(?:\+\d{1,3}[ -]?)?\(?\d{2,5}\)?[ -][Xx×＊*]{2,4}[ -][Xx×＊*]{4}(?![\w-])")
# phone-number shapes of ja/ko/us/intl style: 02-123-4567, 03-1234-5678, 0120-123-456, (555) 123-4567, +81 3 ...
PHONE = re.compile(
    r"(?<![\w.\-+])(?:\+?\d{1,3}[ -])?(?:\(\d{1,5}\)[ -]?|\d{2,5}[ -])\d{1,4}[ -]\d{3,4}(?![\w-])")

DEFAULT_RULES: tuple[HallucinationRule, ...] = (
    HallucinationRule("placeholder phone number", PLACEHOLDER_PHONE),
    HallucinationRule("phone number not in the sources", PHONE, digits=True),
)


def _load_patterns(value: str, origin: str) -> list[HallucinationRule]:
    """One regex per line (blank lines and lines starting with # ignored); `value` is a file path or the
    patterns themselves."""
    path = Path(value.strip()).expanduser() if "\n" not in value and len(value) < 4096 else None
    if path is not None and path.is_file():
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            raise RagError(f"{origin}: cannot read {path}: {e}") from None
        origin = str(path)
    else:
        text = value
    rules = []
    for n, line in enumerate(text.splitlines(), 1):
        pat = line.strip()
        if not pat or pat.startswith("#"):
            continue
        try:
            rules.append(HallucinationRule(f"pattern {pat}", re.compile(pat)))
        except re.error as e:
            raise RagError(f"{origin}: line {n}: invalid regular expression {pat!r} ({e})") from None
    return rules


@dataclass
class RubricConfig:
    """Weights (normalised by their sum), per-metric pass thresholds, the overall pass mark and the
    hallucination rules of the rubric judge."""

    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    thresholds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    pass_overall: float = DEFAULT_PASS_OVERALL
    rules: tuple[HallucinationRule, ...] = DEFAULT_RULES
    max_source_chars: int = 1500  # per source excerpt shown to the judge

    def __post_init__(self) -> None:
        for name, table in (("weight", self.weights), ("threshold", self.thresholds)):
            unknown = set(table) - set(RUBRIC_METRICS)
            if unknown:
                raise RagError(f"rubric {name}s: unknown metric(s) {', '.join(sorted(unknown))}; "
                               f"use {', '.join(RUBRIC_METRICS)}")
            for k, v in table.items():
                if not isinstance(v, int | float) or not math.isfinite(v) or v < 0 or (name == "threshold"
                                                                                      and v > 1):
                    raise RagError(f"rubric {name} for {k} must be a number in [0, 1], got {v!r}")
        if sum(self.weights.get(m, 0.0) for m in RUBRIC_METRICS) <= 0:
            raise RagError("rubric weights must not all be 0")
        if not 0 <= self.pass_overall <= 1:
            raise RagError(f"rubric pass mark must be in [0, 1], got {self.pass_overall!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kw: Any) -> RubricConfig:
        """Defaults plus the user's rules from RAG_HALLUCINATION_PATTERNS (environment, then `.env`): a file of
        regexes, one per line, or the regexes themselves, newline-separated. A match that also appears in the
        sources or the expected answer is not flagged; otherwise it caps accuracy at 0.0."""
        if env is None:
            from ragkit.core.config import _env  # environment over .env, as for every other setting

            env = _env()
        extra = _load_patterns(env[HALLUCINATION_ENV], HALLUCINATION_ENV) if env.get(HALLUCINATION_ENV) else []
        rules = tuple(kw.pop("rules", DEFAULT_RULES)) + tuple(extra)
        return cls(rules=rules, **kw)


@dataclass
class RubricVerdict:
    accuracy: float
    completeness: float
    citations: float
    context_relevance: float
    overall: float
    passed: bool
    metric_status: dict[str, bool]
    reasoning: dict[str, str]
    issues: list[str]
    strengths: list[str]
    hallucinations: list[str]
    usage: Usage = field(default_factory=Usage)
    judge_accuracy_raw: float | None = None  # the model's accuracy before a hallucination rule capped it

    def scores(self) -> dict[str, float]:
        return {m: getattr(self, m) for m in RUBRIC_METRICS}

    def columns(self) -> dict[str, Any]:
        """The judge's cells for a results row (numbers unformatted)."""
        return {
            "Judge Accuracy": self.accuracy,
            "Judge Completeness": self.completeness,
            "Judge Citations": self.citations,
            "Judge Context Relevance": self.context_relevance,
            "Judge Overall": self.overall,
            "Judge Passed": self.passed,
            "Judge Hallucinations": "\n".join(self.hallucinations),
            "Judge Issues": "\n".join(self.issues),
        }


RUBRIC_COLUMNS = tuple(RubricVerdict(0, 0, 0, 0, 0, False, {}, {}, [], [], []).columns())

RUBRIC_SCHEMA: dict = json_object({
    **{m: json_type("number") for m in RUBRIC_METRICS},
    "reasoning": json_object({m: json_type("string") for m in RUBRIC_METRICS}, required=[]),
    "issues": json_array(json_type("string")),
    "strengths": json_array(json_type("string")),
}, required=list(RUBRIC_METRICS))

_RUBRIC_PROMPT = """You are an expert evaluator of RAG (retrieval-augmented generation) systems.
Evaluate the answer below against the question, the expected answer and the retrieved sources.

## Question
{question}

## Expected answer
{expected}

## Actual answer
{answer}

## Retrieved sources
{sources}

## Criteria (each a score from 0.0 to 1.0)

### 1. accuracy: is the answer factually correct, without hallucination?
1.0 completely accurate; 0.8-0.9 minor inaccuracies; 0.5-0.7 some factual errors or minor hallucinations;
0.3-0.4 significant errors or hallucinations; 0.0-0.2 major hallucinations or completely wrong.
Hallucination indicators: information not in the sources or the expected answer; invented contact details
(phone numbers, e-mail or web addresses); facts about a different product, organisation or document than the
one asked about. Generic avoidance without helpful information ("it depends, please check") scores <= 0.3.
If the documents cannot answer the question (no expected answer) a plain refusal is accurate.

### 2. completeness: does the answer cover the key information?
1.0 everything required; 0.8-0.9 minor omissions; 0.5-0.7 significant information missing;
0.3-0.4 major gaps; 0.0-0.2 very incomplete.
Required information:
{required_info}

### 3. citations: does the answer cite the pages/sections it relies on, correctly?
1.0 accurate citations of the specific pages or sections (document, section, page) that support each claim;
0.8-0.9 accurate but incomplete or loosely formatted; 0.5-0.7 some citations wrong or missing;
0.3-0.4 few or inaccurate citations; 0.0-0.2 no citations, or vague ones ("according to the documents").

### 4. context_relevance: are the retrieved sources relevant to the question?
1.0 all highly relevant; 0.8-0.9 most relevant; 0.5-0.7 mixed; 0.3-0.4 few relevant; 0.0-0.2 none.

Judge in the language of the question; the answer may be in Japanese, Korean or English.

## Output: JSON only, in this form
{{"accuracy": 0.0, "completeness": 0.0, "citations": 0.0, "context_relevance": 0.0,
 "reasoning": {{"accuracy": "...", "completeness": "...", "citations": "...", "context_relevance": "..."}},
 "issues": ["specific problems found"], "strengths": ["specific strengths"]}}"""


def _source_text(src: Any) -> tuple[str, str]:
    """(header, body) of a source given as models.Source, a dict or a plain string (path)."""
    if isinstance(src, str):
        return src, ""
    get = src.get if isinstance(src, Mapping) else (lambda k, d=None: getattr(src, k, d))
    path = str(get("path", "") or "")
    page = get("page", None)
    title = str(get("title", "") or "")
    header = path + (f" (page {page})" if page not in (None, "", 0) else "") + (f" — {title}" if title else "")
    body = str(get("excerpt", "") or get("content", "") or get("text", "") or "")
    return header, body


def _render_sources(sources: Sequence[Any] | None, limit: int) -> tuple[str, str]:
    """(text for the prompt, all source text for hallucination checks)."""
    if not sources:
        return "(no sources were retrieved)", ""
    lines, raw = [], []
    for i, src in enumerate(sources, 1):
        header, body = _source_text(src)
        body = " ".join(body.split())
        raw.append(f"{header}\n{body}")
        lines.append(f"[{i}] {header}" + (f"\n{body[:limit]}" if body else ""))
    return "\n\n".join(lines), "\n".join(raw)


def _digit_runs(text: str) -> list[str]:
    return [re.sub(r"\D", "", m) for m in re.findall(r"\d[\d ()+\-.]*\d", text)]


def find_hallucinations(answer: str, evidence: str, rules: Iterable[HallucinationRule]) -> list[str]:
    """`rule name: matched text` for every rule the answer triggers (see HallucinationRule)."""
    answer = unicodedata.normalize("NFKC", answer or "")
    norm_evidence = normalize(evidence or "")
    runs = _digit_runs(unicodedata.normalize("NFKC", evidence or ""))
    found: list[str] = []
    for rule in rules:
        for m in rule.pattern.finditer(answer):
            text = m.group(0).strip()
            if not text:
                continue
            if rule.unless_in_sources:
                if rule.digits:
                    digits = re.sub(r"\D", "", text)
                    if digits and any(digits in r for r in runs):
                        continue
                elif normalize(text) in norm_evidence:
                    continue
            label = f"{rule.name}: {text}"
            if label not in found:
                found.append(label)
    return found


def _check_scores(data: dict) -> dict[str, float]:
    scores = {}
    for m in RUBRIC_METRICS:
        v = data.get(m)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"{m} must be a number from 0.0 to 1.0, got {v!r}")
        if not -1e-9 <= v <= 1 + 1e-9:
            raise ValueError(f"{m} score {v!r} is outside 0.0-1.0; every score must be between 0.0 and 1.0")
        scores[m] = min(1.0, max(0.0, float(v)))
    return scores


def _str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [" ".join(str(v).split()) for v in value if str(v).strip()]


def score_rubric(scores: Mapping[str, float], config: RubricConfig | None = None) -> tuple[float, bool, dict]:
    """(overall, passed, metric_status): weighted mean (weights normalised), pass = overall >= pass mark and
    every metric >= its threshold (compared after rounding to 6 decimals, so 0.8 is not 0.79999...)."""
    config = config or RubricConfig()
    total_w = sum(config.weights.get(m, 0.0) for m in RUBRIC_METRICS)
    overall = sum(scores[m] * config.weights.get(m, 0.0) for m in RUBRIC_METRICS) / total_w
    overall = round(overall, 6)
    status = {m: round(scores[m], 6) >= config.thresholds.get(m, 0.0) for m in RUBRIC_METRICS}
    return overall, overall >= config.pass_overall and all(status.values()), status


def judge_rubric(provider, *, question: str, expected: str, answer: str, sources: Sequence[Any] | None,
                 required_info: str | Sequence[str] | None, config: RubricConfig | None = None
                 ) -> RubricVerdict | None:
    """Seed 002's LLM-as-judge. None with an offline provider (no model to judge with).

    Scores outside [0, 1] or missing are retried like invalid JSON (3 attempts), then RagError. A triggered
    hallucination rule caps accuracy (default 0.0), which also fails the verdict.
    """
    if provider is None or getattr(provider, "is_offline", False):
        return None
    config = config or RubricConfig.from_env()
    if isinstance(required_info, str):
        info_items = [line.strip() for line in required_info.splitlines() if line.strip()]
    else:
        info_items = [str(i).strip() for i in (required_info or []) if str(i).strip()]
    info = "\n".join(f"- {i}" for i in info_items) or "(none listed: judge against the expected answer)"
    src_prompt, src_raw = _render_sources(sources, config.max_source_chars)
    prompt = _RUBRIC_PROMPT.format(
        question=question or "(none)",
        expected=(expected or "").strip() or "(none: the documents may not contain the answer)",
        answer=(answer or "").strip() or "(empty answer)",
        sources=src_prompt,
        required_info=info,
    )
    holder: dict[str, dict[str, float]] = {}

    def validate(data: dict) -> None:
        holder["scores"] = _check_scores(data)

    data, usage = chat_json(provider, [{"role": "user", "content": prompt}], schema=RUBRIC_SCHEMA,
                            schema_name="rubric_verdict", validate=validate)
    scores = dict(holder["scores"])
    raw_accuracy = scores["accuracy"]
    hallucinations = find_hallucinations(answer, f"{src_raw}\n{expected or ''}", config.rules)
    issues = _str_list(data.get("issues"))
    if hallucinations:
        cap = min(r.cap for r in config.rules if any(h.startswith(r.name + ":") for h in hallucinations))
        scores["accuracy"] = min(scores["accuracy"], cap)
        issues = [f"hallucination ({h})" for h in hallucinations] + issues
    overall, passed, status = score_rubric(scores, config)
    if hallucinations:
        passed = False
    reasoning_raw = data.get("reasoning")
    if isinstance(reasoning_raw, Mapping):
        reasoning = {str(k): " ".join(str(v).split()) for k, v in reasoning_raw.items()}
    elif isinstance(reasoning_raw, str):
        reasoning = {"overall": " ".join(reasoning_raw.split())}
    else:
        reasoning = {}
    return RubricVerdict(
        **scores, overall=overall, passed=passed, metric_status=status, reasoning=reasoning, issues=issues,
        strengths=_str_list(data.get("strengths")), hallucinations=hallucinations, usage=usage,
        judge_accuracy_raw=raw_accuracy,
    )


# == seed 004: Contain-Match and LLM-Accuracy =========================================================
_LIST_SPLIT = re.compile(r"[\r\n;；]+")
_BULLET = re.compile(r"^\s*(?:[-*•・●]|\d+[.)])\s+")
_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")


def _match_form(text: str) -> str:
    """NFKC + casefold + CJK break joins; thousands separators dropped; whitespace and punctuation/symbols
    removed except a decimal point between digits ("2.5" stays distinct from "25")."""
    s = normalize(text or "")
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    s = _DECIMAL_POINT.sub("\x00", s)
    s = "".join(ch for ch in s if not (ch.isspace() or unicodedata.category(ch)[0] in "PS"))
    return s.replace("\x00", ".")


def contain_match(answer: str, ground_truth: str) -> bool:
    """Seed 004's Contain-Match: the normalised ground truth is a substring of the normalised answer.

    Normalisation: see _match_form (NFKC, case, whitespace, punctuation, "1,000" = "1000").
    A ground truth that is a list (several lines, `;`, or bullets) matches when the whole text does, or when
    every item does, in any order. An empty ground truth never matches (there is nothing to find).
    """
    target = _match_form(ground_truth)
    if not target:
        return False
    hay = _match_form(answer)
    if target in hay:
        return True
    parts = [_match_form(_BULLET.sub("", p)) for p in _LIST_SPLIT.split(ground_truth or "")]
    parts = [p for p in parts if p]
    return len(parts) > 1 and all(p in hay for p in parts)


LLM_ACCURACY_SCHEMA: dict = json_object({"correct": json_type("boolean"), "reason": json_type("string")},
                                        required=["correct"])

_ACCURACY_SYSTEM = """You judge whether an answer to a question is correct, given the ground-truth answer.
The answer is correct when it states the same key fact(s) as the ground truth: different wording, language,
units or formatting are fine ($2.1B = 2,100 million; 0.25 = 25%), as is rounding that keeps the meaning.
It is incorrect when it contradicts the ground truth, misses its key fact, hedges between alternatives, or
refuses although the ground truth gives an answer. Extra correct detail does not make it wrong.
Reply with JSON only: {"correct": true or false, "reason": "one short sentence"}."""


def llm_accuracy(provider, *, question: str, ground_truth: str, answer: str) -> tuple[bool | None, Usage]:
    """Seed 004's LLM-Accuracy: (semantically equivalent?, usage). (None, Usage()) when offline or when
    there is no ground truth; an empty answer is (False, Usage()) without a call."""
    if provider is None or getattr(provider, "is_offline", False) or not (ground_truth or "").strip():
        return None, Usage()
    if not (answer or "").strip():
        return False, Usage()
    user = f"Question:\n{question}\n\nGround truth:\n{ground_truth}\n\nAnswer:\n<<<\n{answer}\n>>>"
    holder: dict[str, bool] = {}

    def validate(data: dict) -> None:
        holder["ok"] = _as_bool(data.get("correct"), "correct")

    _, usage = chat_json(provider, [{"role": "system", "content": _ACCURACY_SYSTEM},
                                    {"role": "user", "content": user}],
                         schema=LLM_ACCURACY_SCHEMA, schema_name="accuracy_verdict", validate=validate)
    return holder["ok"], usage


# == Evaluation Reason =================================================================================
def _short(text: str, n: int = 40) -> str:
    return one_line(text, n)


def evaluation_reason(
    *,
    answerable: bool | None = None,
    refused: bool = False,
    checklist: ChecklistVerdict | None = None,
    items: Sequence[str] | None = None,
    ref: Mapping[str, Any] | None = None,
    opt_ref: Mapping[str, Any] | None = None,
    rubric: RubricVerdict | None = None,
    contain: bool | None = None,
    llm_correct: bool | None = None,
    notes: Sequence[str] = (),
    error: str | None = None,
    max_len: int = 400,
) -> str:
    """The one-line `Evaluation Reason`, e.g.
    "checklist 2/3 covered (missed: X), 1 extra point; refs 1/1 found, 2 extra; judge 0.82 pass".

    answerable None = no ground truth (no checklist part). `ref`/`opt_ref` are reference_metrics dicts.
    `notes` are appended as they are (e.g. "judge failed: ..."; "rubric not judged (offline)").
    """
    parts: list[str] = []
    if error:
        parts.append(f"error: {_short(error, 160)}")
    if answerable is not None:
        if not answerable:
            parts.append("correctly refused: the documents cannot answer this" if refused
                         else "answered although the documents cannot answer this")
        else:
            n = len(checklist.covered) if checklist is not None else len(items or [])
            if refused:
                parts.append(f"refused an answerable question (checklist 0/{n})" if n
                             else "refused an answerable question")
            elif checklist is not None and n:
                missed = checklist.missed or [it for it, c in zip(items or [], checklist.covered, strict=False)
                                              if not c]
                text = f"checklist {checklist.n_covered}/{n} covered"
                if missed:
                    shown = ", ".join(_short(m) for m in missed[:3]) + (", …" if len(missed) > 3 else "")
                    text += f" (missed: {shown})"
                if checklist.n_extra:
                    text += f", {checklist.n_extra} extra point{'s' if checklist.n_extra != 1 else ''}"
                if checklist.judge == "lexical":
                    text += " [lexical judge]"
                parts.append(text)
    for label, m in (("refs", ref), ("opt refs", opt_ref)):
        if not m:
            continue
        tp, fn, fp = int(m.get("TP") or 0), int(m.get("FN") or 0), int(m.get("FP") or 0)
        text = f"{label} {tp}/{tp + fn} found" if tp + fn else f"{label}: none required"
        if fp:
            text += f", {fp} extra"
        parts.append(text)
    if rubric is not None:
        text = f"judge {rubric.overall:.2f} {'pass' if rubric.passed else 'fail'}"
        low = [f"{m} {getattr(rubric, m):.2f}" for m in RUBRIC_METRICS if not rubric.metric_status.get(m, True)]
        if rubric.hallucinations:
            text += f" (hallucination: {_short(rubric.hallucinations[0], 60)})"
        elif low:
            text += f" (low: {', '.join(low)})"
        parts.append(text)
    if contain is not None:
        parts.append("contains the ground truth" if contain else "ground truth not contained")
    if llm_correct is not None:
        parts.append("LLM-Accuracy correct" if llm_correct else "LLM-Accuracy incorrect")
    parts.extend(_short(n, 160) for n in notes if n)
    line = " ".join("; ".join(parts).split())
    return line if len(line) <= max_len else line[: max_len - 1] + "…"


__all__ = [
    "CHECKLIST_SCHEMA", "COVER_THRESHOLD", "ChecklistVerdict", "DEFAULT_RULES", "HallucinationRule",
    "RUBRIC_COLUMNS", "RUBRIC_METRICS", "RubricConfig", "RubricVerdict", "answer_text_for_judging",
    "contain_match", "evaluation_reason", "find_hallucinations", "judge_checklist", "judge_rubric",
    "lexical_checklist", "llm_accuracy", "score_rubric",
]

