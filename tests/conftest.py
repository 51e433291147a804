"""Shared test fixtures: every test runs in its own working directory with no key in the environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

_ENV_VARS = (
    "OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL", "RAG_DB", "RAG_RESULTS", "RAG_PROVIDER",
    "RAG_MODEL", "RAG_JUDGE_MODEL", "RAG_WORKERS", "RAG_CACHE_DIR", "RAG_TIMEOUT", "RAG_MAX_STEPS",
    "RAG_MAX_TOKENS", "RAG_INDEX", "RAG_OPENSEARCH_USER", "RAG_OPENSEARCH_PASSWORD", "RAG_OPENSEARCH_API_KEY",
    "RAG_CSV_ENCODING", "RAG_MAX_UNPACKED_MB", "RAG_MAX_MEMBER_MB", "RAG_MAX_ZIP_RATIO",
    "RAG_MAX_PAGE_TEXT_MB", "RAG_DOC_TIMEOUT", "RAG_MAX_DOC_MEMORY_MB",
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

    from ragkit.core.llm import forget_rejections

    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()
        forget_rejections()  # a later server may get the same port


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory) -> Path:
    """The bundled sample corpus (examples/corpus) ingested once per test session. Read-only: tests that
    change pages use `sample_db_copy`. It lies outside each test's cwd, so its Reference Documents are
    absolute paths."""
    from ragkit.ingest import ingest_sources

    db = tmp_path_factory.mktemp("sample") / "database"
    report = ingest_sources([EXAMPLES / "corpus"], db=db, progress=False)
    assert not report.failed, report.failed
    return db


@pytest.fixture
def sample_db_copy(sample_db, isolated_env) -> Path:
    """A private copy of the sample database at ./database in the test's cwd (Reference Documents are then
    `database/...`, as in examples/questions.csv)."""
    import shutil

    dest = isolated_env / "database"
    shutil.copytree(sample_db, dest)
    return dest
