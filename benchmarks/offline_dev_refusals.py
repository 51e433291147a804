"""Offline refusals on the hand-checked Japanese and Korean development sets (benchmarks/data/ja_dev.jsonl,
ko_dev.jsonl): every question there is answerable, so each refusal is a question the offline engine should have
answered. Beside them, the 40 general-knowledge questions of offline_refusals.py translated into the same language
(benchmarks/data/general_knowledge_ja.txt, _ko.txt), which the database cannot answer: each should be refused.
Never used to tune the refusal constants (benchmarks/offline_refusals.py tunes them on English).

    uv run python benchmarks/offline_dev_refusals.py --set ja|ko [--workdir DIR]

The database is search_dev.py's (the same --workdir keeps it between runs). Prints ONE JSON line: per half (A, B)
and for all questions, the share refused with the engine as it runs (the meaning check on, when the embedding
model is installed) and on words alone (the same analyses scored without the meaning check, as
offline_refusals.py's words_only does), plus how many were refused because they point at one document without
naming it, and the ids refused; then the same counts for the general-knowledge questions ("cannot_answer";
halves: odd and even line numbers, as offline_refusals.py splits them) and the ones answered.
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

DATA = Path(__file__).resolve().parent / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("ja", "ko"), default="ja")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ragkit-dev-sets")
    args = ap.parse_args()
    qs = questions(args.set)
    db = database(args.set, args.workdir)
    index = open_index(db, progress=False)
    rows = [ask(q["id"], q["half"], q["question"], index, db) for q in qs]
    gk_lines = [line.strip() for line in (DATA / f"general_knowledge_{args.set}.txt").read_text(
        encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]
    gk = [ask(f"gk_{i:02d}", "A" if i % 2 == 0 else "B", text, index, db) for i, text in enumerate(gk_lines)]
    out: dict = {"set": args.set, "questions": len(rows),
                 "meaning_check": all(r["measured_meaning"] for r in rows + gk if r["quoted"])}
    out |= counts(rows)
    out["refused_which_document"] = sum(r["refused"] and r["which_document"] for r in rows)
    out["refused_ids"] = [r["id"] for r in rows if r["refused"]]
    out["cannot_answer"] = {"questions": len(gk), **counts(gk),
                            "answered_ids": [r["id"] for r in gk if not r["refused"]]}
    print(json.dumps(out, ensure_ascii=False))


def ask(qid: str, half: str, question: str, index, db: Path) -> dict:
    an = offline._analyse(question, index, db, 5)
    words = dataclasses.replace(an, support=None)
    return {"id": qid, "half": half, "refused": offline.RULE.refuses(an, bool(an.chosen)),
            "refused_words_only": offline.RULE.refuses(words, bool(words.chosen)),
            "which_document": bool(an.ambiguous), "quoted": bool(an.chosen),
            "measured_meaning": an.support is not None}


def counts(rows: list[dict]) -> dict:
    out = {}
    for part in ("A", "B", "all"):
        sub = [r for r in rows if part == "all" or r["half"] == part]
        out[part] = {"questions": len(sub), "refused": sum(r["refused"] for r in sub),
                     "refused_words_only": sum(r["refused_words_only"] for r in sub),
                     "refused_share": round(sum(r["refused"] for r in sub) / max(len(sub), 1), 3)}
    return out


if __name__ == "__main__":
    main()
