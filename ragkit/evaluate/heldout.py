"""Measuring an optimization honestly: which questions may drive copies (training) and which only measure them
(held out, or a second CSV), and Ref Recall before and after on each; a retrieved copy counts as its page.

    split_holdout(rows, fraction) -> set[int];  measure(items, settings, *, asker, aliases) -> Measure
    optimize_and_measure(report, rows, scorer, asker, settings, opts, progress) -> rows"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragkit.core.config import Settings
from ragkit.core.models import Usage
from ragkit.core.paths import normalize_ref
from ragkit.core.text import one_line
from ragkit.evaluate.metrics import reference_metrics

DEFAULT_HOLDOUT = 0.25
REFERENCE = "Reference Document"
SPLIT_COLUMN = "Optimize Split"  # the same name as scoring.SPLIT (a results column)
TRAIN, HELD_OUT, VALIDATE = "train", "held-out", "validate"


def _answerable(row: Mapping[str, Any]) -> bool:
    return bool(str(row.get(REFERENCE) or "").strip()) and not str(row.get("Error") or "").strip()


def split_holdout(rows: list[Mapping[str, Any]], fraction: float) -> set[int]:
    """The indices of the held-out rows: fraction x answerable rows (rounded half up; at least one and not all
    when there are two or more), chosen by the SHA-256 of
    the question text (ties by position), so the same CSV gives the same split on every machine and a row
    keeps its side when other rows are added or reordered."""
    if not 0 <= fraction < 1:
        raise ValueError(f"the held-out fraction must be in [0, 1), got {fraction}")
    candidates = [i for i, r in enumerate(rows) if _answerable(r)]
    n = int(fraction * len(candidates) + 0.5)
    if fraction > 0 and len(candidates) >= 2:
        n = min(max(n, 1), len(candidates) - 1)  # a held-out figure, and something left to train on
    ranked = sorted(candidates, key=lambda i: (hashlib.sha256(str(rows[i].get("Question") or "").encode()
                                                              ).hexdigest(), i))
    return set(ranked[:n])


def alias_map(copies: Iterable[tuple[str, str]]) -> dict[str, str]:
    """{copy: original} in normalised Reference Document form."""
    return {normalize_ref(c): normalize_ref(o) for c, o in copies}


def recall_with_copies(ref_cell: str, retrieved: Iterable[str], aliases: Mapping[str, str],
                       db: Path | None = None) -> float | None:
    """Ref Recall where a retrieved copy counts as its original: one in `aliases`, and with `db` any page that is
    byte-for-byte a required page (scoring.with_copies, the rule the batch's own Ref Recall follows, so a copy an
    earlier run kept counts the same before and after; scoring.score_references, which also compares paths as the
    pages they name)."""
    from ragkit.evaluate.scoring import score_references

    got = []
    for p in retrieved:
        n = normalize_ref(str(p))
        got.append(aliases.get(n, n))
    if db is None:
        return reference_metrics(ref_cell, got, [])["Recall"]
    return score_references(ref_cell, got, [], db)["Recall"]


def mean_recall(rows: Iterable[Mapping[str, Any]]) -> tuple[float | None, int]:
    """Mean of the rows' `Ref Recall` cells where defined, and how many rows that is."""
    from ragkit.evaluate.metrics import parse_number

    vals = [v for v in (parse_number(r.get("Ref Recall")) for r in rows) if v is not None]
    return (sum(vals) / len(vals) if vals else None), len(vals)


@dataclass
class Measure:
    recall: float | None = None
    rows: int = 0
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)


