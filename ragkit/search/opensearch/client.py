"""A small OpenSearch HTTP client: JSON in and out, bulk NDJSON, credentials from the environment only, and one
clear line for every way a cluster can fail (unreachable, refused credentials, no answer in time, an error it
answers).

    Client(url, timeout=TIMEOUT).request(method, path, body, *, params, ok, ndjson, timeout, retries) -> JSON
    Client.bulk(actions, refresh=...) -> JSON; Client.close()

A request that could not connect, or got 429/502/503/504, is tried again (RETRIES attempts in all); one the node
took and did not answer in time is not (see request); the attempts share the request's timeout, the back-off
shortened when little of it is left, and the error says how many were made. RAG_OPENSEARCH_CA_BUNDLE (a PEM
file) is trusted for https besides the system's certificate authorities; credentials about to go over plain http
to another machine are one warning line (never the credentials)."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import ssl
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from ragkit.core.errors import BackendError, UsageError
from ragkit.core.text import one_line

TIMEOUT = 30.0  # seconds per request; a bulk of a few hundred pages takes well under that
RETRIES = 3  # attempts for a request that failed to connect or got 429/502/503/504 (not for one left unanswered)
RETRY_STATUSES = (429, 502, 503, 504)  # a busy or restarting cluster: asking again may be answered
# The least of the deadline worth another attempt: a node that answers at all does so in milliseconds, so an answer
# arriving late is retried with a shorter back-off rather than reported while time is left
MIN_ATTEMPT = 0.1
CA_BUNDLE_ENV = "RAG_OPENSEARCH_CA_BUNDLE"  # a PEM file of certificate authorities to trust besides the system's

log = logging.getLogger(__name__)
_warned: set[str] = set()  # clusters already warned about plain-http credentials in this process
_warned_lock = threading.Lock()


class ClusterError(BackendError):
    """The cluster answered with an error, or could not be reached."""

    def __init__(self, message: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def _auth() -> tuple[dict[str, str], tuple[str, str] | None]:
    """The credentials the environment gives: an API key, or a user and password. A half or a double of them
    is one line naming the variables (never their values): it would otherwise reach the cluster as no
    credentials, or as the ones not meant, and come back as a 401 that names neither."""
    key = os.environ.get("RAG_OPENSEARCH_API_KEY")
    user = os.environ.get("RAG_OPENSEARCH_USER")
    password = os.environ.get("RAG_OPENSEARCH_PASSWORD")
    if key and (user or password):
        raise UsageError("RAG_OPENSEARCH_API_KEY and RAG_OPENSEARCH_USER / RAG_OPENSEARCH_PASSWORD are both set: "
                         "unset the ones not meant")
    if password and not user:
        raise UsageError("RAG_OPENSEARCH_PASSWORD is set without RAG_OPENSEARCH_USER: set the user too")
    if key:
        return {"Authorization": f"ApiKey {key}"}, None
    if user:
        return {}, (user, password or "")
    return {}, None


def _verify() -> ssl.SSLContext | bool:
    """How https certificates are checked: the system's authorities, plus RAG_OPENSEARCH_CA_BUNDLE's when set (a
    cluster with its own CA). A bundle that cannot be read is one line naming the variable and the file."""
    bundle = os.environ.get(CA_BUNDLE_ENV)
    if not bundle:
        return True
    ctx = ssl.create_default_context()
    try:
        ctx.load_verify_locations(cafile=os.path.expanduser(bundle))
    except (OSError, ssl.SSLError) as e:
        why = getattr(e, "strerror", None) or getattr(e, "reason", None) or type(e).__name__
        raise UsageError(f"{CA_BUNDLE_ENV}={bundle}: not a readable PEM file of certificates ({why})") from None
    return ctx


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _warn_plain_http(url: str, kind: str) -> None:
    """Once per cluster and process: credentials are about to go over plain http to another machine, readable by
    anyone on the way (loopback, e.g. an SSH tunnel, stays on this machine and is not warned about)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or _loopback(parts.hostname or ""):
        return
    with _warned_lock:
        if url in _warned:
            return
        _warned.add(url)
    log.warning("warning: the credentials of %s go to OpenSearch at %s over plain http, readable on the network; "
                "use opensearch+https:// (%s trusts a cluster's own CA)", kind, url, CA_BUNDLE_ENV)


