"""The offline question generator: deterministic, no model."""

from __future__ import annotations

import itertools
import re
import sys
from collections import Counter
from collections.abc import Iterator

from ragkit.core.text import normalize, refusal_text
from ragkit.genqa.common import (
    KINDS,
    Context,
    GeneratedQuestion,
    GenqaReport,
    PageInfo,
    Plan,
    add_unique,
    covered_by_corpus,
    domain_kinds,
    is_duplicate,
    marked_kinds,
    refusal_point,
)
from ragkit.genqa.facts import Fact, page_facts
from ragkit.genqa.grammar import question_problem
from ragkit.genqa.pagetext import HEADING_LINE, line_shape

# Questions typical of a kind of document that a given collection may not answer; each carries key terms:
# a page holding all of them means the topic is covered after all (then the question is not used).
# The kind is told per document from its own words (common.DOMAIN_MARKERS), so a 10-K is asked about a filing's
# topics, never about a visitor parking fee.
DOMAIN_TOPICS: dict[str, dict[str, list[tuple[str, list[str]]]]] = {
    "filing": {"en": [
        ("How much did the company spend on its cryptocurrency holdings during the year?", ["cryptocurrency"]),
        ("What was the company's revenue from its operations in Antarctica?", ["antarctica"]),
        ("How many employees did the company have in its Reykjavik office?", ["reykjavik"]),
        ("What dividend per share did the company pay to its preferred stock holders in Q5?", ["q5"]),
        ("What was the carbon offset spending for the company's corporate jet fleet?", ["jet fleet"]),
    ]},
    "manual": {
        "en": [
            ("How do I pair the device with a smartwatch over Bluetooth?", ["smartwatch", "bluetooth"]),
            ("What is the battery life of the device when used underwater?", ["underwater", "battery"]),
            ("How do I update the firmware from a USB stick?", ["firmware", "usb"]),
            ("Which voice assistants can control the device?", ["voice assistant"]),
            ("What is the warranty period when the device is used in Brazil?", ["warranty", "brazil"]),
        ],
        "ja": [
            ("スマートウォッチとBluetoothで接続する方法を教えてください。", ["スマートウォッチ"]),
            ("この製品をブラジルで使用した場合の保証期間は何年ですか？", ["ブラジル", "保証"]),
            ("音声アシスタントで操作するにはどうすればよいですか？", ["音声アシスタント"]),
            ("USBメモリからファームウェアを更新する方法を教えてください。", ["ファームウェア"]),
        ],
        "ko": [
            ("스마트워치와 블루투스로 연결하는 방법은 무엇입니까?", ["스마트워치"]),
            ("브라질에서 사용할 경우 보증 기간은 얼마입니까?", ["브라질", "보증"]),
            ("음성 비서로 제품을 조작할 수 있습니까?", ["음성 비서"]),
        ],
    },
    "survey": {"en": [
        ("What share of respondents in Iceland answered the survey by fax?", ["iceland", "fax"]),
        ("How did respondents under 12 years old rate the economy?", ["under 12"]),
        ("What was the survey's response rate among astronauts?", ["astronaut"]),
        ("How many interviews were conducted in Antarctica?", ["antarctica"]),
    ]},
    "paper": {"en": [
        ("What accuracy did the method reach on the Klingon translation benchmark?", ["klingon"]),
        ("How many GPUs of the lunar research station were used to train the model?", ["lunar"]),
        ("How much were the annotators recruited in Antarctica paid per hour?", ["antarctica"]),
        ("Which quantum computer was the model trained on?", ["quantum computer"]),
    ]},
    "policy": {
        "en": [
            ("Which cryptocurrency wallets are approved for paying employee salaries?", ["cryptocurrency"]),
            ("How many vacation days do contractors receive in their first year?", ["vacation", "contractor"]),
            ("What is the dress code for remote workers on video calls?", ["dress code"]),
            ("How often must drones used on company premises be inspected?", ["drone"]),
        ],
        "ja": [
            ("海外転勤者向けの住宅手当の金額はいくらですか？", ["住宅手当", "海外"]),
            ("社員食堂の営業時間は何時から何時までですか？", ["社員食堂"]),
            ("在宅勤務時の服装規定はどうなっていますか？", ["服装"]),
        ],
        "ko": [
            ("해외 파견 직원의 주택 수당은 얼마입니까?", ["주택 수당"]),
            ("사내 식당의 운영 시간은 언제입니까?", ["식당"]),
            ("반려동물 동반 출근이 가능한 요일은 언제입니까?", ["반려동물"]),
        ],
    },
    "standard": {},  # its own subject only (SUBJECT_TOPICS)
}
# Asked of the document itself first (a near miss on its own subject rather than another kind's topic), `{doc}`
# its label; the key terms as above.
SUBJECT_TOPICS: dict[str, list[tuple[str, list[str]]]] = {
    "en": [("Where can its Portuguese translation be obtained, according to {doc}?", ["portuguese"]),
           ("Which exceptions apply in Antarctica, according to {doc}?", ["antarctica"])],
    "ja": [("{doc}によると、この文書の英語版はどこで入手できますか？", ["英語版"]),
           ("{doc}によると、南極で適用される場合の特例は何ですか？", ["南極"])],
    "ko": [("{doc}에 따르면 이 문서의 포르투갈어판은 어디에서 구할 수 있습니까?", ["포르투갈어"]),
           ("{doc}에 따르면 남극에서 적용되는 예외는 무엇입니까?", ["남극"])],
}
_KIND_ORDER = ("table", "number", "definition", "kv", "steps")


