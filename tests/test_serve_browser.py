"""The web page of `rag serve` in a real headless Chromium: ask, see a cited answer, open the cited page."""

from __future__ import annotations

import os

from browser import browser  # noqa: F401 - the fixture
from liveserver import LiveServer

from ragkit.core.config import Settings
from ragkit.serve.app import ServeOptions


def test_ask_see_citation_open_page(sample_db_copy, browser, tmp_path):  # noqa: F811
    settings = Settings(db=sample_db_copy, provider="offline", provider_reason="test", cache=False)
    with LiveServer(settings, ServeOptions(token="browser-token")) as srv:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(120_000)
        outside: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(srv.url) else outside.append(r.url))
        page.goto(srv.url + "/")
        page.fill("#token", "browser-token")
        page.dispatch_event("#token", "change")
        page.wait_for_selector("#documents li >> text=冷蔵庫_取扱説明書")
        page.fill("#question", "冷蔵室の温度設定を「強」にすると、庫内はだいたい何度になりますか？")
        page.click("#ask")
        page.wait_for_selector(".msg.bot .answer")
        answer = page.inner_text(".msg.bot .answer")
        assert "約2℃" in answer
        link = page.locator(".msg.bot a.citation").first
        assert "page_009.md" in link.get_attribute("data-path")
        link.click()
        page.wait_for_function("document.querySelector('#page-body').textContent.includes('冷蔵室')")
        assert "page 9" in page.inner_text("#page-meta")
        assert "弱" in page.inner_text("#page-body")
        # the search box finds pages too
        page.fill("#search-query", "浄水フィルター")
        page.click("#search-form button")
        page.wait_for_selector("#search-results a.citation")
        assert "page_016.md" in page.locator("#search-results a.citation").first.get_attribute("data-path")
        assert outside == [], outside  # nothing is loaded from anywhere but the app
        shot = os.environ.get("RAG_SCREENSHOT")  # docs/serve.png is made with this
        page.screenshot(path=shot or str(tmp_path / "serve.png"), full_page=True)
        page.close()
