"""Answer strategies over the page tree, one module each, behind one entry point:

    ask(question, settings, *, strategy="agent", ...) -> Answer
    STRATEGIES: the registry, name -> strategy function (run, answer, toolbox) -> Answer
    TOOLBOXES: the strategies whose tools are not the agent's Toolbox (arag: aragtools.ARagTools)
    TASKS: what a question asks for ("qa", "summarization")

Offline (no model), every strategy but longctx and arag runs the extractive engine (`extractive.answer_offline`);
those two run it over what they retrieved themselves."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragkit.answer.agent import MAX_STEPS, MAX_TOKENS, agent_answer
from ragkit.answer.arag import arag_answer
from ragkit.answer.aragtools import ARagTools
from ragkit.answer.longctx import longctx_answer
from ragkit.answer.naive import naive_answer
from ragkit.answer.run import QuestionRun, Trace, error_line
from ragkit.answer.synth import synth_answer
from ragkit.core.config import Settings
from ragkit.core.errors import BackendError, UsageError
from ragkit.core.models import Answer
from ragkit.core.paths import reference_path
from ragkit.core.text import detect_lang

# name -> strategy(run, answer, toolbox) -> Answer; batch, serve and evolve take their choices from here
STRATEGIES: dict[str, Callable[[QuestionRun, Answer, Any], Answer]] = {
    "agent": agent_answer, "naive": naive_answer, "synth": synth_answer, "longctx": longctx_answer,
    "arag": arag_answer,
}
TOOLBOXES: dict[str, type] = {"arag": ARagTools}
OWN_OFFLINE = ("longctx", "arag")  # strategies with their own offline path
TASKS = ("qa", "summarization")


def ask(
    question: str,
    settings: Settings,
    *,
    strategy: str = "agent",
    trace_path: Path | None = None,
    index: Any = None,
    provider: Any = None,
    max_steps: int | None = None,
    max_tokens: int | None = None,
    naive_prompt: str | None = None,
    task: str = "qa",
    progress: bool = False,
    search: str | None = None,
) -> Answer:
    """Answer `question` from the database at settings.db with the chosen strategy (DESIGN §2).

    A missing or empty database, an unknown strategy or an unusable trace path is a user mistake (RagError /
    UsageError). `task` "summarization" asks for a summary (arag: its longer step cap). `naive_prompt` replaces the naive strategy's instructions (its rules and reply format stay).
    A provider or model failure is not raised: the Answer comes back with `error` set (one line,
    API key scrubbed) and whatever usage was spent; `error_kind` is "index" when the search index's cluster
    failed (a BackendError), which a server answers as unavailable (503), not as a failed answer.
    `progress`: the index's indexing and embedding lines on stderr when this call opens it (the CLI's).
    `search`: what to search when it is not the question itself (a chat's offline follow-up, the user's words
    with an earlier question's carried): the extractive engine finds pages by it and quotes what answers the
    question; every other path is given it as the question, as it cannot take the two apart.
    """
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if search is not None and not str(search).strip():
        search = None
    if not str(question or "").strip():
        raise UsageError("the question is empty")
    if task not in TASKS:
        raise UsageError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    # budgets: the arguments, else Settings fields of the same name when Settings has them, else the defaults
    if max_steps is None:
        max_steps = getattr(settings, "max_steps", None) or MAX_STEPS
    if max_tokens is None:
        max_tokens = getattr(settings, "max_tokens", None) or MAX_TOKENS
    if max_steps < 1 or max_tokens < 1:
        raise UsageError("max_steps and max_tokens must be at least 1")
    db = Path(settings.db)
    if index is None:
        from ragkit.search import open_index
        from ragkit.search.backend import require_database

        require_database(db)
        index = open_index(db, progress=progress)
    if not index.pages():
        from ragkit.search.backend import no_pages_error

        raise no_pages_error(db)
    from ragkit.search.backend import index_label

    label = index_label(db)  # what `rag ask --format json` and /chat name as the backend that searched
    if provider is None:
        from ragkit.core.llm import get_provider

        provider = get_provider(settings)
    extractive = provider.is_offline and strategy not in OWN_OFFLINE
    if search is not None and not extractive:
        question = search
    secret = str(settings.api_key or "") or None
    trace = Trace(trace_path, secret)
    t0 = time.perf_counter()
    answer = Answer(question=question, answer="", refused=False, provider=provider.name, model=provider.model,
                    strategy=strategy)
    start_pages = getattr(settings, "start_pages", 0)
    trace.write("start", question=question, strategy=strategy, provider=provider.name, model=provider.model,
                db=str(db), max_steps=max_steps, max_tokens=max_tokens, start_pages=start_pages, task=task)
    run = QuestionRun(question=question, db=db, index=index, provider=provider, trace=trace, max_steps=max_steps,
               max_tokens=max_tokens, lang=detect_lang(question), naive_prompt=naive_prompt,
               context_tokens=settings.context_tokens, start_pages=start_pages, task=task)
    from ragkit.answer.tools import Toolbox

    toolbox = TOOLBOXES.get(strategy, Toolbox)(db, index)
    try:
        if extractive:
            from ragkit.answer.extractive import answer_offline

            answer = answer_offline(question, index, db, k=5, trace=trace, search=search)
            answer.strategy = strategy
            run.usage = answer.usage
        else:
            answer = STRATEGIES[strategy](run, answer, toolbox)
    except Exception as e:  # a model/provider failure (or a bug) must not sink a batch of questions
        from ragkit.core.secrets import scrub

        answer.error = scrub(error_line(e), secret)
        answer.error_kind = "index" if isinstance(e, BackendError) else None
        answer.steps = run.calls
        trace.write("error", error=answer.error)
    finally:
        answer.usage = run.usage
        answer.index = label
        answer.served_model = getattr(provider, "served_model", None)
        answer.latency_ms = (time.perf_counter() - t0) * 1000
        if not provider.is_offline:
            answer.pages_read = [reference_path(db, p) for p in toolbox.pages_read]
        if secret:
            from ragkit.core.secrets import mask

            answer.answer = mask(answer.answer, secret)
        trace.write("answer", **{**answer.to_json(), "error": answer.error}, pages_read=answer.pages_read)
        trace.close()
    return answer

