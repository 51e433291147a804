"""Quality gates for CI: `--fail-under "METRIC=VALUE"` on a results CSV (DESIGN §8: a failed gate exits 3).

A gate holds when the metric's mean over the rows where it is defined is at least VALUE. A metric that no
row defines fails its gate (an unmeasured quality is not a met one). Gates are parsed before any work is
done, so a typo costs nothing: a metric no run writes, or a VALUE outside the metric's range (`Ref Recall=80`,
a share written as a percent without `%`: a gate that can never pass) is a usage error before anything runs; an
unknown metric name is then checked against the results' columns.

    parse_gates(specs) -> [Gate];  check_names(gates, columns);  check_gates(run, gates) -> [GateResult]
    record_gates(report, gates) -> [GateResult]: the verdicts of a `rag batch` / `rag eval` report, kept in its
    run record (`<results>.run.json` "gates") as GateResult.to_json
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ragkit.core.errors import UsageError
from ragkit.evaluate.runs import METRIC_COLUMNS, Run, metric_key

EXIT_GATE = 3  # DESIGN §8


@dataclass(frozen=True)
class Gate:
    metric: str  # as the user wrote it
    threshold: float
    spec: str = field(default="", compare=False)  # the METRIC=VALUE it was parsed from, for messages


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    column: str | None  # the results column it resolved to
    value: float | None  # the mean; None when no row defines it
    rows: int

    @property
    def passed(self) -> bool:
        return self.value is not None and self.value >= self.gate.threshold

    def to_json(self) -> dict:
        """The verdict for a machine: metric (the column), value (the mean; None when no row defines it),
        threshold, rows, failed."""
        return {"metric": self.column or self.gate.metric, "value": self.value, "threshold": self.gate.threshold,
                "rows": self.rows, "failed": not self.passed}

    def line(self) -> str:
        """One line for the log, e.g. `gate failed: Ref Recall 0.812 < 0.9 (18 rows)`."""
        name = self.column or self.gate.metric
        if self.value is None:
            return f"gate failed: {name} has no value in any row (needs >= {self.gate.threshold:g})"
        verdict = "gate passed" if self.passed else "gate failed"
        op = ">=" if self.passed else "<"
        return f"{verdict}: {name} {self.value:.4f} {op} {self.gate.threshold:g} ({self.rows} rows)"


def _bad_gate(spec: str, why: str) -> UsageError:
    """A gate's error: `gate 'X': why` to a Python caller, `--fail-under 'X': why` from `rag` (errors.RagError)."""
    return UsageError(f"gate {spec!r}: {why}", flags={f"gate {spec!r}:": f"--fail-under {spec!r}:"})


