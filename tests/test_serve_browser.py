"""The web page of `rag serve` in a real headless Chromium: ask, see a cited answer, open the cited page; search
hits name their document; a question that names no document shows the ones it could mean; the token box is what
the page asks for, and its API docs link opens."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
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
        assert link.inner_text().startswith("家電 / 冷蔵庫_取扱説明書 — p. 9"), link.inner_text()
        link.click()
        page.wait_for_function("document.querySelector('#page-body').textContent.includes('冷蔵室')")
        assert "page 9" in page.inner_text("#page-meta")
        assert "弱" in page.inner_text("#page-body")
        # the search box finds pages too
        page.fill("#search-query", "浄水フィルター")
        page.click("#search-form button")
        page.wait_for_selector("#search-results a.citation")
        first = page.locator("#search-results a.citation").first
        assert "page_016.md" in first.get_attribute("data-path")
        # a hit names its document, not only its page's heading
        assert first.inner_text().startswith("家電 / 冷蔵庫_取扱説明書 — p. 16"), first.inner_text()
        labels = page.locator("#search-results a.citation").all_inner_texts()
        assert all(" / " in t.split(" — ")[0] for t in labels), labels
        assert outside == [], outside  # nothing is loaded from anywhere but the app
        shot = os.environ.get("RAG_SCREENSHOT")  # docs/serve.png is made with this
        page.screenshot(path=shot or str(tmp_path / "serve.png"), full_page=True)
        page.close()


def _ask(browser, url: str, question: str):  # noqa: F811 - the fixture, passed on
    """A new page of the app at `url` that asked `question`: (the page, its answer's notes as one string)."""
    page = browser.new_page()
    page.set_default_timeout(120_000)
    page.goto(url + "/")
    page.fill("#question", question)
    page.click("#ask")
    page.wait_for_selector(".msg.bot .answer")
    return page, " ".join(page.locator(".msg.bot .note").all_inner_texts())


def test_a_question_naming_no_document_shows_the_documents_it_could_mean(sample_db_copy, browser):  # noqa: F811
    settings = Settings(db=sample_db_copy, provider="offline", provider_reason="test", cache=False)
    with LiveServer(settings) as srv:
        page, notes = _ask(browser, srv.url, "この資料で説明されている製品は何ですか？")
        assert "the question names no document, and 2 hold its words" in notes, notes
        assert "冷蔵庫_取扱説明書" in notes and "新製品説明会" in notes, notes
        assert "do not contain the answer" not in notes
        assert "資料名を添えて質問してください" in page.inner_text(".msg.bot .answer")
        assert page.locator(".msg.bot a.citation").count() == 0
        page.close()


def test_a_refusal_shows_the_pages_found_by_meaning_alone(sample_db_copy, browser):  # noqa: F811
    """Offline, "When does the office move?" shares no word with the Korean notice that answers it: the engine
    refuses, and the page lists the notice, found by meaning alone, as a link that opens it."""
    import pytest

    from ragkit.search import open_index
    from ragkit.search.vectors import get_embedder

    if get_embedder() is None:
        pytest.skip("the embedding package is not installed")
    open_index(sample_db_copy, progress=False).ensure_embeddings(progress=False)  # as `rag search --embed` does
    settings = Settings(db=sample_db_copy, provider="offline", provider_reason="test", cache=False)
    with LiveServer(settings) as srv:
        page, notes = _ask(browser, srv.url, "When does the office move?")
        assert "closest in meaning, not checked to answer it" in notes, notes
        assert "do not contain the answer" not in notes
        link = page.locator(".msg.bot ol.closest a.citation").first
        assert "사무실_이전_안내" in link.get_attribute("data-path")
        link.click()
        page.wait_for_function("document.querySelector('#page-body').textContent.includes('사무실')")
        page.close()


def test_token_box_is_what_the_page_asks_for_and_api_docs_open(sample_db_copy, browser):  # noqa: F811
    """With a token set, the page says to type it into its token box (not to send a header), says when it is
    wrong, and its "API docs" link opens /docs, which needs no token and says how to send one."""
    settings = Settings(db=sample_db_copy, provider="offline", provider_reason="test", cache=False)
    with LiveServer(settings, ServeOptions(token="browser-token")) as srv:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(srv.url + "/")
        page.wait_for_selector("#documents li >> text=error")
        message = page.inner_text("#documents")
        assert "type it into the token box" in message and "Authorization" not in message, message
        assert "needed" in page.get_attribute("#token-box", "class")
        page.fill("#token", "not-the-token")
        page.dispatch_event("#token", "change")
        page.wait_for_selector("#documents li >> text=not this server's token")
        # the API docs open from the page, without the token
        with context.expect_page() as opened:
            page.click("#api-docs")
        docs = opened.value
        docs.wait_for_load_state()
        assert docs.url == srv.url + "/docs"
        text = docs.inner_text("body")
        assert "needs its token" in text and "token box" in text and "POST /chat" in text.replace("\n", " "), text
        assert "browser-token" not in docs.content()
        # the right token: the documents load and the box is no longer marked
        page.fill("#token", "browser-token")
        page.dispatch_event("#token", "change")
        page.wait_for_selector("#documents li >> text=冷蔵庫_取扱説明書")
        assert "needed" not in page.get_attribute("#token-box", "class")
        context.close()


@pytest.mark.opensearch
def test_a_degraded_server_and_an_upload_stored_but_not_indexed_are_shown(isolated_env, browser, tmp_path,  # noqa: F811
                                                                          monkeypatch):
    """A server whose cluster cannot be reached: the header showed "v0.1.0" as when all is well, and an upload
    answered 202 `indexed: false` with a warning (the cluster lost after the pages were written) showed as a plain
    success ("… 2 pages, 1 sections"). Now the header says "degraded" and the upload's warning is shown."""
    from opensearch_fixtures import Proxy, drop_indices, node_url, unique_prefix
    from test_serve import make_pdf

    from ragkit.search import open_index
    from ragkit.search.backend import ingest_into
    from ragkit.search.opensearch.client import ClusterError
    from ragkit.serve import app as serve_app

    monkeypatch.setattr(serve_app, "HEALTH_TTL", 0.0)
    url = node_url()
    prefix = unique_prefix()
    proxy = Proxy(url)
    db = isolated_env / "database"
    corpus = Path(__file__).resolve().parents[1] / "examples" / "corpus" / "policies"
    ingest_into([corpus], db=db, index=f"opensearch+{proxy.url}/{prefix}", progress=False)
    open_index(db).close()  # the server opens its own, during the outage
    pdf = make_pdf(tmp_path / "harbor.pdf", ["Zanzibarite harbor crane manual", "Crane zanzibarite maintenance"])
    settings = Settings(db=db, provider="offline", provider_reason="test", cache=False)
    proxy.cut()
    try:
        with LiveServer(settings) as srv:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(srv.url + "/")
            page.wait_for_selector("#health.degraded")
            assert "degraded" in page.inner_text("#health"), page.inner_text("#health")
            assert "unreachable" in page.get_attribute("#health", "title")
            # the cluster is there for the upload's check, and gone when the pages are sent to it: 202
            proxy.restore()
            proxy.cut_at(b"POST /_bulk")
            page.set_input_files("#upload-file", str(pdf))
            page.fill("#upload-category", "upl")
            page.click("#upload-form button")
            page.wait_for_selector("#upload-status.warning")
            status = page.inner_text("#upload-status")
            assert proxy._srv is None, "the proxy was not cut: the upload never sent its pages"
            assert "NOT searchable yet" in status and "stored but not indexed" in status, status
            assert "rag index sync" in status, status
            page.close()
    finally:
        proxy.close()
        with contextlib.suppress(ClusterError):  # the index was never opened when the test failed early
            open_index(db).close()
        drop_indices(url, prefix)
