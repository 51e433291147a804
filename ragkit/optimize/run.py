"""The optimization run: results, references and the per-row loop (propose, copy, re-ask, keep or roll back)."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragkit.core.config import Settings
from ragkit.core.csvedit import ColumnEdit, set_column
from ragkit.core.csvio import join_multi, read_csv, split_multi
from ragkit.core.errors import PathEscapeError, RagError
from ragkit.core.models import Answer, Usage
from ragkit.core.pagefile import parse_page
from ragkit.core.paths import (
    normalize_ref,
    page_keys,
    reference_like,
    reference_path,
    resolve_in_db,
    strip_db_prefix,
)
from ragkit.core.references import OPT_COL, REF_COL, add_alias, reference_groups
from ragkit.core.text import one_line
from ragkit.core.workers import uninterrupted
from ragkit.optimize.copies import CopyManager
from ragkit.optimize.history import record_run
from ragkit.optimize.journal import Journal, recover_journal
from ragkit.optimize.proposals import (
    _SYSTEM,
    MAX_DEPTH,
    PAGE_EXCERPT,
    PROPOSAL_SCHEMA,
    NoFolderLeft,
    Proposal,
    check_folder_words,
    folder_listing,
    offline_proposals,
    scope_of,
    validate_folder,
)

log = logging.getLogger("ragkit.optimize")

MAX_ATTEMPTS = 5

# question -> Answer, with the strategy, index and provider of the run already chosen (the batch's own asker)
Asker = Callable[[str], Answer]


class RowScorer(Protocol):
    """What the optimizer needs of evaluation (ragkit.evaluate.scoring.Scorer is one)."""

    def reference_columns(self, row: dict, retrieved: list[str]) -> dict:
        """The row's Ref / Opt Ref metric columns for these retrieved pages (a copy counts as its page)."""

    def rescore(self, row: dict, answer: Answer) -> tuple[dict, Usage]:
        """The row after a re-ask, every answer and judge column recomputed, and what the judges spent."""


# -- results -----------------------------------------------------------------------------------------
@dataclass
class CopyRecord:
    """One copy one row's attempt placed (or found already in place and shared)."""

    row: int  # index into the rows passed in
    question: str
    original: str  # db-relative page path
    copy: str  # db-relative path of the copy
    attempt: int  # 1-based; always 1 without RL
    proposer: str  # "llm" | "offline" | "fallback"
    reason: str
    created: bool  # False: the same page was already in that folder (another row's copy, or an older run's)
    outcome: str = "pending"  # kept | rolled_back | reused | unused


@dataclass
class OptimizeReport:
    rows: list[dict]
    enable_rl: bool = False
    analysed: int = 0  # rows with a missed page that were worked on
    fixed: int = 0  # RL: analysed rows that reached Ref Recall >= 1
    created: int = 0  # copy files written
    kept: int = 0  # of those, still in the database at the end
    rolled_back: int = 0  # of those, removed again
    recall_before: float | None = None  # mean alias-aware Ref Recall over scored answerable rows
    recall_after: float | None = None  # the same after the RL loop (None without RL: nothing re-asked)
    rows_scored: int = 0  # answerable rows that may drive copies (the training rows) with a defined Ref Recall
    held_out_missed: int = 0  # rows that missed a page but may not drive a copy (held out: they measure)
    record_path: Path | None = None  # the run's record of the copies it kept (optimize.history: undo reads it)
    csv_edit: ColumnEdit | None = None  # how the input CSV was updated (its checksums: undo restores it)
    copies: list[CopyRecord] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # unconfirmed copies of a crashed run, removed
    notes: list[str] = field(default_factory=list)  # things the user should be told (not failures)
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # the optimizer's model calls: proposals and re-asks
    judge_usage: Usage = field(default_factory=Usage)  # judging the re-asked rows

    @property
    def csv_path(self) -> Path | None:
        """The input CSV when it was updated."""
        return self.csv_edit.path if self.csv_edit else None

    @property
    def backup_path(self) -> Path | None:
        """The input CSV as it was before (kept beside it)."""
        return self.csv_edit.backup if self.csv_edit else None

    def kept_copies(self, db: Path) -> list[tuple[str, str]]:
        """(copy, original) in Reference Document form for every copy still in the database."""
        out = []
        for r in self.copies:
            if r.outcome in ("kept", "reused") and resolve_in_db(Path(db), r.copy).is_file():
                out.append((reference_path(Path(db), r.copy), reference_path(Path(db), r.original)))
        return out

    def summary(self) -> dict[str, Any]:
        """Figures for a batch summary CSV (one value each)."""
        return {
            "Optimize Rows Analysed": self.analysed,
            "Optimize Rows Fixed": self.fixed if self.enable_rl else "",
            "Optimize Copies Created": self.created,
            "Optimize Copies Kept": self.kept,
            "Optimize Copies Rolled Back": self.rolled_back,
            "Optimize Copies Recovered": len(self.recovered),
            "Optimize Errors": len(self.errors),
        }


