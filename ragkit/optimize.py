"""Folder optimization, the "RL" loop (DESIGN §6): copy pages the agent missed into folders where it
would have looked, and keep only the copies that help.

For every answerable row whose Ref Recall < 1 (aliases counted), a proposer (the LLM, or a deterministic
rule offline) picks a folder inside the page's category; the page is copied there under its own name
(never over a file), the index learns of it at once, and the input CSV's `Optimized Reference Document`
becomes `original|copy`. With `enable_rl` each row gets up to 5 attempts (propose, copy, re-ask, score);
an attempt that does not reach Ref Recall >= 1 has its copy and index entry removed before the next one.

Every copy is written to a journal (DB/.ragkit/optimize-journal.jsonl, fsync'ed) before it appears:
`created` -> `kept` | `rolled_back`. A copy left `created` by a process that no longer runs was never
confirmed, and `recover_journal` removes it (optimize calls it at start; batch/index may too).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import unicodedata
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragkit.config import Settings
from ragkit.csvio import join_multi, read_csv, split_multi, write_csv
from ragkit.errors import PathEscapeError, RagError
from ragkit.models import Usage
from ragkit.pagefile import first_heading, parse_page
from ragkit.paths import normalize_ref, reference_path, resolve_in_db, sanitize_name, strip_db_prefix
from ragkit.text import STOPWORDS, detect_lang, normalize

MAX_ATTEMPTS = 5
MAX_DEPTH = 4  # folder levels below the category a proposal may use
MAX_FOLDER_CHARS = 200  # whole db-relative folder path
MAX_COMPONENT = 60  # one proposed folder name
PAGE_EXCERPT = 1500  # characters of the missed page shown to the model
TREE_MAX_ENTRIES = 60
TREE_MAX_DEPTH = 3
JOURNAL_NAME = "optimize-journal.jsonl"
OPT_COL = "Optimized Reference Document"
REF_COL = "Reference Document"
METRIC_KEYS = ("TP", "TN", "FP", "FN", "Recall", "Precision", "Specificity", "F1", "Accuracy")

PROPOSAL_SCHEMA = {
    "type": "object",
    "properties": {
        "folder": {"type": "string", "description": "folder path relative to the database root"},
        "reason": {"type": "string"},
        "new_folder": {"type": "boolean"},
    },
    "required": ["folder", "reason", "new_folder"],
}

_SYSTEM = """You reorganise a document database so that a search agent finds the right page.
The database is a folder tree (category/document/section/page_NNN.md). The agent browses folders by their
names, searches page text and reads pages. For the question below it did NOT find the page shown.
Choose the folder where a COPY of this page should also live so that someone asking this question would
find it there. Rules:
- Prefer an EXISTING folder from the listing when one fits the question; propose a new folder only when
  none does (then set new_folder to true). A new folder should be named with the words a user asking
  this question would look for, in the question's language.
- The folder must be inside the category folder `{category}`, given relative to the database root,
  at most {depth} levels below the category, without a file name, without `..`, `/` at the start or `\\`.
