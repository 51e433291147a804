"""`rag batch` and `rag eval`: parallel, resumable evaluation runs (DESIGN §4, §5).

INTERFACE (owned by the batch work; cli/demo/optimize rely on it):

    run_batch(input_csv: Path, settings: Settings, *, strategy="agent", enable_rl=False, resume=False,
              progress=True) -> BatchReport
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
1. The input CSV (UTF-8, BOM or Shift_JIS) is read; rows with an empty `Question` are skipped and counted.
   Rows are identified by position and question, so duplicate questions are two rows.
2. Each question runs in a pool of `settings.workers` threads: answer (agent.ask), then, in the same
   worker, the scoring: reference metrics over the pages of the index at that moment, the checklist judge,
   the rubric judge, Contain-Match and LLM-Accuracy (when the row has ground truth). A judge failure is
   recorded in `Judge Error` and never loses the answer.
3. Every finished row is appended at once (flushed and fsync'ed) to a checkpoint, one JSON line per row
   with its input position, its question, the answer and the scored columns.
   Finished rows are not kept in memory: they are read back from the checkpoint at the end.
4. After the last row: the folder optimizer (ragkit.optimize, DESIGN §6) when the input has ground truth,
   then `results/<stem>_results_YYYYMMDD_HHMMSS.csv` and `..._summary.csv`, written atomically, never over
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

import contextlib
import glob
import hashlib
import json
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragkit.config import STRATEGIES, Settings
from ragkit.csvio import (
    join_multi,
    read_csv,
    split_checklist,
    split_multi,
    summary_path_for,
    timestamped_path,
)
from ragkit.csvio import write_csv as _write_csv
from ragkit.errors import RagError, UsageError
from ragkit.judge import RUBRIC_COLUMNS
from ragkit.models import Answer, Source, Usage
from ragkit.paths import page_number, reference_path
from ragkit.text import one_line

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
JUDGE_COLUMNS = [*RUBRIC_COLUMNS, "Contain Match", "LLM Accuracy"]
DETAIL_COLUMNS = ["Refused", "Pages Read", "Steps", "Input Tokens", "Output Tokens", "Cost USD", "Latency ms",
                  "Judge Input Tokens", "Judge Output Tokens", "Judge Cost USD"]
ATTEMPTS = "Attempts"
TAIL_COLUMNS = ["Error", "Judge Error"]

# every column a run computes (an input CSV that already has them, e.g. a results CSV, gets them replaced)
OUTPUT_COLUMNS = [*CORE_COLUMNS, *CHECKLIST_MORE, *REF_MORE, *OPT_REF_COLUMNS, *JUDGE_COLUMNS,
                  *DETAIL_COLUMNS, ATTEMPTS, *TAIL_COLUMNS]
_OUTPUT_SET = frozenset(OUTPUT_COLUMNS)
# columns the summary aggregates (metrics.summarize: means, micro-averages, totals)
SUMMARY_METRICS = [
    "Checklist Recall", "Checklist Precision", "Checklist F1", "Checklist Accuracy", "Checklist Specificity",
    "Checklist TP", "Checklist FP", "Checklist FN", "Checklist TN",
    "Ref Recall", "Ref Precision", "Ref Specificity", "Ref F1", "Ref Accuracy",
    "Ref TP", "Ref TN", "Ref FP", "Ref FN",
    *OPT_REF_COLUMNS,
    "Judge Accuracy", "Judge Completeness", "Judge Citations", "Judge Context Relevance", "Judge Overall",
    "Judge Passed", "Contain Match", "LLM Accuracy", "Refused", "Steps", "Latency ms", ATTEMPTS,
]

CHECKPOINT_DIR = ".checkpoints"
_CK_VERSION = 1


def result_columns(input_columns: list[str], *, optimized: bool, attempts: bool) -> list[str]:
    """The results CSV's columns: input columns, then DESIGN §4's, then the further ones."""
    cols = list(input_columns)
    if optimized and OPTIMIZED not in cols:
        pos = cols.index(REFERENCE) + 1 if REFERENCE in cols else len(cols)
        cols.insert(pos, OPTIMIZED)
    cols += CORE_COLUMNS + CHECKLIST_MORE + REF_MORE
    if optimized:
        cols += OPT_REF_COLUMNS
    cols += JUDGE_COLUMNS + DETAIL_COLUMNS
    if attempts:
        cols.append(ATTEMPTS)
    return cols + TAIL_COLUMNS


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
    from ragkit.metrics import format_cell

    return format_cell(value)


def _one_line(e: BaseException | str) -> str:
    return one_line(e) or (type(e).__name__ if not isinstance(e, str) else "")


def answer_columns(answer: Answer) -> dict:
    """The columns that describe an answer (no scoring)."""
    retrieved = _dedupe(s.path for s in answer.sources)
    return {
        "RAG Answer": answer.answer or "",
        "Retrieved Files": join_multi(retrieved),
        "Refused": bool(answer.refused),
        "Pages Read": join_multi(_dedupe(answer.pages_read)),
        "Steps": answer.steps,
        "Input Tokens": answer.usage.input_tokens,
        "Output Tokens": answer.usage.output_tokens,
        "Cost USD": _cost_cell(answer.usage.cost_usd),
        "Latency ms": round(answer.latency_ms),
        "Error": _one_line(answer.error) if answer.error else "",
    }


# -- scoring ------------------------------------------------------------------------------------------
@dataclass
class _Scorer:
    """What scoring one row needs; shared by the workers (read-only apart from the index)."""

    settings: Settings
    db: Path
    index: Any
    judge: Any  # Provider
    has_ref: bool  # the input has a Reference Document column
    has_opt: bool
    has_checklist: bool
    has_gt: bool

    @classmethod
    def create(cls, settings: Settings, columns: Iterable[str], index: Any = None, judge: Any = None) -> _Scorer:
        from ragkit.llm import get_provider

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
            from ragkit.index import open_index

            self.index = open_index(self.db, progress=False)
        pages = self.index.pages()
        base = reference_path(self.db, "")  # the same prefix for every page: build it once
        return [p for p in pages] if base in ("", ".") else [f"{base}/{p}" for p in pages]

    def reference_columns(self, row: dict, retrieved: list[str], universe: list[str] | None = None) -> dict:
        from ragkit.metrics import prefixed, reference_metrics

        if not self.has_ref:
            return {}
        if universe is None:
            universe = self.universe()
        out = prefixed("Ref", reference_metrics(str(row.get(REFERENCE) or ""), retrieved, universe))
        opt = str(row.get(OPTIMIZED) or "").strip()
        if opt:
            out.update(prefixed("Opt Ref", reference_metrics(opt, retrieved, universe)))
        return out

    def judge_columns(self, row: dict, answer: Answer) -> tuple[dict, Usage, list[str]]:
        """Checklist, rubric, Contain-Match, LLM-Accuracy and the Evaluation Reason. Never raises: each
        judge's failure is one entry of the returned problems (the answer stays)."""
        from ragkit import judge as J
        from ragkit.metrics import checklist_metrics, prefixed

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
        if gt:
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
        from ragkit.llm import scrub

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


