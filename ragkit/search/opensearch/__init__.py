"""The OpenSearch backend: a database's pages in an OpenSearch (or Elasticsearch-compatible) cluster, behind the
same interface as the embedded engine. docs/search.md ("Beyond one machine") says how pages map to documents
and how ragkit's ranking becomes parts of the query.

    open_opensearch(db, cfg) -> OpenSearchIndex   # search, pages, sync, add_page, remove_page, close
    carry_sessions(before, ix) -> int             # a moved database's /chat sessions, into its new index
"""

from ragkit.search.opensearch.index import OpenSearchIndex, SyncReport, carry_sessions, open_opensearch

__all__ = ["OpenSearchIndex", "SyncReport", "carry_sessions", "open_opensearch"]
