"""The offline question generator: deterministic, no model. It reads each sampled page's facts (table
cells, "label: value" lines, sentences with numbers, headings with the text under them) and turns them
into questions, ground truths and checklists; multi-page questions join facts of related pages; and
unanswerable questions come from a per-language list checked absent in the database."""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ragkit.genqa.common import (
    Context,
    GeneratedQuestion,
    GenqaReport,
    PageInfo,
    Plan,
    add_unique,
    covered_by_corpus,
    refusal_point,
)
from ragkit.genqa.pagetext import (
    HEADING_LINE,
    covered,
    is_boilerplate,
    leaks,
    line_shape,
    numbers_in,
    parse_blocks,
    term_weight,
    terms_in,
)
from ragkit.text import detect_lang, normalize, refusal_text, split_sentences, tokenize


@dataclass
class Candidate:
    """One offline single-page question, before the plan picks among them."""

    page: PageInfo
    subtype: str  # table | numeric | heading | sentence
    question: str
    answer: str
    checklist: list[str]
    topic: str  # short phrase naming what it asks about (used to build multi-page questions)
    score: float




# -- language templates -------------------------------------------------------------------------------
def _batchim(word: str) -> bool | None:
    ch = word.strip()[-1:] if word.strip() else ""
    if "가" <= ch <= "힣":
        return (ord(ch) - 0xAC00) % 28 != 0
    return None


def _josa(word: str, with_final: str, without: str) -> str:
    b = _batchim(word)
    if b is None:
        return f"{word}{with_final}({without})"
    return word + (with_final if b else without)


def _join_terms(terms: list[str], lang: str) -> str:
    if len(terms) == 1:
        return terms[0]
    if lang == "ja":
        return "と".join(terms)
    if lang == "ko":
        return " ".join(_josa(t, "과", "와") for t in terms[:-1]) + " " + terms[-1]
    return ", ".join(terms[:-1]) + " and " + terms[-1]


def q_heading(lang: str, heading: str) -> str:
    heading = re.sub(r"(?:について|に関して|에 대하여|에 대해|에 관하여)$", "", heading.strip())
    if lang == "ja":
        return f"{heading}について教えてください。"
    if lang == "ko":
        return f"{heading}에 대해 알려 주세요."
    return f"What does the document say about {heading}?"


def q_table(lang: str, ctx: str, label: str, cols: list[str]) -> str:
    if lang == "ja":
        what = f"{label}の{'と'.join(cols)}" if cols else label
        return f"{ctx}: {what}は？" if ctx else f"{what}は？"
    if lang == "ko":
        what = f"{label}의 {_join_terms(cols, 'ko')}" if cols else label
        return f"{ctx}: {_josa(what, '은', '는')} 무엇입니까?" if ctx else f"{_josa(what, '은', '는')} 무엇입니까?"
    what = f"the {_join_terms(cols, 'en')} of {label}" if cols else f"the {label}"
    verb = "are" if len(cols) > 1 else "is"
    return f"What {verb} {what} in {ctx}?" if ctx else f"What {verb} {what}?"


def q_sentence(lang: str, ctx: str, terms: list[str]) -> str:
    t = _join_terms(terms, lang)
    if lang == "ja":
        return f"「{ctx}」では、{t}についてどのように記載されていますか？" if ctx else \
            f"{t}についてどのように記載されていますか？"
    if lang == "ko":
        return f"「{ctx}」에서는 {t}에 대해 어떻게 설명합니까?" if ctx else f"{t}에 대해 어떻게 설명합니까?"
    return f"In {ctx}, what does the document state about {t}?" if ctx else \
        f"What does the document state about {t}?"


def q_multi(lang: str, a: str, b: str) -> str:
    if lang == "ja":  # brackets keep "音がする" + "と" from reading as a condition
        return f"「{a}」と「{b}」について、それぞれ教えてください。"
    if lang == "ko":
        return f"{_josa(a, '과', '와')} {b}에 대해 각각 알려 주세요."
    return f"What does the document say about {a}, and what does it say about {b}?"


GENERIC_HEADINGS = frozenset(normalize(h) for h in [
    *"overview introduction contents index appendix notes note summary scope purpose definitions references "
    "background contact".split(),
    "table of contents", "revision history", "目次", "はじめに", "概要", "付録", "索引", "目的", "注意", "ご注意",
    "お願い", "もくじ", "목차", "개요", "서론", "참고", "부록",
])

