"""The consoles `rag` prints through: the same output in a terminal, a pipe and CI.

- A message is never wrapped (`soft_wrap`): an error stays one line whatever COLUMNS is, so a script or
  a log reader can grep it. Tables fit a terminal's width; in a pipe they do not depend on COLUMNS.
- Nothing a document or a model wrote can drive the terminal: every piece of text Rich renders loses its
  control characters (ESC, CSI, BEL, ...) before Rich adds its own styling, so `ESC[2J` in a page or an
  answer is shown as `[2J`, never executed. JSON output is unaffected: json.dumps escapes them already.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

from ragkit.core.text import strip_controls


class SafeConsole(Console):
    """A Rich console whose rendered text carries no control characters but newline and tab."""

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            # Rich's own cursor and screen controls travel in `seg.control`; only text is cleaned
            if seg.control is None and seg.text:
                clean = strip_controls(seg.text)
                if clean != seg.text:
                    seg = Segment(clean, seg.style, seg.control)
            yield seg


PIPE_WIDTH = 200  # a table's width limit when the output is not a terminal: wide enough for a page path


def make_console(*, stderr: bool = False, **kwargs: Any) -> SafeConsole:
    """The console for stdout (or stderr): unwrapped messages, no control characters from content. Tables
    fit a terminal's width; in a pipe or a log they get PIPE_WIDTH whatever COLUMNS says, so the same
    command prints the same thing in CI and on a developer's machine."""
    console = SafeConsole(stderr=stderr, soft_wrap=True, **kwargs)
    if not console.is_terminal and "width" not in kwargs:
        console.width = PIPE_WIDTH
    return console
