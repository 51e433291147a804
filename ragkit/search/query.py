"""Query understanding: what a question names besides its words — pages ("page 12", "the last page", "12ページ"),
figures and tables ("Figure 4", "表2"), and the indexed words a misspelt word was meant to be."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from ragkit.core.pagefile import has_text
from ragkit.core.text import normalize, search_terms, tokenize
from ragkit.search.analysis import _label

_LABEL_REF = re.compile(
    r"(?<![^\W\d_])(figures?|figs?|tables?|charts?|exhibits?|図|表|그림|표)\.?\s*"
    r"(\d{1,3}(?:\s*(?:[,.&、・~〜\-–]|and|or|to)\s*(?:figures?|figs?|tables?|図|表)?\.?\s*\d{1,3})*)")
_LABEL_ITEM = re.compile(r"(\d+)(?:\s*([.\-–~〜]|to)\s*(?:figures?|figs?|tables?|図|表)?\.?\s*(\d+))?")


def label_refs(query: str) -> list[str]:
    """The caption-label terms a query names: "In Figure 4", "Figures 5 and 6", "Fig. 3", "Table1-1", "図4",
    "表 2", "그림 3". "Figures 1-4" is read both ways: figures 1 to 4, and figure 1-4 of a chapter."""
    out: list[str] = []
    for m in _LABEL_REF.finditer(normalize(query)):
        kind = m[1] if not m[1].isascii() else m[1][:-1] if m[1].endswith("s") else m[1]
        for a, sep, b in _LABEL_ITEM.findall(m[2]):
            if b and sep in ".-–":
                out.append(_label(kind, a, b))
            if b and sep != "." and 0 < int(b) - int(a) <= 10:
                out.extend(_label(kind, str(n)) for n in range(int(a), int(b) + 1))
            elif not b or sep != "." and sep not in "-–":
                out.append(_label(kind, a))
    return list(dict.fromkeys(out))


_ORDINALS = {w: i for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth".split(), start=1)}
_CARDINALS = {w: i for i, w in enumerate(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split(), start=1)}
LAST_PAGE = -1  # page_refs(): "the last page" (the highest page number of each document)
_NUMS = r"\d{1,4}(?:\s*(?:,|and|&|-|–|to|through)\s*(?:pages?\s*)?\d{1,4})*"
_RANGE = re.compile(r"\d\s*(?:-|–|to|through)\s*(?:pages?\s*)?\d")
_PAGE_REF = re.compile(
    rf"\b(?:pages?|pp?\.|slides?)\s*\(?\s*(?P<en>{_NUMS})"
    rf"|\b(?:page|slide)\s+(?P<card>{'|'.join(_CARDINALS)})\b"
    r"|\b(?P<nth>\d{1,4})(?:st|nd|rd|th)\s+(?:page|slide)\b"
    rf"|\b(?P<word>{'|'.join(_ORDINALS)})\s+(?:page|slide)\b"
    r"|(?P<cover>\b(?:the|front)\s+cover\b|\bcover\s+page\b|表紙|표지)"
    r"|(?P<last>\b(?:last|final)\s+(?:page|slide)\b|\bback\s+cover\b|最後のページ|最終ページ|裏表紙|"
    r"最后一页|마지막\s*(?:페이지|쪽)|뒤표지)"
    r"|第\s*(?P<zh>\d{1,4})\s*[页頁]"
    r"|(?P<cjk>\d{1,4})\s*(?:ページ|頁|페이지|쪽)"
)


# an example of the answer's form names no page or year: "formatted as a list like ['Page 2', 'Page 4']"
_EXAMPLE = re.compile(r"(?:\be\.g\.|\bfor example|\blike|\bsuch as|例えば|예를 들어|예:|例:)[,:]?\s*\[[^\]]*\]",
                      re.IGNORECASE)


def without_examples(query: str) -> str:
    """The query without the examples of its answer's form ("... in a list like ['2006', '2007']")."""
    return _EXAMPLE.sub(" ", query)


def may_show(body: str, page: int, printed: str, refs: set[int], last: Callable[[], bool]) -> bool:
    """Whether a ranked page may be a hit: a page with text, always; one without (a scan, a photo, an empty slide:
    only pagefile.NO_TEXT_MARKER) only when the query names it by number (`refs`: page_refs of the query; "how
    many cars are on page 3"; "the last page" names it when `last()` says it is its document's last page), which a
    reader can then open. Otherwise nothing on it matched: its folder's words did, or its vector, the embedding of
    no text, which lies close to any query no page matches (a query of replacement characters found an empty
    slide first, "by meaning"). `last` is asked only for such a page of a query naming the last page."""
    if has_text(body):
        return True
    printed = printed.strip()
    return bool(refs) and (page in refs or (printed.isdigit() and int(printed) in refs)
                           or (LAST_PAGE in refs and last()))


def page_refs(query: str) -> set[int]:
    """Page numbers a query names: "page 12", "page (3)", "page three", "pages 3 and 4", "pp. 5-7",
    "from page 3 to page 10", "the 3rd page", "the first slide", "the cover" (1), "12ページ", "第12页",
    "12페이지". "The last page", "最後のページ" and "마지막 페이지" give LAST_PAGE. Not the pages of an example of
    the answer's form ("list them like ['Page 2', 'Page 4']")."""
    out: set[int] = set()
    for m in _PAGE_REF.finditer(without_examples(normalize(query))):
        if m["en"]:
            nums = [int(x) for x in re.findall(r"\d+", m["en"])]
            if _RANGE.search(m["en"]) and len(nums) == 2 and 0 < nums[1] - nums[0] <= 20:
                nums = list(range(nums[0], nums[1] + 1))
            out.update(nums)
        elif m["nth"] or m["zh"] or m["cjk"]:
            out.add(int(m["nth"] or m["zh"] or m["cjk"]))
        elif m["word"]:
            out.add(_ORDINALS[m["word"]])
        elif m["card"]:
            out.add(_CARDINALS[m["card"]])
        elif m["cover"]:
            out.add(1)
        elif m["last"]:
            out.add(LAST_PAGE)
    out.discard(0)
    return out


