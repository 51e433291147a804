"""`rag batch`: every question of a CSV answered in a thread pool and scored in the same worker, each finished
row appended to a checkpoint (Ctrl-C or kill -9 resumes without redoing a row), then the optional
optimization and the results files. docs/batch.md says how a run is keyed, resumed and written.

    run_batch(questions, settings, *, strategy="agent", provider=None, ...) -> BatchReport
`questions`: a CSV path, or in memory a list of question strings or of dicts (the CSV's columns) or a DataFrame."""

from __future__ import annotations

import glob
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragkit.core.config import Settings
from ragkit.core.csvio import (
    split_multi,
)
from ragkit.core.errors import Interrupted, RagError, UsageError
from ragkit.core.models import Answer, Usage
from ragkit.core.waiting import Heartbeat, waiting_text
from ragkit.core.workers import DaemonPool, uninterrupted
from ragkit.evaluate.checkpoint import (
    _CK_VERSION,
    Checkpoint,
    checkpoint_material,
    checkpoint_path,
    unfinished_note,
    write_material,
)
from ragkit.evaluate.heldout import DEFAULT_HOLDOUT
from ragkit.evaluate.results import (
    BatchReport,
    answer_from_dict,
    answer_to_dict,
    embeddings_label,
    result_columns,
    retrieval_depth,
    run_record,
    usage_from,
    write_outputs,
)
from ragkit.evaluate.runinfo import which_document_note
from ragkit.evaluate.scoring import (
    _OUTPUT_SET,
    OPT_REF_COLUMNS,
    OPTIMIZED,
    QUESTION,
    REFERENCE,
    Scorer,
    _one_line,
    _score,
    _short,
    answer_columns,
    check_questions,
    check_references,
    read_questions,
)
from ragkit.evaluate.strategies import BATCH_STRATEGIES
from ragkit.evaluate.summarization import task_of

IN_MEMORY = "(in memory)"  # what messages and the run record name as the input of questions given as data
IN_MEMORY_STEM = "questions"  # ... and the results files' stem


def read_input(questions: Any, encoding: str | None = None) -> tuple[Any, Path | None]:
    """(the question table as a CSV would be read: str cells, "" for empty; the CSV's path or None in memory).
    `questions`: a CSV path (Path or str), a DataFrame, or a sequence of question strings or of dicts whose keys
    are the CSV's columns. The in-memory forms go through the same column and cell checks as a CSV."""
    import pandas as pd

    if isinstance(questions, str | Path):
        path = Path(questions)
        return read_questions(path, encoding), path
    if isinstance(questions, pd.DataFrame):
        rows = questions.to_dict("records")
    elif isinstance(questions, Sequence):
        rows = []
        for i, item in enumerate(questions):
            if isinstance(item, str):
                rows.append({QUESTION: item})
            elif isinstance(item, dict):
                rows.append(dict(item))
            else:
                raise UsageError(f"questions[{i}]: a question string or a dict of the CSV's columns, got "
                                 f"{type(item).__name__}")
    else:
        raise UsageError(f"questions: a CSV path, a list of question strings or dicts, or a DataFrame; got "
                         f"{type(questions).__name__}")
    df = pd.DataFrame(rows).map(_cell) if rows else pd.DataFrame(columns=[QUESTION])
    if QUESTION not in df.columns:
        found = ", ".join(repr(str(c)) for c in df.columns) or "none"
        raise RagError(f"{IN_MEMORY}: missing column {QUESTION!r}; columns found: {found}")
    df.columns = [str(c) for c in df.columns]
    check_questions(df, IN_MEMORY)
    return df, None


