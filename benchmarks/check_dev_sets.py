"""Check the hand-written development sets (benchmarks/data/ja_dev.jsonl, ko_dev.jsonl) against the PDFs.

Each question's `checked` field quotes the words that answer it as  p<page> ⟦...⟧ ; this re-reads those pages
(PyMuPDF text, spaces between CJK characters removed, NFKC, all white space dropped) and fails if a quote is not on
the page it names. It also prints the counts by kind, half and document, the pages outside the evidence where a
quote also appears (to review: a fact on several pages should list them all), and how many questions share no
long run of characters with their evidence quotes (paraphrased questions).

    uv run python benchmarks/check_dev_sets.py [--ko-dir /tmp/ragkit-ko-corpus]

The Japanese PDFs are read in place from ../shared/bench/ja-public/pdfs; the Korean ones are made by
benchmarks/make_ko_corpus.py. A set whose PDFs are absent is skipped with a message.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import unicodedata
from difflib import SequenceMatcher
from pathlib import Path

import fitz  # PyMuPDF

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdata import shared_bench  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
KINDS = {"fact", "number", "definition", "procedure", "table", "paraphrase", "multi-page", "period"}
FIELDS = ["id", "question", "answer", "doc", "pages", "half", "kind", "checked"]
CJK = r"[\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef]"
QUOTE = re.compile(r"p(\d+) ⟦(.*?)⟧")


def norm(s: str) -> str:
    s = re.sub(rf"(?<={CJK})\s+(?={CJK})", "", s)
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", s))


def longest_common(a: str, b: str) -> int:
    m = SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return m.size


def check(name: str, pdf_dir: Path, paraphrase_run: int) -> int:
    path = DATA / f"{name}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    docs = sorted({r["doc"] for r in rows})
    if not all((pdf_dir / d).is_file() for d in docs):
        print(f"{name}: skipped, PDFs not found in {pdf_dir}")
        return 0
    pages = {d: [norm(p.get_text()) for p in fitz.open(pdf_dir / d)] for d in docs}
    errors, paraphrased = 0, 0
    seen = set()
    for r in rows:
        problems = []
        if list(r) != FIELDS:
            problems.append(f"fields {list(r)}")
        if r["id"] in seen:
            problems.append("duplicate id")
        seen.add(r["id"])
        if r["half"] not in ("A", "B") or r["kind"] not in KINDS:
            problems.append(f"half/kind {r['half']}/{r['kind']}")
        quotes = [(int(p), q) for p, q in QUOTE.findall(r["checked"])]
        if not r["checked"].startswith("by hand: ") or not quotes:
            problems.append("no quotes in checked")
        if sorted({p for p, _ in quotes}) != r["pages"]:
            problems.append(f"quoted pages {sorted({p for p, _ in quotes})} != pages {r['pages']}")
        for p, q in quotes:
            nq = norm(q)
            if not 1 <= p <= len(pages[r["doc"]]) or nq not in pages[r["doc"]][p - 1]:
                problems.append(f"p{p} does not contain ⟦{q[:40]}⟧")
            elif len(nq) >= 12:
                elsewhere = [i + 1 for i, t in enumerate(pages[r["doc"]]) if nq in t and i + 1 not in r["pages"]]
                if elsewhere:
                    print(f"  note {r['id']}: ⟦{q[:30]}⟧ also on p{elsewhere}")
        if max((longest_common(norm(r["question"]), norm(q)) for _, q in quotes), default=0) < paraphrase_run:
            paraphrased += 1
        for p in problems:
            print(f"  ERROR {r['id']}: {p}")
        errors += len(problems)
    print(f"{name}: {len(rows)} questions, {len(docs)} documents, {errors} errors")
    for key in ("kind", "doc"):
        table = collections.defaultdict(collections.Counter)
        for r in rows:
            table[r[key]][r["half"]] += 1
        print(f"  by {key}: " + ", ".join(f"{k} {v['A']}+{v['B']}" for k, v in sorted(table.items())))
    halves = collections.Counter(r["half"] for r in rows)
    print(f"  halves: A {halves['A']}, B {halves['B']}")
    print(f"  {paraphrased}/{len(rows)} questions share no run of {paraphrase_run}+ characters with their evidence quotes")
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ja-dir", type=Path, default=shared_bench("ja-public") / "pdfs")
    ap.add_argument("--ko-dir", type=Path, default=Path("/tmp/ragkit-ko-corpus"))
    a = ap.parse_args(argv)
    errors = check("ja_dev", a.ja_dir, paraphrase_run=6) + check("ko_dev", a.ko_dir, paraphrase_run=6)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
