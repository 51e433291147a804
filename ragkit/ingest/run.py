"""`rag ingest`: collect the sources, skip the unchanged ones, convert the rest in workers, write their pages
and the manifest."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from ragkit.core.config import Limits
from ragkit.core.errors import RagError, UsageError
from ragkit.core.paths import page_number, sanitize_name
from ragkit.core.text import clip_middle
from ragkit.ingest.copies import find_copies, refresh_copies, snapshot
from ragkit.ingest.manifest import (
    CONVERTER_VERSION,
    MANIFEST,
    SUPPORTED,
    converter_of,
    db_lock,
    forget_document,
    hash_file,
    load_manifest,
    remove_pages,
    save_manifest,
    sniff,
)
from ragkit.ingest.pages import (
    DocResult,
    IngestReport,
    Job,
    reason_line,
    remove_temporaries,
    shown_path,
    write_page,
)
from ragkit.ingest.workers import run_jobs

# ------------------------------------------------------------------------------------------ collecting


def _collect(sources: list[Path], category: str | None, report: IngestReport) -> list[tuple[Path, str, str]]:
    """(absolute path, kind, category) per document, in a deterministic order; bad sources go to
    report.failed."""
    out: list[tuple[Path, str, str]] = []
    seen: set[Path] = set()

    def add(p: Path, cat_folder: Path):
        ap = p.absolute()
        if ap in seen:
            return
        seen.add(ap)
        cat = sanitize_name(category, fallback="uncategorized") if category else sanitize_name(
            cat_folder.name or "root", fallback="uncategorized")
        out.append((ap, p.suffix.lower(), cat))

    for src in sources:
        src = Path(src)
        shown = shown_path(src.absolute())
        if src.is_symlink() and not src.exists():
            report.failed.append((shown, "cannot read file (broken symbolic link)"))
            continue
        if not src.exists():
            report.failed.append((shown, "no such file or folder"))
            continue
        if src.is_dir():
            found = 0
            for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
                report.hidden.extend(shown_path(Path(dirpath, d).absolute()) + "/"
                                     for d in sorted(dirnames) if d.startswith("."))
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for f in sorted(filenames):
                    if f.startswith("."):
                        report.hidden.append(shown_path(Path(dirpath, f).absolute()))
                        continue
                    if f.startswith("~$"):  # an Office lock file next to an open document
                        continue
                    p = Path(dirpath) / f
                    if p.suffix.lower() not in SUPPORTED:
                        report.ignored.append(shown_path(p.absolute()))
                        continue
                    found += 1
                    if p.is_symlink() and not p.exists():
                        report.failed.append((shown_path(p.absolute()), "cannot read file (broken symbolic link)"))
                        continue
                    add(p, p.absolute().parent)
            if not found:
                report.failed.append((shown, "no PDF, DOCX or PPTX files in this folder"))
            continue
        if src.suffix.lower() not in SUPPORTED:
            report.failed.append((shown, f"unsupported file type {src.suffix or '(none)'!r}; use PDF, DOCX or PPTX"))
            continue
        add(src, src.absolute().parent)
    return out


# -------------------------------------------------------------------------------------------------- main


def ingest_sources(
    sources: list[Path],
    *,
    db: Path,
    category: str | None = None,
    force: bool = False,
    workers: int | None = None,
    progress: bool = True,
    limits: Limits | None = None,
    prune: bool = False,
) -> IngestReport:
    """Ingest files and folders into the page tree; see docs/ingest.md for the rules. Documents are converted
    outside the database's lock (so two ingests, or two uploads, convert at once); their pages and the
    manifest are written under it. A document recorded from a file under a folder ingested that is gone
    (renamed, deleted) is named in report.orphans, or with `prune` removed (report.pruned)."""
    t0 = time.perf_counter()
    if not sources:
        raise RagError("nothing to ingest: give one or more PDF/DOCX/PPTX files or folders")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    limits = limits or Limits()
    db = Path(db)
    if db.exists() and not db.is_dir():
        raise RagError(f"{db}: the database path exists and is not a folder")
    report = IngestReport(db=shown_path(db.absolute()))
    docs = _collect(list(sources), category, report)
    report.sources = len(docs)
    if not docs and len(report.failed) == len(sources) and len(sources) == 1:
        path, reason = report.failed[0]
        raise RagError(f"{path}: {reason}")
    if not docs and not report.failed:
        raise RagError("no PDF, DOCX or PPTX files found in " + ", ".join(str(s) for s in sources))

    db.mkdir(parents=True, exist_ok=True)
    state = db / ".ragkit"
    with db_lock(state):
        report.temporaries = remove_temporaries(db)
        recorded: dict = load_manifest(state / MANIFEST)["sources"]
        jobs, commit = _plan(docs, recorded, db, force, limits, report)
    try:
        for res in run_jobs(jobs, workers, progress, done=report.skipped + len(report.failed)):
            if res.worker[0]:
                report.workers[res.worker[0]] = res.worker[1:]
            if res.error:
                report.failed.append((res.shown, res.error))
                continue
            commit.add(res)
    finally:
        commit.flush()
    _orphans(db, [Path(s) for s in sources if Path(s).is_dir()], prune, report)
    report.seconds = time.perf_counter() - t0
    return report


def _orphans(db: Path, folders: list[Path], prune: bool, report: IngestReport) -> None:
    """The documents recorded from a file under these folders that no longer exists (after this run: a renamed
    file's new name has been ingested, a moved one took its folder over): named, or with `prune` forgotten."""
    if not folders:
        return
    roots = [f.resolve() for f in folders]
    recorded: dict = load_manifest(db / ".ragkit" / MANIFEST)["sources"]
    gone = sorted({(e.get("folder", ""), tuple(e.get("pages") or ())) for key, e in recorded.items()
                   if isinstance(e, dict) and not os.path.exists(key)
                   and any(r in Path(key).resolve().parents for r in roots)})
    for folder, pages in gone:
        if not folder:
            continue
        if prune:
            removed, copies = forget_document(db, folder, list(pages))
            report.removed.extend(removed)
            report.copies_removed.extend(copies)
            report.pruned.append(folder)
        else:
            report.orphans.append(folder)


def _plan(docs: list[tuple[Path, str, str]], recorded: dict, db: Path, force: bool, limits: Limits,
          report: IngestReport) -> tuple[list[Job], _Commit]:
    """The documents to convert (unchanged ones skipped, folder clashes failed), read under the lock."""
    run_keys = {str(p) for p, _, _ in docs}
    # folders owned by sources outside this run that still exist
    claimed: dict[str, str] = {}
    stale_owner: dict[str, str] = {}
    for key, entry in recorded.items():
        if key in run_keys:
            continue
        folder = entry.get("folder", "")
        if os.path.exists(key):
            claimed[folder.casefold()] = key
        else:
            stale_owner[folder.casefold()] = key
    jobs: list[Job] = []
    commit = _Commit(db, report)
    for path, kind, cat in docs:
        key = str(path)
        shown = shown_path(path)
        try:
            st = path.stat()
            if not stat.S_ISREG(st.st_mode):
                report.failed.append((shown, "not a regular file"))
                continue
            digest, head = hash_file(path)
        except OSError as e:
            report.failed.append((shown, f"cannot read file ({reason_line(e.strerror or e)})"))
            continue
        bad = sniff(head, kind)
        if bad:  # checked before the folder is claimed, so a non-document never blocks a real one
            report.failed.append((shown, bad))
            continue
        folder = f"{cat}/{sanitize_name(path.stem, fallback='document')}"
        owner = claimed.get(folder.casefold())
        if owner and owner != key:
            report.failed.append((shown, _clash(folder, owner)))
            continue
        claimed[folder.casefold()] = key
        old = stale_owner.pop(folder.casefold(), None)
        if old:  # a moved/renamed source: its pages are superseded once this one is ingested
            commit.takeover[key] = old
        prev = recorded.get(key)
        # unchanged, and its pages still there: a page file or folder deleted by hand is written again
        if prev and not force and prev.get("sha256") == digest and prev.get("folder") == folder \
                and all((db / rel).is_file() for rel in prev.get("pages") or ()):
            report.skipped += 1
            if converter_of(prev) < CONVERTER_VERSION:
                report.outdated.append(shown)
            continue
        commit.hashes[key] = digest
        jobs.append(Job(key, shown, kind, str(db.absolute()), folder, limits))
    return jobs, commit


_CLASH_NAME = 40  # characters of a name shown in a clash: sanitize_name cuts names at 80, so clashing ones are long


def _clash(folder: str, owner: str) -> str:
    """The one-line reason a source fails when its folder is another's: the folder and the other source, their last
    names clipped in the middle (the failing source is named in full before it)."""
    def short(path: str) -> str:
        parent, sep, name = path.rpartition("/")
        return parent + sep + clip_middle(name, _CLASH_NAME)

    return (f"would go to the same folder {short(folder)} as {short(shown_path(Path(owner)))}; rename one of them or "
            "ingest it with --category")


class _Commit:
    """Converted documents waiting to be written: their pages, then the manifest, under the lock, in batches
    (every few seconds, and at the end) so that a run of thousands of documents does not rewrite the manifest
    thousands of times."""

    def __init__(self, db: Path, report: IngestReport) -> None:
        self.db = db
        self.state = db / ".ragkit"
        self.report = report
        self.hashes: dict[str, str] = {}
        self.takeover: dict[str, str] = {}  # source -> the vanished source whose folder it takes over
        self.pending: list[DocResult] = []
        self.pending_bytes = 0
        self.written: set[str] = set()
        self.last = time.monotonic()
        self.cost = 0.0

    def add(self, res: DocResult) -> None:
        self.pending.append(res)
        self.pending_bytes += sum(len(t) for t in res.texts)
        if self.pending_bytes > 64 << 20 or time.monotonic() - self.last > max(2.0, 20 * self.cost):
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        t0 = time.monotonic()
        report = self.report
        with db_lock(self.state):
            manifest = load_manifest(self.state / MANIFEST)
            recorded: dict = manifest["sources"]
            stale: list[str] = []
            old: dict[str, bytes] = {}  # the re-converted documents' previous pages, to find their copies
            new_page_of: dict[str, str | None] = {}  # previous page -> the new page of the same number
            try:
                for res in self.pending:
                    owner = next((k for k, e in recorded.items() if k != res.src and k != self.takeover.get(res.src)
                                  and e.get("folder", "").casefold() == res.folder.casefold()
                                  and os.path.exists(k)), None)
                    if owner:  # another ingest took the folder while this one converted
                        report.failed.append((res.shown, _clash(res.folder, owner)))
                        continue
                    previous = list(recorded.get(res.src, {}).get("pages", []))
                    if res.src in self.takeover:
                        previous += recorded.get(self.takeover[res.src], {}).get("pages", [])
                    before = snapshot(self.db, previous)
                    try:
                        for rel, text in zip(res.pages, res.texts, strict=True):
                            write_page(self.db / rel, text)
                    except OSError as e:
                        report.failed.append((res.shown, f"cannot write its pages ({reason_line(e.strerror or e)})"))
                        continue
                    res.texts = []
                    by_number = {page_number(p): p for p in res.pages}
                    old.update(before)
                    new_page_of.update({p: by_number.get(page_number(p)) for p in before})
                    if res.warning:
                        report.warnings.append((res.shown, res.warning))
                    report.documents += 1
                    report.pages += len(res.pages)
                    report.pages_without_text += res.no_text
                    report.written.extend(res.pages)
                    self.written.update(res.pages)
                    stale.extend(recorded.get(res.src, {}).get("pages", []))
                    if res.src in self.takeover:
                        stale.extend(recorded.pop(self.takeover[res.src], {}).get("pages", []))
                    recorded[res.src] = {
                        "sha256": self.hashes[res.src],
                        "folder": res.folder,
                        "pages": res.pages,
                        "converter": CONVERTER_VERSION,
                        "ingested_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    }
            finally:
                self.pending, self.pending_bytes = [], 0
                # the copies of the pages just replaced (the optimizer's) must not go on serving the old text
                copies = find_copies(self.db, old, set(old) | self.written)
                refreshed, gone = refresh_copies(self.db, copies, new_page_of)
                report.copies_refreshed.extend(refreshed)
                report.copies_removed.extend(remove_pages(self.db, gone, self.written))
                report.removed.extend(remove_pages(self.db, stale, self.written))
                save_manifest(self.state / MANIFEST, manifest)
        self.last = time.monotonic()
        self.cost = self.last - t0
