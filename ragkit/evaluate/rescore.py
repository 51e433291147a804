"""`rag eval`: re-score the answers of an existing results CSV (another judge, provider or database) without
asking again, into `<results stem>_eval_YYYYMMDD_HHMMSS.csv` and its summary.

    run_eval(results_csv, settings, *, progress=True, index=None) -> BatchReport"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

from ragkit.core.config import Settings
from ragkit.core.csvio import (
    read_csv,
    split_multi,
)
from ragkit.core.errors import RagError
from ragkit.core.models import Answer, Source, Usage
from ragkit.core.paths import page_number
from ragkit.core.waiting import Heartbeat, waiting_text
from ragkit.core.workers import DaemonPool
from ragkit.evaluate.heldout import SPLIT_COLUMN
from ragkit.evaluate.results import UNKNOWN, BatchReport, result_columns, run_record, write_outputs
from ragkit.evaluate.runinfo import RunInfo, answer_fingerprint, read_run_info
from ragkit.evaluate.scoring import (
    _OUTPUT_SET,
    ATTEMPTS,
    CONFIDENCE,
    MAX_LOOPS,
    OPTIMIZED,
    QUESTION,
    REFERENCE,
    Scorer,
    _one_line,
    _score,
    _short,
    check_pages,
    check_references,
    known_columns,
)

# -- rag eval -----------------------------------------------------------------------------------------
# the answer's own figures: the batch that asked measured them, so re-scoring carries them over as they are, and
# a column the results lack stays empty (unknown), never the 0 of an Answer rebuilt without it
CARRIED = ("Steps", MAX_LOOPS, "Input Tokens", "Output Tokens", "Cost USD", "Latency ms", "Pages Read", CONFIDENCE,
           ATTEMPTS, SPLIT_COLUMN)
TOKEN_COLUMNS = ("Input Tokens", "Output Tokens")
EDITED = "_edited"  # a key of _eval_job's columns, never a CSV column: the row's answer was edited


def edited(row: dict, recorded: set[str] | None) -> bool:
    """Whether a row's answer is not the one its batch recorded, so what the batch derived from the answer text
    (Refused, Confidence) no longer holds. With the record's fingerprints (runinfo.answer_fingerprint): the
    answer differs from every recorded one. Without (no record, or one older than them): the Refused cell
    contradicts the text (text.is_refusal), which ragkit never writes: a refusal's text leads with the refusal
    sentence, and an answer that leads with one is scored a refusal."""
    from ragkit.core.text import is_refusal
    from ragkit.evaluate.metrics import parse_number

    text = str(row.get("RAG Answer") or "")
    if recorded is not None:
        return answer_fingerprint(row.get(QUESTION), text) not in recorded
    cell = parse_number(row.get("Refused"))
    return cell is not None and bool(cell) != is_refusal(text)


def _answer_from_row(row: dict, *, changed: bool = False) -> Answer:
    from ragkit.core.text import is_refusal
    from ragkit.evaluate.metrics import parse_number

    text = str(row.get("RAG Answer") or "")
    refused_cell = None if changed else parse_number(row.get("Refused"))
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


def _eval_job(row: dict, scorer: Scorer, recorded: set[str] | None = None) -> tuple[dict, Usage]:
    changed = edited(row, recorded)
    answer = _answer_from_row(row, changed=changed)
    try:
        cols, usage, _ = _score(scorer, row, answer)
    except Exception as e:  # noqa: BLE001 - one row's failure must not stop the others
        from ragkit.core.secrets import scrub

        return {"Judge Error": scrub(f"{type(e).__name__}: {_one_line(e)}", scorer.settings.api_key)}, Usage()
    for k in CARRIED:
        cols[k] = row.get(k, "")
    if changed:  # the batch's Refused and Confidence were of another answer: this one's text decides
        cols["Refused"], cols[CONFIDENCE], cols[EDITED] = answer.refused, "", True
    elif "Refused" in row:  # else the answer's text decided it (text.is_refusal)
        cols["Refused"] = row["Refused"]
    return cols, usage


def answer_usage(rows: list[dict], columns: Iterable[str]) -> Usage | None:
    """What the answers of a results file cost, summed from its rows (the batch measured it; re-scoring asks
    nothing): None when the file has no token columns; the cost is None (unknown) when a row has none."""
    from ragkit.evaluate.metrics import parse_number

    if not any(c in columns for c in TOKEN_COLUMNS):
        return None
    total = Usage()
    for r in rows:
        total.add(Usage(input_tokens=int(parse_number(r.get("Input Tokens")) or 0),
                        output_tokens=int(parse_number(r.get("Output Tokens")) or 0),
                        cost_usd=parse_number(r.get("Cost USD"))))
    return total


def run_eval(results_csv: Path, settings: Settings, *, progress: bool = False, index: Any = None,
             gates: Sequence[Any] | None = None) -> BatchReport:
    """Re-score an existing results CSV without asking again (another judge, provider or database). `progress`:
    lines on stderr (the CLI turns it on). `gates`: as run_batch's (checked first, verdicts in `report.gates` and
    the run record)."""
    from ragkit.core.progress import progress_bar
    from ragkit.evaluate.gates import as_gates, record_gates

    gate_list = as_gates(gates)

    t0 = time.monotonic()
    results_csv = Path(results_csv)
    df = read_csv(results_csv, required=(QUESTION, "RAG Answer"), known=known_columns(),
                  encoding=settings.csv_encoding)
    check_pages(df, results_csv)
    input_cols = [c for c in df.columns if c not in _OUTPUT_SET]
    has_attempts = ATTEMPTS in df.columns
    rows_in = df.to_dict("records")
    jobs = [(pos, r) for pos, r in enumerate(rows_in) if str(r.get(QUESTION) or "").strip()]
    if not jobs:
        raise RagError(f"{results_csv}: no rows with a question to re-score")
    needs_index = REFERENCE in input_cols
    if needs_index:  # as rag batch: every reference must exist before a row is scored
        check_references(rows_in, Path(settings.db), results_csv, outcome="nothing was scored")
    if index is None and needs_index:
        from ragkit.search import open_index

        index = open_index(Path(settings.db), progress=progress)
    scorer = Scorer.create(settings, input_cols, index=index)
    source = read_run_info(results_csv)
    recorded = set(source.answers) if source is not None and source.answers else None
    run = _eval_record(results_csv, settings, scorer, rows_in, source)
    if run.retrieval_only:  # a search run's results: its ranking metrics again, and no judge of absent answers
        from ragkit.evaluate.retrieval import DEFAULT_K

        scorer.search_k = run.k or DEFAULT_K
    # who answered is the record's (this run's provider only judges); "unknown" when the results have no record
    report = BatchReport(kind="eval", input_path=results_csv, skipped_blank=len(rows_in) - len(jobs),
                         provider=run.provider or UNKNOWN, model=run.model or UNKNOWN,
                         strategy=run.strategy or UNKNOWN, judge_model=scorer.judge.model, run=run)
    carried = answer_usage([r for _, r in jobs], df.columns)
    report.answer_usage = carried if carried is not None else Usage()
    report.answer_usage_known = carried is not None

    out: dict[int, dict] = {}
    bar = progress_bar(total=len(jobs), desc="eval", unit="row", file=sys.stderr, disable=not progress)
    pool = DaemonPool(min(max(1, settings.workers), len(jobs)))
    heartbeat = Heartbeat(lambda w: f"eval: {len(out)}/{len(jobs)} rows, {waiting_text(w)}", file=sys.stderr,
                          enabled=progress, live=bar.set_postfix_str)
    try:
        heartbeat.start()
        futs = {pool.submit(_eval_job, {c: r[c] for c in input_cols} | _kept(r), scorer, recorded): (pos, r)
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
        heartbeat.stop()
        pool.shutdown(cancel_futures=True)
        bar.close()
        raise
    heartbeat.stop()
    pool.shutdown()
    bar.close()

    rows = [out[pos] for pos, _ in jobs]
    changed = [row["_pos"] + 2 for row in rows if row.pop(EDITED, False)]
    if changed:
        run.notes.append(edited_note(changed, recorded is not None))
    for row in rows:
        pos = row.pop("_pos")
        q = _short(str(row.get(QUESTION) or ""), 50)
        if row.get("Error"):
            report.errors.append(f"row {pos + 2} {q!r}: no answer to score (the batch failed: {row['Error']})")
        if row.get("Judge Error"):
            report.errors.append(f"row {pos + 2} {q!r}: {row['Judge Error']}")
    report.rows = rows
    report.questions = len(rows)
    report.usage.add(report.answer_usage)
    report.usage.add(report.judge_usage)
    report.wall_s = time.monotonic() - t0
    columns = result_columns(input_cols, optimized=OPTIMIZED in input_cols, attempts=has_attempts,
                             split=SPLIT_COLUMN in df.columns, search=run.retrieval_only)
    write_outputs(report, columns, stem=results_csv.stem, kind="eval", results_dir=settings.results)
    record_gates(report, gate_list)
    return report


def edited_note(lines: list[int], by_record: bool) -> str:
    """The note of an eval whose input has answers edited since its batch (CSV line numbers)."""
    shown = ", ".join(map(str, lines[:10])) + (f" and {len(lines) - 10} more" if len(lines) > 10 else "")
    how = "differ from the answers its run record holds" if by_record else "contradict their Refused cell"
    return (f"{len(lines)} answer(s) {how} (edited; row(s) {shown}): Refused is read from their text and "
            "Confidence left unknown; tokens, cost and latency are still those of the recorded answers")


def _eval_record(results_csv: Path, settings: Settings, scorer: Scorer, rows: list[dict],
                 source: RunInfo | None) -> RunInfo:
    """The record of a re-scoring: who answered comes from the record of the results it re-scores (unknown
    without one), the judge and the database are this run's."""
    run = run_record("eval", settings, strategy=source.strategy if source else None,
                     provider=source.provider if source else None, model=source.model if source else None,
                     judge=scorer.judge, k=source.k if source else None, input_path=results_csv,
                     offline=bool(source and source.engine == "offline-extractive"), rows=rows)
    run.index = source.index if source is not None else None  # the answers' backend, not this run's
    if source is not None:
        # how the answers were made is the batch's: its settings and endpoint (the judge is this run's)
        for name in ("context_tokens", "max_steps", "max_tokens", "embeddings", "api_host"):
            setattr(run, name, getattr(source, name))
        if source.database and Path(source.database).resolve() != Path(run.database):
            run.answered_database = source.database  # re-scored against another database (docs/evaluation.md)
    else:
        for name in ("max_steps", "max_tokens", "embeddings", "api_host"):
            setattr(run, name, None)  # unknown without the batch's record
        run.notes.append(f"{results_csv.name} has no run record: who answered it is unknown")
    return run


def _kept(row: dict) -> dict:
    """The answer columns of a results row that re-scoring reads."""
    keys = ("RAG Answer", "Retrieved Files", "Refused", "Error", *CARRIED)
    return {k: row[k] for k in keys if k in row}


def _as_completed(futs: Iterable[Future]):
    pending = set(futs)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from finished
