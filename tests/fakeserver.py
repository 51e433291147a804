"""A real, scriptable OpenAI-compatible HTTP server for tests (POST /v1/chat/completions, non-streaming).

Tests drive the real `openai` client against it instead of mocking the client::

    def test_x(scripted_server):
        scripted_server.enqueue(tool_calls=[("search", {"query": "ice maker"})])
        scripted_server.enqueue(content="The answer.")
        settings = openai_settings(scripted_server)
        ...
        assert scripted_server.requests[0]["messages"][0]["role"] == "system"

Every request is recorded (JSON body, headers, raw bytes), including requests answered with an error.
Replies come from the queue in order; when the queue is empty the responder (if set) builds the reply;
otherwise the server answers HTTP 500 "ScriptedServer: no scripted reply ..." so the test fails loudly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ragkit.core.config import Secret, Settings

TEST_KEY = "sk-test-SECRET-KEY"

# llama.cpp's server answers these unsupported features with HTTP 500 (NOTES-dependencies.md).
_REJECT_JSON_SCHEMA = "response_format type json_schema is not supported by this server"
_REJECT_REQUIRED = "tool_choice 'required' is not supported by this server"


def rough_tokens(value: Any) -> int:
    """A crude token count (~4 characters per token) so token accounting is testable."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return max(1, len(text) // 4)


class ScriptedServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 answering from a script.

    Attributes tests read: ``base_url``, ``requests`` (JSON bodies, in order), ``headers`` (one dict per
    request, lower-case names), ``raw_requests`` (bytes), ``paths``, ``statuses`` (what was answered),
    ``unscripted`` (count of requests that found no scripted reply).
    Switches: ``reject_json_schema``, ``reject_tool_choice_required`` (answer HTTP 500 like llama.cpp's
    server; a rejected request does not consume the queue).
    """

    def __init__(self, model: str = "gpt-4o-mini") -> None:
        self.model = model
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.raw_requests: list[bytes] = []
        self.paths: list[str] = []
        self.statuses: list[int] = []
        self.unscripted = 0
        self.reject_json_schema = False
        self.reject_tool_choice_required = False
        self._queue: deque[dict] = deque()
        self._responder: Callable[[dict], dict | None] | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._counter = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        # a short poll interval keeps close() (and so every test's teardown) fast
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="ScriptedServer", daemon=True)
        self._thread.start()

    # -- scripting -------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(
        self,
        content: str | None = None,
        tool_calls: list[tuple] | None = None,
        status: int = 200,
        delay: float = 0.0,
        usage: dict | None = None,
        body: str | bytes | dict | None = None,
        *,
        headers: dict[str, str] | None = None,
        retry_after: float | str | None = None,
        finish_reason: str | None = None,
        model: str | None = None,
    ) -> None:
        """Queue one reply.

        content: the assistant message text. tool_calls: [(name, arguments)] or [(name, arguments, id)];
        arguments as a dict is sent as JSON, as a str is sent raw (so malformed JSON can be scripted).
        status: HTTP status (429, 500, 503 ... answer an OpenAI-style error body; 429 carries Retry-After,
        default "0"). delay: seconds to wait before answering (to trigger client timeouts).
        usage: {"prompt_tokens", "completion_tokens"} override; default computed from sizes.
        body: raw response body (str/bytes sent verbatim, dict sent as JSON) replacing the built one.
        """
        reply = dict(content=content, tool_calls=tool_calls, status=status, delay=delay, usage=usage,
                     body=body, headers=headers, retry_after=retry_after, finish_reason=finish_reason,
                     model=model)
        with self._lock:
            self._queue.append(reply)

    def set_responder(self, fn: Callable[[dict], dict | None] | None) -> None:
        """fn(request_body) -> dict of enqueue() keyword arguments; used whenever the queue is empty."""
        with self._lock:
            self._responder = fn

    @property
    def pending(self) -> int:
        """Scripted replies not yet served."""
        with self._lock:
            return len(self._queue)

    def close(self) -> None:
        self._closing.set()  # wake delayed handlers so shutdown is quick
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- serving (called from handler threads) --------------------------------------------------------
    def _record(self, path: str, headers: dict[str, str], raw: bytes) -> dict:
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = {"_unparsable": raw.decode("utf-8", "replace")}
        with self._lock:
            self.paths.append(path)
            self.headers.append(headers)
            self.raw_requests.append(raw)
            self.requests.append(body)
        return body

    def _next_reply(self, body: dict) -> dict | None:
        rf = body.get("response_format")
        if self.reject_json_schema and isinstance(rf, dict) and rf.get("type") == "json_schema":
            return {"status": 500, "_message": _REJECT_JSON_SCHEMA}
        if self.reject_tool_choice_required and body.get("tool_choice") == "required":
            return {"status": 500, "_message": _REJECT_REQUIRED}
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            responder = self._responder
        if responder is not None:
            reply = responder(body)
            if reply is not None:
                return reply
        with self._lock:
            self.unscripted += 1
            n = len(self.requests)
        return {"status": 500, "_message": f"ScriptedServer: no scripted reply for request #{n} "
                                           "(queue empty, no responder)"}

    def _build(self, reply: dict, body: dict) -> tuple[int, dict[str, str], bytes]:
        status = int(reply.get("status", 200))
        headers = {"Content-Type": "application/json"}
        if status == 429:
            ra = reply.get("retry_after")
            headers["Retry-After"] = str(0 if ra is None else ra)
        headers.update(reply.get("headers") or {})
        raw = reply.get("body")
        if raw is not None:
            if isinstance(raw, dict | list):
                raw = json.dumps(raw, ensure_ascii=False)
            return status, headers, raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
        if status >= 400:
            message = reply.get("_message") or {429: "Rate limit reached (scripted)"}.get(
                status, f"scripted HTTP {status}")
            err = {"error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request",
                             "code": status}}
            return status, headers, json.dumps(err).encode("utf-8")
        with self._lock:
            self._counter += 1
            n = self._counter
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        calls = []
        for i, call in enumerate(reply.get("tool_calls") or []):
            name, args = call[0], call[1]
            call_id = call[2] if len(call) > 2 else f"call_{n}_{i}"
            arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        if calls:
            message["tool_calls"] = calls
        usage = reply.get("usage") or {}
        prompt = int(usage.get("prompt_tokens", rough_tokens(body.get("messages", []))))
        completion = int(usage.get("completion_tokens",
                                   rough_tokens((reply.get("content") or "") + json.dumps(calls))))
        doc = {
            "id": f"chatcmpl-scripted-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.get("model") or body.get("model") or self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": reply.get("finish_reason") or ("tool_calls" if calls else "stop"),
                "logprobs": None,
            }],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        }
        return status, headers, json.dumps(doc, ensure_ascii=False).encode("utf-8")


def _make_handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # keep test output clean
            pass

        def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            try:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass  # the client gave up (timeout test): nothing to do

        def do_GET(self):  # noqa: N802 - http.server naming
            if self.path.rstrip("/").endswith("/models"):
                doc = {"object": "list", "data": [{"id": server.model, "object": "model", "created": 0,
                                                   "owned_by": "scripted"}]}
                self._send(200, {"Content-Type": "application/json"}, json.dumps(doc).encode())
            else:
                self._send(404, {"Content-Type": "application/json"}, b'{"error": {"message": "not found"}}')

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            body = server._record(self.path, headers, raw)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                server.statuses.append(404)
                self._send(404, {"Content-Type": "application/json"},
                           b'{"error": {"message": "ScriptedServer only serves /v1/chat/completions"}}')
                return
            reply = server._next_reply(body)
            delay = float(reply.get("delay") or 0.0)
            if delay > 0 and server._closing.wait(delay):
                return
            status, out_headers, payload = server._build(reply, body)
            with server._lock:
                server.statuses.append(status)
            self._send(status, out_headers, payload)

    return Handler


def model_tool_results(messages: list[dict]) -> list[dict]:
    """The tool results that answer the model's own calls: not the search and reads the agent starts with."""
    from ragkit.answer.agent import PRESEARCH_CALL_ID

    return [m for m in messages
            if m.get("role") == "tool" and not str(m.get("tool_call_id")).startswith(PRESEARCH_CALL_ID)]


