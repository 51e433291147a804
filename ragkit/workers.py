"""Worker processes that follow the command that started them.

Ctrl-C reaches the whole process group; the parent decides what it means and stops its workers itself, so
a worker never prints a KeyboardInterrupt traceback of its own. A parent killed outright (kill -9, a closed
terminal) takes its workers with it instead of leaving them blocked or still writing.
"""

from __future__ import annotations

import os
import signal
import threading
import time


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
    threading.Thread(target=exit_with, args=(parent,), daemon=True, name="ragkit-parent-watch").start()
