"""Answer correctness against a ground truth, as the A-RAG paper measures it: Contain-Match (the ground truth
appears in the answer) and LLM-Accuracy (a model's yes/no)."""

from __future__ import annotations

import re
import unicodedata

from ragkit.core.jsonreply import chat_json, json_object, json_type
from ragkit.core.models import Usage
from ragkit.core.text import normalize
from ragkit.evaluate.judges.checklist import as_bool

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
        holder["ok"] = as_bool(data.get("correct"), "correct")

    _, usage = chat_json(provider, [{"role": "system", "content": _ACCURACY_SYSTEM},
                                    {"role": "user", "content": user}],
                         schema=LLM_ACCURACY_SCHEMA, schema_name="accuracy_verdict", validate=validate)
    return holder["ok"], usage


# == Evaluation Reason =================================================================================
