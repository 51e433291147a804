"""What a run hands back and writes: its result columns, the BatchReport, answers as plain data (the
checkpoint's), and the results and summary CSV files (timestamped, never over an existing file)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ragkit.core.csvio import (
    summary_path_for,
    timestamped_path,
)
from ragkit.core.csvio import write_csv as _write_csv
from ragkit.core.models import Answer, Source, Usage
from ragkit.evaluate.heldout import SPLIT_COLUMN
from ragkit.evaluate.retrieval import SEARCH, SEARCH_COLUMNS, is_retrieval_metric
from ragkit.evaluate.runinfo import (
    CONTEXT_BUDGETED,
    QUOTING_NOTE,
    RunInfo,
    answer_fingerprint,
    write_run_info,
)
from ragkit.evaluate.scoring import (
    ATTEMPTS,
    BY_RULE,
    CHECKLIST_MORE,
    CORE_COLUMNS,
    DETAIL_COLUMNS,
    GENERATED_BY,
    JUDGE_COLUMNS,
    JUDGED_BY,
    OPT_REF_COLUMNS,
    OPTIMIZED,
    QUESTION,
    REF_MORE,
    REFERENCE,
    RULE_COLUMNS,
    SUMMARY_METRICS,
    TAIL_COLUMNS,
    _fmt,
)
from ragkit.evaluate.summarization import SECTION_METRICS, SUMMARY_COLUMNS, TASK, summary_section, task_of

ANSWER = "RAG Answer"


def result_columns(input_columns: list[str], *, optimized: bool, attempts: bool, split: bool = False,
                   search: bool = False) -> list[str]:
    """The results CSV's columns: input columns, then DESIGN §4's, then the further ones (the summary columns when
    the input has a `Task` column; the ranking columns of a retrieval-only run, `search`)."""
    cols = list(input_columns)
    if optimized and OPTIMIZED not in cols:
        pos = cols.index(REFERENCE) + 1 if REFERENCE in cols else len(cols)
        cols.insert(pos, OPTIMIZED)
    cols += CORE_COLUMNS + CHECKLIST_MORE + REF_MORE
    if search:
        cols += SEARCH_COLUMNS
    if optimized:
        cols += OPT_REF_COLUMNS
    cols += JUDGE_COLUMNS
    if TASK in input_columns:
        cols += SUMMARY_COLUMNS
    cols += DETAIL_COLUMNS
    if split:
        cols.append(SPLIT_COLUMN)
    if attempts:
        cols.append(ATTEMPTS)
    return cols + TAIL_COLUMNS


# -- report -------------------------------------------------------------------------------------------
UNKNOWN = "unknown"  # a figure or a name the run cannot know (never shown as 0 or left empty)


@dataclass
class BatchReport:
    results_path: Path | None = None
    summary_path: Path | None = None
    rows: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # non-empty => exit status 1
    usage: Usage = field(default_factory=Usage)  # everything this result cost: answers + judges + optimizer
    wall_s: float = 0.0
    kind: str = "batch"  # "batch" | "eval"
    input_path: Path | None = None
    questions: int = 0  # rows in the results
    skipped_blank: int = 0
    resumed: int = 0  # rows taken from the checkpoint instead of asked again
    # resumed rows whose Optimized Reference Document changed since they were answered: an interrupted --optimize
    # run of the same command kept copies after they ran, so the tree is no longer the one they were asked in
    answered_before_copies: int = 0
    answer_usage: Usage = field(default_factory=Usage)
    answer_usage_known: bool = True  # eval: False when the re-scored results have no token columns
    judge_usage: Usage = field(default_factory=Usage)
    checkpoint_path: Path | None = None
    checkpoint_kept: bool = False  # errors remain: rerun the same command to retry them
    optimize: Any = None  # ragkit.optimize.OptimizeReport when the optimizer ran
    summary: list[dict] = field(default_factory=list)  # the summary CSV's rows
    provider: str = ""
    model: str = ""
    judge_model: str = ""
    strategy: str = ""
    missed_pages: int = 0  # a run without optimization: reference pages missed (Ref FN summed) ...
    missed_rows: int = 0  # ... in this many questions
    measure: Any = None  # ragkit.evaluate.heldout.OptimizeMeasure when the optimizer ran
    run: RunInfo = field(default_factory=RunInfo)  # what made this run, written as <results>.run.json
    run_path: Path | None = None
    gates: list = field(default_factory=list)  # gates.GateResult of the gates asked (also in the run record)

    def records(self) -> list[dict]:
        """The result rows as typed data (`rows` holds the CSV's cells): typed_row of each."""
        return [typed_row(r) for r in self.rows]


# the measured columns of a results row: a number (float) or None when undefined; BOOLEAN ones True/False/None.
# Text columns (the answer, files, reasons, errors) and the input columns stay as the CSV has them.
BOOLEAN = frozenset({"Refused", "Max Loops Reached", "Judge Passed", "Contain Match", "LLM Accuracy"})
NUMERIC = frozenset({*SUMMARY_METRICS, "Input Tokens", "Output Tokens", "Cost USD", "Judge Input Tokens",
                     "Judge Output Tokens", "Judge Cost USD", *SECTION_METRICS}) - BOOLEAN


def typed_row(row: dict) -> dict:
    """A results row with its measured cells as Python values: metrics, counts, tokens, cost and latency float
    (None where the CSV cell is empty: undefined, not 0), Refused and the other yes/no columns bool (None when
    empty, e.g. a row whose answer failed). The CSV keeps its own forms (DESIGN §4)."""
    from ragkit.evaluate.metrics import parse_number

    out = dict(row)
    for c, v in row.items():
        if c in BOOLEAN:
            n = parse_number(v)
            out[c] = None if n is None else bool(n)
        elif c in NUMERIC:
            out[c] = parse_number(v)
    return out


# -- answers <-> plain data ---------------------------------------------------------------------------
def answer_to_dict(answer: Answer) -> dict:
    return asdict(answer)


def answer_from_dict(d: dict) -> Answer:
    d = dict(d)
    d["sources"] = [Source(**s) for s in d.get("sources") or []]
    d["usage"] = Usage(**(d.get("usage") or {}))
    known = Answer.__dataclass_fields__
    return Answer(**{k: v for k, v in d.items() if k in known})


def usage_from(d: dict | None) -> Usage:
    return Usage(**d) if d else Usage()


# -- output -------------------------------------------------------------------------------------------
def write_outputs(report: BatchReport, columns: list[str], *, stem: str, kind: str, results_dir: Path) -> None:
    from ragkit.evaluate.metrics import SUMMARY_COLUMNS, format_row, parse_number, summarize, totals_rows

    table = [{c: _fmt(r.get(c)) for c in columns} for r in report.rows]
    report.rows = table  # exactly what the CSV holds (every column; None -> "")
    df = pd.DataFrame(table, columns=columns)
    path = timestamped_path(Path(results_dir), stem, kind)
    _write_csv(df, path)
    report.results_path = path

    # a retrieval-only run (--strategy search) answered nothing: only its retrieval figures are measurements
    retrieval_only = report.run.strategy == SEARCH
    metric_cols = [c for c in SUMMARY_METRICS if c in columns and (not retrieval_only or is_retrieval_metric(c))]
    ref_col = REFERENCE if REFERENCE in columns else None
    # question answering and summarization are measured apart: the QA metrics cover the qa rows only
    qa_rows = [r for r in report.rows if task_of(r) == "qa"] if TASK in columns else report.rows
    # a judge column's figures cover the rows a judge measured; the refusals passed by rule are counted apart
    by_rule = [r for r in qa_rows if r.get(JUDGED_BY) == BY_RULE]
    summary = []
    errored = sum(1 for r in qa_rows if r.get("Error"))
    if qa_rows:
        for c in metric_cols:
            if c in RULE_COLUMNS:
                row = _summarize_subset(qa_rows, c, ref_col, keep=lambda r: r.get(JUDGED_BY) != BY_RULE,
                                        which=f"judged; the {len(by_rule)} passed by rule left out")
                # a row whose judge failed (Judge Error) has no score, not a 0: say how many are left out
                failed = sum(1 for r in qa_rows if r.get("Judge Error") and str(r.get(c) or "") == ""
                             and r.get(JUDGED_BY) != BY_RULE)
                if not row["Rows"]:
                    row["Covers"] = (f"not measured (the judge failed on {failed} row(s))" if failed else
                                     "not measured (no judge)" if c != "Contain Match" else "not measured")
                elif failed:
                    row["Covers"] = f"{row['Covers']} (the judge failed on {failed} row(s); left out)"
            elif c == ATTEMPTS:  # 0 = never re-asked: no attempt to average
                row = _summarize_subset(qa_rows, c, ref_col, keep=lambda r: bool(parse_number(r.get(ATTEMPTS))),
                                        which="the rows the optimizer worked on")
            elif errored:  # a failed row has no answer: its Refused 0, Steps and Latency measure none
                row = _summarize_subset(qa_rows, c, ref_col, keep=lambda r: not r.get("Error"),
                                        which=f"answered; the {errored} with an answer error left out")
            else:
                row = summarize(qa_rows, [c], reference_column=ref_col)[0]
            summary.append(format_row(row))
    if by_rule:
        summary.append(format_row({"Metric": "Passed by rule", "Mean": None, "Micro": None, "Total": len(by_rule),
                                   "Rows": len(by_rule), "Covers": "unanswerable, refused (judge columns set to 1 "
                                                                   "by rule, not by a judge)"}))
    if not retrieval_only:
        summary += [format_row(r) for r in _refusal_rows(qa_rows, ref_col)]
    summary += [format_row(r) for r in summary_section(report.rows)]
    if report.measure is not None:
        summary += [format_row(r) for r in report.measure.summary_rows()]
    answered = sum(1 for r in report.rows if not r.get("Error"))
    eval_run = kind == "eval"
    known = report.answer_usage_known
    totals = [format_row(r) for r in totals_rows(
        questions=report.questions,
        input_tokens=report.usage.input_tokens,
        output_tokens=report.usage.output_tokens,
        cost_usd=report.usage.cost_usd,
        wall_s=report.wall_s,
        errors=len(report.errors),
        skipped=report.skipped_blank,
        calls=report.usage.calls,
    )]
    # an eval asked nothing: its answers' figures are the re-scored results', its calls and time its judges'
    source = Path(report.run.input).name if report.run.input else "the re-scored results"
    carried = f"answers (from {source}, not asked again) + this run's judges"
    for r in totals:
        if r["Metric"] == "Total cost (USD)" and report.usage.cost_usd is None:
            r["Total"] = UNKNOWN  # some model has no price: never show 0
        if r["Metric"] in ("Total input tokens", "Total output tokens", "Total tokens") and not known:
            r["Total"] = UNKNOWN  # the answers' tokens are not in the re-scored results
        if eval_run and r["Metric"] in ("Total input tokens", "Total output tokens", "Total tokens",
                                        "Total cost (USD)"):
            r["Covers"] = carried
        elif eval_run and r["Metric"] == "LLM calls":
            r["Covers"] = "this run's judges"
    summary += totals
    report.run.date = datetime.now(UTC).isoformat(timespec="seconds")
    extra: list[tuple[str, Any]] = [
        ("Answered", answered),
        ("Answer errors", sum(1 for r in report.rows if r.get("Error"))),
        ("Judge errors", sum(1 for r in report.rows if r.get("Judge Error"))),
        ("Resumed from checkpoint", report.resumed if kind == "results" else None),
        ("Answer input tokens", report.answer_usage.input_tokens if known else UNKNOWN),
        ("Answer output tokens", report.answer_usage.output_tokens if known else UNKNOWN),
        ("Answer cost (USD)", _cost_total(report.answer_usage.cost_usd if known else None)),
        ("Judge input tokens", report.judge_usage.input_tokens),
        ("Judge output tokens", report.judge_usage.output_tokens),
        ("Judge cost (USD)", _cost_total(report.judge_usage.cost_usd)),
        ("Provider", report.provider),
        ("Model", report.model),
        # the lexical judge is no model: the record says None, and so does the summary
        ("Judge model", report.judge_model if report.run.judge_model else "none"),
        ("Strategy", report.strategy or None),
        ("k", report.run.k),
        ("Context tokens", report.run.context_tokens),
        ("Max steps", report.run.max_steps),
        ("Max tokens", report.run.max_tokens),
        ("Embeddings", report.run.embeddings),
        ("API host", report.run.api_host),
        ("Engine", report.run.engine),
        ("Checklists written by", report.run.checklists_by),
        ("ragkit version", report.run.version or None),
        ("Commit", report.run.commit),
        ("Database", report.run.database or None),
        ("Answers from database", report.run.answered_database),
        ("Database pages", report.run.database_pages),
        ("Database sha256", report.run.database_sha256),
        ("Converter", _listed(report.run.converter)),
        ("Index", report.run.index),
        ("Kind", report.run.kind or report.kind),
        ("Date", report.run.date),
        ("Input", report.run.input or None),
        ("Input path", report.run.input_path),
        ("Questions sha256", report.run.questions_sha256),
        ("Cached calls", report.usage.cached or None),
    ]
    if retrieval_only:  # no model answered and no judge scored: who would have, and their counts, mean nothing
        extra = [(k, v) for k, v in extra if k not in _ANSWER_ROWS]
    if report.optimize is not None:
        extra += list(report.optimize.summary().items())
    if report.missed_pages:
        extra.append(("Reference pages missed (not optimized)", report.missed_pages))
    summary += [{"Metric": k, "Mean": "", "Micro": "", "Total": v, "Rows": "",
                 "Covers": f"from {source} (not asked again)" if eval_run and k.startswith("Answer ") else ""}
                for k, v in extra if v is not None]
    report.run.cached_calls = report.usage.cached
    if report.usage.cached:
        report.run.notes.append(cached_note(report.usage.cached, report.usage.calls + report.usage.cached))
    summary += [{"Metric": "Note", "Mean": "", "Micro": "", "Total": note, "Rows": "", "Covers": ""}
                for note in report.run.notes]
    report.summary = summary
    sdf = pd.DataFrame(summary, columns=list(SUMMARY_COLUMNS))
    spath = summary_path_for(path)
    _write_csv(sdf, spath)
    report.summary_path = spath
    report.run.questions = report.questions
    if ANSWER in columns and not retrieval_only:
        report.run.answers = [answer_fingerprint(r.get(QUESTION), r.get(ANSWER)) for r in report.rows]
    report.run_path = write_run_info(path, report.run)


# the summary rows that describe answers and their judging: a retrieval-only run has no such rows (its Errors
# row counts the searches that failed)
_ANSWER_ROWS = frozenset({"Answered", "Answer errors", "Judge errors", "Answer input tokens", "Answer output tokens",
                          "Answer cost (USD)", "Judge input tokens", "Judge output tokens", "Judge cost (USD)",
                          "Provider", "Model", "Judge model", "Context tokens", "Max steps", "Max tokens",
                          "API host", "Engine", "Checklists written by"})


def _summarize_subset(rows: list[dict], column: str, ref_col: str | None, *, keep: Callable[[dict], bool],
                      which: str) -> dict:
    """metrics.summarize of `column` over the rows `keep` accepts, with Covers saying so: the other rows are
    left out but still counted as rows of the run, so a figure over a subset never reads "all"."""
    from ragkit.evaluate.metrics import summarize

    view = [r if keep(r) else {k: v for k, v in r.items() if k != column} for r in rows]
    row = summarize(view, [column], reference_column=ref_col)[0]
    if row["Rows"] and len(view) > sum(1 for r in rows if keep(r)):
        row["Covers"] = f"{row['Covers']} ({which})"
    return row


def checklist_authors(rows: list[dict]) -> str | None:
    """Who wrote the checklists of the rows that have one: "offline genqa" when all of them came from offline
    genqa, "offline genqa (N of M)" when some did, None when none did or nobody said (no Generated By)."""
    from ragkit.evaluate.scoring import CHECKLIST

    with_items = [r for r in rows if str(r.get(CHECKLIST) or "").strip()]
    offline = [r for r in with_items if str(r.get(GENERATED_BY) or "").strip().lower().startswith("offline")]
    if not offline:
        return None
    return "offline genqa" if len(offline) == len(with_items) else f"offline genqa ({len(offline)} of {len(with_items)})"


def quoting_notes(run: RunInfo) -> list[str]:
    """The caveat a run must carry: offline answers scored against offline genqa's checklists."""
    return [QUOTING_NOTE] if run.engine == "offline-extractive" and run.checklists_by else []


def _refusal_rows(rows: list[dict], ref_col: str | None) -> list[dict]:
    """Refusal rates of answerable and of unanswerable questions (answered rows only)."""
    from ragkit.evaluate.metrics import parse_number

    if ref_col is None:
        return []
    out = []
    for label, want in (("Refusal Rate Answerable", True), ("Refusal Rate Unanswerable", False)):
        flags = [parse_number(r.get("Refused")) for r in rows
                 if not r.get("Error") and bool(str(r.get(ref_col) or "").strip()) == want]
        flags = [f for f in flags if f is not None]
        out.append({"Metric": label, "Mean": sum(flags) / len(flags) if flags else None, "Micro": None,
                    "Total": int(sum(flags)) if flags else None, "Rows": len(flags),
                    "Covers": "answerable" if want else "unanswerable"})
    return out


def _listed(value: Any) -> Any:
    return ", ".join(map(str, value)) if isinstance(value, list) else value


def _cost_total(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:.6f}"


def retrieval_depth(strategy: str, settings: Any, k: int) -> int | None:
    """The pages a strategy retrieves for a question: what `k` means in a run record."""
    from ragkit.answer.naive import NAIVE_K
    from ragkit.answer.synth import SYNTH_K

    return {"search": k, "naive": NAIVE_K, "synth": SYNTH_K, "agent": settings.start_pages}.get(strategy)


def cached_note(cached: int, total: int) -> str:
    """The note of a run some of whose model calls the response cache answered."""
    return f"{cached} of {total} calls from the cache: latency and tokens are not a measurement"


def embeddings_label(index: Any) -> str | None:
    """Whether meaning took part in search: the embedding model's name, "off" (RAG_EMBED=0, or no model
    installed), None when the index cannot say (an injected stand-in)."""
    name = getattr(index, "embedder_name", None)
    if not callable(name):
        return None
    try:
        return name() or "off"
    except Exception:  # noqa: BLE001 - a record field, never a reason to fail the run
        return None


def run_record(kind: str, settings: Any, *, strategy: str | None, provider: str | None, model: str | None,
               judge: Any, k: int | None, input_path: Path | None, offline: bool, rows: list[dict],
               embeddings: str | None = None) -> RunInfo:
    """What made this run (written beside its results as <results>.run.json): who answered and with which
    settings, the code, the question set and the database it measured (ragkit.core.provenance)."""
    from ragkit import __version__
    from ragkit.core.provenance import api_host, database_state, questions_sha256, ragkit_commit
    from ragkit.search.backend import index_label

    db = Path(settings.db)
    state = database_state(db) if db.is_dir() else None  # an eval without references needs no database
    # who asked the model: None offline and for a search run (no model, no judge)
    endpoint = None if settings.provider == "offline" or strategy == "search" else api_host(settings.api_base)
    run = RunInfo(kind=kind, strategy=strategy, provider=provider, model=model,
                  judge_model=None if getattr(judge, "is_offline", False) else judge.model,
                  k=k, version=__version__,
                  context_tokens=settings.context_tokens if strategy in CONTEXT_BUDGETED else None,
                  # the step and token budgets bind the strategies that loop over model calls
                  max_steps=settings.max_steps if strategy == "agent" else None,
                  max_tokens=settings.max_tokens if strategy in _TOKEN_BUDGETED else None,
                  embeddings=embeddings, api_host=endpoint,
                  commit=ragkit_commit(),
                  database=str(db.resolve()), index=index_label(db),
                  database_pages=state.pages if state else None, database_sha256=state.sha256 if state else None,
                  database_fingerprint=state.fingerprint if state else None,
                  converter=state.converter if state else None,
                  # questions given in memory (run_batch) have no file: the digest still says which they were
                  input=str(input_path) if input_path is not None else "(in memory)",
                  input_path=str(Path(input_path).resolve()) if input_path is not None else None,
                  questions_sha256=questions_sha256(rows),
                  engine="offline-extractive" if offline else None, checklists_by=checklist_authors(rows))
    run.notes = quoting_notes(run)
    return run


# the strategies --max-tokens binds (ragkit.answer: the agent's and arag's loops; --max-steps binds the agent's)
_TOKEN_BUDGETED = frozenset({"agent", "arag"})