def _blank(v: float | None) -> float | str:
    return "" if v is None else round(v, 4)



# -- references --------------------------------------------------------------------------------------
def _groups(db: Path, cell: str) -> list[list[str]]:
    """The required pages of a reference cell as alias groups of db-relative paths (groups naming one page
    merged)."""
    key = page_keys(db)
    return [[key(a) for a in g] for g in reference_groups(cell, key)]


def _add_alias(db: Path, cell: str, original: str, copy: str) -> str:
    """add_alias for db-relative `original` and `copy`: the original is found in the cell whatever form the cell
    names it in (`database/...`, db-relative or absolute), and the copy is written in that same form."""
    return add_alias(cell, reference_path(db, original), lambda written: reference_like(db, written, copy),
                     key=page_keys(db))


def _recall(groups: list[list[str]], got: set[str]) -> tuple[float | None, list[list[str]]]:
    missed = [g for g in groups if not any(a in got for a in g)]
    return ((len(groups) - len(missed)) / len(groups) if groups else None), missed


def _effective_cell(row: dict) -> str:
    opt = str(row.get(OPT_COL) or "").strip()
    return opt if opt else str(row.get(REF_COL) or "")


def _retrieved(row: dict) -> list[str]:
    return split_multi(str(row.get("Retrieved Files") or ""))


# -- the run -----------------------------------------------------------------------------------------
@dataclass
class _Ctx:
    db: Path
    settings: Settings
    index: Any
    provider: Any
    asker: Asker | None
    scorer: RowScorer
    copies: CopyManager
    enable_rl: bool
    stop: threading.Event = field(default_factory=threading.Event)
    usage: Usage = field(default_factory=Usage)
    judge_usage: Usage = field(default_factory=Usage)
    usage_lock: threading.Lock = field(default_factory=threading.Lock)

    def add_usage(self, usage: Usage, judge: Usage | None = None) -> None:
        with self.usage_lock:
            self.usage.add(usage)
            if judge is not None:
                self.judge_usage.add(judge)


@dataclass
class _RowResult:
    records: list[CopyRecord] = field(default_factory=list)
    row: dict | None = None  # RL: the row as the final attempt left it
    recall: float | None = None  # RL: the final answer's recall against the kept copies
    error: str | None = None


