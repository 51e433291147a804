"""Batch runner benchmark: parallel speed-up and memory over a long run, against a scripted model server.

    uv run python benchmarks/batch.py                      # prints ONE JSON line
    uv run python benchmarks/batch.py --questions 50 --rss-questions 300   # a quick look

The model is tests/fakeserver.py's ScriptedServer (a real OpenAI-compatible HTTP server, the real `openai`
client talks to it), run in its own process so its threads do not share the runner's GIL. Its responder
scripts a short run of the `agent` strategy: the first turn calls the `search` tool, the second turn gives the
final JSON answer citing the question's reference page; every call waits `--delay-ms` (200) before answering.
So each question costs 2 model calls (~400 ms of model time) plus the runner's own work (index search, scoring
of the reference metrics over the universe, the fsync'ed checkpoint line). The input has `Question` and
`Reference Document` only (no checklist/ground truth, so no judge calls); every answer cites its reference,
so the optimizer finds nothing to do.

Speed: the same `--questions` (200) with 1 worker and with 5 workers, in-process `run_batch`, wall time of the
whole call (including writing the CSVs), after a 5-question warm-up run (lazy imports, first connections).
Target: speed-up >= 4.5x.

Memory: `rag batch` as a subprocess (`python -m ragkit.cli`) over `--rss-questions` (2,000) questions with
5 workers and a shorter delay (`--rss-delay-ms`, 10 ms, so the run takes minutes, not half an hour); its
VmRSS sampled every 100 ms from /proc. Reported: RSS when the first row is saved (start), when half the rows
are saved (mid), the peak, and at the last row saved (end). Flat = end - start stays a few MiB (the result rows
themselves are kept for the CSV: ~1 KB each).

The index's dense re-ranking is switched off (RAG_EMBED=0): loading the embedding model is not the runner's
cost and would only blur the figures.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ["RAG_EMBED"] = "0"

from ragkit.core.config import Secret, Settings  # noqa: E402
from ragkit.core.pagefile import PageMeta, render_page  # noqa: E402

TOPICS = ["reset", "wifi", "firmware", "ports", "lights", "guest network", "parental controls", "backup",
          "factory settings", "mesh", "vpn", "dns", "updates", "warranty", "power", "mounting"]


def make_db(root: Path, n_pages: int = 64) -> tuple[Path, list[str]]:
    """A small database: n_pages pages in a few documents; returns (db, db-relative page paths)."""
    db = root / "database"
    rels = []
    for i in range(n_pages):
        topic = TOPICS[i % len(TOPICS)]
        rel = f"manuals/router_{i // 16}/{topic}/page_{i + 1:03d}.md"
        body = (f"# {topic.title()} ({i})\nThis page explains {topic} for router model {i // 16}. "
                f"Step {i}: open the admin page and choose {topic}. Code R{i:04d}.")
        p = db / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render_page(PageMeta(source="router.pdf", document=f"router {i // 16}", section=topic,
                                          page=i + 1), body), encoding="utf-8")
        rels.append(rel)
    return db, rels


def write_questions(path: Path, db_ref: str, rels: list[str], n: int) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Question", "Reference Document"])
        for i in range(n):
            rel = rels[i % len(rels)]
            w.writerow([f"Q{i}: how does code R{i % len(rels):04d} work?", f"{db_ref}/{rel}"])


# -- the scripted server, in its own process -----------------------------------------------------------
def _serve(conn, delay_s: float, rels: list[str]) -> None:
    from fakeserver import ScriptedServer

    def respond(body: dict):
        msgs = body.get("messages") or []
        question = next((m["content"] for m in msgs if m.get("role") == "user"), "")
        if not any(m.get("role") == "tool" for m in msgs):
            return {"delay": delay_s, "tool_calls": [("search", {"query": question})],
                    "usage": {"prompt_tokens": 900, "completion_tokens": 20}}
        i = int(question[1:].split(":", 1)[0])
        answer = {"answer": f"See code R{i % len(rels):04d}.", "sources": [rels[i % len(rels)]], "refused": False}
        return {"delay": delay_s, "content": json.dumps(answer), "usage": {"prompt_tokens": 1500,
                                                                           "completion_tokens": 40}}

    server = ScriptedServer()
    server.set_responder(respond)
    conn.send(server.base_url)
    conn.recv()  # until told to stop
    conn.send({"requests": len(server.requests), "unscripted": server.unscripted,
               "errors": sum(1 for s in server.statuses if s >= 400)})
    server.close()


class Server:
    def __init__(self, delay_s: float, rels: list[str]) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, delay_s, rels), daemon=True)
        self.proc.start()
        self.base_url = self.conn.recv()

    def stop(self) -> dict:
        self.conn.send("stop")
        stats = self.conn.recv()
        self.proc.join(10)
        return stats


def settings_for(base_url: str, db: Path, results: Path, workers: int) -> Settings:
    return Settings(db=db, results=results, provider="openai", provider_reason="benchmark", model="gpt-4o-mini",
                    judge_model="gpt-4o-mini", api_key=Secret("sk-bench"), api_base=base_url, workers=workers,
                    cache=False, timeout=60.0)


def timed_run(base_url: str, db: Path, work: Path, rels: list[str], n: int, workers: int) -> dict:
    from ragkit.evaluate.batch import run_batch

    inp = work / f"q_{n}q_{workers}w.csv"
    write_questions(inp, "database", rels, n)
    t0 = time.perf_counter()
    report = run_batch(inp, settings_for(base_url, db, work / f"results_{n}q_{workers}w", workers),
                       progress=False)
    wall = time.perf_counter() - t0
    recall = [float(r["Ref Recall"]) for r in report.rows if r["Ref Recall"] != ""]
    return {"wall_s": round(wall, 2), "errors": len(report.errors), "rows": len(report.rows),
            "mean_ref_recall": round(sum(recall) / len(recall), 3) if recall else None,
            "input_tokens": report.usage.input_tokens}


# -- memory over a long run -----------------------------------------------------------------------------
def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _saved_rows(ck_dir: Path) -> int:
    n = 0
    for p in ck_dir.glob("*.jsonl") if ck_dir.is_dir() else []:
        try:
            n += p.read_bytes().count(b"\n")
        except OSError:
            pass
    return n


def rss_run(base_url: str, db: Path, work: Path, rels: list[str], n: int, workers: int) -> dict:
    inp = work / "q_rss.csv"
    write_questions(inp, "database", rels, n)
    results = work / "results_rss"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_"))}
    env.update(OPENAI_API_KEY="sk-bench", OPENAI_API_BASE=base_url, RAG_EMBED="0",
               RAG_CACHE_DIR=str(work / "cache"))
    cmd = [sys.executable, "-m", "ragkit.cli", "batch", str(inp), "--db", "database", "--results", str(results),
           "--workers", str(workers), "--no-cache"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    samples: list[tuple[int, int]] = []  # (rows saved, rss KiB)
    ck_dir = results / ".checkpoints"
    last_rows = 0
    while proc.poll() is None:
        rss = _rss_kib(proc.pid)
        rows = _saved_rows(ck_dir) or last_rows
        last_rows = rows
        if rss is not None:
            samples.append((rows, rss))
        time.sleep(0.1)
    out = proc.stdout.read()
    wall = time.perf_counter() - t0
    during = [(r, s) for r, s in samples if 1 <= r]
    mib = lambda kib: round(kib / 1024, 1)  # noqa: E731

    def at(frac: float) -> float | None:
        want = max(1, int(n * frac))
        hit = next((s for r, s in during if r >= want), None)
        return mib(hit) if hit is not None else None

    finished = [s for r, s in during if r >= n]
    return {
        "questions": n, "workers": workers, "exit": proc.returncode, "wall_s": round(wall, 1),
        "samples": len(samples),
        "rss_start_mib": mib(during[0][1]) if during else None,  # first row saved (imports and index done)
        "rss_10pct_mib": at(0.10), "rss_mid_mib": at(0.5), "rss_90pct_mib": at(0.9),
        "rss_end_mib": mib(finished[0]) if finished else (mib(during[-1][1]) if during else None),
        "rss_peak_mib": mib(max(s for _, s in samples)) if samples else None,
        "rss_peak_while_answering_mib": mib(max(s for r, s in during if r < n)) if during else None,
        "printed_results_path": "results:" in out,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--delay-ms", type=float, default=200)
    ap.add_argument("--rss-questions", type=int, default=2000)
    ap.add_argument("--rss-delay-ms", type=float, default=10)
    ap.add_argument("--workers", type=int, default=5)
    args = ap.parse_args()

    out: dict = {"benchmark": "batch", "strategy": "agent (scripted: 1 search tool call, then the answer)",
                 "model_calls_per_question": 2, "questions": args.questions, "delay_ms_per_call": args.delay_ms,
                 "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="ragkit-bench-batch-") as tmp:
        work = Path(tmp)
        db, rels = make_db(work)
        old = Path.cwd()
        os.chdir(work)  # Reference Documents are `database/...`, relative to the project root
        try:
            if args.questions:
                speed(args, out, db, work, rels)
            if args.rss_questions:
                server = Server(args.rss_delay_ms / 1000, rels)
                try:
                    rss = rss_run(server.base_url, db, work, rels, args.rss_questions, args.workers)
                finally:
                    rss["server"] = server.stop()
                rss["delay_ms_per_call"] = args.rss_delay_ms
                out["rss"] = rss
        finally:
            os.chdir(old)
    try:
        out["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    print(json.dumps(out, ensure_ascii=False))


def speed(args, out: dict, db: Path, work: Path, rels: list[str]) -> None:
    server = Server(args.delay_ms / 1000, rels)
    try:
        from ragkit.search import open_index

        open_index(db, progress=False)  # build the index once, outside the timings
        timed_run(server.base_url, db, work, rels, 5, 5)  # warm-up: lazy imports, first connections
        one = timed_run(server.base_url, db, work, rels, args.questions, 1)
        many = timed_run(server.base_url, db, work, rels, args.questions, args.workers)
    finally:
        stats = server.stop()
    out["one_worker"] = one
    out[f"{args.workers}_workers"] = many
    out["speedup"] = round(one["wall_s"] / many["wall_s"], 2) if many["wall_s"] else None
    out["target_speedup"] = 4.5
    out["ideal_wall_s_1_worker"] = round(args.questions * 2 * args.delay_ms / 1000, 1)
    out["server"] = stats


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