# Plausible questions on topics a manual, a policy or a notice usually leaves out. Each carries key terms:
# a page holding all of them would mean the topic is covered after all (then the question is not used).
UNANSWERABLE_TOPICS: dict[str, list[tuple[str, list[str]]]] = {
    "en": [
        ("What is the warranty period for this product when it is used in Brazil?", ["warranty", "brazil"]),
        ("How do I connect the device to a smartphone app over Bluetooth?", ["bluetooth"]),
        ("What was the company's net revenue in fiscal year 2019?", ["revenue", "2019"]),
        ("Which cryptocurrency wallets are approved for paying employee salaries?", ["cryptocurrency"]),
        ("What is the visitor parking fee at the Osaka office?", ["parking", "osaka"]),
        ("How many vacation days do contractors receive in their first year?", ["vacation", "contractor"]),
        ("Who won the company's employee of the year award in 2021?", ["award", "2021"]),
        ("What is the recommended firmware for the solar panel inverter?", ["solar", "inverter"]),
    ],
    "ja": [
        ("この製品をブラジルで使用した場合の保証期間は何年ですか？", ["ブラジル", "保証"]),
        ("スマートフォンアプリとBluetoothで接続する方法を教えてください。", ["bluetooth"]),
        ("2019年度の売上高はいくらでしたか？", ["売上高", "2019"]),
        ("太陽光パネルの設置工事の費用はいくらですか？", ["太陽光"]),
        ("社員食堂の営業時間は何時から何時までですか？", ["社員食堂"]),
        ("電気自動車の充電ケーブルの長さは何メートルですか？", ["電気自動車"]),
        ("この製品の音声アシスタント機能の対応言語は何ですか？", ["音声アシスタント"]),
        ("海外転勤者向けの住宅手当の金額はいくらですか？", ["住宅手当", "海外"]),
    ],
    "ko": [
        ("이 제품을 브라질에서 사용할 경우 보증 기간은 얼마입니까?", ["브라질", "보증"]),
        ("스마트폰 앱과 블루투스로 연결하는 방법은 무엇입니까?", ["블루투스"]),
        ("2019년도 매출액은 얼마였습니까?", ["매출액", "2019"]),
        ("주차장 월 이용 요금은 얼마입니까?", ["주차장", "요금"]),
        ("반려동물 동반 출입이 가능한 시간은 언제입니까?", ["반려동물"]),
        ("전기차 충전소는 몇 층에 있습니까?", ["충전소"]),
        ("태양광 패널 설치 지원금은 얼마입니까?", ["태양광"]),
        ("해외 파견 직원의 주택 수당은 얼마입니까?", ["주택 수당"]),
    ],
}


def _lang_key(lang: str) -> str:
    return lang if lang in ("ja", "ko") else "en"



# -- offline generator --------------------------------------------------------------------------------
def page_candidates(page: PageInfo, ctx: Context, boiler: set[str]) -> list[Candidate]:
    """Every honest single-page question the offline generator can make from one page, best first."""
    lang = _lang_key(ctx.lang_of(page))
    blocks = parse_blocks(page.body, boiler)
    headings = [b.heading for b in blocks if b.heading]
    out: list[Candidate] = []
    title = normalize(page.doc_title)
    for block in blocks:
        context = next((h for h in (block.heading, headings[0] if headings else "", page.section)
                        if _good_context(h)), "")
        # tables: "仕様: 定格内容積は？" -> the cell
        for table in block.tables:
            out.extend(_table_candidates(page, ctx, table, context, lang))
        sentences = [s for para in block.paragraphs for s in split_sentences(para)]
        sentences = [s for s in sentences if not is_boilerplate(s) and line_shape(s) not in boiler]
        # heading: "X について教えてください" -> the first sentences under it
        # (not the document's own title: "What does the document say about <its title>?" asks for everything)
        if block.heading and sentences and normalize(block.heading) not in GENERIC_HEADINGS \
                and 2 <= len(block.heading) <= 60 and normalize(block.heading) != title:
            c = _heading_candidate(page, ctx, block.heading, sentences, lang)
            if c:
                out.append(c)
        # "label: value" lines are rows; key sentences with numbers/units (and, at lower priority, plain ones
        # with distinctive terms)
        for s in sentences:
            c = _kv_candidate(page, ctx, s, context, lang) or _sentence_candidate(
                page, ctx, s, context if context != s else "", lang)
            if c:
                out.append(c)
    # most distinctive first; stable for ties
    out.sort(key=lambda c: -c.score)
    uniq, seen = [], set()
    for c in out:
        key = normalize(c.question)
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq


