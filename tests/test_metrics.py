"""DESIGN §5 metrics on hand-computed rows, the summary (mean vs micro), CSV cells, and a property test of the
reference metrics against a plain set computation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragkit.core.csvio import read_csv, write_csv
from ragkit.evaluate.metrics import (
    METRIC_KEYS,
    SUMMARY_COLUMNS,
    checklist_metrics,
    format_cell,
    format_row,
    parse_number,
    prefixed,
    reference_groups,
    reference_metrics,
    summarize,
    totals_rows,
)

A, B, C, D, E, F = (f"database/cat/doc/sec/page_00{i}.md" for i in range(1, 7))
UNIVERSE = [A, B, C, D, E, F]


def approx(d: dict) -> dict:
    return {k: (pytest.approx(v) if isinstance(v, float) else v) for k, v in d.items()}


# -- reference groups ----------------------------------------------------------------------------------
def test_reference_groups_split_aliases_and_normalise():
    cell = f" ./{A} | {B}\n{C};{D}|{D}\r\n\n; {A}|{B} "
    assert reference_groups(cell) == [[A, B], [C], [D]]  # duplicate alias and duplicate group kept once
    assert reference_groups("") == [] and reference_groups("  ;\n|") == []
    assert reference_groups("database\\冷蔵庫\\r_h54xg_b\\page_008.md") == [["database/冷蔵庫/r_h54xg_b/page_008.md"]]


def test_reference_groups_nfc():
    decomposed = "database/テ\u3099スト/page_001.md"  # デ written with a combining mark
    assert reference_groups(decomposed) == [["database/デスト/page_001.md"]]


# -- reference metrics ---------------------------------------------------------------------------------
def test_reference_with_aliases_hand_computed():
    # groups {A|B}, {C}; retrieved B (alias of group 1), D twice (irrelevant)
    m = reference_metrics(f"{A}|{B}\n{C}", [B, D, D], UNIVERSE)
    assert approx(m) == {"TP": 1, "FN": 1, "FP": 1, "TN": 2,  # TN = {E, F}
                         "Recall": 0.5, "Precision": 0.5, "Specificity": 2 / 3, "F1": 0.5, "Accuracy": 0.6}
    assert set(m) == set(METRIC_KEYS)


def test_reference_both_aliases_retrieved_count_once():
    m = reference_metrics(f"{A}|{B}", [A, B], UNIVERSE)
    assert (m["TP"], m["FN"], m["FP"], m["TN"]) == (1, 0, 0, 4)
    assert m["Recall"] == 1.0 and m["Precision"] == 1.0 and m["Accuracy"] == 1.0


def test_reference_empty_reference_unanswerable():
    m = reference_metrics("", [A], UNIVERSE)
    assert approx(m) == {"TP": 0, "FN": 0, "FP": 1, "TN": 5, "Recall": None, "Precision": 0.0,
                         "Specificity": 5 / 6, "F1": 0.0, "Accuracy": 5 / 6}
    m = reference_metrics("  ", [], UNIVERSE)
    assert m == {"TP": 0, "FN": 0, "FP": 0, "TN": 6, "Recall": None, "Precision": None, "Specificity": 1.0,
                 "F1": None, "Accuracy": 1.0}


def test_reference_nothing_retrieved():
    m = reference_metrics(f"{A};{C}", [], UNIVERSE)
    assert (m["TP"], m["FN"], m["FP"], m["TN"]) == (0, 2, 0, 4)
    # F1 = 2TP/(2TP+FP+FN) = 0/2: defined and 0 although Precision is undefined (DESIGN §5)
    assert m["Recall"] == 0.0 and m["Precision"] is None and m["F1"] == 0.0 and m["Specificity"] == 1.0


def test_reference_retrieved_outside_universe_is_fp_and_paths_compared_normalised():
    m = reference_metrics(f"{A}", [f"./{A}", "database/gone/page_099.md", " "], [A, B])
    assert (m["TP"], m["FN"], m["FP"], m["TN"]) == (1, 0, 1, 1)


def test_reference_all_zero_is_all_undefined():
    m = reference_metrics("", [], [])
    assert all(m[k] is None for k in ("Recall", "Precision", "Specificity", "F1", "Accuracy"))
    assert all(m[k] == 0 for k in ("TP", "TN", "FP", "FN"))


# -- checklist branches --------------------------------------------------------------------------------
def test_checklist_answerable_answered():
    m = checklist_metrics(answerable=True, refused=False, n_items=3, covered=2, extra=1)
    assert approx(m) == {"TP": 2, "FN": 1, "FP": 1, "TN": 0, "Recall": 2 / 3, "Precision": 2 / 3,
                         "F1": 2 / 3, "Accuracy": 0.5, "Specificity": 0.0}
    m = checklist_metrics(answerable=True, refused=False, n_items=3, covered=3, extra=0)
    assert m["Recall"] == 1.0 and m["Precision"] == 1.0 and m["F1"] == 1.0 and m["Specificity"] is None


def test_checklist_answerable_answered_nothing_covered_f1_zero():
    m = checklist_metrics(answerable=True, refused=False, n_items=2, covered=0, extra=3)
    assert (m["Recall"], m["Precision"], m["F1"]) == (0.0, 0.0, 0.0)


def test_checklist_answerable_refused():
    m = checklist_metrics(answerable=True, refused=True, n_items=3, covered=2, extra=4)  # covered/extra ignored
    assert m == {"TP": 0, "FN": 3, "FP": 0, "TN": 0, "Recall": 0.0, "Precision": None, "F1": 0.0,
                 "Accuracy": 0.0, "Specificity": None}


def test_checklist_unanswerable_refused():
    m = checklist_metrics(answerable=False, refused=True, n_items=0, covered=0, extra=0)
    assert m == {"TP": 0, "FN": 0, "FP": 0, "TN": 1, "Recall": None, "Precision": None, "F1": None,
                 "Accuracy": 1.0, "Specificity": 1.0}


def test_checklist_unanswerable_answered():
    m = checklist_metrics(answerable=False, refused=False, n_items=2, covered=1, extra=5)
    assert m == {"TP": 0, "FN": 0, "FP": 1, "TN": 0, "Recall": None, "Precision": 0.0, "F1": 0.0,
                 "Accuracy": 0.0, "Specificity": 0.0}


@pytest.mark.parametrize("kw", [dict(n_items=2, covered=3, extra=0), dict(n_items=-1, covered=0, extra=0),
                                dict(n_items=2, covered=1, extra=-1)])
def test_checklist_rejects_impossible_counts(kw):
    with pytest.raises(ValueError):
        checklist_metrics(answerable=True, refused=False, **kw)


# -- cells ---------------------------------------------------------------------------------------------
def test_format_cell():
    assert format_cell(None) == "" and format_cell(float("nan")) == "" and format_cell(float("inf")) == ""
    assert format_cell(2 / 3) == 0.6667 and format_cell(0.5) == 0.5 and format_cell(-0.0) == 0.0
    assert format_cell(3) == 3 and format_cell(True) == "True" and format_cell("x") == "x"
    assert prefixed("Ref", {"TP": 1, "Recall": None, "F1": 1 / 3}) == {"Ref TP": 1, "Ref Recall": "",
                                                                       "Ref F1": 0.3333}


def test_parse_number():
    assert [parse_number(v) for v in ("", None, "nan", "abc", " 0.25 ", "3", "True", "false", 2, True)] == [
        None, None, None, None, 0.25, 3.0, 1.0, 0.0, 2.0, 1.0]


def test_undefined_ratios_are_empty_cells_in_the_csv(tmp_path):
    import pandas as pd

    row = {"Question": "q", **prefixed("Checklist", checklist_metrics(answerable=True, refused=True, n_items=2,
                                                                      covered=0, extra=0)),
           **prefixed("Ref", reference_metrics("", [], [A]))}
    path = write_csv(pd.DataFrame([row]), tmp_path / "r.csv")
    text = path.read_text(encoding="utf-8-sig")
    assert "nan" not in text.lower() and "None" not in text
    back = read_csv(path).iloc[0].to_dict()
    assert back["Checklist Precision"] == "" and back["Checklist F1"] == "0.0" and back["Ref Recall"] == ""
    assert back["Ref F1"] == ""  # TP = FP = FN = 0: the only case F1 is undefined
    assert back["Checklist Recall"] == "0.0" and back["Checklist FN"] == "2" and back["Ref Specificity"] == "1.0"


# -- summary -------------------------------------------------------------------------------------------
def _csv_row(prefix: str, m: dict) -> dict:
    return {k: str(v) for k, v in prefixed(prefix, m).items()}  # as read back from a CSV: strings, "" = undefined


def test_summarize_mean_vs_micro_hand_computed():
    rows = [
        _csv_row("Checklist", checklist_metrics(answerable=True, refused=False, n_items=4, covered=3, extra=0)),
        _csv_row("Checklist", checklist_metrics(answerable=True, refused=False, n_items=1, covered=0, extra=2)),
        _csv_row("Checklist", checklist_metrics(answerable=False, refused=True, n_items=0, covered=0, extra=0)),
        _csv_row("Checklist", checklist_metrics(answerable=False, refused=False, n_items=0, covered=0, extra=0)),
    ]
    # per row (TP, TN, FP, FN): (3,0,0,1) (0,0,2,1) (0,1,0,0) (0,0,1,0); sums (3, 1, 3, 2)
    cols = [f"Checklist {k}" for k in ("Recall", "Precision", "Specificity", "F1", "Accuracy", "TP", "FP")]
    out = {r["Metric"]: r for r in summarize(rows, cols)}
    assert list(out["Checklist Recall"]) == list(SUMMARY_COLUMNS)
    rec = out["Checklist Recall"]
    assert rec["Mean"] == pytest.approx(0.375) and rec["Micro"] == pytest.approx(0.6) and rec["Rows"] == 2
    assert rec["Total"] is None
    prec = out["Checklist Precision"]  # rows: 1.0, 0.0, -, 0.0
    assert prec["Mean"] == pytest.approx(1 / 3) and prec["Micro"] == pytest.approx(0.5) and prec["Rows"] == 3
    spec = out["Checklist Specificity"]  # rows: -, 0.0, 1.0, 0.0
    assert spec["Mean"] == pytest.approx(1 / 3) and spec["Micro"] == pytest.approx(0.25) and spec["Rows"] == 3
    f1 = out["Checklist F1"]  # rows: 6/7, 0.0, -, 0.0 (2TP/(2TP+FP+FN): the answered unanswerable row is 0)
    # the rows hold 4-decimal cells (0.8571), so the mean is that close; micro comes from exact counts
    assert f1["Mean"] == pytest.approx(2 / 7, abs=1e-4) and f1["Micro"] == pytest.approx(6 / 11) and f1["Rows"] == 3
    # the mean F1 is never above both mean recall and mean precision (the issue's 0.617 vs 0.367/0.483)
    assert f1["Mean"] <= max(rec["Mean"], prec["Mean"])
    acc = out["Checklist Accuracy"]  # rows: 0.75, 0, 1, 0
    assert acc["Mean"] == pytest.approx(0.4375) and acc["Micro"] == pytest.approx(4 / 9) and acc["Rows"] == 4
    tp = out["Checklist TP"]
    assert tp["Mean"] == pytest.approx(0.75) and tp["Total"] == 3 and tp["Micro"] is None and tp["Rows"] == 4
    assert out["Checklist FP"]["Total"] == 3


def test_summarize_prefixes_kept_apart_and_missing_counts():
    rows = [
        {**_csv_row("Ref", reference_metrics(A, [A], UNIVERSE)),
         **_csv_row("Opt Ref", reference_metrics(f"{B}|{C}", [A], UNIVERSE))},
        {**_csv_row("Ref", reference_metrics(A, [B], UNIVERSE)), "Opt Ref Recall": "", "Opt Ref TP": ""},
    ]
    out = {r["Metric"]: r for r in summarize(rows, ["Ref Recall", "Opt Ref Recall", "Ref Precision"])}
    assert out["Ref Recall"]["Micro"] == pytest.approx(0.5) and out["Ref Recall"]["Rows"] == 2
    # only the first row has Opt Ref counts: micro over that row alone
    assert out["Opt Ref Recall"]["Micro"] == 0.0 and out["Opt Ref Recall"]["Rows"] == 1
    assert out["Ref Precision"]["Mean"] == pytest.approx(0.5)


def test_summarize_flags_scores_and_undefined_columns():
    rows = [{"Contain Match": True, "Judge Overall": "0.8"}, {"Contain Match": "False", "Judge Overall": ""},
            {"Contain Match": "", "Judge Overall": 0.6}, {"Contain Match": "True"}]
    out = {r["Metric"]: r for r in summarize(rows, ["Contain Match", "Judge Overall", "Nothing Here"])}
    assert out["Contain Match"]["Mean"] == pytest.approx(2 / 3) and out["Contain Match"]["Rows"] == 3
    assert out["Contain Match"]["Total"] == 2 and out["Contain Match"]["Micro"] is None
    assert out["Judge Overall"]["Mean"] == pytest.approx(0.7) and out["Judge Overall"]["Rows"] == 2
    assert out["Nothing Here"] == {"Metric": "Nothing Here", "Mean": None, "Micro": None, "Total": None, "Rows": 0,
                                   "Covers": "none"}
    formatted = format_row(out["Nothing Here"])
    assert formatted["Mean"] == "" and formatted["Micro"] == "" and formatted["Rows"] == 0


def test_totals_rows_unknown_cost_is_empty():
    rows = {r["Metric"]: r for r in totals_rows(questions=10, input_tokens=1200, output_tokens=300,
                                                  cost_usd=None, wall_s=12.34567, errors=1)}
    assert rows["Total tokens"]["Total"] == 1500 and rows["Errors"]["Total"] == 1
    assert rows["Total cost (USD)"]["Total"] is None and format_row(rows["Total cost (USD)"])["Total"] == ""
    assert rows["Wall time (s)"]["Total"] == pytest.approx(12.346)
    assert "Skipped blank rows" not in rows  # None = not reported
    known = {r["Metric"]: r for r in totals_rows(input_tokens=1, output_tokens=1, cost_usd=0.000123)}
    assert known["Total cost (USD)"]["Total"] == "0.000123"
    assert all(set(r) == set(SUMMARY_COLUMNS) for r in totals_rows())


# -- property test -------------------------------------------------------------------------------------
NAMES = [f"d/p{i}.md" for i in range(12)]


def pages_of(groups: list[list[str]]) -> set[frozenset[str]]:
    """The required pages: groups that share an alias name one page, so they join (until none share one)."""
    pages = [set(g) for g in groups if g]
    joined = True
    while joined:
        joined = False
        for i in range(len(pages)):
            for j in range(i + 1, len(pages)):
                if pages[i] & pages[j]:
                    pages[i] |= pages.pop(j)
                    joined = True
                    break
            if joined:
                break
    return {frozenset(p) for p in pages}


def plain_reference(groups: list[list[str]], retrieved: list[str], universe: list[str]) -> dict:
    """An independent, straightforward set computation of DESIGN §5 (no normalisation: plain names)."""
    distinct = pages_of(groups)
    got = set(retrieved)
    required = set().union(*distinct) if distinct else set()
    tp = len([g for g in distinct if g & got])
    fn = len(distinct) - tp
    fp = len(got - required)
    tn = len(set(universe) - required - got)
    return {"TP": tp, "FN": fn, "FP": fp, "TN": tn}


def render_cell(groups: list[list[str]], rng: random.Random) -> str:
    parts = []
    for g in groups:
        aliases = [("./" if rng.random() < 0.2 else "") + a + (" " if rng.random() < 0.2 else "") for a in g]
        parts.append("|".join(aliases))
    out = ""
    for i, p in enumerate(parts):
        out += p if i == 0 else rng.choice(["\n", ";", "\r\n", " ; "]) + p
    return out


@settings(max_examples=300, deadline=None)
@given(
    universe=st.lists(st.sampled_from(NAMES), max_size=12, unique=True),
    groups=st.lists(st.lists(st.sampled_from(NAMES + ["x/out.md"]), min_size=1, max_size=3), max_size=4),
    retrieved=st.lists(st.sampled_from(NAMES + ["x/out.md", "x/other.md"]), max_size=8),
    seed=st.integers(0, 2**16),
)
def test_reference_metrics_match_plain_set_computation(universe, groups, retrieved, seed):
    rng = random.Random(seed)
    m = reference_metrics(render_cell(groups, rng), retrieved, universe)
    expected = plain_reference(groups, retrieved, universe)
    assert {k: m[k] for k in expected} == expected
    tp, tn, fp, fn = m["TP"], m["TN"], m["FP"], m["FN"]
    distinct_groups = pages_of(groups)
    required = set().union(*distinct_groups) if distinct_groups else set()
    assert tp + fn == len(distinct_groups)
    assert fp == len(set(retrieved) - required)
    assert sum(len(g) for g in distinct_groups) == len(required)  # pages never share an alias
    assert tp <= len(set(retrieved) & required)  # so each TP has its own alias
    if set(retrieved) <= set(universe) and required <= set(universe):
        assert tn + fp + len(required) == len(universe)  # the universe splits into required, FP and TN
    # ratios defined exactly when their denominators are non-zero, and in [0, 1]
    for key, den in (("Recall", tp + fn), ("Precision", tp + fp), ("Specificity", tn + fp),
                     ("Accuracy", tp + tn + fp + fn)):
        assert (m[key] is None) == (den == 0)
        assert m[key] is None or 0.0 <= m[key] <= 1.0
    assert (m["F1"] is None) == (tp + fp + fn == 0)
    assert m["F1"] is None or m["F1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    # order and duplicates of the retrieved list do not matter
    shuffled = retrieved * 2
    rng.shuffle(shuffled)
    assert reference_metrics(render_cell(groups, rng), shuffled, universe) == m


def test_f1_is_2tp_over_2tp_fp_fn_on_every_branch():
    for kw, want in ((dict(answerable=True, refused=False, n_items=4, covered=1, extra=2), 2 / 7),
                     (dict(answerable=True, refused=True, n_items=3, covered=0, extra=0), 0.0),
                     (dict(answerable=False, refused=False, n_items=0, covered=0, extra=0), 0.0),
                     (dict(answerable=False, refused=True, n_items=0, covered=0, extra=0), None)):
        assert checklist_metrics(**kw)["F1"] == (pytest.approx(want) if want is not None else None)


def test_summary_says_which_rows_each_figure_covers():
    rows = [
        {"Reference Document": A, **_csv_row("Checklist", checklist_metrics(
            answerable=True, refused=False, n_items=2, covered=1, extra=0)), "Refused": "False"},
        {"Reference Document": A, **_csv_row("Checklist", checklist_metrics(
            answerable=True, refused=True, n_items=2, covered=0, extra=0)), "Refused": "True"},
        {"Reference Document": "", **_csv_row("Checklist", checklist_metrics(
            answerable=False, refused=False, n_items=0, covered=0, extra=0)), "Refused": "False"},
    ]
    cols = ["Checklist Recall", "Checklist Precision", "Checklist Specificity", "Refused"]
    out = {r["Metric"]: r for r in summarize(rows, cols, reference_column="Reference Document")}
    assert out["Checklist Recall"]["Covers"] == "answerable"
    assert out["Checklist Precision"]["Covers"] == "1 answerable + 1 unanswerable"
    assert out["Checklist Specificity"]["Covers"] == "unanswerable"
    assert out["Refused"]["Covers"] == "all"
    # without a Reference Document column nobody can tell: "all" rows that have the figure
    assert {r["Metric"]: r for r in summarize(rows, cols)}["Checklist Recall"]["Covers"] in ("all", "")


def test_a_score_named_like_a_ratio_is_summed_not_micro_averaged():
    rows = [{"Judge Accuracy": "1.0", "LLM Accuracy": "True"}, {"Judge Accuracy": "0.5", "LLM Accuracy": "False"}]
    out = {r["Metric"]: r for r in summarize(rows, ["Judge Accuracy", "LLM Accuracy"])}
    assert out["Judge Accuracy"]["Mean"] == pytest.approx(0.75) and out["Judge Accuracy"]["Total"] == 1.5
    assert out["LLM Accuracy"]["Total"] == 1 and out["LLM Accuracy"]["Micro"] is None