def measure(items: list[tuple[str, str]], settings: Settings, *, asker: Callable[[str], Any],
            aliases: Mapping[str, str], progress: bool = False, label: str = "measure") -> Measure:
    """Ask each (question, Reference Document) again and return the mean Ref Recall (copies counted as their
    originals: `aliases`, and any byte-for-byte copy in `settings.db`). Only references are scored: no judge is
    called. A failed question is an error, not a 0."""
    from ragkit.core.progress import progress_bar

    out = Measure()
    todo = [(q, ref) for q, ref in items if str(ref or "").strip()]
    if not todo:
        return out
    recalls: list[float] = []

    def one(q: str, ref: str) -> tuple[float | None, Usage, str | None]:
        ans = asker(q)
        if ans.error:
            return None, ans.usage, ans.error
        return recall_with_copies(ref, [s.path for s in ans.sources], aliases, Path(settings.db)), ans.usage, None

    with ThreadPoolExecutor(max_workers=max(1, min(settings.workers, len(todo))),
                            thread_name_prefix="measure") as pool, \
            progress_bar(total=len(todo), desc=label, unit="q", file=sys.stderr, disable=not progress) as bar:
        futs = {pool.submit(one, q, ref): q for q, ref in todo}
        for fut in as_completed(futs):
            try:
                r, usage, error = fut.result()
            except Exception as e:  # noqa: BLE001 - one question's failure must not stop the measurement
                r, usage, error = None, Usage(), one_line(e) or type(e).__name__
            out.usage.add(usage)
            if error:
                out.errors.append(f"{label} {one_line(futs[fut], 50)!r}: {error}")
            elif r is not None:
                recalls.append(r)
            bar.update(1)
    out.rows = len(recalls)
    out.recall = sum(recalls) / len(recalls) if recalls else None
    return out


@dataclass
class SplitFigures:
    name: str  # train | held-out | validate
    before: float | None = None
    after: float | None = None
    rows_before: int = 0
    rows_after: int = 0


@dataclass
class OptimizeMeasure:
    """Ref Recall before/after optimization per split (train, held-out or validate)."""

    holdout: float | None = None  # the fraction, when the CSV was split
    validate_path: str | None = None
    splits: list[SplitFigures] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    unchanged: bool = False  # the run kept no copy: the tree is as it was, so after = before, nothing re-asked

    def get(self, name: str) -> SplitFigures | None:
        return next((s for s in self.splits if s.name == name), None)

    def trusted(self) -> SplitFigures | None:
        """The figure a user should trust: the held-out (or validate) questions'."""
        return self.get(HELD_OUT) or self.get(VALIDATE)

    def summary_rows(self) -> list[dict]:
        """Summary CSV rows (shape metrics.SUMMARY_COLUMNS): Mean = the recall, Rows = questions it covers."""
        out = []
        for s in self.splits:
            who = {TRAIN: "training questions (drove the copies)", HELD_OUT: "held-out questions (drove no copy)",
                   VALIDATE: f"questions of {self.validate_path} (drove no copy)"}[s.name]
            title = {TRAIN: "Train", HELD_OUT: "Held-out", VALIDATE: "Validate"}[s.name]
            for when, value, n in (("Before", s.before, s.rows_before), ("After", s.after, s.rows_after)):
                out.append({"Metric": f"{title} Ref Recall {when} Optimize", "Mean": value, "Micro": None,
                            "Total": None, "Rows": n, "Covers": f"answerable {who}"})
        return out

    def lines(self) -> list[str]:
        def f(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3f}"

        out = []
        for s in self.splits:
            gain = "" if s.before is None or s.after is None else f" ({s.after - s.before:+.3f})"
            what = {TRAIN: "train (drove the copies)", HELD_OUT: "held-out (trust this one)",
                    VALIDATE: f"validate {self.validate_path} (trust this one)"}[s.name]
            out.append(f"Ref Recall {what}: before {f(s.before)} -> after {f(s.after)}{gain}; "
                       f"{s.rows_after} questions")
        if self.unchanged:
            out.append("no copy was kept, so the database is as it was: after = before (no question asked again)")
        elif self.holdout == 0 and not self.validate_path:
            out.append("no held-out questions (--holdout 0): the figures above are on the questions that named "
                       "the copies and show memorisation, not a better tree")
        return out


