"""Where the shared benchmark data lives: read in place, never copied.

`RAG_BENCH_DIR` names a collection's folder directly; otherwise ../shared/bench/<name> is looked up from this
checkout upwards (the main checkout has it at ../shared, a worktree one or two levels further down).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared_bench(name: str = "mmlongbench-doc") -> Path:
    """The folder of the shared collection `name` (it may not exist: callers say "skipped" when it is absent)."""
    if os.environ.get("RAG_BENCH_DIR"):
        return Path(os.environ["RAG_BENCH_DIR"])
    for d in ROOT.parents:
        if (d / "shared" / "bench" / name).is_dir():
            return d / "shared" / "bench" / name
    return ROOT.parent / "shared" / "bench" / name
