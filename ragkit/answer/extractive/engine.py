"""The engine: retrieve, weigh the question's words, select the units that cover it (one document), score
the evidence, and quote it with its pages, or refuse. docs/answer.md says how and why."""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragkit.answer.extractive.answertype import answer_kind, holds_kind
from ragkit.answer.extractive.checks import (
    document_name,
    held_terms,
    holds_whole,
    named_documents,
    names_only,
    which_documents,
    years_named,
)
from ragkit.answer.extractive.corpus import corpus_stats, document_id, documents, read_page
from ragkit.answer.extractive.qwords import (
    QWord,
    coverage,
    name_words,
    respelt,
    unnamed_share,
    weigh,
)
from ragkit.answer.extractive.terms import (
    also_said,
    alternatives,
    question_core,
    question_words,
    says_in_order,
    term_set,
)
from ragkit.answer.extractive.units import Unit, page_units, qualifies
from ragkit.core import text as T
from ragkit.core.models import Answer, Source, Usage
from ragkit.core.pagefile import parse_page
from ragkit.core.paths import reference_path
from ragkit.search.periods import period_terms, reports_another, specific_periods
from ragkit.search.synonyms import Synonyms

log = logging.getLogger(__name__)


ENGINE = "offline-extractive"  # Answer.engine: agent, naive and synth all run this one engine offline
REFUSE_BELOW = 0.44  # minimum score to answer (docs/answer.md: how it was tuned)
ABSENT_PENALTY = 0.0  # confidence lost per share of the question its document never mentions (calibrated: 0)
YEAR_PENALTY = 0.5  # confidence lost when the question names a year no page quoted nor the cover mentions
UNNAMED_PENALTY = 1.5  # confidence lost per share of the question the whole database never names ...
UNNAMED_FULL_PAGES = 500  # ... in a database of this many pages or more; less in a smaller one, in proportion
UNNAMED_FLOOR = 0.3  # (a word missing from 40 pages is often a paraphrase: "length" for "at least 14 characters")
# ... but a name (a word the question capitalises: "FIFA", "Japan", "mAh") counts in full in any database
TYPE_PENALTY = 0.4  # confidence lost when the question asks for a duration, number, ... the quote does not hold
# Meaning (with the embedding model): the best cosine between the question and a sentence of the pages read from
# the document quoted (search.sentences, the vectors kept with the index; another document's sentence does not
# vouch for this one's quote). Under SUPPORT_FLOOR the score loses SUPPORT_PENALTY per point short: no sentence
# there is about what is asked, even when every word is. With that check the score needs only REFUSE_BELOW_MEANING
# to answer (docs/answer.md: tuned on one half of the refusal benchmark).
SUPPORT_FLOOR = 0.33
SUPPORT_PENALTY = 12.0
REFUSE_BELOW_MEANING = 0.22
SYNONYM_FOUND = 0.5  # what a synonym (search.synonyms) holds of a question word when units are ranked
TYPE_BONUS = 0.1  # score of a unit that holds the kind of answer asked for (answertype)
# The confidence an answer reports: its score mapped to the share of such answers that cited a right page on
# MMLongBench-Doc (raw score, share), fitted on half of its questions (benchmarks/offline_calibration.py)
CALIBRATION: tuple[tuple[float, float], ...] = (
    (0.347, 0.357), (0.506, 0.464), (0.599, 0.521), (0.669, 0.537), (0.731, 0.537), (0.814, 0.539), (0.939, 0.541),
    (1.0, 0.965))
CONTEXT_WEIGHT = 0.6  # a question word found only in the unit's headings counts this much
PAGE_WEIGHT = 0.3  # ... and found only elsewhere on the unit's page
MIN_GAIN = 0.05  # a further quoted unit must add this much coverage
# A word the search carried from an earlier question (serve's follow-up rewrite, `search`) weighs this much of its
# weight when further quotes are chosen: it found the pages, but a quote need not be added to cover it
CARRIED_WEIGHT = 0.01
RANK_DECAY = 0.05  # position prior: the page ranked r-th (0-based) multiplies scores by 1/(1 + 0.05 r)
MAX_QUESTION_CHARS = 2000  # longer questions are cut (retrieval and scoring only)
MAX_SELECTED = 3
LONG_UNIT_TERMS = 40  # units with more distinct terms than this are mildly penalised
MAX_PAGES_CITED = 2

