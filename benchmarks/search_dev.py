"""Retrieval on the hand-checked Japanese and Korean development sets (benchmarks/data/ja_dev.jsonl, ko_dev.jsonl),
by half, against plain BM25 over CJK character bigrams in the same run.

    uv run python benchmarks/search_dev.py --set ja [--workdir DIR] [--mode keyword|hybrid]
        [--backend embedded|opensearch [--index opensearch+http://HOST:PORT/PREFIX] [--analysis ragkit|ja|cjk|...]]

ja: the 15 PDFs of ../shared/bench/ja-public (read in place); ko: the PDFs benchmarks/make_ko_corpus.py builds
(it needs the konlpy wheel it names). The database is made under --workdir (kept between runs). One JSON line:
per half (A, B) and for all questions, page recall@1/5/10 (the share of a question's evidence pages in the
first k) and MRR (the first evidence page within 10), for ragkit and for the baseline. Tune a constant on one
half and read it on the other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import shared_bench  # noqa: E402
from search import page_map  # noqa: E402
from search_ja import BigramBM25  # noqa: E402

from ragkit.core.pagefile import parse_page  # noqa: E402
from ragkit.ingest import ingest_sources  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
JA_PDFS = shared_bench("ja-public") / "pdfs"


def questions(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{name}_dev.jsonl").read_text(encoding="utf-8").splitlines() if line]


def database(name: str, workdir: Path) -> Path:
    db = workdir / name / "database"
    if name == "ja":
        src = JA_PDFS
    else:
        src = workdir / "ko-pdfs"
        if not any(src.glob("*.pdf")):
            made = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_ko_corpus.py"), str(src)],
                                  stdout=sys.stderr)  # its listing is not the one JSON line
            if made.returncode:  # it said why on stderr
                raise SystemExit(f"the Korean corpus could not be made in {src} (see above)")
    report = ingest_sources([src], db=db, progress=False)
    if report.failed:
        raise SystemExit(f"ingest failed: {report.failed}")
    return db


def engine(args, db: Path):
    if args.backend == "embedded":
        from ragkit.search.index import Index

        idx = Index(db, progress=False)
        idx.refresh()
        if args.mode == "hybrid":  # every page's vector first: a search would rank unembedded pages by keywords
            idx.ensure_embeddings(progress=False)
        return idx
    from ragkit.search.indexconfig import parse_index
    from ragkit.search.opensearch import OpenSearchIndex

    spec = args.index or f"opensearch+{os.environ['RAG_TEST_OPENSEARCH_URL']}/ragkit-dev-{args.set}"
    idx = OpenSearchIndex(db, parse_index(spec, db), progress=False)
    embed = os.environ.get("RAG_EMBED")
    os.environ["RAG_EMBED"] = "1"  # pages are indexed with their vectors whatever the mode measured
    idx.sync(progress=False)
    os.environ["RAG_EMBED"] = embed or "1"
    return idx


def score(qs: list[dict], ranked: list[list[str]], pmap: dict) -> dict:
    out: dict = {}
    for part in ("A", "B", "all"):
        rows = []
        for q, r in zip(qs, ranked, strict=True):
            if part != "all" and q["half"] != part:
                continue
            gold = set(q["pages"])
            found = [i for i, rel in enumerate(r[:10]) if pmap.get(rel, ("", 0))[0] == q["doc"]
                     and pmap[rel][1] in gold]
            ranks = sorted({i for i in found})
            row = {f"R@{k}": len({pmap[r[i]][1] for i in ranks if i < k}) / len(gold) for k in (1, 5, 10)}
            row["MRR"] = 1.0 / (ranks[0] + 1) if ranks else 0.0
            rows.append(row)
        out[part] = {"questions": len(rows), **{m: round(sum(x[m] for x in rows) / max(len(rows), 1), 3)
                                                for m in ("R@1", "R@5", "R@10", "MRR")}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("ja", "ko"), default="ja")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ragkit-dev-sets")
    ap.add_argument("--mode", choices=("keyword", "hybrid"), default="hybrid")
    ap.add_argument("--backend", choices=("embedded", "opensearch"), default="embedded")
    ap.add_argument("--index", help="with --backend opensearch (default: RAG_TEST_OPENSEARCH_URL/ragkit-dev-SET)")
    ap.add_argument("--analysis", help="with --backend opensearch: RAG_OPENSEARCH_ANALYSIS (ragkit, ja, cjk, ...)")
    args = ap.parse_args()
    if args.analysis:
        os.environ["RAG_OPENSEARCH_ANALYSIS"] = args.analysis
    os.environ["RAG_EMBED"] = "1" if args.mode == "hybrid" else "0"
    qs = questions(args.set)
    db = database(args.set, args.workdir)
    idx = engine(args, db)
    rels = idx.pages()
    pmap = page_map(db, rels)
    t0 = time.perf_counter()
    ranked = [[h.path for h in idx.search(q["question"], k=10, mode=args.mode)] for q in qs]
    ms = (time.perf_counter() - t0) * 1000 / len(qs)
    base = BigramBM25({rel: parse_page((db / rel).read_text(encoding="utf-8"))[1] for rel in rels})
    print(json.dumps({"set": args.set, "backend": args.backend, "mode": args.mode,
                      "analysis": os.environ.get("RAG_OPENSEARCH_ANALYSIS", "ragkit") if args.backend != "embedded"
                      else "ragkit", "pages": len(rels), "query_ms_mean": round(ms, 1),
                      "ragkit": score(qs, ranked, pmap),
                      "cjk_bigram_bm25": score(qs, [base.search(q["question"], 10) for q in qs], pmap),
                      "load_avg": round(os.getloadavg()[0], 1)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
