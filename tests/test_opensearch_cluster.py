"""Beyond one machine, against real OpenSearch nodes: two `rag serve` replicas on one index, `rag serve` when its
cluster goes away or hangs, two ingests at once into one database, a three-node cluster that loses a node, and a
cluster failure in the middle of a batch."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from opensearch_fixtures import Cluster, Proxy, drop_indices, node_url, unique_prefix

from ragkit.core.config import Settings
from ragkit.search import open_index
from ragkit.search.backend import ingest_into
from ragkit.search.opensearch.client import ClusterError

pytestmark = [pytest.mark.opensearch, pytest.mark.slow]

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"
VPN = "How long can a VPN session last?"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(db: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", "serve", "--db", str(db), "--port", str(port)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "RAG_PROVIDER": "offline"})
    url = f"http://127.0.0.1:{port}"
    for _ in range(900):
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"rag serve did not start: {log.read_text()[-2000:]}")


def test_two_serve_replicas_answer_alike_and_share_sessions(isolated_env, tmp_path):
    url = node_url()
    prefix = unique_prefix()
    db = isolated_env / "database"
    ingest_into([CORPUS], db=db, index=f"opensearch+{url}/{prefix}", progress=False)
    procs = []
    try:
        (a, url_a), (b, url_b) = _serve(db, tmp_path / "a.log"), _serve(db, tmp_path / "b.log")
        procs = [a, b]
        sa = httpx.get(url_a + "/search", params={"query": VPN, "k": 3}, timeout=60).json()
        sb = httpx.get(url_b + "/search", params={"query": VPN, "k": 3}, timeout=60).json()
        assert [h["path"] for h in sa] == [h["path"] for h in sb] and "Remote Access" in sa[0]["path"]
        first = httpx.post(url_a + "/chat", json={"query": VPN, "strategy": "naive"}, timeout=120).json()
        sid = first["session_id"]
        # replica B continues the session replica A started: the follow-up carries the earlier question's terms
        follow = httpx.post(url_b + "/chat", json={"query": "And what about its password rules?", "session_id": sid,
                                                   "strategy": "naive"}, timeout=120)
        assert follow.status_code == 200, follow.text
        assert follow.json()["session_id"] == sid
        third = httpx.post(url_a + "/chat", json={"query": "What else?", "session_id": sid, "strategy": "naive"},
                           timeout=120)
        assert third.status_code == 200
        from ragkit.serve.sessions import ClusterSessionStore

        ix = open_index(db)
        turns = ClusterSessionStore(ix.client, ix.sessions_name).history(sid)
        assert [t.query for t in turns] == [VPN, "And what about its password rules?", "What else?"]
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
        open_index(db).close()
        drop_indices(url, prefix)


def test_serve_says_503_when_its_cluster_fails_and_health_says_degraded(isolated_env, monkeypatch):
    """The node behind a proxy that a test cuts off (unreachable) or makes hang: /search and /chat answer 503 with
    the one-line cause (they said 400, as if the request were wrong), and /health says "degraded" with 503 (it
    said "ok" throughout), quickly even when the node hangs, so that a load balancer stops routing here; all is
    well again once the node is back. Checks are reused for HEALTH_TTL seconds."""
    from liveserver import LiveServer

    from ragkit.serve import app as serve_app

    url = node_url()
    prefix = unique_prefix()
    proxy = Proxy(url)
    db = isolated_env / "database"
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{proxy.url}/{prefix}", progress=False)
    monkeypatch.setattr(serve_app, "HEALTH_TTL", 0.0)
    settings = Settings(db=db, provider="offline", provider_reason="test", cache=False)
    try:
        with LiveServer(settings) as srv:
            ok = httpx.get(srv.url + "/health", timeout=30)
            assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text
            assert ok.json()["index"] in ("opensearch: green", "opensearch: yellow")
            assert httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60).status_code == 200
            proxy.cut()
            down = [httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60),
                    httpx.post(srv.url + "/chat", json={"query": VPN}, timeout=60),
                    httpx.post(srv.url + "/chat", json={"query": VPN, "stream": True}, timeout=60)]
            for r in down:
                assert r.status_code == 503, r.text
                assert "unreachable" in r.json()["error"] and proxy.url in r.json()["error"], r.text
            health = httpx.get(srv.url + "/health", timeout=30)
            assert health.status_code == 503 and health.json()["status"] == "degraded", health.text
            assert "unreachable" in health.json()["index"]
            proxy.restore()
            assert httpx.get(srv.url + "/health", timeout=30).status_code == 200
            assert httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60).status_code == 200
            proxy.hang()
            t0 = time.monotonic()
            hung = httpx.get(srv.url + "/health", timeout=30)
            assert time.monotonic() - t0 < serve_app.HEALTH_TIMEOUT + 2.0  # not the client's 30 s
            assert hung.status_code == 503 and "no answer within" in hung.json()["index"], hung.text
            # within HEALTH_TTL a probe gets the last check's answer: the node, back, is not asked again yet
            monkeypatch.setattr(serve_app, "HEALTH_TTL", 60.0)
            proxy.restore()
            assert httpx.get(srv.url + "/health", timeout=30).status_code == 503
    finally:
        proxy.close()
        open_index(db).close()
        drop_indices(url, prefix)


def test_chat_says_503_when_its_cluster_fails_in_the_middle_of_an_answer(isolated_env):
    """The node behind a proxy cut off the moment the answer's search reaches it: the session and the page listing
    were read, then the cluster went away. /chat and streamed /chat answer 503 with the one-line cause, as /search
    does (they said 502, a failed answer: ask() turned the cluster's error into a string like a model's)."""
    from liveserver import LiveServer

    url = node_url()
    prefix = unique_prefix()
    proxy = Proxy(url)
    db = isolated_env / "database"
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{proxy.url}/{prefix}", progress=False)
    settings = Settings(db=db, provider="offline", provider_reason="test", cache=False)
    try:
        with LiveServer(settings) as srv:
            assert httpx.post(srv.url + "/chat", json={"query": VPN}, timeout=60).status_code == 200
            for stream in (False, True):
                proxy.restore()
                proxy.cut_at(b"POST /_msearch")  # the search's request: after the session and the page listing
                r = httpx.post(srv.url + "/chat", json={"query": VPN, "stream": stream}, timeout=60)
                if stream:
                    assert r.status_code == 200 and "event: error" in r.text, r.text
                    event = json.loads(r.text.split("event: error\ndata: ", 1)[1].split("\n", 1)[0])
                    status, error = event["status"], event["error"]
                else:
                    status, error = r.status_code, r.json()["error"]
                assert proxy._srv is None, "the proxy was not cut: the answer never searched the cluster"
                assert status == 503, (status, error)
                assert "unreachable" in error and proxy.url in error, error
    finally:
        proxy.close()
        open_index(db).close()
        drop_indices(url, prefix)


def test_an_agent_whose_search_the_cluster_fails_gives_an_index_error_not_an_answer(isolated_env, scripted_server):
    """A model's search tool call when the cluster goes away: the answer fails as the index's outage (error_kind
    "index", so serve says 503 and a batch row is retried). The tool used to hand the model "Error: search failed"
    and the model answered, or refused, from searches that never ran."""
    from fakeserver import openai_settings

    from ragkit.answer import ask

    url = node_url()
    prefix = unique_prefix()
    proxy = Proxy(url)
    db = isolated_env / "database"
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{proxy.url}/{prefix}", progress=False)
    settings = openai_settings(scripted_server, db=db, start_pages=0)
    scripted_server.enqueue(tool_calls=[("search", {"query": "VPN session"})])
    scripted_server.enqueue(content="VPN sessions last 8 hours. [policies/x/page_001.md]")
    try:
        ix = open_index(db)
        ix.pages()  # listed before the cut, as a running server has
        proxy.cut_at(b"POST /_msearch")
        answer = ask(VPN, settings, strategy="agent", index=ix)
        assert answer.error_kind == "index", (answer.error, answer.answer)
        assert "unreachable" in answer.error and proxy.url in answer.error, answer.error
        assert len(scripted_server.requests) == 1  # the model was not asked again after the failed search
    finally:
        proxy.close()
        open_index(db).close()
        drop_indices(url, prefix)


def test_two_ingests_at_once_give_the_union(isolated_env):
    url = node_url()
    prefix = unique_prefix()
    db = isolated_env / "database"
    spec = f"opensearch+{url}/{prefix}"
    ingest_into([CORPUS / "policies"], db=db, index=spec, progress=False)  # the database and its index exist
    env = {**os.environ}
    cmds = [[sys.executable, "-m", "ragkit.cli", "ingest", str(CORPUS / d), "--db", "database"]
            for d in ("家電", "社内資料", "공지")]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for c in cmds]
    outs = [p.communicate(timeout=600) for p in procs]
    try:
        assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
        ix = open_index(db)
        files = sorted(p.relative_to(db).as_posix() for p in db.rglob("page_*.md") if ".ragkit" not in p.parts)
        assert ix.pages() == files and len(files) == len(set(files)) > 30
        assert ix.count() == len(files)  # nothing doubled
    finally:
        open_index(db).close()
        drop_indices(url, prefix)


@pytest.fixture
def cluster(tmp_path):
    node_url()  # skips, saying why, where no node can run
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_a_three_node_cluster_goes_on_when_a_node_stops(cluster, isolated_env):
    db = isolated_env / "database"
    prefix = unique_prefix()
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{cluster.url}/{prefix}", progress=False)
    ix = open_index(db)
    health = httpx.get(f"{cluster.url}/_cluster/health/{prefix}-pages", timeout=30).json()
    assert health["number_of_nodes"] == 3 and health["active_shards"] == 2  # a primary and its replica
    before = [h.path for h in ix.search(VPN, k=3)]
    cluster.stop(2)
    assert [h.path for h in ix.search(VPN, k=3)] == before
    report, synced = ingest_into([CORPUS / "家電"], db=db, progress=False)
    assert not report.failed and synced.added == len(report.written) > 0
    assert any(p.startswith("家電/") for p in ix.pages())
    cluster.start(2)
    cluster.wait("green")
    assert [h.path for h in ix.search(VPN, k=3)] == before
    ix.close()


def test_a_cluster_failure_mid_batch_fails_those_rows_and_the_rerun_retries_them(cluster, isolated_env):
    from ragkit.evaluate.batch import run_batch
    from ragkit.evaluate.retrieval import search_answer_fn
    from ragkit.search import configure_index

    db = isolated_env / "database"
    prefix = unique_prefix()
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{cluster.url}/{prefix}", progress=False)
    # the database talks to the node that holds no copy of its pages; the two that do will stop
    shards = httpx.get(f"{cluster.url}/_cat/shards/{prefix}-pages", params={"format": "json"}, timeout=30).json()
    holders = {int(s["node"].split("-")[1]) for s in shards}
    nodes = {n["id"]: n for n in cluster.nodes()}
    (other,) = set(nodes) - holders
    configure_index(db, f"opensearch+{nodes[other]['url']}/{prefix}")
    csv = isolated_env / "q.csv"
    n = 60
    questions = [f"{VPN} ({i})" for i in range(n)]
    csv.write_text("Question\n" + "\n".join(questions) + "\n", encoding="utf-8")
    settings = Settings(db=db, results=isolated_env / "results", provider="offline", cache=False, workers=1)
    asked, search = itertools.count(), search_answer_fn(10)  # what `--strategy search` runs

    def search_stopping_the_holders_at_the_21st(question, settings, **kw):
        """The real search; before the 21st question the nodes holding the pages stop (a stop timed by a watcher
        thread raced the batch: it could finish every row first)."""
        if next(asked) == 20:
            for h in sorted(holders):
                cluster.stop(h)
        return search(question, settings, **kw)

    first = run_batch(csv, settings, strategy="search", progress=False, answer_fn=search_stopping_the_holders_at_the_21st)
    failed = [r for r in first.rows if r.get("Error")]
    assert len(failed) == n - 20 and first.checkpoint_kept and len(first.rows) == n
    assert all("Traceback" not in r["Error"] and "\n" not in r["Error"] for r in failed)
    for h in sorted(holders):
        cluster.start(h)
    cluster.wait("green")
    again = run_batch(csv, settings, strategy="search", progress=False)
    assert not again.errors and again.resumed == n - len(failed)  # only the failed rows were asked again
    assert len(again.rows) == n and all(r["Retrieved Files"] for r in again.rows)


def _upload(url: str, pdf: Path, name: str, category: str) -> httpx.Response:
    with pdf.open("rb") as fh:
        return httpx.post(url + "/documents", files={"file": (name, fh, "application/pdf")},
                          data={"category": category}, timeout=120)


def test_an_upload_while_the_cluster_is_down_writes_nothing_and_one_it_fails_midway_says_what_is_stored(
        isolated_env, tmp_path):
    """POST /documents while the node was down answered 503, yet the pages were written, recorded in the manifest
    and listed by GET /documents (only the index lacked them). Now a cluster that does not answer is a 503 before
    anything is written; one lost after the pages are written (a race) gives 202 `indexed: false`, saying the pages
    are stored and how they reach the index (the same file uploaded again, or `rag index sync`). GET /documents
    reads the files: it answers while the cluster is down, as docs/serve.md says."""
    from liveserver import LiveServer
    from test_serve import make_pdf

    url = node_url()
    prefix = unique_prefix()
    proxy = Proxy(url)
    db = isolated_env / "database"
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{proxy.url}/{prefix}", progress=False)
    pdf = make_pdf(tmp_path / "harbor.pdf", ["Zanzibarite harbor crane manual", "Crane zanzibarite maintenance"])
    manifest = db / ".ragkit" / "ingest-manifest.json"
    settings = Settings(db=db, provider="offline", provider_reason="test", cache=False)
    try:
        with LiveServer(settings) as srv:
            before = httpx.get(srv.url + "/documents", timeout=30).json()["documents"]
            proxy.cut()
            r = _upload(srv.url, pdf, "harbor.pdf", "upl")
            assert r.status_code == 503 and "unreachable" in r.json()["error"], r.text
            assert not (db / "upl").exists() and "harbor" not in manifest.read_text(encoding="utf-8")
            assert not list((db / ".ragkit").rglob("harbor.pdf"))
            listed = httpx.get(srv.url + "/documents", timeout=30)
            assert listed.status_code == 200 and listed.json()["documents"] == before
            # the cluster is there for the check, and gone when the pages are sent to it
            proxy.restore()
            proxy.cut_at(b"POST /_bulk")
            r = _upload(srv.url, pdf, "harbor.pdf", "upl")
            assert proxy._srv is None, "the proxy was not cut: the upload never sent its pages"
            assert r.status_code == 202, r.text
            got = r.json()
            assert got["indexed"] is False and got["pages"] == 2 and "stored but not indexed" in got["warning"]
            assert "rag index sync" in got["warning"] and "unreachable" in got["warning"]
            assert len(list((db / "upl").rglob("page_*.md"))) == 2
            # the same file again, the cluster back: its pages reach the index
            proxy.restore()
            r = _upload(srv.url, pdf, "harbor.pdf", "upl")
            assert r.status_code == 200 and r.json()["unchanged"] is True and r.json()["indexed"] is True, r.text
            hits = httpx.get(srv.url + "/search", params={"query": "zanzibarite"}, timeout=60).json()
            assert len(hits) == 2 and all("upl/harbor" in h["path"] for h in hits), hits
    finally:
        proxy.close()
        open_index(db).close()
        drop_indices(url, prefix)


def test_a_cluster_that_holds_none_of_the_pages_is_degraded_and_search_says_to_sync(isolated_env, monkeypatch):
    """The node restarted empty: /health said 200 "opensearch: green" and /search `200 []`, while /chat said 409
    "the index holds no pages ... run `rag index sync`". Now /search says the same 409 and /health is 503
    "degraded" with that line, until the index is synced."""
    from liveserver import LiveServer

    from ragkit.search import configure_index
    from ragkit.search.backend import sync_index
    from ragkit.serve import app as serve_app

    monkeypatch.setattr(serve_app, "HEALTH_TTL", 0.0)
    url = node_url()
    db = isolated_env / "database"
    ingest_into([CORPUS / "policies"], db=db, progress=False)  # the page files, indexed nowhere yet
    prefix = unique_prefix()
    configure_index(db, f"opensearch+{url}/{prefix}")  # an empty index, as a node that lost its data
    settings = Settings(db=db, provider="offline", provider_reason="test", cache=False)
    try:
        with LiveServer(settings) as srv:
            chat = httpx.post(srv.url + "/chat", json={"query": VPN}, timeout=60)
            assert chat.status_code == 409 and "run `rag index sync" in chat.json()["error"], chat.text
            search = httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60)
            assert search.status_code == 409 and search.json()["error"] == chat.json()["error"], search.text
            health = httpx.get(srv.url + "/health", timeout=30)
            assert health.status_code == 503 and health.json()["status"] == "degraded", health.text
            assert health.json()["index"] == chat.json()["error"]
            sync_index(db, progress=False)
            assert httpx.get(srv.url + "/health", timeout=30).status_code == 200
            found = httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60)
            assert found.status_code == 200 and found.json(), found.text
            # in step with its files, a search that finds nothing is still an empty result
            assert httpx.get(srv.url + "/search", params={"query": "zyxwvut"}, timeout=60).json() == []
    finally:
        open_index(db).close()
        drop_indices(url, prefix)


def test_chat_follows_the_database_to_its_cluster_on_a_new_address(isolated_env, monkeypatch):
    """The cluster moved to another address (two proxies in front of one node: the old one then cut off), and
    `rag index sync --index opensearch+NEW/PREFIX` pointed the database at it. A running server followed it for
    /health and /search, but every /chat answered 503 "OpenSearch at <old address> unreachable" while /health
    said 200 ok: the sessions store opened at start kept the old client. Now /chat follows the database's index
    as /search does, and the session begun before the move goes on after it."""
    from liveserver import LiveServer
    from typer.testing import CliRunner

    from ragkit.cli import app as cli
    from ragkit.search.indexconfig import index_config
    from ragkit.serve import app as serve_app

    monkeypatch.setattr(serve_app, "HEALTH_TTL", 0.0)
    url = node_url()
    prefix = unique_prefix()
    old, new = Proxy(url), Proxy(url)
    db = isolated_env / "database"
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{old.url}/{prefix}", progress=False)
    settings = Settings(db=db, provider="offline", provider_reason="test", cache=False)
    try:
        with LiveServer(settings) as srv:
            first = httpx.post(srv.url + "/chat", json={"query": VPN}, timeout=60)
            assert first.status_code == 200, first.text
            sid = first.json()["session_id"]
            moved = CliRunner().invoke(cli, ["index", "sync", "--db", str(db), "--index",
                                             f"opensearch+{new.url}/{prefix}"])
            assert moved.exit_code == 0, moved.output
            assert index_config(db).url == new.url
            old.cut()
            health = httpx.get(srv.url + "/health", timeout=30)
            assert health.status_code == 200 and health.json()["status"] == "ok", health.text
            assert httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60).status_code == 200
            follow = httpx.post(srv.url + "/chat", json={"query": "And its password rules?", "session_id": sid},
                                timeout=60)
            assert follow.status_code == 200, follow.text
            fresh = httpx.post(srv.url + "/chat", json={"query": VPN, "stream": True}, timeout=60)
            assert "event: answer" in fresh.text, fresh.text
    finally:
        old.close()
        new.close()
        open_index(db).close()
        drop_indices(url, prefix)


def _ingested_behind_a_proxy(env: Path) -> tuple[Path, str, Proxy]:
    """The sample policies ingested into `env`/database, indexed on the node through a proxy (which a test cuts to
    play the cluster going away or moving): (database, prefix, proxy)."""
    prefix = unique_prefix()
    proxy = Proxy(node_url())
    db = env / "database"
    ingest_into([CORPUS / "policies"], db=db, index=f"opensearch+{proxy.url}/{prefix}", progress=False)
    return db, prefix, proxy


def test_index_sync_index_points_a_database_at_a_cluster_that_moved(isolated_env):
    """No command re-pointed a database at its cluster's new address (`rag index sync` had no --index, ingest's
    needs a SOURCE), and the unreachable error sent the user to edit index.json by hand. Now the error names
    `rag index sync --index`, which validates the address as ingest does (nothing stored on a bad one), records
    the new one and syncs."""
    from typer.testing import CliRunner

    from ragkit.cli import app as cli
    from ragkit.search.indexconfig import index_config

    url = node_url()
    db, prefix, old = _ingested_behind_a_proxy(isolated_env)
    old.cut()
    run = CliRunner().invoke
    try:
        down = run(cli, ["search", VPN, "--db", str(db)])
        assert down.exit_code == 1, down.output
        assert f"rag index sync --index opensearch+http://NEW-HOST:PORT/{prefix}" in " ".join(down.output.split())
        for bad in ("http://x:9200/p", f"opensearch+{url}/Upper", "opensearch+http://u:pw@x:9200/p"):
            refused = run(cli, ["index", "sync", "--db", str(db), "--index", bad])
            assert refused.exit_code == 2 and "--index" in refused.output, refused.output
            assert index_config(db).url == old.url
        both = run(cli, ["index", "sync", "--db", str(db), "--index", f"opensearch+{url}/{prefix}", "--new-id"])
        assert both.exit_code == 2, both.output
        moved = run(cli, ["index", "sync", "--db", str(db), "--index", f"opensearch+{url}/{prefix}"])
        assert moved.exit_code == 0, moved.output
        assert index_config(db).url == url and index_config(db).prefix == prefix
        again = run(cli, ["search", VPN, "--db", str(db)])
        assert again.exit_code == 0 and "Remote Access" in again.output, again.output
    finally:
        old.close()
        open_index(db).close()
        drop_indices(url, prefix)


def test_serve_started_while_its_cluster_is_down_comes_up_degraded_and_recovers(isolated_env, monkeypatch):
    """`rag serve` refused to start while its cluster was unreachable (a replica restarted during an outage could
    not come up), though docs/serve.md describes a degraded mode. Now it starts degraded: /health 503, the
    document list and pages answer from the files, /search 503; once the cluster answers, all is well."""
    from liveserver import LiveServer

    from ragkit.serve import app as serve_app

    monkeypatch.setattr(serve_app, "HEALTH_TTL", 0.0)
    url = node_url()
    db, prefix, proxy = _ingested_behind_a_proxy(isolated_env)
    settings = Settings(db=db, provider="offline", provider_reason="test", cache=False)
    open_index(db).close()  # as a process that starts now: no index opened before the outage
    proxy.cut()
    try:
        with LiveServer(settings) as srv:
            assert "unreachable" in srv.app.state.start_problem
            health = httpx.get(srv.url + "/health", timeout=30)
            assert health.status_code == 503 and health.json()["status"] == "degraded", health.text
            listed = httpx.get(srv.url + "/documents", timeout=30)
            assert listed.status_code == 200 and listed.json()["documents"], listed.text
            tree = httpx.get(srv.url + "/documents/" + listed.json()["documents"][0]["id"], timeout=30)
            assert tree.status_code == 200, tree.text
            page = next(db.rglob("page_001.md")).relative_to(db).as_posix()
            assert httpx.get(srv.url + "/pages/" + page, timeout=30).status_code == 200
            assert httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60).status_code == 503
            assert httpx.post(srv.url + "/chat", json={"query": VPN}, timeout=60).status_code == 503
            proxy.restore()
            assert httpx.get(srv.url + "/health", timeout=30).status_code == 200
            assert httpx.get(srv.url + "/search", params={"query": VPN}, timeout=60).status_code == 200
            assert httpx.post(srv.url + "/chat", json={"query": VPN}, timeout=60).status_code == 200
    finally:
        proxy.close()
        with contextlib.suppress(ClusterError):  # the index was never opened when the test failed early
            open_index(db).close()
        drop_indices(url, prefix)


def test_rag_serve_during_an_outage_says_degraded_and_logs_each_failed_request(isolated_env, tmp_path):
    """The `rag serve` process itself, its cluster unreachable: it starts, says "degraded" in one line on stderr,
    and logs one line per failed request (method, path, status, cause), never the token or the question; requests
    that succeed or are refused for the token are not logged."""
    url = node_url()
    db, prefix, proxy = _ingested_behind_a_proxy(isolated_env)
    proxy.cut()
    port, log = _port(), tmp_path / "serve.log"
    token = "sekret-token-4711"
    proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", "serve", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=log.open("w"), start_new_session=True,
                            env={**os.environ, "RAG_PROVIDER": "offline", "RAG_API_TOKEN": token})
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    try:
        for _ in range(900):
            try:
                health = httpx.get(base + "/health", timeout=10)
                break
            except httpx.TransportError:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.1)
        assert health.status_code == 503, health.text
        assert httpx.get(base + "/documents", headers=auth, timeout=30).status_code == 200
        assert httpx.get(base + "/search", params={"query": "secret question"}, headers=auth,
                         timeout=60).status_code == 503
        assert httpx.get(base + "/search", params={"query": VPN}, timeout=60).status_code == 401
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        proxy.close()
        drop_indices(url, prefix)
    lines = log.read_text().splitlines()
    assert sum(line.startswith("degraded: ") and "unreachable" in line for line in lines) == 1, lines
    failed = [line for line in lines if line.startswith("GET /search -> 503")]
    assert len(failed) == 1 and "unreachable" in failed[0], lines
    assert not [line for line in lines if " -> 401" in line or "/documents" in line], lines
    assert token not in log.read_text() and "secret question" not in log.read_text()
