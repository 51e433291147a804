"""Make ragkit/search/question_terms.json, the built-in table of question-frame words (see ragkit.search.query).

    uv run python benchmarks/question_terms.py

Learned from every question text of ../shared/bench/mmlongbench-doc (English) and the hand translations of 40 of
them into Japanese and Korean (benchmarks/data). Only how questions are phrased is kept: the share of questions
holding each term (terms in fewer than FRAME_MIN_QUESTIONS questions are dropped, so names and figures go).
benchmarks/search_eval.py reports the effect with tables learned from the other half of the questions only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import BENCH  # noqa: E402

from ragkit.search.query import _FRAME_FILE, learn_question_terms  # noqa: E402


def main() -> None:
    texts = [json.loads(line)["question"] for line in (BENCH / "questions.jsonl").read_text().splitlines() if line]
    tsv = Path(__file__).parent / "data" / "mmlongbench_questions_ja_ko.tsv"
    texts += [line.split("\t")[1] for line in tsv.read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#")]
    table = learn_question_terms(texts)
    _FRAME_FILE.write_text(json.dumps(table, ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps({"questions": table["questions"], "terms": len(table["df"]), "file": str(_FRAME_FILE)}))


if __name__ == "__main__":
    main()
