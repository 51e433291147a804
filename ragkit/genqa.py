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

Near-duplicates: two questions are duplicates when the Jaccard similarity of their token sets
(`text.tokenize` with English stopwords removed: words, CJK character bigrams; the offline generator's
own template phrases removed first) is at least `DUPLICATE_JACCARD` (0.6). Measured: paraphrases score
0.67-0.77 ("What is the rated capacity?" / "... of the fridge?" 0.67, "How do I reset the router?" / "How
can the router be reset?" 0.67, "定格内容積は何リットルですか？" / "定格内容積は何リットル？" 0.77); different
questions about one section stay at or below 0.54.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ragkit import csvio
from ragkit.config import Settings
from ragkit.errors import RagError, UsageError
from ragkit.models import Usage
from ragkit.pagefile import NO_TEXT_MARKER, parse_page
from ragkit.paths import PAGE_RE, iter_pages, page_number, reference_path, sanitize_name
from ragkit.text import (
    STOPWORDS,
    detect_lang,
    join_cjk_breaks,
    normalize,
    refusal_text,
    split_sentences,
    tokenize,
)

COLUMNS = ["Question", "Ground Truth", "Reference Document", "Page", "Checklist", "Kind", "Language"]
DOC_SUFFIXES = (".pdf", ".docx", ".pptx")
KINDS = ("single", "multi", "unanswerable")
DUPLICATE_JACCARD = 0.6  # token-set Jaccard at or above which two questions count as one (see docstring)
MIN_PAGE_TOKENS = 15  # fewer search tokens than this: a near-empty page (cover, blank, figure only)
UNANSWERABLE_SHARE = 0.15
MULTI_SHARE = 0.20
MAX_PAGE_CHARS = 6000  # page text shown to the model per page
MAX_CONSECUTIVE_FAILURES = 3  # provider errors (not bad JSON) in a row: stop asking
LANG_NAMES = {"ja": "Japanese", "en": "English", "ko": "Korean", "zh": "Chinese"}


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
    dropped: Counter = field(default_factory=Counter)  # duplicate / unsupported / present / invalid
    pages_total: int = 0  # usable pages in the source
    pages_used: int = 0  # pages some question refers to

    def counts(self) -> dict[str, int]:
        c = Counter(q.kind for q in self.questions)
        return {k: c.get(k, 0) for k in KINDS}


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


# -- entry point --------------------------------------------------------------------------------------
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
    ctx = _Context(db=db, pages=pages, settings=settings, lang=lang, per_page=per_page, seed=_seed(source, db),
                   progress=progress)
    # the offline generator joins one topic per page (2 pages read best); a model can combine 2-3 pages
    plan = _plan(max_questions, ctx, group_size=2 if provider.is_offline else 3)
    if provider.is_offline:
        questions = _generate_offline(ctx, plan, report)
    else:
        questions = _generate_llm(ctx, plan, report, provider)
    report.questions = questions
    report.pages_used = len({r for q in questions for r in q.refs})
    if not questions:
        report.errors.append(f"{source}: no question could be generated")
        return report
    df = pd.DataFrame([q.row(db) for q in questions], columns=COLUMNS)
    report.path = csvio.write_csv(df, csvio.timestamped_path(settings.results, stem, "questions"))
    return report


# -- source -> pages ----------------------------------------------------------------------------------
def resolve_source(source: Path, settings: Settings, *, progress: bool = True) -> tuple[Path, list[PageInfo], str]:
    """(database root, usable pages, output stem) for a database folder, a sub-folder or a document."""
    if not source.exists():
        raise RagError(f"{source}: no such file or folder")
    if source.is_file():
        if source.suffix.lower() not in DOC_SUFFIXES:
            raise RagError(f"{source}: not a database folder or a PDF/DOCX/PPTX file")
        db = Path(settings.db)
        from ragkit.ingest import ingest_sources

        ing = ingest_sources([source], db=db, progress=progress)
        if getattr(ing, "failed", None):
            raise RagError(f"{source}: ingest failed: {_describe_failed(ing.failed)}")
        rels = _pages_of_document(db, source)
        if not rels:
            raise RagError(f"{source}: ingested, but no pages of it were found under {db}")
        stem = source.stem
    else:
        db, prefix = _db_and_prefix(source, Path(settings.db))
        rels = iter_pages(db, prefix or None)
        if not rels:
            docs = [p for p in source.rglob("*") if p.suffix.lower() in DOC_SUFFIXES]
            hint = f"; it holds documents: run `rag ingest {source}` first" if docs else ""
            raise RagError(f"{source}: no page files (*.md) in this folder{hint}")
        stem = source.resolve().name
    return db, _load_pages(db, rels), sanitize_name(stem, fallback="database")


def _describe_failed(failed) -> str:
    """IngestReport.failed holds (path, reason) pairs."""
    items = failed if isinstance(failed, list) else [failed]
    return "; ".join(f[-1] if isinstance(f, tuple) and f else str(f) for f in items)[:300]


def _db_and_prefix(folder: Path, db: Path) -> tuple[Path, str]:
    """The database root holding `folder` and the folder's path inside it ("" for the root)."""
    f, d = folder.resolve(), db.resolve()
    if f == d or d in f.parents:
        return d, f.relative_to(d).as_posix() if f != d else ""
    for parent in [f, *f.parents]:  # a database other than --db: its root holds the .ragkit cache
        if (parent / ".ragkit").is_dir():
            return parent, f.relative_to(parent).as_posix() if f != parent else ""
    return f, ""


def _pages_of_document(db: Path, source: Path) -> list[str]:
    """The pages whose front matter names `source` (resolved paths, else the same file name)."""
    target = source.resolve()
    exact, by_name = [], []
    for rel in iter_pages(db):
        try:
            head = (db / rel).read_text(encoding="utf-8", errors="replace")[:2000]
        except OSError:
            continue
        meta, _ = parse_page(head)
        if not meta.source:
            continue
        src = Path(meta.source)
        try:
            same = (src if src.is_absolute() else Path.cwd() / src).resolve() == target
        except OSError:
            same = False
        if same:
            exact.append(rel)
        elif src.name == source.name:
            by_name.append(rel)
    return exact or by_name


def _load_pages(db: Path, rels: list[str]) -> list[PageInfo]:
    """Usable pages: text layer present, not near-empty, one file per (document, page)."""
    out: list[PageInfo] = []
    seen: dict[tuple[str, int], int] = {}
    for rel in rels:
        m = PAGE_RE.match(Path(rel).name)
        if not m:
            continue
        try:
            raw = (db / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if NO_TEXT_MARKER in raw:
            continue
        meta, body = parse_page(raw)
        body = join_cjk_breaks(unicodedata.normalize("NFC", body))
        toks = tokenize(_plain(body))
        if len(toks) < MIN_PAGE_TOKENS:
            continue
        parts = rel.split("/")
        doc = meta.source or "/".join(parts[:-2]) or "/".join(parts[:-1])
        num = meta.page or page_number(rel) or 0
        info = PageInfo(rel=rel, page=num, doc=doc, doc_title=meta.document or (parts[-3] if len(parts) >= 3
                                                                                else doc),
                        section=meta.section or (parts[-2] if len(parts) >= 2 else ""), body=body,
                        lang=detect_lang(body), tokens=frozenset(toks))
        key = (doc, num)
        if key in seen:  # an optimizer copy of a page we already have: keep the original-looking one
            prev = out[seen[key]]
            if _copy_rank(info) < _copy_rank(prev):
                out[seen[key]] = info
            continue
        seen[key] = len(out)
        out.append(info)
    return out


def _copy_rank(p: PageInfo) -> tuple[int, int, str]:
    """Lower is more likely the ingested original: plain name, folder named after its section, short path."""
    plain = 0 if re.fullmatch(r"page_\d+\.md", Path(p.rel).name) else 1
    folder = 0 if Path(p.rel).parent.name == sanitize_name(p.section or "") else 1
    return plain, folder, p.rel


def _seed(source: Path, db: Path) -> int:
    try:
        where = source.resolve().relative_to(db.resolve()).as_posix()
    except ValueError:
        where = source.name
    return int(hashlib.sha256(f"genqa|{where}".encode()).hexdigest()[:16], 16)


# -- planning -----------------------------------------------------------------------------------------
@dataclass
class _Context:
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

    def index(self):
        """The search index of the database, or None when it cannot be opened (lexical scan instead)."""
        if self._index is None and not self._index_failed:
            try:
                from ragkit.index import open_index

                self._index = open_index(self.db)
            except Exception:  # noqa: BLE001 - absence checks fall back to scanning the page files
                self._index_failed = True
        return self._index


@dataclass
class _Plan:
    singles: int
    multi: int
    unanswerable: int
    order: list[PageInfo]  # sampled page order
    groups: list[list[PageInfo]]  # related page groups for multi-page questions, in order


def _plan(max_questions: int, ctx: _Context, *, group_size: int = 2) -> _Plan:
    order = sample_pages(ctx.pages, ctx.rng("sample"))
    groups = related_groups(ctx.pages, ctx.rng("groups"), size=group_size)
    n = max_questions
    unans = max(1, round(n * UNANSWERABLE_SHARE)) if n >= 3 else 0
    multi = (max(1, round(n * MULTI_SHARE)) if n >= 3 else 0) if groups else 0
    singles = n - unans - multi
    return _Plan(singles=singles, multi=multi, unanswerable=unans, order=order, groups=groups)


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


# -- markdown parsing ---------------------------------------------------------------------------------
_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_BOLD_LINE = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•・·●■□◆◇○]|\d{1,2}[.)])\s+")
_INLINE_BULLET = re.compile(r"(?<=\S)\s+(?=[·•●▪]\s)")  # "... quarter. · Managers ..." on one line
_LEADER = re.compile(r"(\.{4,}|…{2,}|・{4,}|_{4,}|-{4,}|\s\.\s\.\s)")


