"""Confidence against correctness for a run that has both: a reliability table (share correct per confidence
band), the expected calibration error, and the diagram `rag report` draws. Answered rows only: a refusal
states no confidence in an answer."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ragkit.evaluate.runs import Row, Run

BANDS = 10


@dataclass
class Reliability:
    run: str
    correctness: str  # what "correct" means for this run (the column it comes from)
    n: int = 0
    ece: float | None = None  # expected calibration error: sum over bands of n_b/n * |correct_b - confidence_b|
    bands: list[dict] = field(default_factory=list)  # {"band", "n", "confidence", "correct"}


def correctness(run: Run) -> tuple[str, Callable[[Row], bool | None]] | None:
    """What "correct" means for a run, best measure first: a judge's LLM Accuracy, then a right page cited (a
    required page among the retrieved), then Contain-Match. An answered question the documents cannot answer
    is wrong whatever the measure. None when the run has none of them."""
    def judged(row: Row) -> bool | None:
        v = row.values.get("LLM Accuracy")
        return None if v is None or row.by_rule else v >= 0.5

    def right_page(row: Row) -> bool | None:
        v = row.values.get("Ref TP")
        return None if v is None else v > 0

    def contain(row: Row) -> bool | None:
        v = row.values.get("Contain Match")
        return None if v is None or row.by_rule else v >= 0.5

    for name, fn in (("LLM Accuracy", judged), ("a right page cited (Ref TP > 0)", right_page),
                     ("Contain Match", contain)):
        if any(fn(r) is not None for r in run.rows if r.answerable is not False):
            return name, fn
    return None


def reliability(run: Run, bands: int = BANDS) -> Reliability | None:
    """The run's reliability table; None without a Confidence column or a correctness measure."""
    if "Confidence" not in run.columns:
        return None
    how = correctness(run)
    if how is None:
        return None
    name, fn = how
    points: list[tuple[float, bool]] = []
    for row in run.rows:
        conf = row.values.get("Confidence")
        if conf is None or row.refused or row.error:
            continue
        ok = False if row.answerable is False else fn(row)
        if ok is not None:
            points.append((min(1.0, max(0.0, conf)), bool(ok)))
    out = Reliability(run=run.name, correctness=name, n=len(points))
    if not points:
        return out
    ece = 0.0
    for b in range(bands):
        lo, hi = b / bands, (b + 1) / bands
        inside = [(c, ok) for c, ok in points if lo <= c < hi or (b == bands - 1 and c == 1.0)]
        if not inside:
            continue
        conf = sum(c for c, _ in inside) / len(inside)
        right = sum(ok for _, ok in inside) / len(inside)
        ece += len(inside) / len(points) * abs(right - conf)
        out.bands.append({"band": f"{lo:.1f}-{hi:.1f}", "n": len(inside), "confidence": round(conf, 3),
                          "correct": round(right, 3)})
    out.ece = round(ece, 4)
    return out


def diagram_svg(tables: Sequence[Reliability], colors: Sequence[str], *, size: int = 300) -> str:
    """Share correct against mean confidence per band, one colour per run, with the diagonal of a perfectly
    calibrated confidence; a point's area grows with its band's questions."""
    left, top = 40, 16
    plot = size - left - 8
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="rel" width="{size}" height="{size}" '
             f'viewBox="0 0 {size} {size}" role="img" aria-label="confidence against correctness">',
             f'<line x1="{left}" y1="{top + plot}" x2="{left + plot}" y2="{top}" class="diag"/>',
             f'<line x1="{left}" y1="{top + plot}" x2="{left + plot}" y2="{top + plot}" class="ax"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot}" class="ax"/>',
             f'<text x="{left + plot / 2}" y="{size - 2}" class="l" text-anchor="middle">confidence</text>',
             f'<text x="10" y="{top + plot / 2}" class="l" text-anchor="middle" '
             f'transform="rotate(-90 10 {top + plot / 2})">share correct</text>']
    for v in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{left + v * plot:.0f}" y="{top + plot + 12}" class="l" text-anchor="middle">{v:g}</text>')
        parts.append(f'<text x="{left - 4}" y="{top + plot - v * plot + 3:.0f}" class="l" text-anchor="end">{v:g}</text>')
    for t, color in zip(tables, colors, strict=False):
        pts = [(left + b["confidence"] * plot, top + plot - b["correct"] * plot, b) for b in t.bands]
        if len(pts) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        for x, y, b in pts:
            r = 2.5 + min(6.0, b["n"] ** 0.5)
            tip = (f'{t.run}: confidence {b["band"]}, {b["n"]} answer(s), mean {b["confidence"]:.2f}, '
                   f'correct {b["correct"]:.2f}')
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{color}" fill-opacity="0.75">'
                         f'<title>{html.escape(tip)}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)
