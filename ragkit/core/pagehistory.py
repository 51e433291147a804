"""What a document's pages held before a re-ingest replaced them, so that a reference to a page that is gone is
followed to the page that holds its text now (`rag batch`'s hint, `rag refs update`), never guessed from its number.

A re-converted document's manifest entry (DB/.ragkit/ingest-manifest.json, ingest/manifest.py) keeps `replaced`:
its last KEEP re-conversions, newest first, each {"pages": {old page path: body_hash}, "same_source": bool}, for
the paths the re-conversion removed (a path it wrote again is not missing, and never looked up). `same_source`:
the source file was unchanged (a newer converter, `--force`), so a PDF's page or a PPTX's slide N is still N.

where(ref) answers, for a database-relative page path that names no page:
- the one current page of its document whose text (the body, front matter aside: section and page number are
  what moved) is the old page's, or, when the text changed but the source file did not, a PDF page's or a
  slide's own number (the same page of the same file, converted anew);
- otherwise a reason to check it by hand: "changed" (its text is on no page now), "several" (on several),
  "unrecorded" (no record of what it held: moved before ragkit kept one, by hand, or more than KEEP
  re-conversions ago; the pages of its number elsewhere in its document are offered as candidates).

    body_hash(text) -> str;  replaced_history(old_entries, before, new_pages, same_source) -> list
    PageHistory(db).where(rel) -> Whereabouts
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core.pagefile import parse_page
from ragkit.core.paths import INGEST_MANIFEST

KEEP = 5  # re-conversions remembered per document: bounded (a page path is ~60 bytes), enough for a CSV a few
# edits behind its documents
_PAGE_FILE = re.compile(r"page_(\d+)\.md")
_DIGITS = re.compile(r"\d+")
_BY_NUMBER = (".pdf", ".pptx")  # sources whose page N is a thing of the file (a PDF page, a slide), not of the text


def body_hash(text: str | bytes) -> str:
    """What a page holds, as 16 hex digits of a sha256: its body (trailing spaces and blank edges aside) and its
    running header and footer lines with their numbers as `#` (a folio or "Page 3" moves with the page), not the
    rest of its front matter (section and page number are what changes when pages move)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    meta, body = parse_page(text)
    norm = "\n".join(line.rstrip() for line in body.strip().splitlines())
    return hashlib.sha256(f"{_DIGITS.sub('#', meta.running)}\n{norm}".encode()).hexdigest()[:16]


def replaced_history(old_entries: list[dict], before: dict[str, bytes], new_pages: list[str],
                     same_source: bool) -> list[dict]:
    """The `replaced` list of a re-converted document's new manifest entry: the pages of `before` (old page path ->
    its bytes, read before they were overwritten) that `new_pages` no longer has, over the history of the entries
    it replaces (`old_entries`), newest first, at most KEEP; paths that are pages again are dropped."""
    current = set(new_pages)
    gen = {rel: body_hash(data) for rel, data in sorted(before.items()) if rel not in current}
    out = [{"pages": gen, "same_source": bool(same_source)}] if gen else []
    for entry in old_entries:
        for old in entry.get("replaced") or []:
            pages = old.get("pages") if isinstance(old, dict) else None
            if not isinstance(pages, dict):
                continue
            kept = {p: h for p, h in pages.items() if p not in current and isinstance(h, str)}
            if kept:
                out.append({"pages": kept, "same_source": bool(old.get("same_source"))})
    return out[:KEEP]


@dataclass
class Whereabouts:
    """Where the page a missing reference named is now (database-relative paths)."""

    page: str = ""  # the page that holds its text now; "" when it cannot be told
    reason: str = ""  # when page is "": "changed", "several", "unrecorded", or "" (no page of its number left)
    candidates: list[str] = field(default_factory=list)  # the pages to check by hand


class PageHistory:
    """The manifest's records of a database, read once, for many lookups."""

    def __init__(self, db: Path) -> None:
        self.db = Path(db)
        try:
            data = json.loads((self.db / ".ragkit" / INGEST_MANIFEST).read_text(encoding="utf-8"))
            sources = data.get("sources") if isinstance(data, dict) else None
        except (OSError, ValueError):
            sources = None
        self.entries: dict[str, tuple[str, dict]] = {}  # document folder (casefolded) -> (source key, entry)
        for key, entry in (sources or {}).items():
            if isinstance(entry, dict) and isinstance(entry.get("folder"), str):
                self.entries[entry["folder"].casefold()] = (str(key), entry)
        self._hashes: dict[str, dict[str, str]] = {}

    def _current(self, folder: str, entry: dict) -> dict[str, str]:
        """{page: body_hash} of a document's pages now."""
        if folder not in self._hashes:
            out: dict[str, str] = {}
            for rel in entry.get("pages") or []:
                try:
                    out[rel] = body_hash((self.db / rel).read_bytes())
                except (OSError, TypeError):
                    continue
            self._hashes[folder] = out
        return self._hashes[folder]

    def where(self, rel: str) -> Whereabouts:
        """Where the page `rel` (database-relative, DB/<category>/<document>/<section>/page_NNN.md) is now."""
        parts = rel.split("/")
        m = _PAGE_FILE.fullmatch(parts[-1]) if len(parts) >= 3 else None
        if m is None:
            return Whereabouts()
        folder = "/".join(parts[:-2])
        key, entry = self.entries.get(folder.casefold(), ("", {}))
        for gen in entry.get("replaced") or []:
            old = (gen.get("pages") or {}).get(rel) if isinstance(gen, dict) else None
            if not isinstance(old, str):
                continue
            current = self._current(folder, entry)
            same = sorted(p for p, h in current.items() if h == old)
            if len(same) == 1:
                return Whereabouts(page=same[0])
            numbered = [p for p in current if _number(p) == int(m.group(1))]
            if len(same) > 1:
                # the same text on several pages (a blank slide, a repeated notice): its own number if one is
                return (Whereabouts(page=numbered[0]) if len(numbered) == 1 and numbered[0] in same
                        else Whereabouts(reason="several", candidates=same))
            if gen.get("same_source") and key.lower().endswith(_BY_NUMBER) and len(numbered) == 1:
                return Whereabouts(page=numbered[0])  # the same page of the same file, converted anew
            return Whereabouts(reason="changed")
        return Whereabouts(reason="unrecorded" if (found := self._by_number(folder, parts[-1])) else "",
                           candidates=found)

    def _by_number(self, folder: str, name: str) -> list[str]:
        """The page files of this number in the document's section folders (without a record: only a guess)."""
        root = self.db.resolve()
        doc = root.joinpath(*folder.split("/"))
        try:
            found = sorted(p for p in doc.glob(f"*/{name}") if p.is_file()) if doc.is_dir() else []
        except OSError:
            return []
        return [p.relative_to(root).as_posix() for p in found]


def _number(rel: str) -> int | None:
    m = _PAGE_FILE.fullmatch(rel.rpartition("/")[2])
    return int(m.group(1)) if m else None
