#!/usr/bin/env python3
"""Smoke test of the embedded OpenSearch server (stdlib only).

    python3 services/opensearch/smoke.py [URL]          # URL defaults to $RAG_TEST_OPENSEARCH_URL

Checks kuromoji / nori / cjk analysis, text sub-fields + multi_match, a k-NN (Lucene HNSW, cosine) query.
When the cluster has 3 nodes it also stops one node (through POST /_ragkit/nodes/{id}/_stop), checks that
search and bulk writes go on with replicas, and starts the node again.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request


def call(url, method="GET", body=None, ndjson=False):
    data = None
    headers = {}
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers["Content-Type"] = "application/x-ndjson" if ndjson else "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{method} {url} -> {e.code}: {e.read().decode()[:500]}") from None


def check(label, got, want):
    ok = got == want
    print(f"{'ok ' if ok else 'FAIL'} {label}: {got}" + ("" if ok else f" (want {want})"))
    if not ok:
        raise SystemExit(1)


def tokens(url, analyzer, text):
    return [t["token"] for t in call(f"{url}/_analyze", "POST", {"analyzer": analyzer, "text": text})["tokens"]]


def ids(result):
    return [h["_id"] for h in result["hits"]["hits"]]


DOCS = [
    ("ja", "東京都に住んでいます", [1.0, 0.0, 0.0]),
    ("ko", "한국어 형태소 분석기를 사용합니다", [0.0, 1.0, 0.0]),
    ("en", "Searching running engines in Tokyo", [0.8, 0.2, 0.0]),
]


def bulk(url, index, docs):
    lines = []
    for doc_id, body, emb in docs:
        lines += [json.dumps({"index": {"_id": doc_id}}), json.dumps({"body": body, "emb": emb}, ensure_ascii=False)]
    res = call(f"{url}/{index}/_bulk?refresh=true", "POST", "\n".join(lines) + "\n", ndjson=True)
    return not res["errors"]


def main():
    url = (sys.argv[1] if len(sys.argv) > 1 else os.environ["RAG_TEST_OPENSEARCH_URL"]).rstrip("/")
    nodes = call(f"{url}/_ragkit/nodes")["nodes"]
    print(f"cluster {call(url)['cluster_name']}: {len(nodes)} node(s), health {call(url + '/_cluster/health')['status']}")

    check("kuromoji 東京都に住んでいます", tokens(url, "kuromoji", "東京都に住んでいます"), ["東京", "都", "住む"])
    check("nori 한국어 형태소 분석기", tokens(url, "nori", "한국어 형태소 분석기"), ["한국", "어", "형태", "소", "분석", "기"])
    check("cjk 東京都", tokens(url, "cjk", "東京都"), ["東京", "京都"])

    index = f"smoke-{int(time.time() * 1000)}"
    call(f"{url}/{index}", "PUT", {
        "settings": {"number_of_shards": 3, "number_of_replicas": 1 if len(nodes) > 1 else 0, "index.knn": True},
        "mappings": {"properties": {
            "body": {"type": "text", "fields": {a: {"type": "text", "analyzer": n} for a, n in
                                                 [("ja", "kuromoji"), ("ko", "nori"), ("en", "english"), ("cjk", "cjk")]}},
            "emb": {"type": "knn_vector", "dimension": 3,
                    "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}},
        }},
    })
    check("bulk index", bulk(url, index, DOCS), True)
    fields = ["body.ja", "body.ko", "body.en", "body.cjk"]
    for query, want in [("住む", ["ja"]), ("분석", ["ko"]), ("run", ["en"]), ("京都", ["ja"])]:
        res = call(f"{url}/{index}/_search", "POST", {"query": {"multi_match": {"query": query, "fields": fields}}})
        check(f"multi_match {query}", ids(res), want)
    knn = {"size": 3, "query": {"knn": {"emb": {"vector": [1, 0, 0], "k": 3}}}}
    check("knn [1,0,0]", ids(call(f"{url}/{index}/_search", "POST", knn)), ["ja", "en", "ko"])

    if len(nodes) >= 3:
        failover(url, index, nodes, knn)
    call(f"{url}/{index}", "DELETE")
    print("all checks passed")


def failover(url, index, nodes, knn):
    health = call(f"{url}/_cluster/health/{index}?wait_for_status=green&timeout=60s")
    check("index green with 1 replica on 3 nodes", health["status"], "green")
    victim = nodes[1]  # node-2; URL (node-1) stays up
    t0 = time.time()
    after = call(f"{url}/_ragkit/nodes/{victim['id']}/_stop", "POST")
    print(f"     stopped {victim['name']} in {time.time() - t0:.1f} s")
    check(f"{victim['name']} running", [n["running"] for n in after["nodes"]], [True, False, True])
    health = call(f"{url}/_cluster/health?wait_for_nodes=2&timeout=60s")
    check("cluster nodes after stop", health["number_of_nodes"], 2)
    check("search after stop (all docs)", call(f"{url}/{index}/_count")["count"], 3)
    check("knn after stop", ids(call(f"{url}/{index}/_search", "POST", knn)), ["ja", "en", "ko"])
    check("bulk write after stop", bulk(url, index, [("x1", "大阪に行きます", [0, 0, 1]), ("x2", "서울에 갑니다", [0, 0.5, 0.5])]), True)
    check("count after write", call(f"{url}/{index}/_count")["count"], 5)
    t0 = time.time()
    call(f"{url}/_ragkit/nodes/{victim['id']}/_start", "POST")
    health = call(f"{url}/_cluster/health/{index}?wait_for_status=green&wait_for_nodes=3&timeout=120s")
    print(f"     restarted {victim['name']}, index green again in {time.time() - t0:.1f} s")
    check("health after restart", (health["status"], health["number_of_nodes"]), ("green", 3))


if __name__ == "__main__":
    main()
