"""`rag serve`: the HTTP API and web page over one database (DESIGN §9, the Agentic RAG API seed).

`sessions` and `documents` need only the standard library and ragkit; `app` needs FastAPI, which is imported
only when a server is made, so `import ragkit` and the other commands never pay for it.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ragkit.core.config import Settings
from ragkit.core.errors import RagError, UsageError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Listening beyond this machine without a token would hand the documents (and the model budget) to
    anyone on the network: refused."""
    if not is_loopback(host) and not token:
        raise UsageError(f"--host {host}: refusing to listen beyond this machine without a token; "
                         "set RAG_API_TOKEN or pass --token")


def _warm_up(settings: Settings) -> None:
    """One search before listening, so the embedding model is loaded now and not in the first user's request."""
    from ragkit.search import open_index

    try:
        open_index(settings.db, progress=False).search("warm up", k=1)
    except RagError:
        pass  # an empty database: nothing to warm


def run_server(settings: Settings, *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
               max_upload_mb: float = 100.0, announce: Any = print) -> None:
    """Serve until interrupted."""
    check_bind(host, token)
    if max_upload_mb <= 0:
        raise UsageError(f"--max-upload-mb must be positive, got {max_upload_mb:g}")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0-65535, got {port}")
    try:
        import uvicorn

        from ragkit.serve.app import ServeOptions, create_app
    except ImportError as e:
        raise RagError(f"rag serve needs FastAPI and uvicorn: pip install 'ragkit[serve]' ({e.name} missing)") from None
    from ragkit.serve.documents import shutdown_pool

    app = create_app(settings, ServeOptions(token=token, max_upload_mb=max_upload_mb))
    _warm_up(settings)
    shown = f"[{host}]" if ":" in host else host
    announce(f"serving {settings.db} on http://{shown}:{port}/ (API docs at /docs"
             f"{'; token required' if token else ''}); Ctrl-C stops")
    # a stop waits at most 10 s for answers in flight (a model call can take minutes), then closes them
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=10)
    server = uvicorn.Server(config)
    try:
        server.run()
    except SystemExit:  # uvicorn exits when it cannot bind; we say why in one line instead
        pass
    finally:
        shutdown_pool()
    if not server.started:
        raise RagError(f"could not listen on {shown}:{port} (in use, or not an address of this machine)")