def _clean_inline(s: str) -> str:
    s = re.sub(r"<!--.*?-->", " ", s)
    s = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", s)
    s = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"<br\s*/?>", " ", s, flags=re.I)
    s = re.sub(r"(\*\*|__|`)", "", s)
    s = re.sub(r"(?<![\w*])\*(?=\S)([^*]+)(?<=\S)\*", r"\1", s)
    s = _BULLET.sub("", s)
    return re.sub(r"\s+", " ", join_cjk_breaks(s)).strip()


def _plain(body: str) -> str:
    lines = [_clean_inline(line.replace("|", " ")) for line in body.splitlines() if not _TABLE_SEP.match(line)]
    return "\n".join(line for line in lines if line)


@dataclass
class _Block:
    heading: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[list[list[str]]] = field(default_factory=list)


def parse_blocks(body: str, skip: set[str] | frozenset[str] = frozenset()) -> list[_Block]:
    """The page as (heading, paragraphs, tables) blocks; list items and lines are paragraphs of their own
    when they end a sentence, otherwise consecutive lines are joined. Lines whose shape is in `skip`
    (running headers and footers) are left out."""
    blocks = [_Block(heading="")]
    para: list[str] = []
    table: list[list[str]] = []

    def flush_para() -> None:
        if para:
            text = _clean_inline(" ".join(para))
            if text:
                blocks[-1].paragraphs.append(text)
            para.clear()

    def flush_table() -> None:
        if table:
            blocks[-1].tables.append([list(r) for r in table])
            table.clear()

    lines = [part for raw in body.splitlines() for part in _INLINE_BULLET.split(raw)
             if not (skip and _shape(raw) in skip)]
    for line in lines:
        if "<!--" in line and "-->" in line and not _clean_inline(line):
            continue
        if line.strip().startswith("|"):
            flush_para()
            if _TABLE_SEP.match(line):
                continue
            cells = [_clean_inline(c) for c in line.strip().strip("|").split("|")]
            table.append(cells)
            continue
        flush_table()
        m = _HEADING_LINE.match(line) or _BOLD_LINE.match(line)
        if m:
            flush_para()
            heading = _clean_inline(m.group(1))
            blocks.append(_Block(heading=heading))
            if len(heading) > 60:  # slide text run together into one heading: it is content too
                blocks[-1].paragraphs.append(heading)
            continue
        if not line.strip():
            continue  # extractors put blank lines inside sentences; sentences end at punctuation instead
        if _BULLET.match(line):
            flush_para()
        para.append(line.strip())
        if re.search(r"[.。!?！？:：]\s*$", line):
            flush_para()
    flush_para()
    flush_table()
    return [b for b in blocks if b.heading or b.paragraphs or b.tables]


