"""Rewriting a question CSV's references to pages a re-ingest moved (`rag refs update`).

A re-ingest can put a document's pages in other section folders (a newer converter's sections: `pages_001-010/
page_003.md` -> `第1章_総則/page_003.md`; a slide added to a deck: `pages_001-005/page_003.md` ->
`pages_001-006/page_004.md`); `rag batch` and `rag eval` then stop on the CSV's old paths. update_references
rewrites every path of `Reference Document`, `Optimized Reference Document` and `Retrieved Files` that names no
page but whose page's text is on exactly one page of its document now (references.page_now, the lookup behind
batch's hint: the ingest manifest records what the pages it replaced held), in the path's own form. A path that
cannot be followed so (its text changed or is on several pages, no record says what it held, the page or its
document is gone) is listed, with the pages to check by hand, and left as it is. The file keeps its bytes apart from the
paths rewritten (csvedit): written to a new file (`output`), or in place after a `<name>.bak-*` backup.

    update_references(csv, db, *, output=None, in_place=False, dry_run=False, encoding=None) -> RefsUpdate
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core.csvedit import edit_notes, set_columns
from ragkit.core.csvio import read_csv
from ragkit.core.errors import RagError, UsageError
from ragkit.core.pagehistory import KEEP, PageHistory, Whereabouts
from ragkit.core.paths import normalize_ref, page_keys
from ragkit.core.references import OPT_COL, REF_COL, page_exists, page_now
from ragkit.core.text import one_line

RETRIEVED = "Retrieved Files"  # a results CSV's pages (rag eval re-scores them against the references)
COLUMNS = (REF_COL, OPT_COL, RETRIEVED)
_SEPARATORS = re.compile(r"([\r\n;|]+)")  # between required pages (newline, `;`) and between aliases (`|`)


@dataclass
class RefChange:
    row: int  # as batch's errors number rows: the header is row 1
    column: str
    old: str
    new: str


@dataclass
class RefMissing:
    row: int
    column: str
    ref: str
    candidates: list[str] = field(default_factory=list)  # the pages to check by hand
    document: str = ""  # its document's folder (db-relative) when that folder is gone too
    reason: str = ""  # Whereabouts.reason: "changed", "several", "unrecorded", or "" (gone)

    def message(self, csv: Path) -> str:
        """One line naming the file, row and field, and why the path was left as it is."""
        return f"{csv}: row {self.row}, column {self.column!r}: {one_line(self.ref, 120)}: {self.why()}"

    def why(self) -> str:
        return why_unresolved(Whereabouts(reason=self.reason, candidates=self.candidates), self.document)


def why_unresolved(found: Whereabouts, document: str = "") -> str:
    """Why a missing reference's page cannot be told (`found` from references.page_now), and what to do."""
    if document:
        return f"its document {document} is no longer in the database: left unchanged"
    pages = ", ".join(found.candidates)
    if found.reason == "changed":
        return ("its document was re-ingested and the text of that page is on none of its pages now (the page was "
                "edited or removed): left unchanged, check it by hand")
    if found.reason == "several":
        return (f"its document was re-ingested and the text of that page is on {len(found.candidates)} of its pages "
                f"now ({pages}): left unchanged, write the right one by hand")
    if found.reason == "unrecorded":
        return (f"its document's pages moved, and no record says what that page held (moved by hand, by an older "
                f"ragkit or more than {KEEP} re-ingests ago): left unchanged, check by hand whether it is now "
                f"{' or '.join(found.candidates)} (the same page number)")
    return "not in the database, and no other page of its document holds it: left unchanged"


@dataclass
class RefsUpdate:
    """What update_references found and did."""

    csv: Path
    db: Path
    rows: int = 0  # data rows read
    checked: int = 0  # paths checked (each alias of each cell)
    changes: list[RefChange] = field(default_factory=list)
    missing: list[RefMissing] = field(default_factory=list)
    written: Path | None = None  # the CSV written (output, or csv itself); None: nothing written
    backup: Path | None = None  # in place: the previous file
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def rows_changed(self) -> int:
        return len({c.row for c in self.changes})

    @property
    def to_check(self) -> int:
        """Paths left as they are whose page may be in the database still (their lines say where to look)."""
        return sum(1 for m in self.missing if m.reason and not m.document)

    def errors(self) -> list[str]:
        return [m.message(self.csv) for m in self.missing]


