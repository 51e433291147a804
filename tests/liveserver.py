"""A real uvicorn server running `rag serve`'s app on a random 127.0.0.1 port, in a thread of the test process.

    with LiveServer(settings, ServeOptions(token="t")) as srv:
        httpx.get(srv.url + "/health")
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from ragkit.core.config import Settings
from ragkit.serve.app import ServeOptions, create_app


class LiveServer:
    def __init__(self, settings: Settings, options: ServeOptions | None = None, **app_kw) -> None:
        self.app = create_app(settings, options or ServeOptions(), **app_kw)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        from ragkit.serve.documents import stop_uploads

        stop_uploads()  # as `rag serve` does on Ctrl-C: conversions in progress are killed, their uploads get 503
        self.server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()