# -- terms --------------------------------------------------------------------------------------------
_UNITS = (
    "%|％|℃|°C|°F|時間|時|分間|分|秒|日間|日|年間|年度|年|か月|ヶ月|ヵ月|カ月|週間|月|回|個|枚|度|円|人|件|文字|桁|台|本|"
    "km|cm|mm|kg|ml|mL|L|W|V|Hz|dB|GB|MB|KB|TB|시간|시|분|초|일|년|개월|월|원|개|명|회|자|세|주|권|학점|점|층|호선|호|번|면"
)
_NUMBER = re.compile(
    rf"(?<![A-Za-z0-9.])(?:[$¥€£]\s?)?\d+(?:[.,:/]\d+)*(?:\s?(?:{_UNITS})|\s(?P<word>[A-Za-z][a-z]{{2,12}}))?"
)
_EN_UNITS = frozenset(
    """hour day minute second week month year character digit attempt time percent user item page copy
    person people meter metre mile inch foot feet degree kilogram gram liter litre volt watt byte""".split())
_JA_TERM = re.compile(r"[一-龥々〆ヵヶァ-ヴー]{2,}")
_KATAKANA_ONLY = re.compile(r"[ァ-ヴー]+")
_KANJI_ONLY = re.compile(r"[一-龥々〆]+")
_OKURIGANA = frozenset("ちきりいえめけれうくつるむぎびみわら")
_JA_UNIT_PREFIX = re.compile(r"^(?:年間|時間|日間|週間|ヶ月|ヵ月|カ月|年|月|日|時|分|秒|回|個|枚|度|円|人|件|台|本|割|倍|号|階)"
                             r"(?:以上|以内|以下|未満|程度|前|後|間|目)?")