def update_references(csv: Path, db: Path, *, output: Path | None = None, in_place: bool = False,
                      dry_run: bool = False, encoding: str | None = None) -> RefsUpdate:
    """Rewrite the moved references of `csv` (see the module docstring): exactly one of `output` (a new file; an
    existing one is refused; written even when no path changed, so a script can go on with it), `in_place`, or
    `dry_run` (the report says what would change; nothing is written)."""
    csv, db = Path(csv), Path(db)
    asked = [name for name, on in (("output=", output is not None), ("in_place=True", in_place),
                                   ("dry_run=True", dry_run)) if on]
    if len(asked) != 1:
        raise UsageError("say what to do with the updated paths: one of output= (a new CSV), in_place=True (this "
                         f"CSV, after a backup) or dry_run=True (nothing written); got {' and '.join(asked) or 'none'}",
                         flags={"output=": "-o FILE", "in_place=True": "--in-place", "dry_run=True": "--dry-run"})
    if output is not None and Path(output).exists():
        raise RagError(f"{output}: already exists; nothing was written (choose another file)")
    if not db.is_dir():
        raise RagError(f"{db}: no such database folder")
    df = read_csv(csv, encoding=encoding)
    out = RefsUpdate(csv=csv, db=db, rows=len(df), dry_run=dry_run)
    key = page_keys(db)
    cache: dict[str, Whereabouts | None] = {}  # a path -> None (a page), or where its page is now
    history = PageHistory(db)

    def lookup(ref: str) -> Whereabouts | None:
        if ref not in cache:
            cache[ref] = None if page_exists(db, ref, key) else page_now(db, ref, key, history)
        return cache[ref]

    edits: dict[str, dict[int, str]] = {}
    for column in (c for c in COLUMNS if c in df.columns):
        for pos, cell in enumerate(df[column]):
            text = str(cell or "")
            new = _rewrite(text, lambda ref, pos=pos, column=column: _one(ref, pos, column, lookup, out))
            if new != text:
                edits.setdefault(column, {})[pos] = new
    if out.dry_run:  # says what the real run would, the file's change of encoding too
        out.notes = edit_notes(csv, edits, encoding=encoding) if edits else []
        return out
    edit = set_columns(csv, edits, encoding=encoding, output=output) if edits else None
    if edit is None and output is not None:  # nothing moved: the new file is the old one
        with open(output, "xb") as f:
            f.write(csv.read_bytes())
        out.written = Path(output)
    elif edit is not None:
        out.written, out.backup, out.notes = edit.path, edit.backup, edit.notes
    return out


def _one(ref: str, pos: int, column: str, lookup: Callable[[str], Whereabouts | None], out: RefsUpdate
         ) -> str | None:
    """The path `ref` should become (None: as it is), recording the change or why there is none."""
    out.checked += 1
    now = lookup(ref)
    if now is None:
        return None
    if now.page:
        new = _like(ref, now.page)
        out.changes.append(RefChange(pos + 2, column, ref, new))
        return new
    out.missing.append(RefMissing(pos + 2, column, ref, now.candidates, _gone_document(out.db, ref), now.reason))
    return None


def _gone_document(db: Path, ref: str) -> str:
    """The document folder of a database page path (DB/<category>/<document>/<section>/page) when it is gone."""
    parts = page_keys(db)(ref).split("/")
    if parts[0] == "" or len(parts) < 4:
        return ""
    doc = "/".join(parts[:-2])
    return "" if (db / doc).is_dir() else doc


def _rewrite(cell: str, replace: Callable[[str], str | None]) -> str:
    """The cell with each path replaced as `replace` says, its separators and spacing kept."""
    pieces = _SEPARATORS.split(cell)
    for i in range(0, len(pieces), 2):
        ref = pieces[i].strip()
        new = replace(ref) if ref else None
        if new is not None:
            pieces[i] = pieces[i].replace(ref, new, 1)
    return "".join(pieces)


def _like(written: str, now: str) -> str:
    """`now` (normalize_ref's form) with what `written` had beyond it: a leading `./`, backslashes."""
    if normalize_ref(written) == now:
        return written
    if written.startswith("./"):
        now = "./" + now
    if "\\" in written and "/" not in written:
        now = now.replace("/", "\\")
    return now