def optimize_missed(
    rows: list[dict],
    *,
    input_csv: Path,
    settings: Settings,
    scorer: RowScorer,
    asker: Asker | None = None,
    enable_rl: bool = False,
    index=None,
    provider=None,
    progress: bool = True,
    only: set[int] | None = None,
) -> OptimizeReport:
    """Copy every missed reference page where its question would find it (DESIGN §6).

    `rows` are batch result rows (DESIGN §4 columns). Returns the rows (RL: the final attempt's answer,
    retrieved files and metrics, plus `Attempts`), what was copied, kept and rolled back, and Ref Recall
    before/after (aliases counted). A row's failure goes to `.errors`; the other rows still run. With `only`,
    just those rows (indices into `rows`: the training questions) may drive copies; the others are left as
    they are, to measure the copies honestly (ragkit.evaluate.heldout). The RL loop re-asks with `asker`
    (required with `enable_rl`) and scores with `scorer`; `provider` proposes the folders.
    """
    from ragkit.core.errors import UsageError
    from ragkit.core.llm import get_provider

    if enable_rl and asker is None:
        raise UsageError("the RL loop needs an asker to re-ask its questions")
    db = Path(settings.db)
    if index is None:
        from ragkit.search import open_index

        index = open_index(db, progress=progress)
    report = OptimizeReport(rows=[dict(r) for r in rows], enable_rl=enable_rl)
    try:
        report.recovered = recover_journal(db, index)
    except OSError as e:  # e.g. a read-only database: say so, and still optimize what can be
        report.errors.append(f"could not undo an interrupted run's copies: {e.strerror or e}")
    if report.recovered:
        report.notes.append(f"removed {len(report.recovered)} unconfirmed copies left by an interrupted run")

    targets: list[tuple[int, list[list[str]]]] = []
    before: dict[int, float] = {}
    for i, row in enumerate(report.rows):
        if not str(row.get(REF_COL) or "").strip() or str(row.get("Error") or "").strip():
            continue  # unanswerable, or the question itself failed: nothing to learn from
        groups = _groups(db, _effective_cell(row))
        recall, missed = _recall(groups, {strip_db_prefix(db, p) for p in _retrieved(row)})
        if recall is None:
            continue
        if only is not None and i not in only:
            report.held_out_missed += bool(missed)
            continue  # a held-out question: it measures the copies, it must not drive one
        before[i] = recall
        if missed:
            targets.append((i, missed))
    report.recall_before = sum(before.values()) / len(before) if before else None
    report.rows_scored = len(before)
    report.analysed = len(targets)

    journal = Journal(db)
    ctx = _Ctx(db=db, settings=settings, index=index, provider=provider or get_provider(settings),
               asker=asker, scorer=scorer, copies=CopyManager(db, index, journal), enable_rl=enable_rl)
    results: dict[int, _RowResult] = {}
    try:
        _run_rows(ctx, report, targets, results, progress)
        # all or nothing: a Ctrl-C after the CSV names the copies and before they are confirmed would leave the
        # CSV naming copies that the clean-up below removes
        with uninterrupted():
            _confirm(ctx, report, results, Path(input_csv))
            ctx.copies.abandon_all()
            journal.close()
            _finish(ctx, report, Path(input_csv))
    except BaseException:
        ctx.copies.abandon_all()  # an interruption leaves no unconfirmed copy behind
        journal.close()
        raise
    if enable_rl:
        after = dict(before)
        after.update({i: r.recall for i, r in results.items() if r.recall is not None})
        report.recall_after = sum(after.values()) / len(after) if after else None
        report.fixed = sum(1 for i, _ in targets if (after.get(i) or 0.0) >= 1.0)
        for row in report.rows:
            row.setdefault("Attempts", 0)
    report.usage, report.judge_usage = ctx.usage, ctx.judge_usage
    return report


def _finish(ctx: _Ctx, report: OptimizeReport, input_csv: Path) -> None:
    """Count the copies and record the kept ones for `rag optimize undo`."""
    _drop_deleted(ctx, report)
    states = list(ctx.copies.state.values())
    report.created = len(states)
    report.kept = states.count("kept")
    report.rolled_back = states.count("rolled_back")
    try:
        report.record_path = record_run(ctx.db, report, "enable-rl" if ctx.enable_rl else "optimize", input_csv)
    except OSError as e:
        report.errors.append(f"could not record the run's copies for `rag optimize undo`: {e.strerror or e}")


def _drop_deleted(ctx: _Ctx, report: OptimizeReport) -> None:
    """Results never list a file that no longer exists: a copy rolled back is removed from every row's
    Retrieved Files / Pages Read (an attempt, or another row's re-ask, may have read it while it existed), and
    that row's reference metrics are computed again without it."""
    gone = {rel for rel, state in ctx.copies.state.items() if state == "rolled_back"}
    if not gone:
        return
    for row in report.rows:
        refs_changed = False
        for col in ("Retrieved Files", "Pages Read"):
            paths = split_multi(str(row.get(col) or ""))
            kept = [x for x in paths if strip_db_prefix(ctx.db, x) not in gone]
            if len(kept) != len(paths):
                row[col] = join_multi(kept)
                refs_changed = refs_changed or col == "Retrieved Files"
        if not refs_changed or not str(row.get(REF_COL) or "").strip() and "Ref TP" not in row:
            continue
        row.update(ctx.scorer.reference_columns(row, _retrieved(row)))


