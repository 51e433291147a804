"""Shared test fixtures: every test runs in its own working directory with no key in the environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

_ENV_VARS = (
    "OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL", "RAG_DB", "RAG_RESULTS", "RAG_PROVIDER",
    "RAG_MODEL", "RAG_JUDGE_MODEL", "RAG_WORKERS", "RAG_CACHE_DIR",
)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """A clean cwd and no provider configuration, so no test depends on the developer's machine."""
    for var in _ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield work


@pytest.fixture
def repo_root() -> Path:
    return REPO


def pytest_report_header(config):
    return f"ragkit tests; cwd isolated per test; pid {os.getpid()}"
