"""Documents of `rag serve`: list, show, delete and upload, over the same page tree and ingest code as the CLI.

A document is a `<category>/<document>` folder of the database (DESIGN §1). Its id is an opaque hash of that
folder, so an id is only ever looked up among the folders that exist, never joined onto a path: an id cannot
name anything outside the database. Page paths from clients go through `resolve_in_db`. Every path the API
gives is relative to the database (api_path), so that replicas serving one shared folder mounted at different
places give the same names, and each opens what another gave.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ragkit.core.config import Limits
from ragkit.core.errors import PathEscapeError, RagError
from ragkit.core.pagefile import first_heading, parse_page
from ragkit.core.paths import (
    atomic_write_bytes,
    confined_folder,
    iter_pages,
    page_number,
    resolve_in_db,
    sanitize_name,
    strip_db_prefix,
)

log = logging.getLogger("ragkit.serve")

UPLOADS = "uploads"  # uploaded sources are kept under <db>/.ragkit/uploads/<category>/
DEFAULT_CATEGORY = "uploads"
KINDS = (".pdf", ".docx", ".pptx")
_ZIP_PART = {".docx": b"word/", ".pptx": b"ppt/"}
# how the index catches up with page files it missed, said to a client: without the server's own path to the
# database (API paths are database-relative; a client may not know, and need not learn, where it is mounted)
SYNC_HINT = "`rag index sync` on the server's database"
INDEX_CHECK_TIMEOUT = 2.0  # seconds an upload or a deletion waits for the cluster's answer before writing anything


class ClientError(RagError):
    """A request the server refuses: `status` is the HTTP status (4xx), the message is safe to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class DocumentExists(ClientError):
    """An upload named like a document that holds other content, which replace=true would replace (409):
    `existing` is that document's summary."""

    def __init__(self, message: str, existing: dict) -> None:
        super().__init__(409, message)
        self.existing = existing


def api_path(db: Path, path: str) -> str:
    """The API's name of a page of `db` that the library gave as a Reference Document (relative to the working
    directory, or absolute): relative to the database, never the server's own file system layout."""
    return strip_db_prefix(db, path)


def doc_id(folder: str) -> str:
    return hashlib.sha256(folder.encode("utf-8")).hexdigest()[:16]


@dataclass
class DocInfo:
    id: str
    folder: str  # db-relative "<category>/<document>"
    pages: list[str]  # db-relative page paths: the document's own
    copies: list[str] = field(default_factory=list)  # copies of its pages elsewhere (the optimizer's)

    def summary(self, db: Path) -> dict:
        cat, _, name = self.folder.partition("/")
        sections = sorted({p.split("/")[2] for p in self.pages if p.count("/") >= 3})
        return {"id": self.id, "category": cat, "name": name, "path": self.folder,
                "pages": len(self.pages), "copies": len(self.copies), "sections": sections}


def _folder_of(rel: str) -> str:
    """The document a page belongs to: its `<category>/<document>` folder; a page lying directly in a category
    (`policies/hard.md`, put there by hand) is a document of its own, named by its file name (a folder and a file
    of one name cannot share a folder, so it never merges with a document); a page at the root, none."""
    parts = rel.split("/")
    return "/".join(parts[:2]) if len(parts) >= 2 else ""


def _copies(db: Path, pages: list[str]) -> dict[str, str]:
    """{copy: page} among `pages`: a page file no ingest wrote that is byte-for-byte a page one wrote
    (ingest.copies), e.g. `pdfs/report/p1-10/topic/page_002.md` or `pdfs/topic/page_002.md`."""
    from ragkit.ingest.copies import find_copies, snapshot
    from ragkit.ingest.manifest import MANIFEST, load_manifest

    recorded = {p for e in load_manifest(db / ".ragkit" / MANIFEST)["sources"].values() if isinstance(e, dict)
                for p in e.get("pages") or ()}
    strays = {p for p in pages if p not in recorded and page_number(p) is not None}
    if not strays:
        return {}
    numbers = {page_number(p) for p in strays}
    categories = {p.split("/", 1)[0] for p in strays}
    originals = [p for p in pages if p in recorded and page_number(p) in numbers and p.split("/", 1)[0] in categories]
    return {c: o for c, o in find_copies(db, snapshot(db, originals), set(recorded)).items() if c in strays}


