"""The search seam: `open_index(db)`, which every stage calls, hands back the embedded engine or an OpenSearch
index (search/indexconfig.py says which); both answer the same calls (search, pages, refresh, add_page,
remove_page, ensure_embeddings, close). Also the module API over either: search_db, embed_db, hits_json."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragkit.core.errors import DB_FLAG, RagError, UsageError
from ragkit.core.models import SearchHit
from ragkit.core.paths import db_folder, path_list, reference_path
from ragkit.search.indexconfig import IndexConfig, index_config, index_spec_from_env

if TYPE_CHECKING:  # not imported at run time: `import ragkit.search` stays free of the converters
    from ragkit.ingest.pages import IngestReport
    from ragkit.ingest.run import Sources
    from ragkit.search.opensearch.index import SyncReport

log = logging.getLogger(__name__)


def open_index(db: Path, *, refresh: bool = True, progress: bool = False) -> Any:
    """The shared index of `db` in this process: the embedded engine, or the OpenSearch index its configuration
    names. Both answer the same calls. `progress`: its indexing and embedding lines on stderr, now and on later
    searches (the CLI turns it on; once any open of the database in the process asked for them, they are shown)."""
    root = Path(db)
    if not root.is_dir():
        raise RagError(f"database folder not found: {db} (run `rag ingest` first or pass db=)", flags=DB_FLAG)
    cfg = index_config(root)
    if cfg.backend == "opensearch":
        from ragkit.search.opensearch import open_opensearch

        return open_opensearch(root, cfg, refresh=refresh, progress=progress)
    from ragkit.search.index import open_embedded

    return open_embedded(root, refresh=refresh, progress=progress)


def index_label(db: Path) -> str:
    """Which backend answers for `db`, as outputs and run records name it: "embedded", or "opensearch
    http://HOST:PORT/PREFIX (analysis NAME)" (RAG_OPENSEARCH_ANALYSIS, which ranks differently). Never credentials:
    they come from the environment, and an address holding some is refused (index_config) or hidden (redact)."""
    from ragkit.search.indexconfig import redact

    cfg = index_config(Path(db))
    if cfg.backend != "opensearch":
        return "embedded"
    from ragkit.search.opensearch.ranking import analysis

    return f"opensearch {redact(cfg.url)}/{cfg.prefix} (analysis {analysis()})"


def require_database(db: Path) -> None:
    """A folder that is a database: it exists, is a folder, and holds an index or a page file. Checked by the
    commands that read a database, before they open its index: opening one writes DB/.ragkit, which must not land
    in a folder of PDFs given to --db by mistake (a search there found "no matching pages", exit 0)."""
    import os

    root = Path(db)
    if root.is_file():
        raise RagError(f"{db}: is a file, not a database folder (db= names the folder `rag ingest` wrote)",
                       flags=DB_FLAG)
    if not root.is_dir():
        raise RagError(f"database folder not found: {db} (run `rag ingest` first or pass db=)", flags=DB_FLAG)
    if (root / ".ragkit").is_dir():
        return
    for _here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(f.startswith("page_") and f.endswith(".md") for f in files):
            return
    raise RagError(f"{db}: not a ragkit database (no page files); run `rag ingest SOURCE --db {db}` first")


def search_db(db: Path, query: str, *, k: int = 10, path: str | None = None, strict: bool = False,
              embed_upto: int = 0, progress: bool = False) -> list[SearchHit]:
    """Open (and refresh) the index of `db` and search it. A `path` that names nothing in the database is an
    error (a mistyped folder would otherwise look like a search that found nothing). `strict`: an index that holds
    no page at all is an error (no_pages_error), as for `rag ask`, not an empty result: a server whose cluster
    restarted empty must not answer every search with nothing and a 200, nor `rag search` with exit 0.
    `embed_upto`: when at most that many pages in scope lack a vector, embed them first (a progress bar), so a
    one-off search right after `rag ingest` ranks by meaning too instead of by keywords alone. `progress`: as
    open_index's."""
    require_database(db)
    idx = open_index(db, progress=progress)
    folder = db_folder(Path(db).resolve(), path) if path else ""
    if path and not (Path(db) / folder).exists():
        raise RagError(f"path={path!r}: no such folder in {db} (a search without path= searches everything)",
                       flags={f"path={path!r}": f"--path {path!r}",
                              "a search without path=": "`rag search` without --path"})
    lacking = getattr(idx, "lacking_in_scope", None)  # the embedded engine; a cluster embeds when it syncs
    if embed_upto and lacking is not None and 0 < lacking(folder) <= embed_upto:
        idx.ensure_embeddings(progress=progress)
    hits = idx.search(query, k=k, path=path)
    if strict and not hits and not idx.pages():  # only after a search that found nothing: hits prove pages
        raise no_pages_error(db)
    return hits


