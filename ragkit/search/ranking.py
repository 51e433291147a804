"""Fusion and ranking: the phrase bonus, the pages a query names, top-n selection, keyword + meaning fusion."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from ragkit.core.pagefile import FRONT_PAGES
from ragkit.core.text import STOPWORDS, detect_lang, search_terms
from ragkit.search.periods import another_of_kind, specific_periods
from ragkit.search.vectors import DENSE_WEIGHT, RECALL_N

if TYPE_CHECKING:
    from ragkit.search.vectors import _Usem3

log = logging.getLogger(__name__)

# Meaning: how many keyword candidates the dense model re-ranks (its weight: vectors.DENSE_WEIGHT, see fuse()).
RERANK_N = 20
# Phrase/proximity: the best PHRASE_N keyword candidates gain up to PHRASE_WEIGHT x the top score for holding
# the query's adjacent term pairs.
PHRASE_N = 50
PHRASE_WEIGHT = 1.0
# A query that names a page ("on page 12", "the 3rd slide", "12ページ", "12페이지", "the cover") lifts the
# matching pages with that number by this share of the best score: it still has to match the query's words.
PAGE_REF_WEIGHT = 0.3
# A question naming a year prefers the documents that report that year: a document reports the year its first
# FRONT_PAGES pages name most often (a cover says "fiscal year ended ... 2019"; later pages compare three years). Their pages that match
# the question gain YEAR_WEIGHT x the best score.
YEAR_WEIGHT = 0.2
# A question naming a fiscal period ("2025年3月期 第3四半期", "FY2024 Q3", "the quarter ended March 31, 2024")
# prefers the documents whose first FRONT_PAGES pages report exactly that period (search/periods.py): their
# matching pages gain PERIOD_WEIGHT x the best score, so a neighbouring period's report of the same company,
# which shares nearly every word, does not come first.
PERIOD_WEIGHT = 0.5


def fuse(kw: np.ndarray, sims: np.ndarray) -> np.ndarray:
    """Keyword candidates re-ranked by meaning: the keyword score (scaled to the best candidate) plus
    DENSE_WEIGHT x cosine similarity. The dense model is weaker than keywords (NOTES-dependencies.md), so it
    only reorders pages that keywords already found, and never by more than its weight."""
    top = float(kw.max()) if len(kw) else 1.0
    return kw / (top or 1.0) + DENSE_WEIGHT * sims


class _Ranking:
    """Ranking steps of Index.search (a part of Index: the attributes are Index's)."""

    def _with_recalled(self, emb: _Usem3, query: str, prefix: str, rows: list[tuple[int, str, str]],
                       kw: np.ndarray, sims: np.ndarray, k: int, worded: np.ndarray
                       ) -> tuple[list[tuple[int, str, str]], np.ndarray]:
        """The fused candidates with the pages found by meaning alone put first (see _dense_recall); `worded`
        marks the pages that hold a query word. With no candidate (a question in another language than every
        page) meaning alone is all there is: the vectors it needs are made now, not in the background."""
        skip = worded.copy()
        skip[[d for d, _r, _s in rows]] = True
        try:
            found = self._dense_recall(emb.encode_query(query), prefix, skip,
                                       float(sims.max()) if len(sims) else 0.0, min(k, RECALL_N), wait=not rows)
        except Exception as e:  # noqa: BLE001 - meaning is a bonus: never fail a search because of it
            log.warning("finding pages by meaning skipped: %s", e)
            return rows, kw
        if not found:
            return rows, kw
        with self._lock:
            extra = [(d, self._rels[d], self._shas[d]) for d, _sim in found]
        # above every keyword candidate: those score at most 1 + DENSE_WEIGHT x (best cosine among them)
        lifted = np.array([1.0 + DENSE_WEIGHT * sim for _d, sim in found])
        return extra + rows, np.concatenate([lifted, kw])

    def _phrase_bonus(self, query: str, rows: list[tuple[int, str, str]], kw: np.ndarray) -> np.ndarray:
        """Candidates holding the query's adjacent term pairs gain up to PHRASE_WEIGHT x the best score. A pair
        counts as much as the lighter of its two terms (see Index._frame_w): "one decimal place" is how to
        answer, not what to find. Latin-script questions only: pairs of CJK bigrams count the same characters
        twice, and the bonus cost the Japanese and Korean development sets first ranks (docs/search.md)."""
        if not PHRASE_WEIGHT or detect_lang(query) != "en":
            return kw  # a CJK question's terms are overlapping bigrams: they already hold its word order
        toks = [t for t in search_terms(query) if t not in STOPWORDS]
        ids = np.array([self._term_ids.get(t, -1) for t in toks], dtype=np.int64)
        if len(ids) < 2 or len(rows) < 2:
            return kw
        w = {t: self._frame_w(t) for t in set(toks)}
        weight: dict[int, float] = {}
        for a, b, ta, tb in zip(ids[:-1], ids[1:], toks[:-1], toks[1:], strict=True):
            if a >= 0 and b >= 0:
                key = (int(a) << 32) | int(b)
                weight[key] = max(weight.get(key, 0.0), min(w[ta], w[tb]))
        if not weight:
            return kw
        qp = np.array(sorted(weight), dtype="<u8")
        qw = np.array([weight[int(k)] for k in qp])
        rels = [r for _d, r, _s in rows]
        blobs = dict(self._conn.execute(
            f"SELECT rel, pairs FROM pages WHERE rel IN ({','.join('?' * len(rels))})", rels).fetchall())
        matched = np.zeros(len(rels))
        for i, r in enumerate(rels):
            have = np.frombuffer(blobs.get(r) or b"", dtype="<u8")
            if len(have):
                pos = np.minimum(np.searchsorted(have, qp), len(have) - 1)
                matched[i] = float(qw[have[pos] == qp].sum())
        return kw + (PHRASE_WEIGHT * float(kw.max()) / len(qp)) * matched

    def _report_years(self) -> np.ndarray:
        """Per document (group id): the year named most often on its first FRONT_PAGES pages (the later one on
        a tie), 0 when none. From the postings of the year terms; cached until the index changes. Called under
        the lock."""
        cached = self._cache.get("years")
        if cached is None or cached[0] != self._gen:
            groups, pages, alive = self._dgroup.view(), self._pages.view(), self._alive.view()
            ng = len(self._group_ids)
            best = np.zeros(ng, np.int32)
            most = np.zeros(ng, np.float64)
            for year in range(1990, 2041):
                found = self._postings(str(year))
                if found is None:
                    continue
                docs, tfs = found
                keep = alive[docs] & (pages[docs] >= 1) & (pages[docs] <= FRONT_PAGES)
                n = np.bincount(groups[docs[keep]], weights=tfs[keep], minlength=ng)
                better = (n > 0) & (n >= most)
                best[better], most[better] = year, n[better]
            self._cache["years"] = cached = (self._gen, best)
        return cached[1]

    def _year_bonus(self, query_years: set[int], scores: np.ndarray) -> np.ndarray:
        """Pages of documents that report a year the query names gain YEAR_WEIGHT x the best score (only pages
        that match the query otherwise, and only when some but not all matching documents report it)."""
        if not (YEAR_WEIGHT and query_years and scores.any()):
            return scores
        reported = self._report_years()
        hit = np.isin(reported, list(query_years))[self._dgroup.view()] & (scores > 0)
        if not hit.any() or hit.sum() == np.count_nonzero(scores):
            return scores
        return np.where(hit, scores + YEAR_WEIGHT * float(scores.max()), scores).astype(np.float32)

    def _period_groups(self, term: str) -> np.ndarray:
        """Per document (group id): whether its first FRONT_PAGES pages hold the period term. Cached until the
        index changes. Called under the lock."""
        key = ("period", term)
        cached = self._cache.get(key)
        if cached is None or cached[0] != self._gen:
            hit = np.zeros(len(self._group_ids), bool)
            found = self._postings(term)
            if found is not None:
                docs, _tfs = found
                pages = self._pages.view()[docs]
                keep = self._alive.view()[docs] & (pages >= 1) & (pages <= FRONT_PAGES)
                hit[self._dgroup.view()[docs[keep]]] = True
            self._cache[key] = cached = (self._gen, hit)
        return cached[1]

    def _period_bonus(self, query_periods: list[str], scores: np.ndarray) -> np.ndarray:
        """Pages of documents that report the most specific period the query names gain PERIOD_WEIGHT x the best
        score (only pages that match the query otherwise, and only when some but not all matching documents
        report it)."""
        terms = specific_periods(query_periods)
        if not (PERIOD_WEIGHT and terms and scores.any()):
            return scores
        groups = np.zeros(len(self._group_ids), bool)
        for t in terms:
            groups |= self._period_groups(t)
        hit = groups[self._dgroup.view()] & (scores > 0)
        if not hit.any() or hit.sum() == np.count_nonzero(scores):
            return scores
        return np.where(hit, scores + PERIOD_WEIGHT * float(scores.max()), scores).astype(np.float32)

    def _period_conflicts(self, query_periods: list[str], groups: np.ndarray) -> np.ndarray:
        """Which of these documents (group ids) report another period of the same kind than the most specific one
        the query names, and not that one: a neighbouring period's report ("第2四半期" asked "第3四半期"). None
        when no document reports the period asked: a later report's comparative figures may then answer it."""
        terms = specific_periods(query_periods)
        out = np.zeros(len(groups), bool)
        if not (PERIOD_WEIGHT and terms):
            return out
        asked = np.zeros(len(self._group_ids), bool)
        for t in terms:
            asked |= self._period_groups(t)
        if not asked.any():
            return out
        other = np.zeros(len(self._group_ids), bool)
        for t in self._period_vocabulary():
            if another_of_kind(terms, t):
                other |= self._period_groups(t)
        return (other & ~asked)[groups]

    def _period_vocabulary(self) -> list[str]:
        cached = self._cache.get("period_terms")
        if cached is None or cached[0] != self._gen:
            self._cache["period_terms"] = cached = (self._gen, [t for t in self._term_ids
                                                                if t.startswith(("§fy", "§end"))])
        return cached[1]

    def _last_pages(self) -> np.ndarray:
        """Mask of the pages that are the last (highest-numbered) of their document. Called under the lock."""
        cached = self._cache.get("last")
        if cached is None or cached[0] != self._gen:
            groups, pages = self._dgroup.view(), self._pages.view()
            live = np.where(self._alive.view(), pages, -1)
            top = np.full(len(self._group_ids), -1, dtype=np.int64)
            np.maximum.at(top, groups, live)
            self._cache["last"] = cached = (self._gen, (live == top[groups]) & (live > 0))
        return cached[1]

    @staticmethod
    def _top(scores: np.ndarray, n: int) -> np.ndarray:
        cand = np.flatnonzero(scores > 0)
        if len(cand) > n:
            cand = cand[np.argpartition(-scores[cand], n - 1)[:n]]
        return cand[np.lexsort((cand, -scores[cand]))]