- Do not propose the folder the page is already in.
Reply with one JSON object: {{"folder": "...", "reason": "one sentence", "new_folder": true|false}}."""


# -- results -----------------------------------------------------------------------------------------
@dataclass
class CopyRecord:
    """One copy this run placed (or found already in place) for one row."""

    row: int  # index into the rows passed in
    question: str
    original: str  # db-relative page path
    copy: str  # db-relative path of the copy
    folder: str
    attempt: int  # 1-based; 1 without RL
    proposer: str  # "llm" | "offline" | "fallback"
    reason: str
    created: bool  # False when an identical copy was already in that folder (reused, not ours)
    status: str = "pending"  # pending | kept | rolled_back | reused


@dataclass
class OptimizeReport:
    rows: list[dict]
    enable_rl: bool = False
    analysed: int = 0  # rows with a missed page that were worked on
    fixed: int = 0  # RL rows that reached Ref Recall >= 1
    created: int = 0  # copy files written
    kept: int = 0
    rolled_back: int = 0
    recall_before: float | None = None  # mean alias-aware Ref Recall over scored answerable rows
    recall_after: float | None = None  # same after the RL loop (None without RL: nothing was re-asked)
    rows_scored: int = 0
    csv_path: Path | None = None  # the input CSV when it was updated
    backup_path: Path | None = None
    copies: list[CopyRecord] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # unconfirmed copies removed at start
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def summary(self) -> dict[str, Any]:
        """Figures for a batch summary CSV (one value each)."""
        return {
            "Optimize Rows Analysed": self.analysed,
            "Optimize Rows Fixed": self.fixed if self.enable_rl else "",
            "Optimize Copies Created": self.created,
            "Optimize Copies Kept": self.kept,
            "Optimize Copies Rolled Back": self.rolled_back,
            "Ref Recall Before Optimize": _blank(self.recall_before),
            "Ref Recall After Optimize": _blank(self.recall_after),
            "Optimize Errors": len(self.errors),
        }


def _blank(v: float | None) -> float | str:
    return "" if v is None else round(v, 4)


def print_optimize_report(report: OptimizeReport, console) -> None:
    """A few lines for the end of `rag batch`."""
    if report.recovered:
        console.print(f"optimize: removed {len(report.recovered)} unconfirmed copies left by an interrupted run")
    if not report.analysed and not report.errors:
        console.print("optimize: no missed reference pages; nothing to do")
        return
    line = (f"optimize: {report.analysed} rows analysed; copies created {report.created}, kept {report.kept}, "
            f"rolled back {report.rolled_back}")
    console.print(line, highlight=False)
    before = "n/a" if report.recall_before is None else f"{report.recall_before:.3f}"
    if report.enable_rl:
        after = "n/a" if report.recall_after is None else f"{report.recall_after:.3f}"
        console.print(f"optimize: Ref Recall before {before}, after {after} ({report.fixed} rows fixed, "
                      f"{report.rows_scored} rows scored)", highlight=False)
    else:
        console.print(f"optimize: Ref Recall before {before}; run with --enable-rl to re-ask and keep only "
                      "copies that help", highlight=False)
    if report.csv_path:
        console.print(f"optimize: updated {report.csv_path} (`{OPT_COL}`), previous file kept as "
                      f"{report.backup_path}", highlight=False)
    for e in report.errors[:10]:
        console.print(f"optimize: [red]error[/red] {e}", highlight=False)
    if len(report.errors) > 10:
        console.print(f"optimize: ... {len(report.errors) - 10} more errors", highlight=False)


# -- journal -----------------------------------------------------------------------------------------
_JOURNAL_LOCKS: dict[str, threading.Lock] = {}
_JOURNAL_LOCKS_GUARD = threading.Lock()


def journal_path(db: Path) -> Path:
    return Path(db).resolve() / ".ragkit" / JOURNAL_NAME


class Journal:
    """Append-only JSON lines, fsync'ed per entry, so a crash can be undone on the next run."""

    def __init__(self, db: Path) -> None:
        self.path = journal_path(db)
        with _JOURNAL_LOCKS_GUARD:
            self._lock = _JOURNAL_LOCKS.setdefault(str(self.path), threading.Lock())

    def append(self, event: str, **fields: Any) -> None:
        entry = {"ts": datetime.now(UTC).isoformat(timespec="seconds"), "event": event, **fields}
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def entries(self) -> list[dict]:
        """Every readable entry; a line cut short by a crash is ignored."""
        if not self.path.is_file():
            return []
        out = []
        with self._lock:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and "id" in e:
                out.append(e)
        return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError, TypeError, ValueError):
        return False
    return True


def recover_journal(db: Path, index=None) -> list[str]:
    """Remove copies the journal shows as created but never confirmed by a process that is gone.

    Returns the db-relative paths removed. A copy edited since (checksum differs) is left alone; copies
    of a process still running (another `rag batch` on the same database) are not touched.
    """
    db = Path(db)
    journal = Journal(db)
    created: dict[str, dict] = {}
    last: dict[str, str] = {}
    for e in journal.entries():
        if e.get("event") == "created":
            created[e["id"]] = e
        last[e["id"]] = e.get("event", "")
    removed: list[str] = []
    host = socket.gethostname()
    for cid, e in created.items():
        if last.get(cid) != "created":
            continue
        if e.get("host") == host and _pid_alive(int(e.get("pid") or 0)):
            continue
        rel = str(e.get("path", ""))
        try:
            full = resolve_in_db(db, rel)
        except PathEscapeError:
            journal.append("recovered", id=cid, path=rel, note="path refused")
            continue
        note = "already gone"
        if full.is_file():
            if _sha256(full.read_bytes()) == e.get("sha256"):
                full.unlink(missing_ok=True)
                removed.append(rel)
                note = "removed"
            else:
                note = "left in place: edited since it was created"
        if index is not None:
            _index_remove(index, rel)
        _remove_empty_dirs(db, e.get("dirs") or [])
        journal.append("recovered", id=cid, path=rel, note=note)
    return removed


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _remove_empty_dirs(db: Path, dirs: Iterable[str]) -> None:
    """rmdir folders a copy created, deepest first, only when empty (never anything else)."""
    for rel in sorted(dirs, key=lambda d: d.count("/"), reverse=True):
        try:
            os.rmdir(resolve_in_db(db, rel))
        except (OSError, PathEscapeError):
            pass


def _index_remove(index, rel: str) -> None:
    try:
        index.remove_page(rel)
    except Exception:  # noqa: BLE001 - a page the index never had is fine; refresh() re-derives from files
        pass


