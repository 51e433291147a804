"""`rag genqa` on a real model (the `llm` suite): generation and verification through the real `openai`
client against a real OpenAI-compatible server, e.g. ../shared/local-llm/serve.sh:

    RAG_TEST_BASE_URL=http://127.0.0.1:8088/v1 [RAG_TEST_MODEL=qwen2.5-coder-1.5b] uv run pytest tests/integration

Skipped (and reported as skipped) without RAG_TEST_BASE_URL. One page and one question, since a small local
model on a shared machine writes a few tokens a second.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragkit import genqa
from ragkit.core.config import Secret, Settings
from ragkit.core.csvio import read_csv, split_checklist
from ragkit.core.pagefile import PageMeta, render_page

BASE_URL = os.environ.get("RAG_TEST_BASE_URL", "")
pytestmark = [pytest.mark.llm,
              pytest.mark.skipif(not BASE_URL, reason="RAG_TEST_BASE_URL is not set (no real model to test)")]

PAGE = """# 3. Passwords and Authentication

Passwords must be at least 14 characters long. After 10 consecutive failed sign-in attempts an account is
locked for 15 minutes. Multi-factor authentication is mandatory for email, VPN and source control.
"""


def real_settings(**kw) -> Settings:
    values = dict(provider="openai", provider_reason="test", model=os.environ.get("RAG_TEST_MODEL", "qwen2.5-coder-1.5b"),
                  api_key=Secret(os.environ.get("RAG_TEST_API_KEY", "sk-local")), api_base=BASE_URL, cache=False,
                  timeout=float(os.environ.get("RAG_TEST_TIMEOUT", "900")), workers=1, db=Path("database"),
                  results=Path("results"))
    values.update(kw)
    return Settings(**values)


def test_real_model_generates_and_verifies_a_question_about_its_page():
    rel = "policy/security/Passwords/page_004.md"
    path = Path("database") / rel
    path.parent.mkdir(parents=True)
    path.write_text(render_page(PageMeta(source="security.pdf", document="Security Policy", section="Passwords",
                                         page=4), PAGE), encoding="utf-8")
    report = genqa.generate_questions(Path("database"), real_settings(), max_questions=1, progress=False)

    assert not any("provider failures" in e for e in report.errors), report.errors
    # the model was asked to write questions, and each one it wrote was put to a verification call
    asked = report.usage.calls
    assert asked >= 1 and report.usage.output_tokens > 0
    if report.questions:  # kept: it passed verification; it points at the page and has claims to check
        [q] = report.questions
        assert asked >= 2 and q.refs == [rel] and q.pages == [4] and q.kind == "single"
        assert q.question.strip() and q.ground_truth.strip() and q.checklist
        row = read_csv(report.path).iloc[0]
        assert row["Reference Document"] == f"database/{rel}" and split_checklist(row["Checklist"]) == q.checklist
    else:  # nothing kept: the report says why (dropped by verification, invalid items, or a skipped reply)
        assert sum(report.dropped.values()) or report.skipped, report
