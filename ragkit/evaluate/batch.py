"""`rag batch` and `rag eval`: parallel, resumable evaluation runs (DESIGN §4, §5).

INTERFACE (owned by the batch work; cli/demo rely on it):

    run_batch(input_csv: Path, settings: Settings, *, strategy="agent", enable_rl=False, resume=False,
              progress=True, optimize=False, holdout=None, validate=None) -> BatchReport
    run_eval(results_csv: Path, settings: Settings, *, progress=True) -> BatchReport
    print_batch_report(report: BatchReport, console) -> None
    BatchReport: results_path, summary_path, rows, errors (list[str]; non-empty => exit 1), usage, wall_s
    rescore_row(row: dict, answer: Answer, settings: Settings) -> dict   # used by optimize after a re-ask

Additions: run_batch(..., answer_fn=None, index=None) (answer_fn defaults to agent.ask; index to
open_index(settings.db)); run_eval(..., index=None); BatchReport also carries kind, questions, skipped_blank,
resumed, answer_usage, judge_usage, checkpoint_path, checkpoint_kept, optimize (OptimizeReport), summary (the
summary CSV's rows); result_columns(); Checkpoint, checkpoint_path(). Result rows handed to the optimizer carry
`_pos`, the row's position in the input CSV (0-based data row); it is not written.

How a batch runs
----------------
1. The input CSV is read strictly (scoring.read_questions: encodings, separators, near-miss column names,
   extra fields, Page numbers) and every Reference Document is checked against the database before any
   question is asked (scoring.check_references); rows with an empty `Question` are skipped and counted.
   Rows are identified by position and question, so duplicate questions are two rows.
2. Each question runs in a pool of `settings.workers` threads: answer (agent.ask), then, in the same
   worker, the scoring: reference metrics over the pages of the index at that moment, the checklist judge,
   the rubric judge, Contain-Match and LLM-Accuracy (when the row has ground truth). A judge failure is
   recorded in `Judge Error` and never loses the answer.
3. Every finished row is appended at once (flushed and fsync'ed) to a checkpoint, one JSON line per row
   with its input position, its question, the answer and the scored columns.
   Finished rows are not kept in memory: they are read back from the checkpoint at the end.
4. After the last row, only with `optimize`/`enable_rl` (a plain run changes neither the database nor the
   input CSV; it counts the missed pages and says which flag would optimize them): ragkit.evaluate.heldout splits the
   answerable rows (`holdout`, default 0.25) or reads `validate`, the folder optimizer (ragkit.optimize,
   DESIGN §6) works on the training rows' misses, and every measured question is asked again for Ref Recall
   before/after per split. Then `results/<stem>_results_YYYYMMDD_HHMMSS.csv` and `..._summary.csv`, written atomically, never over
   an existing file.

Results columns: the input columns (an input that already has result columns, e.g. a results CSV, gets them
recomputed, not repeated), then DESIGN §4's fifteen in order (RAG Answer ... Evaluation Reason), then
Checklist F1/Accuracy/Specificity/TN, Ref F1/Accuracy, Opt Ref * (when `Optimized Reference Document`
exists), the rubric judge's Judge * columns, Contain Match, LLM Accuracy, Refused, Pages Read, Steps,
Input Tokens, Output Tokens, Cost USD (empty = unknown price), Latency ms, Judge Input/Output Tokens,
Judge Cost USD, Attempts (--enable-rl only), Error (the answer failed: retried on resume), Judge Error.
Undefined ratios are empty cells; multi-valued cells hold one path per line.

The checkpoint rule (resume after Ctrl-C or kill -9)
----------------------------------------------------
- Path: `<results>/.checkpoints/<input stem>-<key>.jsonl`, where key hashes the input's absolute path,
  its content (every column except `Optimized Reference Document`, which the optimizer itself rewrites),
  the database path, strategy, provider, endpoint, model and judge model. So the same command again finds
  it; any change to those starts a new run.
- A checkpoint that exists is continued automatically (`--resume` only insists: it fails when there is
  nothing to resume). Finished rows are not asked again; rows that failed (`Error`) are asked again; rows
  whose answer is fine but whose judging failed (`Judge Error`) are judged again without asking.
- A torn last line (kill -9 mid-write) is ignored and cut off; a checkpoint in use by another process is
  refused (file lock).
- When a run completes with no error, its checkpoint is deleted (the results CSV holds everything), so the
  next identical command starts fresh and writes new timestamped files. A run with errors keeps it, so
  the same command retries only the failed rows.

`rag eval RESULTS.csv` re-scores the `RAG Answer` / `Retrieved Files` of an existing results CSV (another
judge, provider or database) without asking again, into `<results stem>_eval_YYYYMMDD_HHMMSS.csv` and its
`_summary.csv`. It writes no checkpoint (it asks nothing; rerun it to retry).
"""

