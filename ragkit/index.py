"""The search index over the page tree, a cache under DB/.ragkit/ derived from the page files.

INTERFACE (owned by the index work; others rely on it):

    open_index(db: Path) -> Index            # one shared, thread-safe instance per database per process
    Index.refresh() -> None                  # pick up added/changed/deleted page files incrementally
    Index.search(query: str, k: int = 10, path: str | None = None) -> list[SearchHit]
    Index.add_page(rel: str) / Index.remove_page(rel: str)   # immediate, used by the optimizer
    Index.pages(prefix: str | None = None) -> list[str]      # db-relative page paths (the universe)
    search_db(db, query, *, k=10, path=None) -> list[SearchHit]
    print_hits(hits, db, *, fmt="text"|"json", console) -> None
"""