def generate_offline(ctx: Context, plan: Plan, report: GenqaReport) -> list[GeneratedQuestion]:
    """The plan's questions: singles, multi-page and unanswerable ones in their shares, each kind round-robin
    over the documents; a kind that falls short is made up with answerable questions while the pages have
    facts left, and a shortfall that remains is said in a note (never padded with templates)."""
    from ragkit.core.progress import progress_bar

    boiler = _boilerplate(ctx.pages)
    docs = {p.doc for p in ctx.pages}
    cache: dict[str, list[Fact]] = {}
    rejected: set[str] = set()

    def readable(question: str, lang: str) -> bool:
        """The grammar check: a question that does not read as one is dropped (counted once)."""
        if question_problem(question, lang) is None:
            return True
        if question not in rejected:
            rejected.add(question)
            report.dropped["ungrammatical"] += 1
        return False

    def facts(p: PageInfo) -> list[Fact]:
        if p.rel not in cache:
            cache[p.rel] = [f for f in page_facts(p, ctx, boiler) if readable(f.question, f.lang)] \
                if _wanted(p, ctx) else []
        return cache[p.rel]

    def ask(f: Fact) -> str:
        return with_document(f.question, f.page, f.lang) if len(docs) > 1 else f.question

    n = plan.singles + plan.multi + plan.unanswerable
    kept: list[GeneratedQuestion] = []
    used: set[str] = set()  # facts already asked (normalized answers)
    bar = progress_bar(total=n, desc="genqa (offline)", unit="q", file=sys.stderr, disable=not ctx.progress)

    def keep(q: GeneratedQuestion | None) -> bool:
        if q is None or not readable(q.question, q.lang) or not add_unique(q, kept, report):
            return False
        kept.append(q)
        bar.update(1)
        return True

    def single(f: Fact) -> GeneratedQuestion:
        return GeneratedQuestion(ask(f), f.answer, [f.page.rel], [f.page.page], f.checklist, "single", f.lang)

    turn = [0]
    by_doc = _by_document(plan.order)
    topics: list[dict[str, set[str]]] = [{} for _ in by_doc]
    first, more = ([_page_facts_stream(ps, facts, used, ctx.per_page, turn, t, first=pass1)
                    for ps, t in zip(by_doc, topics, strict=True)] for pass1 in (True, False))
    planned = {g[0][0].doc: g for g in _by_document(plan.groups, doc=lambda g: g[0].doc)}
    groups = [itertools.chain(planned.get(pages[0].doc, []), _pairs_with_facts(pages, facts, used))
              for pages in by_doc]
    pairs: dict[int, tuple[Fact, Fact]] = {}  # id of a multi-page question -> the facts it asks

    def take_single(f: Fact) -> bool:
        return keep(single(f))

    def take_group(group: list[PageInfo]) -> bool:
        got = _multi(group, facts, used, ask)
        if got is None or not keep(got[0]):
            return False
        pairs[id(got[0])] = got[1]
        used.update(normalize(f.answer) for f in got[1])
        return True

    singles_t = _Turns(first, more, take=take_single)  # every page once before any page twice
    multi_t = _Turns([_groups_stream(g, take_group) for g in groups], take=lambda ok: ok)
    # singles and multi-page questions in their shares: the kind furthest from its share goes next, so pages
    # short of facts still give both kinds
    live = [(singles_t, plan.singles), (multi_t, plan.multi)]
    while want := [(t, q) for t, q in live if t.kept < q]:
        t = min(want, key=lambda tq: tq[0].kept / tq[1])[0]
        if not t.one():
            live = [(x, q) for x, q in live if x is not t]
    unanswerable = _unanswerable(ctx, report, by_doc, facts, ask, readable, used) if plan.unanswerable else iter(())

    def take_unanswerable() -> bool:
        return any(keep(q) for q in unanswerable)  # (stops at the first one kept)

    while sum(q.kind == "unanswerable" for q in kept) < plan.unanswerable and take_unanswerable():
        pass
    # a kind short of its share: answerable questions make up the number while the pages have facts
    while len(kept) < n and singles_t.one():
        pass
    while len(kept) < n and multi_t.one():
        pass
    multis = [q for q in reversed(kept) if q.kind == "multi"]
    if len(kept) + len(multis) >= n:  # two single questions instead of one multi-page one reach the number
        for q in multis:
            if len(kept) >= n:
                break
            a, b = pairs[id(q)]
            sa, sb = single(a), single(b)
            others = [k.question for k in kept if k is not q]
            if readable(sa.question, sa.lang) and readable(sb.question, sb.lang) \
                    and not is_duplicate(sa.question, others) and not is_duplicate(sb.question, [*others, sa.question]):
                kept.remove(q)
                kept.extend([sa, sb])
                bar.update(1)
    # the last resort, more unanswerable questions than planned: at most one for two answerable ones
    while len(kept) < n and 3 * sum(q.kind == "unanswerable" for q in kept) < len(kept) and take_unanswerable():
        pass
    bar.close()
    # never more than one unanswerable question for two answerable ones (none without an answerable one): the
    # planned ones were taken before the answerable ones fell short, so the last taken go first
    answerable = sum(q.kind != "unanswerable" for q in kept)
    over = sum(q.kind == "unanswerable" for q in kept) - answerable // 2
    for q in [q for q in reversed(kept) if q.kind == "unanswerable"][:max(0, over)]:
        kept.remove(q)
    kept.sort(key=lambda q: KINDS.index(q.kind))  # stable: in the order taken within a kind
    unans = sum(q.kind == "unanswerable" for q in kept)
    if len(kept) < n and kept:
        report.notes.append(f"{len(kept)} of the {n} questions asked for: every fact of the pages that makes one "
                            "clear question is asked (offline questions are never padded with templates)")
    elif not kept:  # said, rather than leave a bare "no question could be generated"
        report.notes.append(f"no sentence or table row of its {len(ctx.pages)} page(s) makes one clear question "
                            "offline (offline questions are never padded with templates; a model writes them: set "
                            "OPENAI_API_KEY); unanswerable questions come only beside answerable ones, at most "
                            "one for two")
    if unans < plan.unanswerable and over > 0 and kept:
        report.notes.append(f"{unans} of the {plan.unanswerable} unanswerable questions planned: at most one for "
                            f"two answerable ones, and {answerable} answerable were found")
    elif unans < plan.unanswerable and kept:
        report.notes.append(f"{unans} of the {plan.unanswerable} unanswerable questions planned: no other candidate "
                            "was found absent from the collection")
    return kept


