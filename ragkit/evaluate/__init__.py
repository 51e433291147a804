"""Evaluation: the batch runner and its checkpoint, scoring, metrics, judges, gates and results files.

    run_batch / run_eval (batch), Scorer (scoring), the metric functions (metrics, rankmetrics),
    the judges (judges/), quality gates (gates), results files read back (runs)
"""

from ragkit.answer import STRATEGIES

# `rag batch` also takes "search": retrieval alone, no model (evaluate.retrieval)
BATCH_STRATEGIES = (*STRATEGIES, "search")
