"""Shared test fixtures: every test runs in its own working directory with no key in the environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

_ENV_VARS = (
    "OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL", "RAG_DB", "RAG_RESULTS", "RAG_PROVIDER",
    "RAG_MODEL", "RAG_JUDGE_MODEL", "RAG_WORKERS", "RAG_CACHE_DIR", "RAG_TIMEOUT",
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


@pytest.fixture
def scripted_server():
    """A real OpenAI-compatible server on 127.0.0.1 answering from a script (tests/fakeserver.py).

    Use with `from fakeserver import openai_settings`; `openai_settings(scripted_server)` gives Settings for
    the real openai provider pointed at it (key "sk-test-SECRET-KEY", cache off, tiny backoff).
    """
    from fakeserver import ScriptedServer

    from ragkit.llm import forget_rejections

    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()
        forget_rejections()  # a later server may get the same port
