"""What each metric means, one line each (after DESIGN §5 and docs/evaluation.md, which define them in full): the
one place these lines are written; the HTML report's "What the metrics mean" section shows them.

    define(metric) -> str | None    # "of a question's reference pages, the share the answer retrieved and cited ..."
    GLOSSARY: dict[str, str]        # metric name -> definition
"""

from __future__ import annotations

# Ref: the question's reference pages (Reference Document; a page with its aliases is one) against the pages the
# answer gave as its sources (Retrieved Files); Checklist: its checklist items against the answer's key points.
GLOSSARY: dict[str, str] = {
    "Ref Recall": "of a question's reference pages, the share the answer retrieved and cited (Retrieved Files; "
                  "TP / (TP + FN))",
    "Ref Precision": "of the pages the answer retrieved, the share that are reference pages (TP / (TP + FP))",
    "Ref Specificity": "of the database's other pages, the share not retrieved (TN / (TN + FP)); near 1 over a "
                       "large database",
    "Ref F1": "2TP / (2TP + FP + FN) of the reference pages: 0 when none was retrieved but something was",
    "Ref Accuracy": "(TP + TN) / all pages of the database; near 1 over a large database",
    "Ref Recall@k": "of a question's reference pages, the share among the first k retrieved (--strategy search)",
    "Ref Hit@k": "1 when any reference page is among the first k retrieved, else 0",
    "Ref MRR": "1 / the rank of the first reference page retrieved among the first k (0 when none is)",
    "Ref nDCG@k": "the ranking's gain (each reference page counted once) over the ideal ranking's",
    "Checklist Recall": "of a question's checklist items, the share the answer covers (TP / (TP + FN)); 0 for a "
                        "refusal of an answerable question",
    "Checklist Precision": "of the answer's key points, the share that match a checklist item (TP / (TP + FP))",
    "Checklist F1": "2TP / (2TP + FP + FN) of the checklist items",
    "Checklist Accuracy": "(TP + TN) / (TP + TN + FP + FN) of the checklist; an unanswerable question refused is "
                          "TN = 1",
    "Checklist Specificity": "TN / (TN + FP) of the checklist: an unanswerable question refused is TN = 1, one "
                             "answered FP = 1",
    "Judge Overall": "the rubric judge's weighted score in [0, 1] (accuracy, completeness, citations, context "
                     "relevance)",
    "Judge Passed": "1 when the rubric judge passed the answer (scores over their pass marks, no hallucination "
                    "found), else 0",
    "Judge Accuracy": "the rubric judge's score in [0, 1]: is the answer correct against the ground truth",
    "Judge Completeness": "the rubric judge's score in [0, 1]: does the answer cover the ground truth",
    "Judge Citations": "the rubric judge's score in [0, 1]: does the answer cite pages that support it",
    "Judge Context Relevance": "the rubric judge's score in [0, 1]: are the pages read relevant to the question",
    "Contain Match": "1 when the ground truth appears in the answer's own words (not its citations), else 0 "
                     "(A-RAG paper)",
    "LLM Accuracy": "1 when a judge model says the answer matches the ground truth, else 0 (A-RAG paper)",
    "Refused": "1 when the answer declined to answer; right for a question the documents cannot answer",
    "Confidence": "how sure the answerer was, in [0, 1] (offline: the calibrated share of right pages); not how "
                  "right",
    "ROUGE-2 F1": "bigram F1 of the summary against the Reference Summary",
    "G-Eval Faithfulness": "the judge's 1-5 score: does the summary say only what the cited pages say",
    "G-Eval Coverage": "the judge's 1-5 score: does the summary cover the reference summary and gold pages",
    "Word Count": "the summary's words (a CJK character counts as one)",
    "Steps": "the answerer's steps (tool calls or model calls) for the question",
    "Latency ms": "wall time to answer the question, in milliseconds (a cached reply is near 0)",
}
# what a prefix or a section adds to a metric's name
_PREFIXES = (("Opt Ref ", "Ref ", "against the Optimized Reference Document (the pages with their copies): "),
             ("Summarization Page ", "Ref ", "summarization rows: "), ("Summarization ", "", "summarization rows: "))


def define(metric: str) -> str | None:
    """The one-line definition of a metric column (None for a column without one)."""
    if metric in GLOSSARY:
        return GLOSSARY[metric]
    for prefix, stands_for, note in _PREFIXES:
        if metric.startswith(prefix):
            base = define(stands_for + metric.removeprefix(prefix))
            return note + base if base else None
    return None
