"""Search over the page tree: an index under DB/.ragkit/ derived from the page files, one module per concern
(analysis, query, postings, vectors, ranking, snippets, persistence, index). docs/search.md says how it ranks.

    open_index(db) -> Index            # one shared, thread-safe instance per database per process
    Index.search(query, k=10, path=None) -> list[SearchHit];  Index.refresh();  Index.pages(prefix=None)
    Index.add_page(rel) / Index.remove_page(rel)               # immediate (the optimizer's copies)
    search_db(db, query, *, k=10, path=None);  hits_json(hits, db);  embed_db(db)
    ingest_into(sources, *, db, index=None, **ingest_sources' keywords) -> (IngestReport, SyncReport | None)
        # `rag ingest`: the page files, then the index (embedded, or OpenSearch) in step with them"""

from ragkit.search.backend import embed_db, hits_json, ingest_into, open_index, search_db  # noqa: E402
from ragkit.search.index import Index  # noqa: E402
from ragkit.search.indexconfig import configure_index, index_config  # noqa: E402
from ragkit.search.query import LAST_PAGE, label_refs, page_refs  # noqa: E402
from ragkit.search.snippets import display_text, make_snippet  # noqa: E402
from ragkit.search.vectors import get_embedder  # noqa: E402

__all__ = ["LAST_PAGE", "Index", "display_text", "embed_db", "get_embedder", "label_refs", "make_snippet",
           "configure_index", "hits_json", "index_config", "ingest_into", "open_index", "page_refs", "search_db"]
