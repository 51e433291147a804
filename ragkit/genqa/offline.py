"""The offline question generator: deterministic, no model."""

from __future__ import annotations

import re
import sys
from collections import Counter

from ragkit.core.text import normalize, refusal_text
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
from ragkit.genqa.facts import Fact, page_facts
from ragkit.genqa.pagetext import HEADING_LINE, line_shape

# Questions typical of a kind of document that a given collection may not answer; each carries key terms:
# a page holding all of them means the topic is covered after all (then the question is not used).
# The kind is chosen from the collection's own words (DOMAIN_MARKERS), so a 10-K is asked about a filing's
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
}
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
}
_KIND_ORDER = ("table", "number", "definition", "kv", "steps")


def generate_offline(ctx: Context, plan: Plan, report: GenqaReport) -> list[GeneratedQuestion]:
    from ragkit.core.progress import progress_bar

    boiler = _boilerplate(ctx.pages)
    docs = {p.doc for p in ctx.pages}
    cache: dict[str, list[Fact]] = {}

    def facts(p: PageInfo) -> list[Fact]:
        if p.rel not in cache:
            cache[p.rel] = page_facts(p, ctx, boiler) if _wanted(p, ctx) else []
        return cache[p.rel]

    def ask(f: Fact) -> str:
        return with_document(f.question, f.page, f.lang) if len(docs) > 1 else f.question

    kept: list[GeneratedQuestion] = []
    used: set[str] = set()  # facts already asked (normalized answers)
    bar = progress_bar(total=plan.singles + plan.multi + plan.unanswerable, desc="genqa (offline)", unit="q",
               file=sys.stderr, disable=not ctx.progress)
    singles: list[GeneratedQuestion] = []
    turn = 0
    for page in plan.order:
        if len(singles) >= plan.singles:
            break
        picked = _pick(facts(page), min(ctx.per_page, plan.singles - len(singles)), turn, used)
        if picked:
            turn += 1
        for f in picked:
            q = GeneratedQuestion(ask(f), f.answer, [page.rel], [page.page], f.checklist, "single", f.lang)
            if add_unique(q, singles, report):
                singles.append(q)
                bar.update(1)
    kept.extend(singles)
    want_multi = plan.multi + plan.singles - len(singles)  # pages short of facts: more multi-page questions
    multi = 0
    for group in plan.groups:
        if multi >= want_multi:
            break
        q = _multi(group, facts, used, ask)
        if q and add_unique(q, kept, report):
            kept.append(q)
            multi += 1
            bar.update(1)
    asked = [f for p in plan.order[: max(len(kept) * 2, 20)] for f in facts(p)]
    for q in _unanswerable(ctx, plan, report, asked, ask):
        if add_unique(q, kept, report):
            kept.append(q)
            bar.update(1)
    bar.close()
    return kept


def _wanted(page: PageInfo, ctx: Context) -> bool:
    """With --lang, only the pages written in it: questions are never translated offline."""
    return ctx.lang is None or _lang_key(page.lang) == ctx.lang


def _lang_key(lang: str) -> str:
    return lang if lang in ("ja", "ko", "zh") else "en"


def _pick(facts: list[Fact], n: int, turn: int, used: set[str]) -> list[Fact]:
    """Up to n facts of one page: the kind whose turn it is first (so a set mixes figures, table cells,
    definitions and procedures), never the same fact or topic twice."""
    prefer = ("table", "number", "steps", "number", "definition")[turn % 5]
    ordered = sorted(facts, key=lambda f: (f.kind.replace("kv", "table") != prefer, -f.score))
    out: list[Fact] = []
    for f in ordered:
        key = normalize(f.answer)
        if key in used or any(normalize(f.topic) == normalize(o.topic) for o in out):
            continue
        out.append(f)
        used.add(key)
        if len(out) == n:
            break
    return out


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