def optimize_and_measure(report: Any, rows: list[dict], scorer: Any, asker: Callable[[str], Any],
                         settings: Settings, opts: Any, progress: bool) -> list[dict]:
    """`rag batch --optimize|--enable-rl` after the batch: split, let the training rows' misses drive copies
    (ragkit.optimize), then ask every measured question again. Fills report.optimize / report.measure and
    returns the rows (RL: the final attempts)."""
    from ragkit.core.errors import RagError
    from ragkit.evaluate.scoring import QUESTION, REFERENCE, _one_line, fill_opt_ref
    from ragkit.optimize import optimize_missed

    result = OptimizeMeasure(holdout=None if opts.validate else opts.holdout,
                             validate_path=str(opts.validate) if opts.validate else None)
    held = split_holdout(rows, opts.holdout) if result.holdout else set()
    train = [i for i, r in enumerate(rows) if i not in held]
    for i, r in enumerate(rows):
        if result.holdout is not None:
            r[SPLIT_COLUMN] = HELD_OUT if i in held else TRAIN
    splits = [(TRAIN, [rows[i] for i in train])]
    if held:
        splits.append((HELD_OUT, [rows[i] for i in sorted(held)]))
    ask_kw = dict(asker=asker)
    validate_items: list[tuple[str, str]] = []
    validate_before = None
    if opts.validate is not None:
        validate_items = opts.validate_items
        validate_before = measure(validate_items, settings, aliases={}, progress=progress,
                                  label="validate (before)", **ask_kw)
    figures = []
    for name, part in splits:
        before, n = mean_recall(part)
        figures.append(SplitFigures(name, before=before, rows_before=n))
    if validate_before is not None:
        figures.append(SplitFigures(VALIDATE, before=validate_before.recall, rows_before=validate_before.rows))
        result.usage.add(validate_before.usage)
        result.errors += validate_before.errors

    try:
        opt = optimize_missed(rows, input_csv=report.input_path, settings=settings, scorer=scorer, asker=asker,
                              enable_rl=opts.enable_rl, index=scorer.index, progress=progress, only=set(train))
    except RagError as e:
        report.errors.append(f"optimize: {_one_line(e)}")
        opt = None
    if opt is None:
        return rows
    report.optimize = opt
    rows = opt.rows
    report.errors.extend(f"optimize: {e}" for e in opt.errors)
    report.answer_usage.add(opt.usage)  # proposals and re-asks
    report.judge_usage.add(opt.judge_usage)
    fill_opt_ref(rows, scorer)

    result.splits = figures
    report.measure = result
    if report.answered_before_copies:
        opt.notes.append(f"{report.answered_before_copies} row(s) were answered before an interrupted run of this "
                         "command kept its copies (`rag optimize undo --list` shows that run): Ref Recall after is "
                         "measured again")
    if not opt.kept and not report.answered_before_copies:
        # no copy of this run stayed and the tree is the one the rows were answered in: asking again would only
        # add noise
        result.unchanged = True
        for fig in figures:
            fig.after, fig.rows_after = fig.before, fig.rows_before
        report.answer_usage.add(result.usage)
        report.errors.extend(f"optimize: {e}" for e in result.errors)
        return rows
    # after: every measured question asked again against the optimized tree (copies count as their pages)
    aliases = alias_map(opt.kept_copies(settings.db))
    for fig in figures:
        if fig.name == VALIDATE:
            items = validate_items
        else:
            part = [rows[i] for i in (train if fig.name == TRAIN else sorted(held))]
            items = [(str(r.get(QUESTION) or ""), str(r.get(REFERENCE) or "")) for r in part
                     if str(r.get(REFERENCE) or "").strip() and not r.get("Error")]
        m = measure(items, settings, aliases=aliases, progress=progress, label=f"{fig.name} (after)", **ask_kw)
        fig.after, fig.rows_after = m.recall, m.rows
        result.usage.add(m.usage)
        result.errors += m.errors
    report.answer_usage.add(result.usage)
    report.errors.extend(f"optimize: {e}" for e in result.errors)
    return rows