from __future__ import annotations

import glob
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragkit.core.config import Settings
from ragkit.core.csvio import (
    read_csv,
    split_multi,
    summary_path_for,
    timestamped_path,
)
from ragkit.core.csvio import write_csv as _write_csv
from ragkit.core.errors import RagError, UsageError
from ragkit.core.models import Answer, Source, Usage
from ragkit.core.paths import page_number
from ragkit.evaluate import BATCH_STRATEGIES
from ragkit.evaluate.checkpoint import (  # noqa: F401 - Checkpoint and checkpoint_path are part of batch's API
    _CK_VERSION,
    CHECKPOINT_DIR,
    Checkpoint,
    _DaemonPool,
    checkpoint_path,
)
from ragkit.evaluate.heldout import DEFAULT_HOLDOUT, SPLIT_COLUMN
from ragkit.evaluate.retrieval import SEARCH_COLUMNS
from ragkit.evaluate.scoring import (  # noqa: F401 - re-exported: the columns are part of batch's API
    _OUTPUT_SET,
    ATTEMPTS,
    CHECKLIST,
    CHECKLIST_MORE,
    CORE_COLUMNS,
    DETAIL_COLUMNS,
    GROUND_TRUTH,
    JUDGE_COLUMNS,
    OPT_REF_COLUMNS,
    OPTIMIZED,
    OUTPUT_COLUMNS,
    QUESTION,
    REF_MORE,
    REFERENCE,
    SUMMARY_METRICS,
    TAIL_COLUMNS,
    Scorer,
    _cost_cell,
    _fmt,
    _one_line,
    _score,
    _short,
    answer_columns,
    check_references,
    known_columns,
    read_questions,
)


def result_columns(input_columns: list[str], *, optimized: bool, attempts: bool, split: bool = False) -> list[str]:
    """The results CSV's columns: input columns, then DESIGN §4's, then the further ones."""
    cols = list(input_columns)
    if optimized and OPTIMIZED not in cols:
        pos = cols.index(REFERENCE) + 1 if REFERENCE in cols else len(cols)
        cols.insert(pos, OPTIMIZED)
    cols += CORE_COLUMNS + CHECKLIST_MORE + REF_MORE
    if optimized:
        cols += OPT_REF_COLUMNS
    cols += JUDGE_COLUMNS + DETAIL_COLUMNS
    if split:
        cols.append(SPLIT_COLUMN)
    if attempts:
        cols.append(ATTEMPTS)
    return cols + TAIL_COLUMNS


@dataclass
class OptimizeOptions:
    """What `rag batch` may change: nothing unless `optimize` (one pass of copies) or `enable_rl` (the loop with
    rollback). Copies are made for the training questions' misses only; `holdout` of the answerable questions
    (a deterministic split) or the questions of a `validate` CSV measure them."""

    optimize: bool = False
    enable_rl: bool = False
    holdout: float | None = None  # None: DEFAULT_HOLDOUT when optimizing without --validate
    validate: Path | None = None
    validate_items: list[tuple[str, str]] = field(default_factory=list)  # (question, reference), read early

    @property
    def active(self) -> bool:
        return self.optimize or self.enable_rl


# -- report -------------------------------------------------------------------------------------------
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
    answer_usage: Usage = field(default_factory=Usage)
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


# -- answers <-> plain data ---------------------------------------------------------------------------
def answer_to_dict(answer: Answer) -> dict:
    return asdict(answer)


def answer_from_dict(d: dict) -> Answer:
    d = dict(d)
    d["sources"] = [Source(**s) for s in d.get("sources") or []]
    d["usage"] = Usage(**(d.get("usage") or {}))
    known = Answer.__dataclass_fields__
    return Answer(**{k: v for k, v in d.items() if k in known})


def _usage_from(d: dict | None) -> Usage:
    return Usage(**d) if d else Usage()




# -- the batch ----------------------------------------------------------------------------------------
@dataclass
class _Job:
    pos: int  # 0-based position among the input's data rows
    question: str
    row: dict  # the input columns
    mode: str = "ask"  # "ask" | "judge" (answer kept from the checkpoint, judging failed before)
    prior: dict | None = None  # the checkpoint record a "judge" job starts from