def _run_rows(ctx: _Ctx, report: OptimizeReport, targets: list, results: dict[int, _RowResult],
              progress: bool) -> None:
    from ragkit.core.progress import progress_bar

    pool = ThreadPoolExecutor(max_workers=max(1, ctx.settings.workers), thread_name_prefix="optimize")
    try:
        futures = {pool.submit(_work_row, ctx, i, report.rows[i], missed): i for i, missed in targets}
        with progress_bar(total=len(futures), desc="optimize", unit="question", file=sys.stderr,
                  disable=not progress or not futures) as bar:
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as e:  # noqa: BLE001 - one row's failure must not stop the others
                    results[i] = _RowResult(error=_one_line(e))
                bar.update(1)
    except BaseException:
        ctx.stop.set()  # workers still running stop before their next copy
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    for i in sorted(results):
        r = results[i]
        report.copies.extend(r.records)
        if r.row is not None:
            report.rows[i] = r.row
        if r.error:
            report.errors.append(f"row {_input_pos(report.rows[i], i) + 2}: {r.error}")  # +2: header, 1-based


def _confirm(ctx: _Ctx, report: OptimizeReport, results: dict[int, _RowResult], input_csv: Path) -> None:
    """Record the copies that stay in the input CSV; only then are non-RL copies confirmed (a crash
    before leaves them unconfirmed in the journal, and the next run removes them)."""
    good = ("kept", "reused") if ctx.enable_rl else ("pending", "reused")
    confirmed = [r for res in results.values() for r in res.records if r.outcome in good]
    if not confirmed:
        return
    recorded = True
    try:
        edit = update_input_csv(input_csv, report.rows, confirmed, ctx.db, ctx.settings.csv_encoding)
        if edit is not None:
            report.csv_edit = edit
            report.notes.extend(edit.notes)
    except (RagError, OSError) as e:
        recorded = False
        what = str(e) if isinstance(e, RagError) else f"{input_csv}: cannot update ({e.strerror or e})"
        report.errors.append(what + ("" if ctx.enable_rl else "; the copies made for it were removed"))
    for r in confirmed:
        if not ctx.enable_rl:
            ctx.copies.release(r.copy, (r.row, r.attempt), keep=recorded)
            if r.created:
                r.outcome = "kept" if recorded else "rolled_back"
            if not recorded:
                continue
        row = report.rows[r.row]
        row[OPT_COL] = _add_alias(ctx.db, _effective_cell(row), r.original, r.copy)


def _one_line(e: BaseException) -> str:
    return one_line(e) or type(e).__name__


def _work_row(ctx: _Ctx, i: int, row: dict, missed: list[list[str]]) -> _RowResult:
    question = str(row.get("Question") or "")
    if ctx.enable_rl:
        return _rl_row(ctx, i, row, missed)
    res = _RowResult()
    errors = []
    for group in missed:  # one copy per missed page; a page that fails does not stop the others
        try:
            res.records.append(_propose_and_copy(ctx, i, question, group, attempt=1, tried=[]))
        except Exception as e:  # noqa: BLE001
            errors.append(_one_line(e))
    res.error = "; ".join(errors) or None
    return res


def _original_of(ctx: _Ctx, group: list[str]) -> str:
    """The first alias of a required page that exists in the database (normally the original)."""
    for alias in group:
        try:
            if resolve_in_db(ctx.db, alias).is_file():
                return alias
        except PathEscapeError:
            continue
    raise RagError(f"reference page not found in the database: {group[0]}")


def _propose_and_copy(ctx: _Ctx, i: int, question: str, group: list[str], *, attempt: int,
                      tried: list[dict]) -> CopyRecord:
    if ctx.stop.is_set():
        raise RagError("interrupted")
    original = _original_of(ctx, group)
    proposal = propose(ctx, question, original, tried=tried)
    rel, created = ctx.copies.place(original, proposal.folder, (i, attempt))
    return CopyRecord(row=i, question=question, original=original, copy=rel, attempt=attempt,
                      proposer=proposal.proposer, reason=proposal.reason, created=created,
                      outcome="pending" if created else "reused")


