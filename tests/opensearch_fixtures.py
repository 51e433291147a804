"""Helpers of the OpenSearch tests: the node .ci/run starts (RAG_TEST_OPENSEARCH_URL), a unique index prefix per
test, removed afterwards, a three-node cluster a test starts itself, and real network peers for a cluster that
fails: a TCP proxy in front of the node that a test cuts off (unreachable) or makes hang, and a socket that
takes connections and never answers; a self-signed certificate, and this machine's address on its network."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import select
import socket
import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
START = REPO / "services" / "opensearch" / "start.sh"


def node_url() -> str:
    url = os.environ.get("RAG_TEST_OPENSEARCH_URL")
    if not url:
        pytest.skip("no OpenSearch node: RAG_TEST_OPENSEARCH_URL is not set (.ci/run starts one with "
                    "services/opensearch/start.sh)")
    try:
        httpx.get(url, timeout=5).raise_for_status()
    except httpx.HTTPError as e:
        pytest.fail(f"RAG_TEST_OPENSEARCH_URL={url} does not answer: {e}")
    return url


def drop_indices(url: str, prefix: str) -> None:
    httpx.delete(f"{url}/{prefix}-*", timeout=30)


class Cluster:
    """A three-node cluster in one JVM, started for one test; nodes stop and start through the launcher's
    control endpoints (services/opensearch/README.md)."""

    def __init__(self, tmp: Path) -> None:
        # its own pid and log files; the jars built for the shared node are reused (no second build)
        self.env = {**os.environ, "RAG_OPENSEARCH_CACHE": str(tmp / "os-cache")}
        out = subprocess.run([str(START), "--nodes", "3", "--port", "auto"], capture_output=True, text=True,
                             env=self.env, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"the three-node cluster did not start: {out.stderr[-2000:]}")
        self.url = out.stdout.strip().split("=", 1)[1]
        self._urls: list[str] = []

    def nodes(self) -> list[dict]:
        return httpx.get(f"{self._control()}/_ragkit/nodes", timeout=30).json()["nodes"]

    def _control(self, avoid: int | None = None) -> str:
        """The URL of a running node other than `avoid`: every node serves the control endpoints, and the
        first node's own URL goes away when a test stops it."""
        for url in [self.url, *self._urls]:
            try:
                listing = httpx.get(f"{url}/_ragkit/nodes", timeout=30).json()["nodes"]
            except httpx.HTTPError:
                continue
            self._urls = [n["url"] for n in listing]
            for n in listing:
                if n.get("running", True) and n["id"] != avoid:
                    return n["url"]
        raise RuntimeError("no node of the test cluster answers")

    def stop(self, node: int) -> None:
        httpx.post(f"{self._control(avoid=node)}/_ragkit/nodes/{node}/_stop", timeout=120).raise_for_status()

    def start(self, node: int) -> None:
        httpx.post(f"{self._control(avoid=node)}/_ragkit/nodes/{node}/_start", timeout=180).raise_for_status()

    def wait(self, status: str = "yellow") -> None:
        # a restarted node recovers its shards in 10-40 s on an idle machine; under CI's load (a model beside it)
        # one went past 60 s (408): the wait is for the cluster, not a measure of it
        httpx.get(f"{self._control()}/_cluster/health", params={"wait_for_status": status, "timeout": "180s"},
                  timeout=210).raise_for_status()

    def close(self) -> None:
        subprocess.run([str(START), "stop"], env=self.env, capture_output=True, timeout=120)


def unique_prefix() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def config_of(db: Path) -> dict:
    return json.loads((db / ".ragkit" / "index.json").read_text(encoding="utf-8"))


@contextmanager
def synced_cluster(db: Path, url: str) -> Iterator[Any]:
    """`db` bound to a new prefix on the node at `url` and synced: its index, closed and its indices dropped after."""
    from ragkit.search import configure_index, open_index

    prefix = unique_prefix()
    configure_index(db, f"opensearch+{url}/{prefix}")
    ix = open_index(db)
    try:
        ix.sync(progress=False)
        yield ix
    finally:
        ix.close()
        drop_indices(url, prefix)


@contextmanager
def silent_server() -> Iterator[str]:
    """The URL of a local TCP server that takes connections and never answers (a hung node: its kernel still
    completes the handshake and queues the request). It listens and never accepts: the backlog does the rest."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(64)
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"


@contextmanager
def full_server() -> Iterator[str]:
    """The URL of a local TCP server whose accept queue is full (a swamped node): it never accepts, one connection
    fills its backlog (listen(0)), and the kernel drops every later handshake, so each connection attempt times
    out."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(0)
        filler = socket.create_connection(srv.getsockname(), timeout=5)
        try:
            yield f"http://127.0.0.1:{srv.getsockname()[1]}"
        finally:
            filler.close()


