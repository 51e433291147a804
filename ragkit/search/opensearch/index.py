"""OpenSearchIndex: a database's pages in an OpenSearch cluster, with the embedded engine's methods, so that no
caller can tell the two apart. The page files stay the truth: `sync` makes the cluster match them (add, update,
delete, in bulk), and the writers (ingest, the optimizer, serve) sync what they changed."""

from __future__ import annotations

import logging
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ragkit.core.errors import RagError, UsageError
from ragkit.core.models import SearchHit
from ragkit.core.paths import db_folder, iter_pages
from ragkit.search.analysis import ANALYSIS_VERSION
from ragkit.search.indexconfig import PREFIX_MAX, IndexConfig, check_not_a_copy, database_id
from ragkit.search.opensearch import mapping
from ragkit.search.opensearch.client import Client, ClusterError
from ragkit.search.opensearch.documents import (
    PageDoc,
    PageTerms,
    chunk_blob,
    doc_id,
    document_doc,
    page_vector,
    read_page_doc,
    same_content,
)
from ragkit.search.opensearch.synced import Behind, Stat, behind, file_stat, record_synced
from ragkit.search.synonyms import Synonyms
from ragkit.search.vectors import EMBED_VERSION, get_embedder

log = logging.getLogger(__name__)
T = TypeVar("T")

BULK_PAGES = 200  # pages per bulk request
PAGES_TTL = 5.0  # seconds a listing of the cluster's pages is reused (our own writes invalidate it at once)
OPEN_TIMEOUT = 5.0  # seconds for the first request at open (the node's local cluster health: milliseconds when well)
MERGE_TIMEOUT = 900.0  # seconds for merging away the pages a re-analysis replaced (one index of 100k pages)
# A replaced page stays in BM25's statistics until merged away, and the cluster keeps the copies it replaced in
# the last ~30 s (soft deletes held for its recovery history): a re-analysing sync merges again, every
# MERGE_RETRY seconds for up to MERGE_WAIT, until the copies left are at most REPLACED_SHARE of the index.
MERGE_WAIT = 60.0
MERGE_RETRY = 5.0
REPLACED_SHARE = 0.01


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    reanalysed: int = 0  # of the updated: the same text, analysed by an earlier ragkit
    deleted: int = 0
    unchanged: int = 0
    documents: int = 0  # document-level index documents rewritten
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.deleted


