"""What every part of `rag genqa` shares: the question and report records, the pages of the source, the
sampling plan, near-duplicate detection and the check that an "unanswerable" topic is really absent."""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core.config import Settings
from ragkit.core.models import Usage
from ragkit.core.paths import iter_pages, reference_path
from ragkit.core.text import normalize, tokenize
from ragkit.genqa.pagetext import terms_in

COLUMNS = ["Question", "Ground Truth", "Reference Document", "Page", "Checklist", "Kind", "Language"]
DOC_SUFFIXES = (".pdf", ".docx", ".pptx")
KINDS = ("single", "multi", "unanswerable")
DUPLICATE_JACCARD = 0.6  # token-set Jaccard at or above which two questions count as one (see docstring)
MIN_PAGE_TOKENS = 15  # fewer search tokens than this: a near-empty page (cover, blank, figure only)
UNANSWERABLE_SHARE = 0.15
MULTI_SHARE = 0.20
MAX_PAGE_CHARS = 6000  # page text shown to the model per page
MAX_CONSECUTIVE_FAILURES = 3  # provider errors (not bad JSON) in a row: stop asking
# --lang: the languages a model can be asked to write in; the offline generator writes OFFLINE_LANGS only
LANG_NAMES = {"ja": "Japanese", "en": "English", "ko": "Korean", "zh": "Chinese", "fr": "French", "de": "German",
              "es": "Spanish", "it": "Italian", "pt": "Portuguese", "nl": "Dutch", "ru": "Russian", "ar": "Arabic",
              "hi": "Hindi", "th": "Thai", "vi": "Vietnamese", "id": "Indonesian", "sv": "Swedish", "pl": "Polish",
              "tr": "Turkish"}
OFFLINE_LANGS = ("en", "ja", "ko")
# the kinds of document a collection holds, told by their own words (domain_kinds)
DOMAIN_MARKERS = {
    "filing": ("10-k", "annual report", "fiscal year", "shareholders", "stockholders", "securities and exchange",
               "net income", "revenue", "earnings per share", "registrant", "有価証券報告書", "決算", "매출액",
               "사업보고서"),
    "manual": ("press", "button", "install", "cleaning", "warranty", "display", "setting", "battery", "user manual",
               "instructions", "取扱説明書", "ボタン", "押し", "お手入れ", "설치", "버튼", "사용설명서"),
    "survey": ("survey", "respondents", "adults", "poll", "interviews", "margin of error", "調査", "回答者", "설문",
               "응답자"),
    "policy": ("policy", "employees", "shall", "compliance", "procedure", "approval", "規程", "規定", "社員", "정책",
               "직원", "안내"),
    "paper": ("et al", "arxiv", "we propose", "baseline", "state-of-the-art", "ablation", "fine-tun", "proceedings",
              "論文", "논문"),
}
# who "we" is in a question about a document of that kind ("we ran" -> "the authors ran")
WE_SUBJECT = {"filing": "the company", "policy": "the company", "manual": "the manufacturer",
              "survey": "the researchers", "paper": "the authors"}


# -- data ---------------------------------------------------------------------------------------------
@dataclass
class GeneratedQuestion:
    question: str
    ground_truth: str
    refs: list[str]  # db-relative page paths, in order; empty for an unanswerable question
    pages: list[int]
    checklist: list[str]
    kind: str  # single | multi | unanswerable
    lang: str

    def row(self, db: Path) -> dict[str, str]:
        return {
            "Question": self.question,
            "Ground Truth": self.ground_truth,
            "Reference Document": "\n".join(reference_path(db, r) for r in self.refs),
            "Page": "\n".join(str(p) for p in self.pages),
            "Checklist": "\n".join(self.checklist),
            "Kind": self.kind,
            "Language": self.lang,
        }


@dataclass
class GenqaReport:
    source: Path
    db: Path
    provider: str = ""
    model: str = ""
    path: Path | None = None
    questions: list[GeneratedQuestion] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (page Reference Document, reason)
    notes: list[str] = field(default_factory=list)  # what the run left out on purpose, said in a sentence
    dropped: Counter = field(default_factory=Counter)  # duplicate / unsupported / present / invalid
    pages_total: int = 0  # usable pages in the source
    pages_used: int = 0  # pages some question refers to

    def counts(self) -> dict[str, int]:
        c = Counter(q.kind for q in self.questions)
        return {k: c.get(k, 0) for k in (*KINDS, "summarization") if k in KINDS or c.get(k)}


@dataclass
class PageInfo:
    rel: str  # db-relative path
    page: int
    doc: str  # document key (source path or folder)
    doc_title: str
    section: str
    body: str  # markdown body, CJK line breaks joined
    lang: str
    tokens: frozenset[str] = frozenset()



