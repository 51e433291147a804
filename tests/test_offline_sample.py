"""The offline engine on the bundled sample corpus: every answerable question in examples/questions.csv is
answered citing a required page, every unanswerable one is refused (issue 4, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragkit.answer.extractive import REFUSE_BELOW, answer_offline
from ragkit.core import text as T
from ragkit.core.csvio import read_csv, split_multi
from ragkit.search import open_index

QUESTIONS = Path(__file__).resolve().parents[1] / "examples" / "questions.csv"


def _rows() -> list[dict]:
    if not QUESTIONS.exists():
        return []
    df = read_csv(QUESTIONS)
    return [{k: ("" if v is None or v != v else str(v)) for k, v in r.items()} for r in df.to_dict("records")]


ROWS = _rows()
pytestmark = pytest.mark.skipif(not ROWS, reason="examples/questions.csv not present")


@pytest.fixture(scope="module")
def _sample_copy(sample_db, tmp_path_factory):
    """One private copy of the sample database for this module (opened once: the index is reused)."""
    import shutil

    db = tmp_path_factory.mktemp("offline_sample") / "database"
    shutil.copytree(sample_db, db)
    return db, open_index(db, progress=False)


@pytest.fixture
def index(_sample_copy, monkeypatch):
    db, idx = _sample_copy
    monkeypatch.chdir(db.parent)  # Reference Documents are then "database/...", as in questions.csv
    return idx


def _ids(rows):
    return [f"{i:02d}-{'A' if r['Reference Document'].strip() else 'U'}" for i, r in enumerate(rows)]


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_sample_question(index, row):
    db = Path("database")
    question = row["Question"]
    required = split_multi(row["Reference Document"])
    a = answer_offline(question, index, db)
    lang = T.detect_lang(question)
    assert "offline" in a.answer
    if not required:
        assert a.refused, f"should refuse: {question}\n{a.answer}"
        assert a.sources == [] and a.answer.startswith(T.refusal_text(lang))
        assert a.confidence < REFUSE_BELOW
        return
    assert not a.refused, f"should answer: {question} (confidence {a.confidence})"
    cited = [s.path for s in a.sources]
    assert any(r in cited for r in required), f"{question}: cited {cited}, required {required}"
    assert all(c in a.pages_read for c in cited)
    for s in a.sources:
        assert f"{s.path} p.{s.page}" in a.answer and s.excerpt
        assert all(part in a.answer for part in s.excerpt.split(" … "))  # every quoted unit is in the answer
    if lang in ("ja", "ko"):
        assert T.detect_lang(a.answer) == lang


def test_sample_is_deterministic(index):
    db = Path("database")
    for row in ROWS[::4]:  # a spread of languages and answerable/unanswerable rows
        one, two = answer_offline(row["Question"], index, db), answer_offline(row["Question"], index, db)
        assert (one.answer, one.refused, one.confidence, [s.path for s in one.sources]) == (
            two.answer, two.refused, two.confidence, [s.path for s in two.sources])