# -- the folder tree shown to the model ---------------------------------------------------------------
class FolderTree:
    """Page counts per folder of a category, updated as copies come and go (walked once per category)."""

    def __init__(self, db: Path) -> None:
        self.db = Path(db)
        self._direct: dict[str, dict[str, int]] = {}  # category -> folder -> pages directly inside
        self._lock = threading.Lock()

    def _load(self, category: str) -> dict[str, int]:
        if category not in self._direct:
            counts: dict[str, int] = {}
            base = resolve_in_db(self.db, category)
            root = self.db.resolve()
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                rel = Path(dirpath).relative_to(root).as_posix()
                counts[rel] = sum(1 for f in filenames if f.endswith(".md") and not f.startswith("."))
            self._direct[category] = counts
        return self._direct[category]

    def change(self, folder: str, delta: int) -> None:
        category = folder.split("/", 1)[0]
        with self._lock:
            if category not in self._direct:
                return
            counts = self._direct[category]
            parts = folder.split("/")
            for i in range(1, len(parts) + 1):  # a new folder's parents appear too
                counts.setdefault("/".join(parts[:i]), 0)
            counts[folder] = max(0, counts[folder] + delta)

    def exists(self, folder: str) -> bool:
        category = folder.split("/", 1)[0]
        with self._lock:
            return folder in self._load(category)

    def listing(self, category: str, focus: str, *, max_entries: int = TREE_MAX_ENTRIES,
                max_depth: int = TREE_MAX_DEPTH) -> str:
        """`folder/ (N pages)` lines, the focus document's folders first, bounded in depth and count."""
        with self._lock:
            counts = dict(self._load(category))
        totals: dict[str, int] = {}
        for folder, n in counts.items():
            parts = folder.split("/")
            for i in range(1, len(parts) + 1):
                key = "/".join(parts[:i])
                totals[key] = totals.get(key, 0) + n
        shown = [f for f in totals if f.count("/") <= max_depth]
        shown.sort(key=lambda f: (not (f == focus or f.startswith(focus + "/")), f))
        lines = [f"{f}/ ({totals[f]} pages)" for f in shown[:max_entries]]
        hidden = len(totals) - min(len(shown), max_entries)
        if hidden > 0:
            lines.append(f"... {hidden} more folders not shown")
        return "\n".join(lines)


# -- proposals ---------------------------------------------------------------------------------------
@dataclass
class Proposal:
    folder: str  # validated, db-relative
    reason: str
    new_folder: bool
    proposer: str  # "llm" | "offline" | "fallback"


def validate_folder(db: Path, raw: str, *, category: str, original: str) -> str:
    """A proposed folder made safe, or PathEscapeError/ValueError saying why it is refused.

    Accepts db-relative (`cat/x`), Reference-form (`database/cat/x`) or category-relative (`x`) paths.
    Refuses `..`, absolute paths, backslashes, NUL, paths deeper than MAX_DEPTH below the category or
    longer than MAX_FOLDER_CHARS, the page's own folder, and anything resolving outside the category
    (a symlink). Each component is sanitised (device names, control and <>:"|?* characters, length).
    """
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("the folder is empty")
    if "\x00" in raw:
        raise PathEscapeError("the folder contains a NUL byte")
    if "\\" in raw:
        raise PathEscapeError("backslashes are not allowed; use '/' between folder names")
    text = raw.strip()
    if text.startswith("/") or text.startswith("~") or re.match(r"^[A-Za-z]:", text):
        raise PathEscapeError(f"absolute paths are not allowed: {text[:80]!r}")
    parts_raw = [p for p in text.split("/") if p.strip() not in ("", ".")]
    if any(p.strip() == ".." for p in parts_raw):
        raise PathEscapeError(f"'..' is not allowed: {text[:80]!r}")
    rel = strip_db_prefix(db, "/".join(parts_raw))
    parts = [p for p in rel.split("/") if p.strip()]
    if parts and parts[-1].lower().endswith(".md"):
        parts = parts[:-1]  # a page path: its folder is meant
    parts = [sanitize_name(p, fallback="", max_len=MAX_COMPONENT) for p in parts]
    parts = [p for p in parts if p]
    if not parts:
        raise ValueError("no usable folder name")
    if parts[0] != category:
        parts = [category, *parts]  # relative to the scope
    if len(parts) - 1 > MAX_DEPTH:
        raise ValueError(f"too deep: at most {MAX_DEPTH} folder levels below {category!r}")
    folder = "/".join(parts)
    if len(folder) > MAX_FOLDER_CHARS:
        raise ValueError(f"path too long ({len(folder)} characters, at most {MAX_FOLDER_CHARS})")
    if folder == original.rsplit("/", 1)[0]:
        raise ValueError("the page is already in that folder")
    scope = resolve_in_db(db, category)
    target = resolve_in_db(db, folder)
    if target != scope and scope not in target.parents:
        raise PathEscapeError(f"path leaves the category {category!r}")
    probe = target
    while probe != scope:
        if probe.exists() and not probe.is_dir():
            raise ValueError(f"{probe.relative_to(db.resolve()).as_posix()!r} is a file, not a folder")
        probe = probe.parent
    return folder


_CJK_TERM = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf\u30a0-\u30ffー々A-Za-z0-9]{2,}")
_KO_PARTICLE = re.compile(r"(으로|에서|에게|까지|부터|하고|이나|으로는|에는|은|는|이|가|을|를|에|의|로|와|과|도|만)$")
_QUESTION_WORDS = frozenset(
    "how what why which when where who whom whose please explain describe tell list give does many much "
    "어떻게 무엇 무엇인가요 언제 어디 왜 누구 어느 몇 있나요 합니까 인가요 "
    "何 どう どの いつ どこ なぜ 教えて ください".split()
)