def check_index(ix: Any, *, timeout: float, pages: bool = True) -> str:
    """The state of the index behind a server ("embedded", "opensearch: green" or "yellow") after one quick look at
    its cluster (one request of at most `timeout` seconds, not retried, and a count). Raises ClusterError when the
    cluster cannot be reached, does not answer in time or its pages index is red (searches and writes fail), and,
    with `pages`, no_pages_error when the index holds none of the database's page files (a node that restarted
    empty: every search finds nothing). The embedded engine is built from the files: always fine."""
    if getattr(ix, "backend", "") != "opensearch":
        return "embedded"
    from ragkit.core.paths import iter_pages
    from ragkit.search.opensearch.client import ClusterError

    got = ix.client.request("GET", f"/_cluster/health/{ix.pages_name}", params={"timeout": "1s"}, ok=(408,),
                            timeout=timeout, retries=1)
    status = got.get("status")
    if status == 408 or status == "red":  # 408: no such index within the second asked (deleted, data lost)
        raise ClusterError(f"OpenSearch at {ix.cfg.url}: the index {ix.pages_name} is missing or has no active "
                           "primary shard (red); searches fail")
    if pages and not ix.client.request("GET", f"/{ix.pages_name}/_count", timeout=timeout, retries=1)["count"] \
            and iter_pages(ix.db):
        raise no_pages_error(ix.db)
    return f"opensearch: {status}"


def no_pages_error(db: Path) -> RagError:
    """What to say when the index holds no page: ingest something, or, when page files are there (a cluster that
    lost its data or never got them), bring the index in step with them."""
    from ragkit.core.paths import iter_pages

    on_disk = len(iter_pages(Path(db)))
    if on_disk:
        return RagError(f"{db}: the index holds no pages, but the database has {on_disk} page file(s); run "
                        f"`rag index sync --db {db}` first")
    return RagError(f"{db}: the database has no pages; run `rag ingest SOURCE --db {db}` first")


def embed_db(db: Path, *, progress: bool = True) -> tuple[int, int]:
    """Give every page of `db` a vector now (`rag search --embed`), so that search can find pages by meaning
    alone in a database too large to embed during a search. Returns (pages embedded now, pages in all)."""
    require_database(db)
    idx = open_index(db, progress=progress)
    if idx.embedder_name() is None:
        why = "RAG_EMBED is off" if not idx.semantic else "the embedding package is not installed " \
              "(pip install 'ragkit[embed]')"
        raise RagError(f"cannot embed the pages of {db}: {why}")
    return idx.ensure_embeddings(progress=progress), len(idx.pages())


def hits_json(hits: list[SearchHit], db: Path) -> list[dict]:
    """What `rag search --format json` and `/search` give: {path, page, title, score, snippet} per hit, with
    Reference Document paths (and printed_page when the number printed on the page differs from `page`), how it
    was ranked and by which backend (`index`: index_label)."""
    label = index_label(Path(db)) if hits else ""
    return [{"path": reference_path(Path(db), h.path), "page": h.page, "title": h.title, "score": h.score,
             "snippet": h.snippet, **({"printed_page": h.printed_page} if h.printed_page else {}),
             "ranking": h.ranking, "unembedded": h.unembedded, "index": label} for h in hits]


