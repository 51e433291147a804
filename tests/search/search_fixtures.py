"""Shared helpers of the search tests: a small mixed ja/ko/en page tree and ways to open it."""

from __future__ import annotations

from pathlib import Path

from ragkit.core.pagefile import PageMeta, render_page
from ragkit.search.index import Index


def write_page(db: Path, rel: str, body: str, *, source: str = "", page: int = 1, printed: str = "") -> Path:
    p = db / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    meta = PageMeta(source=source or f"src/{rel.split('/')[1]}.pdf", document="doc", section="s", page=page,
                    printed_page=printed)
    p.write_text(render_page(meta, body), encoding="utf-8")
    return p


def fresh(db: Path) -> Index:
    """A private instance (not the process-wide one), as another process would have."""
    idx = Index(db, progress=False)
    idx.refresh()
    return idx


def top(idx: Index, query: str, **kw) -> list[str]:
    return [h.path for h in idx.search(query, **kw)]


def write_empty_slide_deck(d: Path) -> str:
    """A slide deck whose third slide has no text (only the no-text marker), beside a policy page; returns that
    slide's path."""
    folder = "mixed/quarterly_review/pages_001-005"
    write_page(d, f"{folder}/page_001.md", "# Quarterly Review Q3 2024\nRevenue grew in every region.")
    write_page(d, f"{folder}/page_002.md", "# Outlook\nHiring slows; the new office opens in May.", page=2)
    write_page(d, f"{folder}/page_003.md", "<!-- ragkit: no text layer on this page -->", page=3)
    write_page(d, "policies/remote/pages_001-005/page_001.md", "# Remote work\nThe monitor allowance is 300 USD.")
    return f"{folder}/page_003.md"
