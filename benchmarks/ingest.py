"""Ingest throughput: ragkit's PDF -> per-page markdown vs markitdown's whole-document conversion.

    uv run python benchmarks/ingest.py [--pdfs DIR] [--workers N] [--markitdown-limit N]

Ingests ../shared/bench/mmlongbench-doc/pdfs (73 PDFs, 3,194 pages) into a temporary database and prints
ONE JSON line: pages, seconds, pages_per_s, pages_without_text, failed, markitdown figures on the same
PDFs (its pages_per_s and the ratio ours/markitdown; `--markitdown-limit N` converts only the first N
PDFs, sorted by name, and the line says how many), and the peak RSS of the whole process tree in MiB
(an upper bound: this process's maxrss plus the sum of the workers' own maxrss, taken before markitdown
runs). Targets: >= 200 pages/s with headings
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
from benchdata import shared_bench  # noqa: E402

DEFAULT_PDFS = shared_bench() / "pdfs"


def _markitdown_worker(path: str) -> tuple[int, str | None]:
    """(pages, error) for one whole-document markitdown conversion."""
    import pymupdf
    from markitdown import MarkItDown

    with pymupdf.open(path) as doc:
        n = doc.page_count
    try:
        MarkItDown(enable_plugins=False).convert(path)
    except Exception as e:  # e.g. markitdown installed without its [pdf] extra
        return n, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return n, None


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def _ours(pdfs: list[Path], workers: int | None) -> dict:
    """Ingest `pdfs` into a fresh temporary database: figures for one run."""
    from ragkit.ingest import ingest_sources

    with tempfile.TemporaryDirectory() as tmp:
        main0 = _cpu(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        report = ingest_sources(pdfs, db=Path(tmp) / "database", category="bench", workers=workers, progress=False)
        secs = time.perf_counter() - t0
        main_cpu = _cpu(resource.RUSAGE_SELF) - main0
        headings = 0
        for rel in report.written:
            text = (Path(tmp) / "database" / rel).read_text(encoding="utf-8")
            headings += sum(1 for ln in text.splitlines() if ln.startswith("#"))
    # workers are forked by a forkserver, not by us, so RUSAGE_CHILDREN cannot see them: each worker
    # reports its own getrusage with its results (with --workers 1 the work runs in this process)
    workers = {pid: v for pid, v in report.workers.items() if pid != os.getpid()}
    return {
        "report": report, "seconds": secs, "headings": headings,
        "cpu": main_cpu + sum(c for _, c in workers.values()),
        "worker_kib": sum(k for k, _ in workers.values()),
        "largest_worker_kib": max((k for k, _ in workers.values()), default=0),
    }


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
    n_workers = args.workers or os.cpu_count() or 1

    pdfs = sorted(args.pdfs.glob("*.pdf"))
    load_before = os.getloadavg()[0]
    full = _ours(pdfs, args.workers)
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = full["report"]

    # markitdown: whole documents, the same number of processes as ours (one PDF per task)
    from concurrent.futures import ProcessPoolExecutor

    subset = pdfs if args.markitdown_limit is None else pdfs[: args.markitdown_limit]
    md_pages = 0
    md_errors: list[str] = []
    child0 = _cpu(resource.RUSAGE_CHILDREN)
    t1 = time.perf_counter()
    if subset:
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            for n, error in pool.map(_markitdown_worker, [str(p) for p in subset]):
                if error:
                    md_errors.append(error)
                else:
                    md_pages += n
    md_s = time.perf_counter() - t1
    md_cpu = _cpu(resource.RUSAGE_CHILDREN) - child0
    md_pps = md_pages / md_s if md_s and md_pages else 0.0
    # ours on exactly the PDFs markitdown converted, for a like-for-like ratio
    # (--markitdown-limit 0 skips markitdown and this second ingest: the line then times ours alone)
    same = full if len(subset) == len(pdfs) else _ours(subset, args.workers) if subset else None
    same_pps = same["report"].pages / same["seconds"] if same and same["seconds"] else 0.0
    load_after = os.getloadavg()[0]

    print(json.dumps({
        "benchmark": "ingest",
        "pdfs": len(pdfs),
        "pages": report.pages,
        "seconds": round(full["seconds"], 2),
        "pages_per_s": round(report.pages / full["seconds"], 1),
        "workers": n_workers,
        # the machine is shared by other jobs: CPU seconds say what the run itself cost, and
        # pages / (CPU seconds / workers) estimates the rate on otherwise idle cores
        "cpu_seconds": round(full["cpu"], 1),
        "pages_per_cpu_s": round(report.pages / full["cpu"], 1) if full["cpu"] else None,
        "pages_per_s_idle_estimate": round(report.pages * n_workers / full["cpu"], 1) if full["cpu"] else None,
        "load_avg_1m": [round(load_before, 1), round(load_after, 1)],
        "heading_lines": full["headings"],
        "pages_without_text": report.pages_without_text,
        "failed": len(report.failed),
        "markitdown_pdfs": len(subset),
        "markitdown_pages": md_pages,
        "markitdown_seconds": round(md_s, 2),
        "markitdown_failed": len(md_errors),
        "markitdown_first_error": md_errors[0] if md_errors else None,
        "markitdown_pages_per_s": round(md_pps, 1),
        "markitdown_pages_per_cpu_s": round(md_pages / md_cpu, 1) if md_cpu and md_pages else None,
        "ours_on_same_pdfs_pages_per_s": round(same_pps, 1),
        "ratio_ours_over_markitdown": round(same_pps / md_pps, 1) if md_pps else None,
        "ratio_ours_over_markitdown_cpu": (
            round((same["report"].pages / same["cpu"]) / (md_pages / md_cpu), 1)
            if same and md_cpu and md_pages and same["cpu"] else None
        ),
        # upper bound for the ingest's process tree: main process + the sum of every worker's own peak
        # (the idle forkserver, which only imports ragkit.ingest, is not included)
        "peak_rss_mib": round((self_kib + full["worker_kib"]) / 1024, 1),
        "main_rss_mib": round(self_kib / 1024, 1),
        "largest_worker_rss_mib": round(full["largest_worker_kib"] / 1024, 1),
    }, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
