"""Calibration of the offline engine's confidence on MMLongBench-Doc (473 answerable and 113 unanswerable
questions over 73 PDFs in one database): does the right-page rate rise with confidence, on held-out halves?

Every question is analysed once by the engine itself (retrieval and selection are the real ones). Its raw score
(the refusal rule's) is mapped to the confidence it reports by a monotone table (engine.CALIBRATION) fitted on
the even-numbered questions; the reliability table and the expected calibration error (ECE) are reported on the
odd-numbered ones, and the other way round. "Right" means a required page was cited; an answer to an
unanswerable question is never right. docs/benchmarks.md has the figures. Prints ONE JSON line.

    uv run python benchmarks/offline_calibration.py [--db-dir DIR] [--save rows.jsonl] [--load rows.jsonl] [--fit]
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from agent import BENCH, contain_match, page_map  # noqa: E402
from offline_refusals import confidence, current_constants, features, refused  # noqa: E402

from ragkit.answer.extractive import engine as offline  # noqa: E402
from ragkit.ingest import ingest_sources  # noqa: E402
from ragkit.search import open_index  # noqa: E402

BANDS = 10  # equal-width bands of the expected calibration error
GROUPS = 3  # equally filled groups of the reliability table (about 88 answers each on a half)
KNOTS = 8  # points of the fitted calibration table


def auroc(scores_pos: list[float], scores_neg: list[float]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count one half)."""
    if not scores_pos or not scores_neg:
        return None
    neg = sorted(scores_neg)
    total = 0.0
    for s in scores_pos:
        lo, hi = bisect.bisect_left(neg, s), bisect.bisect_right(neg, s)
        total += lo + 0.5 * (hi - lo)
    return round(total / (len(scores_pos) * len(neg)), 4)


def collect(db: Path, index, qs: list[dict]) -> list[dict]:
    pages = page_map(db, index)
    rows = []
    for i, q in enumerate(qs):
        an = offline._analyse(q["question"], index, db, 5)
        required = {(q["doc"], p) for p in q["pages"]} if q["answerable"] else None
        text = " ".join(u.text for u in an.chosen)
        rows.append({"i": i, "id": q["id"], "answerable": q["answerable"], **features(an, required, pages),
                     "cm": contain_match(q["answer"], text) if q["answerable"] and an.chosen else False})
    return rows


def answered(rows: list[dict], c: dict) -> list[tuple[float, bool]]:
    """(raw score, right page cited) of every question the rule answers."""
    return [(confidence(r, c), bool(r["right"])) for r in rows if not refused(r, c)]


def fit(points: list[tuple[float, bool]], knots: int = KNOTS) -> tuple[tuple[float, float], ...]:
    """A monotone table raw score -> share right: isotonic regression (pool adjacent violators) over the
    points sorted by score, read at `knots` equally filled positions."""
    pts = sorted(points)
    if not pts:
        return ()
    blocks: list[list[float]] = []  # [sum right, count, sum score]
    for s, ok in pts:
        blocks.append([float(ok), 1.0, s])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            a, b = blocks.pop(), blocks.pop()
            blocks.append([a[0] + b[0], a[1] + b[1], a[2] + b[2]])
    fitted = [(blk[0] / blk[1]) for blk in blocks for _ in range(int(blk[1]))]
    out: list[tuple[float, float]] = []
    n = len(pts)
    for k in range(knots):
        lo, hi = k * n // knots, max(k * n // knots + 1, (k + 1) * n // knots)
        raw = sum(p[0] for p in pts[lo:hi]) / (hi - lo)
        p = sum(fitted[lo:hi]) / (hi - lo)
        if out and p < out[-1][1]:
            p = out[-1][1]
        out.append((round(raw, 3), round(p, 3)))
    return tuple(out)


