"""ragkit's model path on a real model (see conftest.py: skipped unless RAG_TEST_BASE_URL is set)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragkit.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VPN = ("What is the maximum length of a VPN session?", "policies/information_security_policy/4. Remote Access/page_005.md")
FILTER = ("浄水フィルターはどれくらいの頻度で替えればよいですか？", "家電/冷蔵庫_取扱説明書/お手入れ/page_016.md")


@pytest.mark.parametrize("strategy", ["agent", "naive", "synth"])
@pytest.mark.parametrize("question,page", [VPN, FILTER], ids=["en", "ja"])
def test_ask_cites_the_right_page(llm_env, sample_db_copy, strategy, question, page, request):
    if strategy == "synth" and question == FILTER[0]:
        # Qwen2.5-Coder-1.5B drafts the answer from the right page (約3か月ごと) and every other draft says NOT
        # RELEVANT, then its synthesizer refuses that one draft. Overruling it from the drafts was measured and
        # not kept (docs/benchmarks.md: unanswerable refused 0.40 -> 0.00); a stronger model passes (XPASS).
        request.applymarker(pytest.mark.xfail(reason="the 1.5B model's synthesizer refuses the one right draft",
                                              strict=False))
    result = CliRunner().invoke(app, ["ask", question, "--strategy", strategy, "--format", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["metadata"]["provider"] == "openai" and doc["metadata"]["strategy"] == strategy
    assert not doc["refused"] and doc["answer"].strip()
    assert any(s["path"].endswith(page) for s in doc["sources"]), (doc["answer"], doc["sources"])
    assert doc["general_knowledge"] is False  # the documents hold the answer


def _sample_rows(indices: list[int]) -> list[dict]:
    with open(EXAMPLES / "questions.csv", encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [rows[i] for i in indices]


def _write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8-sig", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_batch_of_five_with_checklist_and_rubric_judges(llm_settings, isolated_env):
    from ragkit.evaluate.batch import run_batch

    # 4 answerable (Japanese, English, Korean) and 1 the documents cannot answer
    rows = _sample_rows([1, 8, 9, 11, 16])
    csv_path = _write_csv(isolated_env / "five.csv", rows)
    report = run_batch(csv_path, llm_settings.with_(results=isolated_env / "results"), strategy="naive",
                       progress=False)
    assert not report.errors, report.errors
    with open(report.results_path, encoding="utf-8-sig", newline="") as fh:
        out = list(csv.DictReader(fh))
    assert len(out) == 5
    for row in out:
        assert not row.get("Judge Error"), row.get("Judge Error")  # the judges' JSON parsed from the real model
        assert row["Checklist TP"] != "" and row["Evaluation Reason"].strip()
    unanswerable = out[4]
    assert unanswerable["Reference Document"] == ""
    assert unanswerable["Refused"].lower() in ("true", "1", "yes"), unanswerable["RAG Answer"]
    assert unanswerable["Checklist TN"] == "1" and unanswerable["Checklist FP"] == "0"  # a right refusal
    answered = [r for r in out[:4] if r["Refused"].lower() not in ("true", "1", "yes")]
    assert answered and any(float(r["Ref Recall"] or 0) == 1.0 for r in answered)


def test_genqa_on_one_document_gives_valid_rows(llm_settings, sample_db_copy, isolated_env):
    from ragkit.genqa import generate_questions

    doc = sample_db_copy / "policies" / "information_security_policy"
    report = generate_questions(doc, llm_settings.with_(results=isolated_env / "results"), max_questions=3,
                                progress=False)
    assert not report.errors, report.errors
    assert report.questions and report.path is not None and report.path.exists()
    with open(report.path, encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(report.questions)
    for row in rows:
        assert row["Question"].strip()
        for ref in filter(None, (r.strip() for r in row["Reference Document"].replace(";", "\n").splitlines())):
            for alias in ref.split("|"):
                path = Path(alias)
                assert path.is_file() or (isolated_env / path).is_file(), alias
                assert "information_security_policy" in alias


def test_one_optimize_proposal_copies_the_missed_page_inside_its_scope(llm_settings, sample_db_copy, isolated_env):
    from ragkit import optimize

    fn = optimize.optimize_missed
    missed = "database/policies/information_security_policy/4. Remote Access/page_005.md"
    wrong = "database/policies/information_security_policy/3. Passwords and Authentication/page_004.md"
    row = {"Question": "How long can a VPN session last before it is disconnected?", "Ground Truth": "8 hours",
           "Reference Document": missed, "Page": "5", "Checklist": "8 hours", "RAG Answer": "I do not know.",
           "Retrieved Files": wrong, "Ref Recall": 0.0, "Error": ""}
    csv_path = _write_csv(isolated_env / "one.csv", [{k: row[k] for k in
                                                      ("Question", "Ground Truth", "Reference Document", "Page",
                                                       "Checklist")}])
    from ragkit.evaluate.scoring import Scorer

    scorer = Scorer.create(llm_settings, row.keys())
    report = fn([row], input_csv=csv_path, settings=llm_settings, scorer=scorer, enable_rl=False, progress=False)
    assert not report.errors, report.errors
    assert report.copies, report.notes
    copy = report.copies[0]
    assert copy.original.endswith("4. Remote Access/page_005.md"), copy
    # The model's reply is parsed and its folder checked either way. A small model often names the folder with
    # a word of the question that the page lacks ("duration"), which the check refuses on purpose: the rule
    # then places the copy and says which of the model's folders it refused (seen on Qwen2.5-Coder-1.5B).
    assert copy.proposer in ("llm", "fallback"), copy
    if copy.proposer == "fallback":
        assert "model's folders refused: '" in copy.reason, copy.reason
    print(f"proposer: {copy.proposer}; folder: {copy.copy}; reason: {copy.reason}")
    assert copy.copy != copy.original and copy.copy.startswith("policies/") and copy.copy.endswith(".md")
    assert (sample_db_copy / copy.copy).is_file()
    assert (sample_db_copy / copy.copy).read_bytes() == (sample_db_copy / copy.original).read_bytes()
