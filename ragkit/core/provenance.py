"""What a run's record needs to say which inputs it measured, cheaply:

    questions_sha256(rows) -> str            the question set (question, answer key, references, task)
    database_state(db) -> DatabaseState      page count, a fingerprint of the page files, converter version(s)
    api_host(url) -> str | None              an endpoint's scheme://host:port (never a key, user, path or query)
    endpoint(url) -> str                     a base URL as shown or stored: scheme://host[:port]/path, nothing else
    url_secrets(url) -> list[str]            the secret parts endpoint() leaves out (password, query, fragment)
    url_problem(url) -> str | None           why a base URL cannot work (scheme, host, port, query), naming no secret
    ragkit_commit() -> str | None            ragkit's git commit when it runs from a checkout (+dirty)

docs/evaluation.md ("The run record") says what each covers and what it costs."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

# the cells of a question row that decide what its scores mean: the question, its answer key and its task
QUESTION_KEY_COLUMNS = ("Question", "Ground Truth", "Reference Document", "Page", "Checklist", "Task",
                        "Reference Summary")
DEFAULT_OPENAI_HOST = "https://api.openai.com:443"


def _norm(value: object) -> str:
    """As runinfo.answer_fingerprint: line endings and outer spaces aside (a spreadsheet may change them on save);
    an empty cell, a missing column and a NaN read alike."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value).replace("\r\n", "\n").replace("\r", "\n").strip()


def questions_sha256(rows: Iterable[dict]) -> str:
    """A digest of a question set: each row's QUESTION_KEY_COLUMNS, normalised, rows with a question only, in any
    order (a sorted multiset: the figures do not depend on the order). The same questions read from another
    encoding give the same digest; an edited answer key gives another one."""
    digests = sorted(
        hashlib.sha256(json.dumps([_norm(r.get(c)) for c in QUESTION_KEY_COLUMNS], ensure_ascii=False).encode())
        .hexdigest()
        for r in rows if _norm(r.get("Question")))
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


# database_sha256's recipe, recorded beside it (RunInfo.database_fingerprint): 2 leaves out the front matter's
# `source:` line; 1 (records without the field) hashed it, so the same PDFs ingested from another working directory
# (`mm/pdfs/x.pdf` against `pdfs/x.pdf`) fingerprinted differently. Digests of two recipes are not compared.
FINGERPRINT = 2
_FRONT = re.compile(rb"\A---\r?\n(.*?\r?\n)---(?:\r?\n|\Z)", re.DOTALL)
_SOURCE_LINE = re.compile(rb"(?im)^source:[^\n]*\n")


def without_source(page: bytes) -> bytes:
    """A page file's bytes without its front matter's `source:` line: where the document was found when it was
    ingested, as typed (relative to the directory `rag ingest` ran in), not what the page says. The body, and every
    other front-matter field (document, section, page), count."""
    m = _FRONT.match(page)
    if not m:
        return page
    return page[:m.start(1)] + _SOURCE_LINE.sub(b"", m.group(1), count=1) + page[m.end(1):]


@dataclass
class DatabaseState:
    pages: int  # page files in the database
    sha256: str  # over every page's db-relative path and content (without_source: the source path aside)
    converter: int | list[int] | None  # the ingest manifest's converter version(s); None without a manifest
    fingerprint: int = FINGERPRINT  # the recipe of sha256


def database_state(db: Path) -> DatabaseState:
    """The universe a run scores against (DESIGN §5: every page file in the database), fingerprinted by each page
    file's db-relative path and content (3,194 pages, 16 MB: ~0.07 s from the page cache, docs/evaluation.md).
    A page edited, added, removed or moved changes it; a copy of the database, or an unchanged source ingested again,
    from any working directory (the front matter's `source:` path is left out: without_source), does not."""
    from ragkit.core.paths import iter_pages

    db = Path(db).resolve()
    h = hashlib.sha256()
    pages = iter_pages(db)
    for rel in pages:
        try:
            body = without_source((db / rel).read_bytes())
            h.update(f"{rel}\0{len(body)}\0".encode())
            h.update(body)
        except OSError:  # removed while listed: it is not part of the universe
            h.update(f"{rel}\0-\n".encode())
    return DatabaseState(pages=len(pages), sha256=h.hexdigest(), converter=converter_versions(db))


def converter_versions(db: Path) -> int | list[int] | None:
    """The converter version that wrote the database's pages (an entry without one is version 1), a sorted list
    when sources were ingested by different versions, None when the database has no ingest manifest."""
    try:
        data = json.loads((Path(db) / ".ragkit" / "ingest-manifest.json").read_text(encoding="utf-8"))
        sources = data.get("sources") or {}
    except (OSError, ValueError, AttributeError):
        return None
    found = sorted({int(e.get("converter", 1)) for e in sources.values() if isinstance(e, dict)})
    if not found:
        return None
    return found[0] if len(found) == 1 else found


