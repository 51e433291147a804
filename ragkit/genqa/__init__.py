"""`rag genqa`: anticipated questions with ground truth, page references and checklists (DESIGN §7).

INTERFACE (owned by the genqa work; cli relies on it):

    generate_questions(source: Path, settings: Settings, *, per_page=1, max_questions=30, lang=None,
                       progress=True) -> GenqaReport
    GenqaReport: path (the CSV written), questions, errors (non-empty => exit 1), usage, skipped, dropped,
                 notes

How it works
------------
1. The source is resolved to a database root and a set of pages: a database folder (or a sub-folder of
   one: all its pages), or a PDF/DOCX/PPTX that is ingested into `settings.db` first (then only that
   document's pages). Pages without a text layer (`pagefile.NO_TEXT_MARKER`) or with almost no text are
   left out; optimizer copies (`page_008_2.md`, or a second file of the same source page) are used once.
2. Pages are sampled deterministically (seeded by the source): round-robin over documents, and inside a
   document round-robin over its sections, so the questions spread over the whole collection.
3. The question budget `max_questions` is split into kinds: about 15 % unanswerable, about 20 %
   multi-page (2-3 related pages of one document: adjacent pages or the same section; the offline
   generator uses 2), the rest
   single-page facts, `per_page` per sampled page.
4. Two generators share that plan:
   - offline (`provider.is_offline`): deterministic, no model (`offline.py`, `facts.py`). Each question asks
     for one fact of its page in the page's own words and language: a figure with its subject, a table
     cell by row and column, a "label: value" line, a definition, a numbered procedure. The checklist holds
     whole claims. Multi-page questions ask a fact of each of two related pages. Unanswerable ones are
     neighbours of real facts (a year the document does not cover) or questions typical of the
     collection's kind of document, checked absent by search and by the page text. `--lang` keeps the
     pages written in that language (ja, en, ko); nothing is translated.
   - LLM: per page (or page group) one `chat_json` call returning items {question, answer, checklist,
     pages}; a page whose reply is not valid JSON after 3 attempts is skipped and reported. Near-duplicate
     questions are dropped; a verification call per question drops those whose answer or checklist items
     the referenced pages do not support. Unanswerable questions are proposed by the model together with
     their key terms and kept only when no page found through the index contains all of those terms.
5. The CSV goes to `results/<source>_questions_YYYYMMDD_HHMMSS.csv` (utf-8-sig, never overwriting):
   Question, Ground Truth, Reference Document, Page, Checklist, then Kind and Language.

Where things are
----------------
- `common.py`: the records (GeneratedQuestion, GenqaReport, PageInfo), the run context, the sampling plan,
  near-duplicate detection and the absence check of unanswerable questions.
- `source.py`: source -> database root and usable pages (ingesting a document first).
- `pagetext.py`: a page's markdown as blocks; numbers and content terms of a text.
- `facts.py`: a page's facts, each as a question, ground truth and checklist of whole claims (offline).
- `offline.py`: the offline generator (no model): picks facts, joins pages, writes unanswerable questions.
- `model.py`: the model generator (generation and verification calls).
- `report.py`: what the command prints.
"""


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
    KINDS,
    LANG_NAMES,
    MAX_CONSECUTIVE_FAILURES,
    OFFLINE_LANGS,
    Context,
    GeneratedQuestion,
    GenqaReport,
    PageInfo,
    is_duplicate,
    make_plan,
    related_groups,
    sample_pages,
)
from ragkit.genqa.facts import Fact, page_facts
from ragkit.genqa.model import generate_with_model
from ragkit.genqa.offline import DOMAIN_TOPICS, domain_kinds, generate_offline
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
        how = "offline questions are written in" if offline else "--lang must be one of"
        raise UsageError(f"--lang {lang!r} is not supported: {how} {', '.join(known)}")
    return code


def generate_questions(
    source: Path,
    settings: Settings,
    *,
    per_page: int = 1,
    max_questions: int = 30,
    lang: str | None = None,
    progress: bool = True,
) -> GenqaReport:
    """Generate anticipated questions for `source` and write them to a timestamped CSV (see module doc)."""
    from ragkit.core.llm import get_provider

    if per_page < 1:
        raise UsageError(f"--per-page must be at least 1, got {per_page}")
    if max_questions < 1:
        raise UsageError(f"--max must be at least 1, got {max_questions}")
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
                           "asks in the page's language (a model can translate: --provider openai)")
    report = GenqaReport(source=source, db=db, provider=provider.name, model=provider.model,
                         pages_total=len(pages))
    ctx = Context(db=db, pages=pages, settings=settings, lang=lang, per_page=per_page, seed=seed_for(source, db),
                  progress=progress)
    # the offline generator joins one topic per page (2 pages read best); a model can combine 2-3 pages
    plan = make_plan(max_questions, ctx, group_size=2 if provider.is_offline else 3)
    if provider.is_offline:
        questions = generate_offline(ctx, plan, report)
    else:
        questions = generate_with_model(ctx, plan, report, provider)
    if lang and provider.is_offline and other:
        report.notes.append(f"{len(other)} page(s) in other languages left out: --lang {lang} offline keeps "
                            "only pages written in it")
    if 0 < len(questions) < max_questions:
        why = ("the pages hold no more facts that make one clear question (offline questions are never padded "
               "with templates)") if provider.is_offline else "the rest were dropped or not written (see above)"
        report.notes.append(f"{len(questions)} of the {max_questions} questions asked for: {why}")
    report.questions = questions
    report.pages_used = len({r for q in questions for r in q.refs})
    if not questions:
        report.errors.append(f"{source}: no question could be generated")
        return report
    df = pd.DataFrame([q.row(db) for q in questions], columns=COLUMNS)
    report.path = csvio.write_csv(df, csvio.timestamped_path(settings.results, stem, "questions"))
    return report


