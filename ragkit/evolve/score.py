"""What every evolution evaluator is: a Score of one text (0 to SCORE_MAX, with a reason) and the Evaluator
base class, which alone holds the experiment's target preference."""

from __future__ import annotations

from dataclasses import dataclass

from ragkit.core.models import Usage

SCORE_MAX = 10.0


@dataclass
class Score:
    score: float
    reason: str = ""
    usage: Usage | None = None
    cached: bool = False


class Evaluator:
    """Scores one text. `target` is set once, here, and nowhere on the generator's side."""

    name = "base"

    def __init__(self, target: str) -> None:
        self.target = target

    def evaluate(self, text: str, *, seed: str = "") -> Score:
        raise NotImplementedError