def reliability(points: list[tuple[float, bool]], mapping, groups: int = GROUPS) -> dict:
    """The confidence `mapping(raw)` against right pages: the expected calibration error over BANDS equal-width
    bands, and a reliability table of `groups` equally filled groups (sorted by confidence), each with its
    confidence range, mean and right-page rate, and whether that rate rises from group to group."""
    conf = [(mapping(s), ok) for s, ok in sorted(points, key=lambda p: p[0])]  # by score: ties stay in score order
    ece = 0.0
    for b in range(BANDS):
        lo, hi = b / BANDS, (b + 1) / BANDS
        inside = [(c, ok) for c, ok in conf if lo <= c < hi or (b == BANDS - 1 and c >= 1.0)]
        if inside:
            ece += len(inside) / len(conf) * abs(sum(ok for _, ok in inside) / len(inside)
                                                 - sum(c for c, _ in inside) / len(inside))
    table = []
    for g in range(groups):
        part = conf[g * len(conf) // groups:(g + 1) * len(conf) // groups]
        if part:
            table.append({"confidence": f"{part[0][0]:.2f}-{part[-1][0]:.2f}", "answers": len(part),
                          "mean": round(sum(c for c, _ in part) / len(part), 3),
                          "right_page": round(sum(ok for _, ok in part) / len(part), 3)})
    rising = all(a["right_page"] <= b["right_page"] for a, b in zip(table, table[1:], strict=False))
    return {"answers": len(conf), "ece": round(ece, 4) if conf else None, "rises": rising, "table": table}


def rates(rows: list[dict], c: dict) -> dict:
    A = [r for r in rows if r["answerable"]]
    U = [r for r in rows if not r["answerable"]]
    kept = [r for r in A if not refused(r, c)]
    return {"answerable": len(A), "unanswerable": len(U),
            "answerable_refused": round(sum(refused(r, c) for r in A) / len(A), 4) if A else None,
            "unanswerable_refused": round(sum(refused(r, c) for r in U) / len(U), 4) if U else None,
            "answered_with_right_page": round(sum(r["right"] for r in kept) / len(A), 4) if A else None,
            "answered_contain_match": round(sum(r["cm"] for r in kept) / len(A), 4) if A else None,
            "auroc_right_page": auroc([confidence(r, c) for r in A if r["right"]],
                                      [confidence(r, c) for r in A if not r["right"]]),
            "auroc_answerable_vs_not": auroc([confidence(r, c) for r in A], [confidence(r, c) for r in U])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db-dir", type=Path, default=None, help="keep/reuse the ingested database here")
    ap.add_argument("--save", type=Path, default=None, help="write the per-question analysis (JSONL)")
    ap.add_argument("--load", type=Path, default=None, help="read a saved analysis instead of analysing")
    ap.add_argument("--fit", action="store_true", help="also print the table fitted on all questions")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.load:
        rows = [json.loads(line) for line in args.load.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        if not (BENCH / "questions.jsonl").exists():
            print(json.dumps({"benchmark": "offline-calibration", "skipped": f"{BENCH} not found"}))
            return 0
        db = (args.db_dir or Path(tempfile.mkdtemp(prefix="ragkit-mmlb-"))) / "database"
        ingest_sources([BENCH / "pdfs"], db=db, progress=False)
        index = open_index(db, progress=False)
        index.ensure_embeddings(progress=False)  # every question ranks on the same state, as in `rag batch`
        qs = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text(encoding="utf-8").splitlines()
              if line.strip()]
        rows = collect(db, index, qs)
        if args.save:
            args.save.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    c = current_constants()
    halves = {"even": [r for r in rows if r["i"] % 2 == 0], "odd": [r for r in rows if r["i"] % 2 == 1]}
    raw = lambda s: s  # noqa: E731 - the rule's score itself
    held_out = {}
    for name, other in (("odd", "even"), ("even", "odd")):
        table = fit(answered(halves[other], c))
        held_out[name] = {"fitted_on": other, "calibration": table,
                          "raw_score": reliability(answered(halves[name], c), raw),
                          "calibrated": reliability(answered(halves[name], c),
                                                    lambda s, t=table: offline.calibrated(s, t))}
    out = {"benchmark": "offline-calibration", "questions": len(rows),
           "measure": "right page cited by confidence band, answered questions only (an answer to an "
                      "unanswerable question is wrong); table fitted on one half, reported on the other",
           "constants": c, "engine_calibration": offline.CALIBRATION,
           "engine_confidence_held_out_odd": reliability(answered(halves["odd"], c), offline.calibrated),
           "held_out": held_out, "rates": {"all": rates(rows, c), "odd": rates(halves["odd"], c)},
           "seconds": round(time.perf_counter() - t0, 1)}
    if args.fit:
        out["fitted_on_all"] = fit(answered(rows, c))
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