_HANGUL_WORD = re.compile(r"[가-힣]{2,}")
_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'][A-Za-z0-9]+)*")
_KO_PARTICLES = sorted(
    "으로부터 에서는 으로는 에게서 까지의 에서의 에서도 께서 으로 에서 에게 까지 부터 보다 처럼 과의 와의 이나 이며 이고 하고 께 "
    "은 는 이 가 을 를 에 의 와 과 도 로 만".split(), key=len, reverse=True)
_KO_GENERIC = frozenset("동안 오전 오후 최대 최소 이내 이상 이하 경우 사용 이용 시간 관련 대한 통해 위해 다음 모든 각각 "
                        "해당 내용 기타 및 등".split())
_KO_VERBAL = re.compile(r"(?:(?<=..)(?:할|한|된)|릴|될|하여|으면|이며|면서|니다|세요|하여|해야|하는|되는|있는|없는|하면|되면|하고|했다|한다|된다|합니|입니|습니|하며|으며|"
                        r"지만|에는|해서|하기|되어|하지|않는|않고)$")  # verb forms, not terms
_JA_GENERIC = frozenset("未満 超過 前後 以降 以前 目安 全体 最初 最後 最大 最小 以内 程度 場合 使用 必要 方法 以下 以上 注意 確認 可能 対応 各種 一部 全部 全て 当社 本書 本製品 製品 "
                        "内容 記載 説明 関連 目的 対象 実施 状態 時間 次の 下記 上記 項目 部分 手順 以外".split())
_EN_GENERIC = STOPWORDS | frozenset(
    """must shall may might all any each other such also used use using only more most will within without
    including include includes e.g i.e etc page section document documents following see refer per via
    one two three new make made need needs required require requires well like just your you our we us
    his her him she he they them if else after before upon under over between during very much many
    some most same own both either neither every may also while where therefore however least
    last first next able none nor almost whether quite rather among along across toward towards sure make makes take takes give gives keep keeps kept get gets got set sets put
    puts go goes come comes see sees seen say says said know known want wants look looks find finds
    found tell tells ask asks work works seem seems feel feels try tries leave leaves call calls good
    better best bad worse high low large small big little long short old young early late true false
    possible certain clear full whole different similar several various usually always never often
    once twice back away again still even already yet ever soon now here today""".split())


def _ko_stem(word: str) -> str:
    for p in _KO_PARTICLES:
        if word.endswith(p) and len(word) - len(p) >= 1:
            return word[: -len(p)]
    return word


def _unit_like(word: str) -> bool:
    """"days", "hours", "characters": a unit or a counted plural noun after a number (not "5 failed")."""
    single = word[:-1] if word.endswith("s") else word
    return single in _EN_UNITS or (len(word) >= 5 and word.endswith("s") and not word.endswith("ss"))


def numbers_in(text: str) -> list[str]:
    """Numbers with their unit as written ("540L", "12 characters", "90 days", "3월"); a bare one-digit
    number (list numbering) is left out."""
    out = []
    for m in _NUMBER.finditer(text):
        s = m.group(0).strip()
        word = (m.group("word") or "").lower()
        if word and (word in _EN_GENERIC or not _unit_like(word)):
            s = s[: m.start("word") - m.start()].strip()
        if re.fullmatch(r"\d", s):
            continue
        if s not in out:
            out.append(s)
    return out