NOTES = {
    "en": "(offline extractive answer)",
    "ja": "（オフライン offline: 抽出回答）",
    "ko": "(오프라인 offline: 추출 답변)",
    "zh": "（离线 offline：抽取式回答）",
}
# A question that points at one document without naming it ("the report", "this case", "page 3") cannot be
# answered from a database where several documents hold all of its words: which one is meant is unknown.
WHICH_DOCUMENT = {
    "en": "The question points at one document without naming it, and {n} documents hold its words: {docs}. "
          "Name the one you mean.",
    "ja": "質問はどの資料かを示していません。質問の語をすべて含む資料が {n} 件あります: {docs}。資料名を添えて質問してください。",
    "ko": "질문이 어느 문서인지 밝히지 않았고, 질문의 단어를 모두 담은 문서가 {n}개입니다: {docs}. 문서 이름을 넣어 다시 질문하세요.",
    "zh": "问题没有指明是哪份文件，包含其全部词语的文件有 {n} 份：{docs}。请注明文件名。",
}
# A question that names a document (_named) is read there only; a refusal then says so, and which years the
# question names that the document's first pages and the pages read do not.
NAMED = {"en": "Read in the document the question names: {docs}.", "ja": "質問が名指しする資料だけを読みました: {docs}。",
         "ko": "질문이 가리키는 문서만 읽었습니다: {docs}.", "zh": "只读了问题所指的文件：{docs}。"}
# Search finds a page by meaning alone when it holds none of the question's words and is much closer to it than
# the pages that do (a question in another language than the documents'). The engine quotes only sentences that
# hold the question's words, so it refuses, naming those pages.
BY_MEANING = {"en": "No sentence answers in the question's words{hint}. Closest in meaning, not checked to answer it "
                    "(read them, or ask with a model): {pages}.",
              "ja": "質問の語で答える文はありません{hint}。意味の近いページ（答えを含むかは未確認。開いて読むか、"
                    "モデルを使って質問してください）: {pages}。",
              "ko": "질문의 단어로 답하는 문장이 없습니다{hint}. 의미가 가까운 페이지(답을 담았는지는 "
                    "확인하지 않음. 직접 읽거나 모델로 질문하세요): {pages}.",
              "zh": "没有用问题的词语作答的句子{hint}。意思最接近的页面（未核实是否含有答案；请阅读，或用模型提问）：{pages}。"}
# ... said only when those pages are in another language than the question
OTHER_LANGUAGE = {"en": " (another language than the documents'?)", "ja": "（資料と別の言語の質問？）",
                  "ko": "(문서와 다른 언어의 질문?)", "zh": "（与文件语言不同的问题？）"}
CLOSEST_SHOWN = 3
YEARS_MISSING = {"en": "Neither its first pages nor the pages read mention {years}.",
                 "ja": "その資料の最初のページにも読んだページにも {years} はありません。",
                 "ko": "그 문서의 첫 페이지에도 읽은 페이지에도 {years}이(가) 없습니다.",
                 "zh": "其前几页和所读页面都没有提到 {years}。"}
SOURCES_LABEL = {"en": "Sources:", "ja": "出典:", "ko": "출처:", "zh": "来源:"}
QUOTES = {"en": ("\u201c", "\u201d"), "ja": ("「", "」"), "ko": ("\u201c", "\u201d"), "zh": ("「", "」")}


# -- the engine ----------------------------------------------------------------------------------------
def _lang(question: str) -> str:
    lang = T.detect_lang(question)
    return lang if lang in NOTES else "en"


class _NoTrace:
    def write(self, event: str, **fields: Any) -> None:
        pass


def _retrieve(index, question: str, key_query: str, k: int, folders: list[str] | None = None,
              trace: Any = None) -> list[tuple[str, int, str, bool]]:
    """(db-relative path, page number, title, found by meaning alone) of the candidate pages, best first; only
    pages under `folders` when given (one search per folder, merged by score: the same query scores alike across
    folders). Each search is a `search` step of `trace`."""
    trace = trace or _NoTrace()
    seen: dict[str, tuple[str, int, str, bool]] = {}
    order: list[str] = []
    for query, limit in ((question, k), (key_query, max(1, math.ceil(k / 2)))):
        if not query.strip():
            continue
        t0 = time.perf_counter()
        if folders is None:
            hits = index.search(query, k=k)  # an index failure is raised, not hidden behind a refusal
        else:
            found = [h for f in folders for h in index.search(query, k=k, path=f)]
            hits = sorted(found, key=lambda h: -h.score)[:k]
        trace.write("search", query=query, k=k, **({"paths": folders} if folders is not None else {}),
                    hits=[h.path for h in hits],
                    ms=round((time.perf_counter() - t0) * 1000, 1))
        added = 0
        for h in hits:
            if h.path in seen:
                continue
            if query is key_query and added >= limit:
                break
            seen[h.path] = (h.path, h.page, h.title, h.ranking == "meaning")
            order.append(h.path)
            added += 1
    return [seen[p] for p in order]


