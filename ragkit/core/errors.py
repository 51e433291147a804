"""Errors a user can cause. The CLI prints them as one line, never as a traceback."""


class RagError(Exception):
    """A user-facing failure: bad input, unusable file, unreachable provider. Exit status 1."""


class UsageError(RagError):
    """The command line itself is wrong (unknown option value, missing argument). Exit status 2."""


class BackendError(RagError):
    """The service behind the search index (an OpenSearch cluster) failed or could not be reached: the request
    itself was fine, and asking again later (or another replica) may answer it."""


class PathEscapeError(RagError):
    """A path tried to leave the database root (``..``, absolute, symlink, NUL, backslash)."""
