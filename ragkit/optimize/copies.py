"""Copies of missed pages: written under a free name, journaled first, kept or rolled back."""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from ragkit.core.errors import PathEscapeError, RagError
from ragkit.core.paths import resolve_in_db
from ragkit.optimize.journal import Journal, _index_remove, _remove_empty_dirs, _sha256

log = logging.getLogger("ragkit.optimize")


# -- copies ------------------------------------------------------------------------------------------
class CopyManager:
    """Places and removes copies for one run. Exclusive creation (never over a file: a unique name when
    taken), the journal written before every change, and shared claims: when two workers want the same
    page in the same folder they share one file, which goes only when the last claim is given up."""

    def __init__(self, db: Path, index, journal: Journal) -> None:
        self.db = Path(db)
        self.index = index
        self.journal = journal
        self._lock = threading.Lock()
        self._claims: dict[str, set] = {}  # pending copy -> owners
        self._info: dict[str, dict] = {}  # copy -> {"id", "dirs"}
        self.state: dict[str, str] = {}  # every copy this run created -> pending | kept | rolled_back
        self._made_dirs: set[str] = set()  # folders this run created (removed again when left empty)

    def place(self, original: str, folder: str, owner: Any) -> tuple[str, bool]:
        """Copy `original` into `folder` (both db-relative, folder validated). Returns (copy, created)."""
        src = resolve_in_db(self.db, original)
        data = src.read_bytes()
        mode = stat.S_IMODE(src.stat().st_mode)
        stem = src.name[:-3] if src.name.endswith(".md") else src.name
        with self._lock:
            target = resolve_in_db(self.db, folder)
            if target.is_dir():  # the same page already there: share it rather than duplicate it
                for p in sorted(target.iterdir()):
                    if _is_copy_name(p.name, stem) and p.is_file() and p.read_bytes() == data:
                        rel = f"{folder}/{p.name}"
                        if rel in self._claims:
                            self._claims[rel].add(owner)
                        return rel, False
            dirs = _missing_dirs(self.db, folder)
            cid = uuid.uuid4().hex
            name = _free_name(target, stem)
            planned = f"{folder}/{name}"
            # journal first: a crash after this line leaves something recover_journal can undo
            self.journal.append("created", id=cid, path=planned, original=original, sha256=_sha256(data),
                                dirs=dirs)
            try:
                target.mkdir(parents=True, exist_ok=True)
                if resolve_in_db(self.db, folder) != target:  # a symlink raced in
                    raise PathEscapeError(f"{folder!r} changed while copying")
                name = _write_new(target, stem, name, data, cid, mode)
                self._made_dirs.update(dirs)
            except BaseException:
                _remove_empty_dirs(self.db, dirs)
                self.journal.append("rolled_back", id=cid, note="copy failed")
                raise
            rel = f"{folder}/{name}"
            if rel != planned:  # another process took the planned name in between: journal the real one
                self.journal.append("created", id=cid, path=rel, original=original, sha256=_sha256(data),
                                    dirs=dirs)
            self._claims[rel] = {owner}
            self._info[rel] = {"id": cid, "dirs": dirs}
            self.state[rel] = "pending"
            try:  # under the lock: a worker sharing this copy must find it in the index
                self.index.add_page(rel)
                return rel, True
            except Exception as e:  # noqa: BLE001 - the copy must not outlive a failed index update
                error = e
        self.release(rel, owner, keep=False)
        raise RagError(f"the index could not add {rel}: {error}") from error

    def release(self, rel: str, owner: Any, *, keep: bool) -> str:
        """Confirm (keep) or give up one owner's claim. Keeping confirms the copy for good; the last claim
        given up removes it: index entry first (so no reader is sent there any more), then the file and
        the folders it created. Returns the copy's state: kept | rolled_back | pending (still claimed)
        | untracked (not this run's copy)."""
        with self._lock:
            if rel not in self._claims:
                return self.state.get(rel, "untracked")
            info = self._info[rel]
            if keep:
                del self._claims[rel]
                self.journal.append("kept", id=info["id"], path=rel)
                self.state[rel] = "kept"
                return "kept"
            self._claims[rel].discard(owner)
            if self._claims[rel]:
                return "pending"
            del self._claims[rel]
            _index_remove(self.index, rel)
            try:
                resolve_in_db(self.db, rel).unlink(missing_ok=True)
            finally:
                # every folder of this run above the copy, not just the ones this copy created: a folder
                # made for an earlier copy that is gone too would otherwise stay behind, empty
                folder = rel.rsplit("/", 1)[0]
                _remove_empty_dirs(self.db, [*info["dirs"], *(d for d in self._made_dirs
                                                             if folder == d or folder.startswith(d + "/"))])
                self.journal.append("rolled_back", id=info["id"], path=rel)
                self.state[rel] = "rolled_back"
            return "rolled_back"

    def abandon_all(self) -> None:
        """Remove every copy still claimed (end of run, or an interruption)."""
        with self._lock:
            pending = {rel: list(owners) for rel, owners in self._claims.items()}
        for rel, owners in pending.items():
            for o in owners:
                self.release(rel, o, keep=False)
        with self._lock:
            _remove_empty_dirs(self.db, self._made_dirs)


def _is_copy_name(name: str, stem: str) -> bool:
    return name == f"{stem}.md" or re.fullmatch(re.escape(stem) + r"_\d+\.md", name) is not None


def _free_name(target: Path, stem: str) -> str:
    """`page_008.md`, else `page_008_2.md`, `_3` ... (paths.PAGE_RE still reads page 8)."""
    n = 1
    while True:
        name = f"{stem}.md" if n == 1 else f"{stem}_{n}.md"
        if not (target / name).exists():
            return name
        n += 1


def _write_new(target: Path, stem: str, name: str, data: bytes, cid: str, mode: int = 0o644) -> str:
    """Write a hidden temp file, then hard-link it to the final name: the page appears complete or not at
    all, and the link fails instead of replacing a file that took the name meanwhile (another process)."""
    fd, tmp = tempfile.mkstemp(prefix=f".optimize-{cid}", suffix=".tmp", dir=target)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)  # the ingested page's permissions, not mkstemp's 0600
            os.fsync(fh.fileno())
        while True:
            try:
                os.link(tmp, target / name)
                return name
            except FileExistsError:
                name = _free_name(target, stem)
            except OSError:  # a file system without hard links: exclusive create, then write
                break
    finally:
        Path(tmp).unlink(missing_ok=True)
    while True:
        try:
            fd = os.open(target / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            name = _free_name(target, stem)
            continue
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return name


def _missing_dirs(db: Path, folder: str) -> list[str]:
    parts = folder.split("/")
    return [rel for rel in ("/".join(parts[:i]) for i in range(1, len(parts) + 1))
            if not resolve_in_db(db, rel).exists()]