def _phrase_bonus(unit_norm: str, q_words: list[str]) -> float:
    """Share of the question's adjacent Latin word pairs that appear verbatim in the unit."""
    pairs = [f"{a} {b}" for a, b in zip(q_words, q_words[1:], strict=False)]
    if not pairs:
        return 0.0
    return sum(1 for p in pairs if p in unit_norm) / len(pairs)


def _select(units: list[Unit], qwords: list[QWord], page_terms: dict[str, set[str]],
            page_doc: dict[str, str]) -> list[Unit]:
    """The best unit, then units of its document (`page_doc`: rel -> corpus.document_id) that add question words
    it lacks (at most 3 units, 2 pages). A heading or a title line is never the quote alone: it is quoted with the
    line under it, and one with no text under it is passed over (nothing left: nothing is chosen, a refusal)."""
    ranked = sorted(units, key=lambda u: (-u.score, u.rank, u.pos))
    by_key = {(u.rel, u.pos): u for u in units}

    def under(u: Unit) -> Unit | None:
        """The text a heading or title line stands over: the next unit of the page, in another paragraph (the
        page number of a table of contents' entry is no text under it), and no title itself."""
        nxt = by_key.get((u.rel, u.pos + 1))
        ok = nxt is not None and not (nxt.is_heading or nxt.title) and nxt.para != u.para
        return nxt if ok else None

    best = next((u for u in ranked if not (u.is_heading or u.title) or under(u) is not None), None)
    if best is None:
        return []
    chosen = [best]
    # A unit that only introduces what follows ("The settings are:", a heading) is quoted with its next line.
    if best.is_heading or best.title:
        if (body := under(best)) is not None:  # always: best was chosen for it
            chosen.append(body)
    elif best.text.rstrip().endswith((":", "：")):
        nxt = by_key.get((best.rel, best.pos + 1))
        if nxt is not None and not nxt.is_heading:
            chosen.append(nxt)
    current = _evidence(chosen, qwords, page_terms)
    for u in ranked[1:]:
        if len(chosen) >= MAX_SELECTED:
            break
        if any(u is c for c in chosen) or u.score < 0.45 * best.score:
            continue
        pages = {c.rel for c in chosen}
        if u.rel not in pages and len(pages) >= MAX_PAGES_CITED:
            continue
        if page_doc.get(u.rel) != page_doc.get(best.rel):
            continue  # never splice in a sentence from another document: it answers another question
        gain = _evidence([*chosen, u], qwords, page_terms) - current
        if gain >= MIN_GAIN:
            chosen.append(u)
            current += gain
    return chosen


def _qualified(chosen: list[Unit], units: list[Unit]) -> list[Unit]:
    """The quoted units, each joined by the sentences right after it in its paragraph that open by qualifying it
    (units.qualifies: ただし, なお, 다만, However, unless, ...): "…子が1歳に達するまで…とする。" quoted without
    "ただし、保育所に入所できない場合は、子が2歳に達するまで延長できる。" is wrong for some readers, and its
    citation makes it look checked. What decides the answer (the score) is measured without them."""
    by_key = {(u.rel, u.pos): u for u in units}
    taken = {(u.rel, u.pos) for u in chosen}
    out = []
    for u in chosen:
        merged, pos = u, u.pos
        while (nxt := by_key.get((u.rel, pos + 1))) is not None and nxt.para == u.para and u.para >= 0 \
                and (u.rel, pos + 1) not in taken and qualifies(nxt.text):
            glue = " " if merged.text[-1:].isascii() else ""  # "。ただし" but ". However"
            merged = replace(merged, text=merged.text + glue + nxt.text, terms=merged.terms | nxt.terms)
            taken.add((u.rel, pos + 1))
            pos += 1
        out.append(merged)
    return out


