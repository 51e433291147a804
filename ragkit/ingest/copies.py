"""Copies of a document's pages elsewhere in its category: the optimizer's (DESIGN §6) or a user's. A copy is a page
file that is byte-for-byte one of the document's pages, the rule scoring uses (evaluate.scoring.with_copies); the
optimizer keeps the original's file name (`page_008.md`, `page_008_2.md`). When ingest re-converts the document,
each copy is rewritten from the new page of the same number, or removed when that page is gone; when the
document is removed, its copies go with it. A copy edited by hand is no longer a copy and is left alone.

    snapshot(db, pages) -> {page: bytes};  find_copies(db, old, own) -> {copy: page}
    refresh_copies(db, copies, new_page_of) -> (refreshed, to_remove)"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ragkit.core.paths import PAGE_RE, atomic_write_bytes, page_number


def snapshot(db: Path, pages: Iterable[str]) -> dict[str, bytes]:
    """The bytes of each page file that exists (read before ingest overwrites or removes it)."""
    out: dict[str, bytes] = {}
    for rel in pages:
        try:
            out[rel] = (db / rel).read_bytes()
        except OSError:
            continue
    return out


def find_copies(db: Path, old: dict[str, bytes], own: set[str]) -> dict[str, str]:
    """{copy: page} for the page files in the categories of `old` (db-relative page -> bytes) that are a
    byte-for-byte copy of one of them and not in `own` (the document's own pages, before and after)."""
    if not old:
        return {}
    by_bytes = {data: rel for rel, data in old.items()}
    sizes: dict[int, set[int]] = {}  # page number -> sizes of the pages with that number
    for rel, data in old.items():
        n = page_number(rel)
        if n is not None:
            sizes.setdefault(n, set()).add(len(data))
    found: dict[str, str] = {}
    for category in sorted({rel.split("/", 1)[0] for rel in old if "/" in rel}):
        base = db / category
        if base.is_symlink() or not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in filenames:
                m = PAGE_RE.match(name)
                if not m or int(m.group(1)) not in sizes:
                    continue
                full = Path(dirpath) / name
                rel = full.relative_to(db).as_posix()
                if rel in own or full.is_symlink():
                    continue
                try:
                    if full.stat().st_size not in sizes[int(m.group(1))]:
                        continue
                    data = full.read_bytes()
                except OSError:
                    continue
                if data in by_bytes:
                    found[rel] = by_bytes[data]
    return found


def refresh_copies(db: Path, copies: dict[str, str], new_page_of: dict[str, str | None]) -> tuple[list[str], list[str]]:
    """Rewrite each copy from the new page that replaces its page (`new_page_of[page]`). Returns (refreshed,
    to_remove), db-relative: to_remove are the copies whose page is gone (the caller removes them with
    manifest.remove_pages); a copy whose new page has the same bytes is in neither."""
    refreshed: list[str] = []
    gone: list[str] = []
    for copy, page in sorted(copies.items()):
        new = new_page_of.get(page)
        try:
            data = (db / new).read_bytes() if new else None
        except OSError:
            data = None
        if data is None:
            gone.append(copy)
            continue
        target = db / copy
        try:
            if target.read_bytes() == data:
                continue
            atomic_write_bytes(target, data, mode=target.stat().st_mode & 0o777)
        except OSError:
            continue
        refreshed.append(copy)
    return refreshed, gone
