"""What made a results file: strategy, provider, model, judge model, k, context tokens, ragkit version, database,
the index backend that searched it and date, written as `<results>.run.json` beside the CSV by batch and eval and read back by compare and report,
which label each run by the fields that differ from the others ("agent · qwen2.5-coder-1.5b")."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ragkit.core.paths import atomic_write_text

RUN_SUFFIX = ".run.json"
# the fields a label is made of, in this order; strategy and model always (what a reader asks first)
_ALWAYS = ("strategy", "model")
_LABEL_FIELDS = ("strategy", "model", "provider", "judge_model", "k", "context_tokens", "max_steps", "max_tokens",
                 "embeddings", "api_host", "index", "database", "database_sha256", "converter", "questions_sha256",
                 "version", "commit", "kind", "date")
# fields a record written before them lacks (None): unknown, so never what tells two runs apart
# (context_tokens: None is a strategy without that budget, so it tells nothing either)
_UNKNOWN_WHEN_NONE = ("index", "max_steps", "max_tokens", "embeddings", "api_host", "database_sha256", "converter",
                      "questions_sha256", "commit", "context_tokens")
CONTEXT_BUDGETED = ("longctx",)  # the strategies that use context_tokens (answer/longctx.py, online and offline)
RETRIEVAL_ONLY = "search"  # the strategy that only retrieves (ragkit.evaluate.retrieval.SEARCH)
# what only a run that answers has: a retrieval-only run's record holds none of these
ANSWER_FIELDS = ("provider", "model", "judge_model", "context_tokens", "engine", "checklists_by")
QUOTING_NOTE = ("Checklist Recall measures quoting, not answering: offline genqa wrote these checklists from the "
                "pages' sentences and the offline engine answers by quoting those sentences")


def which_document_note(n: int) -> str:
    """The note of a run where the offline engine refused `n` questions for naming no document."""
    return (f"{n} refusal(s) asked which document was meant: the question points at one document without naming "
            "it, and several documents of the database hold its words (offline engine)")


@dataclass
class RunInfo:
    kind: str = ""  # "batch" | "eval" | "genqa"
    strategy: str | None = None
    provider: str | None = None  # who answered
    model: str | None = None
    # the model the server said answered when it is not `model` (llama-server serves its one model whatever name
    # is asked): None when they agree or it was not said
    served_model: str | None = None
    judge_model: str | None = None  # None: no judge model (offline: the lexical judge)
    k: int | None = None  # pages the strategy retrieves (agent: its start pages)
    context_tokens: int | None = None
    max_steps: int | None = None  # agent/arag: tool-using turns per question (None: a record written before it)
    max_tokens: int | None = None  # agent: input+output tokens per question
    # whether meaning took part in search: the embedding model's name, or "off" (RAG_EMBED=0 or not installed)
    embeddings: str | None = None
    api_host: str | None = None  # the endpoint that answered and judged, scheme://host:port; None offline
    version: str = ""
    commit: str | None = None  # ragkit's git commit when it ran from a checkout
    database: str = ""
    database_pages: int | None = None  # page files in the database (the universe) when the run started
    database_sha256: str | None = None  # ragkit.core.provenance.database_state: page paths and content
    # its recipe (provenance.FINGERPRINT); None: a record written before, recipe 1 (the `source:` path counted)
    database_fingerprint: int | None = None
    converter: int | list[int] | None = None  # the ingest manifest's converter version(s)
    answered_database: str | None = None  # eval: the database the answers came from, when not `database`
    # the backend that searched: "embedded" or "opensearch URL/PREFIX (analysis NAME)" (search.backend.index_label);
    # None in records written before it was recorded
    index: str | None = None
    date: str = ""  # ISO 8601, when the file was written
    input: str = ""  # the question CSV (batch) or the results file re-scored (eval), as given
    input_path: str | None = None  # the same, absolute
    questions: int = 0
    # provenance.questions_sha256 of the question set as read (eval: the re-scored results' questions)
    questions_sha256: str | None = None
    cached_calls: int | None = None  # model calls answered from the response cache (no latency, no tokens)
    options: dict | None = None  # genqa: the options it ran with (task, per_page, max, lang, seed)
    engine: str | None = None  # "offline-extractive" when the offline engine answered
    checklists_by: str | None = None  # "offline genqa" when every checklist came from offline genqa
    notes: list[str] = field(default_factory=list)
    # the --fail-under gates checked on this file (gates.GateResult.to_json: metric, value, threshold, rows, failed);
    # None when none was asked
    gates: list[dict] | None = None
    # answer_fingerprint of every row as written: `rag eval` tells an answer a user edited from the recorded one
    answers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.retrieval_only:
            # a retrieval-only run asks no model and no judge: records written before said who "answered" (the
            # --provider given, its model, the judge and context size it never used); none of that is this run's
            for name in ANSWER_FIELDS:
                setattr(self, name, None)
        if self.strategy is not None and self.strategy not in CONTEXT_BUDGETED:
            # only longctx fills a context up to a budget: a record of another strategy (written before this was
            # known) named a setting it never used, and labels showed it ("agent · offline · 32,000 context tokens")
            self.context_tokens = None

    @property
    def retrieval_only(self) -> bool:
        """A `--strategy search` run: its pages are its result; no answer, no judge."""
        return self.strategy == RETRIEVAL_ONLY

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> RunInfo:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def answer_fingerprint(question: object, answer: object) -> str:
    """A short digest of a row's question and answer text (line endings and outer spaces aside, which a spreadsheet
    may change on save): equal for the answer as recorded, different once a user edits it."""
    def norm(v: object) -> str:
        return str(v if v is not None else "").replace("\r\n", "\n").replace("\r", "\n").strip()

    blob = f"{norm(question)}\0{norm(answer)}".encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def run_info_path(results: Path | str) -> Path:
    """`x_results_20261125_101010.csv` -> `x_results_20261125_101010.run.json`."""
    p = Path(results)
    return p.with_name(p.stem + RUN_SUFFIX)


def write_run_info(results: Path, info: RunInfo) -> Path:
    path = run_info_path(results)
    atomic_write_text(path, json.dumps(info.to_json(), ensure_ascii=False, indent=2) + "\n")
    return path


def read_run_info(results: Path | str) -> RunInfo | None:
    """The run record beside a results file; None when there is none (an older file) or it is unreadable."""
    try:
        data = json.loads(run_info_path(results).read_text(encoding="utf-8"))
        return RunInfo.from_json(data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def _tails(paths: list[str]) -> dict[str, str]:
    """Each path's shortest tail (last folders) that no other of the paths ends with: "en/database" against
    "dbchg/database", where the last folder alone would name both "database"."""
    parts = {p: Path(p).parts or (p,) for p in paths}
    out = {}
    for p, mine in parts.items():
        others = [o for q, o in parts.items() if q != p]
        n = 1
        while n < len(mine) and any(o[-n:] == mine[-n:] for o in others):
            n += 1
        out[p] = Path(*mine[-n:]).as_posix()
    return out


def _show(name: str, value, tails: dict[str, str] | None = None) -> str:
    if name == "k":
        return f"k={value}"
    if name == "context_tokens":
        return f"{value:,} context tokens" if isinstance(value, int) else f"{value} context tokens"
    if name == "judge_model":
        return f"judge {value}" if value else "no judge model"
    if name == "index":
        return f"index {value}" if value else ""
    if name == "database":
        return (tails or {}).get(str(value)) or Path(str(value)).name or str(value)
    if name == "date":
        return str(value)[:16].replace("T", " ")
    if value in (None, ""):
        return "–"
    if name in ("database_sha256", "questions_sha256"):  # a digest's first characters tell two runs apart
        return f"{'pages' if name == 'database_sha256' else 'questions'} {str(value)[:8]}"
    if name == "commit":
        sha, _, dirty = str(value).partition("+")
        return f"commit {sha[:8]}" + (f"+{dirty}" if dirty else "")
    if name == "converter":
        return f"converter {'+'.join(map(str, value)) if isinstance(value, list) else value}"
    if name == "max_steps":
        return f"max {value} steps"
    if name == "max_tokens":
        return f"max {value:,} tokens" if isinstance(value, int) else f"max {value} tokens"
    if name == "embeddings":
        return "no embeddings" if value == "off" else f"embeddings {value}"
    return str(value)


def show_field(name: str, value) -> str:
    """A record's field as labels show it: `commit 1a2b3c4d+dirty`, `pages dd7caff6`, `questions 0f1e2d3c`."""
    return _show(name, value)