def _evidence(chosen: list[Unit], qwords: list[QWord], page_terms: dict[str, set[str]],
              carried: frozenset[str] = frozenset()) -> float:
    """Coverage of the question by a set of quoted units, their headings and their pages. A `carried` word (an
    earlier question's, carried into a follow-up's search) counts in full wherever a quoted page holds it: it says
    what the pages are about, not what the quote must say."""
    own: set[str] = set()
    ctx: set[str] = set()
    page: set[str] = set()
    for u in chosen:
        own |= u.terms
        ctx |= u.ctx_terms
        page |= page_terms.get(u.rel, set())
    levels = [(own, 1.0), (ctx, CONTEXT_WEIGHT), (page, PAGE_WEIGHT)]
    subject = [w for w in qwords if w.word in carried]
    if not subject:
        return coverage(qwords, levels)
    asked = [w for w in qwords if w.word not in carried]
    weight = sum(w.weight for w in asked)
    total = weight + sum(w.weight for w in subject)
    if total <= 0:
        return 0.0
    return (coverage(asked, levels) * weight + coverage(subject, [(own | ctx | page, 1.0)]) * (total - weight)) / total


def _quote(u: Unit, lang: str) -> str:
    left, right = QUOTES[lang]
    return f"{left}{u.text}{right}"


@dataclass
class _Analysis:
    """What the engine found for one question, before deciding to answer or refuse."""

    lang: str
    pages_read: list[str]
    chosen: list[Unit] = field(default_factory=list)
    coverage: float = 0.0  # IDF-weighted share of the question found in the quoted evidence (see _evidence)
    absent: float = 0.0  # IDF-weighted share of the question found nowhere in the cited document
    absent_top: float = 0.0  # weight of the heaviest such word / the question's heaviest word's weight
    # years (1900-2099) the question names that neither a page quoted nor the document's first pages mention
    years_absent: int = 0
    years_missing: list[str] = field(default_factory=list)  # those years
    named: list[str] = field(default_factory=list)  # the documents the question names, when it was read in them only
    unnamed: float = 0.0  # IDF-weighted share of the question the whole database never names
    unnamed_names: float = 0.0  # ... of it, the share made of names (words the question capitalises)
    db_pages: int = 0  # pages in the database (how much its silence about a word says)
    kind: str | None = None  # the kind of answer asked for (answertype.answer_kind)
    typed: bool = True  # the quoted evidence holds an answer of that kind
    own: float = 0.0  # coverage by the quoted units' own words (no headings, no rest of the page)
    support: float | None = None  # best question-sentence cosine on the pages read (None: no embedding model)
    said: bool = False  # the main quote holds the question's words as it writes them (terms.says_in_order)
    whole: bool = True  # the quote or its headings hold most of some CJK word of the question (holds_whole)
    named_only: bool = False  # the quote holds the question's common words only inside names (names_only)
    ambiguous: list[str] = field(default_factory=list)  # documents it could mean, when it names none (which_documents)
    by_meaning: list[str] = field(default_factory=list)  # the pages read that search found by meaning alone
    page_lang: dict[str, str] = field(default_factory=dict)  # their language (text.detect_lang of the page)
    page_info: dict[str, tuple[int, str]] = field(default_factory=dict)


