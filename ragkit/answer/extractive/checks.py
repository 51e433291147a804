"""What a quote and the documents hold of a question, looked at word by word (the engine's lexical checks):

    holds_whole(qwords, terms)          a CJK word held whole enough, not only in pieces of other words
    names_only(qwords, q_names, units)  the question's common words held only inside names (a subsidiary list)
    held_terms(text), years_named(q)    a page's terms with its abbreviated and era years; a question's years
    which_documents(q, qwords, docs)    the documents a question points at without naming one
    named_documents(q, qwords, ...)     the documents a question names that the cited one is not

docs/answer.md (step 6) says why each exists."""

from __future__ import annotations

import re
from pathlib import Path

from ragkit.answer.extractive.corpus import YEAR as _YEAR
from ragkit.answer.extractive.corpus import Documents
from ragkit.answer.extractive.qwords import HIRAGANA_ONLY, QWord, name_words
from ragkit.answer.extractive.terms import term_set
from ragkit.answer.extractive.units import Unit
from ragkit.core import text as T
from ragkit.search.periods import era_years
from ragkit.search.query import without_examples

_POINTS_AT_DOCUMENT = re.compile(
    r"\b(?:the|this|these)\s+(?:[\w-]+\s+)?(?:report|document|paper|article|brochure|guide|guidebook|manual"
    r"|presentation|slides|deck|study|survey|filing|booklet|handbook|leaflet|newsletter|proposal|agreement"
    r"|contract|pdf)s?\b"
    # words with an everyday sense ("the phone case", "in that case", "save the file") point only after "this"
    r"|\bthis\s+(?:case|file|letter|book|slide)\b"
    r"|\b(?:page|slide)\s*\(?\d+|\b(?:first|second|third|last|final|cover)\s+(?:page|slide)\b"
    r"|(?<![\u3400-\u9fff])(?:この|本|当該|同)(?:資料|文書|書類|報告書|レポート|論文|冊子|ガイド|マニュアル|書)"
    r"|이\s*(?:문서|보고서|자료|논문|책자|안내서)|这份|该(?:报告|文件|文档)|(?<![\u3400-\u9fff])本(?:报告|文件)",
    re.IGNORECASE)
# Words that only say where in the document to look: they never tell the documents apart.
_DOCUMENT_WORDS = frozenset(
    "report document paper article case file pdf brochure guide manual presentation slide deck book study survey "
    "filing letter booklet handbook leaflet newsletter proposal agreement contract page mention according "
    "資料 文書 書類 報告書 レポート 論文 冊子 ガイド マニュアル ページ 문서 보고서 자료 논문 책자 안내서 페이지".split())

_SUFFIX = re.compile(r"\.(?:pdf|docx|pptx)$", re.IGNORECASE)


def holds_whole(qwords: list[QWord], terms: set[str], carried: frozenset[str] = frozenset(),
                pages: set[str] | None = None) -> bool:
    """Whether `terms` hold more than half of some CJK word of the question (not a hiragana-only one); True when
    it has none. A CJK word is found by its bigrams and characters: "発売日" is 5/6 found in "…10日全国発売", but
    "営業時間" only half in "短時間" (時間), and pieces of words are other words ("短時間で済ませてください" is no
    opening hours). A `carried` word (_evidence) is looked for in `pages`, the quoted pages' terms."""
    cjk = [w for w in qwords if w.cjk and not HIRAGANA_ONLY.match(w.word)]
    return not cjk or any(w.found(pages if w.word in carried and pages is not None else terms) > 0.5 for w in cjk)


# A name: capitalised words in a row ("Capital Safety Group EMEA", "3M Australia Pty. Ltd.")
_NAME_RUN = re.compile(r"(?<![\w.])[A-Z][\w&'.-]*(?:[ \t]+[A-Z][\w&'.-]*)+")
NAME_RUN = 3  # words: two are often a row label or a title ("Total Revenue", "Executive Chairman")


def _names(text: str, qwords: list[QWord]) -> list[str]:
    """The names in a text that hold one word of the question, and not as their last word: runs of NAME_RUN or
    more capitalised words, not all in capitals (a heading: "F PSEUDOCODE FOR RETRIEVAL METHODS"). A run holding
    two of its words is a label of what is asked ("EPS Geographic Market Name"), and one ending in the word is a
    kind of it ("Executive Vice President", "Tree Traversal Algorithm"): the last word of an English noun phrase
    says what it is. In "Capital Safety Group EMEA" the word only names a company."""
    out = []
    for m in _NAME_RUN.finditer(text):
        run = m.group(0)
        words = run.split()
        if len(words) < NAME_RUN or run.upper() == run:
            continue
        terms = term_set(run)
        held = [w for w in qwords if w.found(terms)]
        if len(held) == 1 and not held[0].found(term_set(words[-1])):
            out.append(run)
    return out


