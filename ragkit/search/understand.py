"""What a query asks for, as weighted terms, the same for every engine: ragkit's terms of the query (stemmed words,
CJK bigrams, names), typos read as the indexed words one edit away, synonyms, question-frame words weighing
less, derived sub-tokens capped by their source, the caption labels it names ("Figure 4"), and the financial
statements it needs ("§balance").

    weighted_terms(query, stats, synonyms) -> Counter   # term -> weight
    TermStats: what an engine answers about its terms (known, page frequencies, page count)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from ragkit.core.text import name_forms, search_terms
from ragkit.search.query import derived_terms, frame_weight, label_refs
from ragkit.search.statements import asked_statements
from ragkit.search.synonyms import Synonyms

# query understanding switches (benchmarks turn them off to measure each one)
FRAME_WEIGHTS = True
SYNONYMS = True
SUBTOKEN_CAP = True
# A capitalised word of the query is searched as its stem and, with this share of a word's weight on top, as
# itself (text.name_forms).
NAME_WEIGHT = 0.5
# A financial statement a question needs (statements.asked_statements) weighs as this share of one of its words.
STATEMENT_WEIGHT = 0.25


class TermStats(Protocol):
    n: int  # live pages

    def known(self, terms: Iterable[str]) -> set[str]:
        """The terms some page holds (or held): the vocabulary a typo is read against."""

    def df(self, terms: Iterable[str]) -> dict[str, int]:
        """How many live pages hold each term."""

    def near(self, words: Iterable[str]) -> dict[str, set[str]]:
        """The known terms one edit away (query.one_edit) of each word that has some: what a typo may have
        meant."""


def idf(df: int, n: int) -> float:
    return float(math.log1p((max(n, 1) - df + 0.5) / (df + 0.5)))


def weighted_terms(query: str, stats: TermStats, synonyms: Synonyms | None) -> Counter:
    """The query's terms and their weights (stopwords dropped unless nothing else is left). A word no page has
    ever held (a typo: "Netfilx") is replaced by the indexed words one edit away ("netflix"), sharing its
    weight."""
    names = name_forms(query)
    toks = search_terms(query, drop_stopwords=True, names=names) or search_terms(query, names=names)
    counts = Counter(toks)
    known = stats.known(counts)
    unknown = [t for t in counts if t not in known]
    near_known = stats.near(unknown) if unknown else {}
    q: Counter = Counter()
    for tok, n in counts.items():
        near = sorted(near_known.get(tok, ()))
        if near:
            for v in near:
                q[v] += n / len(near)
        else:
            q[tok] += n
    for name, st in names.items():
        if name in q and st in q:
            q[name] *= NAME_WEIGHT
    if SYNONYMS and synonyms is not None:
        synonyms.expand(query, q)
    _weigh(query, q, stats)
    for label in label_refs(query):
        q[label] += 1
    if STATEMENT_WEIGHT:
        for label in asked_statements(query):
            q[label] = max(q[label], STATEMENT_WEIGHT)
    return q


def _weigh(query: str, q: Counter, stats: TermStats) -> None:
    """Question-frame words weigh less, and a term derived from a word of letters and digits ("fy" of "FY2019")
    never outweighs its source (a rare sub-token would otherwise be the heaviest term of the query)."""
    derived = derived_terms(query) if SUBTOKEN_CAP else {}
    dfs = stats.df(set(q) | set(derived))
    n = stats.n
    if FRAME_WEIGHTS:
        for t in q:
            q[t] *= frame_weight(t, dfs[t], n)
    for src, subs in derived.items():
        src_df = dfs[src]
        # an unknown source: the most common of its parts stands for it
        cap = idf(src_df, n) if src_df else min((idf(dfs[s], n) for s in subs if s in q), default=float("inf"))
        for s in subs:
            if s in q and s != src and dfs[s]:
                q[s] *= min(1.0, cap / idf(dfs[s], n))


def frame_weights(terms: Iterable[str], stats: TermStats) -> dict[str, float]:
    """Each term's question-frame weight (1 = not a frame word), or 1 with FRAME_WEIGHTS off."""
    terms = set(terms)
    if not FRAME_WEIGHTS:
        return dict.fromkeys(terms, 1.0)
    dfs = stats.df(terms)
    return {t: frame_weight(t, dfs[t], stats.n) for t in terms}