class OpenSearchIndex:
    backend = "opensearch"

    def __init__(self, db: Path, cfg: IndexConfig, *, progress: bool = True) -> None:
        self.db = Path(db).resolve()
        self.cfg = cfg
        self.progress = progress
        self.client = Client(cfg.url, prefix=cfg.prefix)
        self.pages_name = f"{cfg.prefix}-pages"
        self.documents_name = f"{cfg.prefix}-documents"
        self.sessions_name = f"{cfg.prefix}-sessions"
        self._synonyms = Synonyms(self.db)
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._listing: dict[str, tuple[float, int, list[str]]] = {}
        self._behind: dict[str, tuple[float, int, Behind | None]] = {}
        self._gen = 0
        self.last_refresh = float("-inf")
        self._checked_analysis = False  # whether the first search looked for pages of an earlier analysis
        try:
            self._ensure_indices()
        except RagError:
            self.client.close()
            raise

    # ------------------------------------------------------------------------------------------ set-up
    def _ensure_indices(self) -> None:
        # the first request: the node's own view of the cluster (local, so no round trip to the cluster manager,
        # which an election may hold up), answered at once by a working node; a hung one is told in OPEN_TIMEOUT
        # seconds, not the TIMEOUT a search may need
        health = self.client.request("GET", "/_cluster/health", params={"local": "true"}, timeout=OPEN_TIMEOUT)
        nodes = int(health.get("number_of_data_nodes") or 1)
        replicas = 1 if nodes > 1 else 0
        pages = mapping.pages_index(replicas=replicas)
        if self.cfg.database_id:
            pages["mappings"]["_meta"][mapping.OWNER] = self.cfg.database_id
        for name, body in ((self.pages_name, pages),
                           (self.documents_name, mapping.documents_index(replicas=replicas)),
                           (self.sessions_name, mapping.sessions_index(replicas=replicas))):
            got = self.client.request("GET", f"/{name}/_mapping", ok=(404,))
            if got.get("status") == 404:
                made = self.client.request("PUT", f"/{name}", body, ok=(400,))
                if made.get("status") != 400:
                    continue
                got = self.client.request("GET", f"/{name}/_mapping")  # another process created it meanwhile
            mappings = next(iter(got.values()), {}).get("mappings") or {}
            meta = mappings.get("_meta") or {}
            if name != self.sessions_name and meta.get("ragkit_mapping") != mapping.MAPPING_VERSION:
                raise RagError(f"OpenSearch index {name} at {self.cfg.url} was not made by this version of ragkit "
                               f"(mapping {meta.get('ragkit_mapping')!r}, expected {mapping.MAPPING_VERSION}); "
                               "delete it or choose another prefix (rag ingest --index URL/PREFIX)")
            if name == self.pages_name:
                self._check_owner(meta)
            if name == self.pages_name and not set(mapping.CHUNK_FIELDS) <= set(mappings.get("properties") or {}):
                # made by an earlier ragkit: the fields are added, the pages get their values at the next sync
                self.client.request("PUT", f"/{name}/_mapping", {"properties": mapping.CHUNK_FIELDS})

    def _check_owner(self, meta: dict) -> None:
        """Refuse a pages index another database owns: a sync would delete every page of it that this database
        lacks, and the other's syncs this one's. The check rides on the mapping read at open (no round trip per
        search). An index an earlier ragkit made records no owner: this database adopts it (then reads the owner
        back, so that of two adopting at once only one goes on)."""
        owner = str(meta.get(mapping.OWNER) or "")
        mine = self.cfg.database_id
        if not owner and mine:
            self.client.request("PUT", f"/{self.pages_name}/_mapping", {"_meta": {**meta, mapping.OWNER: mine}})
            got = self.client.request("GET", f"/{self.pages_name}/_mapping")
            owner = str(((next(iter(got.values()), {}).get("mappings") or {}).get("_meta") or {}).get(mapping.OWNER)
                        or "")
        if owner and owner != mine:
            free = f"{self.cfg.prefix[:PREFIX_MAX - 7]}-{secrets.token_hex(3)}"
            raise UsageError(f"the OpenSearch index prefix {self.cfg.prefix!r} at {self.cfg.url} holds another "
                             f"database's pages (database {owner}; this one is {mine or 'without an id'}): choose "
                             f"another prefix for this database, e.g. index='opensearch+{self.cfg.url}/{free}'",
                             flags={f"index='opensearch+{self.cfg.url}/{free}'":
                                    f"--index opensearch+{self.cfg.url}/{free}"})

    @property
    def synced_key(self) -> str:
        """Which index the record of the syncs (synced.py) is of."""
        return f"{self.cfg.url}/{self.cfg.prefix}"

    @property
    def semantic(self) -> bool:
        return get_embedder() is not None

    def embedder_name(self) -> str | None:
        emb = get_embedder()
        return emb.name if emb is not None else None

    # ------------------------------------------------------------------------------------------- readers
    def pages(self, prefix: str | None = None) -> list[str]:
        """Db-relative paths of every page the cluster holds (under `prefix`), sorted."""
        key = db_folder(self.db, prefix) if prefix else ""
        return list(self._reused(self._listing, key, lambda: self._list_pages(key)))

    def _list_pages(self, key: str) -> list[str]:
        query: dict = {"match_all": {}}
        if key:
            query = {"bool": {"should": [{"term": {"path": key}}, {"prefix": {"path": key.rstrip("/") + "/"}}]}}
        out: list[str] = []
        after = None
        while True:
            body = {"size": 5000, "query": query, "sort": [{"path": "asc"}], "_source": False,
                    "docvalue_fields": ["path"]}
            if after:
                body["search_after"] = after
            res = self.client.request("POST", f"/{self.pages_name}/_search", body)
            hits = res["hits"]["hits"]
            out += [h["fields"]["path"][0] for h in hits]
            if len(hits) < 5000:
                break
            after = hits[-1]["sort"]
        return out

    def behind(self, prefix: str = "") -> Behind | None:
        """The page files under `prefix` (db-relative) added or changed since the syncs saw them (synced.behind; None
        without a record). A stat per file (~15-45 ms for 3,194 pages): reused for PAGES_TTL seconds, as the
        listing is, so a server's searches walk the folder at most that often; this process's syncs renew it."""
        return self._reused(self._behind, prefix, lambda: behind(self.db, self.synced_key, prefix))

    def _reused(self, store: dict, key: str, compute: Callable[[], T]) -> T:
        """`compute()`, or its value from `store` when computed under `key` less than PAGES_TTL seconds ago and
        since this process's last write (a write bumps the generation)."""
        now = time.monotonic()
        with self._lock:
            gen = self._gen
            hit = store.get(key)
            if hit and hit[1] == gen and now - hit[0] < PAGES_TTL:
                return hit[2]
        value = compute()
        with self._lock:
            if len(store) > 1000:  # a long-running server sees many scopes: forget, rather than grow
                store.clear()
            store[key] = (now, gen, value)
        return value

    def count(self) -> int:
        return int(self.client.request("GET", f"/{self.pages_name}/_count")["count"])

    def missing_vectors(self) -> int:
        if not self.semantic:
            return 0
        body = {"query": {"bool": {"must_not": {"exists": {"field": "content_vector"}}}}}
        return int(self.client.request("POST", f"/{self.pages_name}/_count", body)["count"])

    def search(self, query: str, k: int = 10, path: str | None = None, *, mode: str | None = None
               ) -> list[SearchHit]:
        from ragkit.search.opensearch.ranking import rank

        prefix = db_folder(self.db, path) if path else ""
        if k <= 0 or not query.strip():
            return []
        if not self._checked_analysis:
            self._checked_analysis = True
            self._say_if_analysed_earlier()
        return rank(self, query, k=k, prefix=prefix, mode=mode)

    def _say_if_analysed_earlier(self) -> None:
        """One line when the cluster's oldest page was analysed by an earlier ragkit: until `rag index sync` gives
        the pages this version's terms (keeping their vectors), they are ranked by the old ones."""
        got = self.client.request("POST", f"/{self.pages_name}/_search", {
            "size": 1, "_source": ["sha"], "sort": [{"indexed_at": "asc"}], "query": {"match_all": {}}})
        hits = (got.get("hits") or {}).get("hits") or []
        if hits and not str(hits[0].get("_source", {}).get("sha", "")).endswith(f":{ANALYSIS_VERSION}"):
            log.warning("the OpenSearch index %s holds pages analysed by an earlier ragkit: `rag index sync` gives "
                        "them this version's terms and keeps their vectors", self.pages_name)

    # ------------------------------------------------------------------------------------------- writers
    def refresh(self, *, progress: bool | None = None) -> None:
        """Hand edits reach the cluster with `rag index sync` (sync()); writers sync what they change."""
        self.last_refresh = time.monotonic()

    def ensure_embeddings(self, *, progress: bool | None = None) -> int:
        """Vectors are made when pages are synced: nothing to do here."""
        return 0

    def add_page(self, rel: str) -> None:
        self.sync(rels=[rel], refresh="wait_for")

    def update_pages(self, written: list[str], removed: list[str]) -> None:
        """Pages a writer (an upload, a deletion) wrote and removed, in one bulk sync."""
        self.sync(rels=written, removed=removed, refresh="wait_for")

    def remove_page(self, rel: str) -> None:
        self.sync(removed=[rel], refresh="wait_for")

    def sync(self, rels: Iterable[str] | None = None, *, removed: Iterable[str] = (), progress: bool | None = None,
             refresh: str | bool = "wait_for") -> SyncReport:
        """Make the cluster match the page files: every page (rels None: also deleting what no file backs), or
        just `rels` (written) and `removed` (deleted). A second run changes nothing. A copy of another database
        (the same id, the original still there) is refused before anything is written (check_not_a_copy)."""
        if self.cfg.database_id:
            check_not_a_copy(self.db)
        with self._write_lock:
            return _sync(self, rels, list(removed), self.progress if progress is None else progress, refresh)

    def _changed(self) -> None:
        with self._lock:
            self._gen += 1

    def close(self) -> None:
        self.client.close()
        with _INSTANCES_LOCK:
            if _INSTANCES.get(self.db) is self:
                del _INSTANCES[self.db]


