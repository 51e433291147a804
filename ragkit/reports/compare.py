"""`rag compare OLD.csv NEW.csv`: each metric's change with a paired test, and the questions that moved.

Questions are paired by their text (the n-th occurrence of a repeated question with the n-th). A metric's
delta is the mean over the questions where BOTH runs define it (so a question added to the new run does
not move the delta), with a paired test: McNemar's exact test for yes/no columns, a paired bootstrap of
the mean difference otherwise. A question got worse when one of its outcome metrics dropped and none
rose (better: the reverse; both: "mixed").

A paired question whose gold differs between the two CSVs (Ground Truth, Reference Document, Page, Checklist or
Task) measures two different questions: it is left out of the metrics, the per-question verdicts and the gates, as
a question only one run asked is, and `left_out` says which and why. A judge column's mean and McNemar test cover
the pairs a judge measured on both sides (a refusal of an unanswerable question passed by rule is no measurement),
the rows the summary and the HTML report count. When the run records say the runs answered different question
sets or over different database pages, `caveats` says a difference may come from the inputs.

`compare_files(old, new, fail_on_regression=DELTA)` (`rag compare --fail-on-regression`) also checks every quality
metric's fall against DELTA: `gates` holds one RegressionGate per metric (metric, old, new, delta, threshold, p,
failed) and `gate_failed` whether any failed (None when no gate was asked), in `--format json` too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ragkit.core.text import clean_json
from ragkit.evaluate.runinfo import (
    ANSWER_FIELDS,
    RunInfo,
    differing_fields,
    run_labels,
    same_fingerprint_recipe,
    show_field,
)
from ragkit.evaluate.runs import BINARY, HEADLINE, RULE_METRICS, Row, Run, load_run, mcnemar, paired_bootstrap

# Per-question outcome: what "this question got better / worse" is judged on.
OUTCOME = ["Ref Recall", "Checklist Recall", "Judge Overall", "Contain Match", "LLM Accuracy"]
# Metrics whose direction is not a quality: --fail-on-regression leaves them out (a refusal is right for
# unanswerable questions; Confidence is how sure the answerer was, not how right).
_NO_DIRECTION = {"Refused", "Confidence"}


@dataclass
class MetricDelta:
    metric: str
    n: int  # paired questions where both runs define it
    old: float | None
    new: float | None
    delta: float | None
    test: str  # "mcnemar" | "paired bootstrap" | ""
    p: float | None
    ci: tuple[float, float] | None = None  # 95 % interval of the delta (bootstrap)
    worse: int = 0  # questions where it went down
    better: int = 0
    by_rule: int = 0  # pairs left out of n: a side was passed by the refusal rule, not judged

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < 0.05


@dataclass
class RegressionGate:
    """--fail-on-regression on one quality metric: failed when its mean fell by more than `threshold`."""
    metric: str
    old: float
    new: float
    delta: float
    threshold: float
    p: float | None  # the paired test's p-value (reported, not used: the gate is on the delta)
    n: int  # paired questions
    failed: bool

    def line(self) -> str:
        """`gate failed: Ref Recall fell 0.9667 -> 0.5667 (-0.4000, more than 0.02; p=0.003, 15 paired)`."""
        p = self.p if self.p is not None else float("nan")
        return (f"gate failed: {self.metric} fell {self.old:.4f} -> {self.new:.4f} ({self.delta:+.4f}, more than "
                f"{self.threshold:g}; p={p:.3g}, {self.n} paired)")


@dataclass
class QuestionChange:
    question: str
    old_row: int  # 1-based data row in each CSV
    new_row: int
    changes: dict[str, tuple[float, float]]  # metric -> (old, new), only the ones that changed
    verdict: str  # "better" | "worse" | "mixed"


@dataclass
class LeftOut:
    """A paired question left out: its gold differs between the two results CSVs."""
    question: str
    old_row: int  # 1-based data row in each CSV
    new_row: int
    differs: list[str]  # the gold columns that differ


@dataclass
class Comparison:
    old: str
    new: str
    paired: int
    only_old: int
    only_new: int
    metrics: list[MetricDelta] = field(default_factory=list)
    old_label: str = ""  # each run labelled by what differs in their run records (file stem without one)
    new_label: str = ""
    old_run: RunInfo | None = None
    new_run: RunInfo | None = None
    differ: list[str] = field(default_factory=list)  # the run-record fields that differ
    not_measured: dict[str, list[str]] = field(default_factory=dict)  # metric -> runs where no judge measured it
    worse: list[QuestionChange] = field(default_factory=list)
    better: list[QuestionChange] = field(default_factory=list)
    mixed: list[QuestionChange] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)  # paired by text, but their gold differs
    caveats: list[str] = field(default_factory=list)  # the records say the inputs differ
    gates: list[RegressionGate] = field(default_factory=list)  # check_gates: every quality metric's verdict
    gate_failed: bool | None = None  # None: no gate was checked

    def metric(self, name: str) -> MetricDelta | None:
        return next((m for m in self.metrics if m.metric == name), None)

    def regressions(self, tolerance: float) -> list[MetricDelta]:
        """Quality metrics whose mean fell by more than `tolerance`."""
        return [m for m in self.metrics if m.metric not in _NO_DIRECTION and m.delta is not None
                and m.delta < -tolerance - 1e-12]

    def check_gates(self, tolerance: float) -> list[RegressionGate]:
        """--fail-on-regression: a gate per quality metric with a delta (a fall of more than `tolerance` fails it);
        sets `gates` and `gate_failed` and returns the failed ones. A negative tolerance is a usage error."""
        check_tolerance(tolerance)
        failing = {id(m) for m in self.regressions(tolerance)}
        self.gates = [RegressionGate(m.metric, m.old, m.new, m.delta, tolerance, m.p, m.n, id(m) in failing)
                      for m in self.metrics if m.metric not in _NO_DIRECTION and m.delta is not None
                      and m.old is not None and m.new is not None]
        self.gate_failed = any(g.failed for g in self.gates)
        return [g for g in self.gates if g.failed]

    def to_json(self) -> dict:
        d = asdict(self)
        for side in ("old_run", "new_run"):
            info = getattr(self, side)
            # the answers' fingerprints are for `rag eval`, not for a reader
            d[side] = {k: v for k, v in info.to_json().items() if k != "answers"} if info is not None else None
        for m in d["metrics"]:
            m["ci"] = list(m["ci"]) if m["ci"] is not None else None
        for kind in ("worse", "better", "mixed"):
            for q in d[kind]:
                q["changes"] = {k: {"old": a, "new": b} for k, (a, b) in q["changes"].items()}
        return d


def check_tolerance(tolerance: float) -> None:
    """--fail-on-regression's DELTA: 0 or more (a usage error otherwise, also NaN)."""
    from ragkit.core.errors import UsageError

    if not tolerance >= 0:
        raise UsageError(f"fail_on_regression must be 0 or more, got {tolerance}",
                         flags={"fail_on_regression": "--fail-on-regression"})