def _metric_dict(row: dict, prefix: str) -> dict | None:
    """{"TP": 1, ...} from a row's "<prefix> TP" ... cells; None when the counts are absent."""
    from ragkit.metrics import COUNT_KEYS, parse_number

    counts = {k: parse_number(row.get(f"{prefix} {k}")) for k in COUNT_KEYS}
    if any(v is None for v in counts.values()):
        return None
    return {k: int(v) for k, v in counts.items()}


def _short(s: str, n: int = 60) -> str:
    return one_line(s, n)


def _score(scorer: _Scorer, row: dict, answer: Answer, *, ref_cols: dict | None = None,
           universe: list[str] | None = None) -> tuple[dict, Usage, list[str]]:
    """All computed columns of one row (the answer's, reference metrics, judges, reason)."""
    from ragkit.judge import evaluation_reason

    cols = answer_columns(answer)
    if answer.error:  # no answer to score: metrics stay empty, the row is retried on resume
        cols["Evaluation Reason"] = evaluation_reason(error=answer.error)
        return cols, Usage(), []
    retrieved = split_multi(cols["Retrieved Files"])
    if ref_cols is None:
        ref_cols = scorer.reference_columns(row, retrieved, universe)
    cols.update(ref_cols)
    usage, problems = Usage(), []
    if scorer.scored:
        jcols, usage, problems = scorer.judge_columns({**row, **cols}, answer)
        cols.update(jcols)
    else:
        cols["Evaluation Reason"] = ""
    cols["Judge Error"] = "; ".join(problems)
    return cols, usage, problems


