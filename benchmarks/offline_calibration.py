"""Calibration of the offline engine's refusal rule on MMLongBench-Doc (the dev set: 473 answerable and 113
unanswerable questions over 73 PDFs in one database).

The engine refuses when its confidence is below ``REFUSE_BELOW``; confidence is the evidence coverage less
``ABSENT_PENALTY`` x the share of the question its cited document never mentions, less ``YEAR_PENALTY`` when
the question names a year the document never mentions (ragkit/offline.py). This
script analyses every question once (the engine's own ``_analyse``, so retrieval and selection are the real
ones), then, for a grid of the two constants, computes the refusal rates. It tunes on one half of the questions
(even positions) and reports the other half (odd positions), and the reverse, so no reported figure comes from
the data its constants were chosen on; it also reports the module's current constants on all questions.

Printed as ONE JSON line:
- ``current``: the constants in ragkit/offline.py on all questions: answerable refused, unanswerable refused,
  AUROC of confidence against "a right page was cited" (answerable questions), the same AUROC for answerable vs
  unanswerable, Contain-Match of the quoted text, a table of right-page rate by confidence band.
- ``held_out``: for each half, the constants tuned on the other half (maximise unanswerable refused with
  answerable refused <= 0.2) and the rates they give on this half; and ``all_features_logistic``: every
  feature the engine computes, combined by a logistic regression fitted on the other half (a bound on what a
  better rule from the same evidence could do).

    uv run python benchmarks/offline_calibration.py [--db-dir DIR] [--save rows.jsonl] [--load rows.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from agent import BENCH, contain_match, page_map  # noqa: E402

from ragkit.answer.extractive import engine as offline  # noqa: E402
from ragkit.ingest import ingest_sources  # noqa: E402
from ragkit.search import open_index  # noqa: E402

MAX_ANSWERABLE_REFUSED = 0.2  # the bound; the tuner keeps a small margin below it
MARGIN = 0.02


def auroc(scores_pos: list[float], scores_neg: list[float]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count one half)."""
    if not scores_pos or not scores_neg:
        return None
    neg = sorted(scores_neg)
    import bisect

    total = 0.0
    for s in scores_pos:
        lo = bisect.bisect_left(neg, s)
        hi = bisect.bisect_right(neg, s)
        total += lo + 0.5 * (hi - lo)
    return round(total / (len(scores_pos) * len(neg)), 4)


def collect(db: Path, index, qs: list[dict]) -> list[dict]:
    pages = page_map(db, index)
    rows = []
    for i, q in enumerate(qs):
        an = offline._analyse(q["question"], index, db, 5)
        cited = {pages.get(u.rel) for u in an.chosen}
        req = {(q["doc"], p) for p in q["pages"]}
        text = " ".join(u.text for u in an.chosen)
        rows.append({"i": i, "id": q["id"], "answerable": q["answerable"], "coverage": round(an.coverage, 4),
                     "absent": round(an.absent, 4), "absent_top": round(an.absent_top, 4),
                     "years_absent": an.years_absent, "own": round(an.own, 4),
                     "doc": offline._doc_key(an.chosen[0].rel) if an.chosen else "",
                     "chosen": bool(an.chosen), "right": bool(req & cited),
                     "cm": contain_match(q["answer"], text) if q["answerable"] and an.chosen else False})
    return rows


def confidence(r: dict, penalty: tuple[float, float]) -> float:
    """The engine's rule (offline._confidence) with (ABSENT_PENALTY, YEAR_PENALTY) = penalty."""
    if not r["chosen"]:
        return 0.0
    absent, year = penalty
    return max(0.0, min(1.0, r["coverage"] - absent * r["absent"] - (year if r.get("years_absent") else 0.0)))


def rates(rows: list[dict], threshold: float, penalty: tuple[float, float]) -> dict:
    A = [r for r in rows if r["answerable"]]
    U = [r for r in rows if not r["answerable"]]
    ref = lambda r: confidence(r, penalty) < threshold  # noqa: E731
    kept = [r for r in A if not ref(r)]
    return {
        "answerable": len(A), "unanswerable": len(U),
        "answerable_refused": round(sum(map(ref, A)) / len(A), 4) if A else None,
        "unanswerable_refused": round(sum(map(ref, U)) / len(U), 4) if U else None,
        "answered_with_right_page": round(sum(r["right"] for r in kept) / len(A), 4) if A else None,
        "answered_contain_match": round(sum(r["cm"] for r in kept) / len(A), 4) if A else None,
        "auroc_right_page": auroc([confidence(r, penalty) for r in A if r["right"]],
                                  [confidence(r, penalty) for r in A if not r["right"]]),
        "auroc_answerable_vs_not": auroc([confidence(r, penalty) for r in A], [confidence(r, penalty) for r in U]),
    }


