"""Postings: segments and their sort order."""

from __future__ import annotations

import numpy as np

from ragkit.search import postings


def test_stable_order_matches_numpy():

    rng = np.random.default_rng(1)
    for hi in (5, 70_000, 2**31 - 1):
        keys = rng.integers(0, hi, 20_000).astype(np.int32)
        assert np.array_equal(postings._stable_order(keys), np.argsort(keys, kind="stable"))