def _good_context(heading: str) -> bool:
    """A heading worth naming in a question: short, not a fallback section ("pages_001-010")."""
    h = heading.strip()
    return 2 <= len(h) <= 40 and not re.fullmatch(r"pages_\d+-\d+|front matter", h) \
        and not h.endswith((".", "。", "!", "?", "！", "？"))


def _checklist(answer: str, exclude: str, ctx: Context, *, first: list[str] = ()) -> list[str]:
    """2-5 key points of `answer`: given items first, then numbers, then its rarest terms not in `exclude`."""
    items: list[str] = []

    def add(t: str) -> None:
        t = t.strip(" 、,.。:：;；")
        if not t or len(items) >= 5 or not covered(t, answer):
            return
        low = normalize(t)
        words = {w for w in low.split() if not w[:1].isdigit()} if " " in low or low.isascii() else set()
        if any(low in normalize(i) or normalize(i) in low or words & set(normalize(i).split()) for i in items):
            return
        items.append(t)

    for t in first:
        add(t)
    for n in numbers_in(answer):
        add(n)
    ex = normalize(exclude)
    terms = [t for t in terms_in(answer, ctx.phrase_ok) if normalize(t) not in ex]
    terms.sort(key=lambda t: -term_weight(t, ctx))
    for t in terms[:4]:
        add(t)
    return items


def _table_candidates(page: PageInfo, ctx: Context, table: list[list[str]], context: str,
                      lang: str) -> list[Candidate]:
    rows = [r for r in table if any(c for c in r)]
    if len(rows) < 2 or max(len(r) for r in rows) < 2:
        return []
    header = rows[0]
    out = []
    for r in rows[1:]:
        values = [(header[i] if i < len(header) else "", v.strip()) for i, v in enumerate(r) if i > 0]
        c = _row_candidate(page, ctx, r[0].strip(), values, context, lang, "table")
        if c:
            out.append(c)
    return out


_KV_NOT_LABELS = frozenset("note notes source sources example examples e.g. figure table 注 注意 ※ 例 출처 참고 주".split())
_KV = re.compile(r"^(?P<label>[^:：。.!?！？]{2,25}?)\s*[:：]\s*(?P<value>\S.*)$")


def _kv_candidate(page: PageInfo, ctx: Context, sentence: str, context: str, lang: str) -> Candidate | None:
    """A "label: value" line ("이사 날짜: 2026년 3월 14일", "チルドルーム：冷蔵室の最下段…") is a table row."""
    m = _KV.match(sentence)
    if not m or len(m.group("value")) > 150:
        return None
    label = m.group("label").strip()
    if re.search(r"[()\[\]{}=,;\"“”]|https?$", label) or normalize(label) in _KV_NOT_LABELS \
            or label[:1].islower() or re.match(r"(?i)(?:figure|fig\.|table|図|表|그림)\s*\d", label):
        return None  # code, citations, "Note:" / "Source:" lines, a sentence that happens to hold a colon
    return _row_candidate(page, ctx, m.group("label").strip(), [("", m.group("value").strip())], context, lang,
                          "kv")


def _row_candidate(page: PageInfo, ctx: Context, label: str, values: list[tuple[str, str]], context: str,
                   lang: str, subtype: str) -> Candidate | None:
    values = [(h, v) for h, v in values if v and v not in ("-", "—", "–", "―", "ー")]
    if not label or not values or len(label) > 40 or re.fullmatch(r"[\d\s.,%-]+", label):
        return None
    cols = [h for h, _ in values] if len(values) > 1 and all(h for h, _ in values) else []
    if len(values) > 1 and not cols:
        return None  # several unnamed cells: no honest way to ask for them
    values, cols = values[:3], cols[:3]
    where = context if normalize(context) != normalize(label) else ""
    if subtype == "kv" and lang == "en":
        question = f'What does {where} give for "{label}"?' if where else f'What is given for "{label}"?'
    else:
        question = q_table(lang, where, label, cols)
    if cols:
        answer = f"{label}: " + ", ".join(f"{h} {v}" for h, v in values)
    else:
        answer = f"{label}: {values[0][1]}"
    first = []
    for _, v in values:  # a cell as one key point, or its numbers when it holds several ("2026년 3월 14일")
        nums = numbers_in(v)
        atomic = len(v) <= 20 and not re.search(r"[、,;；]|\s-\s", v)
        first.extend(nums if len(nums) >= 2 or (nums and not atomic) else [v] if atomic else [])
    checklist = _checklist(answer, question, ctx, first=first)
    if len(checklist) < 2 and covered(label, answer):
        checklist = _checklist(answer, "", ctx, first=[*first, label])
    if not checklist or any(covered(v, question) for _, v in values):
        return None  # the question would give the answer away
    if len(checklist) < 2:
        checklist.insert(0, label)
    score = 3.0 + (0.5 if numbers_in(answer) else 0.0) + ctx.idf(label) / 5
    return Candidate(page, subtype, question, answer, checklist, label, score)


