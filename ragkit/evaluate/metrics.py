"""The metric definitions of DESIGN §5 as pure functions of a row's counts; no model code. docs/evaluation.md
defines each.

    reference_metrics(ref_cell, retrieved, universe, key) -> dict  # TP TN FP FN and the ratios
    checklist_metrics(*, answerable, refused, n_items, covered, extra) -> dict
    summarize(rows, columns) -> list[dict]                        # mean, micro, total, rows, covers
A ratio with a zero denominator is None, written as an empty cell."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ragkit.core.paths import normalize_ref
from ragkit.core.references import reference_groups

COUNT_KEYS = ("TP", "TN", "FP", "FN")
RATIO_KEYS = ("Recall", "Precision", "Specificity", "F1", "Accuracy")
METRIC_KEYS = (*COUNT_KEYS, *RATIO_KEYS)
SUMMARY_COLUMNS = ("Metric", "Mean", "Micro", "Total", "Rows", "Covers")
# columns whose sum over the rows means nothing (a sum of confidences, of per-question latencies that ran in
# parallel): their Total stays empty; the run's wall time is its own row
NO_TOTAL = frozenset({"Confidence", "Latency ms"})
DECIMALS = 4

# counts each ratio needs (the micro-average sums exactly these over the rows that have them)
_NEEDS: dict[str, tuple[str, ...]] = {
    "Recall": ("TP", "FN"),
    "Precision": ("TP", "FP"),
    "Specificity": ("TN", "FP"),
    "F1": ("TP", "FP", "FN"),
    "Accuracy": ("TP", "TN", "FP", "FN"),
}


# -- ratios -------------------------------------------------------------------------------------------
def _div(num: float, den: float) -> float | None:
    return num / den if den else None


def f1_score(tp: float, fp: float, fn: float) -> float | None:
    """F1 = 2TP/(2TP+FP+FN): 0 when nothing was right but something was wrong; None when all three are 0."""
    return _div(2 * tp, 2 * tp + fp + fn)


def ratios(tp: float, tn: float, fp: float, fn: float) -> dict[str, float | None]:
    """Recall, Precision, Specificity, F1, Accuracy from counts (None for a zero denominator)."""
    recall = _div(tp, tp + fn)
    precision = _div(tp, tp + fp)
    return {
        "Recall": recall,
        "Precision": precision,
        "Specificity": _div(tn, tn + fp),
        "F1": f1_score(tp, fp, fn),
        "Accuracy": _div(tp + tn, tp + tn + fp + fn),
    }


def _with_ratios(tp: int, tn: int, fp: int, fn: int) -> dict[str, Any]:
    return {"TP": tp, "TN": tn, "FP": fp, "FN": fn, **ratios(tp, tn, fp, fn)}


# -- reference metrics --------------------------------------------------------------------------------
def reference_metrics(ref_cell: str, retrieved: list[str], universe: list[str],
                      key: Callable[[str], str] = normalize_ref) -> dict:
    """DESIGN §5 reference metrics for one question.

    TP = required groups with any alias retrieved; FN = groups with none; FP = retrieved pages in no group
    (also when they are not in the universe, e.g. a page deleted since); TN = universe pages in no group and
    not retrieved. A page retrieved twice counts once. An empty reference (an unanswerable question) has no
    groups: TP = FN = 0, every retrieved page is an FP and the rest of the universe TN.

    Paths are compared as the pages they name: `key` maps every alias, retrieved path and universe path to one
    name per page (paths.page_keys(db) for a database, so that `database/a.md`, `a.md` and `/abs/database/a.md`
    are one page; without it, normalize_ref's text). Groups that share a page are one group
    (references.reference_groups).
    """
    groups = [{key(a) for a in g} for g in reference_groups(ref_cell, key)]
    got = _page_set(retrieved, key)
    required = set().union(*groups)
    tp = sum(1 for g in groups if g & got)
    fn = len(groups) - tp
    fp = len(got - required)
    tn = len(_page_set(universe, key) - required - got)
    return _with_ratios(tp, tn, fp, fn)


def _page_set(paths: Iterable[str], key: Callable[[str], str]) -> set[str]:
    return {k for k in (key(str(x)) for x in paths if x is not None) if k}


# -- checklist metrics --------------------------------------------------------------------------------
def checklist_metrics(*, answerable: bool, refused: bool, n_items: int, covered: int, extra: int) -> dict:
    """DESIGN §5 checklist metrics for one question with ground truth.

    answerable + answered: TP = covered items, FN = missed items, FP = extra key points, TN = 0.
    answerable + refused: TP = 0, FN = n_items, FP = TN = 0.
    unanswerable + refused: TN = 1, others 0.   unanswerable + answered: FP = 1, others 0.
    (`covered` and `extra` are ignored where the branch does not use them.)
    """
    if n_items < 0 or covered < 0 or extra < 0:
        raise ValueError(f"checklist counts must be >= 0 (n_items={n_items}, covered={covered}, extra={extra})")
    if answerable and not refused and covered > n_items:
        raise ValueError(f"covered ({covered}) exceeds the number of checklist items ({n_items})")
    if answerable:
        if refused:
            return _with_ratios(0, 0, 0, n_items)
        return _with_ratios(covered, 0, extra, n_items - covered)
    if refused:
        return _with_ratios(0, 1, 0, 0)
    return _with_ratios(0, 0, 1, 0)


# -- cells --------------------------------------------------------------------------------------------
def parse_number(value: Any) -> float | None:
    """A metric cell as a number: "" / None / "nan" / text -> None; True/"True" -> 1.0; "0.5" -> 0.5."""
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        f = float(value)
        return f if math.isfinite(f) else None
    s = str(value).strip()
    if not s:
        return None
    low = s.lower()
    if low in ("true", "yes"):
        return 1.0
    if low in ("false", "no"):
        return 0.0
    try:
        f = float(s)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def format_cell(value: Any) -> Any:
    """The CSV form of a value: None / NaN / inf -> "", floats rounded to 4 decimals (integral floats of
    counts stay floats, e.g. 1.0), bools as "True"/"False", everything else unchanged."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        r = round(value, DECIMALS)
        return 0.0 if r == 0 else r  # no "-0.0"
    return value


def format_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: format_cell(v) for k, v in row.items()}