def terms_in(text: str, phrase_ok: Callable[[str], bool] | None = None) -> list[str]:
    """Content terms in order of appearance: katakana words, kanji compounds, Korean word stems, Latin
    words (and two-word English phrases), model codes. No numbers, no function words."""
    found: list[tuple[int, str]] = []
    for m in _JA_TERM.finditer(text):  # kanji/katakana runs: "自動製氷機", "給水タンク", "ドアパッキン"
        t = m.group(0).strip("ー")
        if m.start() and text[m.start() - 1].isdigit():  # "10日全国発売" -> "全国発売", "14日以内" -> ""
            t = _JA_UNIT_PREFIX.sub("", t)
        nxt = text[m.end(): m.end() + 1]
        if nxt and nxt in _OKURIGANA and _KANJI_ONLY.fullmatch(t) and len(t) >= 3:
            t = t[:-1]  # "製造打ち切り": the last kanji is a verb stem, "製造" is the term
        if len(t) >= 2 and t not in _JA_GENERIC and not (len(t) == 2 and _KATAKANA_ONLY.fullmatch(t)):
            found.append((m.start(), t))
    for m in _HANGUL_WORD.finditer(text):
        w = m.group(0)
        if m.start() and text[m.start() - 1].isdigit():
            continue  # "9시부터", "14일이며": the unit of a number, not a term
        if _KO_VERBAL.search(w):
            continue
        stem = _ko_stem(w)
        if len(stem) >= 2 and stem not in _KO_GENERIC:
            found.append((m.start(), stem))
    latin = [(m.start(), m.group(0)) for m in _LATIN.finditer(text)]
    prev: tuple[int, str] | None = None
    for start, w in latin:
        low = w.lower()
        if low in _EN_GENERIC or len(w) < 3:
            prev = None
            continue
        found.append((start, w))
        if prev is not None and re.fullmatch(r"\s+", text[prev[0] + len(prev[1]): start]):
            phrase = f"{prev[1]} {w}"  # "security incident", "Access Control"; not "teams complete"
            if (prev[1][:1].isupper() and w[:1].isupper()) or (phrase_ok is not None and phrase_ok(phrase)):
                found.append((prev[0], phrase))
        prev = (start, w)
    out: list[str] = []
    seen: set[str] = set()
    for _, t in sorted(found, key=lambda x: x[0]):
        k = t.casefold()
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out


def term_weight(term: str, ctx: _Context, avoid: str = "") -> float:
    """How good a term is as a topic or key point: rare in the source, a phrase or a long CJK compound,
    not a verb form ("locked", "reported") and not already in `avoid` (the question or its heading)."""
    w = ctx.idf(term)
    if " " in term:
        w += 0.6
    elif re.search(r"[一-龥ァ-ヴ가-힣]", term) and len(term) >= 3:
        w += 0.4
    if re.fullmatch(r"[A-Za-z]+(?:ed|ing|ly|ic|ive|ous|ful|less|able|ible|al)", term):
        w -= 1.0  # verb and adjective forms make poor topics: "reported", "empathetic"
    if term[:1].isupper() and term[1:2].isupper():
        w += 0.3  # an acronym: VPN, SOC
    if re.fullmatch(r"[a-z][a-z'-]*", term) and ctx.df_of(term) <= 1 and len(ctx.pages) > 3:
        w -= 1.5  # a plain word used once in the whole source is incidental ("almost", "align"), not a topic
    elif re.search(r"[A-Z]", term[1:]) or re.search(r"\d", term) or (term[:1].isupper() and " " in term):
        w += 0.5  # names, codes and titled phrases: "Footwork FA12", "FLAN-T5", "Access Control"
    if avoid and normalize(term) in normalize(avoid):
        w -= 2.0
    return w


def _covered(item: str, text: str) -> bool:
    return normalize(item) in normalize(text)


def _leaks(question: str, answer: str) -> bool:
    """True when the question carries most of the answer (it would be answered by reading the question)."""
    a = set(tokenize(answer, drop_stopwords=True))
    q = set(tokenize(question, drop_stopwords=True))
    return bool(a) and len(a & q) / len(a) > 0.6


