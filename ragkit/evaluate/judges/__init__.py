"""Judges, one concern per module: the checklist judge (a model's, or the lexical one offline), the rubric of
the LLM-as-judge spec, Contain-Match and LLM-Accuracy, and the Evaluation Reason line. docs/metrics.md
defines what each measures."""

from ragkit.evaluate.judges.accuracy import contain_match, llm_accuracy
from ragkit.evaluate.judges.checklist import CHECKLIST_SCHEMA, judge_checklist
from ragkit.evaluate.judges.lexical import (
    COVER_THRESHOLD,
    ChecklistVerdict,
    answer_text_for_judging,
    lexical_checklist,
)
from ragkit.evaluate.judges.reason import evaluation_reason
from ragkit.evaluate.judges.rubric import (
    DEFAULT_RULES,
    RUBRIC_COLUMNS,
    RUBRIC_METRICS,
    HallucinationRule,
    RubricConfig,
    RubricVerdict,
    find_hallucinations,
    judge_rubric,
    score_rubric,
)

__all__ = [
    "CHECKLIST_SCHEMA", "COVER_THRESHOLD", "ChecklistVerdict", "DEFAULT_RULES", "HallucinationRule",
    "RUBRIC_COLUMNS", "RUBRIC_METRICS", "RubricConfig", "RubricVerdict", "answer_text_for_judging",
    "contain_match", "evaluation_reason", "find_hallucinations", "judge_checklist", "judge_rubric",
    "lexical_checklist", "llm_accuracy", "score_rubric",
]
