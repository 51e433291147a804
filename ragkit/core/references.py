"""The Reference Document cell (DESIGN §1): required pages separated by a newline or `;`, each a group of
equivalent alias paths joined by `|` (a page and its optimized copies); and where the page a reference names is now
when a re-ingest moved it (page_now, by its text: core/pagehistory.py; the lookup behind `rag batch`'s hint and
`rag refs update`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ragkit.core.csvio import split_multi
from ragkit.core.pagehistory import PageHistory, Whereabouts
from ragkit.core.paths import normalize_ref, page_keys

REF_COL = "Reference Document"  # the required pages of a question (DESIGN §4)
OPT_COL = "Optimized Reference Document"  # the same with the optimizer's copies as aliases


def reference_groups(cell: str, key: Callable[[str], str] = normalize_ref) -> list[list[str]]:
    """Required pages of a `Reference Document` cell, each a list of equivalent alias paths.

    `a.md|a_copy.md\\nb.md` -> [["a.md", "a_copy.md"], ["b.md"]]. Pages are separated by a newline or `;`,
    aliases by `|`; every alias is returned as written (through paths.normalize_ref). `key` names the page an
    alias is (paths.page_keys(db): one name for its db-relative, project-relative and absolute forms; without
    it, the written form): an alias naming a page its group already holds is kept once, and groups that share a
    page are one required page (`A|A2;A` and `A|A2\\nA2` are one page, not two). Empty aliases are dropped.
    """
    groups: list[list[str]] = []
    keys: list[set[str]] = []  # the pages each group names
    for part in split_multi(cell or ""):
        aliases = [a for a in (normalize_ref(raw) for raw in part.split("|")) if a]
        if not aliases:
            continue
        names = {key(a) for a in aliases}
        shared = [i for i, k in enumerate(keys) if k & names]
        # this group joins every earlier group it shares a page with, at the place of the first
        merged = [a for i in shared for a in groups[i]] + aliases
        at = shared[0] if shared else len(groups)
        for i in reversed(shared):
            del groups[i], keys[i]
        seen: set[str] = set()
        groups.insert(at, [a for a in merged if not (key(a) in seen or seen.add(key(a)))])
        keys.insert(at, seen)
    return groups


_GROUP_SPLIT = re.compile(r"([\r\n;]+)")


def add_alias(cell: str, original_ref: str, copy_ref: str | Callable[[str], str],
              key: Callable[[str], str] = normalize_ref) -> str:
    """Append `copy_ref` to the alias group holding `original_ref`, keeping the cell's separators. `key` names
    the page a path is (as in reference_groups): pass paths.page_keys(db) so that an original written in another
    form than `original_ref` (`database/...` against an absolute path) is still found, not added as a new group.
    `copy_ref` may be a function of the original as the cell writes it (the copy is then written in that form:
    paths.reference_like)."""
    def written(original: str) -> str:
        return copy_ref(original) if callable(copy_ref) else copy_ref

    target = key(original_ref)
    pieces = _GROUP_SPLIT.split(cell or "")
    found = False
    for i in range(0, len(pieces), 2):
        aliases = [a.strip() for a in pieces[i].split("|") if a.strip()]
        match = next((a for a in aliases if key(a) == target), None)
        if match is not None:
            found = True
            new = written(match)
            if all(key(a) != key(new) for a in aliases):
                pieces[i] = "|".join([*aliases, new])
    if not found:  # the original is not in the cell (should not happen): add a group
        pair = f"{original_ref}|{written(original_ref)}"
        return f"{cell}\n{pair}" if (cell or "").strip() else pair
    return "".join(pieces)


def page_exists(db: Path, ref: str, key: Callable[[str], str] | None = None) -> bool:
    """Whether `ref` (db-relative, `database/...` or absolute) names a page file inside the database `db`.
    `key`: paths.page_keys(db), when many references are checked."""
    root = Path(db).resolve()
    rel = (key or page_keys(Path(db)))(ref)
    full = (root / rel) if not rel.startswith("/") else Path(rel)
    try:
        return full.resolve().is_relative_to(root) and full.is_file()
    except OSError:
        return False


def page_now(db: Path, ref: str, key: Callable[[str], str] | None = None,
             history: PageHistory | None = None) -> Whereabouts:
    """Where the page a missing reference names is now (core/pagehistory.py: the page that holds its text, as
    the ingest manifest recorded it, or why that cannot be told), its paths written in the reference's own form
    (db-relative, `database/...` or absolute). Only for references that name no page (page_exists is False); a
    path outside the database or not a page file gives Whereabouts() (nothing found). `history`:
    PageHistory(db), when many references are looked up."""
    rel = (key or page_keys(Path(db)))(ref)
    if rel.startswith("/"):
        return Whereabouts()
    found = (history or PageHistory(Path(db))).where(rel)
    written = normalize_ref(ref)  # named as the CSV names its pages: the same prefix
    head = written[: len(written) - len(rel)] if written.endswith(rel) else ""
    return Whereabouts(page=head + found.page if found.page else "", reason=found.reason,
                       candidates=[head + p for p in found.candidates])