def _analyse(question: str, index, db: Path, k: int, named: list[str] | None = None, trace: Any = None,
             search: str | None = None) -> _Analysis:
    """Retrieve, select the evidence and measure it; only in the documents `named` (document_id) when given. When
    the question names a document other than the one its evidence came from (_named), it is analysed again
    within the documents it names. Its searches and the pages it read are steps of `trace`. `search`: the query
    the pages are found by when it is not the question itself (a follow-up with an earlier question's words
    carried): units are ranked by it and the evidence is measured against it, the carried words found anywhere on
    a quoted page (_evidence), but a further quote is added only for the question's own words (the carried ones
    weigh CARRIED_WEIGHT there): ranking by the own words alone was tried and quoted a table's header row for
    「管理職は？」 and the wrong sentence for 「その後どうなりますか？」."""
    q = question_core(question.strip()[:MAX_QUESTION_CHARS])
    sq = question_core(search.strip()[:MAX_QUESTION_CHARS]) if search and search.strip() else q
    lang = _lang(q)
    own_words = question_words(q)
    words = question_words(sq) if sq != q else own_words
    if not words:
        return _Analysis(lang, [])
    n, df = corpus_stats(db, index)
    rules = Synonyms(db).written()
    alts = alternatives(sq, rules)
    # A synonym holds the word in full when the quote is measured, and SYNONYM_FOUND of it when units are
    # ranked: the words as written choose what is quoted
    found_by = weigh(words, n, df, alts=alts, alt_found=SYNONYM_FOUND)
    qwords = weigh(words, n, df, alts=alts)
    key_terms = [w.word for w in sorted(found_by, key=lambda w: -w.weight)[:8]]  # stable: ties keep order
    own = {w for w, _ in own_words}
    carried = frozenset() if sq == q else frozenset(w.word for w in found_by if w.word not in own)
    chosen_by = [replace(w, weight=w.weight * CARRIED_WEIGHT) if w.word in carried else w for w in found_by]
    docs = documents(db, index)  # every document's terms, first pages, names and folders (with the statistics)
    scope = None if named is None else sorted(set().union(*(docs.folders.get(d, ()) for d in named)))
    # a quarter, a half or a period's end the question names, when some document reports it: then the same
    # company's reports for other periods only share its words (without one, a later report's comparative
    # figures may still answer it)
    asked = specific_periods(period_terms(sq))
    if not any(set(asked) & p for p in docs.periods.values()):
        asked = []
    candidates = _retrieve(index, sq, " ".join(key_terms), max(1, int(k)), scope, trace)
    out = _Analysis(lang, [reference_path(db, rel) for rel, *_ in candidates])
    if not candidates:
        return out
    out.by_meaning = [rel for rel, *_, meaning in candidates if meaning]

    kind = answer_kind(q)
    out.kind, out.unnamed, out.db_pages = kind, unnamed_share(qwords, df), n
    out.unnamed_names = unnamed_share(qwords, df, only=name_words(sq))
    q_latin = [w for w in re.findall(r"[a-z0-9]+", T.normalize(q)) if w not in T.STOPWORDS]
    units: list[Unit] = []
    page_terms: dict[str, set[str]] = {}
    page_doc: dict[str, str] = {}  # rel -> document_id
    read: list[str] = []
    for rank, (rel, page_no, title, _meaning) in enumerate(candidates):
        raw = read_page(db, rel)
        if raw is None:
            continue
        read.append(rel)
        meta, body = parse_page(raw)
        page_of = document_id(rel, meta.source)
        if named is not None and page_of not in named:
            continue  # another document's page in a folder they share (an optimizer's copy)
        if reports_another(asked, docs.periods.get(page_of, set())):
            continue  # the same company's report for another quarter: every word of the question but the answer
        page_doc[rel] = page_of
        doc_title = meta.document or title
        context_title = " / ".join(x for x in (doc_title, meta.section) if x)
        # The folders a page sits in describe it (the path carries meaning, and the optimizer names copies'
        # folders after questions), but weakly: they count like the rest of the page, so a folder name
        # alone never lifts a page over the refusal threshold.
        folders = " ".join(Path(rel).parent.parts)
        found = page_units(body, rel, rank, context_title)
        if not found:
            continue
        if rel in out.by_meaning:
            out.page_lang[rel] = _lang(body)
        page_terms[rel] = held_terms(folders + "\n" + context_title + "\n" + body)
        out.page_info[rel] = (meta.page or page_no, title or doc_title)
        prior = 1.0 / (1.0 + RANK_DECAY * rank)
        for u in found:
            u.terms = term_set(u.text)
            u.ctx_terms = term_set(u.context)
            u.coverage = _evidence([u], found_by, page_terms)
            score = u.coverage * prior
            if kind and holds_kind(u.text, kind):
                score += TYPE_BONUS
            score += 0.05 * _phrase_bonus(T.normalize(u.text), q_latin)
            if u.is_heading or len(u.terms) <= 1:
                score *= 0.8  # a bare heading or fragment rarely answers on its own
            elif len(u.terms) > LONG_UNIT_TERMS:  # run-on text (tables of contents, flattened layouts)
                score *= LONG_UNIT_TERMS / len(u.terms) * 0.5 + 0.5
            u.score = score
        units.extend(found)
    (trace or _NoTrace()).write("read", pages=read)
    # a page of headings only (a document's title page) is close in meaning to anything about the document, and
    # has nothing to read
    out.by_meaning = [rel for rel in out.by_meaning if any(u.rel == rel and not (u.is_heading or u.title)
                                                           for u in units)]
    if not units:
        return out
    out.chosen = _select(units, chosen_by, page_terms, page_doc)
    if not out.chosen:
        return out  # only headings hold the question's words: they explain nothing
    out.coverage = _evidence(out.chosen, qwords, page_terms, carried)
    cited = page_doc[out.chosen[0].rel]
    if named is None and (meant := named_documents(sq, found_by, cited, docs)):
        again = _analyse(question, index, db, k, meant, trace, search)
        again.named = meant
        return again
    doc = docs.terms.get(cited, set())
    total = sum(w.weight for w in qwords) or 1.0
    out.absent = sum(w.weight * (1.0 - w.found(doc)) for w in qwords) / total
    top = max(w.weight for w in qwords) or 1.0
    out.absent_top = max((w.weight * (1.0 - w.found(doc)) for w in qwords), default=0.0) / top
    # A year is looked for on the pages quoted and on the cited document's first pages (the years it reports), not
    # anywhere in it: a 2015 filing that names 2023 only in a note on its debt holds no 2023 revenue.
    seen = set().union(*(page_terms[u.rel] for u in out.chosen), docs.front_years.get(cited, ()))
    out.years_missing = sorted(y for y in years_named(sq) if y not in seen)
    out.years_absent = len(out.years_missing)
    out.typed = holds_kind(" ".join(u.text for u in out.chosen), kind)
    out.said = says_in_order(sq, out.chosen[0].text)
    own: set[str] = set().union(*(u.terms for u in out.chosen))
    out.own = coverage(qwords, [(own, 1.0)])
    quoted = own | set().union(*(u.ctx_terms for u in out.chosen))
    out.whole = holds_whole(qwords, quoted, carried, quoted.union(*(page_terms[u.rel] for u in out.chosen)))
    out.named_only = names_only(qwords, name_words(sq), out.chosen)
    # the meaning check reads the question with what it asks said as the pages say it ("EBITDA": "operating
    # income"), as the word check does: a statement's rows are about what the question asks
    said = also_said(sq, rules)
    asked = respelt(sq, df) + (f" ({'; '.join(said)})" if said else "")
    out.support = meaning_support(asked, db, [rel for rel, *_ in candidates if page_doc.get(rel) == cited],
                                  (out.chosen[0].rel, out.chosen[0].text))
    # which documents it could mean, by the words it writes: a synonym ("revenue" for its "net sales") does not
    # make another company's report one it points at
    out.ambiguous = which_documents(sq, found_by, docs.terms)
    out.chosen = _qualified(out.chosen, units)
    return out