def _is_boilerplate(sentence: str) -> bool:
    s = sentence.strip()
    return bool(_LEADER.search(s)) or len(s) < 8 or bool(re.fullmatch(r"[\d\s/\-–.|()]+", s)) \
        or bool(re.search(r"\b(?:page|p\.)\s*\d+\s*(?:of|/)\s*\d+\b", s, re.I))


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
def page_candidates(page: PageInfo, ctx: _Context, boiler: set[str]) -> list[Candidate]:
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
        sentences = [s for s in sentences if not _is_boilerplate(s) and _shape(s) not in boiler]
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


def _shape(sentence: str) -> str:
    return re.sub(r"\d+", "#", normalize(sentence)).strip()


def _checklist(answer: str, exclude: str, ctx: _Context, *, first: list[str] = ()) -> list[str]:
    """2-5 key points of `answer`: given items first, then numbers, then its rarest terms not in `exclude`."""
    items: list[str] = []

    def add(t: str) -> None:
        t = t.strip(" 、,.。:：;；")
        if not t or len(items) >= 5 or not _covered(t, answer):
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


def _table_candidates(page: PageInfo, ctx: _Context, table: list[list[str]], context: str,
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


def _kv_candidate(page: PageInfo, ctx: _Context, sentence: str, context: str, lang: str) -> Candidate | None:
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


def _row_candidate(page: PageInfo, ctx: _Context, label: str, values: list[tuple[str, str]], context: str,
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
    if len(checklist) < 2 and _covered(label, answer):
        checklist = _checklist(answer, "", ctx, first=[*first, label])
    if not checklist or any(_covered(v, question) for _, v in values):
        return None  # the question would give the answer away
    if len(checklist) < 2:
        checklist.insert(0, label)
    score = 3.0 + (0.5 if numbers_in(answer) else 0.0) + ctx.idf(label) / 5
    return Candidate(page, subtype, question, answer, checklist, label, score)


def _heading_candidate(page: PageInfo, ctx: _Context, heading: str, sentences: list[str],
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
    if _leaks(question, answer):
        return None
    checklist = _checklist(answer, heading, ctx)
    if len(checklist) < 2 or ctx.idf(heading) < 0.5:
        return None
    score = 2.0 + ctx.idf(heading) / 5
    return Candidate(page, "heading", question, answer, checklist, heading, score)


def _sentence_candidate(page: PageInfo, ctx: _Context, sentence: str, context: str,
                        lang: str) -> Candidate | None:
    if not 15 <= len(sentence) <= 300:
        return None
    nums = numbers_in(sentence)
    terms = [t for t in terms_in(sentence, ctx.phrase_ok) if ctx.idf(t) > 0.3]
    if not terms:
        return None
    units = " ".join(nums)  # "30 days": "days" names no topic, and the question would hint at the answer
    ranked = sorted((t for t in terms if not _covered(t, context) and not _covered(t, units)),
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
    if _leaks(question, sentence):
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
        shapes = {_shape(line) for line in p.body.splitlines()
                  if line.strip() and not _HEADING_LINE.match(line) and not line.lstrip().startswith("|")}
        per_doc.setdefault(p.doc, Counter()).update(shapes)
    return {s for c in per_doc.values() for s, n in c.items() if n >= 3}


def _generate_offline(ctx: _Context, plan: _Plan, report: GenqaReport) -> list[GeneratedQuestion]:
    from ragkit.progress import progress_bar

    boiler = _boilerplate(ctx.pages)
    cache: dict[str, list[Candidate]] = {}

    def cands(p: PageInfo) -> list[Candidate]:
        if p.rel not in cache:
            cache[p.rel] = page_candidates(p, ctx, boiler)
        return cache[p.rel]

    kept: list[GeneratedQuestion] = []
    taken: set[str] = set()
    singles: list[GeneratedQuestion] = []
    bar = progress_bar(total=plan.singles + plan.multi + plan.unanswerable, desc="genqa (offline)", unit="q",
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
            if _add_unique(q, singles + kept, report):
                singles.append(q)
                bar.update(1)
    kept.extend(singles)
    multi = 0
    want_multi = plan.multi + plan.singles - len(singles)  # pages short of single questions: more multi
    for group in plan.groups:
        if multi >= want_multi:
            break
        q = _offline_multi(group, ctx, cands, taken)
        if q and _add_unique(q, kept, report):
            kept.append(q)
            multi += 1
            bar.update(1)
    for q in _offline_unanswerable(ctx, plan, report):
        if _add_unique(q, kept, report):
            kept.append(q)
            bar.update(1)
    bar.close()
    return kept


def _offline_multi(group: list[PageInfo], ctx: _Context, cands: Callable[[PageInfo], list[Candidate]],
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


def _offline_unanswerable(ctx: _Context, plan: _Plan, report: GenqaReport) -> list[GeneratedQuestion]:
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
            out.append(GeneratedQuestion(question, refusal_text(lg), [], [], [_refusal_point(lg)],
                                         "unanswerable", ctx.lang or lg))
    return out


def _refusal_point(lang: str) -> str:
    return {"ja": "資料に記載がないと回答する", "ko": "문서에 없는 내용이라고 답한다"}.get(
        lang, "Says the documents do not contain this")


def covered_by_corpus(ctx: _Context, question: str, key_terms: list[str]) -> bool:
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


_TEMPLATE = re.compile(
    r"について|どのように記載されていますか|教えてください|それぞれ|では、|에 대해|어떻게 설명합니까|알려 주세요|각각|"
    r"무엇입니까|what does the document (?:state|say) about|and what does it say about", re.I)


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


def _add_unique(q: GeneratedQuestion, existing: list[GeneratedQuestion], report: GenqaReport) -> bool:
    if is_duplicate(q.question, (e.question for e in existing)):
        report.dropped["duplicate"] += 1
        return False
    return True


# -- LLM generator ------------------------------------------------------------------------------------
ITEMS_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "answer": {"type": "string"},
                    "checklist": {"type": "array", "items": {"type": "string"}},
                    "pages": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["question", "answer", "checklist", "pages"],
            },
        }
    },
    "required": ["items"],
}
VERIFY_SCHEMA = {
    "type": "object",
    "properties": {"supported": {"type": "boolean"},
                   "unsupported_items": {"type": "array", "items": {"type": "string"}}},
    "required": ["supported", "unsupported_items"],
}
ABSENT_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {
            "type": "object",
            "properties": {"question": {"type": "string"},
                           "key_terms": {"type": "array", "items": {"type": "string"}}},
            "required": ["question", "key_terms"]}}
    },
    "required": ["items"],
}