def _cell(v: Any) -> str:
    """A value as the CSV reader gives it: text, "" for None / NaN, a whole float as an integer (pandas reads a
    `Page` column with an empty cell as floats: 9.0 is page 9)."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


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


# -- the batch ----------------------------------------------------------------------------------------
@dataclass
class _Job:
    pos: int  # 0-based position among the input's data rows
    question: str
    row: dict  # the input columns
    mode: str = "ask"  # "ask" | "judge" (answer kept from the checkpoint, judging failed before)
    prior: dict | None = None  # the checkpoint record a "judge" job starts from


def _run_job(job: _Job, scorer: Scorer, asker: Callable[..., Answer]) -> dict:
    """Answer and score one row; never raises (a failure becomes the record's error)."""
    try:
        if job.mode == "judge" and job.prior is not None:
            answer = answer_from_dict(job.prior["answer"])
            ref_cols = {k: v for k, v in job.prior["cols"].items() if k.startswith(("Ref ", "Opt Ref "))}
            cols, usage, problems = _score(scorer, job.row, answer, ref_cols=ref_cols)
        else:
            answer = asker(job.question, task_of(job.row))
            universe = scorer.universe() if scorer.has_ref and not answer.error else None
            cols, usage, problems = _score(scorer, job.row, answer, universe=universe)
        return {"v": _CK_VERSION, "i": job.pos, "q": job.question, "answer": answer_to_dict(answer),
                "cols": {k: _jsonable(v) for k, v in cols.items()}, "error": answer.error or None,
                "judge_error": "; ".join(problems) or None, "judge_usage": asdict(usage),
                "opt": str(job.row.get(OPTIMIZED) or "")}
    except Exception as e:  # noqa: BLE001 - a bug in one row must not stop the batch
        from ragkit.core.secrets import scrub

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


# how `rag batch` spells the run_batch arguments its messages name (errors.RagError)
BATCH_FLAGS = {"optimize=True": "--optimize", "enable_rl=True": "--enable-rl", "holdout=": "--holdout",
               "validate=": "--validate", "k=": "-k", "strategy='search'": "--strategy search"}


def check_k(strategy: str, k: int | None, settings: Settings) -> None:
    """A usage error when `k` is given to a strategy that does not take it, or is below 1 (before anything runs)."""
    if k is not None and strategy != "search":  # docs/commands.md: -k is the pages --strategy search retrieves
        raise UsageError(f"k= sets the pages strategy='search' retrieves; strategy={strategy!r} does not take it "
                         f"(it retrieves {retrieval_depth(strategy, settings, 0) or 'what it needs'} page(s) "
                         "per search): drop k=", flags={**BATCH_FLAGS, f"strategy={strategy!r}": f"--strategy {strategy}"})
    if k is not None and k < 1:
        raise UsageError(f"k= must be at least 1, got {k}", flags=BATCH_FLAGS)


def run_batch(
    input_csv: Path | str | Sequence[str | dict] | Any,
    settings: Settings,
    *,
    strategy: str = "agent",
    enable_rl: bool = False,
    resume: bool = False,
    progress: bool = False,
    answer_fn: Callable[..., Answer] | None = None,
    index: Any = None,
    provider: Any = None,
    optimize: bool = False,
    holdout: float | None = None,
    validate: Path | None = None,
    k: int | None = None,
    gates: Sequence[Any] | None = None,
) -> BatchReport:
    """Answer and score every question of `input_csv` (a CSV path, or the questions in memory: read_input);
    see the module docstring. `provider` answers instead of the one `settings` names (as `ask(provider=...)`,
    e.g. core.llm.MockModel); the judge stays the settings'. `progress`: lines on stderr (the CLI turns it on).

    Read-only unless `optimize` (one pass of copies) or `enable_rl` (the loop with rollback): then the
    training questions' misses drive copies and `holdout` (default 0.25) / `validate` measure them.

    `answer_fn(question, settings, *, strategy, index, provider) -> Answer` defaults to agent.ask (tests and
    benchmarks may pass another). Raises RagError for unusable input (one line); row failures go to
    `report.errors` and the other rows still run. KeyboardInterrupt propagates after the pool is stopped;
    finished rows are in the checkpoint.

    `gates`: quality gates, "METRIC=VALUE" or gates.Gate (`rag batch --fail-under`), checked before anything runs
    (a metric no run writes, a value out of its range: UsageError) and on the results written: the verdicts are in
    `report.gates` and the run record's "gates" (a failed one is not an error here; the CLI exits 3 on it).
    """
    from ragkit.evaluate.gates import as_gates, record_gates

    t0 = time.monotonic()
    gate_list = as_gates(gates)
    if strategy not in BATCH_STRATEGIES:
        raise UsageError(f"unknown strategy {strategy!r}: choose one of {', '.join(BATCH_STRATEGIES)}")
    if strategy == "search" and (optimize or enable_rl):
        raise UsageError("strategy='search' measures retrieval alone: it does not run optimize=True or enable_rl=True",
                         flags=BATCH_FLAGS)
    check_k(strategy, k, settings)
    opts = _options(optimize, enable_rl, holdout, validate)
    df, input_csv = read_input(input_csv, settings.csv_encoding)
    label = input_csv if input_csv is not None else IN_MEMORY  # what messages name
    if input_csv is None and opts.active:  # the optimizer writes its pages back into the question CSV
        raise UsageError("optimize=True and enable_rl=True write `Optimized Reference Document` back into the "
                         "question CSV: give run_batch a CSV path, not questions in memory")
    input_cols = [c for c in df.columns if c not in _OUTPUT_SET]
    if opts.active and REFERENCE not in input_cols:
        flag = "enable_rl=True" if enable_rl else "optimize=True"
        raise UsageError(f"{flag} needs ground truth: {label} has no {REFERENCE!r} column", flags=BATCH_FLAGS)
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
        raise RagError(f"{label}: no questions (every one of its {len(records)} rows has an empty "
                       f"{QUESTION!r})")

    given = provider is not None
    if provider is None:
        from ragkit.core.llm import get_provider

        provider = get_provider(settings)
    if index is None:
        from ragkit.search import open_index
        from ragkit.search.backend import require_database

        require_database(Path(settings.db))
        index = open_index(Path(settings.db), progress=progress)
    if not index.pages():  # one clear line instead of the same error on every row
        from ragkit.search.backend import no_pages_error

        raise no_pages_error(Path(settings.db))
    # Every question ranks on the same index state: a search ranks by keywords while its candidates still lack
    # vectors, so without this the first rows of a fresh database were ranked differently from the later
    # ones and a rerun scored differently. Cached: once per database, then nothing to do.
    index.ensure_embeddings(progress=progress)
    if strategy == "arag":  # its semantic_search's sentence vectors too, before the first question is timed
        from ragkit.search.sentences import sentence_index

        sentences = sentence_index(Path(settings.db))
        if sentences is not None:
            sentences.ensure(index.pages())
    # every reference must exist before a single question is asked (and paid for)
    check_references(records, Path(settings.db), label)
    if opts.validate is not None:
        vdf = read_questions(opts.validate, settings.csv_encoding)
        if REFERENCE not in vdf.columns:
            raise RagError(f"{opts.validate}: validate= needs a {REFERENCE!r} column (the pages to find)",
                           flags=BATCH_FLAGS)
        vrecords = vdf.to_dict("records")
        check_references(vrecords, Path(settings.db), opts.validate)
        opts.validate_items = [(str(r.get(QUESTION) or "").strip(), str(r.get(REFERENCE) or ""))
                               for r in vrecords if str(r.get(QUESTION) or "").strip()]
    scorer = Scorer.create(settings, input_cols, index=index)
    if strategy == "search":  # retrieval alone: ranking metrics, no judge, no optimizer (ragkit.evaluate.retrieval)
        from ragkit.evaluate.retrieval import DEFAULT_K, search_answer_fn

        k = k or DEFAULT_K
        answer_fn, scorer.search_k = answer_fn or search_answer_fn(k), k
    if answer_fn is None:
        from ragkit.answer import ask as answer_fn

    def asker(question: str, task: str = "qa") -> Answer:  # the run's one way to ask: the batch, the optimizer's re-asks
        extra = {"task": task} if task != "qa" else {}  # an injected answer_fn need not know tasks
        return answer_fn(question, settings, strategy=strategy, index=index, provider=provider, **extra)

    depth = retrieval_depth(strategy, settings, k or 0)
    embeddings = embeddings_label(index)
    material = checkpoint_material(settings, input_csv, df[input_cols],
                                   strategy=f"search-k{k}" if strategy == "search" else strategy, k=depth,
                                   embeddings=embeddings)
    if given:  # another answerer is another run: never resume the settings' provider's rows
        material.update(provider=provider.name, model=provider.model)
    ck = Checkpoint(checkpoint_path(settings, input_csv, df[input_cols], strategy=strategy, material=material))
    name = provider.name if given else settings.provider
    report = BatchReport(kind="batch", input_path=input_csv, skipped_blank=blank, checkpoint_path=ck.path,
                         provider=name, model=provider.model, judge_model=scorer.judge.model,
                         strategy=strategy)  # k has its own summary row, as in `rag eval` of these results
    report.run = run_record("batch", settings, strategy=strategy, provider=name, model=provider.model,
                            judge=scorer.judge, k=depth, input_path=input_csv,
                            offline=provider.is_offline and strategy != "search", rows=records,
                            embeddings=embeddings)
    others = [p for p in ck.path.parent.glob(f"{glob.escape(ck.path.name.rsplit('-', 1)[0])}-*.jsonl") if p != ck.path] \
        if ck.path.parent.is_dir() else []
    if resume and not ck.path.is_file():
        raise RagError(f"{label}: no interrupted run to resume (no checkpoint {ck.path}); a run is resumed "
                       "only with the same input content, database, strategy, provider, models and settings that change "
                       "answers (k, context tokens, max steps, max tokens, start pages, embeddings)"
                       + (f"; {unfinished_note(label, material, others, starting=False)}" if others else ""))
    if others and not ck.path.is_file() and progress:
        print(unfinished_note(label, material, others), file=sys.stderr)
    ck.existed = ck.path.is_file()  # an earlier run of this command was stopped: say what it left (even 0 rows)
    ck.open()  # lock first, then read: a second process cannot interleave
    write_material(ck.path, material)
    try:
        report = _run(report, ck, jobs, input_cols, scorer, asker, settings, strategy, opts, progress, t0,
                      provider=provider)
    finally:
        ck.close()
    record_gates(report, gate_list)
    return report


def _options(optimize: bool, enable_rl: bool, holdout: float | None, validate: Path | None) -> OptimizeOptions:
    if optimize and enable_rl:
        raise UsageError("optimize=True and enable_rl=True are exclusive: optimize=True makes one pass of copies, "
                         "enable_rl=True re-asks and keeps only the copies that help", flags=BATCH_FLAGS)
    if not (optimize or enable_rl) and (holdout is not None or validate is not None):
        raise UsageError("holdout= and validate= measure an optimization: add optimize=True or enable_rl=True",
                         flags=BATCH_FLAGS)
    if holdout is not None and validate is not None:
        raise UsageError("use holdout= or validate=, not both", flags=BATCH_FLAGS)
    if holdout is not None and not 0 <= holdout < 1:
        raise UsageError(f"holdout= must be a fraction in [0, 1), got {holdout}", flags=BATCH_FLAGS)
    if validate is None and (optimize or enable_rl) and holdout is None:
        holdout = DEFAULT_HOLDOUT
    return OptimizeOptions(optimize=optimize, enable_rl=enable_rl, holdout=holdout,
                           validate=Path(validate) if validate is not None else None)


def _run(report: BatchReport, ck: Checkpoint, jobs: list[_Job], input_cols: list[str], scorer: Scorer,
         asker: Callable[[str], Answer], settings: Settings, strategy: str, opts: OptimizeOptions,
         progress: bool, t0: float, provider: Any = None) -> BatchReport:
    from ragkit.core.progress import progress_bar

    # Finished rows live in the checkpoint, not in memory (a long run stays flat); they are read back at the end.
    done: set[int] = set()
    todo: list[_Job] = []
    running = _Running(_SEARCH_FIGURES if strategy == "search" else _ANSWER_FIGURES)
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
    if (done or ck.existed) and progress:
        bar.write(f"resuming: {len(done)} finished rows of {len(jobs)} from {ck.path}; {len(todo)} to answer",
                  file=sys.stderr)
    bar.set_postfix_str(running.text(), refresh=False)

    workers = max(1, settings.workers)
    pool = DaemonPool(min(workers, max(1, len(todo))))
    pending = deque(todo)
    inflight: dict[Future, _Job] = {}
    heartbeat = Heartbeat(lambda w: f"batch: {len(done)}/{len(jobs)} rows, {waiting_text(w)}", file=sys.stderr,
                          enabled=progress,
                          live=lambda text: bar.set_postfix_str(" · ".join(t for t in (running.text(), text) if t)))
    try:
        heartbeat.start()
        while pending or inflight:
            while pending and len(inflight) < 2 * workers:  # a short queue: memory stays flat, Ctrl-C is quick
                job = pending.popleft()
                inflight[pool.submit(_run_job, job, scorer, asker)] = job
            finished, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
            # save every finished row before re-raising what a worker raised (only BaseException gets here)
            for fut in sorted(finished, key=lambda f: f.exception() is not None):
                job = inflight.pop(fut)
                rec = fut.result()
                with uninterrupted():  # saved and counted together: the Ctrl-C message says how many are saved
                    ck.append(rec)
                    done.add(job.pos)
                running.add(rec)
                job.prior = None
                bar.update(1)
                bar.set_postfix_str(running.text(), refresh=False)
    except BaseException as e:
        heartbeat.stop()
        pool.shutdown(cancel_futures=True)
        bar.close()
        if progress:
            # the one line Ctrl-C prints: true to what the checkpoint holds (no "finished work is on disk" for 0 rows)
            kept = (f"{len(done)} of {len(jobs)} rows are saved in {ck.path}; run the same command again to continue"
                    if done else f"none of the {len(jobs)} rows was finished, so none is saved; run the same command "
                    "again to start over")
            print(f"stopped: {kept}", file=sys.stderr)
            if isinstance(e, KeyboardInterrupt):
                raise Interrupted from None
        raise
    heartbeat.stop()
    pool.shutdown()
    bar.close()

    # assemble in input order, from the checkpoint (the last record of each row wins)
    final = ck.load()
    rows: list[dict] = []
    which = 0  # refusals that asked which document was meant
    for job in jobs:
        rec = final.get(job.pos)
        if rec is None or rec.get("q") != job.question:
            raise RagError(f"{ck.path}: row {job.pos + 2} is missing from the checkpoint; run the same command "
                           "again to answer it")
        which += bool((rec.get("answer") or {}).get("documents_meant"))
        rec = _slim(rec)
        report.answer_usage.add(usage_from(rec.get("answer_usage")))
        report.judge_usage.add(usage_from(rec.get("judge_usage")))
        cols = dict(rec["cols"])
        opt_now = str(job.row.get(OPTIMIZED) or "")
        report.answered_before_copies += opt_now != (rec.get("opt") or "")
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
                             split=report.measure is not None and report.measure.holdout is not None,
                             search=strategy == "search")
    if which:
        report.run.notes.append(which_document_note(which))
    report.rows = rows
    report.questions = len(rows)
    report.usage = Usage()
    report.usage.add(report.answer_usage)
    report.usage.add(report.judge_usage)
    report.wall_s = time.monotonic() - t0
    report.run.served_model = getattr(provider, "served_model", None)  # a typo'd RAG_MODEL a server ignored
    stem = report.input_path.stem if report.input_path is not None else IN_MEMORY_STEM
    write_outputs(report, columns, stem=stem, kind="results", results_dir=settings.results)
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


# the running means the progress bar shows: a search run answers nothing, so its figures are the ranking ones
_ANSWER_FIGURES = (("Ref Recall", "ref_recall"), ("Checklist Recall", "checklist_recall"))
_SEARCH_FIGURES = (("Ref Recall", "ref_recall"), ("Ref MRR", "mrr"))


class _Running:
    """Running means for the progress bar."""

    def __init__(self, figures: tuple[tuple[str, str], ...] = _ANSWER_FIGURES) -> None:
        self.figures = figures
        self.sums = {k: [0.0, 0] for k, _ in figures}
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
        for k, label in self.figures:
            s, n = self.sums[k]
            out.append(f"{label}={s / n:.2f}" if n else f"{label}=-")
        if self.errors:
            out.append(f"errors={self.errors}")
        return " ".join(out)
