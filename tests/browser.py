"""The headless browser for web-page tests: Debian's Chromium driven by playwright (never `playwright install`).

    def test_page(chromium):
        page = chromium.new_page()
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def launch(p):
    """A browser from a started `sync_playwright()`, using the system Chromium."""
    return p.chromium.launch(executable_path=chromium_path(), args=ARGS)


@pytest.fixture
def chromium():
    """A launched headless Chromium; the test is skipped (with the reason) when Chromium or playwright is absent."""
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (uv sync installs the dev group)")
    with sync_playwright() as p:
        browser = launch(p)
        try:
            yield browser
        finally:
            browser.close()