def names_only(qwords: list[QWord], q_names: set[str], chosen: list[Unit]) -> bool:
    """Whether the quoted units hold every Latin word the question writes as a common word (not a name it
    capitalises, `q_names`; three letters or more, not a figure) only inside names (`_names`), and neither
    elsewhere in their text nor in their headings: "What is the capital of France?" answered from 3M's list of
    subsidiaries, "Capital Safety Group EMEA | France". What is asked of the name is then nowhere in the quote.
    False when the question has no such word, or when the quote lacks one of them (what the quote lacks the
    word check weighs already: "What is the position of Ibrahim?" is answered by the heading "Ibrahim" over
    "Core Assurance")."""
    asked = [w for w in qwords if not w.cjk and w.word.isascii() and w.word.isalpha() and len(w.word) > 2
             and w.word not in q_names]
    if not asked:
        return False
    inside: set[str] = set()
    plain: set[str] = set()
    for u in chosen:
        text = u.text
        for run in _names(u.text, qwords):
            inside |= term_set(run)
            text = text.replace(run, " ")
        plain |= term_set(text) | u.ctx_terms
    return all(w.found(inside) for w in asked) and not any(w.found(plain) for w in asked)


# A year a table abbreviates ("´08년 43척", "’08. 10. 27", "FY '19"): an apostrophe and its last two digits
_SHORT_YEAR = re.compile(r"(?<![\w'´’‘`])['´’‘`](\d\d)(?!\d)")


def short_years(text: str) -> set[str]:
    """The years a text writes with an apostrophe and two digits, in both centuries ("’08" -> 1908, 2008)."""
    return {c + d for d in _SHORT_YEAR.findall(text) for c in ("19", "20")}


def held_terms(text: str) -> set[str]:
    """What a page holds, as a question's words and years are looked up in it: its terms, and the Western years
    of the years it abbreviates ("FY '19") or writes by era (令和5年)."""
    return term_set(text) | short_years(text) | era_years(text)


def years_named(question: str) -> set[str]:
    """The years (1900-2099) a question names, Western or by Japanese era (not in an example of the answer's
    form: "list them like ['2014', '2018']")."""
    question = without_examples(question)
    return set(_YEAR.findall(question)) | era_years(question)


def document_name(doc: str) -> str:
    """How a document (corpus.document_id) is named to the user: its file name without the extension."""
    return _SUFFIX.sub("", Path(doc).name)


def which_documents(question: str, qwords: list[QWord], docs: dict[str, set[str]]) -> list[str]:
    """The documents a question could mean when it points at one ("the report", "page 3", この資料) without
    naming it: every document that holds all of its other words, when that is two or more. Empty otherwise
    (it points at none, names one, or only one document could be meant)."""
    if not _POINTS_AT_DOCUMENT.search(question) or len(docs) < 2:
        return []
    words = [w for w in qwords if w.word.lower() not in _DOCUMENT_WORDS and T.stem(w.word.lower()) not in
             _DOCUMENT_WORDS and not w.word.isdigit() and not HIRAGANA_ONLY.match(w.word)]
    holding = [d for d in sorted(docs) if all(w.found(docs[d]) >= 1.0 for w in words)]
    return holding if len(holding) >= 2 else []


def named_documents(question: str, qwords: list[QWord], cited: str, docs: Documents) -> list[str]:
    """The documents a question names by a name the cited document never holds ("What was Netflix's revenue
    in 2023?" answered from Best Buy's 10-K): a word the question capitalises (qwords.name_words) that is in the names
    some documents go by (title, folder, file) and that no other document holds anywhere, so it names them,
    not a subject ("Earth" on Amazon's cover). Empty when there is none."""
    names = name_words(question)
    out: set[str] = set()
    for w in qwords:
        if w.cjk or w.word not in names or w.found(docs.terms.get(cited, set())):
            continue
        holders = {d for d, terms in docs.terms.items() if w.found(terms)}
        if holders and all(w.found(docs.names.get(d, set())) for d in holders):
            out |= holders
    return sorted(out)
