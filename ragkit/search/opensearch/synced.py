"""What the syncs into a cluster saw of each page file, so that a search can tell cheaply (a stat per file: no read,
no request) whether page files were added or changed by hand since: the cluster follows them only at the next
`rag index sync`, and until then ranks a changed page by its old text and cannot find an added one.

    record_synced(db, index, seen, gone, full)   # after a sync: seen {rel: (mtime_ns, size)}, gone [rel]
    behind(db, index, prefix) -> Behind | None   # None: no record for this index (an earlier ragkit synced it)

The record is DB/.ragkit/opensearch-synced.json, {"index": "URL/PREFIX", "pages": {rel: [mtime_ns, size]}}, kept
with the database (every machine sharing the folder reads it) and written under a lock: syncs of several processes
each add what they synced.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core.paths import atomic_write_text, file_lock
from ragkit.search.persistence import scan_pages

RECORD = "opensearch-synced.json"  # under DB/.ragkit/
LOCK = "opensearch-synced.lock"

Stat = tuple[int, int]  # (mtime_ns, size)


@dataclass
class Behind:
    """Page files (under a scope) the cluster is behind on: added (no sync saw them) and changed since a sync."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed)


def file_stat(path: Path) -> Stat | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def page_stats(db: Path, prefix: str = "") -> dict[str, Stat]:
    """{db-relative path: (mtime_ns, size)} of the page files under `prefix` (the files the built-in index scans:
    `*.md`, hidden files and folders skipped, no symlink that leads out of the database)."""
    root = Path(db).resolve()
    base = root / prefix if prefix else root
    if base.is_file():
        st = file_stat(base)
        return {prefix: st} if st and base.name.endswith(".md") and root in base.resolve().parents else {}
    return {rel: (mtime, size) for rel, mtime, size in scan_pages(root, under=prefix)}


@contextlib.contextmanager
def _locked(db: Path) -> Iterator[None]:
    # without flock (Windows) a lost update only makes a search say the index is behind when it is not
    with file_lock(Path(db) / ".ragkit" / LOCK):
        yield


_CACHE: dict[Path, tuple[Stat, dict]] = {}  # record path -> (its stat, its content): parsed again only when it changed


def _read(db: Path) -> dict:
    path = Path(db) / ".ragkit" / RECORD
    st = file_stat(path)
    if st is None:
        return {}
    hit = _CACHE.get(path)
    if hit and hit[0] == st:
        return hit[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data = data if isinstance(data, dict) and isinstance(data.get("pages"), dict) else {}
    _CACHE[path] = (st, data)
    return data


def record_synced(db: Path, index: str, seen: dict[str, Stat], gone: Iterable[str], full: bool) -> None:
    """After a sync into `index` ("URL/PREFIX"): the page files it read (`seen`, each stat taken before the read, so
    a file changed during the sync counts as changed) and those it found gone. A full sync replaces the record; a
    partial one (a writer's pages) updates it, and starts none: without a record of the pages synced before (an
    earlier ragkit synced them, or another index has the record) every other page would read as added."""
    with _locked(db):
        old = _read(db)
        if not full and old.get("index") != index:
            return
        pages = {} if full else dict(old["pages"])
        for rel in gone:
            pages.pop(rel, None)
        pages.update({rel: list(st) for rel, st in seen.items()})
        atomic_write_text(Path(db) / ".ragkit" / RECORD,
                          json.dumps({"index": index, "pages": pages}, ensure_ascii=False, separators=(",", ":")))


def behind(db: Path, index: str, prefix: str = "") -> Behind | None:
    """The page files under `prefix` added or changed since the syncs into `index` saw them; None when no sync
    into this index was recorded (nothing to compare with)."""
    data = _read(db)
    if data.get("index") != index:
        return None
    synced = data["pages"]
    out = Behind()
    for rel, st in sorted(page_stats(db, prefix).items()):
        was = synced.get(rel)
        if was is None:
            out.added.append(rel)
        elif tuple(was) != st:
            out.changed.append(rel)
    return out
