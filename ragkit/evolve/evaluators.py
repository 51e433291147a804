"""Evaluators, the only code that sees an experiment's target preference: rule evaluators (`rule_keyword`,
`rule_regex`), `llm` (a model scores and says why) and ragkit's own judges (rag_evaluators), by name.

    make_evaluator(kind, *, target, adapter, task, experiment=None, settings=None, progress=False) -> Evaluator"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import regex

from ragkit.core.errors import RagError
from ragkit.core.jsonreply import chat_json, json_object, json_type
from ragkit.core.models import Usage
from ragkit.evolve.adapters import Adapter, DummyAdapter
from ragkit.evolve.rag_evaluators import RAG_EVALUATORS
from ragkit.evolve.score import SCORE_MAX, Evaluator, Score

REGEX_TIMEOUT = 2.0  # seconds per pattern and text: a catastrophic pattern must not hang the run


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def split_terms(target: str) -> list[str]:
    """Keywords or patterns: one per line; a single line may also list them with commas (, 、 ，)."""
    lines = [ln.strip() for ln in target.splitlines() if ln.strip()]
    if len(lines) == 1:
        lines = [t.strip() for t in regex.split(r"[,、，]", lines[0]) if t.strip()]
    return lines


class KeywordEvaluator(Evaluator):
    """Score = 10 x the share of the target's keywords that the text contains (NFKC, case-insensitive)."""

    name = "rule_keyword"

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.keywords = [_fold(t) for t in split_terms(target)]
        if not self.keywords:
            raise RagError("rule_keyword: target_preference lists no keywords")

    def evaluate(self, text: str, *, seed: str = "") -> Score:
        folded = _fold(text)
        hits = sum(1 for kw in self.keywords if kw in folded)
        return Score(round(SCORE_MAX * hits / len(self.keywords), 4))


class RegexEvaluator(Evaluator):
    """Score = 10 x the share of the target's regular expressions (one per line) that match the text."""

    name = "rule_regex"

    def __init__(self, target: str) -> None:
        super().__init__(target)
        lines = [ln.strip() for ln in target.splitlines() if ln.strip()]
        if not lines:
            raise RagError("rule_regex: target_preference has no pattern")
        self.patterns = []
        for n, pat in enumerate(lines, 1):
            try:
                self.patterns.append(regex.compile(pat, regex.IGNORECASE | regex.MULTILINE))
            except regex.error as e:
                # the pattern itself is the hidden target: name its position, not its text
                raise RagError(f"rule_regex: pattern {n} of target_preference is not a valid regex ({e})") from None

    def evaluate(self, text: str, *, seed: str = "") -> Score:
        hits = 0
        for pat in self.patterns:
            try:
                hits += pat.search(text, timeout=REGEX_TIMEOUT) is not None
            except TimeoutError:
                pass  # too slow to decide: no match
        return Score(round(SCORE_MAX * hits / len(self.patterns), 4))


# seed 003 §3.3: add a rule evaluator = a class above + one entry here
RULE_EVALUATORS: dict[str, type[Evaluator]] = {
    KeywordEvaluator.name: KeywordEvaluator,
    RegexEvaluator.name: RegexEvaluator,
}


LLM_EVALUATOR_SYSTEM = """You are an evaluator with a hidden preference. You score texts written for a task by
how well they match your preference, from 0 (not at all) to 10 (perfectly). Judge only the match with the
preference, not style or length. Give a one-sentence reason."""

SCORE_SCHEMA = json_object({"score": json_type("number"), "reason": json_type("string")})


class LLMEvaluator(Evaluator):
    """The model scores each text against the target; the dummy adapter returns a random score instead."""

    name = "llm"

    def __init__(self, target: str, adapter: Adapter, task: str) -> None:
        super().__init__(target)
        self.adapter = adapter
        self.task = task

    def evaluate(self, text: str, *, seed: str = "") -> Score:
        if isinstance(self.adapter, DummyAdapter):
            return Score(self.adapter.random_score(seed), "dummy adapter: random score",
                         Usage(cost_usd=0.0, calls=1))
        user = (f"Task the text was written for: {self.task}\n\nYour preference: {self.target or '(none)'}\n\n"
                f"Text:\n<<<\n{text}\n>>>\n\nReply with JSON: {{\"score\": <0-10>, \"reason\": \"...\"}}")

        def validate(data: dict) -> None:
            s = data.get("score")
            if isinstance(s, bool) or not isinstance(s, int | float) or not 0 <= float(s) <= SCORE_MAX:
                raise ValueError("score must be a number from 0 to 10")

        data, usage = chat_json(self.adapter.provider, [{"role": "system", "content": LLM_EVALUATOR_SYSTEM},
                                                        {"role": "user", "content": user}],
                                schema=SCORE_SCHEMA, schema_name="score", validate=validate)
        return Score(float(data["score"]), " ".join(str(data.get("reason") or "").split()), usage)


EvaluatorFactory = Callable[..., Evaluator]


def evaluator_names() -> tuple[str, ...]:
    return ("llm", *RULE_EVALUATORS, *RAG_EVALUATORS)


def make_evaluator(kind: str, *, target: str, adapter: Adapter, task: str, experiment=None, settings=None,
                   progress: bool = False) -> Evaluator:
    """The evaluator for an experiment row (`experiment`, `settings` and `progress` serve ragkit_naive)."""
    if kind in RULE_EVALUATORS:
        return RULE_EVALUATORS[kind](target)
    if kind == "llm":
        return LLMEvaluator(target, adapter, task)
    if kind in RAG_EVALUATORS:
        return RAG_EVALUATORS[kind](target=target, adapter=adapter, task=task, experiment=experiment,
                                    settings=settings, progress=progress)
    raise RagError(f"unknown evaluator_type {kind!r}: choose one of {', '.join(evaluator_names())}")