def _which_text(names: list[str], lang: str) -> str:
    """The refusal's line for an ambiguous question: how many documents it could mean, the first three named."""
    shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    return WHICH_DOCUMENT.get(lang, WHICH_DOCUMENT["en"]).format(n=len(names), docs=shown)


def meaning_support(question: str, db: Path, rels: list[str], quoted: tuple[str, str] | None = None
                    ) -> float | None:
    """The best cosine between the question and any sentence of these pages, or None without the embedding
    model (RAG_EMBED=0, not installed) or when it fails: then only words decide. The main quote (`quoted`: its
    page, its text) counts too when it lies past the sentences the index keeps of a long page
    (sentences.MAX_SENTENCES): the answer on a long page's 81st line is otherwise never read. Only the main
    quote: a table's row of years spliced in beside it is no sentence about the question."""
    from ragkit.search.sentences import sentence_index

    si = sentence_index(db) if rels else None
    if si is None:
        return None
    try:
        hits = si.search(question, rels, k=len(rels))
        own = si.similarity(question, si.past_the_cut(*quoted)) if quoted else []
    except Exception as e:  # noqa: BLE001 - meaning only sharpens refusals: never fail an answer because of it
        log.warning("meaning check of the offline answer skipped: %s", e)
        return None
    return max([float(score) for _rel, score, _s in hits] + own, default=0.0)


def refuse_below(an: _Analysis) -> float:
    """The score an answer needs: lower when meaning was checked (that check refuses what the words cannot)."""
    return RULE.threshold(an)


@dataclass(frozen=True)
class Support:
    """How far some pages speak of what a question asks (all shares IDF-weighted, in [0, 1])."""

    held: float  # share of the question's words the pages hold (no respelling: a word they lack is lacking)
    years_absent: int  # years (1900-2099) the question names that the pages never mention
    unnamed: float  # share of the question's words the whole database never names (after respelling)