def _run_job(job: _Job, scorer: Scorer, asker: Callable[[str], Answer]) -> dict:
    """Answer and score one row; never raises (a failure becomes the record's error)."""
    try:
        if job.mode == "judge" and job.prior is not None:
            answer = answer_from_dict(job.prior["answer"])
            ref_cols = {k: v for k, v in job.prior["cols"].items() if k.startswith(("Ref ", "Opt Ref "))}
            cols, usage, problems = _score(scorer, job.row, answer, ref_cols=ref_cols)
        else:
            answer = asker(job.question)
            universe = scorer.universe() if scorer.has_ref and not answer.error else None
            cols, usage, problems = _score(scorer, job.row, answer, universe=universe)
        return {"v": _CK_VERSION, "i": job.pos, "q": job.question, "answer": answer_to_dict(answer),
                "cols": {k: _jsonable(v) for k, v in cols.items()}, "error": answer.error or None,
                "judge_error": "; ".join(problems) or None, "judge_usage": asdict(usage),
                "opt": str(job.row.get(OPTIMIZED) or "")}
    except Exception as e:  # noqa: BLE001 - a bug in one row must not stop the batch
        from ragkit.core.llm import scrub

        msg = scrub(f"{type(e).__name__}: {_one_line(e)}", scorer.settings.api_key)
        answer = Answer(question=job.question, answer="", refused=False, error=msg)
        return {"v": _CK_VERSION, "i": job.pos, "q": job.question, "answer": answer_to_dict(answer),
                "cols": answer_columns(answer), "error": msg, "judge_error": None, "judge_usage": None,
                "opt": str(job.row.get(OPTIMIZED) or "")}


def _slim(rec: dict) -> dict:
    """What the end of the run needs of a checkpoint record (the answer's sources and excerpts are not)."""
    return {"cols": rec.get("cols") or {}, "error": rec.get("error"), "judge_error": rec.get("judge_error"),
            "opt": rec.get("opt") or "", "answer_usage": (rec.get("answer") or {}).get("usage"),
            "judge_usage": rec.get("judge_usage")}


def _jsonable(v: Any) -> Any:
    return v if v is None or isinstance(v, str | int | float | bool) else str(v)


