"""`rag genqa`: anticipated questions with ground truth, page references and checklists (DESIGN §7), from a
model or, offline, from the pages' own facts. docs/genqa.md says how pages are sampled and questions checked.

    generate_questions(source, settings, *, per_page=1, max_questions=30, lang=None, progress=False, task="qa")
        -> GenqaReport (path, questions, errors, usage, skipped, dropped, notes)
task "summarization" writes query-focused summarization items instead (genqa.summaries)."""


from __future__ import annotations

from pathlib import Path

import pandas as pd

from ragkit.core import csvio
from ragkit.core.config import Settings
from ragkit.core.errors import RagError, UsageError
from ragkit.core.text import detect_lang
from ragkit.genqa.common import (
    COLUMNS,
    DUPLICATE_JACCARD,
    GENERATED_BY,
    KINDS,
    LANG_NAMES,
    MAX_CONSECUTIVE_FAILURES,
    OFFLINE_LANGS,
    Context,
    GeneratedQuestion,
    GenqaReport,
    PageInfo,
    domain_kinds,
    generated_by,
    is_duplicate,
    make_plan,
    related_groups,
    sample_pages,
)
from ragkit.genqa.facts import Fact, page_facts
from ragkit.genqa.model import generate_with_model
from ragkit.genqa.offline import DOMAIN_TOPICS, generate_offline
from ragkit.genqa.pagetext import numbers_in, parse_blocks, terms_in
from ragkit.genqa.source import resolve_source, seed_for

__all__ = [
    "COLUMNS", "DOMAIN_TOPICS", "DUPLICATE_JACCARD", "KINDS", "LANG_NAMES", "MAX_CONSECUTIVE_FAILURES",
    "OFFLINE_LANGS", "Fact", "GeneratedQuestion", "GenqaReport", "PageInfo", "check_lang", "detect_lang",
    "domain_kinds", "generate_questions", "is_duplicate", "numbers_in", "page_facts",
    "parse_blocks", "related_groups", "resolve_source", "sample_pages", "terms_in",
]


def check_lang(lang: str | None, *, offline: bool) -> str | None:
    """The --lang code normalized, or a usage error naming the codes that work."""
    if lang is None:
        return None
    code = lang.strip().lower()
    known = OFFLINE_LANGS if offline else tuple(LANG_NAMES)
    if code not in known:
        how = "offline questions are written in" if offline else "lang= must be one of"
        raise UsageError(f"lang={lang!r} is not supported: {how} {', '.join(known)}",
                         flags={f"lang={lang!r}": f"--lang {lang!r}", "lang=": "--lang"})
    return code


def generate_questions(
    source: Path,
    settings: Settings,
    *,
    per_page: int = 1,
    max_questions: int = 30,
    lang: str | None = None,
    progress: bool = False,
    task: str = "qa",
) -> GenqaReport:
    """Generate anticipated questions for `source` and write them to a timestamped CSV (see module doc).
    `progress`: lines on stderr (the CLI turns it on)."""
    from ragkit.core.llm import get_provider

    if task not in ("qa", "summarization"):
        raise UsageError(f"task must be qa or summarization, got {task!r}", flags={"task": "--task"})
    if per_page < 1:
        raise UsageError(f"per_page must be at least 1, got {per_page}", flags={"per_page": "--per-page"})
    if max_questions < 1:
        raise UsageError(f"max_questions must be at least 1, got {max_questions}", flags={"max_questions": "--max"})
    provider = get_provider(settings)
    lang = check_lang(lang, offline=provider.is_offline)
    source = Path(source)
    db, pages, stem = resolve_source(source, settings, progress=progress)
    if not pages:
        raise RagError(f"{source}: no pages with text to ask about")
    if lang and provider.is_offline:
        other = [p for p in pages if (p.lang if p.lang in ("ja", "ko", "zh") else "en") != lang]
        if len(other) == len(pages):
            raise RagError(f"{source}: no page is written in {LANG_NAMES[lang]} ({lang}); the offline generator "
                           "asks in the page's language (a model can translate: provider='openai')",
                           flags={"provider='openai'": "--provider openai"})
    report = GenqaReport(source=source, db=db, provider=provider.name, model=provider.model,
                         pages_total=len(pages))
    ctx = Context(db=db, pages=pages, settings=settings, lang=lang, per_page=per_page, seed=seed_for(source, db),
                  progress=progress)
    if task == "summarization":
        return _summaries(ctx, report, provider, max_questions, stem)
    # the offline generator joins one topic per page (2 pages read best); a model can combine 2-3 pages
    plan = make_plan(max_questions, ctx, group_size=2 if provider.is_offline else 3)
    if provider.is_offline:
        questions = generate_offline(ctx, plan, report)
    else:
        questions = generate_with_model(ctx, plan, report, provider)
    if lang and provider.is_offline and other:
        report.notes.append(f"{len(other)} page(s) in other languages left out: --lang {lang} offline keeps "
                            "only pages written in it")
    if 0 < len(questions) < max_questions and not provider.is_offline and not report.interrupted:  # (the offline generator says why itself)
        report.notes.append(f"{len(questions)} of the {max_questions} questions asked for: the rest were dropped "
                            "or not written (see above)")
    if report.interrupted and questions:
        report.notes.append(f"interrupted (Ctrl-C): the {len(questions)} question(s) confirmed until then are "
                            "kept")
    report.questions = questions
    report.pages_used = len({r for q in questions for r in q.refs})
    if not questions:
        if not report.interrupted:
            report.errors.append(f"{source}: no question could be generated")
        return report
    df = pd.DataFrame([{**q.row(db), GENERATED_BY: generated_by(provider)} for q in questions], columns=COLUMNS)
    report.path = csvio.write_csv(df, csvio.timestamped_path(settings.results, stem, "questions"))
    report.run_path = _write_record(report, ctx, df, provider, task=task, max_questions=max_questions)
    return report


