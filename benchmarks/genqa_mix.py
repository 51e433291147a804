"""Offline `rag genqa` on four real documents: how many questions, of which kinds, from which documents.

    uv run python benchmarks/genqa_mix.py [--pdfs DIR] [--max 12 30] [--keep DIR]

Ingests four MMLongBench-Doc PDFs of different kinds (read in place from ../shared/bench/mmlongbench-doc/pdfs):
a 10-K filing, a Pew survey report, a watch manual and an ACL paper, into a temporary database, runs the
offline generator with each --max, and prints ONE JSON line: per --max the questions written, the counts and
shares per kind, how many documents each kind covers (an unanswerable question covers the document it names),
the notes, how many candidates the grammar check dropped (`dropped.ungrammatical`) and how many written
questions it rejects (`grammar_failures`, 0 when the generator applies it).
`--keep DIR` copies the CSVs there to read them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from benchdata import shared_bench  # noqa: E402

DOCS = {  # kind -> file name in the shared collection
    "filing": "3M_2018_10K.pdf",
    "survey": "PIP_Seniors-and-Tech-Use_040314.pdf",
    "manual": "watch_d.pdf",
    "paper": "2023.acl-long.386.pdf",
}


def _check():
    """The grammar check the generator applies, or None on a checkout that has none."""
    try:
        from ragkit.genqa.grammar import question_problem
    except ImportError:
        return None
    return question_problem


def _documents(q, docs: dict[str, str]) -> set[str]:
    """The kinds of document (keys of `docs`) a question is about: those of its pages, or for an unanswerable
    question the document it names ("..., according to 3M 2018 10K?")."""
    stems = {Path(name).stem: kind for kind, name in docs.items()}
    found = {stems.get(ref.split("/")[1], ref.split("/")[1]) for ref in q.refs}
    if not q.refs:
        found |= {kind for stem, kind in stems.items()
                  if q.question.endswith(f"according to {re.sub(r'[_ ]+', ' ', stem).strip()}?")}
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdfs", type=Path, default=shared_bench() / "pdfs")
    ap.add_argument("--max", type=int, nargs="+", default=[12, 30])
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    pdfs = {kind: args.pdfs / name for kind, name in DOCS.items()}
    missing = [str(p) for p in pdfs.values() if not p.is_file()]
    if missing:
        print(json.dumps({"skipped": f"shared PDFs absent: {', '.join(missing)}"}))
        return

    from ragkit import genqa
    from ragkit.core.config import Settings
    from ragkit.search.backend import ingest_into

    check = _check()
    out: dict = {"docs": DOCS, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "database"
        ing, _ = ingest_into(list(pdfs.values()), db=db, category="bench", progress=False, workers=2)
        out["pages_ingested"] = ing.pages
        for n in args.max:
            settings = Settings(db=db, results=Path(tmp) / "results", provider="offline", cache=False)
            r = genqa.generate_questions(db, settings, max_questions=n, progress=False)
            per_doc: dict[str, Counter] = {kind: Counter() for kind in DOCS}
            for q in r.questions:
                for kind in _documents(q, DOCS):
                    per_doc[kind][q.kind] += 1
            bad = [q.question for q in r.questions if check and check(q.question, q.lang)]
            counts = r.counts()
            out["runs"][str(n)] = {
                "written": len(r.questions),
                "kinds": counts,
                "shares": {k: round(counts[k] / max(len(r.questions), 1), 3) for k in ("multi", "unanswerable")},
                "documents_covered": {k: sum(1 for v in per_doc.values() if v[k]) for k in ("single", "multi",
                                                                                           "unanswerable")},
                "per_document": {k: dict(v) for k, v in per_doc.items()},
                "documents_with_questions": sum(1 for v in per_doc.values() if v),
                "dropped": dict(r.dropped),
                "grammar_failures": len(bad) if check else None,
                "grammar_failure_examples": bad[:5],
                "notes": r.notes,
            }
            if args.keep and r.path:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(r.path, args.keep / f"max{n}_{r.path.name}")
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