def run_batch(
    input_csv: Path,
    settings: Settings,
    *,
    strategy: str = "agent",
    enable_rl: bool = False,
    resume: bool = False,
    progress: bool = True,
    answer_fn: Callable[..., Answer] | None = None,
    index: Any = None,
    optimize: bool = False,
    holdout: float | None = None,
    validate: Path | None = None,
    k: int = 10,
) -> BatchReport:
    """Answer and score every question of `input_csv`; see the module docstring.

    Read-only unless `optimize` (one pass of copies) or `enable_rl` (the loop with rollback): then the
    training questions' misses drive copies and `holdout` (default 0.25) / `validate` measure them.

    `answer_fn(question, settings, *, strategy, index, provider) -> Answer` defaults to agent.ask (tests and
    benchmarks may pass another). Raises RagError for unusable input (one line); row failures go to
    `report.errors` and the other rows still run. KeyboardInterrupt propagates after the pool is stopped;
    finished rows are in the checkpoint.
    """
    t0 = time.monotonic()
    input_csv = Path(input_csv)
    if strategy not in BATCH_STRATEGIES:
        raise UsageError(f"unknown strategy {strategy!r}: choose one of {', '.join(BATCH_STRATEGIES)}")
    if strategy == "search" and (optimize or enable_rl):
        raise UsageError("--strategy search measures retrieval alone: it does not run --optimize or --enable-rl")
    opts = _options(optimize, enable_rl, holdout, validate)
    df = read_questions(input_csv)
    input_cols = [c for c in df.columns if c not in _OUTPUT_SET]
    if opts.active and REFERENCE not in input_cols:
        flag = "--enable-rl" if enable_rl else "--optimize"
        raise UsageError(f"{flag} needs ground truth: {input_csv} has no {REFERENCE!r} column")
    records = df[input_cols].to_dict("records")
    jobs: list[_Job] = []
    blank = 0
    for pos, rec in enumerate(records):
        q = str(rec.get(QUESTION) or "").strip()
        if not q:
            blank += 1
            continue
        jobs.append(_Job(pos=pos, question=q, row=rec))
    if not jobs:
        raise RagError(f"{input_csv}: no questions (every one of its {len(records)} rows has an empty "
                       f"{QUESTION!r})")

    from ragkit.core.llm import get_provider

    provider = get_provider(settings)
    if index is None:
        from ragkit.search import open_index

        index = open_index(Path(settings.db), progress=progress)
    if not index.pages():  # one clear line instead of the same error on every row
        raise RagError(f"{settings.db}: the database has no pages; run `rag ingest SOURCE --db {settings.db}` first")
    # Every question ranks on the same index state: a search ranks by keywords while its candidates still lack
    # vectors, so without this the first rows of a fresh database were ranked differently from the later
    # ones and a rerun scored differently. Cached: once per database, then nothing to do.
    index.ensure_embeddings(progress=progress)
    # every reference must exist before a single question is asked (and paid for)
    check_references(records, Path(settings.db), input_csv)
    if opts.validate is not None:
        vdf = read_questions(opts.validate)
        if REFERENCE not in vdf.columns:
            raise RagError(f"{opts.validate}: --validate needs a {REFERENCE!r} column (the pages to find)")
        vrecords = vdf.to_dict("records")
        check_references(vrecords, Path(settings.db), opts.validate)
        opts.validate_items = [(str(r.get(QUESTION) or "").strip(), str(r.get(REFERENCE) or ""))
                               for r in vrecords if str(r.get(QUESTION) or "").strip()]
    scorer = Scorer.create(settings, input_cols, index=index)
    if strategy == "search":  # retrieval alone: ranking metrics, no judge, no optimizer (ragkit.evaluate.retrieval)
        from ragkit.evaluate.retrieval import search_answer_fn

        answer_fn, scorer.search_k = answer_fn or search_answer_fn(k), k
    if answer_fn is None:
        from ragkit.answer import ask as answer_fn

    def asker(question: str) -> Answer:  # the run's one way to ask: the batch, and the optimizer's re-asks
        return answer_fn(question, settings, strategy=strategy, index=index, provider=provider)

    ck = Checkpoint(checkpoint_path(settings, input_csv, df[input_cols],
                                    strategy=f"search-k{k}" if strategy == "search" else strategy))
    report = BatchReport(kind="batch", input_path=input_csv, skipped_blank=blank, checkpoint_path=ck.path,
                         provider=settings.provider, model=provider.model, judge_model=scorer.judge.model,
                         strategy=f"search (k={k})" if strategy == "search" else strategy)
    others = [p for p in ck.path.parent.glob(f"{glob.escape(ck.path.name.rsplit('-', 1)[0])}-*.jsonl") if p != ck.path] \
        if ck.path.parent.is_dir() else []
    if resume and not ck.path.is_file():
        raise RagError(f"{input_csv}: no interrupted run to resume (no checkpoint {ck.path}); a run is resumed "
                       "only with the same input content, database, strategy, provider and models"
                       + (f" ({len(others)} other unfinished run(s) of this input in {ck.path.parent})"
                          if others else ""))
    if others and not ck.path.is_file() and progress:
        print(f"note: {len(others)} unfinished run(s) of {input_csv.name} with other content or settings are in "
              f"{ck.path.parent}; starting a new run", file=sys.stderr)
    ck.open()  # lock first, then read: a second process cannot interleave
    try:
        return _run(report, ck, jobs, input_cols, scorer, asker, settings, strategy, opts, progress, t0)
    finally:
        ck.close()


def _options(optimize: bool, enable_rl: bool, holdout: float | None, validate: Path | None) -> OptimizeOptions:
    if optimize and enable_rl:
        raise UsageError("--optimize and --enable-rl are exclusive: --optimize makes one pass of copies, "
                         "--enable-rl re-asks and keeps only the copies that help")
    if not (optimize or enable_rl) and (holdout is not None or validate is not None):
        raise UsageError("--holdout and --validate measure an optimization: add --optimize or --enable-rl")
    if holdout is not None and validate is not None:
        raise UsageError("use --holdout F or --validate CSV, not both")
    if holdout is not None and not 0 <= holdout < 1:
        raise UsageError(f"--holdout must be a fraction in [0, 1), got {holdout}")
    if validate is None and (optimize or enable_rl) and holdout is None:
        holdout = DEFAULT_HOLDOUT
    return OptimizeOptions(optimize=optimize, enable_rl=enable_rl, holdout=holdout,
                           validate=Path(validate) if validate is not None else None)