def key_phrase(question: str, *, max_terms: int = 3) -> str:
    """A short folder name from the question's key terms: content words (English), noun-like kanji/katakana
    runs (Japanese/Chinese), particle-stripped words (Korean)."""
    lang = detect_lang(question)
    q = unicodedata.normalize("NFKC", question)
    terms: list[str] = []
    if lang in ("ja", "zh"):
        candidates = _CJK_TERM.findall(q)
    elif lang == "ko":
        candidates = [_KO_PARTICLE.sub("", w) for w in re.findall(r"[^\W_]+", q)]
    else:
        candidates = [w for w in re.findall(r"[^\W_]+", normalize(q)) if len(w) > 2 and w not in STOPWORDS]
    for t in candidates:
        if t and t.casefold() not in _QUESTION_WORDS and t not in terms:
            terms.append(t)
        if len(terms) >= max_terms:
            break
    return sanitize_name(" ".join(terms), fallback="questions", max_len=MAX_COMPONENT)


def offline_proposals(question: str, original: str, page_text: str) -> list[tuple[str, str]]:
    """Deterministic folders to try in order, as (folder, reason): the question's key terms inside the
    page's document folder, then at category level, inside the section, then with the page heading."""
    parts = original.split("/")[:-1]
    category = parts[0]
    document = "/".join(parts[:2]) if len(parts) >= 2 else category
    section = "/".join(parts)
    name = key_phrase(question)
    _, body = parse_page(page_text)
    heading = sanitize_name(first_heading(body), fallback="", max_len=MAX_COMPONENT)
    out = [
        (f"{document}/{name}", "a folder named after the question's key terms, in the page's document"),
        (f"{category}/{name}", "the question's key terms at category level"),
        (f"{section}/{name}", "the question's key terms inside the page's section"),
    ]
    if heading:
        combo = sanitize_name(f"{name} {heading}", fallback=name, max_len=MAX_COMPONENT)
        out.append((f"{document}/{combo}", "the key terms plus the page heading"))
        out.append((f"{category}/{heading}", "the page heading at category level"))
    out.append((f"{category}/{name} {len(parts)}", "a fresh folder named after the key terms"))
    return out


# -- copies ------------------------------------------------------------------------------------------
class CopyManager:
    """Places and removes copies for one run: exclusive creation (no overwrite, unique names), shared
    ownership when two workers want the same page in the same folder, journal before every change."""

    def __init__(self, db: Path, index, journal: Journal, tree: FolderTree) -> None:
        self.db = Path(db)
        self.index = index
        self.journal = journal
        self.tree = tree
        self._lock = threading.Lock()
        self._owners: dict[str, set] = {}  # pending copy -> owners (row, attempt)
        self._info: dict[str, dict] = {}  # copy -> {"id", "dirs", "folder"}
        self._status: dict[str, str] = {}  # copy -> pending | kept | rolled_back

    def place(self, original: str, folder: str, owner: Any) -> tuple[str, bool]:
        """Copy `original` into `folder` (both db-relative). Returns (copy path, created)."""
        src = resolve_in_db(self.db, original)
        data = src.read_bytes()
        name = src.name
        stem = name[:-3] if name.endswith(".md") else name
        with self._lock:
            target = resolve_in_db(self.db, folder)
            if target.is_dir():  # the same page already there: share it instead of duplicating
                for p in sorted(target.glob(f"{glob_escape(stem)}*.md")):
                    rel = f"{folder}/{p.name}"
                    if p.is_file() and _same_copy_name(p.name, stem) and p.read_bytes() == data:
                        if rel in self._owners:
                            self._owners[rel].add(owner)
                            return rel, False
                        return rel, False  # confirmed earlier (or by the user): not ours to remove
            dirs = _missing_dirs(self.db, folder)
            n = 1
            while True:
                cand = name if n == 1 else f"{stem}_{n}.md"
                if not (target / cand).exists():
                    break
                n += 1
            rel = f"{folder}/{cand}"
            cid = uuid.uuid4().hex
            # journal first: a crash after this line leaves something `recover_journal` can undo
            self.journal.append("created", id=cid, path=rel, original=original, sha256=_sha256(data),
                                dirs=dirs, pid=os.getpid(), host=socket.gethostname())
            try:
                target.mkdir(parents=True, exist_ok=True)
                if resolve_in_db(self.db, folder) != target:  # a symlink raced in
                    raise PathEscapeError(f"{folder!r} changed while copying")
                rel, cand = self._link_new(target, folder, stem, cand, data)
            except BaseException:
                _remove_empty_dirs(self.db, dirs)
                self.journal.append("rolled_back", id=cid, path=rel, note="copy failed")
                raise
            if cand != rel.rsplit("/", 1)[1]:
                pass
            self._owners[rel] = {owner}
            self._info[rel] = {"id": cid, "dirs": dirs, "folder": folder}
            self._status[rel] = "pending"
            if rel != f"{folder}/{cand}":
                rel = f"{folder}/{cand}"
            self.tree.change(folder, +1)
        try:
            self.index.add_page(rel)
        except Exception as e:  # noqa: BLE001 - the copy must not outlive a failed index update
            self.release(rel, owner, keep=False)
            raise RagError(f"index could not add {rel}: {e}") from e
        return rel, True

    def _link_new(self, target: Path, folder: str, stem: str, cand: str, data: bytes) -> tuple[str, str]:
        """Write to a hidden temp file, then hard-link it to the final name: atomic, and O_EXCL-like
        (link fails when the name exists, e.g. another process took it)."""
        fd, tmp = tempfile.mkstemp(prefix=".optimize-", suffix=".tmp", dir=target)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            n = 1 if cand == f"{stem}.md" else int(cand[len(stem) + 1 : -3])
            while True:
                try:
                    os.link(tmp, target / cand)
                    break
                except FileExistsError:
                    n += 1
                    cand = f"{stem}_{n}.md"
            return f"{folder}/{cand}", cand
        finally:
            Path(tmp).unlink(missing_ok=True)

    def release(self, rel: str, owner: Any, *, keep: bool) -> str:
        """Keep or give up one owner's claim. The last claim given up removes the copy (index first, so
        readers stop being sent there, then the file and the folders it created). Returns the copy's state."""
        with self._lock:
            if rel not in self._owners:
                return self._status.get(rel, "untracked")
            info = self._info[rel]
            if keep:
                del self._owners[rel]
                self._status[rel] = "kept"
                self.journal.append("kept", id=info["id"], path=rel)
                return "kept"
            self._owners[rel].discard(owner)
            if self._owners[rel]:
                return "shared"
            del self._owners[rel]
            _index_remove(self.index, rel)
            try:
                resolve_in_db(self.db, rel).unlink(missing_ok=True)
            finally:
                _remove_empty_dirs(self.db, info["dirs"])
                self.tree.change(info["folder"], -1)
                self._status[rel] = "rolled_back"
                self.journal.append("rolled_back", id=info["id"], path=rel)
            return "rolled_back"

    def pending(self) -> list[str]:
        with self._lock:
            return list(self._owners)

    def abandon_all(self) -> None:
        """Remove every copy still pending (end of run, or interruption)."""
        for rel in self.pending():
            with self._lock:
                owners = list(self._owners.get(rel, ()))
            for o in owners:
                self.release(rel, o, keep=False)


