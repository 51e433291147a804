"""ragkit's judges as evolution evaluators: `ragkit_checklist` (10 x checklist F1), `ragkit_rubric` (10 x the
rubric's overall score) and `ragkit_naive` (an answer prompt scored by batch's checklist metrics on a question
CSV, then on held-out questions). docs/evolve.md says how each scores."""

from __future__ import annotations

from pathlib import Path
from statistics import mean

from ragkit.core.config import Settings
from ragkit.core.csvio import read_csv, split_checklist
from ragkit.core.errors import RagError
from ragkit.core.models import Usage
from ragkit.evolve.adapters import Adapter
from ragkit.evolve.score import SCORE_MAX, Evaluator, Score


class ChecklistEvaluator(Evaluator):
    name = "ragkit_checklist"

    def __init__(self, *, target: str, adapter: Adapter, task: str, **_: object) -> None:
        super().__init__(target)
        self.items = split_checklist(target)
        if not self.items:
            raise RagError("ragkit_checklist: target_preference has no checklist item (one per line)")
        self.adapter = adapter
        self.task = task

    def evaluate(self, text: str, *, seed: str = "") -> Score:
        from ragkit.evaluate.judges import judge_checklist
        from ragkit.evaluate.metrics import checklist_metrics

        v = judge_checklist(self.adapter.provider, self.task, text, self.items)
        covered = min(v.n_covered, len(self.items))
        m = checklist_metrics(answerable=True, refused=False, n_items=len(self.items), covered=covered,
                              extra=v.n_extra)
        f1 = m["F1"] or 0.0
        reason = f"{covered}/{len(self.items)} checklist items covered, {v.n_extra} extra point(s) ({v.judge} judge)"
        return Score(round(SCORE_MAX * f1, 4), reason, v.usage)


class RubricEvaluator(Evaluator):
    name = "ragkit_rubric"

    def __init__(self, *, target: str, adapter: Adapter, task: str, **_: object) -> None:
        super().__init__(target)
        if adapter.is_dummy:
            raise RagError("ragkit_rubric needs a model: the dummy adapter has none (use adapter_type openai)")
        self.adapter = adapter
        self.task = task

    def evaluate(self, text: str, *, seed: str = "") -> Score:
        from ragkit.evaluate.judges import judge_rubric

        v = judge_rubric(self.adapter.provider, question=self.task, expected=self.target, answer=text,
                         sources=None, required_info=None)
        if v is None:
            raise RagError("ragkit_rubric: the judge has no model")
        why = "; ".join(f"{k}: {s}" for k, s in v.reasoning.items()) or "; ".join(v.issues)
        return Score(round(SCORE_MAX * v.overall, 4), f"overall {v.overall:.2f} ({'pass' if v.passed else 'fail'}) "
                     f"{why}".strip(), v.usage)


def _questions(path: Path, encoding: str | None = None) -> list[dict]:
    df = read_csv(path, required=("Question", "Checklist"), encoding=encoding)
    rows = [r for r in df.to_dict("records") if str(r.get("Question") or "").strip()]
    if not rows:
        raise RagError(f"{path}: no questions")
    return rows


