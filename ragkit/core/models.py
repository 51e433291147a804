"""Plain data passed between stages. Every stage reads and writes these; nothing else is shared."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime


@dataclass
class SearchHit:
    """One ranked page from the index. `path` is relative to the database root (posix)."""

    path: str
    page: int
    title: str
    score: float
    snippet: str = ""
    printed_page: str = ""  # the number printed on the page, when its front matter gives one (differs from page)
    # how it was ranked: "keyword", "hybrid" (keywords re-ranked by meaning) or "meaning" (found by meaning alone)
    ranking: str = "keyword"
    unembedded: int = 0  # pages in the search's scope that still lacked a vector (meaning could not weigh them)


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None = unknown (a model missing from the price table)
    calls: int = 0
    cached: int = 0  # model calls answered from the response cache: no tokens, no latency, not in `calls`

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.calls += other.calls
        self.cached += other.cached
        if self.cost_usd is None or other.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd += other.cost_usd


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it (may be malformed)


@dataclass
class Completion:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    cached: bool = False
    model: str | None = None  # the model the server says answered (its reply's `model`); None: not said, or cached


@dataclass
class Source:
    """A page an answer relies on. `path` is the Reference Document form (relative to the project root)."""

    path: str
    page: int
    title: str = ""
    excerpt: str = ""
    score: float = 0.0


@dataclass
class Answer:
    """What every strategy returns (DESIGN §2, §8)."""

    question: str
    answer: str
    refused: bool
    sources: list[Source] = field(default_factory=list)
    confidence: float = 0.0
    provider: str = ""
    model: str = ""
    strategy: str = ""
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0
    pages_read: list[str] = field(default_factory=list)  # Reference Document paths, in reading order
    error: str | None = None
    # what failed when `error` is set: "index" when the search index's service (a cluster) did (a BackendError),
    # so that a server answers 503 (try again, or another replica) rather than blaming the question or the model
    error_kind: str | None = None
    timestamp: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    general_knowledge: bool = False  # synth found nothing relevant and answered from general knowledge
    # "naive": the agent's model read no page, so the agent retrieved as naive does; "reread": the agent refused
    # after reading, and one focused call on the pages it read answered
    fallback: str | None = None
    engine: str | None = None  # what produced the answer when not the strategy itself ("offline-extractive")
    max_loops_reached: bool | None = None  # arag/agent: the step cap was hit and a best-effort answer asked for
    # offline: the question points at one document without naming it, and these documents (names) hold its words
    documents_meant: list[str] = field(default_factory=list)
    # offline: refused because no page holds the question's words; these pages were found by meaning alone
    closest: list[Source] = field(default_factory=list)
    index: str = ""  # the backend that searched (ragkit.search.backend.index_label)
    # the model the server says answered, when it is not `model` (llama-server serves its one model whatever
    # name is asked): a typo in RAG_MODEL shows instead of labelling the answer
    served_model: str | None = None

    def closest_json(self) -> list[dict]:
        """`closest` as `metadata.closest_by_meaning` gives it (in `rag ask --format json` and in `/chat`)."""
        return [{"path": s.path, "page": s.page, "title": s.title} for s in self.closest]

    def to_json(self) -> dict:
        """The exact `rag ask --format json` shape of DESIGN §8, plus `error` when the question failed (an
        unreachable server, a budget that ran out before any answer): a script must not read a failure as
        an empty answer."""
        out = {
            "answer": self.answer,
            "refused": self.refused,
            "sources": [asdict(s) for s in self.sources],
            "confidence": round(self.confidence, 3),
            "general_knowledge": self.general_knowledge,
            "metadata": {
                "provider": self.provider,
                "model": self.model,
                "strategy": self.strategy,
                "timestamp": self.timestamp,
                "steps": self.steps,
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost_usd": self.usage.cost_usd,
                "latency_ms": round(self.latency_ms, 1),
                "cached": self.usage.cached,  # model calls replayed from the cache: latency and tokens are not
                "engine": self.engine or self.strategy,
                "fallback": self.fallback,
                "index": self.index,
                **({"served_model": self.served_model} if self.served_model else {}),
            },
        }
        if self.max_loops_reached is not None:
            out["metadata"]["max_loops_reached"] = self.max_loops_reached
        if self.documents_meant:
            out["metadata"]["documents_meant"] = list(self.documents_meant)
        if self.closest:
            out["metadata"]["closest_by_meaning"] = self.closest_json()
        if self.error:
            out["error"] = self.error
        return out
