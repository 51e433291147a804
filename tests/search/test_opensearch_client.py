"""The OpenSearch client's transport against a scripted HTTP server on 127.0.0.1 (no node needed): a busy answer
(429) that arrives late within the request's one deadline is asked again with a shorter back-off while an attempt
still fits, and the error says how many attempts were made. The backend itself is tested against a real node
(tests/test_opensearch.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragkit.search.opensearch.client import Client, ClusterError


@contextmanager
def scripted_server(script: list[tuple[float, int]]) -> Iterator[tuple[str, list[str]]]:
    """(URL, requests): a local HTTP server answering its n-th request as script[n] says, (delay s, status), the
    last entry for any after; `requests` gets each request's line."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.requestline)
            delay, status = script[min(len(seen), len(script)) - 1]
            time.sleep(delay)
            body = json.dumps({"ok": True} if status < 400 else
                              {"error": {"reason": "too many requests"}, "status": status}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_busy_answer_arriving_late_is_asked_again_within_the_deadline():
    """Attempt 1's 429 comes at once (0.5 s back-off); attempt 2's comes when about 0.6 s of the 2.5 s deadline are
    left, less than its 1 s back-off: it was reported, though an attempt fitted. Now the back-off is shortened to
    half of what is left and attempt 3 is answered."""
    with scripted_server([(0.0, 429), (1.4, 429), (0.0, 200)]) as (url, seen):
        client = Client(url, timeout=2.5)
        try:
            assert client.request("GET", "/_cluster/health") == {"ok": True}
        finally:
            client.close()
    assert len(seen) == 3, seen


@pytest.mark.parametrize(("retries", "said"), [(3, "3 attempts"), (1, "1 attempt")])
def test_a_busy_cluster_is_reported_with_the_attempts_made(retries, said):
    with scripted_server([(0.0, 503)]) as (url, seen):
        client = Client(url, timeout=5.0)
        try:
            with pytest.raises(ClusterError) as got:
                client.request("GET", "/_cluster/health", retries=retries)
        finally:
            client.close()
    assert len(seen) == retries
    assert str(got.value) == (f"OpenSearch at {url}: GET /_cluster/health failed (503): too many requests ({said})")