def api_host(url: str | None, *, offline: bool = False) -> str | None:
    """`scheme://host:port` of an OpenAI-compatible endpoint: no user, password, path, query or fragment ever.
    None for the offline provider; the public OpenAI API when no base URL is set."""
    if offline:
        return None
    if not url:
        return DEFAULT_OPENAI_HOST
    parts = _split(url)
    if parts is None or not parts.hostname:
        return None
    scheme = parts.scheme or "http"
    port = parts.port or (443 if scheme == "https" else 80)
    return f"{scheme}://{_host(parts.hostname)}:{port}"


def endpoint(url: str | None) -> str:
    """A base URL as every message, cache key and checkpoint shows or stores it: `scheme://host[:port]/path` as
    typed, without the user, password, query or fragment that may hold a credential. "" for none."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket
        return "(an unreadable URL)"
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def url_secrets(url: str | None) -> list[str]:
    """The secret parts endpoint() leaves out of `url` (password, query and its values, fragment; the user name is
    no secret), for scrubbing text a server or a library may have echoed them into."""
    if not url:
        return []
    try:
        raw = urlsplit(url)
    except ValueError:
        return [url]
    password = raw.netloc.rpartition("@")[0].partition(":")[2]
    found = [password, raw.query, raw.fragment, *(v for part in raw.query.split("&") for v in part.split("=", 1)[1:])]
    return list(dict.fromkeys(x for s in found if s for x in (s, unquote(s))))


_HOST_CHARS = re.compile(r"[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\]")


def url_problem(url: str | None) -> str | None:
    """Why `url` cannot be an OpenAI-compatible endpoint (a scheme other than http/https, no host, a host with a
    space, a port that is no number, a query string), None when it can. The message names the scheme, host and
    port, never a secret part."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError as e:
        return f"it cannot be read as a URL ({e})"
    problems = []
    if parts.scheme.lower() not in ("http", "https"):
        problems.append(f"the scheme is {parts.scheme!r}, not http or https" if parts.scheme
                        else "it has no scheme (write http:// or https://)")
    host = parts.netloc.rpartition("@")[2]
    host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if not host:
        problems.append("it has no host")
    elif not _HOST_CHARS.fullmatch(host):
        odd = "a space" if any(c.isspace() for c in host) else "characters a host name cannot hold"
        problems.append(f"the host {host!r} holds {odd}")
    try:
        parts.port  # noqa: B018 - it raises for a port that is no number or out of range
    except ValueError:
        problems.append("the port is not a number from 0 to 65535")
    if parts.query:  # the openai client appends its path after it: every request would be a 404
        problems.append("it has a query string (not shown), which the openai client cannot send; a key goes in "
                        "OPENAI_API_KEY")
    return "; ".join(problems) or None


def _split(url: str) -> SplitResult | None:
    """`url` split (a bare `host:port` read as http), None when it cannot be read (a bad port, a bad IPv6)."""
    try:
        parts = urlsplit(url if "//" in url else f"http://{url}")
        parts.port  # noqa: B018 - raises for a bad port
    except ValueError:
        return None
    return parts


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


_SHA = re.compile(r"[0-9a-f]{40}")


def ragkit_commit(root: Path | None = None) -> str | None:
    """The commit of the checkout ragkit runs from (read from .git), None when it is installed from a package or
    the checkout cannot be read; `<sha>+dirty` when the package's own files (ragkit/, pyproject.toml, uv.lock)
    differ from it, so a run made with uncommitted code does not claim the commit's. A worktree's `.git` file and
    packed refs are followed. `root`: the checkout (default: the one this module lies in)."""
    root = root or Path(__file__).resolve().parents[2]
    sha = _head_commit(root)
    return f"{sha}+dirty" if sha and _modified(root) else sha


def _modified(root: Path) -> bool:
    """Whether a tracked file of the package differs from the checkout's commit (`git diff --quiet`: one
    subprocess per run record); False when git is missing or fails, as a commit read from .git still says
    what most runs need."""
    try:
        done = subprocess.run(["git", "-C", str(root), "diff", "HEAD", "--quiet", "--", "ragkit", "pyproject.toml",
                               "uv.lock"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 1


def _head_commit(root: Path) -> str | None:
    dot = root / ".git"
    try:
        if dot.is_file():  # a worktree: "gitdir: <path>"
            text = dot.read_text(encoding="utf-8").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = Path(text.split(":", 1)[1].strip())
            gitdir = gitdir if gitdir.is_absolute() else (root / gitdir)
        elif dot.is_dir():
            gitdir = dot
        else:
            return None
        common = gitdir
        if (gitdir / "commondir").is_file():
            c = Path((gitdir / "commondir").read_text(encoding="utf-8").strip())
            common = c if c.is_absolute() else (gitdir / c)
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if _SHA.fullmatch(head):
            return head
        if not head.startswith("ref:"):
            return None
        ref = head.split(":", 1)[1].strip()
        for base in (gitdir, common):
            if (base / ref).is_file():
                sha = (base / ref).read_text(encoding="utf-8").strip()
                return sha if _SHA.fullmatch(sha) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref and _SHA.fullmatch(parts[0]):
                    return parts[0]
    except (OSError, UnicodeDecodeError):
        return None
    return None