# ------------------------------------------------------------------------------------------------ sync
def _indexed(ix: OpenSearchIndex, paths: list[str] | None, *, without_vector: bool = False
             ) -> dict[str, tuple[str, str]]:
    """path -> (sha, file_id) of what the cluster holds (of `paths`, or everything; only the pages without this
    embedding's vectors when `without_vector`)."""
    out: dict[str, tuple[str, str]] = {}
    after = None
    query: dict = {"match_all": {}} if paths is None else {"terms": {"path": paths}}
    if without_vector:  # no vectors, or not this embedding's chunk vectors (an earlier ragkit's)
        query = {"bool": {"filter": [query], "must_not": [{"term": {"embed": EMBED_VERSION}}]}}
    while True:
        body = {"size": 5000, "query": query, "sort": [{"path": "asc"}], "_source": ["sha", "file_id"],
                "docvalue_fields": ["path"]}
        if after:
            body["search_after"] = after
        hits = ix.client.request("POST", f"/{ix.pages_name}/_search", body)["hits"]["hits"]
        for h in hits:
            out[h["fields"]["path"][0]] = (h["_source"].get("sha", ""), h["_source"].get("file_id", ""))
        if len(hits) < 5000:
            return out
        after = hits[-1]["sort"]


def _group_paths(ix: OpenSearchIndex, file_ids: set[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {f: [] for f in file_ids}
    if not file_ids:
        return out
    after = None
    while True:
        body = {"size": 5000, "query": {"terms": {"file_id": sorted(file_ids)}}, "sort": [{"path": "asc"}],
                "_source": ["file_id"], "docvalue_fields": ["path"]}
        if after:
            body["search_after"] = after
        hits = ix.client.request("POST", f"/{ix.pages_name}/_search", body)["hits"]["hits"]
        for h in hits:
            out.setdefault(h["_source"]["file_id"], []).append(h["fields"]["path"][0])
        if len(hits) < 5000:
            return out
        after = hits[-1]["sort"]


def _neighbours(db: Path, rels: list[str]) -> dict[str, tuple[str, str]]:
    """The pages before and after each page in its folder (the spec's context: the page with its neighbours)."""
    from ragkit.core.pagefile import parse_page
    from ragkit.search.snippets import display_text

    out = {}
    cache: dict[str, str] = {}

    def text(rel: str) -> str:
        if rel not in cache:
            try:
                cache[rel] = display_text(parse_page((db / rel).read_text(encoding="utf-8", errors="replace"))[1])
            except OSError:
                cache[rel] = ""
        return cache[rel]

    by_folder: dict[str, list[str]] = {}
    for rel in rels:
        folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if folder not in by_folder:
            by_folder[folder] = sorted(p.name for p in (db / folder).glob("page_*.md")) if (db / folder).is_dir() else []
    for rel in rels:
        folder, _, name = rel.rpartition("/")
        names = by_folder.get(folder, [])
        i = names.index(name) if name in names else -1
        prev = f"{folder}/{names[i - 1]}" if i > 0 else ""
        nxt = f"{folder}/{names[i + 1]}" if 0 <= i < len(names) - 1 else ""
        out[rel] = (text(prev) if prev else "", text(nxt) if nxt else "")
    return out


def _sync(ix: OpenSearchIndex, rels: Iterable[str] | None, removed: list[str], progress: bool,
          refresh: str | bool) -> SyncReport:
    from ragkit.core.progress import progress_bar

    t0 = time.monotonic()
    report = SyncReport()
    full = rels is None
    files = sorted(iter_pages(ix.db)) if full else sorted({r for r in rels if (ix.db / r).is_file()})
    gone_files = [] if full else sorted(set(removed) | {r for r in rels if not (ix.db / r).is_file()})
    held = _indexed(ix, None if full else files + gone_files)
    emb = get_embedder()
    # pages indexed while meaning was off, or by an earlier ragkit (no chunk vectors), get their vectors now
    novec = set(_indexed(ix, None if full else files, without_vector=True)) if emb is not None else set()
    seen: dict[str, PageTerms] = {}  # what each page read here adds to its document's index document
    stats: dict[str, Stat] = {}  # each page file read here: what a search compares with (synced.behind)
    touched: set[str] = set()
    with progress_bar(total=len(files), desc="index sync", unit="page", file=sys.stderr,
                      disable=not progress or len(files) < 200) as bar:
        for start in range(0, len(files), BULK_PAGES):
            chunk = files[start: start + BULK_PAGES]
            neighbours = _neighbours(ix.db, chunk)
            todo: list[PageDoc] = []
            reanalysed: list[PageDoc] = []
            for rel in chunk:
                st = file_stat(ix.db / rel)  # before the read: a file changed meanwhile is told as changed
                pd = read_page_doc(ix.db, rel, neighbours.get(rel, ("", "")))
                if pd is None or st is None:
                    gone_files.append(rel)
                    continue
                stats[rel] = st
                seen[rel] = pd.slim()
                have = held.get(rel, ("", ""))[0]
                if rel in novec or not same_content(have, pd.sha):
                    todo.append(pd)
                elif have == pd.sha:
                    report.unchanged += 1
                    continue
                else:
                    reanalysed.append(pd)  # indexed by an earlier ragkit: new terms, the same vector
                touched.add(pd.source["file_id"])
            _index_pages(ix, todo, emb, held, report)
            _reanalyse_pages(ix, reanalysed, report)
            bar.update(len(chunk))
    deletes = sorted(set(held) - set(seen)) if full else sorted(set(gone_files) & set(held))
    touched |= {held[r][1] for r in deletes if held[r][1]}
    if deletes:
        for start in range(0, len(deletes), 1000):
            ix.client.bulk([({"delete": {"_index": ix.pages_name, "_id": doc_id(r)}}, None)
                            for r in deletes[start: start + 1000]])
        report.deleted = len(deletes)
    if report.changed:
        ix.client.request("POST", f"/{ix.pages_name}/_refresh")
        report.documents = _sync_documents(ix, touched, seen, refresh)
        if report.reanalysed:
            # every page rewritten at once leaves as many deleted copies, which Lucene counts in BM25's statistics
            # until it merges them away: the ranking would differ from a fresh index's
            try:
                left = _merge_replaced(ix, (ix.pages_name, ix.documents_name), progress)
            except ClusterError as e:  # the pages are written: Lucene merges them away later on its own
                log.warning("merging away the replaced pages failed: %s", e)
            else:
                if left:
                    log.warning("%d replaced page copies are still counted in the cluster's statistics: Lucene "
                                "merges them away later", left)
        ix._changed()
    record_synced(ix.db, ix.synced_key, stats, [*gone_files, *deletes], full)
    with ix._lock:
        ix._behind.clear()  # what the files were compared with has changed, whether or not the cluster did
    report.seconds = time.monotonic() - t0
    return report


def _merge_replaced(ix: OpenSearchIndex, names: tuple[str, ...], progress: bool) -> int:
    """Merge away the copies a sync replaced, in every segment holding one (by default only segments over 10 %
    deleted are: merges during a long sync spread the copies thin), again while the cluster still holds more than
    REPLACED_SHARE of them (see MERGE_WAIT). Searches see the result at once. Returns the copies left."""
    deadline = time.monotonic() + MERGE_WAIT
    for name in names:
        ix.client.request("PUT", f"/{name}/_settings", {"index.merge.policy.expunge_deletes_allowed": 0})
    said = False
    while True:
        left = 0
        for name in names:
            ix.client.request("POST", f"/{name}/_flush")  # a merge sees only the deletes written out
            ix.client.request("POST", f"/{name}/_forcemerge", params={"only_expunge_deletes": "true"},
                              timeout=MERGE_TIMEOUT)
            ix.client.request("POST", f"/{name}/_refresh")
            docs = ix.client.request("GET", f"/{name}/_stats/docs")["_all"]["primaries"]["docs"]
            if docs["deleted"] > REPLACED_SHARE * max(docs["count"], 1):
                left += int(docs["deleted"])
        if not left or time.monotonic() + MERGE_RETRY > deadline:
            return left
        if progress and not said:
            said = True
            print(f"index sync: merging away the {left} page copies it replaced (the cluster lets go of them "
                  "within about 30 s)", file=sys.stderr)
        time.sleep(MERGE_RETRY)


def _index_pages(ix: OpenSearchIndex, todo: list[PageDoc], emb: Any, held: dict, report: SyncReport) -> None:
    if not todo:
        return
    actions = []
    for pd, vecs in zip(todo, _vectors(emb, todo), strict=True):
        src = dict(pd.source)
        if vecs is not None:
            src["content_vector"] = page_vector(vecs)
            src["chunk_vectors"] = chunk_blob(vecs)
            src["embed"] = EMBED_VERSION
        actions.append(({"index": {"_index": ix.pages_name, "_id": doc_id(pd.rel)}}, src))
        if pd.rel in held:
            report.updated += 1
        else:
            report.added += 1
    ix.client.bulk(actions)


def _reanalyse_pages(ix: OpenSearchIndex, pages: list[PageDoc], report: SyncReport) -> None:
    """Pages whose text is unchanged but whose terms an earlier ragkit analysed: every field again but the vector."""
    if pages:
        ix.client.bulk([({"update": {"_index": ix.pages_name, "_id": doc_id(pd.rel)}}, {"doc": pd.source})
                        for pd in pages])
        report.updated += len(pages)
        report.reanalysed += len(pages)


def _vectors(emb: Any, batch: list[PageDoc]) -> list[np.ndarray | None]:
    """Each page's chunk vectors (None for all when there is no model, or it failed)."""
    if emb is None or not batch:
        return [None] * len(batch)
    chunks = [c for pd in batch for c in pd.chunks]
    try:
        vecs = emb.encode(chunks)
    except Exception as e:  # noqa: BLE001 - meaning is a bonus: pages are indexed without it
        log.warning("pages indexed without vectors: %s", e)
        return [None] * len(batch)
    out, i = [], 0
    for pd in batch:
        out.append(vecs[i: i + len(pd.chunks)])
        i += len(pd.chunks)
    return out


def _sync_documents(ix: OpenSearchIndex, file_ids: set[str], seen: dict[str, PageTerms],
                    refresh: str | bool) -> int:
    """Rewrite the document-level index documents of these source documents from their pages (read here, or
    read now from their files)."""
    groups = _group_paths(ix, file_ids)
    actions = []
    for fid, paths in groups.items():
        pages = [t for t in (seen.get(p) or _read_terms(ix.db, p) for p in paths) if t is not None]
        if not pages:
            actions.append(({"delete": {"_index": ix.documents_name, "_id": fid}}, None))
            continue
        doc = document_doc(pages[0].group, pages)
        actions.append(({"index": {"_index": ix.documents_name, "_id": fid}}, doc))
    for start in range(0, len(actions), 50):
        ix.client.bulk(actions[start: start + 50])
    ix.client.request("POST", f"/{ix.documents_name}/_refresh")
    if refresh:
        ix.client.request("POST", f"/{ix.pages_name}/_refresh")
    return len(actions)


def _read_terms(db: Path, rel: str) -> PageTerms | None:
    pd = read_page_doc(db, rel)
    return pd.slim() if pd is not None else None


# ------------------------------------------------------------------------------------------- sessions
SESSIONS_PAGE = 500  # sessions read per scroll page when a database moves to another index


def carry_sessions(before: IndexConfig, ix: OpenSearchIndex) -> int:
    """Copy the `rag serve` /chat sessions of the index `before` names (another prefix, maybe another cluster) into
    `ix`'s sessions index, as they are: a session already there is replaced by the one carried (moving back to an
    earlier index, the carried copy is the newer). Returns how many were copied (0 when `before` had no sessions
    index). Raises ClusterError when the old cluster cannot be read or the new one refuses the copies."""
    src = Client(before.url, prefix=before.prefix)
    scroll = None
    try:
        got = src.request("POST", f"/{before.prefix}-sessions/_search", {"size": SESSIONS_PAGE, "sort": ["_doc"]},
                          params={"scroll": "2m"}, ok=(404,))
        if got.get("status") == 404:
            return 0
        n = 0
        while True:
            scroll = got.get("_scroll_id") or scroll
            hits = (got.get("hits") or {}).get("hits") or []
            if not hits:
                break
            ix.client.bulk([({"index": {"_index": ix.sessions_name, "_id": h["_id"]}}, h.get("_source") or {})
                            for h in hits])
            n += len(hits)
            if len(hits) < SESSIONS_PAGE:
                break
            got = src.request("POST", "/_search/scroll", {"scroll": "2m", "scroll_id": scroll})
        if n:
            ix.client.request("POST", f"/{ix.sessions_name}/_refresh")
        return n
    finally:
        if scroll:
            try:
                src.request("DELETE", "/_search/scroll", {"scroll_id": scroll}, ok=(404,), retries=1)
            except ClusterError:  # the scroll expires by itself
                pass
        src.close()


# --------------------------------------------------------------------------------------------- module API
_INSTANCES: dict[Path, OpenSearchIndex] = {}
_INSTANCES_LOCK = threading.Lock()


def open_opensearch(db: Path, cfg: IndexConfig, *, refresh: bool = True, progress: bool = True) -> OpenSearchIndex:
    root = Path(db).resolve()
    if not cfg.database_id:  # an earlier ragkit's database: given its id now, so that it can own its index
        cfg = replace(cfg, database_id=database_id(root))
    with _INSTANCES_LOCK:
        ix = _INSTANCES.get(root)
        if ix is None or ix.cfg != cfg:
            try:
                ix = OpenSearchIndex(root, cfg, progress=progress)
            except ClusterError:
                raise
            _INSTANCES[root] = ix
        ix.progress = ix.progress or progress  # as open_embedded: once asked for, shown
    return ix