def run_labels(infos: list[RunInfo | None], fallbacks: list[str]) -> list[str]:
    """A label per run: its strategy and model, then every other field whose value differs between the runs
    (a run without a record keeps its fallback name). Labels stay unique."""
    known = [i for i in infos if i is not None]
    differ = [f for f in differing_fields(infos) if f not in _ALWAYS and f != "date"]
    if "strategy" in differing_fields(infos) and "k" in differ:
        differ.remove("k")  # what k means comes with the strategy (agent's start pages, naive's hits)
    if len(known) > 1 and not differ and len({(i.strategy, i.model) for i in known}) == 1:
        differ = ["date"]  # the same set-up twice: when is what tells them apart
    tails = _tails(sorted({str(i.database) for i in known if i.database}))
    labels = []
    for info, fallback in zip(infos, fallbacks, strict=True):
        if info is None:
            labels.append(fallback)
            continue
        shown = [f for f in (*_ALWAYS, *differ) if not (info.retrieval_only and f in ANSWER_FIELDS)]
        parts = [_show(f, getattr(info, f), tails) for f in shown
                 if f in _ALWAYS or getattr(info, f) not in (None, "") or f == "judge_model"]
        # a value said once: provider and model both "offline" read "offline", not "offline · offline"
        parts = [p for i, p in enumerate(parts) if p and p not in parts[:i]]
        labels.append(" · ".join(parts))
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


def same_fingerprint_recipe(infos: list[RunInfo | None]) -> bool:
    """Whether the records' database_sha256 were computed alike (provenance.FINGERPRINT; a record without the
    field: recipe 1): digests of two recipes differ whatever the pages, so they tell nothing."""
    return len({i.database_fingerprint or 1 for i in infos if i is not None and i.database_sha256}) <= 1


def differing_fields(infos: list[RunInfo | None]) -> list[str]:
    """The fields whose values differ between the runs that have a record (database_sha256 only when the records
    computed it alike)."""
    known = [i for i in infos if i is not None]
    return [f for f in _LABEL_FIELDS
            if not (f == "database_sha256" and not same_fingerprint_recipe(known))
            and len({json.dumps(getattr(i, f), default=str) for i in known
                     if not (f in _UNKNOWN_WHEN_NONE and getattr(i, f) is None)}) > 1]
