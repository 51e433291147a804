"""Ingest throughput: ragkit's PDF -> per-page markdown vs markitdown's whole-document conversion.

    uv run python benchmarks/ingest.py [--pdfs DIR] [--workers N] [--markitdown-limit N]

Ingests ../shared/bench/mmlongbench-doc/pdfs (73 PDFs, 3,194 pages) into a temporary database and prints
ONE JSON line: pages, seconds, pages_per_s, pages_without_text, failed, markitdown figures on the same
PDFs (its pages_per_s and the ratio ours/markitdown; `--markitdown-limit N` converts only the first N
PDFs, sorted by name, and the line says how many), and the peak RSS of the whole process tree in MiB
(an upper bound: this process's maxrss plus workers x the largest worker's maxrss, taken before
markitdown runs). Targets: >= 200 pages/s with headings
kept, peak RSS <= 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PDFS = REPO.parent / "shared" / "bench" / "mmlongbench-doc" / "pdfs"


def _markitdown_worker(path: str) -> tuple[int, float]:
    import pymupdf
    from markitdown import MarkItDown

    with pymupdf.open(path) as doc:
        n = doc.page_count
    t = time.perf_counter()
    MarkItDown(enable_plugins=False).convert(path)
    return n, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--markitdown-limit", type=int, default=None, help="convert only the first N PDFs")
    args = ap.parse_args()
    if not args.pdfs.is_dir():
        print(json.dumps({"skipped": f"no benchmark PDFs at {args.pdfs}"}))
        return 0
    sys.path.insert(0, str(REPO))
    from ragkit.ingest import ingest_sources

    pdfs = sorted(args.pdfs.glob("*.pdf"))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        report = ingest_sources(pdfs, db=Path(tmp) / "database", category="bench", workers=args.workers,
                                progress=False)
        ours_s = time.perf_counter() - t0
        # the ingest pool has been shut down (its workers reaped), so RUSAGE_CHILDREN covers exactly them
        self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        child_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        headings = 0
        for rel in report.written:
            text = (Path(tmp) / "database" / rel).read_text(encoding="utf-8")
            headings += sum(1 for ln in text.splitlines() if ln.startswith("#"))
    ours_pps = report.pages / ours_s if ours_s else 0.0

    # markitdown: whole documents, same process-parallelism as ours (one PDF per process)
    from concurrent.futures import ProcessPoolExecutor

    subset = pdfs if args.markitdown_limit is None else pdfs[: args.markitdown_limit]
    md_pages = 0
    t1 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers or os.cpu_count()) as pool:
        for n, _secs in pool.map(_markitdown_worker, [str(p) for p in subset]):
            md_pages += n
    md_s = time.perf_counter() - t1
    md_pps = md_pages / md_s if md_s else 0.0

    n_workers = args.workers or os.cpu_count() or 1
    print(json.dumps({
        "benchmark": "ingest",
        "pdfs": len(pdfs),
        "pages": report.pages,
        "seconds": round(ours_s, 2),
        "pages_per_s": round(ours_pps, 1),
        "workers": n_workers,
        "heading_lines": headings,
        "pages_without_text": report.pages_without_text,
        "failed": len(report.failed),
        "markitdown_pdfs": len(subset),
        "markitdown_pages": md_pages,
        "markitdown_seconds": round(md_s, 2),
        "markitdown_pages_per_s": round(md_pps, 1),
        "ratio_ours_over_markitdown": round(ours_pps / md_pps, 1) if md_pps else None,
        # upper bound for the ingest's process tree: the main process plus every worker at the largest
        # worker's peak (getrusage only reports the largest child)
        "peak_rss_mib": round((self_kib + n_workers * child_kib) / 1024, 1),
        "main_rss_mib": round(self_kib / 1024, 1),
        "largest_worker_rss_mib": round(child_kib / 1024, 1),
    }, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