def _heading_candidate(page: PageInfo, ctx: Context, heading: str, sentences: list[str],
                       lang: str) -> Candidate | None:
    answer_parts: list[str] = []
    for s in sentences[:2]:  # the key sentences right under the heading, not the whole section
        answer_parts.append(s)
        if sum(len(a) for a in answer_parts) > 100:
            break
    answer = _join_sentences(answer_parts)
    if not set(tokenize(heading, drop_stopwords=True)) & set(tokenize(answer, drop_stopwords=True)):
        return None  # the text under it does not speak of the heading (a cover page subtitle, say)
    question = q_heading(lang, heading)
    if leaks(question, answer):
        return None
    checklist = _checklist(answer, heading, ctx)
    if len(checklist) < 2 or ctx.idf(heading) < 0.5:
        return None
    score = 2.0 + ctx.idf(heading) / 5
    return Candidate(page, "heading", question, answer, checklist, heading, score)


def _sentence_candidate(page: PageInfo, ctx: Context, sentence: str, context: str,
                        lang: str) -> Candidate | None:
    if not 15 <= len(sentence) <= 300:
        return None
    nums = numbers_in(sentence)
    terms = [t for t in terms_in(sentence, ctx.phrase_ok) if ctx.idf(t) > 0.3]
    if not terms:
        return None
    units = " ".join(nums)  # "30 days": "days" names no topic, and the question would hint at the answer
    ranked = sorted((t for t in terms if not covered(t, context) and not covered(t, units)),
                    key=lambda t: -term_weight(t, ctx))
    # the question names the sentence's two most distinctive terms (not overlapping one another)
    topic: list[str] = []
    for t in ranked:
        if any(normalize(t) in normalize(x) or normalize(x) in normalize(t) for x in topic):
            continue
        topic.append(t)
        if len(topic) == 2:
            break
    if not topic:
        return None
    question = q_sentence(lang, context, topic)
    if leaks(question, sentence):
        return None
    checklist = _checklist(sentence, " ".join(topic) + " " + context, ctx)
    if len(checklist) < 2:
        return None
    distinct = sum(ctx.idf(t) for t in topic) / len(topic)
    score = (2.5 if nums else 1.0) + distinct / 5
    return Candidate(page, "numeric" if nums else "sentence", question, sentence, checklist,
                     _join_terms(topic, lang), score)


def _join_sentences(parts: list[str]) -> str:
    out = ""
    for p in parts:
        if out and not (detect_lang(out[-1:]) in ("ja", "zh") and detect_lang(p[:1]) in ("ja", "zh")):
            out += " "
        out += p
    return out


_ROTATION = ("table", "numeric", "heading", "sentence", "kv")


def _pick(cands: list[Candidate], n: int, turn: int, taken: set[str]) -> list[Candidate]:
    """Up to n candidates of one page: the subtype whose turn it is first (so the set mixes tables,
    numbers and headings), never the same answer or topic twice."""
    prefer = _ROTATION[turn % 3]
    ordered = sorted(cands, key=lambda c: (c.subtype.replace("kv", "table") != prefer, -c.score))
    out: list[Candidate] = []
    for c in ordered:
        key = normalize(c.answer)
        if key in taken or any(normalize(c.topic) == normalize(o.topic) for o in out):
            continue
        out.append(c)
        taken.add(key)
        if len(out) == n:
            break
    return out


def _boilerplate(pages: list[PageInfo]) -> set[str]:
    """Line shapes (digits masked) repeated on 3+ pages of one document: running headers, footers, page
    numbers ("- 22 -", "13 PEW RESEARCH CENTER www.pewresearch.org"). Headings are content, not kept here."""
    per_doc: dict[str, Counter] = {}
    for p in pages:
        shapes = {line_shape(line) for line in p.body.splitlines()
                  if line.strip() and not HEADING_LINE.match(line) and not line.lstrip().startswith("|")}
        per_doc.setdefault(p.doc, Counter()).update(shapes)
    return {s for c in per_doc.values() for s, n in c.items() if n >= 3}


