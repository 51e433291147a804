"""One question's run, shared by every strategy: model calls with usage and trace, the pages as the model sees
them, and finishing a reply into an Answer (validated sources, refusal in the question's language, confidence)."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragkit.answer.prompts import FINAL_FORMAT, LANG_NAMES, RULES, SUMMARY_RULE
from ragkit.answer.replies import FinalReply
from ragkit.core import waiting
from ragkit.core.errors import PathEscapeError, RagError
from ragkit.core.models import Answer, Completion, Source, Usage
from ragkit.core.pagefile import first_heading, parse_page
from ragkit.core.paths import page_number, reference_path, resolve_in_db, strip_db_prefix
from ragkit.core.secrets import mask
from ragkit.core.text import (
    is_refusal,
    join_cjk_breaks,
    one_line,
    refusal_text,
    split_sentences,
    tokenize,
)

REPLY_MAX_TOKENS = 1024  # output cap of every model call: a final answer is short, and a server that pads a
# reply (llama.cpp with tool_choice="required" lets some models emit newlines to the context's end) stops here
CONTEXT_PAGE_CHARS = 6_000  # page text given to naive/synth calls, per page


# -- tracing -------------------------------------------------------------------------------------------
class Trace:
    """JSONL trace, one object per step, appended and flushed as it happens; the API key is scrubbed."""

    def __init__(self, path: Path | None, secret: str | None) -> None:
        self._fh = None
        self._secret = secret if secret and len(secret) >= 4 else None
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        if path is not None:
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = path.open("a", encoding="utf-8")
            except OSError as e:
                raise RagError(f"{path}: cannot write the trace file: {e.strerror or e}") from None

    def write(self, event: str, **fields: Any) -> None:
        if self._fh is None:
            return
        record = {"event": event, "t_ms": round((time.perf_counter() - self._t0) * 1000, 1), **fields}
        line = json.dumps(record, ensure_ascii=False, default=str)
        if self._secret:
            line = mask(line, self._secret)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# -- one question's run --------------------------------------------------------------------------------
@dataclass
class QuestionRun:
    question: str
    db: Path
    index: Any
    provider: Any
    trace: Trace
    max_steps: int
    max_tokens: int
    lang: str = "en"
    naive_prompt: str | None = None  # replaces the first part of NAIVE_SYSTEM (rag evolve tunes it)
    context_tokens: int = 32_000  # longctx's budget (Settings.context_tokens)
    start_pages: int = 0  # agent: pages of the question's search read before the first turn (ask passes Settings')
    task: str = "qa"  # "qa" | "summarization" (arag's step cap and prompt, every strategy's summary rule)
    usage: Usage = field(default_factory=lambda: Usage(cost_usd=0.0))
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def refusal(self) -> str:
        return refusal_text(self.lang)

    @property
    def lang_name(self) -> str:
        return LANG_NAMES.get(self.lang, "the question's language")

    @property
    def tokens(self) -> int:
        return self.usage.input_tokens + self.usage.output_tokens

    def chat(self, messages: list[dict], purpose: str, **kw: Any) -> Completion:
        """One model call: usage summed, step counted, traced (thread-safe: synth drafts run in parallel)."""
        t0 = time.perf_counter()
        try:
            kw.setdefault("max_tokens", REPLY_MAX_TOKENS)
            with waiting.doing(purpose):  # what the waiting line on stderr names
                c = self.provider.chat(messages, temperature=0.0, **kw)
        except Exception as e:
            self.trace.write("llm_error", purpose=purpose, ms=elapsed_ms(t0), error=error_line(e))
            raise
        with self.lock:
            self.usage.add(c.usage)
            self.calls += 1
        self.trace.write("llm", purpose=purpose, ms=elapsed_ms(t0), input_tokens=c.usage.input_tokens,
                         output_tokens=c.usage.output_tokens, cost_usd=c.usage.cost_usd, cached=c.cached,
                         finish_reason=c.finish_reason, model=c.model, tool_calls=[t.name for t in c.tool_calls],
                         content_chars=len(c.content or ""))
        return c


def elapsed_ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)


def error_line(e: BaseException | str) -> str:
    text = str(e) if isinstance(e, RagError | str) else f"{type(e).__name__}: {e}"
    return one_line(text)[:500]


# -- sources -------------------------------------------------------------------------------------------
def page_rel(db: Path, cited: str) -> str | None:
    """A cited path as a db-relative page path, or None when it is not a page file inside the database."""
    raw = str(cited).strip().strip("`\"'")
    if not raw or "\x00" in raw or "\\" in raw:
        return None
    root = db.resolve()
    candidates = [raw]
    stripped = strip_db_prefix(db, raw)
    if stripped != raw:
        candidates.append(stripped)
    for cand in candidates:
        if cand.startswith("/"):
            continue  # absolute paths only come from strip_db_prefix's relative form
        try:
            full = resolve_in_db(root, cand)
        except PathEscapeError:
            continue
        if full.is_file() and full.suffix == ".md":
            rel = full.relative_to(root).as_posix()
            if not any(p.startswith(".") for p in rel.split("/")):
                return rel
    return None


def _support(answer: str, page_text: str) -> tuple[float, str]:
    """(share of the answer's words found on the page, the page sentence sharing most words with it)."""
    want = set(tokenize(answer, drop_stopwords=True))
    if not want:
        return 0.0, ""
    page_tokens = set(tokenize(page_text, drop_stopwords=True))
    score = len(want & page_tokens) / len(want)
    best, best_n = "", 0
    for sentence in split_sentences(page_text):
        n = len(want & set(tokenize(sentence, drop_stopwords=True)))
        if n > best_n:
            best, best_n = sentence, n
    best = " ".join(best.split())
    return round(score, 3), best[:300]


def make_sources(run: QuestionRun, rels: list[str], answer: str) -> list[Source]:
    out = []
    for rel in rels:
        try:
            text = (run.db.resolve() / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        meta, body = parse_page(text)
        body = join_cjk_breaks(body)
        score, excerpt = _support(answer, body)
        if not excerpt:
            excerpt = " ".join(body.split())[:300]
        out.append(Source(path=reference_path(run.db, rel), page=meta.page or page_number(rel) or 0,
                          title=first_heading(body) or meta.section, excerpt=excerpt, score=score))
    return out


def resolve_cited(run: QuestionRun, cited: list[str | int], numbered: list[str] | None = None) -> list[str]:
    """Valid db-relative pages among what the model cited (paths, or [n] numbers into `numbered`)."""
    out: list[str] = []
    for c in cited:
        rel = None
        if numbered is not None:
            m = re.fullmatch(r"\s*\[?(\d{1,2})\]?\s*", str(c))
            if m and 1 <= int(m.group(1)) <= len(numbered):
                rel = numbered[int(m.group(1)) - 1]
        if rel is None and isinstance(c, str):
            rel = page_rel(run.db, c)
        if rel and rel not in out:
            out.append(rel)
    return out


def _confidence(*, refused: bool, sources: list[Source], parsed: bool, fell_back: bool, forced: bool) -> float:
    """Heuristic confidence in [0, 1]: 0 for a refusal (or an answer with no page behind it, 0.1); otherwise
    0.35 + 0.45 x the mean share of the answer's words found on its source pages, +0.1 when the model used the
    answer format, +0.1 when it cited its pages itself (not the pages-read fallback), -0.15 when a budget ran
    out and it had to answer from what it had."""
    if refused:
        return 0.0
    if not sources:
        return 0.1
    support = sum(s.score for s in sources) / len(sources)
    c = 0.35 + 0.45 * support + (0.1 if parsed else 0.0) + (0.0 if fell_back else 0.1) - (0.15 if forced else 0.0)
    return round(min(1.0, max(0.0, c)), 3)


def finish(run: QuestionRun, answer: Answer, final: FinalReply, *, candidates: list[str], numbered: list[str] | None = None,
            forced: bool = False) -> Answer:
    """Fill answer text, refusal flag, validated sources and confidence from the model's final reply."""
    text = final.answer.strip()
    refused = final.refused if final.refused is not None and text else is_refusal(text)  # "" is no answer
    cited = resolve_cited(run, final.cited, numbered)
    fell_back = False
    if refused:
        cited = []
        if not text or not is_refusal(text) or (run.refusal in text and text != run.refusal):
            # the model set the flag, or quoted the refusal sentence inside chatter about the reply format
            # ('The answer is exactly "I cannot answer ..." and refused is true.'): say it plainly, in the
            # question's language
            text = run.refusal
    elif not cited:
        cited, fell_back = list(candidates), True
    answer.answer = text
    answer.refused = refused
    answer.sources = make_sources(run, cited, text) if not refused else []
    if fell_back and any(src.score > 0 for src in answer.sources):
        # the model cited nothing, so every page it was given stood as a source: a page holding none of the
        # answer's words is not its evidence (s57: "14 characters long" listed 4 start pages on other topics)
        answer.sources = [src for src in answer.sources if src.score > 0]
    answer.confidence = _confidence(refused=refused, sources=answer.sources, parsed=final.parsed,
                                    fell_back=fell_back, forced=forced)
    return answer


# -- strategies ----------------------------------------------------------------------------------------
def rules(run: QuestionRun, *, read_rule: str) -> str:
    out = RULES.format(read_rule=read_rule, refusal=run.refusal, lang_name=run.lang_name)
    if run.task == "summarization":
        out += "\n" + SUMMARY_RULE
    return out


def final_format(run: QuestionRun) -> str:
    return FINAL_FORMAT.format(refusal=run.refusal)



def tool_history_text(transcript: list[tuple[str, str, str]], reader: str, budget: int) -> str:
    """A tool loop's (name, arguments, result) history as plain text for a tool-less last call (no tool
    messages, so any server takes it): the `reader` tool's pages first and whole, other results cut at 2,000
    characters, everything within `budget` characters."""
    parts: list[str] = []
    for name, args, result in sorted(transcript, key=lambda e: e[0] != reader):
        entry = f"### {name}({args})\n{result if name == reader else result[:2000]}"
        if len(entry) > budget:
            entry = entry[:max(0, budget)] + "\n[... cut]"
        parts.append(entry)
        budget -= len(entry)
        if budget <= 0:
            break
    return "\n\n".join(parts) if parts else "(no tool was used)"


def trace_args(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except (TypeError, ValueError):
        return (arguments or "")[:500]



def page_text(toolbox: Any, path: str) -> str:
    """A page as naive, synth and the agent's start pages give it: read_page, cut at CONTEXT_PAGE_CHARS."""
    text = toolbox.read_page(path)
    if len(text) > CONTEXT_PAGE_CHARS:
        text = text[:CONTEXT_PAGE_CHARS] + "\n[... page cut]"
    return text


def page_block(toolbox: Any, n: int, path: str, page: int) -> str:
    return f"=== Search result [{n}]: {path} (page {page}) ===\n{page_text(toolbox, path)}"


def search_ranking(hits: list) -> dict:
    """How a search's hits were ranked, for the trace: "keyword", "hybrid" or "meaning" per hit, and the pages in
    scope that still lacked a vector."""
    return {"ranking": [h.ranking for h in hits], "unembedded": max((h.unembedded for h in hits), default=0)}
