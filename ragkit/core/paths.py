"""Everything that turns names into paths inside the database, and back into Reference Documents.

Nothing escapes the database root: every path a model or a CSV hands us goes through `resolve_in_db`.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ragkit.core.errors import PathEscapeError

INGEST_MANIFEST = "ingest-manifest.json"  # under DB/.ragkit/: rewritten by every ingest that changes a page
MAX_NAME = 80  # characters of one folder name; keeps paths readable and under OS limits
MAX_NAME_BYTES, MAX_PATH_BYTES = 255, 4096  # what a file system allows (Linux NAME_MAX, PATH_MAX)
_BAD_CHARS = re.compile(r'[<>:"|?*\\/\x00-\x1f\x7f-\x9f]')
_WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$", re.IGNORECASE)
# `page_008_2.md` is the optimizer's second copy of page 8 in one folder: still page 8.
PAGE_RE = re.compile(r"^page_(\d{3,})(?:_\d+)?\.md$")


def path_list(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """A public function's list of paths: one str or Path is one path, not the characters of its name (the
    character "/" would be the whole file system)."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [Path(os.fsdecode(paths))]
    return [Path(p) for p in paths]


# letters that draw nothing: the Hangul fillers (a name of nothing but them looks empty)
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


def _visible(s: str) -> str:
    """`s` without invisible format characters (Unicode category Cf: bidi embeddings, overrides and isolates,
    zero-width spaces and joiners, the byte order mark, the soft hyphen), without the Hangul fillers, and
    without combining marks that have no letter to combine with (at the start, after a space or a dot): a name
    must look like what it is, where
    `\u202e fdp.exe` shows as `exe.pdf` and `\u200b` as nothing."""
    out: list[str] = []
    for ch in s:
        kind = unicodedata.category(ch)
        if kind == "Cf" or ch in _BLANK_LETTERS or (kind.startswith("M") and (not out or out[-1].isspace() or out[-1] == ".")):
            continue
        out.append(ch)
    return "".join(out)


