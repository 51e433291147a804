"""What keeps other sites, token guessers and base-URL credentials out of `rag serve`: a real uvicorn server on
127.0.0.1 (tests/liveserver.py), a real HTTP client, the model a scripted server (tests/fakeserver.py)."""

from __future__ import annotations

import json
import logging
import re
from functools import partial
from pathlib import Path

import httpx
import pytest
from browser import plain_browser  # noqa: F401 - the fixture
from fakeserver import TEST_KEY, openai_settings
from liveserver import LiveServer
from typer.testing import CliRunner

from ragkit.core.config import Settings
from ragkit.core.errors import UsageError
from ragkit.serve import check_bind
from ragkit.serve.app import ServeOptions

request = partial(httpx.request, timeout=120)
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")
MFA_Q = "Is multi-factor authentication required for VPN access?"


def offline(db: Path) -> Settings:
    return Settings(db=db, provider="offline", provider_reason="test", cache=False)


def one_line_error(r: httpx.Response) -> str:
    message = r.json()["error"]
    assert isinstance(message, str) and "\n" not in message and message, r.text
    return message


# -- M1: headers, Host, Origin ----------------------------------------------------------------------------------
def test_every_response_carries_the_security_headers(sample_db_copy):
    with LiveServer(offline(sample_db_copy)) as srv:
        for method, path in (("GET", "/"), ("GET", "/static/app.js"), ("GET", "/documents"), ("GET", "/docs"),
                             ("GET", "/no-such-thing"), ("POST", "/chat")):
            r = request(method, srv.url + path)
            assert r.headers.get("x-content-type-options") == "nosniff", (path, r.headers)
            assert r.headers.get("x-frame-options") == "DENY" and r.headers.get("referrer-policy") == "no-referrer"
            assert r.headers.get("content-security-policy") == CSP, (path, r.headers)


def test_a_server_bug_answers_500_with_the_security_headers(sample_db_copy, monkeypatch):
    """A bug (an exception no handler expects) is answered by the app's last handler outside the middleware
    stack: its 500 carries the same headers as every other response, and one line naming the exception only."""
    import ragkit.serve.documents as docs

    def broken(db):
        raise KeyError("secret-internal-detail")

    monkeypatch.setattr(docs, "list_documents", broken)
    with LiveServer(offline(sample_db_copy)) as srv:
        r = request("GET", srv.url + "/documents")
    assert r.status_code == 500
    assert one_line_error(r) == "internal error (KeyError)"
    assert r.headers.get("x-content-type-options") == "nosniff" and r.headers.get("x-frame-options") == "DENY"
    assert r.headers.get("content-security-policy") == CSP and r.headers.get("referrer-policy") == "no-referrer"


def test_the_page_works_under_its_content_security_policy(sample_db_copy, plain_browser):  # noqa: F811
    """The page asks, cites, opens the cited page and searches in Chromium with the CSP enforced (no bypass): it
    loads nothing but the server's own app.js and style.css, and the browser reports no CSP violation."""
    with LiveServer(offline(sample_db_copy)) as srv:
        page = plain_browser.new_page()
        page.set_default_timeout(120_000)
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text))
        page.goto(srv.url + "/")
        page.wait_for_selector("#documents li >> text=冷蔵庫_取扱説明書")
        page.fill("#question", "冷蔵室の温度設定を「強」にすると、庫内はだいたい何度になりますか？")
        page.click("#ask")
        page.wait_for_selector(".msg.bot .answer")
        page.locator(".msg.bot a.citation").first.click()
        page.wait_for_selector("#page-body >> text=冷蔵室")
        page.fill("#search-query", "浄水フィルター")
        page.click("#search-form button")
        page.wait_for_selector("#search-results a.citation")
        page.goto(srv.url + "/docs")
        page.wait_for_selector("h1")
    assert not [m for m in console if "Content Security Policy" in m or "Refused to" in m], console


def test_without_a_token_a_foreign_host_is_refused(sample_db_copy):
    """s56-sec M1: any Host was answered, so a DNS-rebinding page (evil.example resolving to 127.0.0.1) could
    read /documents, /pages and /search from the user's browser."""
    with LiveServer(offline(sample_db_copy)) as srv:
        port = srv.port
        r = request("GET", srv.url + "/documents", headers={"Host": f"evil.example:{port}"})
        assert r.status_code == 421 and "evil.example" in one_line_error(r) and "documents" not in r.json()
        assert "RAG_API_TOKEN" in one_line_error(r)  # the way to serve under another name
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"127.0.0.2:{port}", "localhost"):
            assert request("GET", srv.url + "/documents", headers={"Host": host}).status_code == 200, host
    # with a token, the token keeps a foreign page out (and a proxy may pass its own Host)
    with LiveServer(offline(sample_db_copy), ServeOptions(token="t" * 20)) as srv:
        r = request("GET", srv.url + "/documents", headers={"Host": "docs.example", "Authorization": "Bearer " + "t" * 20})
        assert r.status_code == 200


