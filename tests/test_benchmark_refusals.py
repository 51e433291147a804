"""benchmarks/offline_refusals.py end to end on a tiny collection laid out as ../shared/bench/mmlongbench-doc
is (pdfs/ and questions.jsonl; RAG_BENCH_DIR points at it): the JSON line's groups, halves and goals, and the
engine's refusals of what the database cannot answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pymupdf

REPO = Path(__file__).resolve().parents[1]

DOCS = {
    "ACME_2020_10K.pdf": ("Financial report", [
        "ACME Corporation Annual Report 2020. Item 7. Results of operations. Revenues were $4,200 million in "
        "fiscal 2020, up from $3,900 million in fiscal 2019. Net income was $310 million in fiscal 2020.",
        "Item 8. Balance sheet. Total assets were $9,800 million and long-term debt was $2,100 million at the "
        "end of fiscal 2020. The company operates 412 warehouses in North America."]),
    "BETA_2021_10K.pdf": ("Financial report", [
        "Beta Industries Annual Report 2021. Revenues were $1,250 million in fiscal 2021. Research and "
        "development expense was $95 million in fiscal 2021.",
        "Dividends. The board declared a dividend of $0.40 per share in fiscal 2021."]),
    "watch_manual.pdf": ("Guidebook", [
        "Smart watch user guide. Charging: the watch is fully charged within two hours. Press the side button "
        "twice to open the workout list.",
        "Heart rate: the watch measures your heart rate every ten minutes during sleep."]),
}
QUESTIONS = [
    ("ACME_2020_10K.pdf", "What were ACME's revenues in fiscal 2020?", "$4,200 million", [1], True),
    ("ACME_2020_10K.pdf", "How many warehouses does ACME operate?", "412", [2], True),
    ("ACME_2020_10K.pdf", "What was ACME's long-term debt at the end of fiscal 2020?", "$2,100 million", [2], True),
    ("ACME_2020_10K.pdf", "What was ACME's net income in fiscal 2020?", "$310 million", [1], True),
    ("BETA_2021_10K.pdf", "What was Beta's research and development expense in fiscal 2021?", "$95 million", [1],
     True),
    ("BETA_2021_10K.pdf", "What dividend per share did Beta declare in fiscal 2021?", "$0.40", [2], True),
    ("BETA_2021_10K.pdf", "What was Beta's dividend in fiscal 2016?", "Not answerable", [], False),
    ("watch_manual.pdf", "How long does it take to fully charge the smart watch?", "two hours", [1], True),
    ("watch_manual.pdf", "How often does the watch measure heart rate during sleep?", "every ten minutes", [2],
     True),
    ("watch_manual.pdf", "What happens when you press the side button twice?", "workout list", [1], True),
    ("watch_manual.pdf", "What is the battery capacity of the watch in mAh?", "Not answerable", [], False),
]


def make_bench(root: Path) -> Path:
    (root / "pdfs").mkdir(parents=True)
    for name, (_, pages) in DOCS.items():
        doc = pymupdf.open()
        for text in pages:
            doc.new_page().insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=11)
        doc.save(root / "pdfs" / name)
    with (root / "questions.jsonl").open("w", encoding="utf-8") as fh:
        for i, (doc, q, a, pages, ok) in enumerate(QUESTIONS):
            fh.write(json.dumps({"id": f"t_{i:04d}", "question": q, "answer": a, "doc": doc, "pages": pages,
                                 "doc_type": DOCS[doc][0] + " / x", "answerable": ok,
                                 "evidence_sources": ["Pure-text (Plain-text)"]}) + "\n")
    return root


def test_the_refusal_benchmark_reports_held_out_groups_and_refuses_what_the_database_cannot_answer(tmp_path):
    bench = make_bench(tmp_path / "bench")
    env = {**os.environ, "RAG_BENCH_DIR": str(bench), "RAG_EMBED": "0"}
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "offline_refusals.py"), "--db-dir",
                           str(tmp_path / "db"), "--save", str(tmp_path / "rows.jsonl")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    out = json.loads(line)
    assert out["benchmark"] == "offline-refusals" and out["documents"] == 2 and out["ingest_failed"] == 0
    assert out["groups"] == {"own_answerable": 6, "own_unanswerable": 1, "other_collection": 4,
                             "general_knowledge": 40}
    assert "tuned on the even-numbered questions" in out["measure"]
    held = out["current"]["held_out"]
    assert held["own_answerable"]["n"] == 3 and held["general_knowledge"]["n"] == 20
    # two annual reports cannot answer trivia, a watch manual's questions or a figure for a year they never name
    every = out["current"]["all"]
    assert every["general_knowledge"]["refused"] >= 0.9, every
    assert every["other_collection"]["refused"] >= 0.75, every
    assert every["own_unanswerable"]["refused"] == 1.0, every
    assert every["own_answerable"]["refused"] <= 0.34, every  # at most 2 of its 6 own questions
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 51 and {r["group"] for r in rows} >= {"own_answerable", "general_knowledge"}
    # the same figures again from the saved analysis
    again = subprocess.run([sys.executable, str(REPO / "benchmarks" / "offline_refusals.py"), "--load",
                            str(tmp_path / "rows.jsonl")], env=env, capture_output=True, text=True, timeout=600)
    assert json.loads(again.stdout)["current"]["all"] == every


def test_the_general_knowledge_questions_are_translated_line_for_line():
    """offline_dev_refusals.py asks general_knowledge_ja/ko.txt as the cannot-answer group of each language: the
    same 40 questions in the same order, each written in its language (a figure or a Latin name may stay)."""
    def questions(name: str) -> list[str]:
        text = (REPO / "benchmarks" / "data" / name).read_text(encoding="utf-8")
        return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]

    en = questions("general_knowledge.txt")
    ja, ko = questions("general_knowledge_ja.txt"), questions("general_knowledge_ko.txt")
    assert len(en) == len(ja) == len(ko) == 40
    assert all(any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" for c in q) for q in ja)
    assert all(any("\uac00" <= c <= "\ud7af" for c in q) for q in ko)
    # the years a question names (what the year rule reads) are the same in every language
    def years(q: str) -> list[str]:
        return re.findall(r"(?<!\d)(?:19|20)\d\d(?!\d)", q)

    for e, j, k in zip(en, ja, ko, strict=True):
        assert years(e) == years(j) == years(k), (e, j, k)