# -- planning -----------------------------------------------------------------------------------------
@dataclass
class Context:
    db: Path
    pages: list[PageInfo]
    settings: Settings
    lang: str | None
    per_page: int
    seed: int
    progress: bool
    _df: Counter | None = None
    _corpus: str | None = None
    _index: object | None = None
    _index_failed: bool = False
    _doc_kinds: dict[str, str] = field(default_factory=dict)

    def rng(self, salt: str) -> random.Random:
        return random.Random(f"{self.seed}|{salt}")

    @property
    def df(self) -> Counter:
        if self._df is None:
            c: Counter = Counter()
            for p in self.pages:
                c.update(p.tokens)
            self._df = c
        return self._df

    def df_of(self, term: str) -> int:
        """Pages holding the term, at most (the least frequent of its tokens)."""
        toks = tokenize(term, drop_stopwords=True)
        return min(self.df.get(t, 0) for t in toks) if toks else len(self.pages)

    def idf(self, term: str) -> float:
        """Rarity of a term in the source's pages."""
        return math.log((len(self.pages) + 1) / (self.df_of(term) + 0.5))

    def phrase_ok(self, phrase: str) -> bool:
        """An English two-word phrase is a term when it recurs in the source ("security incident")."""
        if self._corpus is None:
            self._corpus = "\n".join(normalize(p.body) for p in self.pages)
        return self._corpus.count(normalize(phrase)) >= 2

    def lang_of(self, page: PageInfo) -> str:
        return self.lang or page.lang

    def doc_kind(self, doc: str) -> str:
        """The kind of one document of the source (filing, manual, survey, policy, paper)."""
        if doc not in self._doc_kinds:
            self._doc_kinds[doc] = domain_kinds([p for p in self.pages if p.doc == doc])[0]
        return self._doc_kinds[doc]

    def index(self):
        """The search index of the database, or None when it cannot be opened (lexical scan instead)."""
        if self._index is None and not self._index_failed:
            try:
                from ragkit.search import open_index

                self._index = open_index(self.db)
            except Exception:  # noqa: BLE001 - absence checks fall back to scanning the page files
                self._index_failed = True
        return self._index


def domain_kinds(pages: list[PageInfo]) -> list[str]:
    """The kinds of document of these pages, most typical first (those whose marker words they use)."""
    text = normalize(" ".join(p.body[:3000] for p in pages[:400]))
    scores = {k: sum(len(re.findall(rf"(?<![a-z]){re.escape(normalize(w))}", text)) for w in words)
              for k, words in DOMAIN_MARKERS.items()}
    ranked = sorted(scores, key=lambda k: -scores[k])
    best = scores[ranked[0]]
    return [k for k in ranked if scores[k] and scores[k] * 2 >= best] or ["manual", "policy"]


@dataclass
class Plan:
    singles: int
    multi: int
    unanswerable: int
    order: list[PageInfo]  # sampled page order
    groups: list[list[PageInfo]]  # related page groups for multi-page questions, in order


def make_plan(max_questions: int, ctx: Context, *, group_size: int = 2) -> Plan:
    order = sample_pages(ctx.pages, ctx.rng("sample"))
    groups = related_groups(ctx.pages, ctx.rng("groups"), size=group_size)
    n = max_questions
    unans = max(1, math.floor(n * UNANSWERABLE_SHARE + 0.5)) if n >= 3 else 0  # (half up: 4.5 of 30 -> 5)
    multi = (max(1, math.floor(n * MULTI_SHARE + 0.5)) if n >= 3 else 0) if groups else 0
    singles = n - unans - multi
    return Plan(singles=singles, multi=multi, unanswerable=unans, order=order, groups=groups)


def sample_pages(pages: list[PageInfo], rng: random.Random) -> list[PageInfo]:
    """Every page once, ordered so that any prefix spreads over documents and their sections:
    round-robin over documents (seeded order), inside each round-robin over sections (pages shuffled)."""
    by_doc: dict[str, dict[str, list[PageInfo]]] = {}
    for p in sorted(pages, key=lambda p: (p.doc, p.page, p.rel)):
        by_doc.setdefault(p.doc, {}).setdefault(p.section, []).append(p)
    streams = []
    for doc in sorted(by_doc):
        sections = list(by_doc[doc].values())
        for sec in sections:
            rng.shuffle(sec)
        streams.append(_round_robin(sections))
    rng.shuffle(streams)
    return _round_robin(streams)


def _round_robin(lists: list[list]) -> list:
    out, i = [], 0
    while any(i < len(lst) for lst in lists):
        out.extend(lst[i] for lst in lists if i < len(lst))
        i += 1
    return out