# -- RL re-asks (called by ragkit.optimize) ------------------------------------------------------------
_SINK_LOCK = threading.Lock()
_SINK: list[tuple[Usage, Usage]] = []  # while a batch runs the optimizer: (answer, judge) usage of its re-asks


def rescore_row(row: dict, answer: Answer, settings: Settings) -> dict:
    """The row after a re-ask: the answer's columns, checklist/judge columns and Evaluation Reason
    recomputed (reference metrics are the caller's: it knows the copies it made)."""
    scorer = _Scorer.create(settings, row.keys())
    out = dict(row)
    ref_cols = {k: v for k, v in row.items() if k.startswith(("Ref ", "Opt Ref "))}
    cols, usage, _ = _score(scorer, row, answer, ref_cols=ref_cols)
    out.update(cols)
    with _SINK_LOCK:
        for answers, judges in _SINK:
            answers.add(answer.usage)
            judges.add(usage)
    return out


@contextlib.contextmanager
def _collect_rescore_usage():
    sink = (Usage(), Usage())
    with _SINK_LOCK:
        _SINK.append(sink)
    try:
        yield sink
    finally:
        with _SINK_LOCK:
            _SINK.remove(sink)


# -- a pool whose threads never hold the process up ----------------------------------------------------
class _DaemonPool:
    """A minimal thread pool of daemon threads.

    Why not ThreadPoolExecutor: its threads are joined at interpreter exit, so after Ctrl-C the process
    would wait for every in-flight question (HTTP timeouts and retries included) before exiting. Finished
    rows are already in the checkpoint; in-flight ones are simply asked again on resume.
    """

    def __init__(self, workers: int) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"rag-batch-{i}", daemon=True)
                         for i in range(max(1, workers))]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, fn, args = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
                fut.set_exception(e)

    def submit(self, fn: Callable, *args: Any) -> Future:
        fut: Future = Future()
        self._q.put((fut, fn, args))
        return fut

    def shutdown(self, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            while True:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._threads:
            self._q.put(None)


# -- the checkpoint -----------------------------------------------------------------------------------
class Checkpoint:
    """Append-only JSON lines, one per finished row, fsync'ed; locked against a second process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = None

    def load(self) -> dict[int, dict]:
        """The last readable record per input position. A torn last line is cut off."""
        if not self.path.is_file():
            return {}
        data = self.path.read_bytes()
        good_end = data.rfind(b"\n") + 1
        records: dict[int, dict] = {}
        for line in data[:good_end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("v") == _CK_VERSION and isinstance(rec.get("i"), int):
                records[rec["i"]] = rec
        if good_end < len(data):  # a line cut short by a crash: drop it so the next append starts clean
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        return records

    def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for the whole run
        except OSError as e:
            raise RagError(f"{self.path}: cannot write the checkpoint ({e.strerror or e})") from None
        try:
            import fcntl

            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - Windows: no advisory lock
            pass
        except BlockingIOError:
            self._fh.close()
            self._fh = None
            raise RagError(f"{self.path}: another `rag batch` is running on this input; wait for it "
                           "or stop it first") from None
        except OSError:  # a filesystem without locks: run unlocked
            pass

    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str).encode("utf-8") + b"\n"
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def finish(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def checkpoint_path(settings: Settings, input_csv: Path, df: pd.DataFrame, *, strategy: str) -> Path:
    """`<results>/.checkpoints/<input stem>-<key>.jsonl` (see the module docstring for what the key covers)."""
    cols = [c for c in df.columns if c != OPTIMIZED]
    content = hashlib.sha256(json.dumps([cols, df[cols].values.tolist()], ensure_ascii=False).encode()).hexdigest()
    material = {
        "input": str(Path(input_csv).resolve()),
        "content": content,
        "db": str(Path(settings.db).resolve()),
        "strategy": strategy,
        "provider": settings.provider,
        "model": settings.model,
        "judge_model": settings.judge_model,
        "api_base": settings.api_base or "",
    }
    key = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]
    from ragkit.paths import sanitize_name

    stem = sanitize_name(Path(input_csv).stem, fallback="input", max_len=60)
    return Path(settings.results) / CHECKPOINT_DIR / f"{stem}-{key}.jsonl"


# -- the batch ----------------------------------------------------------------------------------------
@dataclass
class _Job:
    pos: int  # 0-based position among the input's data rows
    question: str
    row: dict  # the input columns
    mode: str = "ask"  # "ask" | "judge" (answer kept from the checkpoint, judging failed before)
    prior: dict | None = None  # the checkpoint record a "judge" job starts from


def _run_job(job: _Job, scorer: _Scorer, answer_fn: Callable, strategy: str, provider: Any) -> dict:
    """Answer and score one row; never raises (a failure becomes the record's error)."""
    try:
        if job.mode == "judge" and job.prior is not None:
            answer = answer_from_dict(job.prior["answer"])
            ref_cols = {k: v for k, v in job.prior["cols"].items() if k.startswith(("Ref ", "Opt Ref "))}
            cols, usage, problems = _score(scorer, job.row, answer, ref_cols=ref_cols)
        else:
            answer = answer_fn(job.question, scorer.settings, strategy=strategy, index=scorer.index,
                               provider=provider)
            universe = scorer.universe() if scorer.has_ref and not answer.error else None
            cols, usage, problems = _score(scorer, job.row, answer, universe=universe)
        return {"v": _CK_VERSION, "i": job.pos, "q": job.question, "answer": answer_to_dict(answer),
                "cols": {k: _jsonable(v) for k, v in cols.items()}, "error": answer.error or None,
                "judge_error": "; ".join(problems) or None, "judge_usage": asdict(usage),
                "opt": str(job.row.get(OPTIMIZED) or "")}
    except Exception as e:  # noqa: BLE001 - a bug in one row must not stop the batch
        from ragkit.llm import scrub

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


def _default_answer_fn() -> Callable:
    from ragkit.agent import ask

    return ask


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
) -> BatchReport:
    """Answer and score every question of `input_csv`; see the module docstring.

    `answer_fn(question, settings, *, strategy, index, provider) -> Answer` defaults to agent.ask (tests and
    benchmarks may pass another). Raises RagError for unusable input (one line); row failures go to
    `report.errors` and the other rows still run. KeyboardInterrupt propagates after the pool is stopped;
    finished rows are in the checkpoint.
    """
    t0 = time.monotonic()
    input_csv = Path(input_csv)
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    df = read_csv(input_csv, required=(QUESTION,))
    input_cols = [c for c in df.columns if c not in _OUTPUT_SET]
    if enable_rl and REFERENCE not in input_cols:
        raise UsageError(f"--enable-rl needs ground truth: {input_csv} has no {REFERENCE!r} column")
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

    from ragkit.llm import get_provider

    provider = get_provider(settings)
    if index is None:
        from ragkit.index import open_index

        index = open_index(Path(settings.db), progress=progress)
    if not index.pages():  # one clear line instead of the same error on every row
        raise RagError(f"{settings.db}: the database has no pages; run `rag ingest SOURCE --db {settings.db}` first")
    scorer = _Scorer.create(settings, input_cols, index=index)
    answer_fn = answer_fn or _default_answer_fn()

    ck = Checkpoint(checkpoint_path(settings, input_csv, df[input_cols], strategy=strategy))
    report = BatchReport(kind="batch", input_path=input_csv, skipped_blank=blank, checkpoint_path=ck.path,
                         provider=settings.provider, model=provider.model, judge_model=scorer.judge.model,
                         strategy=strategy)
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
        return _run(report, ck, jobs, input_cols, scorer, answer_fn, provider, settings, strategy, enable_rl,
                    progress, t0)
    finally:
        ck.close()


def _run(report: BatchReport, ck: Checkpoint, jobs: list[_Job], input_cols: list[str], scorer: _Scorer,
         answer_fn: Callable, provider: Any, settings: Settings, strategy: str, enable_rl: bool,
         progress: bool, t0: float) -> BatchReport:
    from ragkit.progress import progress_bar

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
                inflight[pool.submit(_run_job, job, scorer, answer_fn, strategy, provider)] = job
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

    # the folder optimizer (DESIGN §6) after a batch with ground truth
    if REFERENCE in input_cols or GROUND_TRUTH in input_cols:
        from ragkit.optimize import optimize_missed

        with _collect_rescore_usage() as sink:
            try:
                opt = optimize_missed(rows, input_csv=report.input_path, settings=settings, strategy=strategy,
                                      enable_rl=enable_rl, index=scorer.index, progress=progress)
            except RagError as e:
                report.errors.append(f"optimize: {_one_line(e)}")
                opt = None
        if opt is not None:
            report.optimize = opt
            rows = opt.rows
            report.errors.extend(f"optimize: {e}" for e in opt.errors)
            report.answer_usage.add(opt.usage)  # proposals and re-asks that were not a row's last
            report.answer_usage.add(sink[0])  # the last re-ask of each row (through rescore_row)
            report.judge_usage.add(sink[1])
            _fill_opt_ref(rows, scorer)

    for row in rows:
        pos = row.pop("_pos", None)
        label = f"row {pos + 2}" if isinstance(pos, int) else "row"
        q = _short(str(row.get(QUESTION) or ""), 50)
        if row.get("Error"):
            report.errors.append(f"{label} {q!r}: {row['Error']}")
        if row.get("Judge Error"):
            report.errors.append(f"{label} {q!r}: {row['Judge Error']}")

    optimized = OPTIMIZED in input_cols or any(str(r.get(OPTIMIZED) or "").strip() for r in rows)
    columns = result_columns(input_cols, optimized=optimized, attempts=enable_rl)
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


def _fill_opt_ref(rows: list[dict], scorer: _Scorer) -> None:
    """Rows the optimizer gave an `Optimized Reference Document` without re-asking: score it now."""
    universe = None
    for row in rows:
        if str(row.get(OPTIMIZED) or "").strip() and row.get("Opt Ref TP") in (None, "") and not row.get("Error"):
            if universe is None:
                universe = scorer.universe()
            from ragkit.metrics import prefixed, reference_metrics

            row.update(prefixed("Opt Ref", reference_metrics(row[OPTIMIZED],
                                                             split_multi(str(row.get("Retrieved Files") or "")),
                                                             universe)))


class _Running:
    """Running means for the progress bar."""

    def __init__(self) -> None:
        self.sums = {"Ref Recall": [0.0, 0], "Checklist Recall": [0.0, 0]}
        self.errors = 0

    def add(self, rec: dict) -> None:
        from ragkit.metrics import parse_number

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
    from ragkit.metrics import SUMMARY_COLUMNS, format_row, summarize, totals_rows

    table = [{c: _fmt(r.get(c)) for c in columns} for r in report.rows]
    report.rows = table  # exactly what the CSV holds (every column; None -> "")
    df = pd.DataFrame(table, columns=columns)
    path = timestamped_path(Path(results_dir), stem, kind)
    _write_csv(df, path)
    report.results_path = path

    metric_cols = [c for c in SUMMARY_METRICS if c in columns]
    summary = [format_row(r) for r in summarize(report.rows, metric_cols)]
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
    summary += [{"Metric": k, "Mean": "", "Micro": "", "Total": v, "Rows": ""} for k, v in extra if v is not None]
    report.summary = summary
    sdf = pd.DataFrame(summary, columns=list(SUMMARY_COLUMNS))
    spath = summary_path_for(path)
    _write_csv(sdf, spath)
    report.summary_path = spath


def _cost_total(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:.6f}"


# -- rag eval -----------------------------------------------------------------------------------------
def _answer_from_row(row: dict) -> Answer:
    from ragkit.metrics import parse_number
    from ragkit.text import is_refusal

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


def _eval_job(row: dict, scorer: _Scorer) -> tuple[dict, Usage]:
    answer = _answer_from_row(row)
    try:
        cols, usage, _ = _score(scorer, row, answer)
    except Exception as e:  # noqa: BLE001 - one row's failure must not stop the others
        from ragkit.llm import scrub

        return {"Judge Error": scrub(f"{type(e).__name__}: {_one_line(e)}", scorer.settings.api_key)}, Usage()
    # the answer's own figures come from the batch that produced it, not from this re-scoring
    for k in ("Steps", "Input Tokens", "Output Tokens", "Cost USD", "Latency ms", "Pages Read", "Refused",
              ATTEMPTS):
        if k in row:
            cols[k] = row[k]
    return cols, usage


def run_eval(results_csv: Path, settings: Settings, *, progress: bool = True, index: Any = None) -> BatchReport:
    """Re-score an existing results CSV without asking again (another judge, provider or database)."""
    from ragkit.progress import progress_bar

    t0 = time.monotonic()
    results_csv = Path(results_csv)
    df = read_csv(results_csv, required=(QUESTION, "RAG Answer"))
    input_cols = [c for c in df.columns if c not in _OUTPUT_SET]
    has_attempts = ATTEMPTS in df.columns
    rows_in = df.to_dict("records")
    jobs = [(pos, r) for pos, r in enumerate(rows_in) if str(r.get(QUESTION) or "").strip()]
    if not jobs:
        raise RagError(f"{results_csv}: no rows with a question to re-score")
    needs_index = REFERENCE in input_cols
    if index is None and needs_index:
        from ragkit.index import open_index

        index = open_index(Path(settings.db), progress=progress)
    scorer = _Scorer.create(settings, input_cols, index=index)
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
    columns = result_columns(input_cols, optimized=OPTIMIZED in input_cols, attempts=has_attempts)
    _write_outputs(report, columns, stem=results_csv.stem, kind="eval", results_dir=settings.results)
    return report


def _kept(row: dict) -> dict:
    """The answer columns of a results row that re-scoring reads."""
    keys = ("RAG Answer", "Retrieved Files", "Refused", "Pages Read", "Steps", "Input Tokens", "Output Tokens",
            "Cost USD", "Latency ms", "Error", ATTEMPTS)
    return {k: row[k] for k in keys if k in row}


def _as_completed(futs: Iterable[Future]):
    pending = set(futs)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from finished


# -- printing -----------------------------------------------------------------------------------------
_HEADLINE = ("Ref Recall", "Ref Precision", "Checklist Recall", "Checklist Precision", "Opt Ref Recall",
             "Judge Overall", "Judge Passed", "Contain Match", "LLM Accuracy")


def print_batch_report(report: BatchReport, console) -> None:
    """Key metrics, totals of tokens, cost and wall time, errors, and the paths of the files written."""
    from rich.table import Table

    from ragkit.metrics import parse_number

    title = "rag eval" if report.kind == "eval" else "rag batch"
    by_metric = {r.get("Metric"): r for r in report.summary}
    table = Table(title=f"{title}: {report.questions} rows", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("mean", justify="right")
    table.add_column("micro", justify="right")
    table.add_column("rows", justify="right")
    shown = 0
    for m in _HEADLINE:
        r = by_metric.get(m)
        if r is None or parse_number(r.get("Rows")) in (None, 0.0):
            continue
        table.add_row(m, _num(r.get("Mean")), _num(r.get("Micro")), str(r.get("Rows")))
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
