"""`rag serve` and hostile input (issue 33): an upload runs under the document limits in a worker of its own, so
a bomb fails alone, a slow document keeps no other upload waiting and a stop never waits for a conversion;
a client's bad path is a 4xx without a traceback; a stop after uploads leaves no warning; /docs needs no
network."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from bombs import docx_bomb, slow_pdf, small_docx
from liveserver import LiveServer
from test_serve import get, make_pdf, offline, post

from ragkit.core.config import Limits
from ragkit.core.paths import iter_pages

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="worker processes and signals are POSIX")


def _upload(url: str, path: Path, name: str | None = None) -> httpx.Response:
    with path.open("rb") as fh:
        return post(url + "/documents", files={"file": (name or path.name, fh)})


def _wait_for(predicate, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def test_a_bomb_upload_fails_alone_naming_the_limit(sample_db_copy, tmp_path):
    bomb = docx_bomb(tmp_path / "bomb.docx", 300)
    with LiveServer(offline(sample_db_copy)) as srv:
        r = _upload(srv.url, bomb)
        assert r.status_code == 422, r.text
        assert "word/document.xml" in r.json()["error"] and "--max-member-mb / RAG_MAX_MEMBER_MB" in r.json()["error"]
        r = _upload(srv.url, make_pdf(tmp_path / "fine.pdf", ["Quokkanite valve manual"]))
        assert r.status_code == 201, r.text
        assert get(srv.url + "/search", params={"query": "Quokkanite"}).json()[0]["path"].endswith("page_001.md")
    assert not list((sample_db_copy / ".ragkit" / "uploads").rglob("bomb.docx"))


def test_an_upload_past_its_time_is_refused_naming_the_limit(sample_db_copy, tmp_path):
    settings = offline(sample_db_copy).with_(limits=Limits(doc_seconds=1))
    with LiveServer(settings) as srv:
        r = _upload(srv.url, slow_pdf(tmp_path / "slow.pdf"))
    assert r.status_code == 422, r.text
    assert "took longer than 1 s" in r.json()["error"] and "--doc-timeout / RAG_DOC_TIMEOUT" in r.json()["error"]


def test_a_slow_upload_keeps_no_other_upload_waiting(sample_db_copy, tmp_path):
    """While a 3000-page PDF converts, a one-page PDF uploaded after it is answered, and the slow one is still
    converting then. Before, uploads queued in one conversion process: the small one waited for the slow one."""
    slow = slow_pdf(tmp_path / "slow.pdf")
    small = make_pdf(tmp_path / "small.pdf", ["Numbatite pump manual"])
    box: dict = {}
    with LiveServer(offline(sample_db_copy)) as srv:
        slow_upload = threading.Thread(target=lambda: box.update(r=_upload(srv.url, slow)), daemon=True)
        slow_upload.start()
        _wait_for(lambda: list((sample_db_copy / ".ragkit" / "uploads").rglob("slow.pdf")), "the slow upload")
        r = _upload(srv.url, small)
        assert r.status_code == 201, r.text
        assert slow_upload.is_alive() and "r" not in box  # still converting
    slow_upload.join(60)  # the server's stop killed the conversion: 503, and none of its pages written
    assert box["r"].status_code == 503, box["r"].text
    assert not [p for p in iter_pages(sample_db_copy) if "/slow/" in p]


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_stop_never_waits_for_a_conversion(sample_db_copy, tmp_path, how):
    """Ctrl-C (to the process group, as a terminal sends it) or SIGTERM (to the server, as a service manager
    sends it) while an upload converts: the server ends without a traceback, the conversion is killed rather
    than finished (none of its pages are written) and no process of the server is left."""
    slow = slow_pdf(tmp_path / "slow.pdf", pages=6000)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", "serve", "--db", str(sample_db_copy),
                             "--port", str(port), "--provider", "offline"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _up(url), "the server")
        threading.Thread(target=lambda: _swallow(lambda: _upload(url, slow)), daemon=True).start()
        _wait_for(lambda: list((sample_db_copy / ".ragkit" / "uploads").rglob("slow.pdf")), "the upload")
        time.sleep(1)  # the conversion is under way
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=60)
        _wait_for(lambda: not _group_alive(proc.pid), "the server's processes to end", 10)
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    out = (tmp_path / "serve.log").read_text()
    assert code == 0 and "Traceback" not in out and "Error" not in out, out
    assert out.rstrip().endswith("stopped"), out
    assert not [p for p in iter_pages(sample_db_copy) if "/slow/" in p]


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_a_stop_after_uploads_is_clean(sample_db_copy, tmp_path, how):
    """`rag serve` converts a PDF and a DOCX upload, then gets SIGTERM (a service manager) or Ctrl-C: it exits 0,
    its last line is "stopped", and stderr holds no traceback and no `resource_tracker: ... leaked semaphore objects`
    warning. The tracker writes that warning after the server has exited, so stderr is read only once every
    process of the server is gone. (Uploads converted in a ProcessPoolExecutor printed it: 5 semaphores.)"""
    pdf = make_pdf(tmp_path / "kiwi.pdf", ["Kiwiite boiler manual", "Kiwiite boiler parts"])
    docx = small_docx(tmp_path / "emu.docx", "Emuite valves are checked weekly.")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out, err = (tmp_path / "serve.out").open("w"), (tmp_path / "serve.err").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", "serve", "--db", str(sample_db_copy),
                             "--port", str(port), "--provider", "offline"], stdout=out, stderr=err,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _up(url), "the server")
        for doc in (pdf, docx):
            r = _upload(url, doc)
            assert r.status_code == 201, r.text
        assert get(url + "/search", params={"query": "Kiwiite"}).json()[0]["path"].endswith("page_001.md")
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=60)
        _wait_for(lambda: not _group_alive(proc.pid), "the server's processes to end", 30)
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()
        err.close()
    stdout, stderr = (tmp_path / "serve.out").read_text(), (tmp_path / "serve.err").read_text()
    assert code == 0, (code, stdout, stderr)
    assert stderr.rstrip().endswith("stopped"), stderr  # the status lines go to stderr; nothing comes after
    assert "leaked" not in stderr and "resource_tracker" not in stderr and "Traceback" not in stderr, stderr
    assert "Warning" not in stderr and "Error" not in stderr and not stdout.strip(), (stdout, stderr)


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _swallow(fn) -> None:
    try:
        fn()
    except httpx.HTTPError:
        pass  # the server went away mid-request: that is the point


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


BAD_PATHS = [
    "/pages/" + "a" * 300 + ".md",  # a name longer than any file system allows
    "/pages/" + "a/" * 2100 + "page_001.md",  # a path longer than PATH_MAX
    "/pages//" + "b" * 300,  # absolute, and too long
    "/pages/x%00.md",  # NUL
    "/pages/%FF%FE.md",  # not UTF-8
    "/search?query=pump&path=" + "c" * 300,
    "/search?query=pump&path=%00",
]


def test_a_clients_bad_path_is_a_4xx_without_a_traceback(sample_db_copy, caplog):
    caplog.set_level(logging.WARNING)
    with LiveServer(offline(sample_db_copy)) as srv:
        for path in BAD_PATHS:
            r = httpx.get(srv.url + path, timeout=60)
            assert 400 <= r.status_code < 500, (path[:60], r.status_code, r.text)
            assert list(r.json()) == ["error"] and "\n" not in r.json()["error"]
    assert not [rec for rec in caplog.records if rec.exc_info or "Traceback" in rec.getMessage()], \
        [rec.getMessage() for rec in caplog.records]


def test_docs_work_offline(sample_db_copy):
    """/docs is made from the app's own schema: no script, stylesheet or font from a CDN (the only address in it
    is the server's own, in its curl example)."""
    with LiveServer(offline(sample_db_copy)) as srv:
        r = get(srv.url + "/docs")
        schema = get(srv.url + "/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert set(re.findall(r"https?://[^/'\"<\s]*", page)) == {srv.url}, page
    assert "<script" not in page and "<link" not in page and " src=" not in page
    assert "/openapi.json" in page and "/chat" in page and "/documents" in page and "query" in page
    assert schema.status_code == 200 and "/chat" in schema.json()["paths"]


def test_serve_needs_a_database_that_exists(tmp_path):
    missing = tmp_path / "no" / "such" / "db"
    done = subprocess.run([sys.executable, "-m", "ragkit.cli", "serve", "--db", str(missing), "--port", "0",
                           "--provider", "offline"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[-1].startswith(f"error: --db {missing}: no such folder"), done.stderr
    assert not (tmp_path / "no").exists()


def test_the_start_up_line_names_the_index_backend(sample_db_copy):
    """Report s54 M2: `rag serve` said which folder it served but not which backend searches it (only /health
    did). The start-up line names it: here the embedded engine (docs/serve.md)."""
    proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", "serve", "--db", str(sample_db_copy), "--port", "0",
                             "--provider", "offline"], stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("serving "):
                break
        assert lines and lines[-1].startswith(f"serving {sample_db_copy} (index: embedded) on http://"), lines
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stderr.close()
