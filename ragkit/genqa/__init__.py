"""`rag genqa`: anticipated questions with ground truth, page references and checklists (DESIGN §7).

INTERFACE (owned by the genqa work; cli relies on it):

    generate_questions(source: Path, settings: Settings, *, per_page=1, max_questions=30, lang=None,
                       progress=True) -> GenqaReport
    print_genqa_report(report: GenqaReport, console) -> None
    GenqaReport: path (the CSV written), questions, errors (non-empty => exit 1), usage, skipped

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
   - offline (`provider.is_offline`): deterministic, no model. Questions from headings, table rows (and
     "label: value" lines) and key sentences with numbers/units; the question names the distinctive terms
     of its page (so retrieval can find it) but never the answer; the ground truth is the source
     sentence(s) or row; the checklist holds the key terms and numbers of that answer (2-5, one per
     line). Multi-page questions join the topics of two pages of one section; unanswerable ones come from
     a fixed per-language list of plausible-but-absent topics that are checked absent against the index
     and the pages. Templates exist for ja, en and ko; another --lang gets the English ones.
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
- `offline.py`: the offline generator (no model).
- `model.py`: the model generator (generation and verification calls).
- `report.py`: what the command prints.
"""


from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ragkit import csvio
from ragkit.config import Settings
from ragkit.errors import RagError, UsageError
from ragkit.genqa.common import (
    COLUMNS,
    DUPLICATE_JACCARD,
    KINDS,
    MAX_CONSECUTIVE_FAILURES,
    Context,
    GeneratedQuestion,
    GenqaReport,
    PageInfo,
    is_duplicate,
    make_plan,
    related_groups,
    sample_pages,
)
from ragkit.genqa.model import generate_with_model
from ragkit.genqa.offline import UNANSWERABLE_TOPICS, generate_offline, page_candidates
from ragkit.genqa.pagetext import numbers_in, parse_blocks, terms_in
from ragkit.genqa.report import print_genqa_report
from ragkit.genqa.source import resolve_source, seed_for
from ragkit.text import detect_lang

__all__ = [
    "COLUMNS", "DUPLICATE_JACCARD", "KINDS", "MAX_CONSECUTIVE_FAILURES", "UNANSWERABLE_TOPICS", "GeneratedQuestion",
    "GenqaReport", "PageInfo", "detect_lang", "generate_questions", "is_duplicate", "numbers_in", "page_candidates",
    "parse_blocks", "print_genqa_report", "related_groups", "resolve_source", "sample_pages", "terms_in",
]


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
    from ragkit.llm import get_provider

    if per_page < 1:
        raise UsageError(f"--per-page must be at least 1, got {per_page}")
    if max_questions < 1:
        raise UsageError(f"--max must be at least 1, got {max_questions}")
    if lang is not None:
        lang = lang.strip().lower()
        if not re.fullmatch(r"[a-z]{2,3}(-[a-z0-9]+)?", lang):
            raise UsageError(f"--lang must be a language code such as ja, en or ko, got {lang!r}")
    source = Path(source)
    db, pages, stem = resolve_source(source, settings, progress=progress)
    if not pages:
        raise RagError(f"{source}: no pages with text to ask about")
    provider = get_provider(settings)
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
    report.questions = questions
    report.pages_used = len({r for q in questions for r in q.refs})
    if not questions:
        report.errors.append(f"{source}: no question could be generated")
        return report
    df = pd.DataFrame([q.row(db) for q in questions], columns=COLUMNS)
    report.path = csvio.write_csv(df, csvio.timestamped_path(settings.results, stem, "questions"))
    return report