def generate_offline(ctx: Context, plan: Plan, report: GenqaReport) -> list[GeneratedQuestion]:
    from tqdm import tqdm

    boiler = _boilerplate(ctx.pages)
    cache: dict[str, list[Candidate]] = {}

    def cands(p: PageInfo) -> list[Candidate]:
        if p.rel not in cache:
            cache[p.rel] = page_candidates(p, ctx, boiler)
        return cache[p.rel]

    kept: list[GeneratedQuestion] = []
    taken: set[str] = set()
    singles: list[GeneratedQuestion] = []
    bar = tqdm(total=plan.singles + plan.multi + plan.unanswerable, desc="genqa (offline)", unit="q",
               file=sys.stderr, disable=not ctx.progress)
    turn = 0
    for page in plan.order:
        if len(singles) >= plan.singles:
            break
        picked = _pick(cands(page), min(ctx.per_page, plan.singles - len(singles)), turn, taken)
        if not picked:
            continue
        turn += 1
        for c in picked:
            q = GeneratedQuestion(c.question, c.answer, [page.rel], [page.page], c.checklist, "single",
                                  ctx.lang_of(page))
            if add_unique(q, singles + kept, report):
                singles.append(q)
                bar.update(1)
    kept.extend(singles)
    multi = 0
    want_multi = plan.multi + plan.singles - len(singles)  # pages short of single questions: more multi
    for group in plan.groups:
        if multi >= want_multi:
            break
        q = _offline_multi(group, ctx, cands, taken)
        if q and add_unique(q, kept, report):
            kept.append(q)
            multi += 1
            bar.update(1)
    for q in _offline_unanswerable(ctx, plan, report):
        if add_unique(q, kept, report):
            kept.append(q)
            bar.update(1)
    bar.close()
    return kept


def _offline_multi(group: list[PageInfo], ctx: Context, cands: Callable[[PageInfo], list[Candidate]],
                   taken: set[str]) -> GeneratedQuestion | None:
    """Join one topic of each page: "What does the document say about A, and about B?"."""
    lang = ctx.lang_of(group[0])
    chosen: list[Candidate] = []
    for p in group:
        options = sorted(cands(p), key=lambda c: ("heading", "table", "kv", "numeric", "sentence").index(c.subtype))
        fresh = [c for c in options if normalize(c.answer) not in taken] or options
        pick = next((c for c in fresh if all(normalize(c.topic) != normalize(o.topic) for o in chosen)), None)
        if pick is None:
            return None
        chosen.append(pick)
    if len(chosen) < 2:
        return None
    a, b = chosen[0], chosen[1]
    question = q_multi(_lang_key(lang), _multi_topic(a, lang), _multi_topic(b, lang))
    checklist: list[str] = []
    for c in chosen:
        checklist.extend(c.checklist[:2])
    for c in chosen:
        taken.add(normalize(c.answer))
    return GeneratedQuestion(question, "\n".join(c.answer for c in chosen), [p.rel for p in group],
                             [p.page for p in group], checklist[:5], "multi", lang)


def _multi_topic(c: Candidate, lang: str) -> str:
    """A single noun phrase per page, so "A and B" reads as two topics (a sentence's first term only)."""
    topic = c.topic
    if c.subtype in ("numeric", "sentence"):
        topic = topic.split("と")[0] if lang == "ja" else re.split(r"(?:과|와)\s| and |, ", topic)[0]
    return re.sub(r"(?:について|に関して|에 대하여|에 대해)$", "", topic.strip())


def _offline_unanswerable(ctx: Context, plan: Plan, report: GenqaReport) -> list[GeneratedQuestion]:
    if plan.unanswerable <= 0:
        return []
    langs = [ctx.lang or p.lang for p in plan.order]
    order: list[str] = []
    for lg in langs:  # languages in the sampled order, so the split follows the corpus
        if _lang_key(lg) not in order:
            order.append(_lang_key(lg))
    pools = {lg: list(UNANSWERABLE_TOPICS[lg]) for lg in order}
    for lg in order:
        ctx.rng(f"unanswerable|{lg}").shuffle(pools[lg])
    out: list[GeneratedQuestion] = []
    while len(out) < plan.unanswerable and any(pools.values()):
        for lg in order:
            if len(out) >= plan.unanswerable or not pools[lg]:
                continue
            question, terms = pools[lg].pop(0)
            if covered_by_corpus(ctx, question, terms):
                report.dropped["present"] += 1
                continue
            out.append(GeneratedQuestion(question, refusal_text(lg), [], [], [refusal_point(lg)],
                                         "unanswerable", ctx.lang or lg))
    return out