def _write_record(report: GenqaReport, ctx: Context, df: pd.DataFrame, provider, *, task: str,
                  max_questions: int) -> Path:
    """`<csv stem>.run.json`: what made this question set (as a batch's record says what made its results): the
    database and its state, who wrote the questions, the options, the code and the set's digest."""
    from datetime import UTC, datetime

    from ragkit import __version__
    from ragkit.core.provenance import api_host, database_state, questions_sha256, ragkit_commit
    from ragkit.evaluate.runinfo import RunInfo, write_run_info

    state = database_state(ctx.db)
    source = Path(report.source)
    run = RunInfo(kind="genqa", provider=provider.name, model=provider.model, version=__version__,
                  commit=ragkit_commit(), database=str(Path(ctx.db).resolve()), database_pages=state.pages,
                  database_sha256=state.sha256, database_fingerprint=state.fingerprint, converter=state.converter,
                  api_host=None if provider.is_offline else api_host(ctx.settings.api_base),
                  date=datetime.now(UTC).isoformat(timespec="seconds"), input=str(source),
                  input_path=str(source.resolve()), questions=len(df),
                  questions_sha256=questions_sha256(df.to_dict("records")),
                  cached_calls=report.usage.cached, notes=list(report.notes),
                  served_model=getattr(provider, "served_model", None),
                  options={"task": task, "per_page": ctx.per_page, "max": max_questions, "lang": ctx.lang,
                           "seed": ctx.seed})
    return write_run_info(Path(report.path), run)




def _summaries(ctx: Context, report: GenqaReport, provider, max_items: int, stem: str) -> GenqaReport:
    """`--task summarization`: items from related page groups (3 pages), written as a summarization CSV."""
    from ragkit.genqa.summaries import SUMMARY_COLUMNS, generate_summaries, summary_row

    groups = related_groups(ctx.pages, ctx.rng("summaries"), size=3)
    grouped = {p.rel for g in groups for p in g}
    # then the pages in no group, one by one (a one-page summary is still a query-focused item)
    groups += [[p] for p in sample_pages(ctx.pages, ctx.rng("sample")) if p.rel not in grouped]
    items = generate_summaries(ctx, groups, report, provider, max_items)
    report.questions = items
    report.pages_used = len({r for q in items for r in q.refs})
    if not items:
        report.errors.append(f"{report.source}: no summarization item could be generated")
        return report
    if len(items) < max_items:
        report.notes.append(f"{len(items)} of the {max_items} items asked for: one per group of related pages "
                            "or page left over, each page in one item at most")
    df = pd.DataFrame([summary_row(q, ctx.db, generated_by(provider)) for q in items], columns=SUMMARY_COLUMNS)
    report.path = csvio.write_csv(df, csvio.timestamped_path(ctx.settings.results, stem, "summaries"))
    report.run_path = _write_record(report, ctx, df, provider, task="summarization", max_questions=max_items)
    return report
