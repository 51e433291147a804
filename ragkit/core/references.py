"""The Reference Document cell (DESIGN §1): required pages separated by a newline or `;`, each a group of
equivalent alias paths joined by `|` (a page and its optimized copies)."""

from __future__ import annotations

import re

from ragkit.core.csvio import split_multi
from ragkit.core.paths import normalize_ref

REF_COL = "Reference Document"  # the required pages of a question (DESIGN §4)
OPT_COL = "Optimized Reference Document"  # the same with the optimizer's copies as aliases


def reference_groups(cell: str) -> list[list[str]]:
    """Required pages of a `Reference Document` cell, each a list of equivalent alias paths.

    `a.md|a_copy.md\\nb.md` -> [["a.md", "a_copy.md"], ["b.md"]]. Pages are separated by a newline or `;`,
    aliases by `|`; every alias goes through paths.normalize_ref. Empty aliases are dropped, an alias repeated
    in its group is kept once, and a group listed twice (same alias set) counts once.
    """
    groups: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for part in split_multi(cell or ""):
        aliases: list[str] = []
        for raw in part.split("|"):
            alias = normalize_ref(raw)
            if alias and alias not in aliases:
                aliases.append(alias)
        key = frozenset(aliases)
        if aliases and key not in seen:
            seen.add(key)
            groups.append(aliases)
    return groups


_GROUP_SPLIT = re.compile(r"([\r\n;]+)")


def add_alias(cell: str, original_ref: str, copy_ref: str) -> str:
    """Append `copy_ref` to the alias group holding `original_ref`, keeping the cell's separators."""
    target = normalize_ref(original_ref)
    pieces = _GROUP_SPLIT.split(cell or "")
    found = False
    for i in range(0, len(pieces), 2):
        aliases = [a.strip() for a in pieces[i].split("|") if a.strip()]
        if any(normalize_ref(a) == target for a in aliases):
            found = True
            if all(normalize_ref(a) != normalize_ref(copy_ref) for a in aliases):
                pieces[i] = "|".join([*aliases, copy_ref])
    if not found:  # the original is not in the cell (should not happen): add a group
        return f"{cell}\n{original_ref}|{copy_ref}" if (cell or "").strip() else f"{original_ref}|{copy_ref}"
    return "".join(pieces)
