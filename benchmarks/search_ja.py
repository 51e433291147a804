"""A small Japanese check: ragkit keyword search against plain BM25 over CJK character bigrams.

    uv run python benchmarks/search_ja.py

There is no held-out Japanese collection here. This ingests examples/corpus (a refrigerator manual, a travel
expense rule, a product briefing: written by the team, so NOT held out) and asks the Japanese questions of
examples/questions.csv that have a reference page. R@1 and MRR (first reference page within 10), one JSON line.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ragkit.core.pagefile import parse_page  # noqa: E402
from ragkit.core.paths import normalize_ref  # noqa: E402
from ragkit.core.text import detect_lang, tokenize  # noqa: E402
from ragkit.ingest import ingest_sources  # noqa: E402
from ragkit.search.index import Index  # noqa: E402


class BigramBM25:
    """Okapi BM25 (k1 1.2, b 0.75) over text.tokenize: Latin words and CJK character bigrams."""

    def __init__(self, docs: dict[str, str]):
        self.rels = list(docs)
        self.tfs = [Counter(tokenize(t)) for t in docs.values()]
        self.lens = np.array([sum(c.values()) for c in self.tfs], dtype=np.float64)
        self.df = Counter(t for c in self.tfs for t in c)

    def search(self, query: str, k: int) -> list[str]:
        n, avg = len(self.rels), self.lens.mean()
        scores = np.zeros(n)
        for t in set(tokenize(query)):
            if not self.df.get(t):
                continue
            idf = math.log1p((n - self.df[t] + 0.5) / (self.df[t] + 0.5))
            for i, c in enumerate(self.tfs):
                if t in c:
                    scores[i] += idf * c[t] * 2.2 / (c[t] + 1.2 * (0.25 + 0.75 * self.lens[i] / avg))
        top = np.argsort(-scores)[:k]
        return [self.rels[i] for i in top if scores[i] > 0]


def measure(questions: list[tuple[str, set[str]]], ranked: list[list[str]]) -> dict:
    r1 = mrr = 0.0
    for (_q, gold), rels in zip(questions, ranked, strict=True):
        ranks = [i for i, r in enumerate(rels[:10]) if r in gold]
        r1 += bool(ranks) and ranks[0] == 0
        mrr += 1 / (ranks[0] + 1) if ranks else 0.0
    return {"R@1": round(r1 / len(questions), 3), "MRR": round(mrr / len(questions), 3)}


def main() -> None:
    os.environ["RAG_EMBED"] = "0"
    work = Path(tempfile.mkdtemp(prefix="ragja-"))
    db = work / "database"
    ingest_sources([ROOT / "examples" / "corpus"], db=db, progress=False)
    rows = list(csv.DictReader((ROOT / "examples" / "questions.csv").open(encoding="utf-8-sig")))
    questions = []
    for r in rows:
        gold = {normalize_ref(p).removeprefix("database/") for p in r["Reference Document"].replace(";", "\n").split("\n")
                for p in p.split("|") if p.strip()}
        if gold and detect_lang(r["Question"]) == "ja":
            questions.append((r["Question"], gold))
    idx = Index(db, progress=False)
    idx.refresh()
    bodies = {rel: parse_page((db / rel).read_text(encoding="utf-8"))[1] for rel in idx.pages()}
    base = BigramBM25(bodies)
    out = {"part": "japanese check (examples/corpus, not held out)", "questions": len(questions),
           "pages": len(bodies),
           "ragkit_keyword": measure(questions, [[h.path for h in idx.search(q, k=10, mode="keyword")]
                                                 for q, _g in questions]),
           "cjk_bigram_bm25": measure(questions, [base.search(q, 10) for q, _g in questions])}
    idx.close()
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