def glob_escape(s: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", s)


def _same_copy_name(name: str, stem: str) -> bool:
    return name == f"{stem}.md" or re.fullmatch(re.escape(stem) + r"_\d+\.md", name) is not None


def _missing_dirs(db: Path, folder: str) -> list[str]:
    parts = folder.split("/")
    out = []
    for i in range(1, len(parts) + 1):
        rel = "/".join(parts[:i])
        if not resolve_in_db(db, rel).exists():
            out.append(rel)
    return out


# -- references --------------------------------------------------------------------------------------
_GROUP_SPLIT = re.compile(r"([\r\n;]+)")


def reference_groups(cell: str) -> list[list[str]]:
    """`a|b\nc` -> [["a", "b"], ["c"]] (raw alias strings)."""
    groups = []
    for g in split_multi(cell or ""):
        aliases = [a.strip() for a in g.split("|") if a.strip()]
        if aliases:
            groups.append(aliases)
    return groups


def add_alias(cell: str, original_ref: str, copy_ref: str) -> str:
    """Append `copy_ref` to the group containing `original_ref`, keeping the cell's separators."""
    target = normalize_ref(original_ref)
    pieces = _GROUP_SPLIT.split(cell or "")
    found = False
    for i in range(0, len(pieces), 2):
        aliases = [a.strip() for a in pieces[i].split("|") if a.strip()]
        if any(normalize_ref(a) == target for a in aliases):
            found = True
            if all(normalize_ref(a) != normalize_ref(copy_ref) for a in aliases):
                pieces[i] = "|".join([*aliases, copy_ref])
    if not found:  # the original is not in the cell (should not happen): add a new group
        return f"{cell}\n{original_ref}|{copy_ref}" if (cell or "").strip() else f"{original_ref}|{copy_ref}"
    return "".join(pieces)


def _db_rel(db: Path, path: str) -> str:
    return normalize_ref(strip_db_prefix(db, path))


def missed_groups(db: Path, cell: str, retrieved: Iterable[str]) -> tuple[list[list[str]], list[list[str]]]:
    """(all groups, groups none of whose aliases was retrieved), as db-relative paths."""
    got = {_db_rel(db, r) for r in retrieved}
    groups = [[_db_rel(db, a) for a in g] for g in reference_groups(cell)]
    return groups, [g for g in groups if not any(a in got for a in g)]


def _float(v: Any) -> float | None:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def _effective_cell(row: dict) -> str:
    opt = str(row.get(OPT_COL) or "").strip()
    return opt if opt else str(row.get(REF_COL) or "")


# -- the run -----------------------------------------------------------------------------------------
@dataclass
class _Ctx:
    db: Path
    settings: Settings
    strategy: str
    index: Any
    provider: Any
    copies: CopyManager
    tree: FolderTree
    enable_rl: bool
    usage: Usage = field(default_factory=Usage)
    usage_lock: threading.Lock = field(default_factory=threading.Lock)


def optimize_missed(
    rows: list[dict],
    *,
    input_csv: Path,
    settings: Settings,
    strategy: str,
    enable_rl: bool,
    index=None,
    progress: bool = True,
) -> OptimizeReport:
    """Copy every missed reference page where the question would find it (DESIGN §6).

    `rows` are batch result rows (DESIGN §4 columns). Returns the rows (RL: the final attempt's answer,
    retrieved files and reference metrics, plus `Attempts`), what was copied, kept and rolled back, and
    Ref Recall before/after. Per-row failures go to `.errors`; the others still run.
    """
    from ragkit.llm import get_provider

    db = Path(settings.db)
    if index is None:
        from ragkit.index import open_index

        index = open_index(db)
    report = OptimizeReport(rows=[dict(r) for r in rows], enable_rl=enable_rl)
    report.recovered = recover_journal(db, index)
    journal = Journal(db)
    tree = FolderTree(db)
    ctx = _Ctx(db=db, settings=settings, strategy=strategy, index=index, provider=get_provider(settings),
               copies=CopyManager(db, index, journal, tree), tree=tree, enable_rl=enable_rl)

    targets: list[tuple[int, list[list[str]]]] = []
    before: dict[int, float] = {}
    for i, row in enumerate(report.rows):
        if not str(row.get(REF_COL) or "").strip() or str(row.get("Error") or "").strip():
            continue  # unanswerable, or the question itself failed: nothing to learn from
        groups, missed = missed_groups(db, _effective_cell(row), split_multi(str(row.get("Retrieved Files") or "")))
        if not groups:
            continue
        before[i] = (len(groups) - len(missed)) / len(groups)
        if missed:
            targets.append((i, missed))
    report.recall_before = sum(before.values()) / len(before) if before else None
    report.rows_scored = len(before)
    report.analysed = len(targets)
    after = dict(before)

    results: dict[int, tuple[list[CopyRecord], dict | None, float | None]] = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
            futures = {pool.submit(_work_row, ctx, i, report.rows[i], missed): i for i, missed in targets}
            bar = _progress(len(futures), progress)
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as e:  # noqa: BLE001 - one row's failure must not stop the others
                    report.errors.append(f"row {i + 2}: {_one_line(e)}")
                bar.update(1)
            bar.close()
    finally:
        if enable_rl:
            ctx.copies.abandon_all()  # an interruption leaves no half-judged copy behind

    confirmed: list[CopyRecord] = []
    for i in sorted(results):
        records, new_row, recall = results[i]
        report.copies.extend(records)
        if new_row is not None:
            report.rows[i] = new_row
        if recall is not None:
            after[i] = recall
        if enable_rl:
            confirmed.extend(r for r in records if r.status in ("kept", "reused"))
        else:
            confirmed.extend(r for r in records if r.status in ("pending", "reused"))

    # the CSV names the copies; only then are non-RL copies confirmed (a crash before leaves them pending)
    if confirmed:
        try:
            report.csv_path, report.backup_path = update_input_csv(Path(input_csv), report.rows, confirmed, db)
        except RagError as e:
            report.errors.append(str(e))
        if not enable_rl:
            if report.csv_path is not None or not report.errors:
                for r in confirmed:
                    if r.created:
                        r.status = ctx.copies.release(r.copy, (r.row, r.attempt), keep=True)
            else:  # the CSV could not record them: remove them rather than leave unknown copies
                for r in confirmed:
                    if r.created:
                        r.status = ctx.copies.release(r.copy, (r.row, r.attempt), keep=False)
        for r in confirmed:
            row = report.rows[r.row]
            base = _effective_cell(row)
            row[OPT_COL] = add_alias(base, reference_path(db, r.original), reference_path(db, r.copy))
    ctx.copies.abandon_all()

    report.created = sum(1 for r in report.copies if r.created)
    report.kept = sum(1 for r in report.copies if r.created and r.status == "kept")
    report.rolled_back = sum(1 for r in report.copies if r.created and r.status == "rolled_back")
    if enable_rl:
        report.recall_after = sum(after.values()) / len(after) if after else None
        report.fixed = sum(1 for i, _ in targets if (after.get(i) or 0) >= 1.0)
        for row in report.rows:
            row.setdefault("Attempts", 0)
    report.usage = ctx.usage
    return report


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="optimize", unit="question", disable=not enabled or total == 0,
                file=sys.stderr)


