"""Headless Chromium for browser tests (shared by the report and serve tests).

Chromium comes from Debian (`/usr/bin/chromium`; `.ci/run` installs it when missing) and is driven by
playwright launching that system browser: `playwright install` is never run (it downloads a browser).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> Path | None:
    if CHROMIUM.exists():
        return CHROMIUM
    found = shutil.which("chromium")
    return Path(found) if found else None


def launch(p):
    """Launch the system Chromium headless with a playwright instance `p` (from sync_playwright())."""
    return p.chromium.launch(executable_path=str(chromium_path() or CHROMIUM), args=LAUNCH_ARGS)


class CspBypassingBrowser:
    """A browser whose pages ignore a page's Content-Security-Policy. playwright's `wait_for_function("...")`
    evaluates its predicate with eval in the page once it has to poll, which `rag serve`'s CSP (no
    'unsafe-eval') refuses: a slow machine made such a wait fail. The page under its CSP is tested with a plain
    browser (`plain_browser`, tests/test_serve_guard.py)."""

    def __init__(self, browser) -> None:
        self._browser = browser

    def new_page(self, **kw):
        return self._browser.new_page(bypass_csp=True, **kw)

    def new_context(self, **kw):
        return self._browser.new_context(bypass_csp=True, **kw)

    def __getattr__(self, name: str):
        return getattr(self._browser, name)


def _chromium():
    if chromium_path() is None:
        pytest.skip("Chromium is not installed (/usr/bin/chromium); .ci/run installs it from Debian")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def plain_browser():
    """A headless Chromium browser; the test is skipped, saying why, when Chromium or playwright is absent."""
    yield from _chromium()


@pytest.fixture
def browser():
    """As `plain_browser`, its pages ignoring a page's CSP (CspBypassingBrowser)."""
    for b in _chromium():
        yield CspBypassingBrowser(b)
