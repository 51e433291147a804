"""Quality gates for CI: `--fail-under "METRIC=VALUE"` on a results CSV (DESIGN §8: a failed gate exits 3).

A gate holds when the metric's mean over the rows where it is defined is at least VALUE. A metric that no
row defines fails its gate (an unmeasured quality is not a met one). Gates are parsed before any work is
done, so a typo costs nothing; an unknown metric name is then checked against the results' columns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ragkit.core.errors import UsageError
from ragkit.evaluate.runs import Run, metric_key

EXIT_GATE = 3  # DESIGN §8


@dataclass(frozen=True)
class Gate:
    metric: str  # as the user wrote it
    threshold: float


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    column: str | None  # the results column it resolved to
    value: float | None  # the mean; None when no row defines it
    rows: int

    @property
    def passed(self) -> bool:
        return self.value is not None and self.value >= self.gate.threshold

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
    return Gate(name, value)


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
        values = run.values(column)
        mean = sum(values) / len(values) if values else None
        out.append(GateResult(g, column, mean, len(values)))
    return out


def known_metric(name: str, columns: Sequence[str]) -> bool:
    return any(metric_key(c) == metric_key(name) for c in columns)


def check_results_file(path, gates: Sequence[Gate]) -> list[GateResult]:
    """Gates on a results CSV written by `rag batch` / `rag eval`."""
    from ragkit.evaluate.runs import load_run

    return check_gates(load_run(path), gates) if gates else []


def check_names(gates: Sequence[Gate], columns: Sequence[str] | None) -> None:
    """Before a run: a gate naming no column a run can write is a usage error (nothing is run)."""
    if not columns:
        return
    for g in gates:
        if not known_metric(g.metric, columns):
            raise _bad_gate(g.metric, "no such metric; e.g. "
                            + ", ".join(c for c in columns if c.endswith(("Recall", "Precision", "Overall"))))