def _work_row(ctx: _Ctx, i: int, row: dict, missed: list[list[str]]):
    question = str(row.get("Question") or "")
    if not ctx.enable_rl:
        records = []
        for group in missed:
            records.append(_propose_and_copy(ctx, i, question, group, attempt=1, tried=[]))
        return records, None, None
    return _rl_row(ctx, i, row, missed)


def _original_of(ctx: _Ctx, group: list[str]) -> str:
    for alias in group:
        try:
            if resolve_in_db(ctx.db, alias).is_file():
                return alias
        except PathEscapeError:
            continue
    raise RagError(f"reference page not found in the database: {group[0]}")


def _propose_and_copy(ctx: _Ctx, i: int, question: str, group: list[str], *, attempt: int,
                      tried: list[dict]) -> CopyRecord:
    original = _original_of(ctx, group)
    proposal = propose(ctx, question, original, tried=tried)
    rel, created = ctx.copies.place(original, proposal.folder, (i, attempt))
    return CopyRecord(row=i, question=question, original=original, copy=rel, folder=proposal.folder,
                      attempt=attempt, proposer=proposal.proposer, reason=proposal.reason, created=created,
                      status="pending" if created else "reused")


def propose(ctx: _Ctx, question: str, original: str, *, tried: list[dict]) -> Proposal:
    """Where a copy of `original` should go: the model's choice, validated; the deterministic rule offline,
    or when the model's answers are refused twice."""
    category = original.split("/", 1)[0]
    page_text = resolve_in_db(ctx.db, original).read_text(encoding="utf-8", errors="replace")
    tried_folders = {t["folder"] for t in tried}
    problems: list[str] = []
    if not ctx.provider.is_offline:
        from ragkit.llm import chat_json

        messages = _proposal_messages(ctx, question, original, page_text, tried)
        for _ in range(2):
            data, usage = chat_json(ctx.provider, messages, schema=PROPOSAL_SCHEMA, schema_name="folder_proposal")
            with ctx.usage_lock:
                ctx.usage.add(usage)
            raw = data.get("folder")
            try:
                folder = validate_folder(ctx.db, raw if isinstance(raw, str) else "", category=category,
                                         original=original)
                if folder in tried_folders:
                    raise ValueError("that folder was already tried and did not help")
                return Proposal(folder, str(data.get("reason") or "")[:300], bool(data.get("new_folder")), "llm")
            except (ValueError, PathEscapeError) as e:
                problems.append(f"{str(raw)[:80]!r}: {e}")
                messages = messages + [
                    {"role": "assistant", "content": json.dumps(data, ensure_ascii=False)},
                    {"role": "user", "content": f"That folder was refused: {e}. Propose another folder inside "
                                                f"{category!r} following the rules."},
                ]
    for folder, reason in offline_proposals(question, original, page_text):
        try:
            folder = validate_folder(ctx.db, folder, category=category, original=original)
        except (ValueError, PathEscapeError):
            continue
        if folder not in tried_folders:
            kind = "fallback" if problems else "offline"
            if problems:
                reason = f"{reason} (model proposals refused: {'; '.join(problems)})"
            return Proposal(folder, reason, not ctx.tree.exists(folder), kind)
    raise RagError(f"no acceptable folder for {original}" + (f": {'; '.join(problems)}" if problems else ""))