def sanitize_name(name: str, *, fallback: str = "untitled", max_len: int = MAX_NAME) -> str:
    """A safe, readable folder/file name: NFC, no separators/control/<>:"|?* chars, no invisible characters
    (_visible), no dot-only names, no Windows device names, at most `max_len` characters. Japanese stays
    Japanese."""
    s = unicodedata.normalize("NFC", name)
    s = _BAD_CHARS.sub(" ", s)
    # no leading dot (a hidden folder is not part of the database: `../../x` must not become `.. .. x`),
    # no trailing dot or space (Windows drops them)
    s = _visible(re.sub(r"\s+", " ", s))
    s = re.sub(r"^[\s.]+|[\s.]+$", "", s)
    if _WINDOWS_RESERVED.match(s):
        s = f"_{s}"
    if len(s) > max_len:
        cut = s[:max_len]
        # cut at a word boundary when there is one in the second half ("... last mfa" not "... last mf")
        space = cut.rfind(" ") if s[max_len] != " " else max_len
        s = (cut[:space] if space > max_len // 2 else cut).rstrip()
    return s or fallback


def page_filename(page: int, total_pages: int) -> str:
    """`page_008.md`; 4+ digits when the source has 1000 pages or more."""
    width = max(3, len(str(total_pages)))
    return f"page_{page:0{width}d}.md"


def page_number(path: str | Path) -> int | None:
    """The 1-based page number from a page file name, or None."""
    m = PAGE_RE.match(Path(path).name)
    return int(m.group(1)) if m else None


def resolve_in_db(db_root: Path, rel: str) -> Path:
    """Resolve a path a model or user gave, relative to the database root; refuse anything that leaves it.

    Refused: NUL bytes, backslashes, absolute paths, `..` components, symlinks that point outside, and names no
    file can have (not valid text, a name over 255 bytes, a path over 4096).
    """
    if "\x00" in rel:
        raise PathEscapeError("path contains a NUL byte")
    try:
        size = len(rel.encode("utf-8"))
    except UnicodeEncodeError:
        raise PathEscapeError("path is not valid text (UTF-8)") from None
    if size > MAX_PATH_BYTES or any(len(p.encode("utf-8")) > MAX_NAME_BYTES for p in rel.split("/")):
        raise PathEscapeError(f"path too long: no file has a name over {MAX_NAME_BYTES} bytes or a path over "
                              f"{MAX_PATH_BYTES}")
    if "\\" in rel:
        raise PathEscapeError("use forward slashes: backslashes are not allowed in paths")
    rel = rel.strip()
    # Accept paths written as Reference Documents ("database/a/b.md") as well as db-relative ones.
    root = db_root.resolve()
    if rel.startswith("/") or re.match(r"^[A-Za-z]:", rel):
        raise PathEscapeError(f"absolute paths are not allowed: {rel!r}; use a path relative to the database")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PathEscapeError(f"'..' is not allowed in paths: {rel!r}")
    candidate = root.joinpath(*parts) if parts else root
    resolved = candidate.resolve()
    if resolved != root and root not in resolved.parents:
        raise PathEscapeError(f"path leaves the database: {rel!r}")
    return resolved


def confined_folder(root: Path, rel: str, *, inside: str = "the database") -> Path:
    """The folder `rel` under `root` (made or not yet), to write into; PathEscapeError naming the first folder on
    the way whose real place is outside `root` (a symbolic link out: ingest and uploads would write through it,
    where reading refuses it). Checked before anything is written, so a refused document leaves nothing behind.
    `inside` names `root` in the message."""
    base = Path(root).resolve()
    cur = base
    for part in (p for p in rel.split("/") if p not in ("", ".")):
        if part == "..":
            raise PathEscapeError(f"'..' is not allowed in paths: {rel!r}")
        cur = cur / part
        real = cur.resolve()
        if real != base and base not in real.parents:
            raise PathEscapeError(f"the folder {cur.relative_to(base).as_posix()!r} is a symbolic link that leads "
                                  f"out of {inside}; nothing is written through it")
    return cur


def strip_db_prefix(db_root: Path, path: str) -> str:
    """Turn a Reference Document (`database/a/page_001.md`, absolute, or db-relative) into a db-relative path.

    This is the one name of a page that comparisons use: every accepted way of writing a page (relative to the
    project, to the database, absolute, `./`, `\\`, NFD) gives the same string, so two names are the same page
    exactly when their results are equal. A path outside the database keeps normalize_ref's form. To name many
    pages against one database (a universe per question), use page_keys."""
    return page_keys(db_root)(path)


def page_keys(db_root: Path) -> Callable[[str], str]:
    """strip_db_prefix for one database: resolves the root and the working directory once, and an absolute path
    lexically under the root without a system call (the metrics name every page of the database per question)."""
    root = db_root.resolve()
    try:
        as_ref = root.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        as_ref = None
    under = root.as_posix().rstrip("/") + "/"
    head = root.name + "/"

    def key(path: str) -> str:
        p = normalize_ref(path)
        if p.startswith("/"):
            rest = p[len(under):] if p.startswith(under) else ""
            if rest and not any(part in (".", "..") for part in rest.split("/")):
                return rest
            try:
                return Path(p).resolve().relative_to(root).as_posix()
            except ValueError:
                return p
        if as_ref and as_ref != "." and (p == as_ref or p.startswith(as_ref + "/")):
            return p[len(as_ref) + 1 :]
        # written from another working directory (genqa run where "db/docs/page_001.md" named the database
        # folder "db"): the folder's name, then a page that exists under it
        if p.startswith(head) and not (root / p).exists() and (root / p[len(head):]).is_file():
            return p[len(head):]
        return p

    return key


def reference_path(db_root: Path, rel: str) -> str:
    """The Reference Document form of a db-relative page path: relative to the working directory
    when the database lies inside it, absolute otherwise (DESIGN §1)."""
    full = db_root.resolve() / rel
    try:
        return full.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return full.as_posix()


def reference_like(db_root: Path, written: str, rel: str) -> str:
    """The db-relative page `rel` named the way `written` (a page of the database, as a user wrote it) names its
    page: relative to the database, to the project (`database/...`) or absolute, with its `./` and backslashes.
    The Reference Document form (reference_path) when `written` names no page of this database."""
    w = written.strip()
    nw = normalize_ref(w)
    key = strip_db_prefix(db_root, w)
    if not key or key.startswith("/") or not (nw == key or nw.endswith("/" + key)) \
            or not (db_root / key).is_file():
        return reference_path(db_root, rel)
    out = nw[: len(nw) - len(key)] + rel
    if w.startswith("./"):
        out = "./" + out
    if "\\" in w and "/" not in w:
        out = out.replace("/", "\\")
    return out


def normalize_ref(path: str) -> str:
    """Canonical text form of a path for comparisons: NFC, forward slashes, no `./`, no surrounding space."""
    p = unicodedata.normalize("NFC", path.strip().strip('"').strip("'")).replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return re.sub(r"/+", "/", p)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp's 0600 would hide results from others


def atomic_write_text(path: Path, text: str, *, encoding: str = "utf-8") -> None:
    """Write through a temporary file in the same folder and rename it over the target."""
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write through a temporary file in the same folder and rename it over the target (with `mode`, else the
    permissions open() would give)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), _FILE_MODE if mode is None else mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (created with its folder) for the block, waiting for another
    holder (POSIX flock; no-op where there is none, e.g. Windows: writers there are not serialised)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def remove_empty_parents(db: Path, dirs: Iterable[Path]) -> None:
    """rmdir each folder of `dirs` and then its parents, deepest first, while they are empty, up to (not
    including) the database root; never anything outside it."""
    root = Path(db).resolve()
    for d in sorted(set(dirs), key=lambda x: len(x.parts), reverse=True):
        cur = d
        while cur.resolve() != root and root in cur.resolve().parents:
            try:
                cur.rmdir()  # only succeeds when empty
            except OSError:
                break
            cur = cur.parent


def iter_pages(db_root: Path, prefix: str | None = None) -> list[str]:
    """All page files (`*.md`) under the database (or under `prefix`), db-relative, sorted;
    hidden folders such as `.ragkit/` are skipped, and so is a symlink that leads out of the database (its
    target is not a page of this database: neither indexed, synced, fingerprinted nor read)."""
    base = resolve_in_db(db_root, prefix) if prefix else db_root.resolve()
    root = db_root.resolve()
    if not base.exists():
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in filenames:
            if f.endswith(".md") and not f.startswith("."):
                path = Path(dirpath) / f
                if path.is_symlink() and root not in path.resolve().parents:
                    continue
                out.append(path.relative_to(root).as_posix())
    return sorted(out)


def db_folder(db: Path, path: str) -> str:
    """The db-relative folder (or page) a user or a model names, "" for the database root; a path that leaves
    the database raises PathEscapeError."""
    db = Path(db).resolve()
    full = resolve_in_db(db, strip_db_prefix(db, path))
    return "" if full == db else full.relative_to(db).as_posix()