def _run(report: BatchReport, ck: Checkpoint, jobs: list[_Job], input_cols: list[str], scorer: Scorer,
         asker: Callable[[str], Answer], settings: Settings, strategy: str, opts: OptimizeOptions,
         progress: bool, t0: float) -> BatchReport:
    from ragkit.core.progress import progress_bar

    # Finished rows live in the checkpoint, not in memory (a long run stays flat); they are read back at the end.
    done: set[int] = set()
    todo: list[_Job] = []
    running = _Running()
    prior = ck.load()
    for job in jobs:
        rec = prior.get(job.pos)
        if rec is None or rec.get("q") != job.question or rec.get("error"):
            todo.append(job)  # new, or failed before: ask (again)
        elif rec.get("judge_error"):
            job.mode, job.prior = "judge", rec
            todo.append(job)
        else:
            done.add(job.pos)
            running.add(rec)
    report.resumed = len(done)
    del prior

    bar = progress_bar(total=len(jobs), initial=len(done), desc="batch", unit="q", file=sys.stderr,
                       disable=not progress)
    if done and progress:
        bar.write(f"resuming: {len(done)} finished rows from {ck.path}", file=sys.stderr)
    bar.set_postfix_str(running.text(), refresh=False)

    workers = max(1, settings.workers)
    pool = _DaemonPool(min(workers, max(1, len(todo))))
    pending = deque(todo)
    inflight: dict[Future, _Job] = {}
    try:
        while pending or inflight:
            while pending and len(inflight) < 2 * workers:  # a short queue: memory stays flat, Ctrl-C is quick
                job = pending.popleft()
                inflight[pool.submit(_run_job, job, scorer, asker)] = job
            finished, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
            # save every finished row before re-raising what a worker raised (only BaseException gets here)
            for fut in sorted(finished, key=lambda f: f.exception() is not None):
                job = inflight.pop(fut)
                rec = fut.result()
                ck.append(rec)
                running.add(rec)
                done.add(job.pos)
                job.prior = None
                bar.update(1)
                bar.set_postfix_str(running.text(), refresh=False)
    except BaseException:
        pool.shutdown(cancel_futures=True)
        bar.close()
        if progress:
            print(f"stopped: {len(done)} of {len(jobs)} rows are saved in {ck.path}; run the same command "
                  "again to continue", file=sys.stderr)
        raise
    pool.shutdown()
    bar.close()

    # assemble in input order, from the checkpoint (the last record of each row wins)
    final = ck.load()
    rows: list[dict] = []
    for job in jobs:
        rec = final.get(job.pos)
        if rec is None or rec.get("q") != job.question:
            raise RagError(f"{ck.path}: row {job.pos + 2} is missing from the checkpoint; run the same command "
                           "again to answer it")
        rec = _slim(rec)
        report.answer_usage.add(_usage_from(rec.get("answer_usage")))
        report.judge_usage.add(_usage_from(rec.get("judge_usage")))
        cols = dict(rec["cols"])
        opt_now = str(job.row.get(OPTIMIZED) or "")
        if opt_now != (rec.get("opt") or "") and scorer.has_ref and not rec.get("error"):
            # the optimizer rewrote `Optimized Reference Document` since this row ran: score against it now
            for c in OPT_REF_COLUMNS:
                cols.pop(c, None)
            cols.update(scorer.reference_columns(job.row, split_multi(cols.get("Retrieved Files", ""))))
        rows.append({**job.row, **cols, "_pos": job.pos})

    # the folder optimizer (DESIGN §6): only when asked; a plain batch changes nothing it evaluates
    if opts.active:
        from ragkit.evaluate.heldout import optimize_and_measure

        rows = optimize_and_measure(report, rows, scorer, asker, settings, opts, progress)
    elif scorer.has_ref:
        report.missed_pages, report.missed_rows = _misses(rows)

    for row in rows:
        pos = row.pop("_pos", None)
        label = f"row {pos + 2}" if isinstance(pos, int) else "row"
        q = _short(str(row.get(QUESTION) or ""), 50)
        if row.get("Error"):
            report.errors.append(f"{label} {q!r}: {row['Error']}")
        if row.get("Judge Error"):
            report.errors.append(f"{label} {q!r}: {row['Judge Error']}")

    optimized = OPTIMIZED in input_cols or any(str(r.get(OPTIMIZED) or "").strip() for r in rows)
    columns = result_columns(input_cols, optimized=optimized, attempts=opts.enable_rl,
                             split=report.measure is not None and report.measure.holdout is not None)
    if strategy == "search":
        columns[columns.index("Ref Accuracy") + 1 : columns.index("Ref Accuracy") + 1] = SEARCH_COLUMNS
    report.rows = rows
    report.questions = len(rows)
    report.usage = Usage()
    report.usage.add(report.answer_usage)
    report.usage.add(report.judge_usage)
    report.wall_s = time.monotonic() - t0
    _write_outputs(report, columns, stem=report.input_path.stem, kind="results", results_dir=settings.results)
    if report.errors:
        report.checkpoint_kept = True
    else:
        ck.finish()
    return report


def _misses(rows: list[dict]) -> tuple[int, int]:
    """(reference pages missed, questions that missed one) over the answered rows: Ref FN summed."""
    from ragkit.evaluate.metrics import parse_number

    pages = questions = 0
    for r in rows:
        fn = parse_number(r.get("Ref FN"))
        if fn and not r.get("Error"):
            pages += int(fn)
            questions += 1
    return pages, questions