def _proposal_messages(ctx: _Ctx, question: str, original: str, page_text: str, tried: list[dict]) -> list[dict]:
    category = original.split("/", 1)[0]
    parts = original.split("/")
    focus = "/".join(parts[:2]) if len(parts) > 2 else category
    _, body = parse_page(page_text)
    excerpt = body.strip()
    if len(excerpt) > PAGE_EXCERPT:
        excerpt = excerpt[:PAGE_EXCERPT] + "\n[... trimmed]"
    user = [
        f"Question: {question}",
        f"Missed page: {original}",
        f"Page content (trimmed):\n{excerpt}",
        f"Existing folders in the category {category!r} (page counts include sub-folders):\n"
        f"{ctx.tree.listing(category, focus)}",
    ]
    if tried:
        lines = [f"- {t['folder']}: {t['outcome']}" for t in tried]
        user.append("Earlier attempts that did NOT help (choose a different folder):\n" + "\n".join(lines))
    return [{"role": "system", "content": _SYSTEM.format(category=category, depth=MAX_DEPTH)},
            {"role": "user", "content": "\n\n".join(user)}]


def _rl_row(ctx: _Ctx, i: int, row: dict, missed: list[list[str]]):
    """Up to MAX_ATTEMPTS of propose -> copy -> re-ask -> score; roll back what did not help."""
    from ragkit.agent import ask
    from ragkit.metrics import reference_metrics

    question = str(row.get("Question") or "")
    base_cell = _effective_cell(row)
    tried: dict[str, list[dict]] = {}
    records: list[CopyRecord] = []
    new_row = dict(row)
    recall: float | None = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        made: list[CopyRecord] = []
        try:
            for group in missed:
                original = _original_of(ctx, group)
                made.append(_propose_and_copy(ctx, i, question, group, attempt=attempt,
                                              tried=tried.setdefault(original, [])))
            answer = ask(question, ctx.settings, strategy=ctx.strategy, index=ctx.index)
        except BaseException:
            for r in made:
                if r.created:
                    r.status = ctx.copies.release(r.copy, (i, attempt), keep=False)
            records.extend(made)
            raise
        retrieved = [s.path for s in answer.sources]
        cell = base_cell
        for r in made:
            cell = add_alias(cell, reference_path(ctx.db, r.original), reference_path(ctx.db, r.copy))
        groups, still = missed_groups(ctx.db, cell, retrieved)
        recall = (len(groups) - len(still)) / len(groups) if groups else None
        got = {_db_rel(ctx.db, p) for p in retrieved}
        success = recall is not None and recall >= 1.0
        for r in made:
            helped = success and r.copy in got  # a copy nobody retrieved did not help, even on success
            if r.created:
                r.status = ctx.copies.release(r.copy, (i, attempt), keep=helped)
            elif helped:
                r.status = "reused"
            else:
                r.status = "unused"
            if not helped:
                outcome = ("the agent still did not retrieve the page; it retrieved: "
                           + (", ".join(sorted(got)[:5]) or "nothing")) if not success else "not retrieved"
                tried.setdefault(r.original, []).append({"folder": r.folder, "outcome": outcome})
        records.extend(made)
        kept_cell = base_cell
        for r in made:
            if r.status in ("kept", "reused"):
                kept_cell = add_alias(kept_cell, reference_path(ctx.db, r.original), reference_path(ctx.db, r.copy))
        new_row = _final_row(ctx, row, answer, retrieved, kept_cell, attempt, reference_metrics)
        if success:
            break
        missed = still if still else missed
    return records, new_row, recall