def openai_settings(server: ScriptedServer, **kw) -> Settings:
    """Settings for the real `openai` provider pointed at `server`, with key TEST_KEY.

    Defaults for tests: tiny backoff (retry_base_delay=0.01, retry_max_delay=0.05), timeout 10 s, and the
    response cache OFF so every call reaches the server (pass cache=True to test caching).
    """
    values: dict[str, Any] = dict(
        provider="openai",
        provider_reason="test",
        model=server.model,
        judge_model=server.model,
        api_key=Secret(TEST_KEY),
        api_base=server.base_url,
        cache=False,
        timeout=10.0,
        retry_base_delay=0.01,
        retry_max_delay=0.05,
    )
    values.update(kw)
    return Settings(**values)


def interrupted_while_waiting(args: list[str], cache_dir: Path, *, wait: float = 60
                              ) -> subprocess.CompletedProcess:
    """Run `python -m ragkit.cli ARGS` (in the current folder) against a model that accepts the first request
    and never answers; once that request is with the model, SIGINT reaches the command's process group, as
    Ctrl-C in a terminal does. Returns the finished process (returncode, stdout, stderr as text); a command
    still running `wait` s after the signal is killed (subprocess.TimeoutExpired)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(120)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_"))}
        env.update(OPENAI_API_KEY="sk-test", OPENAI_API_BASE=f"http://127.0.0.1:{server.getsockname()[1]}/v1",
                   RAG_TIMEOUT="120", RAG_EMBED="0", RAG_CACHE_DIR=str(cache_dir))
        proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True, text=True)
        try:
            conn, _ = server.accept()  # the request is with the model: the command is waiting
            with conn:
                os.killpg(proc.pid, signal.SIGINT)
                out, err = proc.communicate(timeout=wait)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
