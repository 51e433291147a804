"""A results CSV read back as a run: per-question metric values, the question's document, and statistics.

`rag report`, `rag compare` and the quality gates read results CSVs (DESIGN §4 columns), not batch
internals, so they work on any results file, old or new, and survive changes to the summary format.
No LLM code here: this is the metrics layer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath

import numpy as np

from ragkit.core.csvio import read_csv, split_multi
from ragkit.core.errors import RagError, UsageError

# Metrics a reader looks at first (in this order), when the run has them.
HEADLINE = ["Ref Recall", "Ref Precision", "Checklist Recall", "Checklist Precision", "Checklist F1",
            "Judge Overall", "Judge Passed", "Contain Match", "LLM Accuracy", "Refused"]
# Yes/no columns: compared with McNemar's test.
BINARY = {"Judge Passed", "Contain Match", "LLM Accuracy", "Refused"}
# Columns that are counts or costs, not qualities: no gates or regressions on them by default.
_NOT_QUALITY = {"Steps", "Max Loops Reached", "Input Tokens", "Output Tokens", "Cost USD", "Latency ms", "Judge Input Tokens",
                "Judge Output Tokens", "Judge Cost USD", "Page", "Attempts"}
# Lower is better for these (a rise is a regression).
LOWER_IS_BETTER = {"Refused"}
# Text columns of DESIGN §4 (never metrics): not parsed as numbers.
_TEXT = {"Question", "Ground Truth", "Reference Document", "Optimized Reference Document", "Checklist",
         "RAG Answer", "Retrieved Files", "Evaluation Reason", "Pages Read", "Error", "Judge Error",
         "Judge Hallucinations", "Judge Issues"}
_TRUE = {"true", "yes", "1", "1.0"}
_FALSE = {"false", "no", "0", "0.0"}


def _cell_value(raw: str) -> float | None:
    """A cell as a number: booleans are 1/0, an empty cell is undefined (None), other text is None."""
    s = (raw or "").strip()
    if not s:
        return None
    low = s.lower()
    if low in _TRUE:
        return 1.0
    if low in _FALSE:
        return 0.0
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def metric_key(name: str) -> str:
    """"Ref Recall", "ref_recall", "ref-recall" and "REF RECALL" all name one metric."""
    return re.sub(r"[\s_\-]+", " ", name.strip()).lower()


@dataclass
class Row:
    index: int  # 0-based data row of the CSV (the spreadsheet's row number is index + 2)
    key: str  # pairs the same question across runs
    cells: dict[str, str]
    values: dict[str, float | None]

    def get(self, column: str) -> str:
        return self.cells.get(column, "")

    @property
    def question(self) -> str:
        return self.get("Question")

    @property
    def answerable(self) -> bool | None:
        if "Reference Document" not in self.cells:
            return None
        return bool(self.get("Reference Document").strip())

    @cached_property
    def references(self) -> list[list[str]]:
        """Required pages, each a group of alias paths (`a.md|b.md`)."""
        return [[p.strip() for p in grp.split("|") if p.strip()] for grp in split_multi(self.get("Reference Document"))]

    @property
    def retrieved(self) -> list[str]:
        return split_multi(self.get("Retrieved Files"))

    @property
    def refused(self) -> bool:
        return self.values.get("Refused") == 1.0

    @property
    def error(self) -> str:
        return self.get("Error").strip()

    @cached_property
    def document(self) -> tuple[str, str]:
        """(category, document) of the first required page, from its path
        (`.../<category>/<document>/<section>/page_NNN.md`); ("(none)", "(unanswerable)") without one."""
        if self.answerable is None:
            return ("(none)", "(no reference column)")
        refs = self.references
        if not refs or not refs[0]:
            return ("(none)", "(unanswerable)")
        return document_of(refs[0][0])

    @property
    def failed(self) -> bool:
        """What a reader calls a failure: an error, a required page not retrieved, a checklist item
        missed, or an answer to a question the documents cannot answer."""
        if self.error:
            return True
        if self.answerable is False:
            return not self.refused
        for col in ("Ref Recall", "Checklist Recall"):
            v = self.values.get(col)
            if v is not None and v < 1.0:
                return True
        return False


def document_of(path: str) -> tuple[str, str]:
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if len(parts) >= 4:
        return parts[-4], parts[-3]
    if len(parts) >= 2:
        return "(none)", parts[-2]
    return "(none)", path


@dataclass
class Run:
    path: Path
    name: str
    columns: list[str]
    rows: list[Row] = field(default_factory=list)
    _metrics: list[str] | None = field(default=None, repr=False)

    def metrics(self) -> list[str]:
        """Numeric columns with at least one value, headline ones first (computed once: rows are read once)."""
        if self._metrics is None:
            numeric = [c for c in self.columns if any(r.values.get(c) is not None for r in self.rows)]
            first = [c for c in HEADLINE if c in numeric]
            self._metrics = first + [c for c in numeric if c not in first]
        return list(self._metrics)

    def quality_metrics(self) -> list[str]:
        return [m for m in self.metrics() if m not in _NOT_QUALITY and not m.endswith((" TP", " TN", " FP", " FN"))]

    def values(self, column: str) -> list[float]:
        return [v for r in self.rows if (v := r.values.get(column)) is not None]

    def mean(self, column: str) -> float | None:
        vs = self.values(column)
        return sum(vs) / len(vs) if vs else None

    def resolve(self, name: str) -> str | None:
        """The column a user's metric name means (case, spaces, `_` and `-` do not matter)."""
        want = metric_key(name)
        for c in self.columns:
            if metric_key(c) == want:
                return c
        return None


