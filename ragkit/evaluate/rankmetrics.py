"""Ranking metrics of `rag batch --strategy search` over the retrieved pages in rank order: hit@k, page recall@k
and MRR, with alias groups as in the reference metrics."""

from __future__ import annotations

import math
from collections.abc import Callable

from ragkit.core.paths import normalize_ref
from ragkit.core.references import reference_groups


def _group_ranks(ref_cell: str, retrieved: list[str], k: int,
                 key: Callable[[str], str]) -> tuple[list[int], int]:
    """(0-based rank of each group's first retrieved alias, within the first k; missing groups left out),
    number of groups. Paths are compared as the pages `key` names (metrics.reference_metrics)."""
    groups = reference_groups(ref_cell, key)
    of: dict[str, int] = {key(a): i for i, g in enumerate(groups) for a in g}
    seen: set[int] = set()
    ranks: list[int] = []
    for rank, path in enumerate(retrieved[:k]):
        g = of.get(key(str(path)))
        if g is not None and g not in seen:
            seen.add(g)
            ranks.append(rank)
    return ranks, len(groups)


def rank_metrics(ref_cell: str, retrieved: list[str], k: int,
                 key: Callable[[str], str] = normalize_ref) -> dict[str, float | None]:
    """{"Recall@k", "Hit@k", "MRR", "nDCG@k"} of one question; all None when it has no required page. `key` as in
    metrics.reference_metrics (paths.page_keys(db): one name per page, whatever form a path is written in)."""
    ranks, n = _group_ranks(ref_cell, retrieved, k, key)
    if not n:
        return {"Recall@k": None, "Hit@k": None, "MRR": None, "nDCG@k": None}
    dcg = sum(1.0 / math.log2(r + 2) for r in ranks)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(n, k)))
    return {"Recall@k": len(ranks) / n, "Hit@k": 1.0 if ranks else 0.0,
            "MRR": 1.0 / (ranks[0] + 1) if ranks else 0.0, "nDCG@k": dcg / ideal}
