"""Speed and size of `rag compare` and `rag report` on two synthetic runs of N questions (default 2,000).

    uv run python benchmarks/report.py [N]

Prints one JSON line: seconds to read both CSVs, to compare them, to build the report; the HTML size.
"""

from __future__ import annotations

import csv
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from ragkit.evaluate.runs import load_runs
from ragkit.reports.compare import compare_runs
from ragkit.reports.html import build_report

COLS = ["Question", "Ground Truth", "Reference Document", "Checklist", "RAG Answer", "Retrieved Files",
        "Checklist Recall", "Checklist Precision", "Checklist TP", "Checklist FP", "Checklist FN", "Ref Recall",
        "Ref Precision", "Evaluation Reason", "Judge Overall", "Judge Passed", "Contain Match", "Refused",
        "Input Tokens", "Output Tokens", "Cost USD", "Latency ms", "Error"]


def _write(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8-sig", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLS)
        w.writeheader()
        for i in range(n):
            doc = f"database/cat{i % 7}/doc{i % 73}/sec/page_{i % 40 + 1:03d}.md"
            rr = rng.choice(["0.0", "0.5", "1.0", "1.0"])
            w.writerow({"Question": f"question {i} about {doc}", "Ground Truth": "an answer " * 5,
                        "Reference Document": doc, "Checklist": "point one\npoint two",
                        "RAG Answer": "the answer text " * 30, "Retrieved Files": doc, "Checklist Recall": rr,
                        "Checklist Precision": rr, "Checklist TP": "1", "Checklist FP": "0", "Checklist FN": "1",
                        "Ref Recall": rr, "Ref Precision": "1.0", "Evaluation Reason": "checklist 1/2 covered",
                        "Judge Overall": f"{rng.random():.2f}", "Judge Passed": rng.choice(["True", "False"]),
                        "Contain Match": rng.choice(["True", "False"]), "Refused": "False",
                        "Input Tokens": "1500", "Output Tokens": "90", "Cost USD": "0.000300",
                        "Latency ms": str(rng.randint(800, 9000)), "Error": ""})


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.csv", Path(tmp) / "b.csv"
        _write(a, n, 1)
        _write(b, n, 2)
        t0 = time.perf_counter()
        runs = load_runs([a, b])
        t1 = time.perf_counter()
        cmp = compare_runs(*runs)
        t2 = time.perf_counter()
        html = build_report(runs, Path(tmp))
        t3 = time.perf_counter()
    print(json.dumps({"questions": n, "read_s": round(t1 - t0, 2), "compare_s": round(t2 - t1, 2),
                      "report_s": round(t3 - t2, 2), "html_bytes": len(html.encode("utf-8")),
                      "paired": cmp.paired, "worse": len(cmp.worse), "better": len(cmp.better)}))


if __name__ == "__main__":
    main()
