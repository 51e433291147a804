"""Build small page trees for tests: {db-relative path: (document, section, page, body)} -> page files."""

from __future__ import annotations

from pathlib import Path

from ragkit.core.pagefile import PageMeta, render_page


def write_pages(db: Path, pages: dict[str, tuple[str, str, int, str]], *,
                source: str = "docs/{document}.pdf") -> Path:
    """Write each page under `db` (the database folder) with its front matter; `source` may name
    {document}. Returns `db`."""
    for rel, (document, section, page, body) in pages.items():
        path = db / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = PageMeta(source=source.format(document=document), document=document, section=section, page=page)
        path.write_text(render_page(meta, body), encoding="utf-8")
    return db