def _final_row(ctx: _Ctx, row: dict, answer, retrieved: list[str], opt_cell: str, attempt: int,
               reference_metrics: Callable) -> dict:
    """The row as the final attempt left it: answer, retrieved files, reference metrics recomputed."""
    out = dict(row)
    out["RAG Answer"] = answer.answer
    out["Retrieved Files"] = join_multi(retrieved)
    out["Attempts"] = attempt
    universe = [reference_path(ctx.db, p) for p in ctx.index.pages()]
    if opt_cell.strip() and opt_cell != str(row.get(REF_COL) or ""):
        out[OPT_COL] = opt_cell
    _set_metrics(out, "Ref", reference_metrics(str(row.get(REF_COL) or ""), retrieved, universe))
    if str(out.get(OPT_COL) or "").strip():
        _set_metrics(out, "Opt Ref", reference_metrics(out[OPT_COL], retrieved, universe))
    try:
        from ragkit import batch as batch_mod

        refresh = getattr(batch_mod, "rescore_row", None)
    except ImportError:
        refresh = None
    if refresh is not None:  # the batch owns the checklist/judge columns and the answer's extra columns
        out = refresh(out, answer, ctx.settings)
    return out


def _set_metrics(row: dict, prefix: str, metrics: dict) -> None:
    for key in METRIC_KEYS:
        if key in metrics:
            v = metrics[key]
            row[f"{prefix} {key}"] = "" if v is None else v


def update_input_csv(input_csv: Path, rows: list[dict], confirmed: list[CopyRecord], db: Path
                     ) -> tuple[Path | None, Path | None]:
    """Add/extend `Optimized Reference Document` = `original|copy` in the input CSV, atomically, after
    copying the previous file to `<name>.bak-YYYYMMDD_HHMMSS`. Returns (csv path, backup) or (None, None)
    when nothing changed."""
    df = read_csv(input_csv, required=("Question",))
    if OPT_COL not in df.columns:
        pos = list(df.columns).index(REF_COL) + 1 if REF_COL in df.columns else len(df.columns)
        df.insert(pos, OPT_COL, "")
    changed = False
    used: set[int] = set()
    for r in confirmed:
        question = str(rows[r.row].get("Question") or "")
        pos = _locate(df, r.row, question, used)
        if pos is None:
            raise RagError(f"{input_csv}: no row with the question {question[:60]!r}; "
                           f"`{OPT_COL}` not updated for it")
        cur = str(df.at[pos, OPT_COL] or "").strip() or str(df.at[pos, REF_COL] if REF_COL in df.columns else "")
        new = add_alias(cur, reference_path(db, r.original), reference_path(db, r.copy))
        if new != df.at[pos, OPT_COL]:
            df.at[pos, OPT_COL] = new
            changed = True
    if not changed:
        return None, None
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    backup = input_csv.with_name(f"{input_csv.name}.bak-{stamp}")
    n = 2
    while backup.exists():
        backup = input_csv.with_name(f"{input_csv.name}.bak-{stamp}_{n}")
        n += 1
    shutil.copy2(input_csv, backup)
    write_csv(df, input_csv, overwrite=True)
    return input_csv, backup


def _locate(df, index: int, question: str, used: set[int]) -> int | None:
    """The input row a result row came from: same position and question, else the question's first match."""
    if index < len(df) and str(df.at[index, "Question"]) == question:
        return index
    for pos, q in enumerate(df["Question"]):
        if str(q) == question:
            return pos
    return None
