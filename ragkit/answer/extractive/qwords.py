"""The question's words as the answerer weighs them: each word's terms and IDF weight (a typo read as the
corpus word one edit away, letters glued to digits split), what a text may hold instead (synonyms), how far
a text covers the question (`coverage`), and the share of it no page of the database names (`unnamed_share`).

    weigh(question_words(q), n, df, alts=...) -> list[QWord]
    coverage(qwords, [(terms, level), ...]) -> float in [0, 1]
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ragkit.answer.extractive.corpus import idf
from ragkit.answer.extractive.terms import verb_noun
from ragkit.core import text as T

HIRAGANA_ONLY = re.compile("^[\u3040-\u309f]+$")
HIRAGANA_WEIGHT = 0.1  # hiragana-only bigrams are mostly inflection and particles


@dataclass
class QWord:
    """One content word of the question, its terms (CJK bigrams, or one Latin word) and its weight."""

    word: str
    terms: list[str]
    weight: float  # mean IDF of its terms (hiragana-only bigrams discounted)
    cjk: bool
    alts: tuple[frozenset[str], ...] = ()  # what a text may hold instead (terms.alternatives: synonym rules)
    alt_found: float = 1.0  # how much of the word such a text holds

    def found(self, terms: set[str]) -> float:
        """Share of the word found in a term set. A CJK word counts by characters: a character inside a
        matched bigram counts 1, one only present on its own 0.5 ("発売日" vs "…10日全国発売" -> 5/6). A set
        holding all the terms of one of its alternatives holds `alt_found` of it."""
        if not self.cjk and any(t in terms for t in self.terms):
            return 1.0
        instead = self.alt_found if self.alts and any(a <= terms for a in self.alts) else 0.0
        if not self.cjk:
            return instead
        w = self.word
        if len(w) == 1:
            return 1.0 if w in terms else instead
        got = [0.0] * len(w)
        for i in range(len(w) - 1):
            if w[i : i + 2] in terms:
                got[i] = got[i + 1] = 1.0
        for i, ch in enumerate(w):
            if got[i] == 0.0 and ch in terms:
                got[i] = 0.5
        return max(sum(got) / len(w), instead)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"
RESPELL_MIN = 5  # shorter words are not respelt: one edit is most of them ("fifa" is not "fifo")


def respell_term(term: str, df: Counter) -> str:
    """A Latin term no page holds, replaced by the most frequent corpus term one edit away ("netfilx" ->
    "netflix"), as search does: a misspelt word must not make the answerer refuse what search found. Terms
    shorter than RESPELL_MIN stay as they are."""
    if df.get(term, 0) or len(term) < RESPELL_MIN or not term.isascii() or not term.isalpha():
        return term
    # edits inside the word only: a changed last letter is another word more often than a typo ("latinos" is
    # not "latin", "fifa" not "fifo"), while typos sit inside ("neflix", "netfilx", "americen")
    splits = [(term[:i], term[i:]) for i in range(len(term) - 1)]
    edits = {a + b[1:] for a, b in splits}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 2}
    edits |= {a + c + b[1:] for a, b in splits for c in _LETTERS}
    edits |= {term[:i] + c + term[i:] for i in range(1, len(term)) for c in _LETTERS}
    best = max((e for e in edits if df.get(e, 0)), key=lambda e: (df[e], e), default=None)
    return best or term


_GLUED = re.compile(r"^([a-z]+)(\d+)$|^(\d+)([a-z]+)$")


def weigh(words: list[tuple[str, list[str]]], n: int, df: Counter, *, respell: bool = True,
          alts: dict[str, tuple[frozenset[str], ...]] | None = None, alt_found: float = 1.0) -> list[QWord]:
    """The question's words with their weights, and their alternatives (`alts`: term -> what a text may hold
    instead, holding `alt_found` of the word). With `respell`, a Latin word no page holds is read as the
    corpus word one edit away (`respell_term`), and letters glued to digits ("FY2021", "table1") as two words."""
    out = []
    for word, terms in words:
        if respell and len(terms) == 1 and not df.get(terms[0], 0) and (m := _GLUED.match(terms[0])):
            parts = [x for x in m.groups() if x]
            out += weigh([(x, [x]) for x in parts if len(x) > 1 or x.isdigit()], n, df, respell=True, alts=alts,
                         alt_found=alt_found)
            continue
        # a Korean 하다/되다 verb the question writes ("사용해도") is its noun ("사용") when pages hold the noun; when
        # none does it stays as written, its bigrams a paraphrase's partial match ("재임하며" over "임기는 5년으로 하며")
        # (a word still: read by its characters as the verb was, so a quote holding it holds the question's word
        # whole, checks.holds_whole)
        was_cjk = False
        if respell and (noun := verb_noun(word)) and noun[1] and all(df.get(t, 0) for t in noun[1]):
            word, terms, was_cjk = *noun, True
        instead = tuple(dict.fromkeys(a for t in terms for a in (alts or {}).get(t, ())))
        fixed = [respell_term(t, df) for t in terms] if respell and not instead else terms  # a known term
        if fixed != terms:
            word, terms = " ".join(fixed), fixed
        w = [idf(n, df.get(t, 0)) * (HIRAGANA_WEIGHT if HIRAGANA_ONLY.match(t) else 1.0) for t in terms]
        cjk = bool(T.CJK_RE.match(word)) and "".join(terms) != word  # bigrams (not one Latin/digit word)
        out.append(QWord(word, terms, sum(w) / len(w), cjk or was_cjk or (len(word) == 1 and bool(T.CJK_RE.match(word))),
                         instead, alt_found))
    return out


def coverage(qwords: list[QWord], levels: list[tuple[set[str], float]]) -> float:
    """IDF-weighted share of the question's words found in the evidence, in [0, 1].

    Each word counts by the share of it found (`QWord.found`) at the weight of the best evidence level
    that holds it (the engine's: the sentence itself 1.0, its headings, elsewhere on its page).
    """
    total = sum(w.weight for w in qwords)
    if total <= 0:
        return 0.0
    got = 0.0
    for w in qwords:
        got += w.weight * max(level * w.found(terms) for terms, level in levels)
    return got / total


def respelt(question: str, df: Counter) -> str:
    """The question with its misspelt Latin words respelt (respell_term): the embedding model reads "passwrods" as
    another word, where search and the word checks already read "passwords"."""
    def fix(m: re.Match) -> str:
        w = m.group(0).lower()
        stem = T.stem(w)
        if df.get(w) or df.get(stem):
            return m.group(0)
        fixed = respell_term(stem, df)
        return m.group(0) if fixed == stem else fixed

    return re.sub(r"[A-Za-z]+", fix, question)


def unnamed_share(qwords: list[QWord], df: Counter, only: set[str] | None = None) -> float:
    """IDF-weighted share of the question's words (`weigh`ed: respelt) that no page of the database holds (counting only
    the words in `only` when given). Numbers, Latin words of one or two letters, lone CJK characters and runs of
    hiragana are left out of this share: they are figures, abbreviations, word stems and inflections, not names
    ("FY", "Q3", 空 of 空ける, えればよい of 替えればよい)."""
    total = sum(w.weight for w in qwords) or 1.0
    missing = sum(w.weight for w in qwords if not any(df.get(t, 0) for t in w.terms)
                  and not any(all(df.get(t, 0) for t in a) for a in w.alts)
                  and not (w.word.isascii() and (w.word.isdigit() or len(w.word) <= 2)) and len(w.word) > 1
                  and not HIRAGANA_ONLY.match(w.word) and (only is None or w.word in only))
    return missing / total


_CASED = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def name_words(question: str) -> set[str]:
    """The Latin words a question writes as names (casefolded): capitalised past its first word, or with a
    capital inside ("FIFA", "Japan", "mAh", "iPhone")."""
    found = list(_CASED.finditer(question))
    return {m.group(0).casefold() for i, m in enumerate(found)
            if any(ch.isupper() for ch in m.group(0)[1:]) or (i > 0 and m.group(0)[0].isupper())}
