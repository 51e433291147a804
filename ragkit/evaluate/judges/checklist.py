"""The checklist judge: the model grades every key point (covered, evidence) and names the answer's extra
points; an offline provider gets the lexical judge."""

from __future__ import annotations

from typing import Any

from ragkit.core.jsonreply import chat_json, json_array, json_object, json_type
from ragkit.core.models import Usage
from ragkit.evaluate.judges.lexical import EVIDENCE_CHARS, ChecklistVerdict, lexical_checklist

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


def as_bool(value: Any, where: str) -> bool:
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
    covered = [as_bool(s.get("covered"), f"item {i + 1}") for i, s in enumerate(slots) if s is not None]
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