class _Running:
    """Running means for the progress bar."""

    def __init__(self) -> None:
        self.sums = {"Ref Recall": [0.0, 0], "Checklist Recall": [0.0, 0]}
        self.errors = 0

    def add(self, rec: dict) -> None:
        from ragkit.evaluate.metrics import parse_number

        cols = rec.get("cols") or {}
        for k, acc in self.sums.items():
            v = parse_number(cols.get(k))
            if v is not None:
                acc[0] += v
                acc[1] += 1
        if rec.get("error") or rec.get("judge_error"):
            self.errors += 1

    def text(self) -> str:
        out = []
        for k, label in (("Ref Recall", "ref_recall"), ("Checklist Recall", "checklist_recall")):
            s, n = self.sums[k]
            out.append(f"{label}={s / n:.2f}" if n else f"{label}=-")
        if self.errors:
            out.append(f"errors={self.errors}")
        return " ".join(out)


# -- output -------------------------------------------------------------------------------------------
def _write_outputs(report: BatchReport, columns: list[str], *, stem: str, kind: str, results_dir: Path) -> None:
    from ragkit.evaluate.metrics import SUMMARY_COLUMNS, format_row, summarize, totals_rows

    table = [{c: _fmt(r.get(c)) for c in columns} for r in report.rows]
    report.rows = table  # exactly what the CSV holds (every column; None -> "")
    df = pd.DataFrame(table, columns=columns)
    path = timestamped_path(Path(results_dir), stem, kind)
    _write_csv(df, path)
    report.results_path = path

    metric_cols = [c for c in SUMMARY_METRICS if c in columns]
    ref_col = REFERENCE if REFERENCE in columns else None
    summary = [format_row(r) for r in summarize(report.rows, metric_cols, reference_column=ref_col)]
    summary += [format_row(r) for r in _refusal_rows(report.rows, ref_col)]
    if report.measure is not None:
        summary += [format_row(r) for r in report.measure.summary_rows()]
    answered = sum(1 for r in report.rows if not r.get("Error"))
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
    for r in totals:
        if r["Metric"] == "Total cost (USD)" and report.usage.cost_usd is None:
            r["Total"] = "unknown"  # some model has no price: never show 0
    summary += totals
    extra: list[tuple[str, Any]] = [
        ("Answered", answered),
        ("Answer errors", sum(1 for r in report.rows if r.get("Error"))),
        ("Judge errors", sum(1 for r in report.rows if r.get("Judge Error"))),
        ("Resumed from checkpoint", report.resumed if kind == "results" else None),
        ("Answer input tokens", report.answer_usage.input_tokens),
        ("Answer output tokens", report.answer_usage.output_tokens),
        ("Answer cost (USD)", _cost_total(report.answer_usage.cost_usd)),
        ("Judge input tokens", report.judge_usage.input_tokens),
        ("Judge output tokens", report.judge_usage.output_tokens),
        ("Judge cost (USD)", _cost_total(report.judge_usage.cost_usd)),
        ("Provider", report.provider),
        ("Model", report.model),
        ("Judge model", report.judge_model),
        ("Strategy", report.strategy or None),
    ]
    if report.optimize is not None:
        extra += list(report.optimize.summary().items())
    if report.missed_pages:
        extra.append(("Reference pages missed (not optimized)", report.missed_pages))
    summary += [{"Metric": k, "Mean": "", "Micro": "", "Total": v, "Rows": "", "Covers": ""}
                for k, v in extra if v is not None]
    report.summary = summary
    sdf = pd.DataFrame(summary, columns=list(SUMMARY_COLUMNS))
    spath = summary_path_for(path)
    _write_csv(sdf, spath)
    report.summary_path = spath


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


def _cost_total(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:.6f}"


# -- rag eval -----------------------------------------------------------------------------------------
def _answer_from_row(row: dict) -> Answer:
    from ragkit.core.text import is_refusal
    from ragkit.evaluate.metrics import parse_number

    text = str(row.get("RAG Answer") or "")
    refused_cell = parse_number(row.get("Refused"))
    refused = bool(refused_cell) if refused_cell is not None else is_refusal(text)
    sources = [Source(path=p, page=page_number(p) or 0) for p in split_multi(str(row.get("Retrieved Files") or ""))]
    cost = parse_number(row.get("Cost USD"))
    usage = Usage(input_tokens=int(parse_number(row.get("Input Tokens")) or 0),
                  output_tokens=int(parse_number(row.get("Output Tokens")) or 0), cost_usd=cost)
    return Answer(question=str(row.get(QUESTION) or ""), answer=text, refused=refused, sources=sources,
                  steps=int(parse_number(row.get("Steps")) or 0), usage=usage,
                  latency_ms=parse_number(row.get("Latency ms")) or 0.0,
                  pages_read=split_multi(str(row.get("Pages Read") or "")),
                  error=str(row.get("Error") or "").strip() or None)