def parse_gate(spec: str) -> Gate:
    """`"Ref Recall=0.9"` (also `ref_recall=0.9`, `ref-recall = 90%`) -> Gate; a usage error otherwise."""
    if "=" not in (spec or ""):
        raise _bad_gate(spec, "write METRIC=VALUE, e.g. \"Ref Recall=0.8\"")
    name, _, raw = spec.rpartition("=")
    name, raw = name.strip(), raw.strip()
    if not name:
        raise _bad_gate(spec, "the metric name is missing")
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise _bad_gate(spec, f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise _bad_gate(spec, f"{raw!r} is not a finite number")
    return Gate(name, value, spec)


# The values a metric's mean can take (docs/evaluation.md, Metrics): the counts, tokens, costs, latency, words and
# attempts are 0 or more; the G-Eval scores integers 1-5; every other metric a share or a yes/no rate in [0, 1].
_COUNTS = frozenset({"Word Count", "Steps", "Input Tokens", "Output Tokens", "Cost USD", "Latency ms",
                     "Judge Input Tokens", "Judge Output Tokens", "Judge Cost USD", "Attempts"})
_ONE_TO_FIVE = frozenset({"G-Eval Faithfulness", "G-Eval Coverage"})


def metric_range(column: str) -> tuple[float, float]:
    """(lowest, highest) mean a metric column can have."""
    if column in _COUNTS or column.endswith((" TP", " TN", " FP", " FN")):
        return 0.0, math.inf
    if column in _ONE_TO_FIVE:
        return 1.0, 5.0
    return 0.0, 1.0


def check_range(gate: Gate, column: str) -> None:
    """A threshold the metric's mean cannot reach (above its highest: the gate always fails) or cannot miss
    (below its lowest: it always passes) is a usage error; a share given as `80` suggests `80%`."""
    lo, hi = metric_range(column)
    t = gate.threshold
    if lo <= t <= hi:
        return
    spec = gate.spec or f"{gate.metric}={t:g}"
    if (lo, hi) == (0.0, 1.0):
        why = f"{column} is a share from 0 to 1, so {t:g} can never be met" if t > hi else \
            f"{column} is a share from 0 to 1, so {t:g} always passes"
        if 2 <= t <= 100:  # "80" meant 80 %; 1.01 is no percent
            why += f"; write {t:g}% or {t / 100:g}"
    elif hi == math.inf:
        why = f"{column} is a count or an amount, 0 or more; {t:g} always passes"
    else:
        why = f"{column} is a score from {lo:g} to {hi:g}; {t:g} " + ("can never be met" if t > hi else "always passes")
    raise _bad_gate(spec, why)


def parse_gates(specs: Sequence[str] | None) -> list[Gate]:
    return [parse_gate(s) for s in specs or ()]


def check_gates(run: Run, gates: Sequence[Gate]) -> list[GateResult]:
    """Evaluate every gate on a run. A metric the results do not have is a usage error naming the ones
    they do have."""
    out = []
    for g in gates:
        column = run.resolve(g.metric)
        if column is None:
            known = ", ".join(run.quality_metrics()) or "none"
            raise _bad_gate(g.metric, f"{run.path} has no such metric column (metrics: {known})")
        check_range(g, column)
        values = run.values(column)
        mean = sum(values) / len(values) if values else None
        out.append(GateResult(g, column, mean, len(values)))
    return out


def as_gates(gates: Sequence[Gate | str] | None) -> list[Gate]:
    """Gates given as Gate or "METRIC=VALUE", parsed and checked against the columns a run writes (usage errors
    before anything runs)."""
    from ragkit.evaluate.scoring import OUTPUT_COLUMNS

    out = [g if isinstance(g, Gate) else parse_gate(g) for g in gates or ()]
    check_names(out, OUTPUT_COLUMNS)
    return out


def check_results_file(path, gates: Sequence[Gate]) -> list[GateResult]:
    """Gates on a results CSV written by `rag batch` / `rag eval`."""
    from ragkit.evaluate.runs import load_run

    return check_gates(load_run(path), gates) if gates else []


def check_names(gates: Sequence[Gate], columns: Sequence[str] | None) -> None:
    """Before a run: a gate naming no column a run can write is a usage error (nothing is run)."""
    if not columns:
        return
    for g in gates:
        column = next((c for c in columns if metric_key(c) == metric_key(g.metric)), None)
        if column is None:
            raise _bad_gate(g.metric, "no such metric; e.g. "
                            + ", ".join(c for c in columns if c.endswith(("Recall", "Precision", "Overall"))))
        if column in METRIC_COLUMNS:
            check_range(g, column)


def record_gates(report, gates: Sequence[Gate]) -> list:
    """Check `gates` on a finished `rag batch` / `rag eval` report's results file and keep the verdicts: in
    `report.gates` and in its run record (`<results>.run.json` "gates", rewritten). Nothing without gates or
    without a results file."""
    from ragkit.evaluate.runinfo import write_run_info

    if not gates or report.results_path is None:
        return []
    results = check_results_file(report.results_path, gates)
    report.gates = results
    report.run.gates = [r.to_json() for r in results]
    report.run_path = write_run_info(report.results_path, report.run)
    return results
