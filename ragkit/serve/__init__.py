"""`rag serve`: the HTTP API and web page over one database (DESIGN §9, the Agentic RAG API seed).

`sessions` and `documents` need only the standard library and ragkit; `app` needs FastAPI, which is imported
only when a server is made, so `import ragkit` and the other commands never pay for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Any

from ragkit.core.config import Settings
from ragkit.core.errors import RagError, UsageError
from ragkit.serve.guard import is_loopback

MIN_TOKEN_CHARS = 16  # beyond loopback: a shorter token is guessed too soon (even at 10 tries a minute)


def check_bind(host: str, token: str | None) -> str | None:
    """The token to require (stripped, as the server compares what clients send), None for none. Refused: a
    token of spaces only (nobody could ever send it), listening beyond this machine without a token (it would
    hand the documents and the model budget to anyone on the network) or with one shorter than
    MIN_TOKEN_CHARS."""
    if token is not None:
        token = token.strip()
        if not token:
            raise UsageError("the token is empty (only spaces): set RAG_API_TOKEN to a long random value, or leave "
                             "it unset on loopback")
    if not is_loopback(host) and not token:
        raise UsageError(f"host={host!r}: refusing to listen beyond this machine without a token; "
                         "set RAG_API_TOKEN or pass token=",
                         flags={f"host={host!r}:": f"--host {host}:", "token=": "--token"})
    if not is_loopback(host) and len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"host={host!r}: the token has {len(token)} character{'s' if len(token) != 1 else ''}; "
                         f"beyond this machine it needs {MIN_TOKEN_CHARS} or more (e.g. RAG_API_TOKEN=$(python -c "
                         "'import secrets; print(secrets.token_urlsafe(24))'))",
                         flags={f"host={host!r}:": f"--host {host}:"})
    return token


def _warm_up(settings: Settings) -> None:
    """One search before listening, so the embedding model is loaded now and not in the first user's request."""
    from ragkit.search import open_index

    try:
        open_index(settings.db, progress=False).search("warm up", k=1)
    except RagError:
        pass  # an empty database: nothing to warm


STOP_SECONDS = 3  # after Ctrl-C or SIGTERM: answers in flight get this long, then the server stops


class _Quiet(logging.Filter):
    """A request still running when the server stops is cancelled: one line in the log, not a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit) or (
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(asyncio.CancelledError) is not None):
            record.msg, record.args, record.exc_info, record.exc_text = "a request in flight was cancelled by " \
                "the stop", (), None, None
        return True


def run_server(settings: Settings, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
               max_upload_mb: float = 100.0, announce: Any = print, progress: bool = False) -> None:
    """Serve until Ctrl-C or SIGTERM, then stop within a few seconds, whatever the requests are doing:
    conversions are killed at once, answers get STOP_SECONDS, and a thread still waiting on a model then
    ends with the process. `progress`: the index's indexing lines on stderr while it is built before listening
    (`rag serve` turns it on)."""
    token = check_bind(host, token)
    if not Path(settings.db).is_dir():
        raise RagError(f"settings.db {settings.db}: no such folder; ingest documents into it first (rag ingest FILE "
                       f"--db {settings.db}) or create it empty (mkdir) to fill it through POST /documents",
                       flags={f"settings.db {settings.db}:": f"--db {settings.db}:"})
    if max_upload_mb <= 0:
        raise UsageError(f"max_upload_mb must be positive, got {max_upload_mb:g}",
                         flags={"max_upload_mb": "--max-upload-mb"})
    if not 0 <= port <= 65535:
        raise UsageError(f"port must be 0-65535, got {port}", flags={"port": "--port"})
    try:
        import uvicorn

        from ragkit.serve.app import ServeOptions, create_app
    except ImportError as e:
        raise RagError(f"rag serve needs FastAPI and uvicorn: pip install 'ragkit[serve]' ({e.name} missing)") from None
    from ragkit.serve.documents import stop_uploads

    app = create_app(settings, ServeOptions(token=token, max_upload_mb=max_upload_mb, progress=progress, host=host))
    if app.state.start_problem:
        announce(f"degraded: {app.state.start_problem}; serving anyway: /health answers 503, /search, /chat and "
                 "uploads 503 until the cluster answers (the document list and pages answer now)")
    else:
        _warm_up(settings)
    shown = f"[{host}]" if ":" in host else host
    how = ("; token required: type it into the page's token box, or send Authorization: Bearer <token>"
           if token else "")
    from ragkit.search.backend import index_label

    announce(f"serving {settings.db} (index: {index_label(settings.db)}) on http://{shown}:{port}/ (API docs at "
             f"/docs{how}); Ctrl-C stops")
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=STOP_SECONDS)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            stop_uploads()  # a conversion never holds the stop up
            super().handle_exit(sig, frame)

    server = Server(config)
    # uvicorn stops on SIGTERM as on Ctrl-C, then raises the signal again: end as after Ctrl-C, not killed by it
    with contextlib.suppress(ValueError):  # not the main thread (tests): no signal handlers to set
        signal.signal(signal.SIGTERM, _interrupt)
    quiet = _Quiet()
    for name in ("uvicorn.error", "uvicorn", "ragkit.serve"):
        logging.getLogger(name).addFilter(quiet)
    try:
        server.run()
    except (SystemExit, KeyboardInterrupt):  # uvicorn exits when it cannot bind; we say why in one line instead
        pass
    finally:
        stop_uploads()
    if not server.started:
        raise RagError(f"could not listen on {shown}:{port} (in use, or not an address of this machine)")
    announce("stopped")
    _end_stuck_threads()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _end_stuck_threads(grace: float = 1.0) -> None:
    """A request thread still waiting on a model (its HTTP timeout can be minutes) would hold the interpreter
    at exit, which joins every such thread: give them `grace` seconds, then end the process now."""
    import sys
    import threading
    import time

    deadline = time.monotonic() + grace
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
