"""Hostile documents against the document limits (issue 33), and the proof that real ones pass them.

    uv run python benchmarks/limits.py              # one JSON line
    uv run python benchmarks/limits.py --no-bench   # without the ingest of the shared bench PDFs

Made here, never stored (tests/bombs.py): the issue's two bombs, a DOCX whose word/document.xml unpacks to 300 MB
and a one-page PDF whose text stream shows 184 MB. Each goes through `rag ingest` (a child process) and through
`rag serve` (an upload to a child server), and for each the JSON gives the wall time and the peak RSS of the
whole process tree (the command, its forkserver and conversion workers: /proc sampled every 10 ms; `peak_tree_mb`
sums the processes at the worst moment, `peak_process_mb` is the largest one). The server part also times a
3-page PDF uploaded alone and while a 3000-page one converts, and a Ctrl-C sent while that one converts (the
seconds until the server is gone, and whether it printed a traceback). Then the shared bench
(mmlongbench-doc and ja-public PDFs) is ingested with the default limits: `limits_tripped` must be 0, and
`max_page_text_bytes` (the most text strings one bench page holds, counted as the limit counts them) shows the
margin to `--max-page-text-mb`. The target: peak under 1 GiB with a bomb in the input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchdata import shared_bench  # noqa: E402
from bombs import docx_bomb, pdf_text_bomb, slow_pdf  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
RAG = [sys.executable, "-m", "ragkit.cli"]
LIMIT_NAMES = re.compile(r"--max-[a-z-]+ / RAG_|--doc-timeout / RAG_")


class TreeRSS:
    """Peak RSS of a process and all its descendants, sampled from /proc every 10 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_tree = 0
        self.peak_process = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> None:
        self.peak_tree = self.peak_process = 0

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as fh:
                        ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [self.pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(children.get(p, []))
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for p in self._tree():
                try:
                    with open(f"/proc/{p}/statm") as fh:
                        rss = int(fh.read().split()[1]) * PAGE
                except (OSError, ValueError, IndexError):
                    continue
                total += rss
                self.peak_process = max(self.peak_process, rss)
            self.peak_tree = max(self.peak_tree, total)
            time.sleep(0.01)

    def figures(self) -> dict:
        return {"peak_tree_mb": round(self.peak_tree / 2**20, 1), "peak_process_mb": round(self.peak_process / 2**20, 1)}


def _failure(out: str) -> str:
    return next((ln for ln in out.splitlines() if ln.startswith(("failed:", "error:"))), "")


def cli_bomb(path: Path, tmp: Path) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([*RAG, "ingest", str(path), "--db", str(tmp / f"db-{path.stem}")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeRSS(proc.pid) as rss:
        out, _ = proc.communicate(timeout=1800)
    return {"seconds": round(time.perf_counter() - t0, 2), "exit": proc.returncode, **rss.figures(),
            "line": _failure(out), "traceback": "Traceback" in out}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _upload(url: str, path: Path) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    with path.open("rb") as fh:
        r = httpx.post(url + "/documents", files={"file": (path.name, fh)}, timeout=1800)
    return r.status_code, r.json().get("error", ""), round(time.perf_counter() - t0, 2)


def serve_bombs(bombs: dict[str, Path], tmp: Path) -> dict:
    import pymupdf

    db = tmp / "served"
    db.mkdir()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp / "serve.log").open("w")
    proc = subprocess.Popen([*RAG, "serve", "--db", str(db), "--port", str(port), "--provider", "offline"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    out: dict = {}
    smalls = []
    for i in range(2):
        doc = pymupdf.open()
        for p in range(3):
            doc.new_page().insert_text((72, 72), f"Small manual {i}, page {p + 1}: the pump is reset by its button.")
        doc.save(tmp / f"small{i}.pdf")
        smalls.append(tmp / f"small{i}.pdf")
    slow = slow_pdf(tmp / "slow.pdf")
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("rag serve did not start")
            time.sleep(0.1)
        with TreeRSS(proc.pid) as rss:
            time.sleep(0.3)
            out["idle"] = rss.figures()
            for name, path in bombs.items():
                rss.reset()
                status, error, secs = _upload(url, path)
                time.sleep(0.05)
                out[name] = {"status": status, "seconds": secs, **rss.figures(), "error": error}
            out["small_alone_s"] = _upload(url, smalls[0])[2]
            box: dict = {}
            slow_thread = threading.Thread(target=lambda: box.update(r=_swallow(url, slow)), daemon=True)
            slow_thread.start()
            while not list((db / ".ragkit" / "uploads").rglob("slow.pdf")):
                time.sleep(0.05)
            time.sleep(1.0)
            status, _, secs = _upload(url, smalls[1])
            out["small_while_slow_converts_s"] = secs
            out["slow_still_converting_then"] = slow_thread.is_alive()
            t0 = time.perf_counter()
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120)
            out["stop_during_conversion_s"] = round(time.perf_counter() - t0, 2)
            slow_thread.join(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    text = (tmp / "serve.log").read_text()
    out["stop_exit"] = proc.returncode
    out["stop_traceback"] = "Traceback" in text
    out["slow_upload_answer"] = box.get("r")
    return out


def _swallow(url: str, path: Path):
    try:
        return _upload(url, path)[0]
    except httpx.HTTPError as e:
        return type(e).__name__


def bench(tmp: Path) -> dict:
    import pymupdf

    from ragkit.core.config import Limits
    from ragkit.ingest.limits import page_text_bytes

    sources = [d for d in (shared_bench("mmlongbench-doc") / "pdfs", shared_bench("ja-public") / "pdfs") if d.is_dir()]
    if not sources:
        return {"skipped": "no ../shared/bench"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([*RAG, "ingest", *map(str, sources), "--db", str(tmp / "bench-db")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeRSS(proc.pid) as rss:
        out, _ = proc.communicate(timeout=7200)
    failed = [ln for ln in out.splitlines() if ln.startswith("failed:")]
    pdfs = sorted(p for d in sources for p in d.rglob("*.pdf"))
    worst, pages = (0, ""), 0
    for p in pdfs:
        with pymupdf.open(p) as doc:
            for page in doc:
                pages += 1
                n = page_text_bytes(doc, page, 1 << 30, exact=True)
                if n > worst[0]:
                    worst = (n, f"{p.name} p.{page.number + 1}")
    return {"pdfs": len(pdfs), "pages": pages, "seconds": round(time.perf_counter() - t0, 1), "exit": proc.returncode,
            "failed": len(failed), "limits_tripped": sum(bool(LIMIT_NAMES.search(ln)) for ln in failed),
            **rss.figures(), "max_page_text_bytes": worst[0], "max_page_text_where": worst[1],
            "page_text_limit_bytes": int(Limits().page_text_mb * 2**20)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-bench", action="store_true", help="skip ingesting the shared bench PDFs")
    args = ap.parse_args()
    from ragkit.core.config import Limits

    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        t0 = time.perf_counter()
        bombs = {"docx_bomb": docx_bomb(tmp / "bomb.docx", 300), "pdf_bomb": pdf_text_bomb(tmp / "bomb.pdf", 184)}
        made = time.perf_counter() - t0
        result = {
            "benchmark": "limits",
            "defaults": {k: v for k, v in Limits().__dict__.items()},
            "bombs": {name: {"file_kb": round(p.stat().st_size / 1024), "unpacks_mb": mb}
                      for (name, p), mb in zip(bombs.items(), (300, 184), strict=True)},
            "made_s": round(made, 1),
            "cli": {name: cli_bomb(p, tmp) for name, p in bombs.items()},
            "serve": serve_bombs(bombs, tmp),
        }
        if not args.no_bench:
            result["bench"] = bench(tmp)
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
