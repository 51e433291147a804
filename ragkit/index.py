"""Kept for older imports (`from ragkit.index import open_index`): search lives in the package `ragkit.search`
(see its docstring for the interface and how it works)."""

from ragkit.search import (
    LAST_PAGE,
    Index,
    display_text,
    embed_db,
    get_embedder,
    label_refs,
    make_snippet,
    open_index,
    page_refs,
    print_hits,
    search_db,
)
from ragkit.search.analysis import caption_label

__all__ = ["LAST_PAGE", "Index", "caption_label", "display_text", "embed_db", "get_embedder", "label_refs",
           "make_snippet", "open_index", "page_refs", "print_hits", "search_db"]