def _by_document(items: list, doc=lambda p: p.doc) -> list[list]:
    """Items split by document, each list in the given order; documents in the order they first appear."""
    out: dict[str, list] = {}
    for it in items:
        out.setdefault(doc(it), []).append(it)
    return list(out.values())


def _page_facts_stream(pages: list[PageInfo], facts, used: set[str], per_page: int, turn: list[int],
                       topics: dict[str, set[str]], *, first: bool):
    """A document's facts to ask, one at a time: its pages in the sampled order, `per_page` facts each (the
    first pass, `first`); or the further passes over the pages for the facts left, until none is left.
    `topics` (page -> topics asked: one question per topic and page) is shared by the two."""
    while True:
        progressed = False
        for page in pages:
            for _ in range(per_page):
                f = _pick(facts(page), turn[0], used, topics.setdefault(page.rel, set()))
                if f is None:
                    break
                turn[0] += 1
                progressed = True
                yield f
        if first or not progressed:
            return


def _groups_stream(groups, take):
    """True each time one of a document's page groups made a multi-page question (its failures skipped)."""
    for group in groups:
        if take(group):
            yield True


def _pairs_with_facts(pages: list[PageInfo], facts, used: set[str]):
    """More related pairs of one document, for when its sampled groups are used up: two pages of one section
    that both still have a fact to ask (nearest first), then two adjacent pages of different sections."""
    ps = sorted(pages, key=lambda p: (p.page, p.rel))
    live = [p for p in ps if any(normalize(f.answer) not in used for f in facts(p))]
    by_sec: dict[str, list[PageInfo]] = {}
    for p in live:
        by_sec.setdefault(p.section, []).append(p)
    for sec in by_sec.values():
        yield from ([a, b] for a, b in zip(sec, sec[1:], strict=False))
    yield from ([a, b] for a, b in zip(live, live[1:], strict=False) if a.section != b.section and b.page == a.page + 1)


