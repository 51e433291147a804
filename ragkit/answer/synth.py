"""Strategy `synth` (the Agentic RAG API seed): query rewrite, top-5 search, one draft per result in parallel,
and a synthesizer that cites [n] per statement and resolves contradictions; nothing relevant found: a flagged
answer from general knowledge, the only path that answers without the documents."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ragkit.answer.prompts import (
    DRAFT_SYSTEM,
    GENERAL_KNOWLEDGE_NOTE,
    GENERAL_SYSTEM,
    NOT_RELEVANT,
    REWRITE_SYSTEM,
    SYNTH_SYSTEM,
)
from ragkit.answer.replies import FinalReply
from ragkit.answer.run import QuestionRun, elapsed_ms, finish, page_block, search_ranking
from ragkit.core.errors import RagError
from ragkit.core.models import Answer

SYNTH_K = 5


def _is_not_relevant(draft: str) -> bool:
    norm = " ".join(draft.replace("_", " ").split()).upper()
    return not norm or norm.startswith(NOT_RELEVANT) or norm.strip(" .。") == NOT_RELEVANT


def synth_answer(run: QuestionRun, answer: Answer, toolbox: Any, *, workers: int = SYNTH_K) -> Answer:
    # 1. query rewrite
    c = run.chat([{"role": "system", "content": REWRITE_SYSTEM}, {"role": "user", "content": run.question}],
                 "query rewrite")
    lines = [ln.strip().strip("\"'`「」") for ln in (c.content or "").splitlines() if ln.strip()]
    query = lines[0][:300] if lines else run.question
    # 2. top-5 hybrid search (the rewrite first; the question itself when the rewrite finds nothing)
    t0 = time.perf_counter()
    hits = run.index.search(query, k=SYNTH_K)
    if not hits and query != run.question:
        hits = run.index.search(run.question, k=SYNTH_K)
    run.trace.write("search", query=query, k=SYNTH_K, hits=[h.path for h in hits], ms=elapsed_ms(t0),
                    **search_ranking(hits))
    # 3. one draft per result, in parallel
    drafts: list[str] = []
    if hits:
        draft_system = DRAFT_SYSTEM.format(lang_name=run.lang_name)

        def draft(block: str) -> str:
            # The question again after the page: a small model reads the page against the question it has
            # just seen (Qwen2.5-Coder-1.5B called the right Japanese page "NOT RELEVANT" with it only before).
            user = f"Question: {run.question}\n\n{block}\n\nQuestion (again): {run.question}"
            n = block.split("]", 1)[0].rsplit("[", 1)[-1]
            d = run.chat([{"role": "system", "content": draft_system}, {"role": "user", "content": user}],
                         f"draft {n}")
            return (d.content or "").strip()

        blocks = [page_block(toolbox, n, h.path, h.page) for n, h in enumerate(hits, 1)]  # in rank order
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(hits)))) as pool:
            drafts = list(pool.map(draft, blocks))
    relevant = [(n, h, d) for n, (h, d) in enumerate(zip(hits, drafts, strict=True), 1) if not _is_not_relevant(d)]
    if not relevant:
        # the seed's fallback: say nothing relevant was found, then answer from general knowledge, flagged
        g = run.chat([{"role": "system", "content": GENERAL_SYSTEM.format(lang_name=run.lang_name)},
                      {"role": "user", "content": run.question}], "general knowledge")
        answer.steps = run.calls
        note = GENERAL_KNOWLEDGE_NOTE.get(run.lang, GENERAL_KNOWLEDGE_NOTE["en"])
        answer.answer = f"{note}\n\n{(g.content or '').strip()}".strip()
        answer.refused = False
        answer.general_knowledge = True
        answer.sources = []
        answer.confidence = 0.1
        return answer
    # 4. the synthesizer, citing [n] and resolving contradictions
    listing = "\n\n".join(f"Draft [{n}] (from search result [{n}]: {h.path}, page {h.page}):\n{d}"
                          for n, h, d in relevant)
    s = run.chat([{"role": "system", "content": SYNTH_SYSTEM.format(refusal=run.refusal, lang_name=run.lang_name)},
                  {"role": "user", "content": f"Question: {run.question}\n\n{listing}"}], "synthesize")
    answer.steps = run.calls
    text = (s.content or "").strip()
    if not text:
        raise RagError("the model returned an empty answer")
    numbered = [h.path for h in hits]
    usable = {n for n, _, _ in relevant}
    cited: list[str | int] = [int(n) for n in re.findall(r"\[(\d{1,2})\]", text) if int(n) in usable]
    final = FinalReply(text, cited, None, True)
    return finish(run, answer, final, candidates=[h.path for _, h, _ in relevant], numbered=numbered)

