"""Errors a user can cause. The CLI prints them as one line, never as a traceback.

A message names a parameter as a Python caller passes it (`max_questions`, `overwrite=True`, `db=`); `flags` says
how the command line spells each (`--max`, `--force`, `--db`), and cli_message() is the message as `rag` prints
it, so neither a script nor a shell user is told of an option they do not have."""

from __future__ import annotations

import re
from collections.abc import Mapping

DB_FLAG = {"db=": "--db"}  # the database folder: `db=` (or Settings.db) from Python, `--db` for `rag`


class RagError(Exception):
    """A user-facing failure: bad input, unusable file, unreachable provider. Exit status 1."""

    def __init__(self, message: str = "", *, flags: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.flags = dict(flags or {})

    def cli_message(self) -> str:
        """The message with each parameter named as the command line's flag (a whole name, not part of one), in
        the order of `flags` (a longer name first: `encoding='cp1252'` before `encoding=`)."""
        text = str(self)
        for name, flag in self.flags.items():
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?!\w)", lambda _, flag=flag: flag, text)
        return text


class UsageError(RagError):
    """The command line itself is wrong (unknown option value, missing argument). Exit status 2."""


class BackendError(RagError):
    """The service behind the search index (an OpenSearch cluster) failed or could not be reached: the request
    itself was fine, and asking again later (or another replica) may answer it."""


class PathEscapeError(RagError):
    """A path tried to leave the database root (``..``, absolute, symlink, NUL, backslash)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C after the command already said, in one line, what it stopped and what it kept: the CLI adds no
    second line of its own."""