class _Turns:
    """Questions kept one at a time from per-document streams, the documents taking turns (so each gives its
    share); the streams of a later tier only when every stream of the tiers before is used up. `take(item)`
    says whether an item made a kept question."""

    def __init__(self, *tiers, take) -> None:
        self.tiers = [list(t) for t in tiers]
        self.take = take
        self.at = 0
        self.kept = 0

    def one(self) -> bool:
        """Keep one more question (the next document's turn); False when every stream is used up."""
        while self.tiers:
            streams = self.tiers[0]
            if not streams:
                self.tiers.pop(0)
                self.at = 0
                continue
            item = next(streams[self.at], _DONE)
            if item is _DONE:
                del streams[self.at]
                self.at = self.at if self.at < len(streams) else 0
            elif self.take(item):
                self.kept += 1
                self.at = (self.at + 1) % len(streams)
                return True
        return False


_DONE = object()


def _wanted(page: PageInfo, ctx: Context) -> bool:
    """With --lang, only the pages written in it: questions are never translated offline."""
    return ctx.lang is None or _lang_key(page.lang) == ctx.lang


def _lang_key(lang: str) -> str:
    return lang if lang in ("ja", "ko", "zh") else "en"


def _pick(facts: list[Fact], turn: int, used: set[str], topics: set[str]) -> Fact | None:
    """The next fact of one page: the kind whose turn it is first (so a set mixes figures, table cells,
    definitions and procedures), never the same fact twice nor a topic the page was asked about already."""
    prefer = ("table", "number", "steps", "number", "definition")[turn % 5]
    for f in sorted(facts, key=lambda f: (f.kind.replace("kv", "table") != prefer, -f.score)):
        key = normalize(f.answer)
        if key in used or normalize(f.topic) in topics:
            continue
        used.add(key)
        topics.add(normalize(f.topic))
        return f
    return None


def document_label(page: PageInfo) -> str:
    """How a question names its document: the file name made readable ("3M 2018 10K"), or the title in the
    front matter when the file name is a hash; "" when neither reads as a name."""
    parts = page.rel.split("/")
    stem = parts[-3] if len(parts) >= 3 else ""
    stem = re.sub(r"[_\s]+", " ", stem).strip()
    if stem and not re.fullmatch(r"[0-9a-f]{16,}", stem):
        return stem
    title = (page.doc_title or "").strip()
    if 4 <= len(title) <= 60 and "/" not in title and sum(c.isalpha() for c in title) * 2 >= len(title):
        return title
    return ""


