"""Converting documents in worker processes (forkserver), biggest first, each under the document limits: a
worker past the wall-time limit is killed and replaced, and its document fails with one line; a worker that
dies (out of memory, a crash in a converter) fails only its document. A worker never raises: a document's
failure travels back as one line. It returns the rendered pages; `rag ingest` writes them.

    run_jobs(jobs, workers, progress) -> iterator of DocResult (in completion order)
    stop_all()  # from any thread (a server stopping): kill every conversion now; run_jobs raises Stopped
    refuse_in_worker_start()  # first thing in every ingest: see MAIN_REIMPORTED
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import deque

from ragkit.core.config import Limits, tripped
from ragkit.core.errors import RagError
from ragkit.core.workers import follow_parent, starting_workers
from ragkit.ingest.limits import is_memory_error, limit_memory, memory_message
from ragkit.ingest.pages import ConvertError, DocResult, Job, reason_line

# ----------------------------------------------------------------------------------------------- worker


class Stopped(RagError):
    """The conversions were stopped from outside (`stop_all`: a server shutting down)."""


# A worker starting up imports the main module again (forkserver and spawn both do). A script that calls ingest
# without `if __name__ == "__main__":` would ingest again from there: such a worker leaves at once with this status
# (no traceback), and the parent, seeing a worker end with it before its first document, says what to do.
MAIN_REIMPORTED = 86
GUARD_ERROR = ("ingest was called while the main module is being imported by a conversion worker: put the call "
               'under `if __name__ == "__main__":` in your script (documents are converted in worker processes, '
               "which import the main module again; docs/ingest.md, From Python)")


def refuse_in_worker_start() -> None:
    """In a conversion worker that is importing the script's main module (an ingest call outside a __main__
    guard): leave now, with MAIN_REIMPORTED, rather than walk the sources and start workers of its own."""
    import multiprocessing as mp

    me = mp.current_process()
    if getattr(me, "_inheriting", False) and me.name.startswith("ragkit-convert"):
        os._exit(MAIN_REIMPORTED)


def _init_worker(limits: Limits | None = None) -> None:
    if limits is not None:
        limit_memory(limits)
    with contextlib.suppress(Exception):
        import pymupdf

        pymupdf.TOOLS.mupdf_display_errors(False)
        pymupdf.TOOLS.mupdf_display_warnings(False)
        pymupdf.no_recommend_layout()  # find_tables would print an advert to stdout


def _process(job: Job) -> DocResult:
    """Runs in a worker process: never raises, the reason travels back as one line."""
    res = _convert(job)
    with contextlib.suppress(Exception):
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        res.worker = (os.getpid(), ru.ru_maxrss, ru.ru_utime + ru.ru_stime)
    return res


def _convert(job: Job) -> DocResult:
    from ragkit.ingest.office import convert_docx, convert_pptx
    from ragkit.ingest.pdf import convert_pdf

    try:
        if job.kind == ".pdf":
            return convert_pdf(job)
        if job.kind == ".docx":
            return convert_docx(job)
        return convert_pptx(job)
    except ConvertError as e:
        return DocResult(job.src, job.shown, job.folder, error=str(e))
    except MemoryError:
        return DocResult(job.src, job.shown, job.folder, error=memory_message(job.limits))
    except OSError as e:
        return DocResult(job.src, job.shown, job.folder, error=f"cannot read file ({reason_line(e.strerror or e)})")
    except Exception as e:  # a converter bug must not take the whole run down
        if is_memory_error(e):
            return DocResult(job.src, job.shown, job.folder, error=memory_message(job.limits))
        return DocResult(job.src, job.shown, job.folder, error=f"{type(e).__name__}: {reason_line(e)}")


def _worker_main(conn, parent: int, limits: Limits) -> None:
    """A worker: documents in, results out, until the parent closes the pipe (or dies: follow_parent)."""
    follow_parent(parent)
    _init_worker(limits)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        conn.send(_STARTED)  # the document's time starts now, not while this process was starting
        try:
            res = _process(job)
        except BaseException as e:  # noqa: BLE001 - even a bug in _process reaches the parent as one line
            res = DocResult(job.src, job.shown, job.folder, error=f"{type(e).__name__}: {reason_line(e)}")
        try:
            conn.send(res)
        except MemoryError:
            conn.send(DocResult(job.src, job.shown, job.folder, error=memory_message(job.limits)))


# ------------------------------------------------------------------------------------------------ pool

_STARTED = "started"
# A worker that has not picked its first job up within this many seconds is stuck in start-up.
START_GRACE = 120.0
_LIVE: set[_Pool] = set()
_LIVE_LOCK = threading.Lock()


def stop_all() -> None:
    """Kill every conversion of this process at once (from any thread); each run_jobs raises Stopped."""
    with _LIVE_LOCK:
        pools = list(_LIVE)
    for pool in pools:
        pool.stop()


class _Worker:
    def __init__(self, ctx, limits: Limits) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, os.getpid(), limits), daemon=True,
                                name="ragkit-convert")
        self.proc.start()
        child.close()
        self.job: Job | None = None
        self.started = False
        self.deadline = 0.0

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.join(5)
        with contextlib.suppress(Exception):
            self.conn.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.send(None)
        with contextlib.suppress(Exception):
            self.proc.join(1)
        if self.proc.is_alive():
            self.kill()
        with contextlib.suppress(Exception):
            self.conn.close()


class _Pool:
    """Worker processes that each convert one document at a time, each job under a deadline."""

    def __init__(self, n: int, limits: Limits) -> None:
        self.n = n
        self.limits = limits
        self.ctx = _mp_context()
        self.workers: list[_Worker] = []
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        for w in list(self.workers):
            w.kill()

    def close(self, *, kill: bool) -> None:
        for w in self.workers:
            if kill or self.stopped:
                w.kill()
            else:
                w.close()
        self.workers = []

    def _start(self) -> _Worker:
        with starting_workers():
            w = _Worker(self.ctx, self.limits)
        self.workers.append(w)
        return w

    def _retire(self, w: _Worker) -> None:
        w.kill()
        self.workers.remove(w)

    def run(self, jobs: list[Job]):
        from multiprocessing.connection import wait

        todo = deque(jobs)
        while todo or any(w.job for w in self.workers):
            if self.stopped:
                raise Stopped("stopped")
            for w in self.workers:
                if w.job is None and todo:
                    self._assign(w, todo.popleft())
            while todo and len(self.workers) < self.n:
                self._assign(self._start(), todo.popleft())
            busy = [w for w in self.workers if w.job is not None]
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = set(wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=timeout))
            if self.stopped:
                raise Stopped("stopped")
            now = time.monotonic()
            for w in busy:
                job = w.job
                if w.conn in ready and not w.started and self._picked_up(w):
                    continue
                if w.conn in ready or w.proc.sentinel in ready:
                    res = self._receive(w, job)
                elif now >= w.deadline:
                    self._retire(w)
                    res = DocResult(job.src, job.shown, job.folder,
                                    error=f"took longer than {job.limits.doc_seconds:g} s to convert; stopped "
                                          f"{tripped('doc_seconds', job.limits.doc_seconds)}")
                else:
                    continue
                w.job = None
                yield res

    def _assign(self, w: _Worker, job: Job) -> None:
        w.job = job
        w.started = False
        w.deadline = time.monotonic() + START_GRACE + job.limits.doc_seconds
        try:
            w.conn.send(job)
        except (OSError, ValueError):
            pass  # a dead worker: its sentinel says so at the next wait

    @staticmethod
    def _picked_up(w: _Worker) -> bool:
        """The worker says it began the job: its time limit runs from here."""
        try:
            if w.conn.recv() != _STARTED:
                return False
        except (EOFError, OSError):
            return False
        w.started = True
        w.deadline = time.monotonic() + w.job.limits.doc_seconds
        return True

    def _receive(self, w: _Worker, job: Job) -> DocResult:
        try:
            if w.conn.poll():
                return w.conn.recv()
        except (EOFError, OSError):
            pass
        except Exception as e:  # noqa: BLE001 - a result that cannot be unpickled
            self._retire(w)
            return DocResult(job.src, job.shown, job.folder, error=f"{type(e).__name__}: {reason_line(e)}")
        # the worker died with the document: killed by the kernel (memory), or a crash in a converter
        w.proc.join(5)
        code = w.proc.exitcode
        self._retire(w)
        if self.stopped:
            raise Stopped("stopped")
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
        if not w.started:  # it never began the document: neither the document nor memory is to blame
            if code == MAIN_REIMPORTED:
                raise RagError(GUARD_ERROR)
            return DocResult(job.src, job.shown, job.folder, error=f"the conversion worker stopped while starting "
                                                                   f"({how}), before it read the document")
        return DocResult(job.src, job.shown, job.folder,
                         error=f"the converter stopped ({how}), perhaps out of memory "
                               f"{tripped('memory_mb', job.limits.memory_mb)}")


def run_jobs(jobs: list[Job], workers: int | None, progress: bool, done: int = 0):
    """Convert `jobs` in worker processes (never in this one: a worker can be killed), biggest first. `done`: the
    sources already dealt with (skipped, or failed before converting), counted in the progress line so that it
    counts every source given."""
    from ragkit.core.progress import progress_bar

    if not jobs:
        return
    n_workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    # biggest first, so one large document does not finish alone at the end
    jobs = sorted(jobs, key=lambda j: -_size(j.src))
    bar = progress_bar(total=done + len(jobs), initial=done, unit="doc", desc="ingest", disable=not progress,
                       leave=False)
    pool = _Pool(n_workers, jobs[0].limits)
    with _LIVE_LOCK:
        _LIVE.add(pool)
    finished = False
    try:
        for res in pool.run(jobs):
            bar.update(1)
            yield res
        finished = True
    finally:
        # Ctrl-C or an error: stop now, not after the running documents are done. A document cut short is not
        # in the manifest, so the next run converts it again.
        with _LIVE_LOCK:
            _LIVE.discard(pool)
        pool.close(kill=not finished)
        bar.close()


def _mp_context():
    """forkserver on Linux: forking a process that already runs threads (markitdown's imports start some,
    so do test runners and servers) can deadlock the child; a fresh server process cannot."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["ragkit.ingest.workers", "ragkit.ingest.pdf", "pymupdf"])
        return ctx
    return mp.get_context("spawn")


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
