"""Worker processes that follow the command that started them, and a thread pool that never holds it up.

Ctrl-C reaches the whole process group; the parent decides what it means and stops its workers itself, so
a worker never prints a KeyboardInterrupt traceback of its own. A parent killed outright (kill -9, a closed
terminal) takes its workers with it instead of leaving them blocked or still writing.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def exit_with(parent: int) -> None:
    """Block until process `parent` is gone, then end this process at once."""
    try:
        fd = os.pidfd_open(parent)
    except (AttributeError, OSError):  # no pidfd (old kernel, not Linux): poll instead
        fd = None
    if fd is not None:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll():
            pass
    else:
        while alive(parent):
            time.sleep(0.1)
    os._exit(1)


def follow_parent(parent: int) -> None:
    """Process-pool initializer: ignore Ctrl-C and end when `parent` ends. A no-op in the parent itself."""
    if parent == os.getpid():
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # born blocked: see starting_workers()
    threading.Thread(target=exit_with, args=(parent,), daemon=True, name="ragkit-parent-watch").start()


@contextlib.contextmanager
def starting_workers(*, fork: bool = False):
    """Hold Ctrl-C back while worker processes are created. A worker is born with SIGINT blocked (the mask is
    inherited through fork, exec and the forkserver) until follow_parent() ignores it; without this a Ctrl-C
    in the few milliseconds before the initializer ran killed that worker with its own traceback and broke
    the pool. Here a Ctrl-C waits until the block ends, then is raised as usual. Only the calling thread's
    mask changes, so from any other thread it is harmless to the process's own Ctrl-C. fork=True: the pool
    forks, and needs no resource tracker."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no masks, and spawn starts workers afresh
        yield
        return
    if not fork:
        # multiprocessing starts its resource tracker (forkserver and spawn pools need it) with SIGINT
        # unblocked afterwards, whatever the mask was: start it before the block, not inside it
        from multiprocessing import resource_tracker

        with contextlib.suppress(Exception):
            resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def stop_pool(pool, *, grace: float = 5.0) -> None:
    """After Ctrl-C or an error: kill a process pool's workers at once and let the pool wind down. Never raises,
    even for a pool interrupted while it was starting (its manager thread not yet running, which a join would
    refuse). Its futures are not cancelled: on Python 3.11 the pool's own thread marks every pending one
    broken and raises InvalidStateError (a traceback on stderr) when it meets one already cancelled."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    # read before shutdown(), which forgets them
    thread = getattr(pool, "_executor_manager_thread", None)
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.kill()
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False)
    if thread is not None and writer is not None:
        with contextlib.suppress(Exception):
            _unblock_manager(thread, writer, procs, grace)


def _unblock_manager(thread: threading.Thread, writer, procs: list, grace: float) -> None:
    """A worker killed while it was sending a result leaves half a message in the result pipe: the pool's
    manager thread then waits in recv() for bytes that never come, and the interpreter, which joins that
    thread at exit, hangs (1 of 6 interrupted index builds in a loop did, 1 of 12 runs of the test). Once the
    workers are dead this process holds the only writer, so pad the pipe until the thread reads a message it
    cannot unpickle, declares the pool broken and ends."""
    from multiprocessing.connection import wait

    if not thread.is_alive():
        return
    deadline = time.monotonic() + grace
    wait([p.sentinel for p in procs], timeout=grace)  # kill() only sends the signal
    thread.join(0.2)  # the usual case: it sees the dead workers and ends by itself
    if not thread.is_alive():
        return
    fd = writer.fileno()
    os.set_blocking(fd, False)  # never block here: the reader may stop reading at any moment
    pad = bytes(65536)
    while thread.is_alive() and time.monotonic() < deadline:
        with contextlib.suppress(BlockingIOError):
            while os.write(fd, pad):  # until the pipe is full; the thread then reads on
                pass
        thread.join(0.01)


@contextlib.contextmanager
def uninterrupted():
    """Hold Ctrl-C (SIGINT) back while the block runs and raise it after: for a few steps that must happen all
    or not at all (the optimizer writes the input CSV, confirms the copies it names and records them). Only the
    main thread receives signals; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


class DaemonPool:
    """A minimal thread pool of daemon threads.

    Why not ThreadPoolExecutor: its threads are joined at interpreter exit, so after Ctrl-C the process
    would wait for every in-flight question (HTTP timeouts and retries included) before exiting. What a caller
    finished is already on disk (a batch's checkpoint, genqa's confirmed questions); in-flight work is simply
    done again on resume.
    """

    def __init__(self, workers: int) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"rag-batch-{i}", daemon=True)
                         for i in range(max(1, workers))]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, fn, args = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
                fut.set_exception(e)

    def submit(self, fn: Callable, *args: Any) -> Future:
        fut: Future = Future()
        self._q.put((fut, fn, args))
        return fut

    def shutdown(self, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            while True:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._threads:
            self._q.put(None)
