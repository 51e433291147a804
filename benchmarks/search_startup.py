"""What one `rag search` call spends its time on: import, index open, model load, query; and the whole call.

    uv run python benchmarks/search_startup.py --db DIR [--query TEXT] [--runs 3]

DIR: an ingested database (e.g. the MMLongBench-Doc one of benchmarks/search.py --workdir). Each figure is the
median of --runs fresh processes (warm: the cache and snapshot exist, the files are in the page cache). One JSON
line. Compare figures within one run only: the machine is shared.

Python's bytecode cache is on in the measured processes, as on a user's machine: a second `rag` call loads the
compiled modules from `__pycache__`. Some environments set PYTHONDONTWRITEBYTECODE=1 (this sandbox does), which
makes every process compile every module from source again; the `*_no_bytecode_cache_ms` figures show that cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PARTS = r"""
import json, os, sys, time
t0 = time.perf_counter()
import ragkit.cli  # noqa: F401
from ragkit.search.index import Index
from ragkit.search import vectors
t1 = time.perf_counter()
idx = Index(sys.argv[1], progress=False)
idx.refresh()
t2 = time.perf_counter()
idx.search(sys.argv[2], k=10, mode="keyword")
t3 = time.perf_counter()
emb = vectors.get_embedder()
t4 = time.perf_counter()
hybrid = None
if emb is not None:
    idx.search(sys.argv[2], k=10, mode="hybrid")
    hybrid = round((time.perf_counter() - t4) * 1000)
print(json.dumps({"import_ms": round((t1 - t0) * 1000), "open_ms": round((t2 - t1) * 1000),
                  "keyword_query_ms": round((t3 - t2) * 1000), "model_load_ms": round((t4 - t3) * 1000),
                  "hybrid_query_ms": hybrid, "pages": len(idx.pages())}))
"""


def wall(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--query", default="What is the revenue growth in fiscal 2019?")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ, RAG_EMBED="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    for _ in range(2):  # warm-up: bytecode, tokenizer cache, snapshot, page cache
        subprocess.run([py, "-m", "ragkit.cli", "search", args.query, "--db", args.db], env=env, cwd=ROOT,
                       capture_output=True)
    parts = [json.loads(subprocess.run([py, "-c", PARTS, args.db, args.query], env=env, cwd=ROOT, check=True,
                                       capture_output=True, text=True).stdout) for _ in range(args.runs)]
    out: dict = {k: statistics.median(p[k] for p in parts) if parts[0][k] is not None else None for k in parts[0]}
    out["cli_import_only_ms"] = round(statistics.median(
        wall([py, "-c", "import ragkit.cli"], env) for _ in range(args.runs)))
    for mode, flag in (("keyword", "0"), ("hybrid", "1")):
        e = dict(env, RAG_EMBED=flag)
        out[f"rag_search_{mode}_ms"] = round(statistics.median(
            wall([py, "-m", "ragkit.cli", "search", args.query, "--db", args.db], e) for _ in range(args.runs)))
        e["PYTHONDONTWRITEBYTECODE"] = "1"
        e["PYTHONPYCACHEPREFIX"] = os.path.join(os.path.dirname(args.db) or ".", ".no-pycache")  # an empty cache
        out[f"rag_search_{mode}_no_bytecode_cache_ms"] = round(statistics.median(
            wall([py, "-m", "ragkit.cli", "search", args.query, "--db", args.db], e) for _ in range(args.runs)))
    out["goal_hybrid_under_1500ms"] = out["rag_search_hybrid_ms"] < 1500
    out["goal_keyword_under_800ms"] = out["rag_search_keyword_ms"] < 800
    out["load_avg"] = round(os.getloadavg()[0], 1)
    out["cores"] = os.cpu_count()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