def propose(ctx: _Ctx, question: str, original: str, *, tried: list[dict]) -> Proposal:
    """Where a copy of `original` should go: the model's choice, validated (two tries); the deterministic
    rule offline, or when the model's folders are refused."""
    page_text = resolve_in_db(ctx.db, original).read_text(encoding="utf-8", errors="replace")
    tried_folders = {t["folder"] for t in tried}
    problems: list[str] = []
    if not ctx.provider.is_offline:
        from ragkit.core.jsonreply import chat_json

        messages = _proposal_messages(ctx, question, original, page_text, tried)
        for _ in range(2):
            data, usage = chat_json(ctx.provider, messages, schema=PROPOSAL_SCHEMA, schema_name="folder_proposal")
            ctx.add_usage(usage)
            raw = data.get("folder")
            try:
                folder = validate_folder(ctx.db, raw, original=original)
                check_folder_words(ctx.db, folder, page_text, original, question)
                if folder in tried_folders:
                    raise ValueError("that folder was already tried and did not help")
                return Proposal(folder, str(data.get("reason") or "")[:300], "llm")
            except (ValueError, PathEscapeError) as e:
                problems.append(f"{str(raw)[:80]!r}: {e}")
                messages = messages + [
                    {"role": "assistant", "content": json.dumps(data, ensure_ascii=False)},
                    {"role": "user", "content": f"That folder was refused: {e}. Propose another folder inside "
                                                f"{scope_of(original) or 'the database'!r}, following the rules."},
                ]
    for folder, reason in offline_proposals(question, original, page_text):
        try:
            folder = validate_folder(ctx.db, folder, original=original)
        except (ValueError, PathEscapeError):
            continue
        if folder not in tried_folders:
            if problems:
                return Proposal(folder, f"{reason} (model's folders refused: {'; '.join(problems)})", "fallback")
            return Proposal(folder, reason, "offline")
    raise NoFolderLeft(f"no acceptable folder left for {original}" + (f": {'; '.join(problems)}" if problems else ""))


def _proposal_messages(ctx: _Ctx, question: str, original: str, page_text: str, tried: list[dict]) -> list[dict]:
    scope = scope_of(original)
    parts = original.split("/")
    focus = "/".join(parts[:2]) if len(parts) > 2 else scope
    excerpt = parse_page(page_text)[1].strip()
    if len(excerpt) > PAGE_EXCERPT:
        excerpt = excerpt[:PAGE_EXCERPT] + "\n[... trimmed]"
    pages = ctx.index.pages(scope or None)
    user = [
        f"Question: {question}",
        f"Missed page: {original}",
        f"Page content (trimmed):\n{excerpt}",
        f"Existing folders in {scope or 'the database'!r} (page counts include sub-folders):\n"
        f"{folder_listing(pages, scope, focus)}",
    ]
    if tried:
        lines = [f"- {t['folder']}: {t['outcome']}" for t in tried]
        user.append("Earlier attempts that did NOT help (choose a different folder):\n" + "\n".join(lines))
    return [{"role": "system", "content": _SYSTEM.format(scope=scope or "the database root", depth=MAX_DEPTH)},
            {"role": "user", "content": "\n\n".join(user)}]


def _rl_row(ctx: _Ctx, i: int, row: dict, missed: list[list[str]]) -> _RowResult:
    """Up to MAX_ATTEMPTS of propose -> copy -> re-ask -> score; roll back each attempt that did not help.

    Every attempt proposes a copy for every page the batch missed (an attempt's copies are rolled back
    together, so a page found in a failed attempt is missed again). A copy is kept when the re-ask reached
    Ref Recall >= 1 and retrieved that copy; a copy nobody retrieved did not help, even on success."""
    question = str(row.get("Question") or "")
    base_cell = _effective_cell(row)
    originals = [_original_of(ctx, g) for g in missed]
    tried: dict[str, list[dict]] = {o: [] for o in originals}
    res = _RowResult()
    final = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        made: list[CopyRecord] = []
        try:
            for original in originals:
                made.append(_propose_and_copy(ctx, i, question, [original], attempt=attempt,
                                              tried=tried[original]))
            answer = ctx.asker(question)
        except BaseException as e:
            for r in made:
                ctx.copies.release(r.copy, (i, attempt), keep=False)
                r.outcome = "rolled_back" if r.created else "unused"
            res.records.extend(made)
            if not isinstance(e, Exception):
                raise
            if not (isinstance(e, NoFolderLeft) and final is not None):  # else: nothing left to try
                res.error = f"attempt {attempt}: {_one_line(e)}"
            break
        ctx.add_usage(answer.usage)
        retrieved = [s.path for s in answer.sources]
        got = {strip_db_prefix(ctx.db, p) for p in retrieved}
        cell = base_cell
        for r in made:
            cell = _add_alias(ctx.db, cell, r.original, r.copy)
        recall, _ = _recall(_groups(ctx.db, cell), got)
        success = answer.error is None and recall is not None and recall >= 1.0
        kept_cell = base_cell
        for r in made:
            helped = success and r.copy in got
            ctx.copies.release(r.copy, (i, attempt), keep=helped)  # also a claim on another row's copy
            r.outcome = ("kept" if r.created else "reused") if helped else ("rolled_back" if r.created else "unused")
            if helped:
                kept_cell = _add_alias(ctx.db, kept_cell, r.original, r.copy)
            else:
                what = ("the re-asked agent retrieved " + (", ".join(sorted(got)[:5]) or "nothing")
                        if not success else "the copy was not retrieved")
                tried[r.original].append({"folder": r.copy.rsplit("/", 1)[0], "outcome": what})
        res.records.extend(made)
        final = (answer, retrieved, kept_cell, attempt)
        res.recall = _recall(_groups(ctx.db, kept_cell), got)[0]
        if answer.error:
            res.error = f"attempt {attempt}: {answer.error}"
            break
        if success:
            break
    if final is not None:
        res.row = _final_row(ctx, row, *final)
    return res