def one_edit(word: str) -> set[str]:
    """Latin words one edit away from `word` (a letter deleted, inserted, replaced, or two swapped): the
    spellings a typo most often comes from. Only for words of 5+ letters (short words have too many
    neighbours to guess from) and never for numbers."""
    if len(word) < 5 or not (word.isascii() and word.isalpha()):
        return set()
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: set[str] = set()
    for i in range(len(word) + 1):
        a, b = word[:i], word[i:]
        if b:
            out.add(a + b[1:])
            out.update(a + c + b[1:] for c in letters)
        if len(b) > 1:
            out.add(a + b[1] + b[0] + b[2:])
        out.update(a + c + b for c in letters)
    out.discard(word)
    return out


# --------------------------------------------------------------------------------------------- query weights
# Question-frame words ("round", "decimal", "answer", "percentage", "according", "何", "ですか"...) say how to
# answer, not where: they weigh less. Which words are frame words is learned, per language, from how questions
# are phrased: a term in a larger share of questions than of pages is a frame word, by how much larger. The
# question side is a table of question document frequencies (question_terms.json, made by
# learn_question_terms from question sets; see benchmarks/search_eval.py); the page side is the index's own.
FRAME_ALPHA = 1.0  # weight = 1 / (1 + FRAME_ALPHA x ln(question share / page share)) when that ratio is > 1
FRAME_MIN_QUESTIONS = 3  # a term must occur in this many of the learning questions (names occur in one or two)
_FRAME_FILE = Path(__file__).with_name("question_terms.json")
_QUESTION_TERMS: dict | None = None


def _script(text: str) -> str:
    """"ko" for Hangul, "ja" for kana or Han, "" for the rest: which questions can hold a term."""
    if _HANGUL.search(text):
        return "ko"
    return "ja" if _HAN_KANA.search(text) else ""


def learn_question_terms(questions: Iterable[str]) -> dict:
    """{"questions": n, "scripts": {"ja": n_ja, "ko": n_ko}, "df": {term: questions holding it}} over the search
    terms of `questions` (stopwords dropped), keeping terms in at least FRAME_MIN_QUESTIONS of them. A Japanese or
    Korean term's share is taken among the questions written in its script, not among all of them (a table
    learned mostly from English questions would otherwise call no Japanese word a frame word)."""
    df: Counter = Counter()
    scripts: Counter = Counter()
    n = 0
    for q in questions:
        n += 1
        scripts.update({s for s in (_script(c) for c in q) if s})
        df.update(set(search_terms(q, drop_stopwords=True)))
    return {"questions": n, "scripts": dict(sorted(scripts.items())),
            "df": {t: c for t, c in sorted(df.items()) if c >= FRAME_MIN_QUESTIONS}}


def question_terms() -> dict:
    """The built-in table (question_terms.json), or the one set with set_question_terms."""
    global _QUESTION_TERMS
    if _QUESTION_TERMS is None:
        try:
            _QUESTION_TERMS = json.loads(_FRAME_FILE.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            _QUESTION_TERMS = {"questions": 0, "df": {}}
    return _QUESTION_TERMS


def set_question_terms(table: dict | None) -> None:
    """Use `table` (from learn_question_terms) instead of the built-in one; None: the built-in one again."""
    global _QUESTION_TERMS
    _QUESTION_TERMS = table


def frame_weight(term: str, page_df: int, n_pages: int, table: dict | None = None) -> float:
    """How much a query term counts (1 = fully): less the more often questions hold it compared with pages."""
    table = question_terms() if table is None else table
    qdf = table["df"].get(term) if table["questions"] else None
    if not qdf:
        return 1.0
    script = _script(term)
    asked = (table.get("scripts") or {}).get(script) if script else None
    ratio = (qdf / (asked or table["questions"])) / ((page_df + 1) / (n_pages + 1))
    return 1.0 / (1.0 + FRAME_ALPHA * math.log(ratio)) if ratio > 1.0 else 1.0


_HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
_HAN_KANA = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")
_RUNS = re.compile(r"[a-z]+|[0-9]+")


def derived_terms(query: str) -> dict[str, list[str]]:
    """Source token -> the terms derived from it: a word of letters and digits is also indexed as its runs
    ("fy2019" -> "fy", "2019"; see text.search_terms). A derived term must never outweigh its source."""
    out: dict[str, list[str]] = {}
    for tok in tokenize(query, drop_stopwords=True):
        if tok.isascii() and not tok.isalpha() and not tok.isdigit():
            out[tok] = [t for run in _RUNS.findall(tok) for t in search_terms(run)]
    return out


# "FY2019", "fiscal 2019", "fiscal year 2019", "2019年度", "2019 회계연도", or a bare year
_YEAR = re.compile(r"(?<![\d.,])(?:fy\s*'?)?((?:19|20)\d\d)(?![\d.,%])")


def years(query: str) -> set[int]:
    """The years (1900-2099) a query names, fiscal or not: "FY2019" and "in 2019" both give 2019."""
    return {int(y) for y in _YEAR.findall(without_examples(normalize(query)))}
