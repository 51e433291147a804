"""LLM-as-judge rubric (the evaluation spec): accuracy, completeness, citations and context relevance in
[0, 1], a weighted overall score, pass/fail thresholds and hallucination indicators."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragkit.core.errors import RagError
from ragkit.core.jsonreply import chat_json, json_array, json_object, json_type
from ragkit.core.models import Usage
from ragkit.core.text import normalize

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

## Output: JSON only
Replace every <...> below with your own judgement of THIS answer; never copy the descriptions themselves.
{{"accuracy": <score>, "completeness": <score>, "citations": <score>, "context_relevance": <score>,
 "reasoning": {{"accuracy": "{reason}", "completeness": "{reason}", "citations": "{reason}",
  "context_relevance": "{reason}"}},
 "issues": ["{issue}"], "strengths": ["{strength}"]}}
Each <score> is a number from 0.0 to 1.0. "issues" lists each real problem once ([] when there is none);
a score under 0.5 names its problem there."""

# The <...> descriptions of the output example. They are not valid values (a score must be a number), so a reply
# that copies the example fails to parse, and a reply that copies one of these texts is caught by
# _copied_example: weak local models copy an example's literal values (issues ["specific problems found"] and
# 0.0 everywhere, in a reply that looked like a verdict).
_EXAMPLE_TEXTS = {"reason": "<why this score, in one sentence>",
                  "issue": "<a problem of this answer, in your own words>",
                  "strength": "<a strength of this answer, in your own words>"}
# What the example once held and the spec's rubric prompts still show; models copy it without being shown it.
_FORMER_EXAMPLE = ("specific problems found", "specific strengths", "...")
COPIED_EXAMPLE = "the judge's reply repeated the prompt's example; not scored"


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


def _example_key(text: str) -> str:
    """A text as compared with the example's: case, brackets, punctuation and spacing do not matter."""
    return "".join(ch for ch in normalize(text) if ch.isalnum())


_EXAMPLE_KEYS = {_example_key(t) for t in (*_EXAMPLE_TEXTS.values(), *_FORMER_EXAMPLE)}


def _degenerate(data: Mapping[str, Any]) -> str | None:
    """Why a parsed reply is no verdict, or None: it repeats the output example's texts (an issue, strength or
    reason that is the example's own wording). Zeros alone are a verdict: a refusal of an answerable question
    earns them, named problem or not."""
    reasoning = data.get("reasoning")
    texts = [*_str_list(data.get("issues")), *_str_list(data.get("strengths")),
             *(_str_list(list(reasoning.values())) if isinstance(reasoning, Mapping) else _str_list(reasoning))]
    if any(_example_key(t) in _EXAMPLE_KEYS for t in texts):
        return COPIED_EXAMPLE
    return None


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

    Scores outside [0, 1] or missing, and a degenerate reply (_degenerate: the prompt's example repeated), are
    retried like invalid JSON (3 attempts), then RagError naming the problem: that row has no rubric scores, so judge means leave it out. A triggered hallucination rule caps
    accuracy (default 0.0), which also fails the verdict.
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
        **_EXAMPLE_TEXTS,
        question=question or "(none)",
        expected=(expected or "").strip() or "(none: the documents may not contain the answer)",
        answer=(answer or "").strip() or "(empty answer)",
        sources=src_prompt,
        required_info=info,
    )
    holder: dict[str, dict[str, float]] = {}

    def validate(data: dict) -> None:
        scores = _check_scores(data)
        problem = _degenerate(data)
        if problem is not None:  # asked again like an invalid reply, then a judge error: never a score of 0
            raise ValueError(problem)
        holder["scores"] = scores

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