# What a question asks for: a pair whose cells differ in one of these measures two different questions.
GOLD = ("Ground Truth", "Reference Document", "Page", "Checklist", "Task")


def _gold(row: Row, column: str) -> str:
    value = " ".join(row.get(column).split())
    return (value.lower() or "qa") if column == "Task" else value  # an empty Task cell is a qa question


def gold_differs(a: Row, b: Row) -> list[str]:
    """The gold columns whose cells differ between two paired rows (whitespace aside); a column only one CSV has
    tells nothing."""
    return [c for c in GOLD if (c in a.cells and c in b.cells or c == "Task") and _gold(a, c) != _gold(b, c)]


def _pairs(old: Run, new: Run) -> tuple[list[tuple[Row, Row]], list[LeftOut]]:
    """The pairs that ask the same question, and those left out because their gold differs."""
    by_key = {r.key: r for r in new.rows}
    pairs, left = [], []
    for r in old.rows:
        b = by_key.get(r.key)
        if b is None:
            continue
        differs = gold_differs(r, b)
        if differs:
            left.append(LeftOut(r.question, r.index + 1, b.index + 1, differs))
        else:
            pairs.append((r, b))
    return pairs, left


def input_caveats(old: RunInfo | None, new: RunInfo | None) -> list[str]:
    """One line when the records say the runs did not answer the same questions or over the same pages
    (question CSV fingerprint, database fingerprint, converter version); nothing when a record does not say."""
    def both(name: str) -> tuple[object, object] | None:
        a, b = getattr(old, name, None), getattr(new, name, None)
        return (a, b) if a is not None and b is not None and a != b else None

    parts = []
    if both("questions_sha256"):
        parts.append("the same questions")
    # digests of two recipes (a record written before the `source:` path was left out) tell nothing
    db = both("database_sha256") if same_fingerprint_recipe([old, new]) else None
    conv, pages = both("converter"), both("database_pages")
    if db or conv or pages:
        details = ([f"database {pages[0]} -> {pages[1]} pages"] if pages else
                   ["database content differs"] if db else [])
        if conv:
            details.append(f"converter {conv[0]} -> {conv[1]}")
        parts.append(f"over the same pages ({', '.join(details)})")
    if not parts:
        return []
    return [f"the runs did not answer {' / '.join(parts)}: a difference may come from the inputs, not the system"]


