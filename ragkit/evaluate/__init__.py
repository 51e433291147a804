"""Evaluation: the batch runner and its checkpoint, scoring, metrics, judges, gates and results files.

    run_batch(questions, settings, *, strategy="agent", provider=None, ...) -> BatchReport   (batch)
    run_eval(results_csv, settings, *, ...) -> BatchReport                                   (rescore)
    BatchReport (.rows: the CSV's cells; .records(): typed), typed_row (results)
    load_run(path) -> Run (runs: a results file read back), Scorer (scoring), the metric functions (metrics,
    rankmetrics), the judges (judges/), quality gates (gates)

docs/python.md shows them in a script. The entry points are imported on first use (`from ragkit.evaluate import
run_batch`), so importing the package stays as cheap as before."""

from __future__ import annotations

from ragkit.core.lazy import lazy_exports
from ragkit.evaluate.strategies import BATCH_STRATEGIES

# name -> the module that defines it, imported when the name is first asked for
_LAZY = {"run_batch": "batch", "read_input": "batch", "run_eval": "rescore", "BatchReport": "results",
         "typed_row": "results", "load_run": "runs", "Run": "runs"}

__all__ = ["BATCH_STRATEGIES", *_LAZY]

__getattr__ = lazy_exports(__name__, _LAZY)
