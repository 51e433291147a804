"""The experiment CSV of seed 003: one row per experiment, read strictly (a bad cell is one line naming it)."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from ragkit.core.csvio import read_csv
from ragkit.core.errors import RagError, UsageError
from ragkit.core.paths import sanitize_name

REQUIRED = ("experiment_id", "max_generations", "k", "model_name", "adapter_type", "task_definition",
            "target_preference", "evaluator_type")
OPTIONAL = ("holdout_csv", "db")  # used by the ragkit_naive evaluator
MAX_K = 100
MAX_GENERATIONS = 1000
MAX_ID = 100


def plain_id(exp_id: str) -> bool:
    """One plain folder name under --results: letters and digits of any script (日本語実験), then also '.', '_'
    and '-'; at most MAX_ID characters, NFC, and a name sanitize_name keeps as it is (no device name such as
    CON, no trailing dot)."""
    if not exp_id or len(exp_id) > MAX_ID or not exp_id[0].isalnum():
        return False
    if not all(c.isalnum() or c in "._-" or unicodedata.category(c).startswith("M") for c in exp_id):
        return False
    return unicodedata.normalize("NFC", exp_id) == exp_id and sanitize_name(exp_id, max_len=MAX_ID) == exp_id


@dataclass(frozen=True)
class Experiment:
    experiment_id: str
    max_generations: int
    k: int
    model_name: str
    adapter_type: str
    task_definition: str
    target_preference: str = ""  # the evaluator's hidden criterion: never given to the generator
    evaluator_type: str = "llm"
    holdout_csv: str = ""
    db: str = ""
    row: int = 0  # line in the CSV (1 = header), for messages

    def __repr__(self) -> str:  # keeps the hidden preference out of any log or traceback that shows us
        return (f"Experiment(id={self.experiment_id!r}, generations={self.max_generations}, k={self.k}, "
                f"adapter={self.adapter_type!r}, model={self.model_name!r}, evaluator={self.evaluator_type!r})")

    @property
    def target_digest(self) -> str:
        """A hash of the target, so a resumed run can tell it changed without writing the target down."""
        return hashlib.sha256(self.target_preference.encode("utf-8")).hexdigest()[:16]

    def fingerprint(self) -> dict:
        """What must not change between a run and its resume (max_generations may grow)."""
        return {"experiment_id": self.experiment_id, "k": self.k, "model_name": self.model_name,
                "adapter_type": self.adapter_type, "task_definition": self.task_definition,
                "target_sha256": self.target_digest, "evaluator_type": self.evaluator_type}


def _int(value: str, where: str, low: int, high: int) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise RagError(f"{where}: must be a whole number, got {value!r}") from None
    if not low <= n <= high:
        raise RagError(f"{where}: must be between {low} and {high}, got {n}")
    return n


def read_experiments(path: Path, *, adapters: tuple[str, ...], evaluators: tuple[str, ...],
                     encoding: str | None = None, only: Collection[str] | None = None) -> list[Experiment]:
    """Every row of the CSV as an Experiment (with `only`: the rows of those experiment_ids, NFC, and no other
    row is checked: a bad row the user did not select must not stop the ones selected); RagError naming file,
    row and field for the first bad cell, UsageError for an id of `only` that no row has."""
    df = read_csv(Path(path), required=REQUIRED, encoding=encoding)
    out: list[Experiment] = []
    seen: dict[str, int] = {}
    wanted = {unicodedata.normalize("NFC", o) for o in only} if only else None
    ids: set[str] = set()
    for i, rec in enumerate(df.to_dict("records")):
        line = i + 2
        if not any(str(v).strip() for v in rec.values()):
            continue  # a blank line
        where = f"{path}: row {line}"
        cells = {c: str(rec.get(c, "") or "").strip() for c in (*REQUIRED, *OPTIONAL)}
        exp_id = unicodedata.normalize("NFC", cells["experiment_id"])
        ids.add(exp_id)
        if wanted is not None and exp_id not in wanted:
            continue
        if not plain_id(exp_id):
            raise RagError(f"{where}, experiment_id: {exp_id!r} is not a plain folder name (letters and digits "
                           f"of any script, then also '.', '_', '-'; at most {MAX_ID}; not a device name such as "
                           "CON)")
        if exp_id in seen:
            raise RagError(f"{where}, experiment_id: {exp_id!r} is already used on row {seen[exp_id]}")
        seen[exp_id] = line
        adapter = cells["adapter_type"].lower()
        if adapter not in adapters:
            raise RagError(f"{where}, adapter_type: {cells['adapter_type']!r} is not one of {', '.join(adapters)}")
        evaluator = cells["evaluator_type"].lower()
        if evaluator not in evaluators:
            raise RagError(f"{where}, evaluator_type: {cells['evaluator_type']!r} is not one of "
                           f"{', '.join(evaluators)}")
        if not cells["task_definition"]:
            raise RagError(f"{where}, task_definition: empty")
        if not cells["model_name"]:
            raise RagError(f"{where}, model_name: empty (the dummy adapter ignores it, but give one)")
        if not cells["target_preference"] and evaluator != "llm":
            raise RagError(f"{where}, target_preference: empty (evaluator {evaluator} needs it)")
        out.append(Experiment(
            experiment_id=exp_id,
            max_generations=_int(cells["max_generations"], f"{where}, max_generations", 1, MAX_GENERATIONS),
            k=_int(cells["k"], f"{where}, k", 1, MAX_K),
            model_name=cells["model_name"],
            adapter_type=adapter,
            task_definition=cells["task_definition"],
            # keep the target's own line breaks: rule evaluators read one keyword/pattern per line
            target_preference=str(rec.get("target_preference", "") or "").strip(),
            evaluator_type=evaluator,
            holdout_csv=cells["holdout_csv"],
            db=cells["db"],
            row=line,
        ))
    if wanted is not None:
        missing = [o for o in only or () if unicodedata.normalize("NFC", o) not in ids]
        if missing:
            raise UsageError(f"only={missing}: no such experiment_id in {path} (found: {', '.join(sorted(ids))})",
                             flags={f"only={missing}": f"--only {', '.join(missing)}"})
    if not out:
        raise RagError(f"{path}: no experiments (the CSV has a header but no rows)")
    return out
