"""The `llm` integration suite: ragkit's model path against a REAL OpenAI-compatible server and model.

It runs only when RAG_TEST_BASE_URL is set (RAG_TEST_MODEL names the model, default qwen2.5-coder-1.5b;
RAG_TEST_API_KEY the key, default a placeholder local servers accept); otherwise every test here is reported
as skipped with the reason. With the shared local model:

    eval "$(../shared/local-llm/serve.sh)"           # prints OPENAI_API_BASE=... RAG_MODEL=...
    RAG_TEST_BASE_URL=$OPENAI_API_BASE RAG_TEST_MODEL=$RAG_MODEL uv run pytest -m llm tests/integration

Each model call takes 5-60 s on that model (more when the machine is busy), so the suite holds only what
proves the path: ask (three strategies, two languages), a 5-row batch with both judges, genqa, one
optimizer proposal.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragkit.core.config import Secret, Settings

BASE_URL = os.environ.get("RAG_TEST_BASE_URL", "").strip()
MODEL = os.environ.get("RAG_TEST_MODEL", "").strip() or "qwen2.5-coder-1.5b"
SKIP_REASON = ("RAG_TEST_BASE_URL is not set: the llm integration suite needs a real OpenAI-compatible server "
               "(e.g. ../shared/local-llm/serve.sh; see tests/integration/conftest.py)")
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.llm)
            if not BASE_URL:
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture
def llm_env(monkeypatch) -> dict[str, str]:
    """The environment `rag` reads, pointed at the test server (the root conftest cleared the real one)."""
    env = {"OPENAI_API_BASE": BASE_URL, "OPENAI_API_KEY": os.environ.get("RAG_TEST_API_KEY") or "sk-local",
           "RAG_MODEL": MODEL, "RAG_JUDGE_MODEL": MODEL, "RAG_TIMEOUT": os.environ.get("RAG_TEST_TIMEOUT", "900"),
           "RAG_MAX_STEPS": "6"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@pytest.fixture
def llm_settings(sample_db_copy) -> Settings:
    return Settings(db=sample_db_copy, provider="openai", provider_reason="integration test", model=MODEL,
                    judge_model=MODEL, api_key=Secret(os.environ.get("RAG_TEST_API_KEY") or "sk-local"),
                    api_base=BASE_URL, cache=False, timeout=float(os.environ.get("RAG_TEST_TIMEOUT", "900")),
                    workers=2, max_steps=6)
