"""Run experiments: generations with skip/resume, scoring, logs, token usage, the summary and the report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

from ragkit.core.config import Settings
from ragkit.core.errors import RagError, UsageError
from ragkit.core.paths import atomic_write_text
from ragkit.core.secrets import scrub
from ragkit.evolve.adapters import Adapter, adapter_names, make_adapter
from ragkit.evolve.evaluators import evaluator_names, make_evaluator
from ragkit.evolve.experiments import Experiment, read_experiments
from ragkit.evolve.generation import (
    Scored,
    clean_text,
    evolve_messages,
    initial_messages,
    render_messages,
    select_pool,
)
from ragkit.evolve.layout import ExecutionLog, ExperimentDir, TokenLedger
from ragkit.evolve.score import Evaluator

GENERATION_TEMPERATURE = 0.8  # variety between candidates; the evaluators ask at 0


@dataclass
class ExperimentResult:
    experiment_id: str
    folder: Path
    curve: list[dict] = field(default_factory=list)  # {"generation", "best", "mean", "best_so_far", "skipped"}
    best: dict | None = None
    error: str | None = None
    tokens: dict | None = None
    holdout: dict | None = None


@dataclass
class EvolveReport:
    results: list[ExperimentResult] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return [f"{r.experiment_id}: {r.error}" for r in self.results if r.error]


class _Run:
    """One experiment's run: the generator side never touches `self.evaluator` or the target."""

    def __init__(self, exp: Experiment, settings: Settings, root: Path, *, adapter: Adapter | None,
                 progress: bool = False) -> None:
        self.exp = exp
        self.dir = ExperimentDir(root / exp.experiment_id)
        self.secret = str(settings.api_key or "") or None
        self.settings = settings
        self.adapter = adapter or make_adapter(exp.adapter_type, exp.model_name, settings)
        # made before anything is generated, so a bad target (invalid regex, missing CSV) stops early
        self.evaluator: Evaluator = make_evaluator(exp.evaluator_type, target=exp.target_preference,
                                                   adapter=self.adapter, task=exp.task_definition,
                                                   experiment=exp, settings=settings, progress=progress)
        self.dir.root.mkdir(parents=True, exist_ok=True)
        self.dir.check_or_write_config(exp.fingerprint())
        self.log = ExecutionLog(self.dir.logs / "execution.log", self.secret)
        self.ledger = TokenLedger.load(self.dir.logs / "token_usage.json", model=exp.model_name,
                                       adapter=exp.adapter_type)

    def redact(self, text: str) -> str:
        """Scrub the key, and the target too: a server error or a model reply echoing it must not reach a log
        the generator's side writes."""
        out = scrub(text, self.secret)
        target = self.exp.target_preference.strip()
        if len(target) >= 3:
            out = out.replace(target, "[target]")
        return out

    def say(self, message: str) -> None:
        self.log.write(self.redact(message))

    # -- generator ------------------------------------------------------------------------------------
    def generate(self, n: int, history: list[Scored]) -> list[str]:
        exp, d = self.exp, self.dir
        texts: list[str] = []
        for i in range(1, exp.k + 1):
            done = d.read_text(n, i)
            if done is not None:
                self.say(f"iter{d.number(n)} text{i}: already generated, kept")
                texts.append(done)
                continue
            if n == 0:
                messages = initial_messages(exp.task_definition, i, exp.k)
                decision = f"generation {d.number(n)}: from the task definition alone"
            else:
                pool = select_pool(history, f"{exp.experiment_id}:{n}:{i}")
                messages = evolve_messages(exp.task_definition, history, pool, i, exp.k)
                decision = (f"pool: {len(pool)} tournament winners (2 drawn each) over {len(history)} scored "
                            "texts -> " + ", ".join(f"P{m} {s.label} (score {s.score:g})" for m, s in
                                                     enumerate(pool, 1))
                            + "; the model selects two of them, crosses them over and mutates the result")
            atomic_write_text(d.prompt_path(n, i), render_messages(messages))
            reply = self.adapter.complete(messages, temperature=GENERATION_TEMPERATURE,
                                          purpose=f"{exp.experiment_id} iter{d.number(n)} text{i}",
                                          seed=f"{exp.experiment_id}:{n}:{i}")
            self.ledger.add("generator", n, reply.usage, cached=reply.cached)
            text = clean_text(reply.text)
            atomic_write_text(d.logic_path(n, i), f"{decision}\n\n--- raw reply ---\n{reply.text}\n")
            atomic_write_text(d.text_path(n, i), text + "\n")  # the text last: its presence = this step done
            self.say(f"iter{d.number(n)} text{i}: generated ({reply.usage.input_tokens} in / {reply.usage.output_tokens} "
                     f"out tokens{', cached' if reply.cached else ''}); response: {text[:500]}")
            texts.append(text + "\n")
        return texts

    # -- evaluator ------------------------------------------------------------------------------------
    def evaluate(self, n: int, texts: list[str]) -> list[dict]:
        metrics = []
        for i, text in enumerate(texts, 1):
            s = self.evaluator.evaluate(text.strip(), seed=f"{self.exp.experiment_id}:{n}:{i}")
            if s.usage is not None:
                self.ledger.add("evaluator", n, s.usage, cached=s.cached)
            metrics.append({"file": f"text{i}.txt", "score": float(s.score), "reason": s.reason})
            self.say(f"iter{self.dir.number(n)} text{i}: score {s.score:g}")  # reasons stay in metrics.json (they may name the target)
        return metrics

    # -- the loop -------------------------------------------------------------------------------------
    def run(self, until: int | None) -> ExperimentResult:
        exp, d = self.exp, self.dir
        result = ExperimentResult(exp.experiment_id, d.root)
        last = exp.max_generations - 1 if until is None else min(until, exp.max_generations) - 1
        self.say(f"start {exp.experiment_id}: generations {d.number(0)}..{d.number(last)} of "
                 f"{exp.max_generations}, k={exp.k}, "
                 f"adapter {exp.adapter_type}, model {exp.model_name}, evaluator {exp.evaluator_type}")
        history: list[Scored] = []
        best_so_far: float | None = None
        try:
            for n in range(last + 1):
                metrics = d.read_metrics(n, exp.k)
                skipped = metrics is not None
                if skipped:
                    self.say(f"iter{d.number(n)}: complete, skipped")
                else:
                    texts = self.generate(n, history)
                    metrics = self.evaluate(n, texts)
                    d.write_metrics(n, metrics)
                    self.say(f"iter{d.number(n)}: done, best {max(m['score'] for m in metrics):g}")
                for i, m in enumerate(metrics, 1):
                    history.append(Scored(d.number(n), i, d.read_text(n, i) or "", float(m["score"])))
                scores = [float(m["score"]) for m in metrics]
                best_so_far = max(scores) if best_so_far is None else max(best_so_far, max(scores))
                result.curve.append({"generation": d.number(n), "best": max(scores), "mean": round(mean(scores), 4),
                                     "best_so_far": best_so_far, "skipped": skipped})
        except RagError as e:
            result.error = self.redact(f"iter{d.number(len(result.curve))}: {e}; stopped (finished generations are kept, "
                                       "run again to resume)")
            self.say(f"error: {result.error}")
        if history:
            top = max(history, key=lambda s: (s.score, -s.generation, -s.index))
            result.best = {"file": f"iter{top.generation}/texts/text{top.index}.txt", "score": top.score,
                           "text": top.text.strip()}
        if result.error is None and last == exp.max_generations - 1 and result.best is not None:
            result.holdout = self._holdout(result.best["text"])
        result.tokens = self.ledger.to_json()["total"]
        summary = {"experiment_id": exp.experiment_id, "generations": result.curve, "best": result.best,
                   "complete": result.error is None and len(result.curve) == exp.max_generations,
                   "error": result.error, "token_usage": result.tokens}
        if result.holdout is not None:
            summary["holdout"] = result.holdout
        atomic_write_text(d.root / "summary.json", json.dumps(summary, ensure_ascii=False, indent=2) + "\n")
        self.say(f"end {exp.experiment_id}: " + ("ok" if result.error is None else "stopped with an error"))
        return result

    def _holdout(self, best_text: str) -> dict | None:
        """ragkit_naive: the best prompt vs the built-in one on held-out questions, once (holdout.json)."""
        report = getattr(self.evaluator, "holdout_report", None)
        if report is None:
            return None
        path = self.dir.root / "holdout.json"
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            if old.get("best_text") == best_text:
                return old
        except (OSError, ValueError, AttributeError):
            pass
        try:
            doc = report(best_text)
        except RagError as e:
            self.say(f"holdout: {e}")
            return {"error": self.redact(str(e))}
        if doc is None:
            return None
        usage = doc.pop("_usage", None)
        if usage is not None:
            self.ledger.add("evaluator", "holdout", usage)
        doc["best_text"] = best_text
        atomic_write_text(path, json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        self.say(f"holdout: best prompt {doc['holdout_best']['score']:g}, built-in prompt "
                 f"{doc['holdout_builtin_prompt']['score']:g}")
        return doc


def run_experiment(exp: Experiment, settings: Settings, results: Path, *, until: int | None = None,
                   adapter: Adapter | None = None, progress: bool = False) -> ExperimentResult:
    try:
        run = _Run(exp, settings, Path(results), adapter=adapter, progress=progress)
    except RagError as e:
        msg = scrub(str(e), str(settings.api_key or "") or None)
        if len(exp.target_preference.strip()) >= 3:
            msg = msg.replace(exp.target_preference.strip(), "[target]")
        return ExperimentResult(exp.experiment_id, Path(results) / exp.experiment_id, error=msg)
    return run.run(until)


def load(csv_path: Path, only: list[str] | None = None, encoding: str | None = None) -> list[Experiment]:
    """The experiments of the CSV, or only those in `only` (the other rows are not read: ragkit.evolve.experiments)."""
    return read_experiments(Path(csv_path), adapters=adapter_names(), evaluators=evaluator_names(),
                            encoding=encoding, only=only)


def run_experiments(csv_path: Path, settings: Settings, *, results: Path | None = None,
                    only: list[str] | None = None, until: int | None = None,
                    progress: bool = False) -> EvolveReport:
    """`rag evolve`: every experiment of the CSV (or those in `only`), each in results/<experiment_id>/.
    An experiment that fails stops with its error recorded; the others still run. `progress`: the index's
    indexing lines on stderr, for an evaluator that searches a database (the CLI turns it on)."""
    if until is not None and until < 1:
        raise UsageError(f"until must be at least 1 (generations 1..N), got {until}", flags={"until": "--until"})
    experiments = load(csv_path, only, settings.csv_encoding)
    root = Path(results) if results is not None else Path(settings.results)
    report = EvolveReport()
    for exp in experiments:
        report.results.append(run_experiment(exp, settings, root, until=until, progress=progress))
    return report
