"""Retrieval quality on MMLongBench-Doc, measured both ways, by document kind and on held-out halves.

    uv run python benchmarks/search_eval.py --db DIR [--mode keyword|hybrid] [--limit N] [--scope database|document]

--scope document searches each question only within its own document (MMLongBench-Doc's own setting, where the
document is given); the default searches the whole database, so the document must be found too.

DIR is a database of ../shared/bench/mmlongbench-doc/pdfs made by `rag ingest` (benchmarks/search.py --workdir
makes one). One JSON line. For every answerable question with evidence pages, over the first k results
(a result is relevant when it is a page of the question's document whose number is an evidence page):
- "page_recall@k": the share of the question's evidence pages among the first k, averaged over questions;
- "any_hit@k": 1 when any evidence page is among the first k (the measure of the README's older figures; higher
  wherever a question has several evidence pages);
- "MRR" (first relevant page within 10) and "nDCG@10" (binary gain, each evidence page once).
Figures are given for all questions, per document kind (`doc_type`: the 10-K filings are "Financial report"),
for the plain BM25 baseline of benchmarks/search.py, and for the two halves of the questions split by document
(half A: documents whose name hashes even; half B: odd): a constant tuned on one half is reported on the other.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import BENCH, PlainBM25, page_map  # noqa: E402

from ragkit.core.pagefile import parse_page  # noqa: E402
from ragkit.search import query as Q  # noqa: E402
from ragkit.search import understand as U  # noqa: E402
from ragkit.search.index import Index  # noqa: E402

KS = (1, 5, 10)


def half(doc: str) -> str:
    return "A" if hashlib.sha1(doc.encode()).digest()[0] % 2 == 0 else "B"


def per_question(q: dict, ranked: list[str], pmap: dict[str, tuple[str, int]]) -> dict[str, float]:
    gold = set(q["pages"])
    hits: list[int] = []  # ranks (0-based) of distinct evidence pages found
    seen: set[int] = set()
    for i, rel in enumerate(ranked[:10]):
        src, page = pmap.get(rel, ("", 0))
        if src == q["doc"] and page in gold and page not in seen:
            seen.add(page)
            hits.append(i)
    out = {}
    for k in KS:
        n_in = sum(1 for r in hits if r < k)
        out[f"page_recall@{k}"] = n_in / len(gold)
        out[f"any_hit@{k}"] = 1.0 if n_in else 0.0
    out["MRR"] = 1.0 / (hits[0] + 1) if hits else 0.0
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["nDCG@10"] = sum(1 / math.log2(r + 2) for r in hits) / ideal
    return out


def mean(rows: list[dict[str, float]]) -> dict:
    if not rows:
        return {"questions": 0}
    return {"questions": len(rows), **{k: round(sum(r[k] for r in rows) / len(rows), 3) for k in rows[0]}}


def report(questions: list[dict], ranked: list[list[str]], pmap: dict) -> dict:
    rows = [per_question(q, r, pmap) for q, r in zip(questions, ranked, strict=True)]
    out: dict = {"all": mean(rows)}
    for kind in sorted({q["doc_type"] for q in questions}):
        out[kind] = mean([r for q, r in zip(questions, rows, strict=True) if q["doc_type"] == kind])
    for h in "AB":
        out[f"half_{h}"] = mean([r for q, r in zip(questions, rows, strict=True) if half(q["doc"]) == h])
    out["hub"] = hub(questions, ranked, pmap)
    return out


def hub(questions: list[dict], ranked: list[list[str]], pmap: dict) -> dict:
    """The page most often in the top 5 of questions about *another* document (a "hub" that matches nearly
    every query would be in most of them): its count and share of the questions."""
    count: dict[str, int] = {}
    for q, r in zip(questions, ranked, strict=True):
        for rel in r[:5]:
            if pmap.get(rel, ("", 0))[0] != q["doc"]:
                count[rel] = count.get(rel, 0) + 1
    if not count:
        return {"page": None, "questions": 0, "share": 0.0}
    page = max(count, key=lambda p: (count[p], p))
    return {"page": page, "questions": count[page], "share": round(count[page] / len(questions), 3)}


def open_engine(args, db: Path):
    """The embedded Index, or the OpenSearch index of the same pages (synced first, its time reported)."""
    if args.backend == "embedded":
        idx = Index(db, progress=False)
        idx.refresh()
        if args.mode == "hybrid":  # every page's vector first: a search would rank unembedded pages by keywords
            idx.ensure_embeddings(progress=False)
        return idx
    from ragkit.search.indexconfig import parse_index
    from ragkit.search.opensearch import OpenSearchIndex

    url = os.environ.get("RAG_TEST_OPENSEARCH_URL")
    if not args.index and not url:
        raise SystemExit("--backend opensearch needs --index opensearch+http://HOST:PORT/PREFIX or "
                         "RAG_TEST_OPENSEARCH_URL (services/opensearch/start.sh prints it)")
    spec = args.index or f"opensearch+{url}/ragkit-bench"
    idx = OpenSearchIndex(db, parse_index(spec, db), progress=False)
    mode_env = os.environ.get("RAG_EMBED")
    os.environ["RAG_EMBED"] = "1"  # pages are indexed with their vectors whatever the mode measured
    rep = idx.sync(progress=False)
    os.environ["RAG_EMBED"] = mode_env or "1"
    print(json.dumps({"sync": {"added": rep.added, "updated": rep.updated, "deleted": rep.deleted,
                               "unchanged": rep.unchanged, "seconds": round(rep.seconds, 1),
                               "pages_per_s": round((rep.added + rep.updated) / rep.seconds, 1)
                               if rep.added + rep.updated else None}}), file=sys.stderr)
    return idx


def misspell(question: str) -> str:
    """The question with the third and fourth letters of its longest word (6 letters or more) swapped: a typo
    for measuring how the engines read one."""
    words = question.split(" ")
    i = max(range(len(words)), key=lambda j: len(words[j]) if words[j].isalpha() else 0)
    w = words[i]
    if w.isalpha() and len(w) > 5:
        words[i] = w[:2] + w[3] + w[2] + w[4:]
    return " ".join(words)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--mode", default="keyword", choices=("keyword", "hybrid"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions")
    ap.add_argument("--baseline", action="store_true", help="also the plain BM25 baseline")
    ap.add_argument("--frame", default="cross", choices=("cross", "builtin", "off"),
                    help="question-frame weights learned from the other half (default), the built-in table, none")
    ap.add_argument("--no-subtoken-cap", action="store_true")
    ap.add_argument("--no-synonyms", action="store_true")
    ap.add_argument("--frame-alpha", type=float, default=Q.FRAME_ALPHA)
    ap.add_argument("--dump", help="write per-question ranks here (JSON lines) for looking at misses")
    ap.add_argument("--scope", default="database", choices=("database", "document"),
                    help="document: each question searched only within its own document's folder (the benchmark's "
                         "own setting, where the document is given), instead of the whole database")
    ap.add_argument("--typos", action="store_true",
                    help="every question with two letters of its longest word swapped (misspell)")
    ap.add_argument("--backend", default="embedded", choices=("embedded", "opensearch"))
    ap.add_argument("--index", help="with --backend opensearch: opensearch+http://HOST:PORT/PREFIX (the pages are "
                                    "synced there first; default: RAG_TEST_OPENSEARCH_URL with prefix ragkit-bench)")
    args = ap.parse_args()
    os.environ["RAG_EMBED"] = "1" if args.mode == "hybrid" else "0"
    questions = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text().splitlines() if line]
    questions = [q for q in questions if q.get("answerable") and q.get("pages")]
    if args.limit:
        questions = questions[: args.limit]
    if args.typos:
        questions = [{**q, "question": misspell(q["question"])} for q in questions]
    db = Path(args.db)
    U.SUBTOKEN_CAP = not args.no_subtoken_cap
    U.SYNONYMS = not args.no_synonyms
    Q.FRAME_ALPHA = args.frame_alpha
    idx = open_engine(args, db)
    rels = idx.pages()
    pmap = page_map(db, rels)
    folders: dict[str, str] = {}
    for rel, (doc, _page) in pmap.items():  # a document's folder: <category>/<document>
        folders.setdefault(doc, "/".join(rel.split("/")[:2]))
    scope = (lambda q: folders.get(q["doc"])) if args.scope == "document" else (lambda q: None)
    t0 = time.perf_counter()
    if args.frame == "cross":
        # question-frame words learned from the other half's questions only (held out: no question is
        # ranked with a table that saw it or any question of its document)
        every = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text().splitlines() if line]
        tables = {h: Q.learn_question_terms(x["question"] for x in every if half(x["doc"]) != h) for h in "AB"}
        ranked = []
        for q in questions:
            Q.set_question_terms(tables[half(q["doc"])])
            ranked.append([h.path for h in idx.search(q["question"], k=10, path=scope(q), mode=args.mode)])
        Q.set_question_terms(None)
    else:
        if args.frame == "off":
            U.FRAME_WEIGHTS = False
        ranked = [[h.path for h in idx.search(q["question"], k=10, path=scope(q), mode=args.mode)]
                  for q in questions]
    out: dict = {"backend": args.backend, "mode": args.mode, "scope": args.scope, "typos": args.typos, "frame": args.frame, "subtoken_cap": U.SUBTOKEN_CAP, "synonyms": U.SYNONYMS, "frame_alpha": Q.FRAME_ALPHA, "pages": len(rels), "query_ms_mean": round(
        (time.perf_counter() - t0) * 1000 / len(questions), 1), "ragkit": report(questions, ranked, pmap)}
    if args.baseline:
        bodies = {rel: parse_page((db / rel).read_text(encoding="utf-8"))[1] for rel in rels}
        base = PlainBM25(bodies)
        out["bm25_baseline"] = report(questions, [base.search(q["question"], 10) for q in questions], pmap)
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            for q, r in zip(questions, ranked, strict=True):
                f.write(json.dumps({"id": q["id"], "q": q["question"], "doc": q["doc"], "pages": q["pages"],
                                    "kind": q["doc_type"], "got": [pmap.get(x) for x in r],
                                    **per_question(q, r, pmap)}, ensure_ascii=False) + "\n")
    out["load_avg"] = round(os.getloadavg()[0], 1)
    idx.close()
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
