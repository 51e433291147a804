"""Summarization rows of a question CSV (`Task` = summarization, optional `Reference Summary`): their columns,
their scoring (ROUGE-2 F1, word count, G-Eval faithfulness and coverage with error codes; page recall and
precision are the row's Ref Recall / Ref Precision) and their own section of the summary CSV. Offline the G-Eval
columns read "not measured".

    TASK, REFERENCE_SUMMARY, SUMMARY_COLUMNS, task_of(row), score_summary(scorer, row, answer),
    summary_section(rows) -> summary CSV rows
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ragkit.core.models import Answer, Usage
from ragkit.core.paths import resolve_in_db, strip_db_prefix
from ragkit.core.references import reference_groups
from ragkit.core.text import one_line
from ragkit.evaluate.rouge import rouge2_f1, word_count

TASK = "Task"
REFERENCE_SUMMARY = "Reference Summary"
TASKS = ("qa", "summarization")
NOT_MEASURED = "not measured"
ROUGE2 = "ROUGE-2 F1"
WORDS = "Word Count"
FAITHFULNESS = "G-Eval Faithfulness"
COVERAGE = "G-Eval Coverage"
ERROR_CODES = "G-Eval Error Codes"
FAITHFULNESS_REASONING = "G-Eval Faithfulness Reasoning"
COVERAGE_REASONING = "G-Eval Coverage Reasoning"
SUMMARY_COLUMNS = [ROUGE2, WORDS, FAITHFULNESS, COVERAGE, ERROR_CODES, FAITHFULNESS_REASONING, COVERAGE_REASONING]
SECTION_METRICS = [ROUGE2, FAITHFULNESS, COVERAGE, "Ref Recall", "Ref Precision", WORDS, "Steps",
                   "Max Loops Reached"]
EVIDENCE_CHARS = 16_000  # material the G-Eval judge reads
PAGE_CHARS = 4_000  # ... per page


def task_of(row: dict) -> str:
    """The row's task: the `Task` cell lower-cased, "qa" when empty or absent (read_questions checked it)."""
    return str(row.get(TASK) or "").strip().lower() or "qa"


def _pages_text(db: Path, paths: list[str]) -> str:
    parts, budget = [], EVIDENCE_CHARS
    for p in paths:
        try:
            text = resolve_in_db(db, strip_db_prefix(db, p)).read_text(encoding="utf-8", errors="replace")
        except Exception:  # noqa: BLE001 - a page that is gone or outside the database is simply not material
            continue
        entry = f"=== {p} ===\n{text[:PAGE_CHARS]}"[:budget]
        parts.append(entry)
        budget -= len(entry)
        if budget <= 0:
            break
    return "\n\n".join(parts)


_GEVALS: dict[tuple[int, str], Any] = {}
_GEVALS_LOCK = threading.Lock()


def _geval(judge: Any, results: Path) -> Any:
    from ragkit.evaluate.judges.geval import CRITERIA_FILE, GEval

    key = (id(judge), str(Path(results).resolve() / CRITERIA_FILE))
    with _GEVALS_LOCK:
        g = _GEVALS.get(key)
        if g is None or g.judge is not judge:
            g = _GEVALS[key] = GEval(judge, Path(key[1]))
        return g


def score_summary(scorer: Any, row: dict, answer: Answer) -> tuple[dict, Usage, list[str]]:
    """The summary columns and Evaluation Reason of an answered summarization row; never raises (a judge
    failure is one of the returned problems)."""
    from ragkit.evaluate.judges import answer_text_for_judging

    usage, problems = Usage(), []
    text = answer_text_for_judging(answer.answer or "")
    reference = str(row.get(REFERENCE_SUMMARY) or "").strip()
    out: dict[str, Any] = {ROUGE2: rouge2_f1(text, reference) if reference else None, WORDS: word_count(text)}
    judge = scorer.judge
    if judge is None or getattr(judge, "is_offline", False):
        for c in (FAITHFULNESS, COVERAGE, ERROR_CODES):
            out[c] = NOT_MEASURED
    elif answer.refused or not text.strip():
        out.update({FAITHFULNESS: 1, COVERAGE: 1, ERROR_CODES: "P" if not answer.refused else "O",
                    FAITHFULNESS_REASONING: "no summary was written", COVERAGE_REASONING: "no summary was written"})
    else:
        g = _geval(judge, Path(scorer.settings.results))
        request = str(row.get("Question") or "")
        cited = _pages_text(scorer.db, [s.path for s in answer.sources])
        gold = _pages_text(scorer.db, [g[0] for g in reference_groups(str(row.get("Reference Document") or ""))])
        material = {"faithfulness": cited or gold or "(the summary cites no page)",
                    "coverage": (f"Reference summary:\n{reference}\n\n" if reference else "") + (gold or cited)}
        codes: list[str] = []
        for dim, col, why in (("faithfulness", FAITHFULNESS, FAITHFULNESS_REASONING),
                              ("coverage", COVERAGE, COVERAGE_REASONING)):
            try:
                s = g.score(dim, request=request, summary=text, evidence=material[dim])
            except Exception as e:  # noqa: BLE001 - a judge failure must not lose the summary
                problems.append(f"G-Eval {dim} failed: {one_line(str(e))[:300]}")
                continue
            usage.add(s.usage)
            out[col], out[why] = s.score, s.reasoning
            codes += [c for c in s.error_codes if c not in codes]
        out[ERROR_CODES] = ", ".join(codes)
    bits = [f"summary of {out[WORDS]} words"]
    if out[ROUGE2] is not None:
        bits.append(f"ROUGE-2 F1 {out[ROUGE2]:.3f}")
    rr = row.get("Ref Recall")
    if rr not in (None, ""):
        bits.append(f"page recall {rr}")
    if out.get(FAITHFULNESS) == NOT_MEASURED:
        bits.append("G-Eval not measured (offline judge)")
    elif out.get(FAITHFULNESS) is not None:
        bits.append(f"faithfulness {out[FAITHFULNESS]}/5, coverage {out.get(COVERAGE, '-')}/5"
                    + (f", errors {out[ERROR_CODES]}" if out.get(ERROR_CODES) else ""))
    out["Evaluation Reason"] = "; ".join(bits + problems)
    return out, usage, problems


def summary_section(rows: list[dict]) -> list[dict]:
    """The summary CSV's summarization section: each metric over the summarization rows (Covers
    "summarization"), and how many rows G-Eval did not measure."""
    from ragkit.evaluate.metrics import summarize

    mine = [r for r in rows if task_of(r) == "summarization" and not r.get("Error")]
    if not mine:
        return []
    out = []
    for r in summarize(mine, [c for c in SECTION_METRICS if any(c in x for x in mine)]):
        r["Metric"] = f"Summarization {r['Metric']}".replace(" Ref ", " Page ")  # recall/precision of the gold pages
        r["Covers"] = "summarization"
        out.append(r)
    unmeasured = sum(1 for r in mine if r.get(FAITHFULNESS) == NOT_MEASURED)
    if unmeasured:
        out.append({"Metric": "Summarization G-Eval", "Mean": None, "Micro": None, "Total": NOT_MEASURED,
                    "Rows": unmeasured, "Covers": "summarization"})
    return out
