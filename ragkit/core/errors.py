"""Errors a user can cause. The CLI prints them as one line, never as a traceback."""


class RagError(Exception):
    """A user-facing failure: bad input, unusable file, unreachable provider. Exit status 1."""


class UsageError(RagError):
    """The command line itself is wrong (unknown option value, missing argument). Exit status 2."""


class PathEscapeError(RagError):
    """A path tried to leave the database root (``..``, absolute, symlink, NUL, backslash)."""