def _final_row(ctx: _Ctx, row: dict, answer, retrieved: list[str], opt_cell: str, attempt: int) -> dict:
    """The row as the final attempt left it: answer, retrieved files, reference metrics against the
    Reference Document and the optimized cell (copies kept), then every other column scored again."""
    out = {k: v for k, v in row.items() if not k.startswith(("Ref ", "Opt Ref "))}
    out["RAG Answer"] = answer.answer
    out["Retrieved Files"] = join_multi(retrieved)
    out["Attempts"] = attempt
    if normalize_ref(opt_cell) != normalize_ref(str(row.get(REF_COL) or "")):
        out[OPT_COL] = opt_cell
    out.update(ctx.scorer.reference_columns(out, retrieved))  # a kept copy is the page it copies
    scored, judged = ctx.scorer.rescore(out, answer)
    ctx.add_usage(Usage(), judged)
    return scored


def update_input_csv(input_csv: Path, rows: list[dict], confirmed: list[CopyRecord], db: Path,
                     encoding: str | None = None) -> ColumnEdit | None:
    """Add/extend `Optimized Reference Document` = `original|copy` in the input CSV (csvedit.set_column: the
    file keeps its encoding, line endings and columns, the new column goes last; a backup first). None when
    nothing changed."""
    df = read_csv(input_csv, required=("Question",), encoding=encoding)
    has = OPT_COL in df.columns
    cells: dict[int, str] = {}
    where: dict[int, int] = {}
    for r in confirmed:
        question = str(rows[r.row].get("Question") or "")
        if r.row not in where:
            pos = _locate(df, _input_pos(rows[r.row], r.row), question, set(where.values()))
            if pos is None:
                raise RagError(f"{input_csv}: no row with the question {question[:60]!r}; "
                               f"`{OPT_COL}` not updated")
            where[r.row] = pos
        pos = where[r.row]
        cur = cells.get(pos) or (str(df.at[pos, OPT_COL] or "").strip() if has else "")
        cur = cur or str(df.at[pos, REF_COL] if REF_COL in df.columns else "")
        cells[pos] = _add_alias(db, cur, r.original, r.copy)
    changed = {pos: cell for pos, cell in cells.items() if not has or cell != df.at[pos, OPT_COL]}
    return set_column(input_csv, OPT_COL, changed, encoding=encoding) if changed else None


def _input_pos(row: dict, i: int) -> int:
    """The row's position in the input CSV: batch passes it as `_pos` (it skips rows without a question)."""
    pos = row.get("_pos")
    return pos if isinstance(pos, int) and not isinstance(pos, bool) else i


def _locate(df, index: int, question: str, used: set[int]) -> int | None:
    """The input row a result row came from: the same position and question, else the first unused row
    with that question."""
    if index < len(df) and index not in used and str(df.at[index, "Question"]) == question:
        return index
    for pos, q in enumerate(df["Question"]):
        if pos not in used and str(q) == question:
            return pos
    return None
