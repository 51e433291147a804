"""ragkit's ranking as OpenSearch queries, step for step with the embedded engine (docs/search.md):

1. the query's weighted terms (understand.weighted_terms; page frequencies from the cluster) as boosted term
   clauses on `rk`, BM25 over ragkit's own terms: the candidate window;
2. in the same request, the documents index scored by the same clauses (whole documents and their cards), and
   the pages closest in meaning (a k-NN query);
3. one page query that adds, as clauses, the document evidence, the pages the query names (page numbers,
   printed numbers, the last page, figure and table captions) and the year its documents report, with the
   adjacent-term-pair bonus as a rescore of the best PHRASE_N;
4. meaning: the best candidates re-ranked by the cosine of their closest chunk, from the chunk vectors the
   cluster keeps (ranking.fuse; the cosine of the chunks' mean for pages an earlier ragkit indexed), and pages
   found by meaning alone (a k-NN query over the chunks' mean) put first when they are much closer than every
   candidate;
5. the page files are the truth: a hit whose file was deleted by hand since the last sync is left out, and a
   search that left one out, or found nothing while the cluster holds fewer pages in scope than the database's
   folder, says in one line (a warning) that `rag index sync` brings the cluster in step (an index holding no page
   at all says nothing here: its callers refuse the search with that advice, backend.no_pages_error); so does every
   search while page files in scope were added or changed since the syncs saw them (OpenSearchIndex.behind: a
   stat per file, reused for a few seconds), saying which hits were ranked by their page's old text (their snippet is the file's new one).

    rank(ix, query, k=, prefix=, mode=) -> list[SearchHit]   # ix: an OpenSearchIndex
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from typing import Any

import numpy as np

from ragkit.core.models import SearchHit
from ragkit.core.pagefile import first_heading, parse_page
from ragkit.core.paths import iter_pages
from ragkit.core.text import STOPWORDS, detect_lang, search_terms
from ragkit.search.opensearch.documents import chunk_vectors, doc_id
from ragkit.search.opensearch.synced import Behind
from ragkit.search.periods import period_terms, reports_another, specific_periods
from ragkit.search.postings import CARD_WEIGHT, DOC_WEIGHT
from ragkit.search.query import LAST_PAGE, may_show, one_edit, page_refs, years
from ragkit.search.ranking import (
    PAGE_REF_WEIGHT,
    PERIOD_WEIGHT,
    PHRASE_N,
    PHRASE_WEIGHT,
    RERANK_N,
    YEAR_WEIGHT,
    fuse,
)
from ragkit.search.snippets import make_snippet
from ragkit.search.statements import STATEMENT_TERMS
from ragkit.search.understand import frame_weights, weighted_terms
from ragkit.search.vectors import DENSE_WEIGHT, RECALL_MARGIN, RECALL_N, get_embedder, word_terms

log = logging.getLogger(__name__)

# The analysis page scores come from: ragkit's own terms (the default, as the embedded engine), or one of the
# cluster's analysers for comparison (RAG_OPENSEARCH_ANALYSIS=ja|ko|en|cjk|standard: kuromoji, nori, english,
# CJK bigrams, standard); document evidence, named pages, years and pairs stay ragkit's.
ANALYSES = ("ragkit", "ja", "ko", "en", "cjk", "standard")
WINDOW = 200  # candidate pages of the first query; the final query re-scores these (and the named pages)
DOCS_MAX = 2000  # documents scored per query (their evidence reaches their pages)
NEAR_MAX = 200  # indexed spellings one edit away from an unknown word that the cluster returns
_FIELDS = ["path", "file_id", "page", "printed_page"]  # read from doc values: no page text is loaded
_COSINE = "cosineSimilarity(params.q, doc['content_vector'])"


class ClusterStats:
    """understand.TermStats from the cluster: page frequencies of `rk` terms, one _msearch per batch, cached for
    the life of one query."""

    def __init__(self, ix: Any) -> None:
        self._ix = ix
        self._df: dict[str, int] = {}
        self.n = 0

    def _fetch(self, terms: set[str]) -> None:
        need = sorted(t for t in terms if t not in self._df)
        if not need and self.n:
            return
        lines = []
        for t in need:
            lines += [{"index": self._ix.pages_name},
                      {"size": 0, "track_total_hits": True, "query": {"term": {"rk": t}}}]
        if not self.n:
            lines += [{"index": self._ix.pages_name}, {"size": 0, "track_total_hits": True}]
        res = _msearch(self._ix, lines)
        for t, r in zip(need, res, strict=False):
            self._df[t] = int(r["hits"]["total"]["value"])
        if not self.n:
            self.n = max(int(res[-1]["hits"]["total"]["value"]), 0)

    def known(self, terms) -> set[str]:
        terms = set(terms)
        self._fetch(terms)
        return {t for t in terms if self._df.get(t)}

    def df(self, terms) -> dict[str, int]:
        terms = set(terms)
        self._fetch(terms)
        return {t: self._df.get(t, 0) for t in terms}

    def near(self, words) -> dict[str, set[str]]:
        """One term-suggester request for all the words (the cluster looks up its own terms within one edit;
        asking each of a word's ~500 spellings one edit away would be as many searches), kept to
        query.one_edit's spellings, as the embedded engine reads a typo."""
        edits = {w: e for w in set(words) if (e := one_edit(w))}
        if not edits:
            return {}
        suggest = {f"w{i}": {"text": w, "term": {"field": "rk", "max_edits": 1, "prefix_length": 0,
                                                   "min_word_length": 1, "suggest_mode": "always",
                                                   "size": NEAR_MAX, "min_doc_freq": 0}}
                   for i, w in enumerate(edits)}
        res = self._ix.client.request("POST", f"/{self._ix.pages_name}/_search", {"size": 0, "suggest": suggest})
        got = res.get("suggest") or {}
        found = {w: {o["text"] for entry in got.get(f"w{i}", []) for o in entry.get("options", [])} & edits[w]
                 for i, w in enumerate(edits)}
        return {w: vs for w, vs in found.items() if vs}


def _msearch(ix: Any, lines: list[dict]) -> list[dict]:
    if not lines:
        return []
    body = "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n"
    res = ix.client.request("POST", "/_msearch", ndjson=body)
    out = res.get("responses", [])
    for r in out:
        if "error" in r:
            from ragkit.search.opensearch.client import ClusterError

            err = r["error"]
            raise ClusterError(f"OpenSearch at {ix.cfg.url}: search failed: "
                               f"{(err.get('reason') if isinstance(err, dict) else err)}")
    return out


def _terms_clause(q: Counter, field: str = "rk") -> list[dict]:
    return [{"term": {field: {"value": t, "boost": round(float(w), 6)}}} for t, w in q.items() if w > 0]


def _scope(prefix: str) -> list[dict]:
    if not prefix:
        return []
    return [{"bool": {"should": [{"term": {"path": prefix}}, {"prefix": {"path": prefix.rstrip("/") + "/"}}]}}]


def _pair_weights(query: str, stats: ClusterStats) -> dict[str, float]:
    """Adjacent term pairs of the query (as indexed in rk_pairs), each as heavy as its lighter term; none for a
    CJK question, whose bigrams already hold its word order (as the embedded engine's _phrase_bonus)."""
    toks = [t for t in search_terms(query) if t not in STOPWORDS]
    if len(toks) < 2 or detect_lang(query) != "en":
        return {}
    known = stats.known(toks)
    w = frame_weights(set(toks), stats)
    out: dict[str, float] = {}
    for a, b in zip(toks[:-1], toks[1:], strict=True):
        if a in known and b in known:
            out[f"{a}+{b}"] = max(out.get(f"{a}+{b}", 0.0), min(w[a], w[b]))
    return out


def analysis() -> str:
    import os

    name = os.environ.get("RAG_OPENSEARCH_ANALYSIS", "ragkit") or "ragkit"
    if name not in ANALYSES:
        from ragkit.core.errors import UsageError

        raise UsageError(f"RAG_OPENSEARCH_ANALYSIS={name!r}: choose one of {', '.join(ANALYSES)}")
    return name


def _page_clause(query: str, clauses: list[dict], how: str) -> dict:
    """What scores a page by its words: ragkit's weighted terms, or a cluster analyser over the same fields
    with the same weights (folder path x3, title x2, text)."""
    if how == "ragkit":
        return {"bool": {"should": clauses}}
    sub = "" if how == "standard" else f".{how}"
    return {"multi_match": {"query": query, "type": "most_fields",
                            "fields": [f"path_words{sub}^3", f"title{sub}^2", f"content{sub}"]}}


def rank(ix: Any, query: str, *, k: int, prefix: str, mode: str | None) -> list[SearchHit]:
    """The best `k` pages under `prefix` (db-relative, "" for all) whose files still exist."""
    hits, gone = _rank(ix, query, k=k, prefix=prefix, mode=mode)
    late = ix.behind(prefix)
    if gone or (not hits and not late):
        _say_if_behind(ix, prefix, gone)
    if late:
        _say_edited(ix, prefix, late, hits)
    return hits


def _say_edited(ix: Any, prefix: str, late: Behind, hits: list[SearchHit]) -> None:
    """One line when page files in scope were added or changed by hand since the syncs saw them: the cluster
    cannot find the added ones and ranks the changed ones by their old text, while their snippet is read from the
    file (the new text)."""
    where = f" under {prefix}" if prefix else ""
    changed = set(late.changed)
    stale = [i for i, h in enumerate(hits, 1) if h.path in changed]
    ranks = ""
    if stale:
        ranks = (f"; hit #{stale[0]} was ranked by its page's text at the last sync, not by the text shown"
                 if len(stale) == 1 else f"; hits #{', #'.join(map(str, stale))} were ranked by their pages' text at "
                 "the last sync, not by the text shown")
    counts = ", ".join(f"{n} {what}" for n, what in ((len(late.added), "added"), (len(late.changed), "changed")) if n)
    _warn(f"the OpenSearch index {ix.pages_name} is behind the page files{where}: {counts} since the last sync"
          f"{ranks}; `rag index sync` brings it in step")


def _say_if_behind(ix: Any, prefix: str, gone: int) -> None:
    """One line when the cluster is behind the page files: hits left out because their files were deleted, or
    fewer pages in scope than the folder holds (data lost, a folder added by hand). Only after a search that
    left a hit out or found nothing, so a walk of the folder costs nothing to the searches that find pages."""
    if gone:
        _warn(f"{gone} hit(s) left out: their page files were deleted since the OpenSearch index {ix.pages_name} "
              "was synced; `rag index sync` takes them out")
        return
    held = int(ix.client.request("POST", f"/{ix.pages_name}/_count",
                                 {"query": {"bool": {"filter": _scope(prefix)}}})["count"])
    if not held and (not prefix or not int(ix.client.request("GET", f"/{ix.pages_name}/_count")["count"])):
        return  # an index holding no page at all: the search is refused with the same advice (no_pages_error)
    on_disk = len(iter_pages(ix.db, prefix or None))
    if held < on_disk:
        where = f" under {prefix}" if prefix else ""
        _warn(f"the OpenSearch index {ix.pages_name} holds {held} of the {on_disk} page files{where}: "
              "`rag index sync` adds the others")


_SAID: dict[str, float] = {}
SAY_AGAIN = 60.0  # seconds before the same warning is logged again (an answer searches several times)


def _warn(message: str) -> None:
    now = time.monotonic()
    if now - _SAID.get(message, float("-inf")) >= SAY_AGAIN:
        if len(_SAID) > 1000:  # a long-running server sees many scopes: forget, rather than grow
            _SAID.clear()
        _SAID[message] = now
        log.warning("%s", message)


def _shown(ix: Any, rows: list[tuple[dict, float]], k: int, refs: set[int], docs: list[dict]
           ) -> tuple[list[tuple[dict, float, str]], int]:
    """The first `k` rows whose page file exists and may be shown (query.may_show), each with the body read from
    its file (one read per row looked at), and how many were left out because their file is gone: a page deleted
    by hand stays in the cluster until `rag index sync`, and the embedded engine no longer finds it. `refs`: the
    pages the query names (query.page_refs); `docs`: the documents index's hits of the query, whose last_page says which
    page is a document's last."""
    last_pages = {h["_id"]: _fields(h).get("last_page") for h in docs}

    def is_last(src: dict) -> bool:
        fid = str(src.get("file_id") or "")
        if fid not in last_pages:  # a page of a document the query's words did not match (found by meaning)
            got = ix.client.request("GET", f"/{ix.documents_name}/_doc/{fid}", params={"_source": "last_page"},
                                    ok=(404,))
            last_pages[fid] = (got.get("_source") or {}).get("last_page")
        return bool(last_pages[fid]) and int(src.get("page") or 0) == int(last_pages[fid])

    kept: list[tuple[dict, float, str]] = []
    gone = 0
    for src, score in rows:
        if len(kept) >= k:
            break
        try:
            body = parse_page((ix.db / src["path"]).read_text(encoding="utf-8", errors="replace"))[1]
        except OSError:
            gone += 1
            continue
        if may_show(body, int(src.get("page") or 0), str(src.get("printed_page") or ""), refs,
                    lambda src=src: is_last(src)):
            kept.append((src, score, body))
    return kept, gone


def _rank(ix: Any, query: str, *, k: int, prefix: str, mode: str | None) -> tuple[list[SearchHit], int]:
    """rank's hits, and how many hits were left out because their page file is gone."""
    stats = ClusterStats(ix)
    q = weighted_terms(query, stats, ix._synonyms)
    refs = page_refs(query) if PAGE_REF_WEIGHT else set()  # the named-page clause's and may_show's
    clauses = _terms_clause(q)
    emb = get_embedder() if mode != "keyword" else None
    scope = _scope(prefix)
    if not clauses:
        return [], 0
    words = _page_clause(query, clauses, analysis())
    page_q = {"bool": {"should": [words], "filter": scope}}
    doc_q = {"bool": {"should": clauses}}
    lines: list[dict] = [
        {"index": ix.pages_name}, {"size": WINDOW, "query": page_q, "_source": False, "docvalue_fields": ["file_id"]},
        {"index": ix.documents_name}, {"size": DOCS_MAX, "query": doc_q, "_source": False,
                                       "docvalue_fields": ["report_year", "last_page", "periods"]},
        {"index": ix.documents_name}, {"size": DOCS_MAX, "query": {"bool": {"should": _terms_clause(q, "rk_card")}},
                                       "_source": False},
    ]
    qv = None
    if emb is not None:
        qv = emb.encode_query(query)
        knn: dict = {"vector": [float(x) for x in qv], "k": max(RECALL_N, k)}
        # meaning alone finds only pages holding none of the query's words (vectors.word_terms)
        worded = word_terms(q)
        if scope or worded:
            knn["filter"] = {"bool": {"filter": scope, "must_not": [{"terms": {"rk": worded}}] if worded else []}}
        lines += [{"index": ix.pages_name}, {"size": max(RECALL_N, k), "_source": False, "docvalue_fields": _FIELDS,
                                             "query": {"knn": {"content_vector": knn}}}]
    res = _msearch(ix, lines)
    window, docs, cards = res[0]["hits"]["hits"], res[1]["hits"]["hits"], res[2]["hits"]["hits"]
    if not window:
        # no page holds a word of the query (a question in another language): the pages found by meaning alone, as
        # the embedded engine gives them
        found = _by_meaning(ix, [], qv, res[3]["hits"]["hits"], k) if qv is not None else []
        shown, gone = _shown(ix, found, k, refs, docs)
        return [_hit(src, score, body, q) for src, score, body in shown], gone
    top = float(window[0]["_score"])
    gmax = max((h["_score"] for h in docs), default=0.0) or 1.0
    cmax = max((h["_score"] for h in cards), default=0.0) or 1.0
    evidence: dict[str, float] = {}
    if DOC_WEIGHT:
        for h in docs:
            evidence[h["_id"]] = DOC_WEIGHT * top * h["_score"] / gmax
        if CARD_WEIGHT:
            for h in cards:
                evidence[h["_id"]] = evidence.get(h["_id"], 0.0) + CARD_WEIGHT * top * h["_score"] / cmax
    # the best page score once its document's evidence is added (what the named-page and year bonuses scale by)
    best = max(float(h["_score"]) + evidence.get(h["fields"]["file_id"][0], 0.0) for h in window)
    should: list[dict] = [words]
    should += [{"constant_score": {"filter": {"term": {"file_id": fid}}, "boost": round(b, 6)}}
               for fid, b in evidence.items() if b > 0]
    named = _named_clause(refs, q, docs, evidence)
    if named is not None:
        should.append({"constant_score": {"filter": named, "boost": round(PAGE_REF_WEIGHT * best, 6)}})
    year_docs = _year_documents(query, docs)
    if year_docs:
        should.append({"constant_score": {"filter": {"terms": {"file_id": year_docs}},
                                          "boost": round(YEAR_WEIGHT * best, 6)}})
    period_docs = _period_documents(query, docs)
    if period_docs:
        should.append({"constant_score": {"filter": {"terms": {"file_id": period_docs}},
                                          "boost": round(PERIOD_WEIGHT * best, 6)}})
    matches: list[dict] = [words] + ([named] if named is not None else [])
    n_final = max(k, PHRASE_N, RERANK_N if emb is not None else 0)
    body: dict = {"size": n_final, "_source": False, "docvalue_fields": _FIELDS,
                  "query": {"bool": {"should": should, "filter": [*scope, {"bool": {"should": matches}}]}}}
    if qv is not None:  # the cluster computes each candidate's cosine; fuse() combines it with the score
        body["script_fields"] = {"cos": {"script": {"source": _COSINE, "params": {"q": [float(x) for x in qv]}}}}
    pairs = _pair_weights(query, stats)
    rescore = []
    if PHRASE_WEIGHT and pairs:
        # the candidates holding the query's adjacent term pairs gain up to PHRASE_WEIGHT x the best score
        unit = PHRASE_WEIGHT * best / len(pairs)
        rescore.append({"window_size": PHRASE_N, "query": {
            "rescore_query": {"bool": {"should": [
                {"constant_score": {"filter": {"term": {"rk_pairs": p}}, "boost": round(unit * w, 6)}}
                for p, w in pairs.items()]}},
            "query_weight": 1.0, "rescore_query_weight": 1.0, "score_mode": "total"}})
    neighbours = _period_conflicts(query, docs)
    if neighbours:
        # a neighbouring period's report of the same company shares nearly every word: it comes after
        rescore.append({"window_size": PHRASE_N, "query": {
            "rescore_query": {"constant_score": {"filter": {"terms": {"file_id": neighbours}},
                                                 "boost": 1.0 - PERIOD_WEIGHT}},
            "query_weight": 1.0, "rescore_query_weight": 1.0, "score_mode": "multiply"}})
    if rescore:
        body["rescore"] = rescore
    hits = ix.client.request("POST", f"/{ix.pages_name}/_search", body)["hits"]["hits"]
    rows = [(_fields(h), float(h["_score"])) for h in hits]
    rows.sort(key=lambda r: -r[1])  # stable: the cluster's order breaks ties
    unembedded = 0
    if emb is not None:
        rows = _by_meaning(ix, rows, qv, res[3]["hits"]["hits"], k)
    shown, gone = _shown(ix, rows, k, refs, docs)
    if emb is not None and any(src.get("ranking") != "hybrid" for src, _, _ in shown
                               if src.get("ranking") != "meaning"):
        unembedded = _unembedded(ix, scope)
    return [_hit(src, score, body, q, unembedded) for src, score, body in shown], gone


def _unembedded(ix: Any, scope: list[dict]) -> int:
    body = {"query": {"bool": {"filter": scope, "must_not": [{"exists": {"field": "content_vector"}}]}}}
    return int(ix.client.request("POST", f"/{ix.pages_name}/_count", body)["count"])


def _named_clause(refs: set[int], q: Counter, docs: list[dict], evidence: dict[str, float]) -> dict | None:
    """The pages the query names ("page 12", its printed number, "the last page": `refs`; "Figure 4"), in
    documents that match the query (a named page may hold none of its words: a photo, a scan), and the statements
    it needs, in the document that matches it best."""
    labels = [t for t in q if t.startswith("§")] if PAGE_REF_WEIGHT else []
    if not refs and not labels:
        return None
    which: list[dict] = []
    numbers = sorted(r for r in refs if r != LAST_PAGE)
    if numbers:
        which += [{"terms": {"page": numbers}}, {"terms": {"printed_page": [str(n) for n in numbers]}}]
    if LAST_PAGE in refs:
        last = {h["_id"]: _fields(h).get("last_page") for h in docs}
        which += [{"bool": {"filter": [{"term": {"file_id": fid}}, {"term": {"page": n}}]}}
                  for fid, n in last.items() if n]
    which += [{"term": {"rk": label}} for label in labels if label not in STATEMENT_TERMS]
    matched_docs = [fid for fid, b in evidence.items() if b > 0]
    if not matched_docs:
        return None
    # every filing has a balance sheet: only the one of the document asked about (the best evidence)
    best = max(evidence[fid] for fid in matched_docs)
    asked = [fid for fid in matched_docs if evidence[fid] >= best]
    which += [{"bool": {"filter": [{"term": {"rk": label}}, {"terms": {"file_id": asked}}]}}
              for label in labels if label in STATEMENT_TERMS]
    if not which:
        return None
    # a bool with a filter matches without any `should`: one of the named pages must match
    return {"bool": {"should": which, "minimum_should_match": 1, "filter": [{"terms": {"file_id": matched_docs}}]}}


def _year_documents(query: str, docs: list[dict]) -> list[str]:
    """The matching documents that report a year the query names, when some but not all of them do."""
    named = years(query)
    if not (YEAR_WEIGHT and named and docs):
        return []
    hit = [h["_id"] for h in docs if _fields(h).get("report_year") in named]
    return hit if 0 < len(hit) < len(docs) else []


def _period_documents(query: str, docs: list[dict]) -> list[str]:
    """The matching documents whose first pages report the most specific period the query names, when some but
    not all of them do."""
    terms = set(specific_periods(period_terms(query)))
    if not (PERIOD_WEIGHT and terms and docs):
        return []
    hit = [h["_id"] for h in docs if terms & set((h.get("fields") or {}).get("periods") or [])]
    return hit if 0 < len(hit) < len(docs) else []


def _period_conflicts(query: str, docs: list[dict]) -> list[str]:
    """The matching documents that report another period of the same kind than the most specific one the query
    names, and not that one (periods.reports_another, here over the documents index); none when none of them
    reports the period asked."""
    asked = specific_periods(period_terms(query))
    if not (PERIOD_WEIGHT and asked):
        return []
    reported = [set((h.get("fields") or {}).get("periods") or []) for h in docs]
    if not any(p & set(asked) for p in reported):
        return []
    return [h["_id"] for h, p in zip(docs, reported, strict=True) if reports_another(asked, p)]


def _closest_chunks(ix: Any, paths: list[str], qv: np.ndarray) -> dict[str, float]:
    """The cosine of each page with the query as the embedded engine reads it: its closest chunk's (one _mget of
    their chunk vectors). Pages without chunk vectors (an earlier ragkit's, until the next sync) are left out."""
    ids = {doc_id(p): p for p in paths}
    if not ids:  # nothing to read (no candidate, nothing found by meaning): the cluster refuses an empty _mget
        return {}
    got = ix.client.request("POST", f"/{ix.pages_name}/_mget", {"ids": list(ids)},
                            params={"_source": "chunk_vectors"})
    out = {}
    for d in got.get("docs", []):
        blob = (d.get("_source") or {}).get("chunk_vectors")
        vecs = chunk_vectors(blob) if blob else None
        if vecs is not None and d.get("_id") in ids:
            out[ids[d["_id"]]] = float((vecs @ qv).max())
    return out


def _by_meaning(ix: Any, rows: list[tuple[dict, float]], qv: np.ndarray, recalled: list[dict], k: int
                ) -> list[tuple[dict, float]]:
    """The best candidates re-ranked by meaning (fuse), and the pages found by meaning alone (`recalled`: the
    k-NN hits, which hold none of the query's words) put first when they are closer to the query than every
    candidate by RECALL_MARGIN."""
    head = rows[: max(k, RERANK_N)]
    if any(src.get("cos") is None for src, _ in head):
        return rows  # some candidates lack a vector: keyword order, not a lopsided mix
    recalled = recalled[: min(k, RECALL_N)]
    closest = _closest_chunks(ix, [src["path"] for src, _ in head] + [_fields(h)["path"] for h in recalled], qv)
    if all(src["path"] in closest for src, _ in head):
        sims = np.array([closest[src["path"]] for src, _ in head], dtype=np.float64)
    else:  # the mean of the chunks (content_vector, the script's cosine), for all of them alike
        closest = {}
        sims = np.array([src["cos"] for src, _ in head], dtype=np.float64)
    fused = fuse(np.array([s for _, s in head]), sims)
    order = np.lexsort((np.arange(len(head)), -fused))
    head = [({**head[i][0], "ranking": "hybrid"}, float(fused[i])) for i in order]
    ref = float(sims.max()) if len(sims) else 0.0
    seen = {src["path"] for src, _ in head}
    found = []
    for h in recalled:
        src = _fields(h)
        # the lucene engine's cosinesimil score is (1 + cos) / 2, of the mean of the chunks
        cos = closest.get(src["path"], 2.0 * float(h["_score"]) - 1.0)
        if src["path"] not in seen and cos >= ref + RECALL_MARGIN:
            found.append(({**src, "ranking": "meaning"}, 1.0 + DENSE_WEIGHT * cos))
    # closest first, as the embedded engine gives them: the k-NN found them by the chunks' mean
    found.sort(key=lambda f: -f[1])
    return found + head


def _fields(hit: dict) -> dict:
    """A hit's doc-value fields (and script fields) as plain values."""
    return {name: (vals[0] if vals else None) for name, vals in (hit.get("fields") or {}).items()}


def _hit(src: dict, score: float, body: str, q: Counter, unembedded: int = 0) -> SearchHit:
    """The hit as the embedded engine gives it: title and snippet from the page file's `body`, the truth."""
    return SearchHit(path=src["path"], page=int(src.get("page") or 0), title=first_heading(body)[:200],
                     score=round(score, 4), snippet=make_snippet(body, q),
                     printed_page=str(src.get("printed_page") or ""), ranking=src.get("ranking") or "keyword",
                     unembedded=unembedded)