def question_support(question: str, texts: list[str], index, db: Path) -> Support:
    """Whether pages speak of what a question asks at all (see Support)."""
    q = question_core(question.strip()[:MAX_QUESTION_CHARS])
    words = question_words(q)
    held: set[str] = set().union(*(held_terms(t) for t in texts)) if texts else set()
    years = len(years_named(q) - held)
    if not words:
        return Support(1.0, years, 0.0)
    n, df = corpus_stats(Path(db), index)
    alts = alternatives(q, Synonyms(Path(db)).written())
    return Support(coverage(weigh(words, n, df, respell=False, alts=alts), [(held, 1.0)]), years,
                   unnamed_share(weigh(words, n, df, alts=alts), df))


def _confidence(an: _Analysis) -> float:
    """The raw score in [0, 1] that decides refusals (RefusalRule.score with the engine's constants)."""
    return RULE.score(an)


@dataclass(frozen=True)
class RefusalRule:
    """The rule that turns what the engine found into the score that decides a refusal, with its constants
    (the engine's by default; benchmarks/offline_refusals.py tunes them through this same rule). `an` is
    anything with _Analysis's fields coverage, absent, years_absent, unnamed, unnamed_names, db_pages, typed
    and support, and optionally said (the quote says the question's words: meaning does not count), ambiguous
    (the documents it could mean: any makes the score 0), whole (False, the quote holds only pieces of the
    question's CJK words: the score is 0) and named_only (True, the quote holds the question's common words only
    inside names: the score is 0)."""

    refuse_below: float = REFUSE_BELOW
    absent_penalty: float = ABSENT_PENALTY
    year_penalty: float = YEAR_PENALTY
    unnamed_penalty: float = UNNAMED_PENALTY
    type_penalty: float = TYPE_PENALTY
    support_floor: float = SUPPORT_FLOOR
    support_penalty: float = SUPPORT_PENALTY
    refuse_below_meaning: float = REFUSE_BELOW_MEANING

    def meaning(self, an) -> bool:
        """Whether meaning counts: measured (an embedding model), given a weight, and the main quote does not
        hold the question's words as the question writes them (`said`). The check is there for words found
        scattered ("capital" in "Capital Safety", "Australia" in "3M Australia"); a sentence that says the
        question's words in its order, side by side, cannot be about something else, and the cosine then
        measures the question's frame against a statement ("3분기 매출은 얼마였습니까?" against "3분기 매출은
        45억 원으로 ...": 0.255): the words decide, as without the model."""
        return an.support is not None and self.support_penalty > 0 and not getattr(an, "said", False)

    def score(self, an) -> float:
        """The evidence coverage, less what the question asks about that the cited document or the whole
        database never names, an answer of the wrong kind and, when meaning counts, a question no sentence
        read is about (docs/answer.md says how the constants were tuned)."""
        if getattr(an, "ambiguous", None) or not getattr(an, "whole", True) or getattr(an, "named_only", False):
            return 0.0
        silence = min(1.0, max(UNNAMED_FLOOR, an.db_pages / UNNAMED_FULL_PAGES))
        unnamed = (an.unnamed - an.unnamed_names) * silence + an.unnamed_names
        c = (an.coverage - self.absent_penalty * an.absent - (self.year_penalty if an.years_absent else 0.0)
             - self.unnamed_penalty * unnamed - (0.0 if an.typed else self.type_penalty))
        if self.meaning(an):
            c -= self.support_penalty * max(0.0, self.support_floor - an.support)
        return max(0.0, min(1.0, c))

    def threshold(self, an) -> float:
        """The score an answer needs: lower when meaning counts (that check refuses what the words cannot)."""
        return self.refuse_below_meaning if self.meaning(an) else self.refuse_below

    def refuses(self, an, chosen: bool = True) -> bool:
        """Whether the engine refuses: nothing chosen to quote, or a score under the threshold."""
        return not chosen or self.score(an) < self.threshold(an)


RULE = RefusalRule()


def calibrated(raw: float, table: tuple[tuple[float, float], ...] | None = None) -> float:
    """The confidence reported for a score: CALIBRATION read by linear interpolation between its points
    (flat beyond them); the score itself without a table."""
    table = CALIBRATION if table is None else table
    if not table:
        return raw
    if raw <= table[0][0]:
        return table[0][1]
    for (x0, y0), (x1, y1) in zip(table, table[1:], strict=False):
        if raw <= x1:
            return y0 if x1 <= x0 else y0 + (y1 - y0) * (raw - x0) / (x1 - x0)
    return table[-1][1]


