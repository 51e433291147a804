"""Offline refusals on the hand-checked Japanese and Korean development sets (benchmarks/data/ja_dev.jsonl,
ko_dev.jsonl): every question there is answerable, so each refusal is a question the offline engine should have
answered. Never used to tune the refusal constants (benchmarks/offline_refusals.py tunes them on English).

    uv run python benchmarks/offline_dev_refusals.py --set ja|ko [--workdir DIR]

The database is search_dev.py's (the same --workdir keeps it between runs). Prints ONE JSON line: per half (A, B)
and for all questions, the share refused with the engine as it runs (the meaning check on, when the embedding
model is installed) and on words alone (the same analyses scored without the meaning check, as
offline_refusals.py's words_only does), plus how many were refused because they point at one document without
naming it, and the ids refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_dev import database, questions  # noqa: E402

from ragkit.answer.extractive import engine as offline  # noqa: E402
from ragkit.search import open_index  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("ja", "ko"), default="ja")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ragkit-dev-sets")
    args = ap.parse_args()
    qs = questions(args.set)
    db = database(args.set, args.workdir)
    index = open_index(db, progress=False)
    rows = []
    for q in qs:
        an = offline._analyse(q["question"], index, db, 5)
        words = dataclasses.replace(an, support=None)
        rows.append({"id": q["id"], "half": q["half"], "refused": offline.RULE.refuses(an, bool(an.chosen)),
                     "refused_words_only": offline.RULE.refuses(words, bool(words.chosen)),
                     "which_document": bool(an.ambiguous), "quoted": bool(an.chosen),
                     "measured_meaning": an.support is not None})
    out: dict = {"set": args.set, "questions": len(rows),
                 "meaning_check": all(r["measured_meaning"] for r in rows if r["quoted"])}
    for part in ("A", "B", "all"):
        sub = [r for r in rows if part == "all" or r["half"] == part]
        out[part] = {"questions": len(sub), "refused": sum(r["refused"] for r in sub),
                     "refused_words_only": sum(r["refused_words_only"] for r in sub),
                     "refused_share": round(sum(r["refused"] for r in sub) / max(len(sub), 1), 3)}
    out["refused_which_document"] = sum(r["refused"] and r["which_document"] for r in rows)
    out["refused_ids"] = [r["id"] for r in rows if r["refused"]]
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