def list_documents(db: Path) -> list[DocInfo]:
    """Every `<category>/<document>` folder that holds pages, sorted by folder. A copy of a page counts for that
    page's document (`copies`), not as a page, and a folder holding only copies is no document."""
    pages = iter_pages(db)
    copies = _copies(db, pages)
    groups: dict[str, list[str]] = {}
    copied: dict[str, list[str]] = {}
    for rel in pages:
        if rel in copies:
            copied.setdefault(_folder_of(copies[rel]), []).append(rel)
        elif _folder_of(rel):
            groups.setdefault(_folder_of(rel), []).append(rel)
    return [DocInfo(doc_id(f), f, pages, copied.get(f, [])) for f, pages in sorted(groups.items())]


def find_document(db: Path, document_id: str) -> DocInfo:
    if not re.fullmatch(r"[0-9a-f]{16}", document_id or ""):
        raise ClientError(404, f"no document with id {document_id[:40]!r}")
    for d in list_documents(db):
        if d.id == document_id:
            return d
    raise ClientError(404, f"no document with id {document_id!r}")


def document_tree(db: Path, doc: DocInfo) -> dict:
    """One document's sections and pages (each with its number, printed number and first heading)."""
    sections: dict[str, list[dict]] = {}
    for rel in doc.pages:
        parts = rel.split("/")
        section = parts[2] if len(parts) >= 4 else ""
        try:
            meta, body = parse_page((db / rel).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue  # deleted meanwhile
        sections.setdefault(section, []).append({
            "path": rel, "page": meta.page or page_number(rel) or 0,
            "printed_page": meta.printed_page, "title": first_heading(body)})
    out = doc.summary(db)
    out["sections"] = [{"name": name, "pages": pages} for name, pages in sections.items()]
    return out


def read_page(db: Path, path: str) -> dict:
    """A page's markdown for a citation link; `path` is db-relative (as every replica gives it) or a Reference
    Document. Anything that is not a page file inside the database (an escape, a hidden file, a folder) is a
    4xx."""

    try:
        full = resolve_in_db(db, strip_db_prefix(db, path))
    except PathEscapeError as e:
        raise ClientError(400, str(e)) from None
    except (OSError, ValueError):  # an absolute path no file system could hold
        raise ClientError(400, f"no page {path[:200]!r} in the database (not a path this machine can open)") from None
    root = db.resolve()
    inner = full.relative_to(root).as_posix() if full != root else ""
    if not inner or any(p.startswith(".") for p in inner.split("/")) or not inner.endswith(".md"):
        raise ClientError(404, f"no page {path[:200]!r} in the database")
    if not full.is_file():
        raise ClientError(404, f"no page {path[:200]!r} in the database")
    meta, body = parse_page(full.read_text(encoding="utf-8", errors="replace"))
    return {"path": inner, "page": meta.page or page_number(inner) or 0,
            "printed_page": meta.printed_page, "document": meta.document, "section": meta.section,
            "title": first_heading(body), "markdown": body}


# ------------------------------------------------------------------------------------------------ upload
def safe_upload_name(filename: str) -> tuple[str, str]:
    """(stem, extension) of a client's file name with every directory part dropped: `../../x.pdf`,
    `/etc/x.pdf` and `C:\\a\\x.pdf` all become `x`, `.pdf`. Only the last component survives."""
    base = re.split(r"[\\/]", filename or "")[-1]
    ext = PurePosixPath(base).suffix.lower()
    if ext not in KINDS:
        from ragkit.ingest.run import CONVERT_FIRST, unsupported_type

        if ext in CONVERT_FIRST:  # HWP: what to do with it
            raise ClientError(415, unsupported_type(ext))
        raise ClientError(415, f"unsupported file type {ext or '(none)'!r}: upload a PDF, DOCX or PPTX")
    stem = sanitize_name(base[: -len(ext)], fallback="document").lstrip(". ") or "document"
    return stem, ext


def safe_category(category: str | None) -> str:
    """One folder name from a client's category: path parts such as `..` dropped, never hidden (`.x`)."""
    parts = [p for p in re.split(r"[\\/]", category or "") if p.strip(" .")]
    return sanitize_name(" ".join(parts), fallback=DEFAULT_CATEGORY).lstrip(". ") or DEFAULT_CATEGORY


def check_content(data: bytes, ext: str, name: str) -> None:
    """The bytes must be what the extension says (a renamed text file is refused before any conversion). The
    error names the file (`name`), as a conversion's failure does."""
    if not data:
        raise ClientError(422, f"{name}: the uploaded file is empty")
    if ext == ".pdf":
        if b"%PDF-" not in data[:1024]:
            raise ClientError(422, f"{name}: the uploaded file is not a PDF (no %PDF header)")
        return
    if not data.startswith(b"PK\x03\x04") or _ZIP_PART[ext] not in data:
        raise ClientError(422, f"{name}: the uploaded file is not a {ext[1:].upper()} document")


def stop_uploads() -> None:
    """The server is stopping: kill every conversion in progress now (their requests answer 503)."""
    from ragkit.ingest.workers import stop_all

    stop_all()


def _in_the_way(db: Path, folder: str, digest: str, src: Path) -> tuple[DocInfo | None, str]:
    """(the document an upload into `folder` would replace, the name it was uploaded under when that is another
    file, which replace=true does not replace: "" when it may). None when the folder holds no document, or holds
    this very file (an unchanged upload). A source `rag ingest` recorded that still exists is not in the way
    here: ingest refuses that clash itself (409, "same folder")."""
    from ragkit.ingest.manifest import MANIFEST, canonical_key, key_path, load_manifest

    mine = [(key, e) for key, e in load_manifest(db / ".ragkit" / MANIFEST)["sources"].items()
            if isinstance(e, dict) and str(e.get("folder", "")).casefold() == folder.casefold()]
    if any(e.get("sha256") == digest for _, e in mine):
        return None, ""
    keys = [canonical_key(db, key) for key, _ in mine]
    if any(not k.startswith(".ragkit/") and key_path(db, k).exists() for k in keys):
        return None, ""
    doc = next((d for d in list_documents(db) if d.folder.casefold() == folder.casefold()), None)
    own = src.relative_to(db.resolve()).as_posix()
    # another upload whose name gives the same folder (report.docx over report.pdf, Report.pdf over report.pdf)
    # is still its own source: replacing it is deleting it first
    other = next((k for k in keys if k != own and key_path(db, k).exists()), "")
    return doc, other.rpartition("/")[2]


class _FolderLocks:
    """One lock per document folder: an upload's check for a document in the way and its write are one step, so
    two uploads of one name at once cannot both pass the check (not the ingest lock: ingest takes that itself)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def __call__(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


_folder_lock = _FolderLocks()


def upload_document(db: Path, filename: str, data: bytes, category: str | None, index,
                    limits: Limits | None = None, *, replace: bool = False) -> dict:
    """Store an upload under `.ragkit/uploads/`, ingest it with `rag ingest`'s code (converted in a worker
    process of its own, under the document limits, so uploads convert side by side and a hostile one fails
    alone), and bring the shared index up to date with the pages written and removed. Returns the document's
    summary, with `indexed` and `replaced`. A document of the same name with other content is DocumentExists (409)
    unless `replace`; the same file again is `unchanged`. A category or document folder that leads out of the
    database (a symbolic link) is 400, before anything is written. A cluster that does not answer check_index is
    a ClusterError (503) before anything is written; one that fails after the pages are written leaves them
    (`indexed` false, and a `warning` saying how they reach the index)."""
    stem, ext = safe_upload_name(filename)
    check_content(data, ext, f"{stem}{ext}")
    cat = safe_category(category)
    folder = f"{cat}/{stem}"
    try:
        confined_folder(db, folder)
        confined_folder(db / ".ragkit", f"{UPLOADS}/{cat}", inside="the database's .ragkit folder")
    except PathEscapeError as e:
        raise ClientError(400, f"{stem}{ext}: cannot store it in the category {cat!r}: {e}") from None
    src = db.resolve() / ".ragkit" / UPLOADS / cat / f"{stem}{ext}"
    with _folder_lock(f"{db.resolve()}\0{folder}"):
        return _store_upload(db, folder, stem, ext, cat, src, data, index, limits, replace)


def _store_upload(db: Path, folder: str, stem: str, ext: str, cat: str, src: Path, data: bytes, index,
                  limits: Limits | None, replace: bool) -> dict:
    """upload_document's check, write and ingest, under the folder's lock."""
    from ragkit.ingest.run import ingest_sources
    from ragkit.ingest.workers import Stopped
    from ragkit.search.backend import check_index

    existing, other = _in_the_way(db, folder, hashlib.sha256(data).hexdigest(), src)
    if existing and not (replace and not other):
        what = f"{stem}{ext}: the document {folder!r} (id {existing.id}, {len(existing.pages)} pages) already exists"
        if other:  # no `existing` in the answer: replace=true would not help
            raise ClientError(409, f"{what}, uploaded as {other!r}; delete it first (DELETE "
                                   f"/documents/{existing.id}), or rename the file")
        raise DocumentExists(f"{what} with other content; upload it with replace=true to replace it, or rename "
                             "the file", existing.summary(db))
    check_index(index, timeout=INDEX_CHECK_TIMEOUT, pages=False)  # a cluster that is down: 503, nothing written
    # a replacement that fails to convert leaves the document as it was, its uploaded file included
    before = src.read_bytes() if existing and src.is_file() else None

    def restore() -> None:
        if before is None:
            src.unlink(missing_ok=True)
        else:
            atomic_write_bytes(src, before)

    atomic_write_bytes(src, data)
    try:
        report = ingest_sources([src], db=db.resolve(), category=cat, workers=1, progress=False, limits=limits,
                                check_index=False)
    except Stopped:
        raise ClientError(503, "the server is stopping; upload the document again when it is back") from None
    except RagError as e:
        restore()
        raise ClientError(422, str(e)) from None
    written, removed = report.index_changes()
    if report.skipped and not written:
        # the same file again: its pages may be missing from the index (the cluster failed an earlier upload
        # after they were written); syncing them again changes nothing when they are there
        written = next((d.pages for d in list_documents(db) if d.folder == folder), [])
    not_indexed = _update_index(db, index, written, removed)
    if report.failed:
        restore()
        reason = report.failed[0][1]
        status = 409 if "same folder" in reason else 400 if "leads out of" in reason else 422
        raise ClientError(status, f"{stem}{ext}: {reason}")
    doc = next((d for d in list_documents(db) if d.folder == folder), DocInfo(doc_id(folder), folder, []))
    out = doc.summary(db)
    out["unchanged"] = report.skipped > 0
    out["replaced"] = existing is not None
    out["indexed"] = not_indexed is None
    if not_indexed:
        out["warning"] = (f"the pages are stored but not indexed ({not_indexed}): search and /chat find them once "
                          f"{SYNC_HINT} has run, or once the same file is uploaded again")
    return out


def _update_index(db: Path, index, written: list[str], removed: list[str]) -> str | None:
    """Apply the pages a request wrote and removed to the index. None, or why the cluster did not take them: it
    went away after check_index said it was there. The page files are already written (and another request may
    have read them), so they stay, and the answer says so instead of a 503 that would claim nothing happened;
    `rag index sync` brings the index in step with them."""
    from ragkit.search.opensearch.client import ClusterError

    try:
        index.update_pages(written, removed)
    except ClusterError as e:
        log.warning("%s: %d page(s) written, %d removed, not applied to the index: %s", db, len(written),
                    len(removed), e)
        return str(e)
    return None


def delete_document(db: Path, doc: DocInfo, index) -> dict:
    """Remove the document's pages, its ingest-manifest entry and its uploaded source (ingest's
    forget_document, under the ingest lock); then the index forgets the pages."""
    from ragkit.ingest import forget_document
    from ragkit.search.backend import check_index

    check_index(index, timeout=INDEX_CHECK_TIMEOUT, pages=False)  # a cluster that is down: 503, nothing deleted
    removed, copies = forget_document(db, doc.folder, doc.pages, sources_under=db / ".ragkit" / UPLOADS)
    not_indexed = _update_index(db, index, [], [*doc.pages, *copies])
    out = {"id": doc.id, "deleted_pages": len(removed), "deleted_copies": len(copies), "indexed": not_indexed is None}
    if not_indexed:
        out["warning"] = (f"the pages are deleted but the index still holds them ({not_indexed}); searches leave "
                          f"them out (their files are gone) until {SYNC_HINT} has run")
    return out