def related_groups(pages: list[PageInfo], rng: random.Random, *, size: int = 2) -> list[list[PageInfo]]:
    """Groups of `size` related pages of one document: adjacent pages of one section first, then any two
    pages of one section, then adjacent pages across sections. Round-robin over documents."""
    by_doc: dict[str, list[PageInfo]] = {}
    for p in sorted(pages, key=lambda p: (p.doc, p.page, p.rel)):
        by_doc.setdefault(p.doc, []).append(p)
    streams = []
    for doc in sorted(by_doc):
        ps = by_doc[doc]
        adjacent_same, same, adjacent = [], [], []
        for a, b in zip(ps, ps[1:], strict=False):
            if b.page == a.page + 1:
                (adjacent_same if a.section == b.section else adjacent).append([a, b])
        by_sec: dict[str, list[PageInfo]] = {}
        for p in ps:
            by_sec.setdefault(p.section, []).append(p)
        for sec in by_sec.values():
            for i in range(0, len(sec) - 1, 2):
                pair = [sec[i], sec[i + 1]]
                if pair not in adjacent_same:
                    same.append(pair)
        for lst in (adjacent_same, same, adjacent):
            rng.shuffle(lst)
        used: set[str] = set()
        stream = []
        nxt = {(a.section, a.page): b for a, b in zip(ps, ps[1:], strict=False)
               if b.page == a.page + 1 and a.section == b.section}
        for pair in adjacent_same + same + adjacent:
            if not used.intersection(p.rel for p in pair):  # each page in one group at most
                group = list(pair)
                while len(group) < size and (c := nxt.get((group[-1].section, group[-1].page))) is not None \
                        and c.rel not in used and group[-1].page + 1 == c.page:
                    group.append(c)  # a third adjacent page of the same section
                used.update(p.rel for p in group)
                stream.append(group)
        streams.append(stream)
    rng.shuffle(streams)
    return _round_robin(streams)



def refusal_point(lang: str) -> str:
    return {"ja": "資料に記載がないと回答する", "ko": "문서에 없는 내용이라고 답한다"}.get(
        lang, "Says the documents do not contain this")


def covered_by_corpus(ctx: Context, question: str, key_terms: list[str]) -> bool:
    """True when some page of the database holds every key term: the topic is not absent after all.

    Candidates come from the index (the question and each key term searched on their own) plus the
    source's pages; without an index every page file of the database is scanned."""
    terms = [normalize(t) for t in key_terms if t.strip()]
    if not terms:
        terms = [normalize(t) for t in terms_in(question)]
    if not terms:
        return False

    def holds(text: str) -> bool:
        norm = normalize(text)
        return all(t in norm for t in terms)

    if any(holds(p.body) for p in ctx.pages):
        return True
    index = ctx.index()
    if index is None:
        rels: Iterable[str] = iter_pages(ctx.db)
    else:
        rels_set: dict[str, None] = {}
        for query in [question, *key_terms]:
            try:
                for hit in _keyword_search(index, query):
                    rels_set[hit.path] = None
            except Exception:  # noqa: BLE001 - a failing index must not make a question "absent"
                rels = iter_pages(ctx.db)
                break
        else:
            rels = list(rels_set)
    for rel in rels:
        try:
            if holds((ctx.db / rel).read_text(encoding="utf-8", errors="replace")):
                return True
        except OSError:
            continue
    return False


# the offline generator's own phrasing, and the document a question names, say nothing about what it asks
_TEMPLATE = re.compile(
    r",? according to [^?]*\?$|^[^、。？]{1,60}によると、|^[^?.]{1,60}에 따르면 |教えてください|の手順|何ですか|"
    r"무엇입니까|순서는 어떻게 됩니까|what (?:is|are|was) the steps for|\bhow many\b|what percentage|how much", re.I)


def _keyword_search(index, query: str, k: int = 10) -> list:
    """Keyword-only search (the check is lexical; a dense re-ranking would only cost time)."""
    try:
        return index.search(query, k=k, mode="keyword")
    except TypeError:  # an index without modes
        return index.search(query, k=k)


def _jaccard_tokens(question: str) -> frozenset[str]:
    return frozenset(tokenize(_TEMPLATE.sub(" ", question), drop_stopwords=True))


def is_duplicate(question: str, others: Iterable[str], threshold: float = DUPLICATE_JACCARD) -> bool:
    """Near-duplicate by token-set Jaccard (words and CJK bigrams, stopwords removed)."""
    a = _jaccard_tokens(question)
    if not a:
        return True
    for o in others:
        b = _jaccard_tokens(o)
        if b and len(a & b) / len(a | b) >= threshold:
            return True
    return False


def add_unique(q: GeneratedQuestion, existing: list[GeneratedQuestion], report: GenqaReport) -> bool:
    if is_duplicate(q.question, (e.question for e in existing)):
        report.dropped["duplicate"] += 1
        return False
    return True


