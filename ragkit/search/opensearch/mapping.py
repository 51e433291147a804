"""The indices ragkit keeps in a cluster, after the Agentic RAG API spec's mapping adapted to pages: one
document per page in <prefix>-pages, one per source document in <prefix>-documents, chat sessions in
<prefix>-sessions.

Text fields carry subfields analysed by kuromoji (ja), nori (ko), english and cjk (bigrams); the `rk` fields
hold ragkit's own analysis of the same text (stemmed words, CJK bigrams, caption labels), pre-tokenised and
split on whitespace, so the cluster scores exactly the terms the embedded engine scores.
"""

from __future__ import annotations

from ragkit.search.vectors import EMBED_DIM

MAPPING_VERSION = 3
# The pages index's _meta key naming the database that owns it (indexconfig.database_id); an index made before
# ragkit recorded one has none, and the first database to open it adopts it.
OWNER = "ragkit_database"

_TEXT = {
    "type": "text",
    "analyzer": "standard",
    "fields": {
        "ja": {"type": "text", "analyzer": "ja"},
        "ko": {"type": "text", "analyzer": "ko"},
        "en": {"type": "text", "analyzer": "english"},
        "cjk": {"type": "text", "analyzer": "cjk"},
    },
}
_TERMS = {"type": "text", "analyzer": "rk", "similarity": "BM25", "norms": True}

ANALYSIS = {
    "analyzer": {
        "ja": {"type": "custom", "tokenizer": "kuromoji_tokenizer",
               "filter": ["kuromoji_baseform", "kuromoji_part_of_speech", "cjk_width", "ja_stop",
                          "kuromoji_stemmer", "lowercase"]},
        "ko": {"type": "custom", "tokenizer": "nori_tokenizer", "filter": ["nori_part_of_speech", "lowercase"]},
        # ragkit's own terms, already analysed: split on whitespace, nothing else
        "rk": {"type": "custom", "tokenizer": "whitespace", "filter": []},
    },
}


# Added to mapping 3 without a new version (an older index gets them when opened, its pages their values at the
# next sync): each chunk's own vector, as the embedded engine keeps them (a page is as close to a query as its
# closest chunk; `content_vector`, their mean, is what the k-NN search finds pages by), and the embedding they
# come from (vectors.EMBED_VERSION).
CHUNK_FIELDS = {
    "chunk_vectors": {"type": "binary"},  # float16, chunk after chunk, base64 (documents.chunk_blob)
    "embed": {"type": "keyword"},
}


def pages_index(shards: int = 1, replicas: int = 0) -> dict:
    return {
        "settings": {
            "index": {"number_of_shards": shards, "number_of_replicas": replicas, "knn": True,
                      "similarity": {"default": {"type": "BM25", "k1": 1.2, "b": 0.75}}},
            "analysis": ANALYSIS,
        },
        "mappings": {
            "_meta": {"ragkit_mapping": MAPPING_VERSION},
            # ragkit's terms are derived from `content`: indexed, never sent back
            "_source": {"excludes": ["rk", "rk_pairs"]},
            "properties": {
                "file_id": {"type": "keyword"},  # the source document (the embedded engine's document group)
                "filename": {"type": "keyword"},
                "path": {"type": "keyword"},  # db-relative page path: the document id too
                "path_words": {**_TEXT},  # the folders as words
                "title": {**_TEXT},
                "document": {"type": "keyword"},  # category/document folders
                "page": {"type": "integer"},
                "printed_page": {"type": "keyword"},
                "content": {**_TEXT},
                "full_text": {**_TEXT},  # the page with its neighbours: the spec's context field
                "rk": {**_TERMS},  # ragkit's terms: folder path x3, headings and captions x2, body x1
                "rk_pairs": {"type": "text", "analyzer": "rk", "norms": False, "index_options": "docs"},
                "content_vector": {"type": "knn_vector", "dimension": EMBED_DIM,
                                   "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}},
                **CHUNK_FIELDS,
                "sha": {"type": "keyword", "index": False},
                "indexed_at": {"type": "date"},
            },
        },
    }


def documents_index(shards: int = 1, replicas: int = 0) -> dict:
    return {
        "settings": {
            "index": {"number_of_shards": shards, "number_of_replicas": replicas,
                      "similarity": {"default": {"type": "BM25", "k1": 1.2, "b": 0.75}}},
            "analysis": ANALYSIS,
        },
        "mappings": {
            "_meta": {"ragkit_mapping": MAPPING_VERSION},
            "_source": {"excludes": ["rk", "rk_card"]},
            "properties": {
                "file_id": {"type": "keyword"},
                "rk": {**_TERMS},  # every page's terms: the document as one long text
                "rk_card": {**_TERMS},  # its first pages and folder names: whose and which period's it is
                "report_year": {"type": "integer"},  # the year its front pages name most
                "pages": {"type": "integer"},
                "last_page": {"type": "integer"},
                "periods": {"type": "keyword"},  # the fiscal periods its first pages report
            },
        },
    }


def sessions_index(shards: int = 1, replicas: int = 0) -> dict:
    return {
        "settings": {"index": {"number_of_shards": shards, "number_of_replicas": replicas}},
        "mappings": {"dynamic": False, "properties": {"updated": {"type": "date"}, "data": {"type": "object",
                                                                                            "enabled": False}}},
    }