def load_run(path: Path | str, name: str | None = None, *, encoding: str | None = None) -> Run:
    """Read a results CSV. A file without the `Question` column, or without any metric column, is one-line
    error naming the file."""
    path = Path(path)
    df = read_csv(path, required=("Question",), encoding=encoding)
    columns = [str(c) for c in df.columns]
    if not any(c in columns for c in ("Ref Recall", "Checklist Recall", "RAG Answer")):
        raise RagError(f"{path}: not a results CSV (no 'RAG Answer', 'Ref Recall' or 'Checklist Recall' "
                       f"column); run `rag batch` first")
    run = Run(path=path, name=name or path.stem, columns=columns)
    seen: dict[str, int] = {}
    numeric = [c for c in columns if c not in _TEXT]
    for i, values in enumerate(df.itertuples(index=False, name=None)):
        cells = dict(zip(columns, map(str, values), strict=True))
        q = " ".join(cells.get("Question", "").split())
        if not q:
            continue  # a blank line in the CSV
        n = seen.get(q, 0)
        seen[q] = n + 1
        key = q if n == 0 else f"{q} #{n + 1}"  # the same question asked twice pairs by occurrence
        run.rows.append(Row(index=i, key=key, cells=cells, values={c: _cell_value(cells[c]) for c in numeric}))
    if not run.rows:
        raise RagError(f"{path}: no questions in this results CSV")
    return run


def load_runs(paths: Sequence[Path | str], names: Sequence[str] | None = None, *,
              encoding: str | None = None) -> list[Run]:
    """Several results CSVs; `names` label them (default: the file stems)."""
    if not paths:
        raise UsageError("give at least one results CSV")
    names = list(names or [])
    if len(names) > len(paths):
        raise UsageError(f"{len(names)} labels for {len(paths)} results CSV(s)")
    runs = [load_run(p, names[i] if i < len(names) else None, encoding=encoding) for i, p in enumerate(paths)]
    # two files with one stem (results/a.csv, other/a.csv) would be indistinguishable in a report
    names = [r.name for r in runs]
    for r in runs:
        if names.count(r.name) > 1:
            r.name = f"{r.path.parent.name}/{r.path.stem}"
    return runs


# -- statistics ---------------------------------------------------------------------------------------
def _resampled_means(values: Sequence[float], resamples: int, seed: int) -> np.ndarray:
    """Means of `resamples` bootstrap samples of `values`, sorted (numpy, in chunks to bound memory)."""
    arr = np.asarray(values, dtype=float)
    n = len(arr)
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // n)
    out = [arr[rng.integers(0, n, size=(min(chunk, resamples - i), n))].mean(axis=1)
           for i in range(0, resamples, chunk)]
    return np.sort(np.concatenate(out))


def _interval(means: np.ndarray, level: float) -> tuple[float, float]:
    k = len(means)
    return float(means[int((1 - level) / 2 * k)]), float(means[min(k - 1, int((1 + level) / 2 * k))])


def bootstrap_ci(values: Sequence[float], *, resamples: int = 2000, level: float = 0.95,
                 seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean; None for fewer than 2 values. A fixed seed makes
    a report reproducible."""
    if len(values) < 2:
        return None
    return _interval(_resampled_means(values, resamples, seed), level)


def paired_bootstrap(diffs: Sequence[float], *, resamples: int = 2000, level: float = 0.95,
                     seed: int = 0) -> tuple[tuple[float, float] | None, float | None]:
    """(confidence interval of the mean paired difference, two-sided p-value) by resampling questions.

    p is twice the share of resampled mean differences on the far side of 0 (at least 1/resamples when
    none is); 1.0 when every difference is 0. None for fewer than 2 pairs."""
    if len(diffs) < 2:
        return None, None
    if all(d == 0 for d in diffs):
        return (0.0, 0.0), 1.0
    means = _resampled_means(diffs, resamples, seed)
    below = float(np.count_nonzero(means <= 0)) / resamples
    above = float(np.count_nonzero(means >= 0)) / resamples
    p = min(1.0, max(2 * min(below, above), 1 / resamples))
    return _interval(means, level), p


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: b pairs went 1->0, c went 0->1 (the concordant pairs carry no
    information). Binomial(b + c, 1/2) tail, doubled, capped at 1."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100])."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
