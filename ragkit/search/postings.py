"""Postings and BM25: immutable numpy segments (term id -> page ids, weighted term frequencies), like a tiny
Lucene; the blob layout a page's terms are cached in; and BM25F scoring of pages and of whole documents."""

from __future__ import annotations

from collections import Counter

import numpy as np

# BM25F: a term in the folder path or in a heading (or caption) counts as this many body occurrences.
FIELDS = ("path", "head", "body")
FIELD_WEIGHTS = np.array([3.0, 2.0, 1.0], dtype=np.float32)
K1 = 1.2
B = 0.75
# Document-level evidence: share of the best page score a page gets from its document's BM25 (0 = off).
DOC_WEIGHT = 0.3
DOC_K1 = 1.2
DOC_B = 0.75
# Document identity: a document's first pages (cover, title page, contents) and its folder names say whose and
# which period's document it is ("COSTCO", "FY2021"). BM25 over these cards, its share of the best page score
# added to every page of the document (0 = off), so the right document is picked before its pages are ranked.
CARD_PAGES = 2
CARD_WEIGHT = 0.3


def _pack(tids: np.ndarray, counts: np.ndarray) -> bytes:
    """Blob of one page's terms: int32 term ids, then uint16 counts laid out field by field."""
    return tids.astype("<i4").tobytes() + counts.astype("<u2").T.tobytes()