def left_out_line(left: list[LeftOut]) -> str:
    """"1 paired question left out: its Reference Document differs between the runs (row 1)"."""
    if not left:
        return ""
    columns = [c for c in GOLD if any(c in x.differs for x in left)]
    what = " / ".join(columns)
    rows = ", ".join(str(x.new_row) for x in left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
    if len(left) == 1:
        return f"1 paired question left out: its {what} differs between the runs (row {rows})"
    return (f"{len(left)} paired questions left out: their {what} differs between the runs (rows {rows}; "
            "they measure different questions)")


def compare_runs(old: Run, new: Run, *, resamples: int = 2000, seed: int = 0) -> Comparison:
    pairs, left = _pairs(old, new)
    old_keys, new_keys = {r.key for r in old.rows}, {r.key for r in new.rows}
    cmp = Comparison(old=str(old.path), new=str(new.path), paired=len(pairs),
                     only_old=len(old_keys - new_keys), only_new=len(new_keys - old_keys),
                     old_label=old.name, new_label=new.name, old_run=old.info, new_run=new.info,
                     differ=differing_fields([old.info, new.info]), left_out=left,
                     caveats=input_caveats(old.info, new.info))
    shared = [m for m in old.quality_metrics() if m in set(new.quality_metrics())]
    ordered = [m for m in HEADLINE if m in shared] + [m for m in shared if m not in HEADLINE]
    for m in ordered:
        # a judge column that no judge measured in a run (only refusals passed by rule) is no measurement
        unmeasured = [r.name for r in (old, new) if m in RULE_METRICS and not r.values(m)]
        if unmeasured:
            cmp.not_measured[m] = unmeasured
            continue
        defined = [(a, b) for a, b in pairs if a.values.get(m) is not None and b.values.get(m) is not None]
        # a judge column's 1 set by the refusal rule is no measurement: the pairs a judge measured on both sides,
        # the rows the summary and the report count (one metric, one value)
        judged = [(a, b) for a, b in defined if not (m in RULE_METRICS and (a.by_rule or b.by_rule))]
        both = [(a.values[m], b.values[m]) for a, b in judged]
        rule = len(defined) - len(judged)
        if not both:
            continue
        n = len(both)
        mo = sum(a for a, _ in both) / n
        mn = sum(b for _, b in both) / n
        diffs = [b - a for a, b in both]
        worse = sum(1 for d in diffs if d < 0)
        better = sum(1 for d in diffs if d > 0)
        if m in BINARY:
            ci, _ = paired_bootstrap(diffs, resamples=resamples, seed=seed)
            md = MetricDelta(m, n, mo, mn, mn - mo, "mcnemar", mcnemar(worse, better), ci, worse, better, rule)
        else:
            ci, p = paired_bootstrap(diffs, resamples=resamples, seed=seed)
            md = MetricDelta(m, n, mo, mn, mn - mo, "paired bootstrap" if p is not None else "", p, ci,
                             worse, better, rule)
        cmp.metrics.append(md)
    outcome = [m for m in OUTCOME if m in shared and m not in cmp.not_measured]
    for a, b in pairs:
        changes = {m: (a.values[m], b.values[m]) for m in outcome
                   if a.values.get(m) is not None and b.values.get(m) is not None
                   and a.values[m] != b.values[m]}
        if not changes:
            continue
        down = any(n < o for o, n in changes.values())
        up = any(n > o for o, n in changes.values())
        verdict = "mixed" if down and up else ("worse" if down else "better")
        qc = QuestionChange(a.question, a.index + 1, b.index + 1, changes, verdict)
        getattr(cmp, verdict).append(qc)
    return cmp


def compare_files(old: Path | str, new: Path | str, *, encoding: str | None = None,
                  fail_on_regression: float | None = None) -> Comparison:
    """Compare two results CSVs; two files without a question in common are an error (not "no change").
    `fail_on_regression`: check the gates (Comparison.check_gates; a negative value is a usage error, raised before
    the files are read)."""
    from ragkit.core.errors import RagError

    if fail_on_regression is not None:
        check_tolerance(fail_on_regression)  # the usage error before the files are read
    runs = [load_run(old, encoding=encoding), load_run(new, encoding=encoding)]
    for r, label in zip(runs, run_labels([r.info for r in runs], [r.name for r in runs]), strict=True):
        r.name = label
    cmp = compare_runs(*runs)
    if not cmp.paired and cmp.left_out:
        raise RagError(f"{new}: every question in common with {old} has other gold ({left_out_line(cmp.left_out)}); "
                       "compare two runs of the same question CSV")
    if not cmp.paired:
        raise RagError(f"{new}: no question in common with {old}; compare two runs of the same question CSV")
    if fail_on_regression is not None:
        cmp.check_gates(fail_on_regression)
    return cmp


# -- output -------------------------------------------------------------------------------------------
def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _signed(v: float | None) -> str:
    return "-" if v is None else f"{v:+.3f}"


def _p(v: float | None) -> str:
    if v is None:
        return "-"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _short(text: str, n: int = 90) -> str:
    s = " ".join(text.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _change_text(qc: QuestionChange) -> str:
    return ", ".join(f"{m} {_f(a, 2)}→{_f(b, 2)}" for m, (a, b) in qc.changes.items())


RUN_FIELDS = (("strategy", "strategy"), ("provider", "provider"), ("model", "model"), ("judge_model", "judge"),
               ("k", "k"), ("context_tokens", "context tokens"), ("version", "ragkit"), ("database", "database"),
               ("index", "index"), ("date", "date"))


def run_line(info: RunInfo | None) -> str:
    """A run record in one line ("no run record" for a file written before records existed)."""
    if info is None:
        return "no run record (<results>.run.json): who answered is unknown"
    parts = [f"{label} {'–' if getattr(info, f) in (None, '') else getattr(info, f)}" for f, label in RUN_FIELDS
             if not (info.retrieval_only and f in ANSWER_FIELDS)  # no model or judge was asked
             and not (f == "index" and info.index is None)  # a record written before the index was recorded
             and not (f == "context_tokens" and info.context_tokens is None)]  # a strategy that has no such budget
    # what a reviewer checks first in a CI summary: the code, and which pages and questions, short (as in labels)
    parts += [show_field(f, getattr(info, f)) for f in ("commit", "database_sha256", "questions_sha256")
              if getattr(info, f)]
    return ", ".join(parts)


DOCS = "docs/evaluation.md"  # where every metric is defined in full (one line each: ragkit.reports.glossary)


def _pointer() -> str:
    return (f"what each metric means: {DOCS} (Metrics); n = the paired questions both runs define it for, the "
            "judged ones only for a judge column")


def _notes(cmp: Comparison) -> list[str]:
    out = []
    for m, runs in cmp.not_measured.items():
        out.append(f"{m}: not measured in {' and '.join(runs)} (no judge; refusals passed by rule are not a "
                   "measurement)")
    for info, label in ((cmp.old_run, cmp.old_label), (cmp.new_run, cmp.new_label)):
        for note in (info.notes if info else []):
            out.append(f"{label}: {note}")
    return out


def format_text(cmp: Comparison, *, limit: int = 20) -> str:
    lines = [*(f"caveat: {c}" for c in cmp.caveats),
             f"old: {cmp.old_label}  ({cmp.old})", f"     {run_line(cmp.old_run)}",
             f"new: {cmp.new_label}  ({cmp.new})", f"     {run_line(cmp.new_run)}",
             f"paired questions: {cmp.paired} (only in old: {cmp.only_old}, only in new: {cmp.only_new}"
             + (f", left out: {len(cmp.left_out)}" if cmp.left_out else "") + ")"]
    if cmp.left_out:
        lines.append(left_out_line(cmp.left_out))
    lines.append("")
    w = max([len(m.metric) for m in cmp.metrics] + [6])
    lines.append(f"{'metric':<{w}}  {'n':>4}  {'old':>6}  {'new':>6}  {'delta':>7}  {'95% CI':>18}  "
                 f"{'p':>6}  test")
    for m in cmp.metrics:
        star = " *" if m.significant else ""
        lines.append(f"{m.metric:<{w}}  {m.n:>4}  {_f(m.old):>6}  {_f(m.new):>6}  {_signed(m.delta):>7}  "
                     f"{_ci(m.ci):>18}  {_p(m.p):>6}  {m.test}{star}")
    lines.append("(* p < 0.05)")
    ruled = [m for m in cmp.metrics if m.by_rule]
    if ruled:
        lines.append(_ruled_line(ruled))
    lines += _notes(cmp)
    for title, items in (("worse", cmp.worse), ("better", cmp.better), ("mixed", cmp.mixed)):
        lines.append("")
        lines.append(f"{title}: {len(items)} question(s)")
        for qc in items[:limit]:
            lines.append(f"  row {qc.new_row}: {_short(qc.question)} — {_change_text(qc)}")
        if len(items) > limit:
            lines.append(f"  … and {len(items) - limit} more (--format json lists all)")
    lines += ["", _pointer()]
    return "\n".join(lines)


def _ruled_line(ruled: list[MetricDelta]) -> str:
    return ("left out of n, passed by rule (a refusal of an unanswerable question, not judged; as in the summary): "
            + ", ".join(f"{m.metric} {m.by_rule}" for m in ruled))


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_markdown(cmp: Comparison, *, limit: int = 20) -> str:
    """GitHub-flavoured markdown for a CI job summary."""
    lines = [f"### rag compare: {cmp.old_label} → {cmp.new_label}", "",
             *(f"> **caveat**: {_md_cell(c)}\n" for c in cmp.caveats),
             f"- old: `{Path(cmp.old).name}`: {run_line(cmp.old_run)}",
             f"- new: `{Path(cmp.new).name}`: {run_line(cmp.new_run)}", "",
             f"{cmp.paired} paired questions (only in old: {cmp.only_old}, only in new: {cmp.only_new}"
             + (f", left out: {len(cmp.left_out)}" if cmp.left_out else "") + "); "
             f"**{len(cmp.worse)} worse**, {len(cmp.better)} better, {len(cmp.mixed)} mixed.", "",
             *([f"**{_md_cell(left_out_line(cmp.left_out))}**", ""] if cmp.left_out else []),
             "| metric | n | old | new | delta | 95% CI | p | test |", "|---|---:|---:|---:|---:|---|---:|---|"]
    for m in cmp.metrics:
        delta = _signed(m.delta)
        if m.significant:
            delta = f"**{delta}**"
        lines.append(f"| {m.metric} | {m.n} | {_f(m.old)} | {_f(m.new)} | {delta} | {_ci(m.ci)} | {_p(m.p)} "
                     f"| {m.test} |")
    ruled = [m for m in cmp.metrics if m.by_rule]
    notes = ([_ruled_line(ruled)] if ruled else []) + _notes(cmp)
    if notes:
        lines += [""] + [f"- {_md_cell(n)}" for n in notes]
    for title, items in (("Worse", cmp.worse), ("Better", cmp.better), ("Mixed", cmp.mixed)):
        if not items:
            continue
        lines += ["", f"<details><summary>{title}: {len(items)} question(s)</summary>", "",
                  "| row | question | change |", "|---:|---|---|"]
        for qc in items[:limit]:
            lines.append(f"| {qc.new_row} | {_md_cell(_short(qc.question))} | {_md_cell(_change_text(qc))} |")
        if len(items) > limit:
            lines.append(f"| | … and {len(items) - limit} more | |")
        lines += ["", "</details>"]
    lines += ["", _md_cell(_pointer())]
    return "\n".join(lines)


def format_json(cmp: Comparison) -> str:
    return json.dumps(clean_json(cmp.to_json()), ensure_ascii=False)


FORMATS = {"text": format_text, "markdown": format_markdown, "json": format_json}