def _eval_job(row: dict, scorer: Scorer) -> tuple[dict, Usage]:
    answer = _answer_from_row(row)
    try:
        cols, usage, _ = _score(scorer, row, answer)
    except Exception as e:  # noqa: BLE001 - one row's failure must not stop the others
        from ragkit.core.llm import scrub

        return {"Judge Error": scrub(f"{type(e).__name__}: {_one_line(e)}", scorer.settings.api_key)}, Usage()
    # the answer's own figures come from the batch that produced it, not from this re-scoring
    for k in ("Steps", "Input Tokens", "Output Tokens", "Cost USD", "Latency ms", "Pages Read", "Refused",
              ATTEMPTS, SPLIT_COLUMN):
        if k in row:
            cols[k] = row[k]
    return cols, usage


def run_eval(results_csv: Path, settings: Settings, *, progress: bool = True, index: Any = None) -> BatchReport:
    """Re-score an existing results CSV without asking again (another judge, provider or database)."""
    from ragkit.core.progress import progress_bar

    t0 = time.monotonic()
    results_csv = Path(results_csv)
    df = read_csv(results_csv, required=(QUESTION, "RAG Answer"), known=known_columns())
    input_cols = [c for c in df.columns if c not in _OUTPUT_SET]
    has_attempts = ATTEMPTS in df.columns
    rows_in = df.to_dict("records")
    jobs = [(pos, r) for pos, r in enumerate(rows_in) if str(r.get(QUESTION) or "").strip()]
    if not jobs:
        raise RagError(f"{results_csv}: no rows with a question to re-score")
    needs_index = REFERENCE in input_cols
    if index is None and needs_index:
        from ragkit.search import open_index

        index = open_index(Path(settings.db), progress=progress)
    scorer = Scorer.create(settings, input_cols, index=index)
    report = BatchReport(kind="eval", input_path=results_csv, skipped_blank=len(rows_in) - len(jobs),
                         provider=settings.provider, model="", judge_model=scorer.judge.model)

    out: dict[int, dict] = {}
    bar = progress_bar(total=len(jobs), desc="eval", unit="row", file=sys.stderr, disable=not progress)
    pool = _DaemonPool(min(max(1, settings.workers), len(jobs)))
    try:
        futs = {pool.submit(_eval_job, {c: r[c] for c in input_cols} | _kept(r), scorer): (pos, r)
                for pos, r in jobs}
        for fut in _as_completed(futs):
            pos, r = futs[fut]
            cols, usage = fut.result()
            report.judge_usage.add(usage)
            base = {c: r[c] for c in input_cols}
            out[pos] = {**base, **{k: r.get(k, "") for k in ("RAG Answer", "Retrieved Files", "Error")}, **cols,
                        "_pos": pos}
            bar.update(1)
    except BaseException:
        pool.shutdown(cancel_futures=True)
        bar.close()
        raise
    pool.shutdown()
    bar.close()

    rows = [out[pos] for pos, _ in jobs]
    for row in rows:
        pos = row.pop("_pos")
        q = _short(str(row.get(QUESTION) or ""), 50)
        if row.get("Error"):
            report.errors.append(f"row {pos + 2} {q!r}: no answer to score (the batch failed: {row['Error']})")
        if row.get("Judge Error"):
            report.errors.append(f"row {pos + 2} {q!r}: {row['Judge Error']}")
    report.rows = rows
    report.questions = len(rows)
    report.usage.add(report.judge_usage)
    report.wall_s = time.monotonic() - t0
    columns = result_columns(input_cols, optimized=OPTIMIZED in input_cols, attempts=has_attempts,
                             split=SPLIT_COLUMN in df.columns)
    _write_outputs(report, columns, stem=results_csv.stem, kind="eval", results_dir=settings.results)
    return report


def _kept(row: dict) -> dict:
    """The answer columns of a results row that re-scoring reads."""
    keys = ("RAG Answer", "Retrieved Files", "Refused", "Pages Read", "Steps", "Input Tokens", "Output Tokens",
            "Cost USD", "Latency ms", "Error", ATTEMPTS, SPLIT_COLUMN)
    return {k: row[k] for k in keys if k in row}


