"""Progress for long work: a live bar on a terminal, a few plain lines in a pipe, a log or CI.

`rag` is run from shell scripts; hundreds of `\\r` updates make a log unreadable, so a bar is drawn only
when its stream is a TTY. Elsewhere `PlainProgress` prints one line at each quarter of the work (at most
five lines), with the same small API the callers use: update, set_postfix_str, write, close.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from ragkit.core.text import strip_controls


def is_tty(stream: IO[str]) -> bool:
    """Whether `stream` is a terminal (False for a pipe, a file, or a stream without a descriptor)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class PlainProgress:
    """A progress reporter for non-terminals: `desc: 10/40 q (25%), <postfix>` at 25/50/75/100 %."""

    STEPS = 4

    def __init__(self, *, total: int, desc: str = "", unit: str = "it", initial: int = 0,
                 file: IO[str] | None = None, disable: bool = False) -> None:
        self.total = max(0, int(total))
        self.n = int(initial)
        self.desc = desc
        self.unit = unit
        self.file = file if file is not None else sys.stderr
        self.disable = disable
        self.postfix = ""
        self._t0 = time.monotonic()
        self._shown_step = self._step()  # what is already done at the start is not announced again
        self._closed = False
        self._pending = False

    def _step(self) -> int:
        return self.STEPS if self.total == 0 else min(self.STEPS, self.n * self.STEPS // self.total)

    def _line(self) -> str:
        pct = 100 if self.total == 0 else round(100 * self.n / self.total)
        extra = f", {self.postfix}" if self.postfix else ""
        secs = time.monotonic() - self._t0
        return f"{self.desc}: {self.n}/{self.total} {self.unit} ({pct}%){extra} [{secs:.0f} s]"

    def update(self, n: int = 1) -> None:
        self._flush()
        self.n += n
        step = self._step()
        if step > self._shown_step:
            self._shown_step = step
            # printed at the next call, so that a postfix set right after the update (tqdm's usual order)
            # is in the line
            self._pending = True

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:  # noqa: ARG002 - tqdm's signature
        self.postfix = strip_controls(s)
        self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._pending = False
            self._print(self._line())

    def write(self, s: str, file: IO[str] | None = None) -> None:
        if not self.disable:
            print(strip_controls(s), file=file or self.file, flush=True)

    def _print(self, line: str) -> None:
        if not self.disable:
            print(line, file=self.file, flush=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._flush()
        # a run that stopped early says where it stopped; a finished one has printed its 100 % line
        if self.n < self.total and self.n > 0 and self._shown_step < self.STEPS:
            self._print(self._line() + " stopped")

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(*, total: int, desc: str = "", unit: str = "it", initial: int = 0, file: IO[str] | None = None,
                 disable: bool = False, leave: bool = True, **tqdm_kwargs: Any) -> Any:
    """A tqdm bar when `file` (stderr by default) is a terminal, else a `PlainProgress`."""
    stream = file if file is not None else sys.stderr
    if is_tty(stream):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, initial=initial, file=stream, disable=disable, leave=leave,
                    dynamic_ncols=True, **tqdm_kwargs)
    return PlainProgress(total=total, desc=desc, unit=unit, initial=initial, file=stream, disable=disable)