def tune(rows: list[dict]) -> tuple[float, tuple[float, float]]:
    best = None
    for a10 in range(0, 11, 2):
        for year in (0.0, 0.25, 0.5, 1.0):
            penalty = (a10 / 10, year)
            for t100 in range(20, 91, 2):
                threshold = t100 / 100
                r = rates(rows, threshold, penalty)
                if r["answerable_refused"] > MAX_ANSWERABLE_REFUSED - MARGIN:
                    continue
                key = (r["unanswerable_refused"], -r["answerable_refused"], -sum(penalty))
                if best is None or key > best[0]:
                    best = (key, threshold, penalty)
    return (best[1], best[2]) if best else (0.0, (0.0, 0.0))


def bands(rows: list[dict], penalty: tuple[float, float]) -> list[dict]:
    A = [r for r in rows if r["answerable"]]
    out = []
    for lo, hi in ((0.0, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01)):
        b = [r for r in A if lo <= confidence(r, penalty) < hi]
        out.append({"confidence": f"{lo:.1f}-{min(hi, 1.0):.1f}", "answerable": len(b),
                    "right_page": round(sum(r["right"] for r in b) / len(b), 3) if b else None,
                    "unanswerable": sum(1 for r in rows if not r["answerable"]
                                        and lo <= confidence(r, penalty) < hi)})
    return out


FEATURES = ("coverage", "absent", "absent_top", "years_absent", "own", "chosen")


def linear_bound(train: list[dict], test: list[dict]) -> dict:
    """What the engine's features can do at best when combined: a logistic regression of "unanswerable" on all
    of them (standardised), fitted on `train`, its threshold set so that train's answerable questions are
    refused at most MAX_ANSWERABLE_REFUSED, reported on `test`. Not what the engine runs: a bound on a better
    rule made of the same evidence."""
    import numpy as np

    def xy(rows):
        return (np.array([[float(r[f]) for f in FEATURES] for r in rows]),
                np.array([0.0 if r["answerable"] else 1.0 for r in rows]))

    x, y = xy(train)
    mu, sd = x.mean(0), x.std(0) + 1e-9
    xb = np.c_[(x - mu) / sd, np.ones(len(x))]
    w = np.zeros(xb.shape[1])
    for _ in range(3000):  # plain gradient descent: a handful of features, no library needed
        w -= 0.1 * xb.T @ (1 / (1 + np.exp(-xb @ w)) - y) / len(y)
    threshold = float(np.quantile((xb @ w)[y == 0], 1 - MAX_ANSWERABLE_REFUSED))
    tx, ty = xy(test)
    s = np.c_[(tx - mu) / sd, np.ones(len(tx))] @ w
    return {"answerable_refused": round(float((s[ty == 0] > threshold).mean()), 4),
            "unanswerable_refused": round(float((s[ty == 1] > threshold).mean()), 4),
            "auroc_answerable_vs_not": auroc(list(s[ty == 1]), list(s[ty == 0]))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db-dir", type=Path, default=None, help="keep/reuse the ingested database here")
    ap.add_argument("--save", type=Path, default=None, help="write the per-question analysis (JSONL)")
    ap.add_argument("--load", type=Path, default=None, help="read a saved analysis instead of analysing")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.load:
        rows = [json.loads(line) for line in args.load.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        if not (BENCH / "questions.jsonl").exists():
            print(json.dumps({"benchmark": "offline-calibration", "skipped": f"{BENCH} not found"}))
            return 0
        db_dir = args.db_dir or Path(tempfile.mkdtemp(prefix="ragkit-mmlb-"))
        db = db_dir / "database"
        ingest_sources([BENCH / "pdfs"], db=db, progress=False)
        index = open_index(db, progress=False)
        qs = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text(encoding="utf-8").splitlines()
              if line.strip()]
        rows = collect(db, index, qs)
        if args.save:
            args.save.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    halves = {"even": [r for r in rows if r["i"] % 2 == 0], "odd": [r for r in rows if r["i"] % 2 == 1]}
    held_out = {}
    for name, other in (("odd", "even"), ("even", "odd")):
        threshold, penalty = tune(halves[other])
        held_out[name] = {"tuned_on": other, "refuse_below": threshold, "absent_penalty": penalty[0],
                          "year_penalty": penalty[1],
                          **rates(halves[name], threshold, penalty),
                          "all_features_logistic": linear_bound(halves[other], halves[name])}
    mine = (offline.ABSENT_PENALTY, offline.YEAR_PENALTY)
    current = {"refuse_below": offline.REFUSE_BELOW, "absent_penalty": mine[0], "year_penalty": mine[1],
               **rates(rows, offline.REFUSE_BELOW, mine), "bands": bands(rows, mine),
               "held_out_odd": rates([r for r in rows if r["i"] % 2 == 1], offline.REFUSE_BELOW, mine)}
    print(json.dumps({"benchmark": "offline-calibration", "questions": len(rows), "current": current,
                      "held_out": held_out, "seconds": round(time.perf_counter() - t0, 1)}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
