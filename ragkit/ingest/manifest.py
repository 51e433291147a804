"""The ingest manifest (DB/.ragkit/ingest-manifest.json): per source its hash, folder, pages and converter
version; one ingest at a time per database; removing a document's pages.

A source is keyed by source_key: its real path (symlinks and `..` resolved), relative to the database when it lies
inside it (uploads under DB/.ragkit/uploads), so that every mount of a shared database names an upload alike.
Databases written before keep their keys (absolute, unnormalised); canonical_key reads them the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from ragkit.core.paths import INGEST_MANIFEST, atomic_write_text, file_lock, path_list, remove_empty_parents
from ragkit.ingest.copies import find_copies, snapshot
from ragkit.ingest.office import OLE_MAGIC, ole_reason
from ragkit.ingest.pages import IngestReport

SUPPORTED = (".pdf", ".docx", ".pptx")
MANIFEST = INGEST_MANIFEST
# What the page files written for one unchanged source look like. Bump it when that changes, and say what in
# CONVERTER_CHANGES: a database ingested by an earlier ragkit is then told that `--force` brings it up to date
# (an unchanged source is still never rewritten unasked). Manifest entries without the field are version 1.
CONVERTER_VERSION = 11
# the last version that changed each format's pages: a PDF converted by converter 10 is not outdated by 11
FORMAT_CHANGED = {".pdf": 10, ".docx": 11, ".pptx": 11}
CONVERTER_CHANGES = {
    2: "printed page numbers",
    3: "financial statements as tables, running headers and footers out of the text (kept in `running`), "
       "page numbers in footers that follow the text, two-column reading order and paragraphs",
    4: "ruled tables read cell by cell",
    5: "a line that stands alone over an indented paragraph (a numbered heading in body type) is its own paragraph",
    6: "a row of words in a figure table's columns stays in the table (PDF); a DOCX's Title style is its title and "
       "top heading, localised heading styles count, and a table's first row is its header (DOCX)",
    7: "two columns that share their baselines read column by column, a paragraph per article (제3조, 第3条), and "
       "a figure table's label wrapped over three lines in one row (PDF)",
    8: "a figure table's row of figures marked with letters (\"8bd\", survey tables) is one of its rows, not the "
       "header of a second table; a PDF whose first page opens with its first chapter (\"第1章\", \"1. Scope\") "
       "takes its file's name as its title (PDF)",
    9: "the space a line sets between a chapter's, section's or article's label and its title stays (\"第2章 勤務時間\", "
       "\"第3条 従業員は\"; was \"第2章勤務時間\"); a PDF without an outline takes its numbered chapter headings "
       "(\"第1章\", \"1 Introduction\", \"PART II\") as its sections instead of 10-page ranges, so its pages may move "
       "to other section folders (PDF)",
    10: "a page range of one page is the folder page_011, not pages_011-011 (a one-page document, the last page "
        "of an 11-page one); a list item's number at a line's start keeps its space and starts a paragraph "
        "(\"一 都道府県知事\", \"イ 事業所得\"; was \"一都道府県知事\") (PDF)",
    11: "a slide's bullets are list items and its tables and charts blocks of their own; text on most slides (a "
        "社外秘 box, a footer) and a Word document's headers and footers are running lines (`running`), not body "
        "text; a footnote sits on the page that cites it; chapters set in body text (\"第1章\") are sections, and a "
        "DOCX without Word's page marks is cut into pages of at most 3,000 characters (DOCX, PPTX)",
}


# --------------------------------------------------------------------------------------------- manifest


def hash_file(path: Path) -> tuple[str, bytes]:
    """(sha256, the first KiB)."""
    h = hashlib.sha256()
    head = b""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            if not head:
                head = chunk[:1024]
            h.update(chunk)
    return h.hexdigest(), head


def sniff(head: bytes, kind: str) -> str | None:
    """Why the first bytes cannot be this kind of document, or None."""
    if not head:
        return "empty file (0 bytes)"
    if kind == ".pdf" and b"%PDF-" not in head:
        return "not a PDF file (no %PDF header)"
    if kind in (".docx", ".pptx") and head.startswith(OLE_MAGIC):
        return ole_reason(kind[1:].upper())
    if kind in (".docx", ".pptx") and not head.startswith(b"PK"):
        return f"not a {kind[1:].upper()} file (not a zip archive)"
    return None


def converter_of(entry: dict) -> int:
    v = entry.get("converter", 1)
    return v if isinstance(v, int) else 1


def outdated(entry: dict, kind: str) -> bool:
    """Whether a source's recorded pages were written by a converter older than its format's last change."""
    return converter_of(entry) < FORMAT_CHANGED.get(kind, CONVERTER_VERSION)


def outdated_note(report: IngestReport) -> str:
    """One line for the unchanged documents an earlier ragkit converted, or ""."""
    if not report.outdated:
        return ""
    what = ", ".join(CONVERTER_CHANGES[v] for v in sorted(CONVERTER_CHANGES))
    n = len(report.outdated)
    return (f"{n} unchanged document{'s' if n > 1 else ''} (e.g. {report.outdated[0]}) "
            f"{'were' if n > 1 else 'was'} converted by an earlier ragkit; ingest again with --force to "
            f"update {'their' if n > 1 else 'its'} pages ({what})")


def source_key(db: Path, path: Path | str) -> str:
    """The manifest's key of the source at `path`: its real path, relative to the database's real path when inside."""
    real = Path(os.path.realpath(path))
    try:
        return real.relative_to(os.path.realpath(db)).as_posix()
    except ValueError:
        return real.as_posix()


def key_path(db: Path, key: str) -> Path:
    """Where the source a manifest key names is on this machine (a db-relative key lies under `db`)."""
    p = Path(key)
    return p if p.is_absolute() else Path(db) / p


def canonical_key(db: Path, key: str) -> str:
    """A recorded key in source_key's form: an older ragkit's `/x/ragkit/../src/a.docx` or a path through a symlink
    gives the key the same file has today. An older ragkit's absolute key of an upload that is not there (the
    database moved, or is mounted elsewhere on this machine) is the upload's key: only `rag serve` keeps
    sources under a database's `.ragkit/`."""
    path = key_path(db, key)
    head, sep, rest = key.rpartition("/.ragkit/")
    if sep and head and path.is_absolute() and not path.exists():
        return ".ragkit/" + rest
    return source_key(db, path)