def ranking_note(hits: list[SearchHit]) -> str:
    """One line on how these hits were ranked, and why not by meaning when they were not."""
    from ragkit.search.vectors import meaning_status

    if not hits:
        return ""
    hows = {h.ranking for h in hits}
    lacking = max(h.unembedded for h in hits)
    if hows == {"meaning"}:
        return ("found by meaning alone, closer to the query than any page holding its words (scores: 1 + 0.15 x "
                "cosine)")
    if "hybrid" in hows or "meaning" in hows:
        note = "ranked by keywords and meaning (hybrid; scores: keyword score scaled to the best, + 0.15 x cosine)"
        if lacking:
            note += f"; {lacking} page(s) in scope still lack a vector (`rag search --embed` gives them one)"
        return note
    if lacking:
        return (f"ranked by keywords only (BM25 scores): {lacking} page(s) in scope still lack a vector, so "
                "meaning was left out; `rag search --embed` gives them one")
    why = meaning_status()
    return "ranked by keywords only (BM25 scores)" + (f": {why}" if why else "")


def ingest_into(sources: Sources, *, db: Path | str, index: str | None = None,
                **kw: Any) -> tuple[IngestReport, SyncReport | None]:
    """`rag ingest`, and the call for Python: the page files (ragkit.ingest: `sources` one path or a list, the
    keywords ingest_sources takes), then the index in step with them. `index` (or RAG_INDEX)
    chooses the engine and stores it in the database, once the cluster has answered and taken this database as its
    index's owner (a failed ingest leaves the engine the database had); moving to another index says so in one
    line. With a cluster, the pages written and removed are synced in bulk (all of them when the database has just
    moved to this index). Returns (IngestReport, SyncReport or None for the embedded engine, whose shared instance
    in this process re-scans the files at its next open_index: open_embedded)."""
    from ragkit.ingest.run import ingest_sources
    from ragkit.ingest.workers import refuse_in_worker_start

    refuse_in_worker_start()  # before the index is touched: a worker importing a script without a __main__ guard
    if Path(db).is_file():
        raise RagError(f"{db}: is a file, not a database folder (db= names the folder to write the pages to)",
                       flags=DB_FLAG)
    sources = path_list(sources)
    kw.setdefault("progress", False)  # quiet from Python; `rag ingest` turns it on
    ix, moved = _point_at(Path(db), index or index_spec_from_env(), progress=kw["progress"])
    report = ingest_sources(sources, db=Path(db), check_index=False, **kw)
    if ix is None:
        return report, None
    if moved or not ix.count():
        return report, ix.sync()
    written, removed = report.index_changes()
    return report, ix.sync(rels=written, removed=removed, progress=kw["progress"])


def _point_at(db: Path, spec: str | None, *, progress: bool) -> tuple[Any, bool]:
    """Give `db` the index `spec` names (None: the one it has), once the cluster has answered and taken `db` as its
    index's owner (a failure leaves the engine the database had); moving says so in one line, and carries `rag
    serve`'s /chat sessions from one cluster index to the other. Returns (the cluster index or None for the embedded
    engine, whether the database moved to another index)."""
    from ragkit.search.indexconfig import plan_index, store_index

    cfg = plan_index(db, spec) if spec else index_config(db)
    before = index_config(db)  # read after plan_index, which gives an earlier ragkit's database its id
    ix = None
    if cfg.backend == "opensearch":  # reachable, and not another database's index: before anything is stored
        from ragkit.search.indexconfig import check_not_a_copy
        from ragkit.search.opensearch import open_opensearch

        check_not_a_copy(db)  # a `cp -r` copy would share its original's index
        ix = open_opensearch(db, cfg, progress=progress)
    moved = not cfg.same_index(before)
    if cfg != before:
        store_index(db, cfg)
    if moved:
        sessions: int | str | None = None
        if ix is not None and before.backend == "opensearch":  # serve's /chat sessions go with the database
            from ragkit.search.opensearch import carry_sessions
            from ragkit.search.opensearch.client import ClusterError

            try:
                sessions = carry_sessions(before, ix)
            except ClusterError as e:
                sessions = str(e)
        note = moved_note(db, before, cfg, sessions)
        if note:
            log.warning("%s", note)
    return ix, moved


