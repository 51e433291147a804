"""The `Evaluation Reason` cell: one line that says why a row scored what it did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragkit.core.text import one_line
from ragkit.evaluate.judges.lexical import ChecklistVerdict
from ragkit.evaluate.judges.rubric import RUBRIC_METRICS, RubricVerdict


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