def test_without_a_token_a_state_change_from_another_origin_is_refused(sample_db_copy, tmp_path):
    """s56-sec M1: a cross-site multipart POST (a "simple" request, no preflight) uploaded a document from any web
    page the user visited."""
    with LiveServer(offline(sample_db_copy)) as srv:
        before = request("GET", srv.url + "/documents").json()
        r = request("POST", srv.url + "/documents", headers={"Origin": "https://evil.example"},
                    files={"file": ("injected.pdf", b"%PDF-1.4 not really", "application/pdf")})
        assert r.status_code == 403 and "evil.example" in one_line_error(r)
        for foreign in ({"Origin": "null"}, {"Referer": "http://[broken/x"}):  # a sandboxed frame; junk
            r = request("POST", srv.url + "/chat", json={"query": MFA_Q}, headers=foreign)
            assert r.status_code == 403, (foreign, r.status_code)
        doc = before["documents"][0]["id"]
        r = request("DELETE", f"{srv.url}/documents/{doc}", headers={"Referer": "http://evil.example/page.html"})
        assert r.status_code == 403 and request("GET", srv.url + "/documents").json() == before
        # the page itself (same origin) and a program (no Origin) may
        assert request("POST", srv.url + "/chat", json={"query": MFA_Q}, headers={"Origin": srv.url}).status_code == 200
        assert request("POST", srv.url + "/chat", json={"query": MFA_Q},
                       headers={"Referer": srv.url + "/"}).status_code == 200
        assert request("POST", srv.url + "/chat", json={"query": MFA_Q}).status_code == 200
        # reading stays open to a cross-origin GET: the browser keeps the answer from the other page
        assert request("GET", srv.url + "/documents", headers={"Origin": "https://evil.example"}).status_code == 200


# -- M2: the token -------------------------------------------------------------------------------------------
def test_a_blank_token_or_a_short_one_beyond_loopback_is_refused(sample_db_copy):
    """s56-sec M2: `--token " "` started a server nobody could authenticate to; `--token a` listened on 0.0.0.0."""
    assert check_bind("127.0.0.1", None) is None and check_bind("127.0.0.1", " short ") == "short"
    assert check_bind("0.0.0.0", "x" * 16) == "x" * 16
    for host, token in (("127.0.0.1", " "), ("0.0.0.0", "a"), ("0.0.0.0", "x" * 15)):
        with pytest.raises(UsageError):
            check_bind(host, token)
    from ragkit.cli import app

    for args in (["--token", " "], ["--host", "0.0.0.0", "--token", "short-tok"]):
        r = CliRunner().invoke(app, ["serve", "--db", str(sample_db_copy), *args])
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert lines[0].startswith("warning: --token shows in the process list") and "RAG_API_TOKEN" in lines[0]
        assert lines[-1].startswith("error:") and "short-tok" not in r.stderr and "Traceback" not in r.stderr


def test_wrong_tokens_are_logged_once_a_minute_and_then_refused(sample_db_copy, caplog):
    """s56-sec M2: 401s were neither logged nor slowed, so guessing was unbounded and invisible."""
    token = "the-right-token-1234"
    caplog.set_level(logging.WARNING, logger="ragkit.serve")
    with LiveServer(offline(sample_db_copy), ServeOptions(token=token)) as srv:
        url = srv.url + "/documents"
        assert request("GET", url).status_code == 401  # no token at all (the page before its box is filled)
        statuses = [request("GET", url, headers={"Authorization": f"Bearer guess-{i}"}).status_code
                    for i in range(11)]
        assert statuses == [401] * 10 + [429], statuses
        r = request("GET", url, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "\n" not in one_line_error(r)
        assert request("GET", srv.url + "/health").status_code == 200  # what needs no token still answers
    lines = [rec.getMessage() for rec in caplog.records if "token" in rec.getMessage()]
    assert len(lines) == 1 and "127.0.0.1" in lines[0], lines
    assert not re.search(r"guess-|the-right-token", caplog.text)


# -- H3: base-URL credentials in serve's answers and log -------------------------------------------------------
def test_chat_errors_hold_no_base_url_credentials(sample_db_copy, scripted_server, caplog):
    """s56-sec H3(b): `?api_key=` of the base URL was returned by /chat (plain and streamed) to any client and
    written to serve's log; a password of the URL that a server echoes must not pass either."""
    caplog.set_level(logging.WARNING, logger="ragkit.serve")
    port = scripted_server.port
    echo = {"error": {"message": "alice:PASSWD-canary is not allowed"}}
    texts = []
    for url in (f"http://alice:PASSWD-canary@127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/v1?api_key=QUERY-canary"):
        with LiveServer(openai_settings(scripted_server, db=sample_db_copy, api_base=url)) as srv:
            scripted_server.enqueue(status=401, body=echo)
            r = request("POST", srv.url + "/chat", json={"query": MFA_Q, "strategy": "naive"})
            assert r.status_code == 502 and f"127.0.0.1:{port}/v1" in one_line_error(r)
            scripted_server.enqueue(status=401, body=echo)
            with httpx.stream("POST", srv.url + "/chat", json={"query": MFA_Q, "strategy": "naive", "stream": True},
                              timeout=60) as s:
                streamed = "".join(s.iter_text())
        events = [(m.group(1), json.loads(m.group(2)))
                  for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", streamed)]
        assert events[-1][0] == "error" and f"127.0.0.1:{port}/v1" in events[-1][1]["error"], events
        texts += [r.text, streamed]
    for text in (*texts, caplog.text):
        assert "QUERY-canary" not in text and "PASSWD-canary" not in text and TEST_KEY not in text
    assert caplog.text.count("-> 502") == 4, caplog.text  # each failure was logged, without the secrets