def with_document(question: str, page: PageInfo, lang: str) -> str:
    """The question naming its document, as one asks a collection of several: "..., according to X?"."""
    doc = document_label(page)
    if not doc or "according to" in question or "によると" in question or "에 따르면" in question:
        return question
    if lang == "ja":
        return f"{doc}によると、{question}"
    if lang == "ko":
        return f"{doc}에 따르면 {question}"
    return f"{question.rstrip('?')}, according to {doc}?"


def _join_questions(a: str, b: str, lang: str) -> str:
    if lang == "ja":
        return f"{a}また、{b}"
    if lang == "ko":
        return f"{a} 또한 {b}"
    second = b[:1].lower() + b[1:] if b[1:2].islower() else b
    return f"{a.rstrip('?')}, and {second}"


MULTI_PART_WORDS, MULTI_WORDS = 24, 36  # an English multi-page question: each part, and the two joined


def _words(f: Fact) -> int:
    """Length of a fact's question in words (CJK questions count as short)."""
    return len(f.question.split()) if f.lang == "en" else 0


def _multi(group: list[PageInfo], facts, used: set[str], ask) -> tuple[GeneratedQuestion, tuple[Fact, Fact]] | None:
    """One fact of each of two pages, asked together (and the two facts); the checklist needs both pages. The
    caller marks the facts used when it keeps the question."""
    def options(p: PageInfo) -> list[Fact]:
        return sorted((f for f in facts(p) if normalize(f.answer) not in used and _words(f) <= MULTI_PART_WORDS),
                      key=lambda f: (_KIND_ORDER.index(f.kind), -f.score))

    # the first pair (by kind, then score) that reads as one question: one language, two topics, short enough
    pair = next(((a, b) for a in options(group[0]) for b in options(group[1])
                 if a.lang == b.lang and normalize(a.topic) != normalize(b.topic)
                 and _words(a) + _words(b) <= MULTI_WORDS), None) if len(group) >= 2 else None
    if pair is None:
        return None
    a, b = pair
    question = _join_questions(a.question, b.question, a.lang)
    if len(group) and len({p.doc for p in group}) == 1:
        question = ask(Fact(a.page, a.kind, question, "", [], a.lang, a.topic, 0.0))
    return GeneratedQuestion(question, f"{a.answer}\n{b.answer}", [a.page.rel, b.page.rel],
                             [a.page.page, b.page.page], [*a.checklist[:3], *b.checklist[:3]], "multi", a.lang), (a, b)


# -- unanswerable ----------------------------------------------------------------------------------------
def _unanswerable(ctx: Context, report: GenqaReport, by_doc: list[list[PageInfo]], facts, ask, readable,
                  used: set[str]) -> Iterator[GeneratedQuestion]:
    """Unanswerable questions one at a time, the documents taking turns (so each is asked one): a neighbour of
    one of its facts (a year the document does not cover) or a question typical of its kind of document, the
    shape asked less so far first; every one checked absent by search and by the page text, and readable."""
    docs = [ps for ps in ([p for p in pages if _wanted(p, ctx)] for pages in by_doc) if ps]
    topics: set[str] = set()  # topics asked for another year
    templates: set[str] = set()  # typical questions asked (each of one document only)

    def unanswerable(question: str, lang: str, terms: list[str]) -> GeneratedQuestion | None:
        if not readable(question, lang):
            return None
        if covered_by_corpus(ctx, question, terms):
            report.dropped["present"] += 1
            return None
        return GeneratedQuestion(question, refusal_text(lang), [], [], [refusal_point(lang)], "unanswerable", lang)

    def neighbours(pages: list[PageInfo]):
        for f in _year_facts(pages, facts):
            got = _year_neighbour(ctx, f)
            if normalize(f.answer) in used or got is None or normalize(f.topic) in topics:
                continue  # (a fact asked already: its neighbour would read as a near-duplicate of that question)
            q = unanswerable(ask(Fact(f.page, f.kind, got[0], "", [], f.lang, f.topic, 0.0)), f.lang, [got[1], f.topic])
            if q:
                topics.add(normalize(f.topic))
                yield q

    def typical(pages: list[PageInfo]):
        for question, terms, lang in _typical_questions(ctx, pages):
            if question in templates:
                continue
            q = unanswerable(ask(Fact(pages[0], "template", question, "", [], lang, terms[0], 0.0)), lang, terms)
            if q:
                templates.add(question)
                yield q

    streams = [(neighbours(ps), typical(ps)) for ps in docs]
    live = list(range(len(docs)))
    shapes = [0, 0]  # neighbours, typical questions kept
    while live:
        for i in list(live):
            order = (0, 1) if shapes[0] <= shapes[1] else (1, 0)  # the shape asked less so far first
            for shape in order:
                q = next(streams[i][shape], None)
                if q is not None:
                    shapes[shape] += 1
                    yield q
                    break
            else:
                live.remove(i)


