"""Where an experiment's files go (seed 003's layout), written atomically, and its log and token usage."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ragkit.core.errors import RagError
from ragkit.core.models import Usage
from ragkit.core.paths import atomic_write_text
from ragkit.core.secrets import scrub


def _usage_dict(u: Usage, cached: int = 0) -> dict:
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens, "calls": u.calls, "cached_calls": cached,
            "cost_usd": None if u.cost_usd is None else round(u.cost_usd, 8)}


def _usage_from(d: dict | None) -> tuple[Usage, int]:
    d = d or {}
    cost = d.get("cost_usd", 0.0)
    return (Usage(input_tokens=int(d.get("input_tokens", 0)), output_tokens=int(d.get("output_tokens", 0)),
                  cost_usd=None if cost is None else float(cost), calls=int(d.get("calls", 0))),
            int(d.get("cached_calls", 0)))


@dataclass
class TokenLedger:
    """Token usage of one experiment, per role and per generation; persisted after every call (so a killed
    run loses no count) and added to on resume."""

    path: Path
    model: str
    adapter: str
    buckets: dict[str, tuple[Usage, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, path: Path, *, model: str, adapter: str) -> TokenLedger:
        ledger = cls(path, model, adapter)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ledger
        for role in ("generator", "evaluator"):
            if role in doc:
                ledger.buckets[role] = _usage_from(doc[role])
        for gen, d in (doc.get("generations") or {}).items():
            for role, u in (d or {}).items():
                ledger.buckets[f"{gen}/{role}"] = _usage_from(u)
        return ledger

    def add(self, role: str, generation: int | str, usage: Usage, *, cached: bool = False) -> None:
        with self._lock:
            for key in (role, f"{generation}/{role}"):
                u, c = self.buckets.get(key, (Usage(cost_usd=0.0), 0))
                u.add(usage)
                self.buckets[key] = (u, c + (1 if cached else 0))
            self.save()

    def total(self) -> tuple[Usage, int]:
        u, c = Usage(cost_usd=0.0), 0
        for role in ("generator", "evaluator"):
            if role in self.buckets:
                u.add(self.buckets[role][0])
                c += self.buckets[role][1]
        return u, c

    def to_json(self) -> dict:
        total, cached = self.total()
        gens: dict[str, dict] = {}
        for key, (u, c) in sorted(self.buckets.items()):
            if "/" in key:
                gen, role = key.split("/", 1)
                gens.setdefault(gen, {})[role] = _usage_dict(u, c)
        return {
            "model": self.model, "adapter": self.adapter,
            "cost_known": total.cost_usd is not None,  # a model missing from llm.PRICES has an unknown cost
            "total": _usage_dict(total, cached),
            **{role: _usage_dict(*self.buckets[role]) for role in ("generator", "evaluator") if role in self.buckets},
            "generations": dict(sorted(gens.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0))),
        }

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps(self.to_json(), ensure_ascii=False, indent=2) + "\n")


class ExecutionLog:
    """logs/execution.log: appended one line per event; the API key is scrubbed from every line."""

    def __init__(self, path: Path, secret: str | None) -> None:
        self.path = path
        self.secret = secret
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, message: str) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        line = scrub(message, self.secret)  # also one line
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp} {line}\n")


class ExperimentDir:
    """result/<id>/: generation n+1 of the loop (step n, from 0) in iter[n+1], as the evolution spec lays it
    out. A run started before generations were numbered from 1 (its first folder is iter0) keeps its numbering,
    so it resumes where it stopped."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.offset = 0 if (self.root / "iter0").is_dir() else 1

    def number(self, n: int) -> int:
        """The generation (folder) number of loop step n."""
        return n + self.offset

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def iter_dir(self, n: int) -> Path:
        return self.root / f"iter{self.number(n)}"

    def text_path(self, n: int, i: int) -> Path:
        return self.iter_dir(n) / "texts" / f"text{i}.txt"

    def prompt_path(self, n: int, i: int) -> Path:
        return self.iter_dir(n) / "input_prompts" / f"prompt_{i}.txt"

    def logic_path(self, n: int, i: int) -> Path:
        return self.iter_dir(n) / "logic" / f"creation_prompt_{i}.txt"

    def metrics_path(self, n: int) -> Path:
        return self.iter_dir(n) / "metrics.json"

    def read_metrics(self, n: int, k: int) -> list[dict] | None:
        """A finished generation's metrics, or None when it is missing or incomplete (then it is redone)."""
        try:
            doc = json.loads(self.metrics_path(n).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, list) or len(doc) != k:
            return None
        if not all(isinstance(m, dict) and {"file", "score", "reason"} <= set(m) for m in doc):
            return None
        if not all(self.text_path(n, i).is_file() for i in range(1, k + 1)):
            return None
        return doc

    def write_metrics(self, n: int, metrics: list[dict]) -> None:
        atomic_write_text(self.metrics_path(n), json.dumps(metrics, ensure_ascii=False, indent=2) + "\n")

    def read_text(self, n: int, i: int) -> str | None:
        try:
            return self.text_path(n, i).read_text(encoding="utf-8")
        except OSError:
            return None

    def check_or_write_config(self, fingerprint: dict) -> None:
        """experiment.json records what the results were made with; a resume with other settings is refused
        rather than mixing two experiments in one folder."""
        path = self.root / "experiment.json"
        if path.is_file():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                old = None
            if isinstance(old, dict):
                changed = [k for k, v in fingerprint.items() if old.get(k) != v]
                if changed:
                    raise RagError(f"{self.root}: made with a different {', '.join(changed)}; choose another "
                                   "--results folder or experiment_id (nothing was changed)")
                return
        atomic_write_text(path, json.dumps(fingerprint, ensure_ascii=False, indent=2) + "\n")
