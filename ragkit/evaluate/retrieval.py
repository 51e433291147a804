"""`rag batch Q.csv --strategy search [-k N]`: retrieval alone, no model at all.

Each question is one search; `Retrieved Files` holds its top-k pages in rank order, and the row gets the
reference metrics (Ref Recall, Ref Precision... over those k pages) plus the ranking metrics of
ragkit.evaluate.rankmetrics as `Ref Recall@k`, `Ref Hit@k`, `Ref MRR` and `Ref nDCG@k` (the summary averages them).
No judge, no optimizer: what it costs is the search. Users tune retrieval with it before paying for model runs.
The answer columns (Refused, Confidence, Steps, Max Loops Reached) stay empty, and is_retrieval_metric says which
figures such a run reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragkit.core.models import Answer, Source
from ragkit.core.paths import normalize_ref, reference_path
from ragkit.evaluate.metrics import format_cell
from ragkit.evaluate.rankmetrics import rank_metrics
from ragkit.evaluate.runinfo import RETRIEVAL_ONLY

SEARCH = RETRIEVAL_ONLY  # the strategy name
DEFAULT_K = 10
SEARCH_COLUMNS = ["Ref Recall@k", "Ref Hit@k", "Ref MRR", "Ref nDCG@k"]


def is_retrieval_metric(column: str) -> bool:
    """What a retrieval-only run measures: the reference and ranking columns and the time the searches took. Its
    summary, the terminal and `rag compare` show only these (it has no answer to refuse, judge or be sure of)."""
    return column.startswith(("Ref ", "Opt Ref ")) or column == "Latency ms"


def search_answer_fn(k: int = DEFAULT_K) -> Callable[..., Answer]:
    """An answer function for run_batch: the question's top-k pages as sources, no answer text."""
    if k < 1:
        raise ValueError(f"-k must be at least 1 (got {k})")

    def answer(question: str, settings: Any, *, strategy: str = SEARCH, index: Any = None,
               provider: Any = None, **_ignored: Any) -> Answer:
        t0 = time.monotonic()
        db = Path(settings.db)
        hits = index.search(question, k=k)
        sources = [Source(path=reference_path(db, h.path), page=h.page, title=h.title, excerpt=h.snippet,
                          score=h.score) for h in hits]
        return Answer(question=question, answer="", refused=False, sources=sources, provider="none",
                      model="", strategy=SEARCH, latency_ms=(time.monotonic() - t0) * 1000)

    return answer


def search_columns(ref_cell: str, retrieved: list[str], k: int,
                   key: Callable[[str], str] = normalize_ref) -> dict[str, Any]:
    """The ranking columns of one row (empty cells for a question without required pages); `key` names the page a
    path is (rankmetrics.rank_metrics)."""
    m = rank_metrics(ref_cell, retrieved, k, key)
    return {f"Ref {name}": format_cell(v) for name, v in m.items()}
