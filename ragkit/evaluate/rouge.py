"""Summary metrics without a model: ROUGE-2 F1 against a reference summary and the word count, with one
tokenization for every language (Latin words and numbers as they are, each CJK character a token), so Japanese
and Korean summaries are measured too.

    rouge_tokens(text) -> list[str];  rouge2_f1(candidate, reference) -> float | None;  word_count(text) -> int
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

# a CJK ideograph, kana or hangul syllable is one token; a run of letters/digits (any other script) is one token
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
_WORD = rf"(?:(?![{_CJK}])[^\W_])+"
_TOKEN = re.compile(rf"[{_CJK}]|{_WORD}(?:[.,'’]{_WORD})*")


def rouge_tokens(text: str) -> list[str]:
    """NFKC, case-folded tokens: words and numbers ("2.5", "1,000", "don't" stay whole), CJK one character each."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text or "").casefold())


def rouge2_f1(candidate: str, reference: str) -> float | None:
    """ROUGE-2 F1: the harmonic mean of bigram recall and precision, bigram counts clipped. None when the
    reference has no bigram (nothing to measure against); 0.0 when the candidate has none."""
    ref = _bigrams(reference)
    if not ref:
        return None
    cand = _bigrams(candidate)
    overlap = sum((cand & ref).values())
    if not cand or not overlap:
        return 0.0
    recall = overlap / sum(ref.values())
    precision = overlap / sum(cand.values())
    return 2 * recall * precision / (recall + precision)


def _bigrams(text: str) -> Counter:
    t = rouge_tokens(text)
    return Counter(zip(t, t[1:], strict=False))


def word_count(text: str) -> int:
    """Words of a summary: tokens as ROUGE counts them (a CJK character counts as a word)."""
    return len(rouge_tokens(text))