def prefixed(prefix: str, metrics: Mapping[str, Any], keys: Iterable[str] = METRIC_KEYS) -> dict[str, Any]:
    """{"TP": 1, "Recall": None} -> {"Ref TP": 1, "Ref Recall": ""} (formatted for a results row)."""
    return {f"{prefix} {k}": format_cell(metrics.get(k)) for k in keys if k in metrics}


# -- summary ------------------------------------------------------------------------------------------
def _split_metric(column: str) -> tuple[str, str]:
    prefix, _, name = column.rpartition(" ")
    return prefix, name


def covers(flags: Iterable[bool | None]) -> str:
    """Which rows a figure covers, from the answerability of each row it was computed on (None = unknown)."""
    flags = list(flags)
    if not flags:
        return "none"  # no row has the figure: said, not left for the reader to guess from an empty cell
    if any(f is None for f in flags):
        return "all"
    yes = sum(1 for f in flags if f)
    no = len(flags) - yes
    if not no:
        return "answerable"
    if not yes:
        return "unanswerable"
    return f"{yes} answerable + {no} unanswerable"


def answerable_flag(row: Mapping[str, Any], reference_column: str | None) -> bool | None:
    """True/False when the input says (a Reference Document column exists), else None."""
    if reference_column is None:
        return None
    return bool(str(row.get(reference_column) or "").strip())


def summarize(rows: list[dict], columns: list[str], *, reference_column: str | None = None) -> list[dict]:
    """One summary row per column (shape SUMMARY_COLUMNS; see the module docstring). Values are numbers or
    None (undefined); pass the rows through format_row before writing them. `reference_column` names the
    column that marks a row answerable (for `Covers`)."""
    out: list[dict] = []
    if reference_column is not None and not any(reference_column in r for r in rows):
        reference_column = None
    for column in columns:
        defined = [(v, r) for v, r in ((parse_number(r.get(column)), r) for r in rows) if v is not None]
        values = [v for v, _ in defined]
        cover = covers(answerable_flag(r, reference_column) for _, r in defined)
        if defined and cover != "all" and len(defined) == len(rows):
            cover = "all"
        mean = sum(values) / len(values) if values else None
        prefix, name = _split_metric(column)
        micro: float | None = None
        total: float | None = None
        # a ratio of counts ("Ref Recall" next to "Ref TP"...), not a score that shares its name ("Judge Accuracy")
        if prefix and name in RATIO_KEYS and any(f"{prefix} TP" in r for r in rows):
            sums = {k: 0.0 for k in COUNT_KEYS}
            used = 0
            for r in rows:
                counts = {k: parse_number(r.get(f"{prefix} {k}")) for k in _NEEDS[name]}
                if any(v is None for v in counts.values()):
                    continue
                used += 1
                for k, v in counts.items():
                    sums[k] += v
            if used:
                micro = ratios(sums["TP"], sums["TN"], sums["FP"], sums["FN"])[name]
        elif column not in NO_TOTAL:
            total = sum(values) if values else None
            if total is not None and total.is_integer():
                total = int(total)
        out.append({"Metric": column, "Mean": mean, "Micro": micro, "Total": total, "Rows": len(values),
                    "Covers": cover})
    return out


_UNKNOWN = object()  # marks a total that is known to be unknown (kept as a row with an empty value)


def totals_rows(
    *,
    questions: int | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cost_usd: float | None = 0.0,
    wall_s: float | None = None,
    errors: int = 0,
    skipped: int | None = None,
    calls: int | None = None,
) -> list[dict]:
    """Run totals as summary rows (value in `Total`): an unknown cost (None, some model without a price)
    stays an empty cell, never 0. Items left as None are omitted."""
    items: list[tuple[str, Any]] = [
        ("Questions", questions),
        ("Skipped blank rows", skipped),
        ("Errors", errors),
        ("LLM calls", calls),
        ("Total input tokens", input_tokens),
        ("Total output tokens", output_tokens),
        ("Total tokens", input_tokens + output_tokens),
        # 6 decimals: format_cell's 4 would round a cheap run's cost to 0
        ("Total cost (USD)", f"{cost_usd:.6f}" if cost_usd is not None else _UNKNOWN),
        ("Wall time (s)", round(wall_s, 3) if wall_s is not None else None),
    ]
    return [{"Metric": name, "Mean": None, "Micro": None, "Total": None if v is _UNKNOWN else v, "Rows": None,
             "Covers": None} for name, v in items if v is not None]