def score_naive_prompt(prompt: str | None, questions: list[dict], settings: Settings, provider, *,
                       progress: bool = False) -> Score:
    """Answer every question with the naive strategy under `prompt` (None = the built-in one) and score the
    answers with the checklist metrics of `rag batch`. A failed answer counts as an error in the reason and
    leaves its row out; every row failing is a RagError (the experiment stops). `progress`: the index's indexing
    lines on stderr (`rag evolve` turns it on)."""
    from ragkit.answer import ask
    from ragkit.evaluate.judges import judge_checklist
    from ragkit.evaluate.metrics import checklist_metrics
    from ragkit.search import open_index

    index = open_index(Path(settings.db), progress=progress)
    index.ensure_embeddings(progress=False)  # every generation's answers rank on the same index state
    usage = Usage(cost_usd=0.0)
    f1s: list[float] = []
    recalls: list[float] = []
    errors: list[str] = []
    for row in questions:
        q = str(row["Question"])
        answer = ask(q, settings, strategy="naive", index=index, provider=provider, naive_prompt=prompt)
        usage.add(answer.usage)
        if answer.error:
            errors.append(answer.error)
            continue
        items = split_checklist(str(row.get("Checklist") or ""))
        answerable = bool(str(row.get("Reference Document") or "").strip()) if "Reference Document" in row else True
        covered = extra = 0
        if answerable and items and not answer.refused:
            v = judge_checklist(provider, q, answer.answer, items)
            usage.add(v.usage)
            covered, extra = min(v.n_covered, len(items)), v.n_extra
        if answerable and not items:
            continue  # nothing to score this row against
        m = checklist_metrics(answerable=answerable, refused=answer.refused, n_items=len(items),
                              covered=covered, extra=extra)
        f1 = m["F1"]
        if f1 is not None:
            f1s.append(f1)
        if m["Recall"] is not None:
            recalls.append(m["Recall"])
    if not f1s:
        raise RagError(f"ragkit_naive: no question could be scored ({len(errors)} error(s)"
                       f"{': ' + errors[0] if errors else ''})")
    reason = (f"Checklist F1 {mean(f1s):.3f} over {len(f1s)} question(s), Checklist Recall "
              f"{mean(recalls) if recalls else 0:.3f}" + (f", {len(errors)} error(s)" if errors else ""))
    return Score(round(SCORE_MAX * mean(f1s), 4), reason, usage)


class NaivePromptEvaluator(Evaluator):
    name = "ragkit_naive"

    def __init__(self, *, target: str, adapter: Adapter, task: str, experiment=None, settings=None,
                 progress: bool = False, **_: object) -> None:
        super().__init__(target)
        self.progress = progress
        if adapter.is_dummy:
            raise RagError("ragkit_naive needs a model to answer with (the naive strategy offline ignores its "
                           "prompt): use adapter_type openai")
        self.adapter = adapter
        base = settings or Settings()
        db = Path(experiment.db) if experiment is not None and experiment.db else Path(base.db)
        if not db.is_dir():
            raise RagError(f"ragkit_naive: {db}: no database here; run `rag ingest` first or set the db column")
        self.settings = base.with_(db=db)
        self.train = _questions(Path(target), base.csv_encoding)
        holdout = experiment.holdout_csv if experiment is not None else ""
        self.holdout = _questions(Path(holdout), base.csv_encoding) if holdout else None

    def evaluate(self, text: str, *, seed: str = "") -> Score:
        return score_naive_prompt(text, self.train, self.settings, self.adapter.provider,
                                  progress=self.progress)

    def holdout_report(self, best_text: str) -> dict | None:
        """The best prompt and the built-in one on the held-out questions (None without a holdout CSV)."""
        if self.holdout is None:
            return None
        best = score_naive_prompt(best_text, self.holdout, self.settings, self.adapter.provider,
                                  progress=self.progress)
        base = score_naive_prompt(None, self.holdout, self.settings, self.adapter.provider,
                                  progress=self.progress)
        train_base = score_naive_prompt(None, self.train, self.settings, self.adapter.provider,
                                  progress=self.progress)
        usage = Usage(cost_usd=0.0)
        for s in (best, base, train_base):
            usage.add(s.usage or Usage())
        return {"holdout_best": {"score": best.score, "reason": best.reason},
                "holdout_builtin_prompt": {"score": base.score, "reason": base.reason},
                "train_builtin_prompt": {"score": train_base.score, "reason": train_base.reason},
                "_usage": usage}


RAG_EVALUATORS: dict[str, type[Evaluator]] = {
    ChecklistEvaluator.name: ChecklistEvaluator,
    RubricEvaluator.name: RubricEvaluator,
    NaivePromptEvaluator.name: NaivePromptEvaluator,
}
