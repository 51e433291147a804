"""`rag genqa` on the bundled sample corpus (examples/corpus, ingested once per session), its CSV through
`rag batch --provider offline`, and genqa from a PDF path (ingested first)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_genqa import check_questions, offline_settings

from ragkit import genqa
from ragkit.core.csvio import read_csv, split_multi

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "corpus"


def test_offline_on_sample_corpus_is_honest_mixed_and_deterministic(sample_db_copy):
    a = genqa.generate_questions(sample_db_copy, offline_settings(), max_questions=30, progress=False)
    assert a.errors == [] and 26 <= len(a.questions) <= 30
    if len(a.questions) < 30:  # a shortfall is said, never padded
        assert any(f"{len(a.questions)} of the 30 questions" in n for n in a.notes)
    df = check_questions(a.path)
    counts = df["Kind"].value_counts().to_dict()
    assert counts.get("single", 0) >= 15 and counts.get("multi", 0) >= 3 and counts.get("unanswerable", 0) >= 3
    assert {"ja", "en", "ko"} <= set(df["Language"])
    refs = [r for cell in df["Reference Document"] for r in split_multi(cell)]
    docs = {Path(r).parts[2] for r in refs}  # database/<category>/<document>/...
    assert len(docs) >= 4  # spread over the documents
    assert len(set(refs)) >= 20  # and over their pages
    b = genqa.generate_questions(sample_db_copy, offline_settings(), max_questions=30, progress=False)
    pd.testing.assert_frame_equal(df, read_csv(b.path))


def test_generated_csv_runs_through_offline_batch(sample_db_copy):
    try:
        from ragkit.evaluate.batch import run_batch
    except ImportError:  # pragma: no cover - only while the batch work has not landed
        pytest.skip("ragkit.evaluate.batch.run_batch is not importable: batch not built yet")
    report = genqa.generate_questions(sample_db_copy, offline_settings(), max_questions=8, progress=False)
    result = run_batch(report.path, offline_settings(workers=2), strategy="agent", progress=False)
    assert result.errors == []
    out = read_csv(result.results_path)
    assert len(out) == 8
    assert list(out["Question"]) == [q.question for q in report.questions]
    answerable = out[out["Reference Document"] != ""]
    assert (answerable["Ref Recall"] != "").all()  # every answerable row was scored against its pages
    assert pd.to_numeric(answerable["Ref Recall"]).mean() > 0  # and some pages were found
    summary = read_csv(result.summary_path)
    assert not summary.empty


def test_genqa_from_a_pdf_ingests_it_first_and_uses_only_its_pages(sample_db_copy):
    pdf = EXAMPLES / "공지" / "사무실_이전_안내.pdf"
    if not pdf.is_file():  # pragma: no cover
        pytest.skip("examples/corpus not present")
    src = Path("incoming") / "이전_안내.pdf"
    src.parent.mkdir()
    shutil.copy(pdf, src)
    report = genqa.generate_questions(src, offline_settings(), max_questions=4, progress=False)
    assert report.errors == [] and report.path.name.startswith("이전_안내_questions_")
    df = check_questions(report.path)
    refs = [r for cell in df["Reference Document"] for r in split_multi(cell)]
    assert refs and all(r.startswith("database/incoming/이전_안내/") for r in refs)
    assert set(df[df["Kind"] != "unanswerable"]["Language"]) == {"ko"}
    # ingested into the database next to what was there
    assert list(Path("database/incoming/이전_안내").rglob("page_*.md"))
    assert list(Path("database").rglob("冷蔵庫_取扱説明書/**/page_*.md"))
