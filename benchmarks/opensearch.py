"""The OpenSearch backend measured: bulk indexing (pages/s, with and without vectors) and `rag serve` /search
latency under 20 clients, through one and through two replicas on one cluster, beside the embedded engine.

    RAG_TEST_OPENSEARCH_URL=http://127.0.0.1:9200 uv run python benchmarks/opensearch.py --db DIR \\
        [--clients 20] [--seconds 30] [--vectors]

DIR is a database of ../shared/bench/mmlongbench-doc (benchmarks/search.py --workdir makes one); its page files are
copied (without its embedded index) into a temporary database that is indexed into the cluster under a fresh
prefix, removed at the end. The clients ask MMLongBench-Doc's questions. One JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import shared_bench  # noqa: E402
from serve import Server, load  # noqa: E402

from ragkit.search.indexconfig import configure_index  # noqa: E402
from ragkit.search.opensearch import OpenSearchIndex  # noqa: E402


def copy_pages(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".ragkit"))


def bulk(db: Path, url: str, vectors: bool) -> dict:
    """Index every page of `db` into a fresh prefix; pages/s of the whole sync (read, analyse, [embed], bulk)."""
    os.environ["RAG_EMBED"] = "1" if vectors else "0"
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    cfg = configure_index(db, f"opensearch+{url}/{prefix}")
    ix = OpenSearchIndex(db, cfg, progress=False)
    rep = ix.sync(progress=False)
    again = ix.sync(progress=False)
    ix.close()
    return {"pages": rep.added, "seconds": round(rep.seconds, 1), "pages_per_s": round(rep.added / rep.seconds, 1),
            "second_sync_changed": again.changed, "second_sync_s": round(again.seconds, 1), "prefix": prefix}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--vectors", action="store_true", help="also measure indexing with vectors (slow: the model)")
    args = ap.parse_args()
    url = os.environ["RAG_TEST_OPENSEARCH_URL"]
    questions = [json.loads(x)["question"] for x in (shared_bench() / "questions.jsonl").read_text().splitlines() if x]
    out: dict = {"bench": "opensearch", "cpus": os.cpu_count(), "loadavg_1m_start": round(os.getloadavg()[0], 1)}

    def ask(http: httpx.Client, rng: random.Random) -> httpx.Response:
        return http.get("/search", params={"query": rng.choice(questions), "k": 10})

    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_"))}
    base_env.update(PYTHONPATH=str(ROOT), RAG_PROVIDER="offline", RAG_EMBED="0")
    prefixes = []
    with tempfile.TemporaryDirectory(prefix="ragkit-os-bench-") as tmp:
        db = Path(tmp) / "database"
        copy_pages(args.db, db)
        if args.vectors:
            out["bulk_with_vectors"] = bulk(db, url, True)
            prefixes.append(out["bulk_with_vectors"]["prefix"])
        out["bulk_keywords_only"] = bulk(db, url, False)  # the database now uses this prefix
        prefixes.append(out["bulk_keywords_only"]["prefix"])
        servers = []
        try:
            servers.append(Server(db, base_env, Path(tmp) / "a.log"))
            out["search_1_replica"] = load(servers[0].url, ask, args.clients, args.seconds, servers[0].proc.pid)
            servers.append(Server(db, base_env, Path(tmp) / "b.log"))
            out["search_2_replicas"] = load([s.url for s in servers], ask, args.clients, args.seconds,
                                            [s.proc.pid for s in servers])
        finally:
            for s in servers:
                s.stop()
        emb = Path(tmp) / "embedded" / "database"
        copy_pages(args.db, emb)
        srv = Server(emb, base_env, Path(tmp) / "e.log")
        try:
            out["search_embedded_1"] = load(srv.url, ask, args.clients, args.seconds, srv.proc.pid)
        finally:
            srv.stop()
    for p in prefixes:
        httpx.delete(f"{url}/{p}-*", timeout=60)
    out["mode"] = "keyword (RAG_EMBED=0 in the servers: the figures are the engines', not the model's)"
    out["loadavg_1m_end"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
