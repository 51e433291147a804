"""Worker pools stopped by Ctrl-C: the process that started them must still exit, at once and quietly.

Each case runs in its own interpreter: the failure being guarded against is an interpreter that never
exits (it joins the pool's thread at exit), which inside pytest would hang the whole run.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork and signal masks are POSIX")

# A worker killed while it sends its result leaves the first part of a message in the result pipe. To get that
# state every time rather than by a lucky kill, the worker writes a message header and part of its body itself
# (with fork it holds the pool's pipe) and then dies.
KILLED_WHILE_SENDING = """
import multiprocessing, os, signal, struct, sys, time
from concurrent.futures import ProcessPoolExecutor
from ragkit.core.workers import follow_parent, starting_workers, stop_pool

def half_sent():
    os.write(pool._result_queue._writer.fileno(), struct.pack("!i", 1_000_000) + b"x" * 1000)
    os.kill(os.getpid(), signal.SIGKILL)

if __name__ == "__main__":
    with starting_workers(fork=True):
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                                   initializer=follow_parent, initargs=(os.getpid(),))
        fut = pool.submit(half_sent)
    worker = next(iter(pool._processes.values()))
    worker.join(30)
    time.sleep(0.2)  # the pool's thread is now waiting for the rest of that message
    stop_pool(pool)
    print("stopped", worker.exitcode, flush=True)
"""


def _run(script: str, tmp_path: Path, *args: str, timeout: float = 60, **popen) -> subprocess.CompletedProcess:
    path = tmp_path / "case.py"
    path.write_text(textwrap.dedent(script))
    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, str(path), *args], cwd=root, capture_output=True, text=True,
                          timeout=timeout, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, **popen)


@pytest.mark.skipif(sys.platform != "linux", reason="needs fork")
def test_a_worker_killed_while_sending_its_result_does_not_hang_the_exit(tmp_path):
    """Before stop_pool padded the result pipe, the pool's thread waited for the rest of the half-sent result
    and the interpreter, which joins it at exit, never ended (seen in 1 of 6 interrupted index builds)."""
    try:
        done = _run(KILLED_WHILE_SENDING, tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("the interpreter did not exit after stop_pool(): the pool's thread is still waiting")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped -9", done.stdout
    assert "Traceback" not in done.stderr, done.stderr


STARTING = """
import multiprocessing, os, signal, sys, time
from concurrent.futures import ProcessPoolExecutor
from ragkit.core.workers import follow_parent, starting_workers, stop_pool

def pid():
    return os.getpid()

if __name__ == "__main__":
    got = []
    try:
        with starting_workers(fork=sys.argv[1] == "fork"):
            pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(sys.argv[1]),
                                       initializer=follow_parent, initargs=(os.getpid(),))
            futures = [pool.submit(pid) for _ in range(4)]
            os.killpg(0, signal.SIGINT)  # Ctrl-C reaches the whole group while the workers are being born
            time.sleep(0.5)
            got.append("still starting")
        time.sleep(5)
        got.append("not interrupted")
    except KeyboardInterrupt:
        got.append("interrupted")
        stop_pool(pool)
    print(" / ".join(got), flush=True)
"""


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_ctrl_c_while_workers_start_is_raised_in_the_parent_only(tmp_path, method):
    """A Ctrl-C while the workers are being created waits until they ignore it, then interrupts the parent
    alone: no worker dies with a KeyboardInterrupt traceback of its own."""
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    # a session of its own: the case sends Ctrl-C to its whole process group
    done = _run(STARTING, tmp_path, method, timeout=120, start_new_session=True)
    assert done.stdout.strip() == "still starting / interrupted", (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
