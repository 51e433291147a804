"""What the process is waiting on the model for, and the stderr lines that say so while it waits.

    calling()                    Provider.chat wraps every request it sends in it (a cache hit sends none)
    doing(label)                 names what the calling thread's next requests are for ("agent turn 2")
    served(requested, served)    a reply named another model than the one asked for: warn once per process
    snapshot() -> Waiting        requests in flight (label, seconds) and the prompt tokens sent so far
    Heartbeat(describe, ...)     a daemon thread that shows `describe(waiting)` while a request is in flight

A local model on a CPU takes minutes per request; without a line the user cannot tell a working run from a
hung server. On a terminal the line is live (rewritten each second, cleared when the reply comes); in a pipe
or a log (CI) it is one line at most every PLAIN_EVERY seconds, and only once a request has waited that long:
a run of quick cloud calls prints nothing more than before.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

from ragkit.core.progress import is_tty

PLAIN_EVERY = 30.0  # seconds between two lines in a pipe (and the wait before the first)
LIVE_AFTER = 2.0  # seconds a request waits before a terminal's live line appears
TICK = 1.0  # how often the heartbeat looks

_label: contextvars.ContextVar[str] = contextvars.ContextVar("ragkit_model_call", default="")
_lock = threading.Lock()
_ids = itertools.count()
_inflight: dict[int, tuple[str, float]] = {}
_prompt_tokens = 0
_warned: set[tuple[str, str]] = set()


@dataclass
class Waiting:
    """Requests in flight now: (label, seconds waited), longest first; prompt tokens of every reply so far."""

    calls: list[tuple[str, float]] = field(default_factory=list)
    prompt_tokens: int = 0

    @property
    def longest(self) -> float:
        return self.calls[0][1] if self.calls else 0.0


@contextlib.contextmanager
def doing(label: str) -> Iterator[None]:
    """The model requests this thread sends inside the block are `label` in the waiting lines."""
    token = _label.set(label)
    try:
        yield
    finally:
        _label.reset(token)


@contextlib.contextmanager
def calling() -> Iterator[list[int]]:
    """One request in flight for the block; append its prompt tokens to the yielded list when the reply came."""
    global _prompt_tokens
    key = next(_ids)
    with _lock:
        _inflight[key] = (_label.get(), time.monotonic())
    tokens: list[int] = []
    try:
        yield tokens
    finally:
        with _lock:
            _inflight.pop(key, None)
            _prompt_tokens += sum(tokens)


def snapshot() -> Waiting:
    now = time.monotonic()
    with _lock:
        calls = sorted(((label, now - t0) for label, t0 in _inflight.values()), key=lambda c: -c[1])
        return Waiting(calls=calls, prompt_tokens=_prompt_tokens)


def same_model(requested: str, model: str | None) -> bool:
    """Whether a reply's `model` is the one asked for: OpenAI answers "gpt-4o-mini" with its dated snapshot
    "gpt-4o-mini-2024-07-18", a router may drop or add an "org/" prefix; none of that is another model."""
    if not model:
        return True
    a, b = (m.strip().lower().rsplit("/", 1)[-1] for m in (requested, model))
    return a == b or b.startswith(a + "-")


def served(requested: str, model: str | None, *, file: IO[str] | None = None) -> None:
    """A reply came from `model`, not the `requested` one (llama-server answers with its one model whatever
    name is asked): one warning line per pair and process, so a typo in RAG_MODEL does not silently become
    the run's label."""
    if same_model(requested, model):
        return
    with _lock:
        if (requested, model) in _warned:
            return
        _warned.add((requested, model))
    print(f"warning: asked for model {requested!r}, the server answered with {model!r}; the run records "
          f"{model!r} as the model that answered (set RAG_MODEL={model} to name it)",
          file=file or sys.stderr, flush=True)


def seconds_text(s: float) -> str:
    """45 s, 3 min 10 s, 1 h 2 min."""
    s = int(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


class Heartbeat:
    """While a model request is in flight, show `describe(waiting)` on `file` (stderr): live on a terminal,
    a line at most every PLAIN_EVERY seconds elsewhere. `live`: on a terminal, show the text this way instead
    (a progress bar's postfix) rather than drawing a line of its own. `describe` gets the prompt tokens sent
    since the heartbeat started. Use as a context manager; `enabled=False` does nothing."""

    def __init__(self, describe: Callable[[Waiting], str], *, file: IO[str] | None = None, enabled: bool = True,
                 live: Callable[[str], None] | None = None) -> None:
        self.describe = describe
        self.file = file if file is not None else sys.stderr
        self.enabled = enabled
        self.tty = is_tty(self.file)
        self.live = live
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._base = 0
        self._shown = False
        self._last = 0.0

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Heartbeat:
        if self.enabled and self._thread is None:
            self._base = snapshot().prompt_tokens
            self._last = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="ragkit-heartbeat", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * TICK)
        self._clear()

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - a progress line must never break the run
                pass

    def beat(self) -> None:
        """One look: show, refresh or clear the line (the thread calls it every TICK)."""
        now = snapshot()
        now.prompt_tokens -= self._base
        if self.tty:
            if now.longest < LIVE_AFTER:
                self._clear()
                return
            text = self.describe(now)
            if self.live is not None:
                self.live(text)
            else:
                self.file.write(f"\r{text[:200]}\x1b[K")
                self.file.flush()
            self._shown = True
            return
        t = time.monotonic()
        if now.longest >= PLAIN_EVERY and t - self._last >= PLAIN_EVERY:
            self._last = t
            print(self.describe(now), file=self.file, flush=True)

    def _clear(self) -> None:
        if not self._shown:
            return
        self._shown = False
        if self.live is not None:
            self.live("")
        else:
            self.file.write("\r\x1b[K")
            self.file.flush()


def waiting_text(w: Waiting) -> str:
    """`2 questions waiting for the model (longest 3 min 10 s), 12,000 prompt tokens so far` style tail."""
    tokens = f", {w.prompt_tokens:,} prompt tokens so far" if w.prompt_tokens else ""
    if len(w.calls) == 1:
        label = f"{w.calls[0][0]}, " if w.calls[0][0] else ""
        return f"{label}waiting for the model {seconds_text(w.longest)}{tokens}"
    return f"{len(w.calls)} requests waiting for the model (longest {seconds_text(w.longest)}){tokens}"
