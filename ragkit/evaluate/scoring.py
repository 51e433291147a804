"""Scoring one answered row: the answer's columns, reference metrics over the database's pages, the
checklist/rubric judges, Contain-Match, LLM-Accuracy and the Evaluation Reason (DESIGN §4, §5).

Shared by `rag batch`/`rag eval` (ragkit.evaluate.batch) and the folder optimizer's re-asks (ragkit.optimize), so that
neither imports the other. The metric definitions themselves are ragkit.evaluate.metrics (no LLM code); the judges are
ragkit.evaluate.judges. One rule is applied here whatever a judge says: a refusal of a question the database cannot
answer (empty Reference Document) is the right answer, so its rubric scores are 1 and it passes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragkit.core.config import Settings
from ragkit.core.csvio import join_multi, split_checklist, split_multi
from ragkit.core.errors import RagError
from ragkit.core.models import Answer, Usage
from ragkit.core.paths import normalize_ref, page_keys, reference_path
from ragkit.core.text import one_line
from ragkit.evaluate.judges import RUBRIC_COLUMNS
from ragkit.evaluate.retrieval import SEARCH_COLUMNS
from ragkit.evaluate.summarization import REFERENCE_SUMMARY, SUMMARY_COLUMNS, TASK, TASKS, task_of

# -- columns (DESIGN §4) ------------------------------------------------------------------------------
QUESTION = "Question"
GROUND_TRUTH = "Ground Truth"
REFERENCE = "Reference Document"
CHECKLIST = "Checklist"
OPTIMIZED = "Optimized Reference Document"

# the contract's columns, in this order, right after the input columns
CORE_COLUMNS = [
    "RAG Answer", "Retrieved Files",
    "Checklist Recall", "Checklist Precision", "Checklist TP", "Checklist FP", "Checklist FN",
    "Ref Recall", "Ref Precision", "Ref Specificity", "Ref TP", "Ref TN", "Ref FP", "Ref FN",
    "Evaluation Reason",
]
CHECKLIST_MORE = ["Checklist F1", "Checklist Accuracy", "Checklist Specificity", "Checklist TN"]
REF_MORE = ["Ref F1", "Ref Accuracy"]
OPT_REF_COLUMNS = [f"Opt Ref {k}" for k in ("Recall", "Precision", "Specificity", "F1", "Accuracy",
                                            "TP", "TN", "FP", "FN")]
JUDGED_BY = "Judged By"  # "rule" | the judge model | "" (no judge measured the row): see judge_columns
JUDGE_COLUMNS = [*RUBRIC_COLUMNS, "Contain Match", "LLM Accuracy", JUDGED_BY]
# the columns a rule may fill instead of a judge (a refusal of a question the documents cannot answer)
RULE_COLUMNS = [*RUBRIC_COLUMNS, "Contain Match", "LLM Accuracy"]
BY_RULE = "rule"
CONFIDENCE = "Confidence"
MAX_LOOPS = "Max Loops Reached"  # arag/agent: the step cap was hit (empty for strategies without one)
DETAIL_COLUMNS = ["Refused", CONFIDENCE, "Pages Read", "Steps", MAX_LOOPS, "Input Tokens", "Output Tokens",
                  "Cost USD", "Latency ms", "Judge Input Tokens", "Judge Output Tokens", "Judge Cost USD"]
ATTEMPTS = "Attempts"
TAIL_COLUMNS = ["Error", "Judge Error"]

# every column a run computes (an input CSV that already has them, e.g. a results CSV, gets them replaced)
SPLIT = "Optimize Split"  # train | held-out, when an optimization held questions out (ragkit.evaluate.heldout)
OUTPUT_COLUMNS = [*CORE_COLUMNS, *CHECKLIST_MORE, *REF_MORE, *SEARCH_COLUMNS, *OPT_REF_COLUMNS, *JUDGE_COLUMNS,
                  *SUMMARY_COLUMNS, *DETAIL_COLUMNS, SPLIT, ATTEMPTS, *TAIL_COLUMNS]
_OUTPUT_SET = frozenset(OUTPUT_COLUMNS)
# columns the summary aggregates (metrics.summarize: means, micro-averages, totals)
SUMMARY_METRICS = [
    "Checklist Recall", "Checklist Precision", "Checklist F1", "Checklist Accuracy", "Checklist Specificity",
    "Checklist TP", "Checklist FP", "Checklist FN", "Checklist TN",
    "Ref Recall", "Ref Precision", "Ref Specificity", "Ref F1", "Ref Accuracy",
    "Ref TP", "Ref TN", "Ref FP", "Ref FN", *SEARCH_COLUMNS,
    *OPT_REF_COLUMNS,
    "Judge Accuracy", "Judge Completeness", "Judge Citations", "Judge Context Relevance", "Judge Overall",
    "Judge Passed", "Contain Match", "LLM Accuracy", "Refused", CONFIDENCE, "Steps", MAX_LOOPS, "Latency ms", ATTEMPTS,
]



def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in items:
        if x and x not in seen:
            seen.add(x)
            out.append(x)
    return out


def _cost_cell(cost: float | None) -> str:
    # 6 decimals: a cheap call's cost would round to 0 at 4; unknown cost (unpriced model) stays empty
    return "" if cost is None else f"{cost:.6f}"


def _fmt(value: Any) -> Any:
    from ragkit.evaluate.metrics import format_cell

    return format_cell(value)


def _one_line(e: BaseException | str) -> str:
    return one_line(e) or (type(e).__name__ if not isinstance(e, str) else "")


# The answer columns that only an answer has: a retrieval-only run (--strategy search) leaves them empty.
ANSWER_ONLY_COLUMNS = ("Refused", CONFIDENCE, "Steps", MAX_LOOPS)


def answer_columns(answer: Answer) -> dict:
    """The columns that describe an answer (no scoring)."""
    retrieved = _dedupe(s.path for s in answer.sources)
    return {
        "RAG Answer": answer.answer or "",
        "Retrieved Files": join_multi(retrieved),
        "Refused": bool(answer.refused),
        CONFIDENCE: "" if answer.error else round(float(answer.confidence), 4),
        "Pages Read": join_multi(_dedupe(answer.pages_read)),
        "Steps": answer.steps,
        MAX_LOOPS: answer.max_loops_reached,
        "Input Tokens": answer.usage.input_tokens,
        "Output Tokens": answer.usage.output_tokens,
        "Cost USD": _cost_cell(answer.usage.cost_usd),
        "Latency ms": round(answer.latency_ms),
        "Error": _one_line(answer.error) if answer.error else "",
    }

# -- scoring ------------------------------------------------------------------------------------------
@dataclass
class Scorer:
    """What scoring one row needs; shared by the workers (read-only apart from the index)."""

    settings: Settings
    db: Path
    index: Any
    judge: Any  # Provider
    has_ref: bool  # the input has a Reference Document column
    has_opt: bool
    has_checklist: bool
    has_gt: bool
    search_k: int = 0  # --strategy search: rank metrics at this k instead of judges

    @classmethod
    def create(cls, settings: Settings, columns: Iterable[str], index: Any = None, judge: Any = None) -> Scorer:
        from ragkit.core.llm import get_provider

        cols = set(columns)
        return cls(settings=settings, db=Path(settings.db), index=index,
                   judge=judge if judge is not None else get_provider(settings, role="judge"),
                   has_ref=REFERENCE in cols, has_opt=OPTIMIZED in cols, has_checklist=CHECKLIST in cols,
                   has_gt=GROUND_TRUTH in cols)

    @property
    def scored(self) -> bool:
        return self.has_ref or self.has_checklist or self.has_gt

    def universe(self) -> list[str]:
        """Every page of the database now, in Reference Document form."""
        if self.index is None:
            from ragkit.search import open_index

            self.index = open_index(self.db, progress=False)
        pages = self.index.pages()
        base = reference_path(self.db, "")  # the same prefix for every page: build it once
        return [p for p in pages] if base in ("", ".") else [f"{base}/{p}" for p in pages]

    def reference_columns(self, row: dict, retrieved: list[str], universe: list[str] | None = None) -> dict:
        from ragkit.evaluate.metrics import prefixed

        if not self.has_ref:
            return {}
        if universe is None:
            universe = self.universe()
        out = prefixed("Ref", score_references(str(row.get(REFERENCE) or ""), retrieved, universe, self.db))
        opt = str(row.get(OPTIMIZED) or "").strip()
        if opt:
            out.update(prefixed("Opt Ref", score_references(opt, retrieved, universe, self.db)))
        elif self.has_opt:
            out.update(opt_ref_as_ref(out))
        return out

    def rescore(self, row: dict, answer: Answer) -> tuple[dict, Usage]:
        """The row after a re-ask (the optimizer's): the answer's columns, the judges' and the Evaluation
        Reason recomputed; its reference metrics are the caller's, who knows the copies it made."""
        ref_cols = {k: v for k, v in row.items() if k.startswith(("Ref ", "Opt Ref "))}
        cols, usage, _ = _score(self, row, answer, ref_cols=ref_cols)
        return {**row, **cols}, usage

    def judge_columns(self, row: dict, answer: Answer) -> tuple[dict, Usage, list[str]]:
        """Checklist, rubric, Contain-Match, LLM-Accuracy and the Evaluation Reason (a summarization row: its
        own columns, evaluate.summarization). Never raises: each judge's failure is one entry of the returned
        problems (the answer stays)."""
        if task_of(row) == "summarization":
            from ragkit.evaluate.summarization import score_summary

            return score_summary(self, row, answer)
        from ragkit.evaluate import judges as J
        from ragkit.evaluate.metrics import checklist_metrics, prefixed

        usage = Usage()
        problems: list[str] = []  # one line each, the key scrubbed (judge.* errors come scrubbed already)
        out: dict[str, Any] = {}
        question = str(row.get(QUESTION) or "")
        text = answer.answer or ""
        refused = bool(answer.refused)
        ref_cell = str(row.get(REFERENCE) or "").strip()
        answerable = bool(ref_cell) if self.has_ref else True
        items = split_checklist(str(row.get(CHECKLIST) or "")) if self.has_checklist else []
        gt = str(row.get(GROUND_TRUTH) or "").strip() if self.has_gt else ""

        verdict = None
        if not answerable:  # DESIGN §5: refused -> TN = 1, answered -> FP = 1; no judge needed
            out.update(prefixed("Checklist", checklist_metrics(answerable=False, refused=refused, n_items=0,
                                                               covered=0, extra=0)))
        elif items:
            covered = extra = 0
            ok = True
            if not refused:
                try:
                    verdict = J.judge_checklist(self.judge, question, text, items)
                    usage.add(verdict.usage)
                    covered, extra = min(verdict.n_covered, len(items)), verdict.n_extra
                except Exception as e:  # noqa: BLE001 - a judge failure must not lose the answer
                    problems.append(f"checklist judge failed: {_one_line(e)}")
                    ok = False
            if ok:
                out.update(prefixed("Checklist", checklist_metrics(answerable=True, refused=refused,
                                                                   n_items=len(items), covered=covered,
                                                                   extra=extra)))

        rubric = None
        contain = llm_ok = None
        if gt and refused and not answerable and self.has_ref:
            # the rule, whatever a judge would say: refusing what the database cannot answer is right
            rubric = correct_refusal_verdict()
            contain = llm_ok = True
            out.update(rubric.columns())
            out["Contain Match"] = contain
            out["LLM Accuracy"] = llm_ok
            out[JUDGED_BY] = BY_RULE
        elif gt:
            # the answer's words only: its sources list and citations name page files ("page_009.md p.9"),
            # which would contain a ground truth such as "9"
            contain = bool(J.contain_match(J.answer_text_for_judging(text), gt))
            out["Contain Match"] = contain
            try:
                rubric = J.judge_rubric(self.judge, question=question, expected=gt, answer=text,
                                        sources=answer.sources, required_info=items)
                if rubric is not None:
                    usage.add(rubric.usage)
                    out.update(rubric.columns())
            except Exception as e:  # noqa: BLE001
                problems.append(f"rubric judge failed: {_one_line(e)}")
            try:
                llm_ok, u = J.llm_accuracy(self.judge, question=question, ground_truth=gt, answer=text)
                usage.add(u)
                out["LLM Accuracy"] = llm_ok
            except Exception as e:  # noqa: BLE001
                problems.append(f"LLM-Accuracy judge failed: {_one_line(e)}")
            measured = rubric is not None or llm_ok is not None
            out[JUDGED_BY] = (self.judge.model or "judge") if measured else ""
        from ragkit.core.secrets import scrub

        problems = [scrub(p, self.settings.api_key) for p in problems]
        out["Judge Input Tokens"] = usage.input_tokens
        out["Judge Output Tokens"] = usage.output_tokens
        out["Judge Cost USD"] = _cost_cell(usage.cost_usd)
        ref = _metric_dict(row, "Ref") if self.has_ref else None
        opt_ref = _metric_dict(row, "Opt Ref") if str(row.get(OPTIMIZED) or "").strip() else None
        out["Evaluation Reason"] = J.evaluation_reason(
            answerable=answerable if (self.has_ref or self.has_checklist or self.has_gt) else None,
            refused=refused, checklist=verdict, items=items, ref=ref, opt_ref=opt_ref, rubric=rubric,
            contain=contain, llm_correct=llm_ok, notes=problems)
        return out, usage, problems


def score_references(ref_cell: str, retrieved: list[str], universe: list[str], db: Path) -> dict:
    """The reference metrics of one cell (`Reference Document` or `Optimized Reference Document`) as batch, eval
    and the optimizer count them: every path compared as the page it names in `db` (paths.page_keys), and a
    retrieved byte-for-byte copy of a required page counted as that page (with_copies)."""
    from ragkit.evaluate.metrics import reference_metrics

    key = page_keys(Path(db))
    return reference_metrics(with_copies(ref_cell, retrieved, db, key), retrieved, universe, key)


def with_copies(ref_cell: str, retrieved: list[str], db: Path, key: Callable[[str], str] | None = None) -> str:
    """The reference cell with every retrieved page that is a byte-for-byte copy of a required page added to
    that page's aliases: an answer citing an optimizer's copy found the page (same content), so a CSV naming
    only the original must not score it 0. Pages that differ in any byte are never merged. A retrieved path
    that names a required page in another form (`key`, paths.page_keys(db) unless given) is that page already."""
    from ragkit.core.references import reference_groups

    key = key or page_keys(Path(db))
    groups = reference_groups(ref_cell, key)
    required = {key(a) for g in groups for a in g}
    extra = _dedupe(normalize_ref(p) for p in retrieved if key(p) not in required)
    if not groups or not extra:
        return ref_cell
    root = Path(db).resolve()

    def content(path: str) -> bytes | None:
        rel = key(path)
        full = Path(rel) if rel.startswith("/") else root / rel
        try:
            return full.read_bytes() if full.resolve().is_relative_to(root) and full.is_file() else None
        except OSError:
            return None

    got = {p: content(p) for p in extra}
    changed = False
    for g in groups:
        want = {c for c in (content(a) for a in g) if c is not None}
        for p, data in got.items():
            if data is not None and data in want and p not in g:
                g.append(p)
                changed = True
    return "\n".join("|".join(g) for g in groups) if changed else ref_cell


def correct_refusal_verdict():
    """The rubric verdict of a refusal of an unanswerable question: every criterion 1, passed."""
    from ragkit.evaluate.judges import RUBRIC_METRICS, RubricVerdict

    return RubricVerdict(accuracy=1.0, completeness=1.0, citations=1.0, context_relevance=1.0, overall=1.0,
                         passed=True, metric_status={m: True for m in RUBRIC_METRICS},
                         reasoning={"rule": "a refusal of a question the documents cannot answer is correct"},
                         issues=[], strengths=["refused a question the documents cannot answer"],
                         hallucinations=[])


def _metric_dict(row: dict, prefix: str) -> dict | None:
    """{"TP": 1, ...} from a row's "<prefix> TP" ... cells; None when the counts are absent."""
    from ragkit.evaluate.metrics import COUNT_KEYS, parse_number

    counts = {k: parse_number(row.get(f"{prefix} {k}")) for k in COUNT_KEYS}
    if any(v is None for v in counts.values()):
        return None
    return {k: int(v) for k, v in counts.items()}


def _short(s: str, n: int = 60) -> str:
    return one_line(s, n)


def _score(scorer: Scorer, row: dict, answer: Answer, *, ref_cols: dict | None = None,
           universe: list[str] | None = None) -> tuple[dict, Usage, list[str]]:
    """All computed columns of one row (the answer's, reference metrics, judges, reason)."""
    from ragkit.evaluate.judges import evaluation_reason

    cols = answer_columns(answer)
    if answer.error:  # no answer to score: metrics stay empty, the row is retried on resume
        cols["Evaluation Reason"] = evaluation_reason(error=answer.error)
        return cols, Usage(), []
    retrieved = split_multi(cols["Retrieved Files"])
    if ref_cols is None:
        ref_cols = scorer.reference_columns(row, retrieved, universe)
    cols.update(ref_cols)
    usage, problems = Usage(), []
    if scorer.search_k:
        from ragkit.evaluate.retrieval import search_columns

        cols.update(dict.fromkeys(ANSWER_ONLY_COLUMNS, ""))  # nothing answered: no refusal, confidence or steps
        if scorer.has_ref:
            cols.update(search_columns(str(row.get(REFERENCE) or ""), retrieved, scorer.search_k,
                                       page_keys(scorer.db)))
        cols["Evaluation Reason"] = ""
    elif scorer.scored:
        jcols, usage, problems = scorer.judge_columns({**row, **cols}, answer)
        cols.update(jcols)
    else:
        cols["Evaluation Reason"] = ""
    cols["Judge Error"] = "; ".join(problems)
    return cols, usage, problems




def opt_ref_as_ref(cols: dict) -> dict:
    """The Opt Ref columns of a row whose `Optimized Reference Document` is empty: its Ref columns. An empty cell
    means the optimizer left the row's pages as they were (optimize.run reads it so), so Opt Ref covers the same
    rows as Ref and a summary never sets a mean over the few optimized rows against one over all of them."""
    return {f"Opt {k}": v for k, v in cols.items() if k.startswith("Ref ") and f"Opt {k}" in OPT_REF_COLUMNS}


def fill_opt_ref(rows: list[dict], scorer: Scorer) -> None:
    """Rows the optimizer gave an `Optimized Reference Document` without re-asking: score it now; the others
    (an empty cell: pages as they were) get their Ref columns (opt_ref_as_ref)."""
    universe = None
    for row in rows:
        if not str(row.get(OPTIMIZED) or "").strip() and row.get("Opt Ref TP") in (None, "") and not row.get("Error"):
            row.update(opt_ref_as_ref(row))
        if str(row.get(OPTIMIZED) or "").strip() and row.get("Opt Ref TP") in (None, "") and not row.get("Error"):
            if universe is None:
                universe = scorer.universe()
            from ragkit.evaluate.metrics import prefixed

            row.update(prefixed("Opt Ref", score_references(row[OPTIMIZED],
                                                            split_multi(str(row.get("Retrieved Files") or "")),
                                                            universe, scorer.db)))


# -- strict input (DESIGN §4): checked before any question is asked ----------------------------------------
PAGE = "Page"
GENERATED_BY = "Generated By"  # rag genqa: who wrote the row ("offline genqa", or "genqa <model>")
INPUT_COLUMNS = (QUESTION, GROUND_TRUTH, REFERENCE, OPTIMIZED, PAGE, CHECKLIST, GENERATED_BY, TASK, REFERENCE_SUMMARY)
_PAGE_CELL = re.compile(r"\s*(?:\d+(?:\s*-\s*\d+)?(?:\s*[,;|/\r\n ]\s*\d+(?:\s*-\s*\d+)?)*)?\s*")


def known_columns() -> tuple[str, ...]:
    """Every column name ragkit reads or writes (a near-miss of one of them is a typo)."""
    return (*INPUT_COLUMNS, *OUTPUT_COLUMNS)


def read_questions(path: Path, encoding: str | None = None) -> Any:
    """A question CSV (or a results CSV given as input), read strictly: csvio.read_csv with the known columns,
    then `Page` must be numbers (`3`, `3;5`, `3-5`) or empty, and `Task` qa, summarization or empty."""
    from ragkit.core.csvio import read_csv

    df = read_csv(path, required=(QUESTION,), known=known_columns(), encoding=encoding)
    check_questions(df, path)
    return df


def check_questions(df: Any, path: Path | str) -> None:
    """A question table's cells: `Page` numbers (check_pages) and `Task` qa, summarization or empty."""
    check_pages(df, path)
    if TASK in df.columns:
        for i, cell in enumerate(df[TASK]):
            if task_of({TASK: cell}) not in TASKS:
                raise RagError(f"{path}: row {i + 2}, column {TASK!r}: {one_line(str(cell), 40)!r} is not a task "
                               f"({' or '.join(TASKS)}, or empty for qa)")


def check_pages(df: Any, path: Path | str) -> None:
    """`Page` must be numbers (`3`, `3;5`, `3-5`) or empty, and each number or range must hold a page that the
    row's `Reference Document` names (when its pages are `page_NNN.md` files)."""
    from ragkit.core.paths import page_number
    from ragkit.core.references import reference_groups

    if PAGE not in df.columns:
        return
    refs = df[REFERENCE] if REFERENCE in df.columns else [""] * len(df)
    for i, (cell, ref) in enumerate(zip(df[PAGE], refs, strict=True)):
        text = str(cell or "")
        if not _PAGE_CELL.fullmatch(text):
            raise RagError(f"{path}: row {i + 2}, column {PAGE!r}: {one_line(text, 40)!r} is not a page "
                           "number (numbers such as 3, 3;5 or 3-5, or empty)")
        named = [page_number(a) for g in reference_groups(str(ref or "")) for a in g]
        if not named or None in named:
            continue
        for part in re.findall(r"\d+(?:\s*-\s*\d+)?", text):
            lo, _, hi = part.partition("-")
            lo, hi = int(lo), int(hi or lo)
            if not any(lo <= n <= hi for n in named):
                pages = ", ".join(str(n) for n in sorted(set(named)))
                raise RagError(f"{path}: row {i + 2}, column {PAGE!r}: {part.replace(' ', '')} is not a page of "
                               f"its {REFERENCE!r} (page {pages})")


def check_references(rows: list[dict], db: Path, path: Path, *, limit: int = 5,
                     outcome: str = "nothing was asked") -> None:
    """Every page named in `Reference Document` / `Optimized Reference Document` must exist under the database.
    The missing ones are one error (first `limit` listed), with a hint when another --db or path prefix would
    resolve them."""
    from ragkit.core.references import page_exists, reference_groups

    db = Path(db)
    key = page_keys(db)
    missing: list[tuple[int, str]] = []
    for i, row in enumerate(rows):
        if not str(row.get(QUESTION) or "").strip():
            continue
        for col in (REFERENCE, OPTIMIZED):
            for group in reference_groups(str(row.get(col) or "")):
                for alias in group:
                    if not page_exists(db, alias, key):
                        missing.append((i, alias))
    if not missing:
        return
    shown = "; ".join(f"row {i + 2}: {one_line(a, 100)}" for i, a in missing[:limit])
    more = f" and {len(missing) - limit} more" if len(missing) > limit else ""
    raise RagError(f"{path}: {len(missing)} reference page(s) not found in the database folder '{db}': "
                   f"{shown}{more}{_reference_hint([a for _, a in missing], db, path)}; {outcome}",
                   flags={"so try db=": "so try --db "})


def _moved_pages(refs: list[str], db: Path) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """(reference, the page that holds its text now) for the first missing reference a re-ingest moved, and
    (reference, why it cannot be told) for the first whose page a re-ingest replaced but cannot be followed to
    one page (references.page_now, which `rag refs update` applies to a whole CSV)."""
    from ragkit.core.pagehistory import PageHistory
    from ragkit.core.references import page_now
    from ragkit.evaluate.refs import why_unresolved

    key = page_keys(db)
    history = PageHistory(db)
    moved = check = None
    for ref in refs:
        now = page_now(db, ref, key, history)
        if now.page and moved is None:
            moved = ref, now.page
        elif now.reason and check is None:
            check = ref, why_unresolved(now).replace(": left unchanged", "")
        if moved and check:
            break
    return moved, check


def _reference_hint(refs: list[str], db: Path, csv: Path) -> str:
    """`; hint: ...` when a re-ingest moved the first missing reference's page, or a prefix swap or another
    database folder resolves it."""
    root = db.resolve()
    here = reference_path(db, "").rstrip("/")
    moved, check = _moved_pages(refs, db)
    command = f"rag refs update {shlex.quote(str(csv))} --db {shlex.quote(str(db))}"
    if moved:
        hand = (f"; but {one_line(check[0], 100)}: {check[1]} (`--dry-run` lists every such reference first)"
                if check else "")
        return (f"; hint: {moved[0]} is now {moved[1]} (re-ingesting its document moved its pages, docs/ingest.md): "
                f"`{command} --in-place` rewrites the CSV's paths to the pages that hold their text{hand}")
    if check:
        return (f"; hint: {one_line(check[0], 100)}: {check[1]}; `{command} --dry-run` lists every such reference "
                "and rewrites none")
    for ref in refs:
        norm = normalize_ref(ref)
        lead = "/" if norm.startswith("/") else ""  # an absolute reference's prefix is absolute too
        parts = norm.lstrip("/").split("/")
        for k in range(1, len(parts) - 1):
            page = root / "/".join(parts[k:])
            if page.is_file():
                if not page.resolve().is_relative_to(root):  # not missing for want of another --db: refused
                    return (f"; hint: {one_line(ref, 100)} is a symbolic link that leads out of the database, and "
                            "only the pages inside it count")
                prefix = lead + "/".join(parts[:k])
                if Path(normalize_ref(ref)).is_file() or (Path.cwd() / prefix).is_dir():
                    return f"; hint: they exist under {prefix}, so try db={prefix}"
                return (f"; hint: the pages exist in {db} under another prefix: write {here}/... instead of "
                        f"{prefix}/...")
        p = Path(normalize_ref(ref))
        if p.is_file():
            for parent in p.resolve().parents:
                if (parent / ".ragkit").is_dir():
                    return f"; hint: they exist in the database {parent}, so try db={parent}"
    return ""