def moved_note(db: Path, before: IndexConfig, after: IndexConfig, sessions: int | str | None = None) -> str:
    """One line when a database that was indexed somewhere moves to another index: where it was, where it is now,
    what is left behind ("" for a database never indexed), and where `rag serve`'s /chat sessions are: `sessions`
    is how many were copied from one cluster index to the other (carry_sessions), or why they could not be."""
    if before.backend == "opensearch":
        p = before.prefix
        was = f"in OpenSearch {before.url}/{p}"
        left = (f"its indices are left in the cluster: delete them with curl -X DELETE "
                f"'{before.url}/{p}-pages,{p}-documents,{p}-sessions' (with your credentials)")
        if after.backend == "opensearch" and after.prefix == p:  # another address of the same cluster, maybe
            left = f"if {before.url} is another cluster than {after.url}, {left}"
    else:
        from ragkit.core.paths import iter_pages
        from ragkit.search.persistence import CACHE_DIR, CACHE_FILE

        cache = db / CACHE_DIR / CACHE_FILE
        if not cache.exists() and not iter_pages(db):
            return ""  # a new database: nothing moves
        was = "by the embedded engine"
        left = (f"its cache {CACHE_DIR}/{CACHE_FILE} is left in the database folder, unused (delete it to free the "
                "space)") if cache.exists() else ""
    now = "the embedded engine (built from the page files)" if after.backend == "embedded" else \
        f"OpenSearch {after.url}/{after.prefix}"
    chats = _sessions_note(db, before, after, sessions)
    return f"the database {db} was indexed {was}; now {now}" + "".join(f"; {x}" for x in (chats, left) if x)


def _sessions_note(db: Path, before: IndexConfig, after: IndexConfig, sessions: int | str | None) -> str:
    """Where `rag serve`'s /chat sessions of a moved database are: carried from one cluster index to the other, or
    left where they were (the embedded engine keeps them in DB/.ragkit/sessions.sqlite3, a cluster in
    <prefix>-sessions; between the two they are not carried)."""
    if before.backend == "opensearch":
        old = f"{before.url}/{before.prefix}-sessions"
        if after.backend == "opensearch":
            if isinstance(sessions, str):
                return f"its /chat sessions could not be copied ({sessions}): they stay in {old}"
            return f"its {sessions} /chat session(s) were copied to {after.prefix}-sessions" if sessions else ""
        return (f"its /chat sessions stay in {old}, not carried over (rag serve now keeps new ones in "
                f"{db}/.ragkit/sessions.sqlite3)")
    if after.backend == "opensearch" and (db / ".ragkit" / "sessions.sqlite3").exists():
        return (f"its /chat sessions stay in {db}/.ragkit/sessions.sqlite3, not carried over (rag serve now keeps "
                f"new ones in {after.prefix}-sessions)")
    return ""


def sync_index(db: Path, *, progress: bool = True, new_id: bool = False, index: str | None = None) -> Any:
    """`rag index sync`: make the index match the page files (add, update, delete); a second run changes nothing.
    The embedded engine rescans its files; a cluster gets the differences in bulk. `new_id`: the database first
    gets a new id and, with a cluster, its own new index there, filled from its page files (a copy of another
    database then stops sharing that one's index; the other's index is left as it was). `index` (`--index`, as
    ingest's): the database is first pointed at that index (a cluster that moved to another address: every command
    and running `rag serve` replica then uses it), as `rag ingest --index` does, without a source to ingest."""
    if new_id and index:
        raise UsageError("new_id=True and index=: give one (index= names the prefix itself; new_id=True makes one "
                         "on the cluster the database has)", flags={"new_id=True": "--new-id", "index=": "--index"})
    if index:
        require_database(db)
        _point_at(Path(db), index, progress=progress)
    if new_id:
        from ragkit.search.indexconfig import renew_id, store_index

        require_database(db)
        cfg = renew_id(Path(db))
        ix = None
        if cfg.backend == "opensearch":
            from ragkit.search.opensearch import open_opensearch

            ix = open_opensearch(Path(db), cfg, progress=progress)  # reachable: before the new id is stored
        before = index_config(Path(db))
        store_index(Path(db), cfg)
        log.warning("%s", f"the database {db} has a new id ({cfg.database_id}, was {before.database_id or 'none'})"
                    + (f"; now indexed in OpenSearch {cfg.url}/{cfg.prefix} (the index {before.prefix} is left "
                       "as it was, for the database that owns it)" if ix is not None else ""))
    ix = open_index(db, progress=progress)
    if getattr(ix, "backend", "embedded") == "opensearch":
        return ix.sync(progress=progress)
    ix.refresh(progress=progress)
    return None
