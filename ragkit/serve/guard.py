"""What keeps other sites and token guessers out of `rag serve` (ASGI middleware and helpers for ragkit.serve.app):

    Guard(app, check_origin)   security headers on every response; on loopback without a token, a foreign Host
                               (DNS rebinding) is 421 and a state-changing request from another origin is 403
    TokenFailures              wrong tokens per client: one log line per client per minute, 429 past a limit
    send_json(send, status, message)   a one-line JSON error sent from ASGI middleware
    is_loopback(host) -> bool  whether a host name or address is this machine's loopback

docs/serve.md ("Security") says what each refuses and why."""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from urllib.parse import urlsplit

log = logging.getLogger("ragkit.serve")
LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# every response: no sniffing, no framing (the page has delete buttons), no referrer, and only the server's own
# script and stylesheet (the page's app.js and style.css; /docs has inline CSS and no script)
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                                 b"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
)
STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")
FAILED_TOKENS_PER_MINUTE = 10  # wrong tokens a client may send in a minute; then 429 until the minute is over


class Guard:
    """ASGI middleware, the outermost: adds SECURITY_HEADERS to every response, and, on a server without a token
    bound to loopback (`check_origin`), refuses what only another site in the user's browser would send: a Host
    that is no loopback name (a DNS-rebinding page: 421) and a state-changing request from another origin
    (a cross-site form post: 403). Programs (curl, scripts) send a loopback Host and no Origin: they pass."""

    def __init__(self, app, check_origin: bool) -> None:
        self.app = app
        self.check_origin = check_origin

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        if self.check_origin:
            refusal = _foreign_request(scope)
            if refusal is not None:
                return await send_json(send_with_headers, *refusal)
        return await self.app(scope, receive, send_with_headers)


def _foreign_request(scope) -> tuple[int, str] | None:
    """(status, message) when the request's Host is no loopback name, or a state-changing request's Origin (else
    Referer) is not this server's own origin; None when it may go on."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    host = headers.get("host", "")
    try:
        name = urlsplit(f"//{host}").hostname or ""
    except ValueError:
        name = ""
    if not is_loopback(name):
        return 421, (f"Host {host[:80]!r} is not this server's: it answers localhost, 127.0.0.1 or [::1] only "
                     "(a page on another site cannot reach it through its own name; to serve it under another "
                     "name or behind a proxy, give it a token: RAG_API_TOKEN)")
    if scope.get("method", "GET") not in STATE_CHANGING:
        return None
    origin = headers.get("origin")
    if origin is None and headers.get("referer"):
        try:
            parts = urlsplit(headers["referer"])
            origin = f"{parts.scheme}://{parts.netloc}"
        except ValueError:  # an unreadable Referer (a broken IPv6 address) names no origin of ours
            origin = "(unreadable Referer)"
    own = f"{scope.get('scheme', 'http')}://{host}"
    if origin is not None and origin.lower() != own.lower():
        return 403, (f"{scope.get('method')} from the origin {origin[:80]!r} refused: only this server's own page "
                     f"({own}) or a program that sends no Origin may change data")
    return None


class TokenFailures:
    """Wrong tokens per client (its address): each client's minute counts its failures; past
    FAILED_TOKENS_PER_MINUTE its requests are answered 429 until the minute ends (a guess then costs a minute per
    ten), and a log line says so at most once per client per minute (never the token tried)."""

    def __init__(self, limit: int = FAILED_TOKENS_PER_MINUTE, window: float = 60.0) -> None:
        self.limit, self.window = limit, window
        self._seen: dict[str, list[float]] = {}  # client -> [minute's start, failures, logged (0/1)]
        self._lock = threading.Lock()

    def blocked(self, client: str) -> float:
        """Seconds `client` must wait before trying again; 0 when it may try."""
        with self._lock:
            entry = self._seen.get(client)
            now = time.monotonic()
            if entry is None or now - entry[0] >= self.window:
                return 0.0
            return self.window - (now - entry[0]) if entry[1] >= self.limit else 0.0

    def failed(self, client: str) -> None:
        with self._lock:
            now = time.monotonic()
            if len(self._seen) > 10_000:  # many clients: forget those whose minute is over
                self._seen = {c: e for c, e in self._seen.items() if now - e[0] < self.window}
            entry = self._seen.get(client)
            if entry is None or now - entry[0] >= self.window:
                entry = self._seen[client] = [now, 0, 0]
            entry[1] += 1
            log_now = not entry[2]
            entry[2] = 1
        if log_now:
            log.warning("%s", f"wrong token from {client[:60]} (its further failures this minute are not logged; "
                        f"after {self.limit} it is answered 429 until the minute ends)")


async def send_json(send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
