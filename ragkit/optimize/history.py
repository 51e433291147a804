"""What each optimization run left in the database, and undoing it: `rag optimize undo [--list]`.

A run that keeps copies writes DB/.ragkit/optimize-runs/<YYYYMMDD_HHMMSS>-<pid>.json: its mode (optimize |
enable-rl), the input CSV and its backup (with the SHA-256 of both as the run left them), and per copy its path,
original and sha256. Undo removes the copies that are still as the run wrote them, or as ingest refreshed them
from their page (an edited one is left and named), the folders left empty, and their index entries. The input
CSV gets its backup's bytes back when it is still as the run wrote it (and every copy went); else only the
removed copies' aliases leave its `Optimized Reference Document` (csvedit: the file keeps its encoding and
columns; a backup first), and the undo says why.

    record_run(db, report, mode, input_csv) -> Path | None;  list_runs(db) -> list[dict]
    undo_run(db, run=None, index=None) -> UndoReport"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ragkit.core.csvedit import file_sha256, restore, set_column
from ragkit.core.csvio import read_csv
from ragkit.core.errors import PathEscapeError, RagError
from ragkit.core.paths import (
    atomic_write_text,
    normalize_ref,
    page_keys,
    remove_empty_parents,
    resolve_in_db,
)
from ragkit.core.references import OPT_COL, REF_COL, reference_groups
from ragkit.optimize.journal import _index_remove

RUNS_DIR = "optimize-runs"


def runs_dir(db: Path) -> Path:
    return Path(db).resolve() / ".ragkit" / RUNS_DIR


def record_run(db: Path, report: Any, mode: str, input_csv: Path | None) -> Path | None:
    """Write the record of the copies `report` (an OptimizeReport) kept; None when it kept none."""
    db = Path(db)
    copies = []
    for r in report.copies:
        if r.outcome != "kept" or not r.created:
            continue  # "reused": an earlier run's copy, which that run's record undoes
        try:
            data = resolve_in_db(db, r.copy).read_bytes()
        except (OSError, PathEscapeError):
            continue
        copies.append({"path": r.copy, "original": r.original, "sha256": hashlib.sha256(data).hexdigest(),
                       "question": r.question})
    if not copies:
        return None
    folder = runs_dir(db)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{datetime.now().strftime('%Y%m%d_%H%M%S')}-{os.getpid()}.json"
    atomic_write_text(path, json.dumps({
        "run": path.stem, "date": datetime.now().isoformat(timespec="seconds"), "mode": mode,
        "input_csv": str(Path(input_csv).resolve()) if input_csv else None,
        "backup": str(Path(report.backup_path).resolve()) if report.backup_path else None, **_csv_state(report), "copies": copies,
    }, ensure_ascii=False, indent=1))
    return path


def _csv_state(report: Any) -> dict[str, Any]:
    """The input CSV and its backup as the run left them: undo restores the backup only over that very file."""
    edit = getattr(report, "csv_edit", None)
    if edit is None:
        return {}
    return {"csv_sha256": edit.sha256, "backup_sha256": edit.backup_sha256, "csv_encoding": edit.encoding}


def list_runs(db: Path) -> list[dict]:
    """Every recorded run, oldest first (unreadable records are skipped)."""
    out = []
    folder = runs_dir(db)
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and isinstance(rec.get("copies"), list):
            rec["run"] = p.stem
            out.append(rec)
    return out


@dataclass
class UndoReport:
    run: str
    removed: list[str] = field(default_factory=list)  # copies deleted (db-relative)
    edited: list[str] = field(default_factory=list)  # changed since the run: left in place
    missing: list[str] = field(default_factory=list)  # already gone
    csv_path: Path | None = None  # the input CSV whose aliases were removed, or that was restored
    backup_path: Path | None = None  # the CSV as it was before its aliases were removed
    restored_from: Path | None = None  # the run's backup whose bytes the CSV got back
    notes: list[str] = field(default_factory=list)


def undo_run(db: Path, run: str | None = None, index=None, *, progress: bool = False) -> UndoReport:
    """Remove what run `run` (default: the latest) kept; see the module docstring. The record goes too, unless
    an edited copy was left (then undo can be run again once it is dealt with)."""
    db = Path(db)
    runs = list_runs(db)
    if not runs:
        raise RagError(f"{db}: no optimization run to undo (none recorded in {runs_dir(db)})")
    rec = runs[-1] if run is None else next((r for r in runs if r["run"] == run), None)
    if rec is None:
        raise RagError(f"{db}: no optimization run {run!r}; recorded: {', '.join(r['run'] for r in runs)}")
    out = UndoReport(run=rec["run"])
    if index is None:
        from ragkit.search import open_index

        index = open_index(db, progress=progress)  # the CLI's: indexing lines on stderr
    dirs: set[Path] = set()
    for c in rec["copies"]:
        rel = str(c.get("path") or "")
        try:
            full = resolve_in_db(db, rel)
        except PathEscapeError:
            continue  # never anything a tampered record points outside the database
        if not full.is_file():
            out.missing.append(rel)
            continue
        data = full.read_bytes()
        if hashlib.sha256(data).hexdigest() != c.get("sha256") and data != _original_bytes(db, c):
            out.edited.append(rel)  # neither as the run wrote it nor as ingest refreshed it: the user's now
            continue
        _index_remove(index, rel)  # first, so that no reader is sent there any more
        full.unlink(missing_ok=True)
        out.removed.append(rel)
        dirs.add(full.parent)
    remove_empty_parents(db, dirs)
    gone = {normalize_ref(p) for p in out.removed + out.missing}
    csv = Path(rec["input_csv"]) if rec.get("input_csv") else None
    if gone and csv is not None:
        if csv.is_file():
            _undo_csv(csv, db, gone, rec, out)
        else:
            out.notes.append(f"{csv} is gone: its `Optimized Reference Document` could not be updated")
    if not out.edited:
        (runs_dir(db) / f"{rec['run']}.json").unlink(missing_ok=True)
    return out


def _original_bytes(db: Path, copy: dict) -> bytes | None:
    """The page a copy copies, as it is now (ingest rewrites a copy when its page is converted again)."""
    try:
        return resolve_in_db(db, str(copy.get("original") or "")).read_bytes()
    except (OSError, PathEscapeError):
        return None


def _undo_csv(csv: Path, db: Path, gone: set[str], rec: dict, out: UndoReport) -> None:
    """The input CSV as it was before the run (its backup's bytes) when nothing changed it since and every copy
    went; else the `gone` copies' aliases removed from it, saying why the file was not restored."""
    backup = Path(rec["backup"]) if rec.get("backup") else None
    why = ""
    if not rec.get("csv_sha256"):
        why = "the run's record has no checksum of it (an older ragkit)"
    elif out.edited:
        why = "copies that were edited since the run stay, and so do their aliases"
    elif file_sha256(csv) != rec["csv_sha256"]:
        why = "it was changed since the run"
    elif backup is None or not backup.is_file() or file_sha256(backup) != rec.get("backup_sha256"):
        why = f"its backup {backup} is gone or was changed"
    if not why and backup is not None:
        restore(csv, backup)
        out.csv_path, out.restored_from = csv, backup
        return
    out.csv_path, out.backup_path = _drop_aliases(csv, db, gone, rec.get("csv_encoding"))
    if out.csv_path is not None:
        out.notes.append(f"{csv} was not restored byte for byte ({why}): only the removed copies' aliases left "
                         f"its `{OPT_COL}` column")


def _drop_aliases(csv: Path, db: Path, gone: set[str], encoding: str | None = None
                  ) -> tuple[Path | None, Path | None]:
    """Remove the `gone` copies from the CSV's `Optimized Reference Document` (a cell left naming only the
    Reference Document is emptied), after a backup; (None, None) when no cell named one."""

    df = read_csv(csv, required=("Question",), encoding=encoding)
    if OPT_COL not in df.columns:
        return None, None
    changed: dict[int, str] = {}
    key = page_keys(db)
    for pos, cell in enumerate(df[OPT_COL]):
        groups = reference_groups(str(cell or ""))
        kept = [[a for a in g if key(a) not in gone] for g in groups]
        new = "\n".join("|".join(g) for g in kept if g)
        ref = str(df.at[pos, REF_COL] if REF_COL in df.columns else "")
        if new and _pages(new, key) == _pages(ref, key):
            new = ""
        if kept != groups:
            changed[pos] = new
    edit = set_column(csv, OPT_COL, changed, encoding=encoding) if changed else None
    return (None, None) if edit is None else (csv, edit.backup)


def _pages(cell: str, key: Callable[[str], str]) -> list[list[str]]:
    """A reference cell as the sorted pages of each group (paths.page_keys), for comparing two cells."""
    return [sorted(key(a) for a in g) for g in reference_groups(cell, key)]