def _unpack(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    n = len(blob) // 10
    tids = np.frombuffer(blob, dtype="<i4", count=n)
    counts = np.frombuffer(blob, dtype="<u2", count=3 * n, offset=4 * n).reshape(3, n)
    return tids, counts


def _unpack_many(blobs: tuple[bytes, ...], doc0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Postings of consecutive pages doc0, doc0+1, ... from their blobs (see _pack): term ids, page ids and
    weighted term frequencies, in one pass over the joined bytes."""
    n = np.array([len(b) // 10 for b in blobs], dtype=np.int64)
    words = np.frombuffer(b"".join(blobs), dtype="<u2")  # each blob: 2n words of ids, then 3n of counts
    start = np.concatenate(([0], np.cumsum(5 * n)[:-1]))
    first = np.concatenate(([0], np.cumsum(n)[:-1]))
    total = int(n.sum())
    j = np.arange(total, dtype=np.int64) - np.repeat(first, n)  # index of each posting within its page
    base = np.repeat(start, n)
    nn = np.repeat(n, n)
    lo = words[base + 2 * j].astype(np.int32)
    hi = words[base + 2 * j + 1].astype(np.int32)
    tids = lo | (hi << 16)
    tf = np.zeros(total, np.float32)
    for f in range(3):
        tf += FIELD_WEIGHTS[f] * words[base + (2 + f) * nn + j].astype(np.float32)
    docs = (doc0 + np.repeat(np.arange(len(blobs), dtype=np.int64), n)).astype(np.int32)
    return tids, docs, tf


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """np.argsort(keys, kind="stable") for non-negative int32 keys, as one or two radix sorts of 16-bit halves
    (numpy sorts 16-bit integers by radix: about twice as fast as its merge sort on 32-bit ones)."""
    if not len(keys) or int(keys.min()) < 0:
        return np.argsort(keys, kind="stable")
    if int(keys.max()) < 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]


# --------------------------------------------------------------------------------------------- segments
class _Segment:
    """Immutable postings for a set of pages: sorted unique term ids, offsets, page ids, weighted tfs."""

    __slots__ = ("tids", "ptr", "docs", "tfs", "ndocs")

    def __init__(self, tids: np.ndarray, ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray, ndocs: int):
        self.tids, self.ptr, self.docs, self.tfs, self.ndocs = tids, ptr, docs, tfs, ndocs

    @classmethod
    def build(cls, tid_parts: list[np.ndarray], doc_parts: list[np.ndarray], tf_parts: list[np.ndarray],
              ndocs: int) -> _Segment:
        if not tid_parts:
            e = np.zeros(0, np.int32)
            return cls(e, np.zeros(1, np.int64), e, np.zeros(0, np.float32), 0)
        tids = np.concatenate(tid_parts)
        docs = np.concatenate(doc_parts)
        tfs = np.concatenate(tf_parts)
        order = _stable_order(tids)
        tids, docs, tfs = tids[order], docs[order], tfs[order]
        uniq, starts = np.unique(tids, return_index=True)
        ptr = np.append(starts, len(tids)).astype(np.int64)
        return cls(uniq.astype(np.int32), ptr, docs.astype(np.int32), tfs.astype(np.float32), ndocs)

    def postings(self, tid: int) -> tuple[np.ndarray, np.ndarray] | None:
        i = int(np.searchsorted(self.tids, tid))
        if i < len(self.tids) and self.tids[i] == tid:
            a, b = self.ptr[i], self.ptr[i + 1]
            return self.docs[a:b], self.tfs[a:b]
        return None

    def expanded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        counts = np.diff(self.ptr)
        return np.repeat(self.tids, counts), self.docs, self.tfs


class _Grow:
    """A growable numpy array (amortised appends); with `width`, of rows of that many values. Growing makes a
    new array, so a view taken earlier stays valid (a reader in another thread)."""

    def __init__(self, dtype, fill=0, *, width: int | None = None):
        self.width = width
        self.a = np.full(self._shape(1024), fill, dtype=dtype)
        self.fill = fill
        self.n = 0

    def _shape(self, n: int) -> int | tuple[int, int]:
        return n if self.width is None else (n, self.width)

    def _reserve(self, k: int) -> None:
        """Room for k more values: one new array of at least twice the size (old views stay valid)."""
        if self.n + k > len(self.a):
            a = np.empty(self._shape(max(2 * len(self.a), self.n + k)), dtype=self.a.dtype)
            a[: self.n] = self.a[: self.n]
            a[self.n + k :] = self.fill  # the caller writes [n, n + k)
            self.a = a

    def append(self, v) -> int:
        self._reserve(1)
        self.a[self.n] = v
        self.n += 1
        return self.n - 1

    def view(self) -> np.ndarray:
        return self.a[: self.n]

    def extend(self, values) -> None:
        k = len(values)
        self._reserve(k)
        self.a[self.n : self.n + k] = values
        self.n += k

    @classmethod
    def of(cls, values: np.ndarray, fill=0) -> _Grow:
        """A growable array holding `values` (copied: the source may be read-only), with room to grow."""
        g = cls(values.dtype, fill)
        g.a = np.full(max(1024, len(values) + len(values) // 4), fill, dtype=values.dtype)
        g.a[: len(values)] = values
        g.n = len(values)
        return g


def _group_norms(groups: np.ndarray, lens: np.ndarray, ng: int) -> tuple[np.ndarray, int]:
    """BM25 length normalisation of texts made of several pages (a whole document, a document's card): each
    group's length is the sum of `lens` over its pages. Returns (norm per group, groups with any text)."""
    glen = np.bincount(groups, weights=lens, minlength=ng)
    n_g = max(int(np.count_nonzero(glen)), 1)
    avg = max(float(glen.sum()) / n_g, 1.0)
    return DOC_K1 * (1.0 - DOC_B + DOC_B * glen / avg), n_g


def _group_bm25(groups: np.ndarray, tfs: np.ndarray, qtf: float, norm: np.ndarray, n_g: int) -> np.ndarray:
    """One query term's BM25 per group, from its term frequencies on pages of those groups."""
    gtf = np.bincount(groups, weights=tfs, minlength=len(norm))
    gdf = int(np.count_nonzero(gtf))
    gidf = np.log1p((n_g - gdf + 0.5) / (gdf + 0.5))
    return (qtf * gidf) * gtf * (DOC_K1 + 1.0) / (gtf + norm)


class _Scoring:
    """BM25 over the index's segments (a part of Index: the attributes are Index's)."""

    def _bm25(self, q: Counter) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(page scores, document scores, card scores): BM25F over pages, BM25 over whole documents (a page's
        document as one long text: the sum of its pages' term frequencies) and over documents' cards (their
        first CARD_PAGES pages, folder names included)."""
        ndocs = len(self._rels)
        scores = np.zeros(ndocs, np.float32)
        n = max(self._n_alive, 1)
        alive = self._alive.view()
        groups = self._dgroup.view()
        ng = len(self._group_ids)
        cached = self._cache.get("norms")
        if cached is None or cached[0] != self._gen:
            # BM25's length normalisation of every page and every document: the same for all terms and all
            # queries until the index changes
            dlen = self._dlen.view()
            avgdl = max(self._len_sum / n, 1.0)
            card = alive & (self._pages.view() <= CARD_PAGES)
            norms = (K1 * (1.0 - B + B * dlen / avgdl), *_group_norms(groups, np.where(alive, dlen, 0.0), ng),
                     card, *_group_norms(groups, np.where(card, dlen, 0.0), ng))
            self._cache["norms"] = cached = (self._gen, norms)
        pnorm, gnorm, n_g, card, cnorm, n_c = cached[1]
        gscores = np.zeros(ng, np.float64)
        cscores = np.zeros(ng, np.float64)
        for term, qtf in q.items():
            found = self._postings(term)
            if found is None:
                continue
            docs, tfs = found
            keep = alive[docs]
            docs, tfs = docs[keep], tfs[keep]
            df = len(docs)
            if not df:
                continue
            idf = np.log1p((n - df + 0.5) / (df + 0.5))
            scores[docs] += (qtf * idf) * tfs * (K1 + 1.0) / (tfs + pnorm[docs])
            if DOC_WEIGHT:
                gscores += _group_bm25(groups[docs], tfs, qtf, gnorm, n_g)
            if CARD_WEIGHT:
                on = card[docs]
                if on.any():
                    cscores += _group_bm25(groups[docs[on]], tfs[on], qtf, cnorm, n_c)
        return scores, gscores, cscores

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(doc ids, weighted term frequencies) of `term` over every segment, dead pages included; None when no
        page holds it. Called under the lock."""
        tid = self._term_ids.get(term)
        if tid is None:
            return None
        found = [p for seg in self._segments if (p := seg.postings(tid)) is not None]
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        return np.concatenate([d for d, _t in found]), np.concatenate([t for _d, t in found])

    def _keyword_scores(self, q: Counter) -> tuple[np.ndarray, np.ndarray]:
        """(final keyword score per page: its own BM25F plus the evidence of its document as a whole, that
        evidence alone per page: what a page without any of the query's words inherits from its document)."""
        scores, gscores, cards = self._bm25(q)
        doc = np.zeros_like(scores)
        if DOC_WEIGHT and scores.any():
            top = float(scores.max())
            gmax = float(gscores.max()) or 1.0
            # dead slots keep their group: callers that use `doc` alone must mask them (search does)
            doc = ((DOC_WEIGHT * top / gmax) * gscores[self._dgroup.view()]).astype(np.float32)
            if CARD_WEIGHT and cards.any():
                doc += ((CARD_WEIGHT * top / float(cards.max())) * cards[self._dgroup.view()]).astype(np.float32)
            scores = np.where(scores > 0, scores + doc, 0.0).astype(np.float32)
        return scores, doc
