"""The crash journal of a run's copies: written before a copy appears, read back by recover_journal."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragkit.core.errors import PathEscapeError
from ragkit.core.paths import resolve_in_db

log = logging.getLogger("ragkit.optimize")

JOURNAL_DIR = "optimize-journal"


# -- journal -----------------------------------------------------------------------------------------
def journal_dir(db: Path) -> Path:
    return Path(db).resolve() / ".ragkit" / JOURNAL_DIR


def _proc_start(pid: int) -> str | None:
    """The process start time (Linux /proc), so a recycled pid is not mistaken for the journal's owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return True


class Journal:
    """This run's journal file: JSON lines, fsync'ed per entry, created at the first entry."""

    def __init__(self, db: Path) -> None:
        self.dir = journal_dir(db)
        self.path: Path | None = None
        self._lock = threading.Lock()
        self._open: set[str] = set()  # copy ids created and not yet resolved

    def append(self, event: str, **fields: Any) -> None:
        entry = {"ts": datetime.now(UTC).isoformat(timespec="seconds"), "event": event, **fields}
        with self._lock:
            if self.path is None:
                self.dir.mkdir(parents=True, exist_ok=True)
                pid = os.getpid()
                self.path = self.dir / f"{pid}-{uuid.uuid4().hex[:12]}.jsonl"
                self._write({"event": "run", "pid": pid, "host": socket.gethostname(),
                             "start": _proc_start(pid), "ts": entry["ts"]})
            self._write(entry)
            if event == "created":
                self._open.add(fields["id"])
            else:
                self._open.discard(fields.get("id", ""))

    def _write(self, entry: dict) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Delete the journal once every copy it names is resolved (kept or rolled back)."""
        with self._lock:
            if self.path is not None and not self._open:
                self.path.unlink(missing_ok=True)
                self.path = None


def _read_journal(path: Path) -> list[dict]:
    """Every readable entry; a line cut short by a crash is ignored."""
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def _owner_alive(header: dict) -> bool:
    if header.get("host") != socket.gethostname():
        return False  # another machine's run on a shared folder: it can no longer confirm its copies
    try:
        pid = int(header.get("pid") or 0)
    except (TypeError, ValueError):
        return False
    if not _pid_alive(pid):
        return False
    start = header.get("start")
    return start is None or _proc_start(pid) in (None, start)


def recover_journal(db: Path, index=None) -> list[str]:
    """Remove copies that a process which is gone created but never confirmed; returns their db-relative
    paths. A copy edited since it was made (checksum differs) is left alone; journals of running
    processes (another `rag batch` on the same database) are not touched."""
    db = Path(db)
    removed: list[str] = []
    folder = journal_dir(db)
    if not folder.is_dir():
        return removed
    for jpath in sorted(folder.glob("*.jsonl")):
        try:
            entries = _read_journal(jpath)
        except OSError:
            continue
        header = entries[0] if entries and entries[0].get("event") == "run" else {}
        if _owner_alive(header):
            continue
        created: dict[str, dict] = {}
        for e in entries:
            cid = str(e.get("id") or "")
            if e.get("event") == "created" and cid:
                created[cid] = e
            elif cid:
                created.pop(cid, None)  # kept or rolled back: resolved
        for cid, e in created.items():
            rel = str(e.get("path") or "")
            try:
                full = resolve_in_db(db, rel)
                target = full.parent
            except PathEscapeError:
                continue  # never touch anything a tampered journal points outside the database
            for tmp in target.glob(f".optimize-{cid}*.tmp"):  # a crash in the middle of writing
                tmp.unlink(missing_ok=True)
            if full.is_file() and _sha256(full.read_bytes()) != e.get("sha256"):
                log.warning("optimize: %s was edited since an interrupted run created it; left in place", rel)
                continue
            if index is not None:
                _index_remove(index, rel)  # first, so that no reader is sent there any more
            if full.is_file():
                full.unlink(missing_ok=True)
                removed.append(rel)
            _remove_empty_dirs(db, e.get("dirs") or [])
        jpath.unlink(missing_ok=True)
    if removed:
        log.warning("optimize: removed %d unconfirmed copies left by an interrupted run: %s", len(removed),
                    ", ".join(removed[:5]) + (" ..." if len(removed) > 5 else ""))
    return removed


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _remove_empty_dirs(db: Path, dirs: Iterable[str]) -> None:
    """rmdir folders a copy created, deepest first, only when empty (never anything else)."""
    for rel in sorted(set(dirs), key=lambda d: d.count("/"), reverse=True):
        try:
            os.rmdir(resolve_in_db(db, rel))
        except (OSError, PathEscapeError):
            pass


def _index_remove(index, rel: str) -> None:
    try:
        index.remove_page(rel)
    except Exception:  # noqa: BLE001 - a page the index never had is fine; refresh() re-derives from files
        pass
