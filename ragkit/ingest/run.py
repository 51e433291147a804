"""`rag ingest`: collect the sources, skip the unchanged ones, convert the rest in workers, write their pages
and the manifest."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from ragkit.core.config import Limits, env_limits
from ragkit.core.errors import PathEscapeError, RagError, UsageError
from ragkit.core.pagehistory import replaced_history
from ragkit.core.paths import confined_folder, page_number, path_list, sanitize_name
from ragkit.core.text import clip_middle
from ragkit.ingest.copies import find_copies, refresh_copies, snapshot
from ragkit.ingest.manifest import (
    CONVERTER_VERSION,
    MANIFEST,
    SUPPORTED,
    canonical_key,
    db_lock,
    forget_document,
    hash_file,
    key_path,
    load_manifest,
    outdated,
    remove_pages,
    save_manifest,
    sniff,
    source_key,
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
from ragkit.ingest.workers import refuse_in_worker_start, run_jobs

# ------------------------------------------------------------------------------------------ collecting


def _collect(sources: list[Path], category: str | None, report: IngestReport) -> list[tuple[Path, str, str]]:
    """(absolute path, kind, category) per document, in a deterministic order; bad sources go to
    report.failed. The path is the one the user gave with its `..` taken out (it is shown, and written into the
    front matter relative to the working directory: DESIGN §1); a file named twice (a symlink) is one document."""
    out: list[tuple[Path, str, str]] = []
    seen: set[str] = set()

    def add(p: Path, cat_folder: Path):
        real = os.path.realpath(p)
        if real in seen:
            return
        seen.add(real)
        ap = Path(os.path.normpath(p.absolute()))
        if os.path.realpath(ap) != real:  # `link/..` is not the link's folder's parent: name the file itself
            ap = Path(real)
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
            report.failed.append((shown, unsupported_type(src.suffix)))
            continue
        add(src, src.absolute().parent)
    return out


# Formats ragkit does not read that users are sent all the same: most Korean public and corporate regulations
# come as HWP/HWPX (Hancom's word processor), which Hancom Office and its free viewer save as PDF or DOCX.
CONVERT_FIRST = {".hwp": "HWP (Hangul word processor)", ".hwpx": "HWPX (Hangul word processor)"}


def unsupported_type(suffix: str) -> str:
    """Why a file of this type is not ingested, and what to do with it."""
    known = CONVERT_FIRST.get(suffix.lower())
    if known:
        return (f"unsupported file type {suffix!r}: {known} is not read; save it as PDF or DOCX first (Hancom "
                "Office or the Hangul viewer: Save As / Print to PDF), then ingest that file")
    return f"unsupported file type {suffix or '(none)'!r}; use PDF, DOCX or PPTX"


def convert_first(ignored: list[str]) -> str | None:
    """A hint for the ignored files that a conversion would make readable (HWP/HWPX), or None."""
    kinds = sorted({Path(p).suffix.lower() for p in ignored} & set(CONVERT_FIRST))
    if not kinds:
        return None
    return f"{'/'.join(k[1:].upper() for k in kinds)} files are not read: save them as PDF or DOCX first, then ingest those"


# -------------------------------------------------------------------------------------------------- main


Sources = str | os.PathLike | Iterable[str | os.PathLike]


def _cluster_index(db: Path) -> str:
    """Why this database's pages must reach a cluster index too ("" when the embedded engine reads them): its
    DB/.ragkit/index.json (search/indexconfig.py writes it) names OpenSearch, or RAG_INDEX names an index for it."""
    spec = os.environ.get("RAG_INDEX") or ""
    if spec and spec.strip().lower() != "embedded":
        return "RAG_INDEX names an OpenSearch index for it"
    try:
        cfg = json.loads((db / ".ragkit" / "index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""  # none (embedded), or unreadable: ingest_into and open_index say what is wrong with it
    if isinstance(cfg, dict) and cfg.get("backend") == "opensearch":
        return f"the database is indexed in OpenSearch (prefix {cfg.get('prefix') or '?'})"
    return ""


def ingest_sources(
    sources: Sources,
    *,
    db: Path | str,
    category: str | None = None,
    force: bool = False,
    workers: int | None = None,
    progress: bool = False,
    limits: Limits | None = None,
    prune: bool = False,
    check_index: bool = True,
) -> IngestReport:
    """Ingest files and folders (one path, or a list of them) into the page tree of a database searched by the
    embedded engine; see docs/ingest.md for the rules. `limits`: the document limits, by default those the
    environment and `.env` give (RAG_DOC_TIMEOUT, RAG_MAX_*), as for `rag ingest`. A database indexed in OpenSearch
    (or RAG_INDEX set) is refused: `ragkit.search.ingest_into`, what `rag ingest` calls, keeps that index in step
    (it, and `rag serve`'s uploads, pass `check_index=False`: they bring the index in step themselves).
    From a script, call it under `if __name__ == "__main__":` (documents are converted in worker processes that
    import the main module again). Documents are converted outside the database's lock (so two ingests, or two
    uploads, convert at once); their pages and the manifest are written under it. A document recorded from a file
    under a folder ingested that is gone (renamed, deleted) is named in report.orphans, or with `prune` removed
    (report.pruned)."""
    refuse_in_worker_start()
    bound = _cluster_index(Path(db)) if check_index else ""
    if bound:
        raise RagError(f"{db}: {bound}; ingest with ragkit.search.ingest_into(sources, db=...) (what `rag ingest` "
                       "calls), which keeps that index in step with the page files")
    t0 = time.perf_counter()
    sources = path_list(sources)
    if not sources:
        raise RagError("nothing to ingest: give one or more PDF/DOCX/PPTX files or folders")
    if workers is not None and workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}", flags={"workers": "--workers"})
    limits = limits or env_limits()
    db = Path(db)
    if db.exists() and not db.is_dir():
        raise RagError(f"{db}: the database path exists and is not a folder")
    report = IngestReport(db=shown_path(db.absolute()))
    docs = _collect(sources, category, report)
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
        jobs, commit = _plan(docs, recorded, db, force, limits, report, category_given=bool(category))
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
                   if isinstance(e, dict) and not key_path(db, key).exists()
                   and any(r in key_path(db, key).resolve().parents for r in roots)})
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


def _same_source(db: Path, key: str, path: Path, digest: str, other: str, entry: dict) -> bool:
    """Whether the recorded source `other` (whose folder is this source's) is this source under another name: the
    same real path (an older ragkit's unnormalised key, a symlink), the same file (a second mount of a shared folder
    on this machine), or the same content (another machine's mount, where `other` does not exist, or an identical
    copy: either way the pages it would write are the ones there). Two different files still clash."""
    if canonical_key(db, other) == key or entry.get("sha256") == digest:
        return True
    try:
        return os.path.samefile(key_path(db, other), path)
    except OSError:
        return False


def _plan(docs: list[tuple[Path, str, str]], recorded: dict, db: Path, force: bool, limits: Limits,
          report: IngestReport, *, category_given: bool = False) -> tuple[list[Job], _Commit]:
    """The documents to convert (unchanged ones skipped, folder clashes failed), read under the lock."""
    canon = {key: canonical_key(db, key) for key in recorded}
    alias: dict[str, str] = {}  # a source's key -> the key it is recorded under (the same, or an older spelling)
    for key, c in canon.items():
        if c not in alias or key == c:
            alias[c] = key
    keyed = []
    for path, kind, cat, key in ((p, k, c, source_key(db, p)) for p, k, c in docs):
        folder = f"{cat}/{sanitize_name(path.stem, fallback='document')}"
        if not category_given:  # a source recorded under a category given once (--category) keeps it
            was = str((recorded.get(alias.get(key, "")) or {}).get("folder") or "")
            if was.count("/") == 1 and was.split("/")[1] == folder.split("/")[1]:
                folder = was
        keyed.append((path, kind, folder, key))
    run_keys = {key for *_, key in keyed}
    # a folder recorded for a source of this run stays that source's, whichever file the walk meets first
    reserved = {folder.casefold(): key for _, _, folder, key in keyed
                if (recorded.get(alias.get(key, "")) or {}).get("folder") == folder}
    # folders owned by sources outside this run that still exist
    claimed: dict[str, str] = {}
    stale_owner: dict[str, str] = {}
    for key, entry in recorded.items():
        if canon[key] in run_keys:
            continue
        folder = entry.get("folder", "")
        if key_path(db, key).exists():
            claimed[folder.casefold()] = key
        else:
            stale_owner[folder.casefold()] = key
    jobs: list[Job] = []
    commit = _Commit(db, report)
    for path, kind, folder, key in keyed:
        shown = shown_path(path)
        # a clash's way out for this file alone; a category given (a run's, an upload's) has its own message
        fix = None if category_given else (path, report.db)
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
        try:  # a category or document folder linked out of the database: refused before it is converted
            confined_folder(db, folder)
        except PathEscapeError as e:
            report.failed.append((shown, str(e)))
            continue
        prev_key = alias.get(key)
        held = reserved.get(folder.casefold())
        if held and held != key and not _same_file(db, held, path):
            if recorded.get(alias.get(held, "")) and recorded[alias[held]].get("sha256") == digest:
                report.skipped += 1  # an identical copy: the same document, whose pages are there
            else:
                report.failed.append((shown, _clash(folder, key_path(db, held), fix)))
            continue
        owner = claimed.get(folder.casefold())
        if owner and owner != key:
            # an owner from this run is another file (one file named twice is one document: _collect)
            if owner not in recorded or not _same_source(db, key, path, digest, owner, recorded[owner]):
                report.failed.append((shown, _clash(folder, key_path(db, owner), fix)))
                continue
            prev_key = prev_key if prev_key and recorded[prev_key].get("folder") == folder else owner
        claimed[folder.casefold()] = key
        old = stale_owner.pop(folder.casefold(), None)
        if old:  # a moved/renamed source (or one recorded from another machine's mount): its pages are superseded
            commit.takeover[key] = old  # once this one is ingested, whose front matter names where it is now
        prev = recorded.get(prev_key) if prev_key else None
        # unchanged, and its pages still there: a page file or folder deleted by hand is written again
        if prev and not force and prev.get("sha256") == digest and prev.get("folder") == folder \
                and all((db / rel).is_file() for rel in prev.get("pages") or ()):
            report.skipped += 1
            if outdated(prev, kind):
                report.outdated.append(shown)
            continue
        if prev_key and prev_key != key:  # recorded under another name: the new record replaces that one
            commit.takeover.setdefault(key, prev_key)
        commit.hashes[key] = digest
        commit.keys[str(path)] = key
        jobs.append(Job(str(path), shown, kind, str(db.absolute()), folder, limits))
    return jobs, commit


_CLASH_NAME = 40  # characters of a name shown in a clash: sanitize_name cuts names at 80, so clashing ones are long


def _same_file(db: Path, key: str, path: Path) -> bool:
    try:
        return os.path.samefile(key_path(db, key), path)
    except OSError:
        return False


def _clash(folder: str, owner: Path, fix: tuple[Path, str] | None = None) -> str:
    """The one-line reason a source fails when its folder is another's: the folder and the other source, their last
    names clipped in the middle (the failing source is named in full before it), and the command that gives this
    one a folder of its own (`--category` for this file alone; later ingests of its folder keep it there)."""
    def short(path: str) -> str:
        parent, sep, name = path.rpartition("/")
        return parent + sep + clip_middle(name, _CLASH_NAME)

    head = f"would go to the same folder {short(folder)} as {short(shown_path(owner))}; rename one of them or"
    if fix is None:
        return f"{head} ingest it with --category"
    path, db = fix
    names = [n for n in (path.parent.parent.name, path.parent.name) if n]
    category = sanitize_name("_".join(names), fallback="documents")
    where = f" --db {_word(db)}" if db else ""
    return (f"{head} ingest this file on its own with a category: `rag ingest {_word(shown_path(path))}"
            f"{where} --category {_word(category)}` (later ingests of its folder keep it there)")


_SHELL_SPECIAL = re.compile(r"[\s'\"\\$`!*?&;|<>()\[\]{}#~=%^]")


def _word(text: str) -> str:
    """`text` as one shell word: as it is (Japanese names stay readable) unless the shell would read it otherwise."""
    return shlex.quote(text) if not text or _SHELL_SPECIAL.search(text) else text


class _Commit:
    """Converted documents waiting to be written: their pages, then the manifest, under the lock, in batches
    (every few seconds, and at the end) so that a run of thousands of documents does not rewrite the manifest
    thousands of times."""

    def __init__(self, db: Path, report: IngestReport) -> None:
        self.db = db
        self.state = db / ".ragkit"
        self.report = report
        self.hashes: dict[str, str] = {}  # source key -> sha256
        self.keys: dict[str, str] = {}  # the path a job converts -> its source key (manifest.source_key)
        # source key -> the recorded source whose folder it takes over: a vanished one, or itself by another name
        self.takeover: dict[str, str] = {}
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
            canon = {k: canonical_key(self.db, k) for k in recorded}
            stale: list[str] = []
            old: dict[str, bytes] = {}  # the re-converted documents' previous pages, to find their copies
            new_page_of: dict[str, str | None] = {}  # previous page -> the new page of the same number
            try:
                for res in self.pending:
                    key, digest = self.keys[res.src], self.hashes[self.keys[res.src]]
                    # the records this one replaces: its own, its takeover's, and its own under another name
                    mine = [k for k, e in recorded.items() if k == key or k == self.takeover.get(key)
                            or canon.get(k) == key
                            or (e.get("folder", "").casefold() == res.folder.casefold()
                                and _same_source(self.db, key, Path(res.src), digest, k, e))]
                    owner = next((k for k, e in recorded.items() if k not in mine
                                  and e.get("folder", "").casefold() == res.folder.casefold()
                                  and key_path(self.db, k).exists()), None)
                    if owner:  # another ingest took the folder while this one converted
                        report.failed.append((res.shown, _clash(res.folder, key_path(self.db, owner))))
                        continue
                    try:  # its section folders too, checked again under the lock: nothing written through a link
                        for folder in sorted({rel.rpartition("/")[0] for rel in res.pages}):
                            confined_folder(self.db, folder)
                    except PathEscapeError as e:
                        report.failed.append((res.shown, str(e)))
                        continue
                    previous = [p for k in mine for p in recorded.get(k, {}).get("pages", [])]
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
                    replaced = [recorded[k] for k in mine if isinstance(recorded.get(k), dict)]
                    # what the pages it removes held: a question naming one is followed by its text (pagehistory)
                    history = replaced_history(replaced, before, res.pages,
                                               any(e.get("sha256") == digest for e in replaced))
                    for k in mine:
                        stale.extend(recorded.pop(k, {}).get("pages", []))
                    recorded[key] = {
                        "sha256": digest,
                        "folder": res.folder,
                        "pages": res.pages,
                        "converter": CONVERTER_VERSION,
                        "ingested_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    }
                    if history:
                        recorded[key]["replaced"] = history
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