GEN_SYSTEM = (
    "You write evaluation questions for a question-answering system that searches a collection of document "
    "pages. Write questions a real user of these documents would ask, answered by the pages given. Rules: "
    "each question must be answerable from the given page(s) alone; it names the distinctive subject (terms "
    "as the document uses them) so a search can find the page, but it must not contain the answer; the "
    "answer is a short, complete ground truth taken from the pages; the checklist holds 3 to 6 atomic key "
    "points (a fact, number, name or condition each) that a correct answer must contain, each stated in the "
    "pages; pages lists the page numbers the answer needs."
)
VERIFY_SYSTEM = (
    "You check a question-answer pair written about document pages. supported is true only when the answer "
    "and every checklist item are stated in, or follow directly from, the pages. List in unsupported_items "
    "every checklist item or claim of the answer that the pages do not support (empty when all are)."
)
ABSENT_SYSTEM = (
    "You write test questions that a document collection cannot answer. Given its documents and section "
    "titles, write questions a user of these documents could plausibly ask about topics close to their "
    "subject that the documents do not cover. For each question give key_terms: 1 to 3 specific words, "
    "written as a document would write them, whose presence in a page would mean the topic is covered."
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


def _as_items(data: dict, group: list[PageInfo], lang: str, n: int) -> tuple[list[GeneratedQuestion], int]:
    """Validated questions from the model's items (and how many were unusable)."""
    by_num = {p.page: p for p in group}
    out, bad = [], 0
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
    return out[:n], bad


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
        from ragkit.llm import chat_json

        try:
            data, usage = chat_json(self.provider, messages, schema=schema, schema_name=name)
        except RagError as e:
            if not _is_json_failure(e):
                with self.lock:
                    self.failures += 1
            raise
        with self.lock:
            self.report.usage.add(usage)
            self.failures = 0
        return data


def _generate_llm(ctx: _Context, plan: _Plan, report: GenqaReport, provider) -> list[GeneratedQuestion]:
    from ragkit.progress import progress_bar

    caller = _Caller(provider, report)
    report.usage = Usage(cost_usd=0.0)
    kept: list[GeneratedQuestion] = []
    bar = progress_bar(total=plan.singles + plan.multi + plan.unanswerable, desc=f"genqa ({provider.model})",
               unit="q", file=sys.stderr, disable=not ctx.progress)
    workers = max(1, min(ctx.settings.workers, 8))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for groups, quota, per in (([[p] for p in plan.order], plan.singles, ctx.per_page),
                                   (plan.groups, plan.multi, ctx.per_page)):
            if groups is plan.groups:  # pages short of single questions: more multi-page ones
                quota += plan.singles - len(kept)
            got = 0
            pos = 0
            while got < quota and pos < len(groups) and not caller.stopped:
                wave = groups[pos: pos + max(1, math.ceil((quota - got) / per))]
                pos += len(wave)
                for group, items in zip(wave, pool.map(lambda g, n=per: _ask_group(caller, ctx, g, n), wave),
                                        strict=True):
                    fresh = []
                    for q in items:
                        if _add_unique(q, kept + fresh, report):
                            fresh.append(q)
                    verdicts = list(pool.map(lambda q, g=group: _verify(caller, ctx, q, g), fresh))
                    for q, ok in zip(fresh, verdicts, strict=True):
                        if ok and got < quota:
                            kept.append(q)
                            got += 1
                            bar.update(1)
        if plan.unanswerable and not caller.stopped:
            for q in _llm_unanswerable(caller, ctx, plan, report):
                if _add_unique(q, kept, report):
                    kept.append(q)
                    bar.update(1)
    bar.close()
    if caller.stopped:
        report.errors.append(f"stopped after {MAX_CONSECUTIVE_FAILURES} provider failures in a row")
    return kept


def _ask_group(caller: _Caller, ctx: _Context, group: list[PageInfo], n: int) -> list[GeneratedQuestion]:
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
    items, bad = _as_items(data, group, lang, n)
    if bad:
        with caller.lock:
            caller.report.dropped["invalid"] += bad
    if len(group) > 1:
        items = [q for q in items if q.kind == "multi"] or items
    return items


def _verify(caller: _Caller, ctx: _Context, q: GeneratedQuestion, group: list[PageInfo]) -> bool:
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


def _llm_unanswerable(caller: _Caller, ctx: _Context, plan: _Plan, report: GenqaReport) -> list[GeneratedQuestion]:
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
        user = (f"Documents and sections:\n{titles}\n\nWrite {want + 2} such questions in {_lang_name(lg)}. "
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
            out.append(GeneratedQuestion(question, refusal_text(lg), [], [], [_refusal_point(lg)],
                                         "unanswerable", lg))
            n += 1
    return out


# -- report -------------------------------------------------------------------------------------------
def print_genqa_report(report: GenqaReport, console) -> None:
    from rich.table import Table

    table = Table(title="Generated questions", show_header=True)
    table.add_column("Kind")
    table.add_column("Count", justify="right")
    counts = report.counts()
    for kind in KINDS:
        table.add_row(kind, str(counts[kind]))
    table.add_row("total", str(len(report.questions)))
    console.print(table)
    langs = Counter(q.lang for q in report.questions)
    if langs:
        console.print("languages: " + ", ".join(f"{k} {v}" for k, v in sorted(langs.items())), highlight=False)
    console.print(f"pages: {report.pages_used} referenced of {report.pages_total} usable in {report.source}",
                  highlight=False)
    dropped = {k: v for k, v in report.dropped.items() if v}
    if dropped:
        console.print("dropped: " + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())), highlight=False)
    u = report.usage
    if report.provider == "offline":
        console.print("provider: offline (deterministic, no model; 0 tokens, cost 0)", highlight=False)
    else:
        cost = "unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}"
        console.print(f"provider: {report.provider} ({report.model}); tokens in {u.input_tokens}, "
                      f"out {u.output_tokens}, calls {u.calls}; cost {cost}", highlight=False)
    if report.skipped:
        console.print(f"[yellow]skipped {len(report.skipped)}:[/yellow]")
        for where, reason in report.skipped[:20]:
            console.print(f"  {where.replace(chr(10), ' + ')}: {reason}", highlight=False, markup=False)
        if len(report.skipped) > 20:
            console.print(f"  ... and {len(report.skipped) - 20} more", highlight=False)
    for e in report.errors:
        console.print(f"[red]error:[/red] {e}", highlight=False)
    if report.path is not None:
        console.print(f"questions written to {report.path}", highlight=False)
    else:
        console.print("[red]no questions file written[/red]")