def load_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("sources"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"version": 1, "sources": {}}


def save_manifest(path: Path, manifest: dict) -> None:
    atomic_write_text(path, json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True))


@contextlib.contextmanager
def db_lock(state_dir: Path):
    """One ingest at a time per database; a second one waits (POSIX; no-op elsewhere)."""
    with file_lock(state_dir / "ingest.lock"):
        yield


def remove_pages(db: Path, rels: list[str], keep: set[str]) -> list[str]:
    """Delete page files this ingest wrote earlier (never anything else), then the folders that became
    empty, up to (not including) the database root."""
    removed = []
    dirs: set[Path] = set()
    for rel in rels:
        if rel in keep:
            continue
        p = db / rel
        try:
            p.unlink()
            removed.append(rel)
            dirs.add(p.parent)
        except FileNotFoundError:
            dirs.add(p.parent)
        except OSError:
            pass
    remove_empty_parents(db, dirs)
    return removed


def forget_document(db: Path, folder: str, pages: str | os.PathLike | Iterable[str | os.PathLike], *,
                    sources_under: Path | None = None) -> tuple[list[str], list[str]]:
    """Remove a document from `db`: its page files (only page files), their copies elsewhere in the category
    (ingest.copies: the optimizer's), the folders left empty, and its ingest-manifest entries, under the
    ingest lock, so a running ingest neither races nor re-adds it. A recorded source file is deleted too when
    it lies under `sources_under` (uploads `rag serve` keeps); a source in the user's own folders never is.
    `pages` are database-relative; one str or Path is one page. Returns (pages removed, copies removed); the
    caller updates its index."""
    db = Path(db)
    pages = [p.as_posix() for p in path_list(pages)]
    state = db / ".ragkit"
    with db_lock(state):
        old = snapshot(db, pages)
        copies = remove_pages(db, list(find_copies(db, old, set(pages))), set())
        removed = remove_pages(db, pages, set())
        manifest_path = state / MANIFEST
        manifest = load_manifest(manifest_path)
        sources = manifest["sources"]
        gone = [k for k, v in sources.items() if isinstance(v, dict) and v.get("folder") == folder]
        for key in gone:
            del sources[key]
            src = key_path(db, key)
            if sources_under is not None and sources_under.resolve() in src.resolve().parents:
                src.unlink(missing_ok=True)
        if gone:
            save_manifest(manifest_path, manifest)
    return removed, copies
