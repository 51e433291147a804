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


@pytest.fixture
def browser():
    """A headless Chromium browser; the test is skipped, saying why, when Chromium or playwright is absent."""
    if chromium_path() is None:
        pytest.skip("Chromium is not installed (/usr/bin/chromium); .ci/run installs it from Debian")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()