@contextmanager
def answerless_server() -> Iterator[tuple[str, list[bytes]]]:
    """(URL, requests): a local TCP server that accepts every connection and reads what comes, never answering (a
    hung node); `requests` gets the first line of each request it received."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    got: list[bytes] = []
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            data = b""
            while b"\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            if data:
                got.append(data.split(b"\r\n", 1)[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}", got
    finally:
        srv.close()
        for c in held:
            c.close()


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of a real node. `cut()`: nothing listens on its port any more and the
    connections through it are closed (the cluster is unreachable); `cut_at(marker)`: the same, the moment a request
    holding `marker` comes from a client (it never reaches the node: a cluster lost in the middle of an answer);
    `hang()`: connections are accepted and never answered (a stopped node); `restore()`: forwarding again, on the
    same port."""

    def __init__(self, target_url: str, *, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        """`host`: the address it listens on; `tls`: a server-side context, so that clients speak https to it (the
        node behind it speaks http)."""
        u = urlsplit(target_url)
        self._target = (u.hostname or "127.0.0.1", u.port or 80)
        self._host = host
        self._tls = tls
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._hung = False
        self._trip: bytes | None = None
        self._srv: socket.socket | None = None
        self.port = 0
        self._listen()
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}"

    def _listen(self) -> None:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((self._host, self.port))
        srv.listen(64)
        srv.settimeout(0.1)  # the accept loop sees a cut within 0.1 s
        self.port = srv.getsockname()[1]
        self._srv = srv
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()

    def _accept(self, srv: socket.socket) -> None:
        while self._srv is srv:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._lock:
                self._conns.append(conn)
            if self._hung:
                continue  # held open, never read from or answered
            threading.Thread(target=self._forward, args=(conn,), daemon=True).start()

    def _forward(self, conn: socket.socket) -> None:
        if self._tls is not None:
            try:
                conn = self._tls.wrap_socket(conn, server_side=True)  # the handshake: refused by an untrusting client
            except OSError:
                conn.close()
                return
            with self._lock:
                self._conns.append(conn)
        try:
            up = socket.create_connection(self._target, timeout=10)
        except OSError:
            conn.close()
            return
        up.settimeout(None)
        with self._lock:
            self._conns.append(up)
        if self._tls is not None:  # one thread per TLS connection: OpenSSL's reads and writes are not concurrent
            self._pump(conn, up)
            return
        for a, b, upward in ((conn, up, True), (up, conn, False)):
            threading.Thread(target=self._pipe, args=(a, b, upward), daemon=True).start()

    def _pump(self, conn: ssl.SSLSocket, up: socket.socket) -> None:
        try:
            while True:
                ready = [conn] if conn.pending() else select.select([conn, up], [], [])[0]
                for a in ready:
                    data = a.recv(65536)
                    if not data:
                        return
                    if a is conn and self._trip is not None and self._trip in data:
                        self._trip = None
                        self.cut()
                        return
                    (up if a is conn else conn).sendall(data)
        except (OSError, ValueError):  # cut: the sockets are closed under it
            pass
        finally:
            _shutdown(conn, up)

    def _pipe(self, a: socket.socket, b: socket.socket, upward: bool) -> None:
        try:
            while data := a.recv(65536):
                if upward and self._trip is not None and self._trip in data:
                    self._trip = None
                    self.cut()
                    return
                b.sendall(data)
        except OSError:
            pass
        finally:
            _shutdown(a, b)

    def _drop(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def cut(self) -> None:
        srv, self._srv = self._srv, None
        if srv is not None:
            srv.close()
        self._drop()

    def cut_at(self, marker: bytes) -> None:
        self._trip = marker

    def hang(self) -> None:
        self._hung = True
        self._drop()

    def restore(self) -> None:
        self._hung = False
        if self._srv is None:
            self._listen()

    def close(self) -> None:
        self.cut()


def self_signed(folder: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """(certificate, key) PEM files of a self-signed certificate for `host` (an IP address), made with the
    `cryptography` package; the certificate is its own CA, the bundle a client must be given to trust it."""
    crypto = pytest.importorskip("cryptography")  # noqa: F841 - only its submodules are used
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ragkit test CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def tls_server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


def network_address() -> str:
    """This machine's address on its network (not loopback), or skip: traffic to it is traffic a network carries."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: the kernel only picks the interface
            addr = s.getsockname()[0]
        except OSError:
            addr = ""
    if not addr or ipaddress.ip_address(addr).is_loopback:
        pytest.skip("this machine has no network address besides loopback")
    return addr


def _shutdown(*socks: socket.socket) -> None:
    """Both directions of each socket shut (one already closed is passed over)."""
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