def _untrusted(e: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate check that made this connection fail, if one did (httpx wraps the ssl error)."""
    seen: BaseException | None = e
    for _ in range(8):
        if seen is None or isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _refuses_credentials(r: httpx.Response) -> bool:
    """Whether a 401/403 is a cluster (or a proxy in front of one) refusing the credentials: a Basic or ApiKey
    challenge, a security_exception (OpenSearch's and Elasticsearch's JSON error), or OpenSearch Security's bare
    "Unauthorized" (or nothing) without a challenge. Another server's refusal (a web app's Bearer token, its own
    JSON) is not: asking for RAG_OPENSEARCH_USER would send the user after credentials no cluster asked for."""
    challenge = r.headers.get("www-authenticate", "").lower()
    if any(w in challenge for w in ("basic", "apikey", "opensearch")):
        return True
    try:
        data = r.json()
    except ValueError:
        return not challenge
    err = data.get("error") if isinstance(data, dict) else None
    return isinstance(err, dict) and "security_exception" in json.dumps(err)


def _wait_to_retry(deadline: float, backoff: float) -> bool:
    """Sleep before another attempt and say whether to make it: the back-off, shortened to half of what is left of
    the deadline when that is less (the attempt gets the other half), as long as an attempt still gets MIN_ATTEMPT."""
    left = deadline - time.monotonic()
    wait = min(backoff, left / 2)
    if left - wait < MIN_ATTEMPT:
        return False
    time.sleep(wait)
    return True


def _attempts(n: int) -> str:
    return f"{n} attempt{'s' if n > 1 else ''}"


class Client:
    def __init__(self, url: str, *, timeout: float = TIMEOUT, prefix: str = "") -> None:
        """`prefix`: the database's index prefix, named in the command an unreachable cluster's message gives."""
        self.url = url.rstrip("/")
        self.prefix = prefix
        headers, auth = _auth()
        self._secrets = [s for s in (os.environ.get("RAG_OPENSEARCH_API_KEY"),
                                     os.environ.get("RAG_OPENSEARCH_PASSWORD")) if s]
        if headers or auth:
            _warn_plain_http(self.url, "RAG_OPENSEARCH_API_KEY" if headers else
                             "RAG_OPENSEARCH_USER / RAG_OPENSEARCH_PASSWORD")
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.url, headers={"Content-Type": "application/json", **headers},
                                  auth=auth, timeout=timeout, verify=_verify())

    def _clean(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return one_line(text, 300)

    def request(self, method: str, path: str, body: Any = None, *, params: dict | None = None,
                ok: tuple[int, ...] = (), ndjson: str | None = None, timeout: float | None = None,
                retries: int = RETRIES) -> Any:
        """The JSON answer of one request; a status in `ok` is returned as {"status": N} instead of raised.
        `timeout`: seconds for this request instead of the client's (a long merge, a quick health check);
        `retries`: attempts in all for a request that could not connect or got 429/502/503/504. The timeout bounds
        the whole request, its attempts together: each attempt gets what the earlier ones left of it."""
        content = ndjson.encode() if ndjson is not None else (json.dumps(body, ensure_ascii=False).encode()
                                                              if body is not None else None)
        headers = {"Content-Type": "application/x-ndjson"} if ndjson is not None else None
        t0 = time.monotonic()
        # One deadline for all attempts: a timeout per attempt added up (a node whose accept queue is full times out
        # every connection: three attempts waited three times OPEN_TIMEOUT for `rag search`)
        deadline = t0 + (timeout or self.timeout)
        for attempt in range(1, retries + 1):
            try:
                left = max(deadline - time.monotonic(), 0.001)
                r = self._http.request(method, path, content=content, params=params, headers=headers, timeout=left)
            except httpx.TimeoutException as e:
                # A connection never made is tried again (within the deadline), like a refused one. A request the
                # node took and left unanswered is not: a hung or swamped node would only make the caller wait the
                # timeout again (three attempts kept a search waiting 91 s), and a search asked again is no likelier
                # to answer.
                if isinstance(e, httpx.ConnectTimeout) and attempt < retries and deadline > time.monotonic():
                    continue
                waited = time.monotonic() - t0  # the whole wait, connection attempts included
                secs = f"{waited:.0f}" if waited >= 10 else f"{waited:.1f}"
                raise ClusterError(f"OpenSearch at {self.url}: no answer within {secs} s ({method} {path}); is the "
                                   "cluster overloaded or stopped?") from None
            except httpx.TransportError as e:
                cert = _untrusted(e)
                if cert is not None:  # asking again changes nothing
                    raise ClusterError(f"OpenSearch at {self.url}: its TLS certificate is not trusted "
                                       f"({self._clean(cert.verify_message or str(cert))}); set {CA_BUNDLE_ENV} to "
                                       "the PEM file of the CA that signed it") from None
                if attempt < retries and _wait_to_retry(deadline, 0.2 * attempt):
                    continue
                raise ClusterError(f"OpenSearch at {self.url} is unreachable ({self._clean(str(e) or type(e).__name__)}"
                                   f"; {_attempts(attempt)}); is the cluster running? If it moved to another address, "
                                   "point the database at it: rag index sync --index "
                                   f"opensearch+{urlsplit(self.url).scheme or 'http'}://NEW-HOST:PORT/"
                                   f"{self.prefix or 'PREFIX'}") from None
            if r.status_code in RETRY_STATUSES and attempt < retries and _wait_to_retry(deadline, 0.5 * attempt):
                continue
            break
        if r.status_code in ok:
            return {"status": r.status_code}
        if r.status_code in (401, 403) and not _refuses_credentials(r):
            raise ClusterError(f"OpenSearch at {self.url}: {method} {path} answered {r.status_code} ("
                               f"{self._clean(r.text) or 'no body'}), not as an OpenSearch cluster refuses "
                               "credentials: is this the address of an OpenSearch cluster?", r.status_code)
        if r.status_code in (401, 403):
            raise ClusterError(f"OpenSearch at {self.url} refused the credentials ({r.status_code}); set "
                               "RAG_OPENSEARCH_USER / RAG_OPENSEARCH_PASSWORD or RAG_OPENSEARCH_API_KEY",
                               r.status_code)
        try:
            data = r.json() if r.content else {}
        except ValueError:
            raise ClusterError(f"OpenSearch at {self.url}: {method} {path} answered {r.status_code} with "
                               f"something that is not JSON: {self._clean(r.text)}", r.status_code) from None
        if r.status_code >= 400:
            err = data.get("error") if isinstance(data, dict) else None
            reason = err.get("reason") if isinstance(err, dict) else err
            cause = (err.get("root_cause") or [{}])[0].get("reason") if isinstance(err, dict) else None
            tried = f" ({_attempts(attempt)})" if r.status_code in RETRY_STATUSES else ""
            raise ClusterError(f"OpenSearch at {self.url}: {method} {path} failed ({r.status_code}): "
                               f"{self._clean(str(cause or reason or data))}{tried}", r.status_code, data)
        return data

    def bulk(self, actions: list[tuple[dict, dict | None]], *, refresh: str | bool = False) -> dict:
        """Index and delete in one request: (action, source or None). Raises with the first item's error."""
        if not actions:
            return {"items": []}
        lines = []
        for action, source in actions:
            lines.append(json.dumps(action, ensure_ascii=False))
            if source is not None:
                lines.append(json.dumps(source, ensure_ascii=False))
        params = {"refresh": "true" if refresh is True else refresh} if refresh else None
        out = self.request("POST", "/_bulk", ndjson="\n".join(lines) + "\n", params=params)
        if out.get("errors"):
            for item in out.get("items", []):
                res = next(iter(item.values()))
                if res.get("error") and not (res.get("status") == 404 and "delete" in item):
                    err = res["error"]
                    raise ClusterError(f"OpenSearch at {self.url}: bulk {next(iter(item))} of {res.get('_id')!r} "
                                       f"failed: {self._clean(str(err.get('reason') if isinstance(err, dict) else err))}")
        return out

    def close(self) -> None:
        self._http.close()
