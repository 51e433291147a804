"""Converting documents in worker processes (forkserver), biggest first; a worker never raises: a document's
failure travels back as one line."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ProcessPoolExecutor, as_completed

from ragkit.core.workers import follow_parent, starting_workers, stop_pool
from ragkit.ingest.office import convert_docx, convert_pptx
from ragkit.ingest.pages import ConvertError, DocResult, Job, reason_line, set_parent
from ragkit.ingest.pdf import convert_pdf

# ----------------------------------------------------------------------------------------------- worker






def _init_worker(parent: int | None = None) -> None:
    if parent is not None and parent != os.getpid():
        set_parent(parent)
        follow_parent(parent)  # a killed `rag ingest` must not leave workers that go on writing pages
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
    try:
        if job.kind == ".pdf":
            return convert_pdf(job)
        if job.kind == ".docx":
            return convert_docx(job)
        return convert_pptx(job)
    except ConvertError as e:
        return DocResult(job.src, job.shown, job.folder, error=str(e))
    except OSError as e:
        return DocResult(job.src, job.shown, job.folder, error=f"cannot read file ({reason_line(e.strerror or e)})")
    except MemoryError:
        return DocResult(job.src, job.shown, job.folder, error="out of memory while converting")
    except Exception as e:  # a converter bug must not take the whole run down
        return DocResult(job.src, job.shown, job.folder, error=f"{type(e).__name__}: {reason_line(e)}")


def run_jobs(jobs: list[Job], workers: int | None, progress: bool):
    from ragkit.core.progress import progress_bar

    if not jobs:
        return
    n_workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    # biggest first, so one large document does not finish alone at the end
    jobs = sorted(jobs, key=lambda j: -_size(j.src))
    bar = progress_bar(total=len(jobs), unit="doc", desc="ingest", disable=not progress, leave=False)
    try:
        if n_workers == 1:
            _init_worker()
            for job in jobs:
                res = _process(job)
                bar.update(1)
                yield res
            return
        pool = None
        try:
            with starting_workers():
                pool = ProcessPoolExecutor(max_workers=n_workers, initializer=_init_worker,
                                           initargs=(os.getpid(),), mp_context=_mp_context())
                futures = [pool.submit(_process, job) for job in jobs]
            for fut in as_completed(futures):
                bar.update(1)
                yield fut.result()
        except BaseException:
            # Ctrl-C or an error, perhaps while the pool was starting: stop now, not after the running
            # documents are written. A document cut short is not in the manifest, so the next run converts it
            # again.
            if pool is not None:
                stop_pool(pool)
            raise
        pool.shutdown()
    finally:
        bar.close()


def _mp_context():
    """forkserver on Linux: forking a process that already runs threads (markitdown's imports start some,
    so do test runners and servers) can deadlock the child; a fresh server process cannot."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["ragkit.ingest.workers"])
        return ctx
    return None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