def _year_facts(pages: list[PageInfo], facts, first_pages: int = 12) -> list[Fact]:
    """Facts naming a year on a document's first sampled pages, best first."""
    return sorted((f for p in pages[:first_pages] for f in facts(p) if f.year), key=lambda f: -f.score)


def _typical_questions(ctx: Context, pages: list[PageInfo]) -> list[tuple[str, list[str], str]]:
    """Questions about the document itself (SUBJECT_TOPICS, when it has a label) and those typical of its kind in
    its language (those of the collection's kinds when its own kind has none in that language), the kind's
    first when they are its own; each with its key terms and language; the kind's shuffled by the document."""
    lang = Counter(_lang_key(p.lang) for p in pages).most_common(1)[0][0]
    pool = DOMAIN_TOPICS[ctx.doc_kind(pages[0].doc)].get(lang) \
        or [t for k in domain_kinds(ctx.pages) for t in DOMAIN_TOPICS[k].get(lang, [])]
    pool = list(pool)
    ctx.rng(f"unanswerable|{pages[0].doc}").shuffle(pool)
    doc = document_label(pages[0])
    own = [(q.format(doc=doc), terms) for q, terms in SUBJECT_TOPICS.get(lang, [])] if doc else []
    # the kind's questions first only when they are the document's own: its words told its kind and the kind has
    # questions in its language (a standard, or a document no marker word describes, asked a household manual's
    # or an office's questions, is asked about itself first)
    kind_first = bool(marked_kinds(pages)) and bool(DOMAIN_TOPICS[ctx.doc_kind(pages[0].doc)].get(lang))
    return [(q, terms, lang) for q, terms in (pool + own if kind_first else own + pool)]


def _year_neighbour(ctx: Context, f: Fact) -> tuple[str, str] | None:
    """The fact's question asked for a year its document never mentions (the nearest earlier one)."""
    doc_text = "\n".join(p.body for p in ctx.pages if p.doc == f.page.doc)
    asked = int(re.sub(r"\D", "", f.year))
    for y in range(asked - 1, asked - 21, -1):  # the nearest earlier year the document never mentions
        if str(y) not in doc_text:
            question = re.sub(rf"(?<!\d){f.year}(?!\d)", str(y), f.question, count=1)
            return (question, str(y)) if question != f.question else None
    return None


def _boilerplate(pages: list[PageInfo]) -> set[str]:
    """Line shapes (digits masked) repeated on 3+ pages of one document: running headers, footers, page
    numbers ("- 22 -", "13 PEW RESEARCH CENTER www.pewresearch.org"). Headings are content, not kept here."""
    per_doc: dict[str, Counter] = {}
    for p in pages:
        shapes = {line_shape(line) for line in p.body.splitlines()
                  if line.strip() and not HEADING_LINE.match(line) and not line.lstrip().startswith("|")}
        per_doc.setdefault(p.doc, Counter()).update(shapes)
    return {s for c in per_doc.values() for s, n in c.items() if n >= 3}