def answer_offline(question: str, index, db: Path, *, k: int = 5, trace: Any = None, search: str | None = None
                   ) -> Answer:
    """Answer from the database without a model: quote the best-matching sentences and cite their pages,
    or refuse (text.refusal_text in the question's language) when the evidence is weak. `trace` (answer.run's
    Trace) gets a `search` step per search and a `read` step with the pages read (db-relative), as they happen.
    `search`: what to search when it is not the question (a chat's follow-up with an earlier question's words
    carried, serve.sessions.rewrite_offline): those words find the pages and count in the refusal, but what is
    quoted answers the question's own words (_analyse)."""
    t0 = time.perf_counter()
    db = Path(db)
    question = question if isinstance(question, str) else str(question)
    # one engine serves every strategy offline: metadata.engine says so, whatever strategy was asked for
    answer = Answer(question=question, answer="", refused=True, provider="offline", model="offline",
                    steps=1, usage=Usage(0, 0, 0.0, 0), engine=ENGINE)
    an = _analyse(question, index, db, k, trace=trace, search=search)
    lang, note = an.lang, NOTES[an.lang]
    answer.pages_read = an.pages_read
    confidence = _confidence(an) if an.chosen else 0.0
    answer.confidence = round(calibrated(confidence), 4) if an.chosen else 0.0
    answer.latency_ms = (time.perf_counter() - t0) * 1000
    if not an.chosen or confidence < refuse_below(an):
        answer.answer = f"{T.refusal_text(lang)}\n{note}"
        if an.ambiguous:
            answer.documents_meant = [document_name(d) for d in an.ambiguous]
            answer.answer += "\n" + _which_text(answer.documents_meant, lang)
        elif an.named:
            answer.answer += "\n" + NAMED[lang].format(docs=", ".join(document_name(d) for d in an.named))
            if an.years_missing:
                answer.answer += " " + YEARS_MISSING[lang].format(years=", ".join(an.years_missing))
        elif an.by_meaning and (not an.chosen or an.coverage < RULE.refuse_below):
            # only when the question's words answer nothing: a quote that holds them, refused on meaning or on a
            # missing year, is no question asked in other words
            closest = [rel for rel in an.by_meaning if rel in an.page_info]
            answer.closest = [Source(path=reference_path(db, rel), page=an.page_info[rel][0], title=an.page_info[rel][1])
                              for rel in closest][:CLOSEST_SHOWN]
            shown = ", ".join(f"{s.path} p.{s.page}" for s in answer.closest)
            other = any(an.page_lang.get(rel, lang) != lang for rel in closest[:CLOSEST_SHOWN])
            if shown:
                answer.answer += "\n" + BY_MEANING[lang].format(pages=shown, hint=OTHER_LANGUAGE[lang] if other else "")
        return answer

    # A (markdown) heading chosen for the words it holds is quoted by the text under it, chosen with it (_select):
    # it counted as evidence, and quoted as a line of its own it reads as the answer ("2. 새 사무실 위치"). The
    # sources' titles and paths still name the section. A title line (units._titles) stays: it is a line of the
    # text, and may be what is asked (the position "Core Assurance" under "### Ibrahim").
    chosen = [u for u in an.chosen if not u.is_heading] or an.chosen
    # Cite pages in order of first use; number citations [1], [2] by page.
    cite: dict[str, int] = {}
    for u in chosen:
        cite.setdefault(u.rel, len(cite) + 1)
    lines = [note]
    for u in sorted(chosen, key=lambda u: (cite[u.rel], u.pos)):
        lines.append(f"{_quote(u, lang)} [{cite[u.rel]}]")
    lines.append("")
    lines.append(SOURCES_LABEL[lang])
    sources: list[Source] = []
    for rel, num in cite.items():
        page_no, title = an.page_info[rel]
        path = reference_path(db, rel)
        lines.append(f"[{num}] {path} p.{page_no}")
        mine = [u for u in chosen if u.rel == rel]
        sources.append(Source(path=path, page=page_no, title=title,
                              excerpt=" … ".join(u.text for u in sorted(mine, key=lambda u: u.pos)),
                              score=round(max(u.score for u in mine), 4)))
    answer.answer = "\n".join(lines)
    answer.refused = False
    answer.sources = sources
    answer.latency_ms = (time.perf_counter() - t0) * 1000
    return answer
