"""Folder optimization, measured honestly: held-out Ref Recall before and after `rag batch --optimize` on
MMLongBench-Doc, offline.

    uv run python benchmarks/optimize.py                 # prints ONE JSON line
    uv run python benchmarks/optimize.py --max 60        # a quick look
    uv run python benchmarks/optimize.py --enable-rl     # the loop with rollback instead of one pass

All PDFs of ../shared/bench/mmlongbench-doc/pdfs are ingested with ragkit's own ingest into ONE temporary
database (read in place, never copied into the repository). Every answerable question whose evidence pages
exist becomes a row (Question, Reference Document = its evidence pages, `;`-separated, Page). Then
`run_batch(..., optimize=True, holdout=0.5)` with the offline provider: the batch answers every question, the
optimizer copies the pages that the TRAINING half missed, and every question is asked again. Reported: Ref Recall
before/after on the training half (which named the copies: memorisation) and on the held-out half (which drove
no copy: the figure to trust). A gain of 0 on the held-out half is an honest result.

The index's dense re-ranking is off by default (RAG_EMBED=0; `--embed` keeps it): loading the embedding model
is not what is measured here.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# ../shared from a checkout next to it; ../../shared from a git worktree one level deeper
from benchdata import shared_bench  # noqa: E402

BENCH = shared_bench()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=0, help="at most this many questions (0 = all)")
    ap.add_argument("--holdout", type=float, default=0.5)
    ap.add_argument("--enable-rl", action="store_true")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--embed", action="store_true", help="keep the index's dense re-ranking")
    ap.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    ap.add_argument("--bench", type=Path, default=BENCH, help="the MMLongBench-Doc folder (pdfs/, questions.jsonl)")
    args = ap.parse_args()
    bench = args.bench.resolve()
    if not args.embed:
        os.environ["RAG_EMBED"] = "0"

    from ragkit.core.config import Settings
    from ragkit.core.pagefile import parse_page
    from ragkit.core.paths import iter_pages
    from ragkit.evaluate.batch import run_batch
    from ragkit.ingest import ingest_sources

    work = args.keep or Path(tempfile.mkdtemp(prefix="rag-optimize-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)  # Reference Documents are `database/...`, relative to the project root
    db = Path("database")
    t0 = time.perf_counter()
    ing = ingest_sources([bench / "pdfs"], db=db, progress=False)
    ingest_s = time.perf_counter() - t0

    where: dict[tuple[str, int], str] = {}
    for rel in iter_pages(db):
        meta, _ = parse_page((db / rel).read_text(encoding="utf-8"))
        where[(Path(meta.source).name if meta.source else "", int(meta.page or 0))] = f"database/{rel}"
    rows = []
    for line in (bench / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        refs = [where.get((q["doc"], p)) for p in q.get("pages") or []]
        if not q.get("answerable") or not refs or None in refs:
            continue
        rows.append([q["question"], ";".join(refs), ";".join(str(p) for p in q["pages"])])
    if args.max:
        rows = rows[: args.max]
    inp = work / "questions.csv"
    with inp.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Question", "Reference Document", "Page"])
        w.writerows(rows)

    settings = Settings(db=db, results=work / "results", provider="offline", model="offline",
                        judge_model="offline", cache=False, workers=args.workers)
    t1 = time.perf_counter()
    report = run_batch(inp, settings, optimize=not args.enable_rl, enable_rl=args.enable_rl, holdout=args.holdout,
                       progress=sys.stderr.isatty())
    batch_s = time.perf_counter() - t1
    m = report.measure
    opt = report.optimize

    def fig(name: str) -> dict:
        s = m.get(name) if m else None
        if s is None:
            return {}
        return {"before": _r(s.before), "after": _r(s.after), "questions": s.rows_after,
                "gain": None if s.before is None or s.after is None else round(s.after - s.before, 4) + 0.0}

    print(json.dumps({
        "benchmark": "optimize", "corpus": "mmlongbench-doc", "provider": "offline",
        "mode": "enable-rl" if args.enable_rl else "optimize", "holdout": args.holdout,
        "pdfs_failed": len(ing.failed), "pages": len(where), "questions": len(rows),
        "held_out_ref_recall": fig("held-out"), "train_ref_recall": fig("train"),
        "rows_analysed": opt.analysed if opt else 0, "copies_created": opt.created if opt else 0,
        "copies_kept": opt.kept if opt else 0, "errors": len(report.errors),
        "ingest_s": round(ingest_s, 1), "batch_and_optimize_s": round(batch_s, 1),
        "embed": bool(args.embed), "work": str(work) if args.keep else None,
    }, ensure_ascii=False))
    if args.keep is None:
        os.chdir(ROOT)
        shutil.rmtree(work, ignore_errors=True)  # a whole database of copies: not left in /tmp


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


if __name__ == "__main__":
    main()