def _multi(group: list[PageInfo], facts, used: set[str], ask) -> GeneratedQuestion | None:
    """One fact of each of two pages, asked together; the checklist needs both pages."""
    chosen: list[Fact] = []
    for p in group[:2]:
        # short questions only: two long ones joined would not read as one question
        options = sorted((f for f in facts(p) if len(f.question.split()) <= 14 or f.lang != "en"),
                         key=lambda f: (_KIND_ORDER.index(f.kind), -f.score))
        fresh = [f for f in options if normalize(f.answer) not in used]
        pick = next((f for f in fresh if all(normalize(f.topic) != normalize(o.topic) for o in chosen)), None)
        if pick is None:
            return None
        chosen.append(pick)
    a, b = chosen
    if a.lang != b.lang:
        return None  # one language per question
    for f in chosen:
        used.add(normalize(f.answer))
    question = _join_questions(a.question, b.question, a.lang)
    if len(group) and len({p.doc for p in group}) == 1:
        question = ask(Fact(a.page, a.kind, question, "", [], a.lang, a.topic, 0.0))
    return GeneratedQuestion(question, f"{a.answer}\n{b.answer}", [a.page.rel, b.page.rel],
                             [a.page.page, b.page.page], [*a.checklist[:3], *b.checklist[:3]], "multi", a.lang)


# -- unanswerable ----------------------------------------------------------------------------------------
def _unanswerable(ctx: Context, plan: Plan, report: GenqaReport, facts: list[Fact], ask) -> list[GeneratedQuestion]:
    """Neighbours of real facts first (a year the document does not cover), then questions typical of the
    collection's kind of document; every one checked absent by search and by the page text."""
    if plan.unanswerable <= 0:
        return []
    out: list[GeneratedQuestion] = []
    seen: set[str] = set()
    for f in sorted((f for f in facts if f.year), key=lambda f: -f.score):
        if len(out) >= plan.unanswerable:
            return out
        got = _year_neighbour(ctx, f)
        if got is None:
            continue
        question, year = got
        if normalize(f.topic) in seen:
            continue
        if covered_by_corpus(ctx, question, [year, f.topic]):
            report.dropped["present"] += 1
            continue
        seen.add(normalize(f.topic))
        out.append(GeneratedQuestion(ask(Fact(f.page, f.kind, question, "", [], f.lang, f.topic, 0.0)),
                                     refusal_text(f.lang), [], [], [refusal_point(f.lang)], "unanswerable", f.lang))
        if len(out) * 2 >= plan.unanswerable and plan.unanswerable > 1:
            break  # leave room for the other kind, so the set is not all one shape
    langs: list[str] = []
    for p in plan.order:
        if _wanted(p, ctx) and _lang_key(p.lang) not in langs:
            langs.append(_lang_key(p.lang))
    kinds = domain_kinds(ctx.pages)
    pools = {lg: [t for k in kinds for t in DOMAIN_TOPICS[k].get(lg, [])] for lg in langs}
    for lg in langs:
        ctx.rng(f"unanswerable|{lg}").shuffle(pools[lg])
    while len(out) < plan.unanswerable and any(pools.values()):
        for lg in langs:
            if len(out) >= plan.unanswerable or not pools[lg]:
                continue
            question, terms = pools[lg].pop(0)
            if covered_by_corpus(ctx, question, terms):
                report.dropped["present"] += 1
                continue
            out.append(GeneratedQuestion(question, refusal_text(lg), [], [], [refusal_point(lg)], "unanswerable", lg))
    return out


def domain_kinds(pages: list[PageInfo]) -> list[str]:
    """The collection's kinds of document, most typical first (those whose marker words it uses)."""
    text = normalize(" ".join(p.body[:3000] for p in pages[:400]))
    scores = {k: sum(len(re.findall(rf"(?<![a-z]){re.escape(normalize(w))}", text)) for w in words)
              for k, words in DOMAIN_MARKERS.items()}
    ranked = sorted(scores, key=lambda k: -scores[k])
    best = scores[ranked[0]]
    return [k for k in ranked if scores[k] and scores[k] * 2 >= best] or ["manual", "policy"]


def _year_neighbour(ctx: Context, f: Fact) -> tuple[str, str] | None:
    """The fact's question asked for a year its document never mentions (the nearest earlier one)."""
    doc_text = "\n".join(p.body for p in ctx.pages if p.doc == f.page.doc)
    asked = int(re.sub(r"\D", "", f.year))
    for y in range(asked - 1, asked - 12, -1):  # the nearest earlier year the document never mentions
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