def _as_completed(futs: Iterable[Future]):
    pending = set(futs)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from finished


# -- printing -----------------------------------------------------------------------------------------
# what a user needs first (DESIGN §5); TN and accuracy stay in the CSVs: over a whole database they say little
_HEADLINE = (
    ("Ref Recall", "Ref Recall"),
    *((c, c) for c in SEARCH_COLUMNS),  # only --strategy search computes them; absent columns are not shown
    ("Checklist Recall", "Checklist Recall"),
    ("Checklist Precision", "Checklist Precision"),
    ("Judge Passed", "Judge pass rate"),
    ("Refusal Rate Answerable", "Refused, answerable"),
    ("Refusal Rate Unanswerable", "Refused, unanswerable"),
)


def print_batch_report(report: BatchReport, console) -> None:
    """Key metrics, totals of tokens, cost and wall time, errors, and the paths of the files written."""
    from rich.table import Table

    from ragkit.evaluate.metrics import parse_number

    title = "rag eval" if report.kind == "eval" else "rag batch"
    by_metric = {r.get("Metric"): r for r in report.summary}
    table = Table(title=f"{title}: {report.questions} rows", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("mean", justify="right")
    table.add_column("micro", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("covers")
    headline = list(_HEADLINE)
    if report.optimize is not None:  # only when this run optimized, and said so
        headline.append(("Opt Ref Recall", "Opt Ref Recall (after optimize)"))
    judged = by_metric.get("Judge Passed") or {}
    if not parse_number(judged.get("Rows")) or judged.get("Covers") == "unanswerable":
        # no judge scored an answer (offline): the rule's refusals alone would read as a 100% pass rate
        headline = [("Contain Match", "Contain-Match") if h[0] == "Judge Passed" else h for h in headline]
    shown = 0
    for m, label in headline:
        r = by_metric.get(m)
        if r is None or parse_number(r.get("Rows")) in (None, 0.0):
            continue
        table.add_row(label, _num(r.get("Mean")), _num(r.get("Micro")), str(r.get("Rows")),
                      str(r.get("Covers") or ""))
        shown += 1
    if shown:
        console.print(table)
    elif report.kind == "batch":
        console.print("no ground truth columns: answers only, no metrics", highlight=False)

    u = report.usage
    if u.cost_usd is None:
        cost = "unknown (a model without a price)"
    elif report.provider == "offline" and not u.calls:
        cost = "$0 (offline: no model calls)"
    else:
        cost = f"${u.cost_usd:.4f}"
    lines = [f"rows: {report.questions}"
             + (f", resumed from checkpoint: {report.resumed}" if report.resumed else "")
             + (f", blank rows skipped: {report.skipped_blank}" if report.skipped_blank else ""),
             f"tokens: {u.input_tokens:,} in / {u.output_tokens:,} out"
             + (f" (judges: {report.judge_usage.input_tokens + report.judge_usage.output_tokens:,})"
                if report.judge_usage.calls or report.judge_usage.input_tokens else ""),
             f"cost: {cost}",
             f"wall time: {report.wall_s:.1f} s"]
    for line in lines:
        console.print(line, highlight=False)
    if report.optimize is not None:
        from ragkit.optimize import print_optimize_report

        print_optimize_report(report.optimize, console)
    if report.measure is not None:
        for line in report.measure.lines():
            console.print(f"optimize: {line}", highlight=False, markup=False, soft_wrap=True)
    if report.missed_pages:
        console.print(f"{report.missed_pages} reference page(s) were missed in {report.missed_rows} question(s); "
                      "nothing was changed: --optimize copies them where the agent would look, --enable-rl keeps "
                      "only the copies that help", highlight=False, markup=False, soft_wrap=True)
    if report.errors:
        console.print(f"[red]{len(report.errors)} error(s)[/red]:", highlight=False)
        for e in report.errors[:10]:
            console.print(f"  {e}", highlight=False, markup=False)
        if len(report.errors) > 10:
            console.print(f"  ... {len(report.errors) - 10} more (see the Error / Judge Error columns)",
                          highlight=False)
        if report.checkpoint_kept and report.checkpoint_path is not None:
            console.print(f"run the same command again to retry the failed rows (checkpoint "
                          f"{report.checkpoint_path})", highlight=False, markup=False)
    if report.results_path:
        console.print(f"results: {report.results_path}", highlight=False, markup=False)
    if report.summary_path:
        console.print(f"summary: {report.summary_path}", highlight=False, markup=False)


def _num(v: Any) -> str:
    if v in (None, ""):
        return "-"
    try:
        return f"{float(v):.3f}"
    except (TypeError, ValueError):
        return str(v)
