"""The model question generator: per page (or group of related pages) one JSON call for questions,
answers, checklists and pages; a verification call per question that drops what the pages do not
support; unanswerable questions proposed by the model and kept only when checked absent."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from ragkit.core import csvio
from ragkit.core.errors import RagError
from ragkit.core.jsonreply import json_array, json_object, json_type
from ragkit.core.models import Usage
from ragkit.core.paths import reference_path
from ragkit.core.text import detect_lang, normalize, refusal_text
from ragkit.genqa.common import (
    LANG_NAMES,
    MAX_CONSECUTIVE_FAILURES,
    MAX_PAGE_CHARS,
    Context,
    GeneratedQuestion,
    GenqaReport,
    PageInfo,
    Plan,
    add_unique,
    covered_by_corpus,
    refusal_point,
)
from ragkit.genqa.pagetext import terms_in

ITEMS_SCHEMA = json_object({"items": json_array(json_object({
    "question": json_type("string"),
    "answer": json_type("string"),
    "checklist": json_array(json_type("string")),
    "pages": json_array(json_type("integer")),
}))})
VERIFY_SCHEMA = json_object({"supported": json_type("boolean"), "unsupported_items": json_array(json_type("string"))})
ABSENT_SCHEMA = json_object({"items": json_array(json_object({"question": json_type("string"),
                                                             "key_terms": json_array(json_type("string"))}))})

GEN_SYSTEM = (
    "You write evaluation questions for a question-answering system that searches a collection of document "
    "pages. Write questions a real user of these documents would ask, answered by the pages given. Rules: "
    "each question must be answerable from the given page(s) alone; it names the distinctive subject (terms "
    "as the document uses them) so a search can find the page, but it must not contain the answer; the "
    "answer is a short, complete ground truth taken from the pages; the checklist holds 1 to 5 claims that a "
    "correct answer must make, each a short sentence or phrase stating one checkable fact together with its "
    "subject (\"Unit 2 holds 6 L at 3 L/min\", never a bare fragment such as \"6 L\"), each stated in the "
    "pages; pages lists the page numbers the answer needs. Write every field in the one language asked for."
)
VERIFY_SYSTEM = (
    "You check a question-answer pair written about document pages. supported is true only when the answer "
    "and every checklist item are stated in, or follow directly from, the pages. List in unsupported_items "
    "every checklist item or claim of the answer that the pages do not support (empty when all are)."
)
ABSENT_SYSTEM = (
    "You write test questions that a document collection cannot answer. Given its documents, section "
    "titles and a few facts they state, write questions of the same kind a reader of these documents would "
    "ask, about a close neighbour of such a fact that the documents do not hold (the same figure for another "
    "year, product, region or unit). For each question give key_terms: 1 to 3 specific words, written as a "
    "document would write them, whose presence together in a page would mean the question is answered."
)


def _page_block(p: PageInfo, db: Path) -> str:
    text = p.body if len(p.body) <= MAX_PAGE_CHARS else p.body[:MAX_PAGE_CHARS] + "\n[... page truncated]"
    return f"=== Page {p.page} ({reference_path(db, p.rel)}) ===\n{text}"


def _lang_name(lang: str) -> str:
    return LANG_NAMES.get(lang, lang)


def _gen_messages(group: list[PageInfo], n: int, lang: str, db: Path) -> list[dict]:
    multi = len(group) > 1
    need = (f"Each question must need information from at least two of these {len(group)} pages "
            "(for example comparing or combining them); list those pages. ") if multi else ""
    user = (f"Document: {group[0].doc_title}\nSection: {group[0].section}\n\n"
            + "\n\n".join(_page_block(p, db) for p in group)
            + f"\n\nWrite {n} question(s) in {_lang_name(lang)}. {need}"
            "Answer and checklist in the same language as the question. "
            'Reply as JSON: {"items": [{"question": "...", "answer": "...", "checklist": ["..."], '
            '"pages": [page numbers]}]}')
    return [{"role": "system", "content": GEN_SYSTEM}, {"role": "user", "content": user}]


def _verify_messages(q: GeneratedQuestion, group: list[PageInfo], db: Path) -> list[dict]:
    items = "\n".join(f"- {c}" for c in q.checklist)
    user = ("\n\n".join(_page_block(p, db) for p in group)
            + f"\n\nQuestion: {q.question}\nAnswer: {q.ground_truth}\nChecklist:\n{items}\n\n"
            'Reply as JSON: {"supported": true|false, "unsupported_items": ["..."]}')
    return [{"role": "system", "content": VERIFY_SYSTEM}, {"role": "user", "content": user}]


def _is_json_failure(e: RagError) -> bool:
    return "no valid JSON" in str(e)


_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")


def _figures(text: str) -> set[str]:
    return {m.replace(",", "") for m in _DIGITS.findall(normalize(text))}


def points_of_the_answer(checklist: list[str], question: str, answer: str) -> tuple[list[str], int]:
    """The checklist items that are points of this answer, and how many were not. An item naming a figure
    that neither the answer nor the question holds ("passwords change every 90 days" beside "at least 12
    characters"), or whose content words none of them holds ("admin accounts use two-factor authentication"),
    asks more than the question does and would mark a perfect answer down. With none left, the answer is the
    one point."""
    known = _figures(question) | _figures(answer)
    said = normalize(f"{question}\n{answer}")

    def in_answer(point: str) -> bool:
        terms = [normalize(t) for t in terms_in(point)]
        return _figures(point) <= known and (not terms or any(t in said for t in terms))

    kept = [c for c in checklist if in_answer(c)]
    return (kept or [answer]), len(checklist) - len(kept)


def _as_items(data: dict, group: list[PageInfo], lang: str, n: int) -> tuple[list[GeneratedQuestion], int, int]:
    """Validated questions from the model's items, how many items were unusable, and how many checklist
    points were left out as asking more than the question."""
    by_num = {p.page: p for p in group}
    out, bad, off_answer = [], 0, 0
    for item in (data.get("items") or [])[: max(n, 1) * 2]:
        if not isinstance(item, dict):
            bad += 1
            continue
        question = str(item.get("question") or "").strip()
        answer = str(item.get("answer") or "").strip()
        raw = item.get("checklist") or []
        if isinstance(raw, str):
            raw = csvio.split_checklist(raw)
        checklist = [re.sub(r"\s+", " ", str(c)).strip() for c in raw if str(c).strip()][:6]
        if not question or not answer or not checklist:
            bad += 1
            continue
        checklist, extra = points_of_the_answer(checklist, question, answer)
        off_answer += extra
        nums = []
        for v in item.get("pages") or []:
            try:
                num = int(str(v).strip())
            except ValueError:
                continue
            if num in by_num and num not in nums:
                nums.append(num)
        refs = [by_num[x] for x in sorted(nums)] or list(group)
        kind = "multi" if len(refs) > 1 else "single"
        out.append(GeneratedQuestion(question, answer, [p.rel for p in refs], [p.page for p in refs],
                                     checklist, kind, lang))
    return out[:n], bad, off_answer


class _Caller:
    """Counts usage and consecutive provider failures across threads."""

    def __init__(self, provider, report: GenqaReport) -> None:
        import threading

        self.provider = provider
        self.report = report
        self.lock = threading.Lock()
        self.failures = 0

    @property
    def stopped(self) -> bool:
        return self.failures >= MAX_CONSECUTIVE_FAILURES

    def json(self, messages: list[dict], schema: dict, name: str) -> dict:
        from ragkit.core.jsonreply import JSON_MAX_TOKENS, chat_json

        try:
            # several questions with answers and checklists in one reply: twice a judge's cap
            data, usage = chat_json(self.provider, messages, schema=schema, schema_name=name,
                                    max_tokens=2 * JSON_MAX_TOKENS)
        except RagError as e:
            if not _is_json_failure(e):
                with self.lock:
                    self.failures += 1
            raise
        with self.lock:
            self.report.usage.add(usage)
            self.failures = 0
        return data


def generate_with_model(ctx: Context, plan: Plan, report: GenqaReport, provider) -> list[GeneratedQuestion]:
    """The questions the model wrote and a second call confirmed. Ctrl-C stops it within a moment, even with
    requests in flight (daemon threads: nothing waits for them), and returns what was kept so far with
    `report.interrupted` set: the caller writes those."""
    from ragkit.core.progress import progress_bar
    from ragkit.core.waiting import Heartbeat, waiting_text
    from ragkit.core.workers import DaemonPool

    caller = _Caller(provider, report)
    report.usage = Usage(cost_usd=0.0)
    kept: list[GeneratedQuestion] = []
    total = plan.singles + plan.multi + plan.unanswerable
    bar = progress_bar(total=total, desc=f"genqa ({provider.model})", unit="q", file=sys.stderr,
                       disable=not ctx.progress)
    workers = max(1, min(ctx.settings.workers, 8))
    pool = DaemonPool(workers)

    def run_all(fn, items: list) -> list:  # pool.map, waiting so that Ctrl-C is seen
        return [_result(f) for f in [pool.submit(fn, item) for item in items]]

    heartbeat = Heartbeat(lambda w: f"genqa: {len(kept)}/{total} questions, {waiting_text(w)}", file=sys.stderr,
                          enabled=ctx.progress, live=bar.set_postfix_str)
    try:
        heartbeat.start()
        for groups, quota, per in (([[p] for p in plan.order], plan.singles, ctx.per_page),
                                   (plan.groups, plan.multi, ctx.per_page)):
            if groups is plan.groups:  # pages short of single questions: more multi-page ones
                quota += plan.singles - len(kept)
            got = 0
            pos = 0
            while got < quota and pos < len(groups) and not caller.stopped:
                wave = groups[pos: pos + max(1, math.ceil((quota - got) / per))]
                pos += len(wave)
                for group, items in zip(wave, run_all(lambda g, n=per: _ask_group(caller, ctx, g, n), wave),
                                        strict=True):
                    fresh = []
                    for q in items:
                        if add_unique(q, kept + fresh, report):
                            fresh.append(q)
                    verdicts = run_all(lambda q, g=group: _verify(caller, ctx, q, g), fresh)
                    for q, ok in zip(fresh, verdicts, strict=True):
                        if ok and got < quota:
                            kept.append(q)
                            got += 1
                            bar.update(1)
        if plan.unanswerable and not caller.stopped:
            for q in _llm_unanswerable(caller, ctx, plan, report, [q.ground_truth for q in kept][:5]):
                if add_unique(q, kept, report):
                    kept.append(q)
                    bar.update(1)
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        heartbeat.stop()
        pool.shutdown(cancel_futures=True)
        bar.close()
    if caller.stopped:
        report.errors.append(f"stopped after {MAX_CONSECUTIVE_FAILURES} provider failures in a row")
    return kept


def _result(fut):
    """A future's result, waited for in short slices: the kernel may hand SIGINT to a worker thread, and then a
    main thread blocked in one long lock wait never runs Python's handler (s57: still waiting 20 s later)."""
    while True:
        try:
            return fut.result(timeout=0.25)
        except TimeoutError:
            continue


def _ask_group(caller: _Caller, ctx: Context, group: list[PageInfo], n: int) -> list[GeneratedQuestion]:
    where = "\n".join(reference_path(ctx.db, p.rel) for p in group)
    if caller.stopped:
        return []
    lang = ctx.lang or group[0].lang
    try:
        data = caller.json(_gen_messages(group, n, lang, ctx.db), ITEMS_SCHEMA, "questions")
    except RagError as e:
        with caller.lock:
            caller.report.skipped.append((where, str(e)))
            if not _is_json_failure(e):
                caller.report.errors.append(f"{where}: {e}")
        return []
    items, bad, off_answer = _as_items(data, group, lang, n)
    mixed = [q for q in items if not _in_language(q, lang)]
    items = [q for q in items if q not in mixed]
    if bad or mixed or off_answer:
        with caller.lock:
            caller.report.dropped["invalid"] += bad
            caller.report.dropped["language"] += len(mixed)
            caller.report.dropped["checklist"] += off_answer
    if len(group) > 1:
        items = [q for q in items if q.kind == "multi"] or items
    return items


def _in_language(q: GeneratedQuestion, lang: str) -> bool:
    """The question is written in the language asked for (by script: a Japanese question is not English
    with a few kana); names in Latin letters inside a CJK question are fine."""
    script = detect_lang(q.question)
    if lang in ("ja", "ko", "zh"):
        return script == lang
    if lang in ("en", "fr", "de", "es", "it", "pt", "nl", "sv", "pl", "tr", "id", "vi"):
        return script == "en"  # a Latin-script language: no CJK question
    return True  # other scripts: detect_lang cannot tell


def _verify(caller: _Caller, ctx: Context, q: GeneratedQuestion, group: list[PageInfo]) -> bool:
    """One call per question: keep it only when the referenced pages support answer and checklist."""
    if caller.stopped:
        return False
    refs = [p for p in group if p.rel in q.refs] or group
    try:
        data = caller.json(_verify_messages(q, refs, ctx.db), VERIFY_SCHEMA, "verification")
    except RagError as e:
        with caller.lock:
            caller.report.dropped["unverified"] += 1
            caller.report.skipped.append((reference_path(ctx.db, refs[0].rel),
                                          f"verification failed for {q.question[:60]!r}: {e}"))
            if not _is_json_failure(e):
                caller.report.errors.append(f"verification: {e}")
        return False
    unsupported = [str(x) for x in (data.get("unsupported_items") or []) if str(x).strip()]
    if data.get("supported") is not True or unsupported:
        with caller.lock:
            caller.report.dropped["unsupported"] += 1
        return False
    return True


def _llm_unanswerable(caller: _Caller, ctx: Context, plan: Plan, report: GenqaReport,
                      facts: list[str]) -> list[GeneratedQuestion]:
    langs: list[str] = []
    for p in plan.order:
        lg = ctx.lang or p.lang
        if lg not in langs:
            langs.append(lg)
    per_lang = math.ceil(plan.unanswerable / len(langs))
    outline: dict[str, set[str]] = {}
    for p in ctx.pages:
        outline.setdefault(p.doc_title, set()).add(p.section)
    titles = "\n".join(f"- {doc}: " + "; ".join(sorted(s for s in secs if s)[:15])
                       for doc, secs in sorted(outline.items())[:30])
    out: list[GeneratedQuestion] = []
    for lg in langs:
        if len(out) >= plan.unanswerable:
            break
        want = min(per_lang, plan.unanswerable - len(out))
        stated = "".join(f"\n- {f[:300]}" for f in facts)
        user = (f"Documents and sections:\n{titles}\n"
                + (f"\nFacts the documents state:{stated}\n" if stated else "")
                + f"\nWrite {want + 2} such questions in {_lang_name(lg)}. "
                'Reply as JSON: {"items": [{"question": "...", "key_terms": ["..."]}]}')
        try:
            data = caller.json([{"role": "system", "content": ABSENT_SYSTEM}, {"role": "user", "content": user}],
                               ABSENT_SCHEMA, "absent_questions")
        except RagError as e:
            report.skipped.append(("(unanswerable questions)", str(e)))
            if not _is_json_failure(e):
                report.errors.append(f"unanswerable questions: {e}")
            continue
        n = 0
        for item in data.get("items") or []:
            if n >= want or not isinstance(item, dict):
                continue
            question = str(item.get("question") or "").strip()
            terms = [str(t) for t in item.get("key_terms") or [] if str(t).strip()]
            if not question:
                report.dropped["invalid"] += 1
                continue
            if covered_by_corpus(ctx, question, terms):
                report.dropped["present"] += 1
                continue
            out.append(GeneratedQuestion(question, refusal_text(lg), [], [], [refusal_point(lg)],
                                         "unanswerable", lg))
            n += 1
    return out


