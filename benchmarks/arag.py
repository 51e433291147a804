"""Benchmark of issue 35: agent, arag, naive and longctx head to head on MMLongBench-Doc, offline, through `rag batch`
(so the figures are the results CSVs' own), plus the summarization items `rag genqa --task summarization` writes.

Prints one JSON line per strategy and task, then one with the paths of the results and of `rag report`'s HTML:

- QA (the questions of the first --docs documents of questions.jsonl): page recall (a required page cited: the
  row's Ref Recall > 0; and the mean Ref Recall), Contain-Match over the answerable questions (the batch's
  Contain Match column: the normalised ground truth is a substring of the answer's words), refusals of the
  unanswerable ones, Max Loops Reached, seconds.
- summarization (offline items from genqa on the same database): ROUGE-2 F1, page recall and precision, words.

    uv run python benchmarks/arag.py [--docs 8] [--db-dir DIR] [--strategies agent,arag,naive,longctx]

Offline, agent, naive and synth are one extractive engine (they differ only with a model); arag runs its
tools once and longctx its long context, each with the engine over what they retrieved.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchdata import shared_bench  # noqa: E402

from ragkit.core.config import Settings  # noqa: E402
from ragkit.core.pagefile import parse_page  # noqa: E402
from ragkit.core.paths import reference_path, resolve_in_db  # noqa: E402

BENCH = shared_bench()


def build(db_dir: Path, n_docs: int) -> tuple[Path, Path, int]:
    """The database of the first `n_docs` documents (PDFs read in place) and a question CSV of their questions."""
    import pandas as pd

    from ragkit.ingest import ingest_sources
    from ragkit.search import open_index

    qs = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line]
    docs: list[str] = []
    for q in qs:
        if q["doc"] not in docs:
            docs.append(q["doc"])
    docs = docs[:n_docs]
    db = db_dir / "database"
    report = ingest_sources([BENCH / "pdfs" / d for d in docs], db=db, progress=False)
    if report.failed:
        print(f"ingest failures: {report.failed}", file=sys.stderr)
    index = open_index(db, progress=False)
    where: dict[tuple[str, int], str] = {}
    for rel in index.pages():
        meta, _ = parse_page(resolve_in_db(db, rel).read_text(encoding="utf-8", errors="replace"))
        where[(Path(meta.source).name, meta.page)] = reference_path(db, rel)
    rows = []
    for q in qs:
        if q["doc"] not in docs:
            continue
        refs = [where[(q["doc"], p)] for p in q["pages"] if (q["doc"], p) in where] if q["answerable"] else []
        if q["answerable"] and not refs:
            continue  # evidence on pages this ingest has no text for
        rows.append({"Question": q["question"], "Ground Truth": str(q["answer"]), "Reference Document": "\n".join(refs)})
    csv = db_dir / "mmlb_qa.csv"
    pd.DataFrame(rows).to_csv(csv, index=False, encoding="utf-8")
    return db, csv, len(index.pages())


def measure(csv: Path, db: Path, results: Path, strategy: str, task: str) -> dict:
    from ragkit.evaluate import batch as B
    from ragkit.evaluate.metrics import parse_number

    settings = Settings(db=db, results=results, provider="offline", model="offline", judge_model="offline",
                        workers=2)
    t0 = time.perf_counter()
    rep = B.run_batch(csv, settings, strategy=strategy, progress=False)
    wall = time.perf_counter() - t0
    rows = [r for r in rep.rows if not r.get("Error")]

    def mean(col: str, keep=lambda r: True) -> float | None:
        vs = [v for r in rows if keep(r) and (v := parse_number(r.get(col))) is not None]
        return round(sum(vs) / len(vs), 4) if vs else None

    answerable = [r for r in rows if str(r.get("Reference Document") or "").strip()]
    out = {"strategy": strategy, "task": task, "rows": len(rep.rows), "errors": len(rep.errors),
           "results": str(rep.results_path), "wall_s": round(wall, 1)}
    if task == "qa":
        n = len(answerable)
        out.update({
            "answerable": n, "unanswerable": len(rows) - n,
            "page_recall_any": round(sum((parse_number(r.get("Ref Recall")) or 0) > 0 for r in answerable) / n, 4)
            if n else None,
            "page_recall_mean": mean("Ref Recall", lambda r: r in answerable),
            "contain_match": mean("Contain Match", lambda r: r in answerable),
            "refused_unanswerable": mean("Refused", lambda r: r not in answerable),
            "refused_answerable": mean("Refused", lambda r: r in answerable),
            "max_loops_reached": mean("Max Loops Reached"),
        })
    else:
        out.update({"rouge2_f1": mean("ROUGE-2 F1"), "page_recall": mean("Ref Recall"),
                    "page_precision": mean("Ref Precision"), "words": mean("Word Count"),
                    "geval": "not measured (offline)"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=8, help="the first N documents of questions.jsonl")
    ap.add_argument("--db-dir", type=Path, default=Path("/tmp/ragkit-arag-bench"))
    ap.add_argument("--strategies", default="agent,arag,naive,longctx")
    ap.add_argument("--summaries", type=int, default=8, help="summarization items (0: none)")
    args = ap.parse_args(argv)
    if not (BENCH / "questions.jsonl").is_file():
        print(json.dumps({"skipped": f"{BENCH} not found"}))
        return 0
    from ragkit.genqa import generate_questions
    from ragkit.reports.html import write_report

    args.db_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    db, csv, pages = build(args.db_dir, args.docs)
    print(json.dumps({"docs": args.docs, "pages": pages, "build_s": round(time.perf_counter() - t0, 1)}), flush=True)
    results = args.db_dir / "results"
    tasks = [("qa", csv)]
    if args.summaries:
        g = generate_questions(db, Settings(db=db, results=args.db_dir, provider="offline"),
                               max_questions=args.summaries, task="summarization", progress=False)
        tasks.append(("summarization", g.path))
    paths = {}
    for task, path in tasks:
        for s in args.strategies.split(","):
            line = measure(path, db, results, s, task)
            paths[f"{task}:{s}"] = line["results"]
            print(json.dumps(line, ensure_ascii=False), flush=True)
    reports = {}
    for task, _ in tasks:
        out = args.db_dir / f"report_{task}.html"
        write_report([paths[f"{task}:{s}"] for s in args.strategies.split(",")], out, overwrite=True,
                     labels=args.strategies.split(","))
        reports[task] = str(out)
    print(json.dumps({"reports": reports}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
