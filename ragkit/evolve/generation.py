"""The generator's side of the loop: what it is asked, and how parents are chosen."""

from __future__ import annotations

import random
from dataclasses import dataclass

GENERATOR_SYSTEM = """You write texts for a task. An evaluator will score them; you are not told its criteria.
Reply with the text only: no title, no explanation, no quotes around it."""

HISTORY_SHOWN = 8  # ranked history lines in the prompt: the best ones and a few of the worst, for contrast
TEXT_CHARS = 600
POOL = 4  # parents offered to the model per candidate; it selects two  # a text is cut to this in the history shown (keeps prompts small for local models)


@dataclass(frozen=True)
class Scored:
    generation: int
    index: int
    text: str
    score: float

    @property
    def label(self) -> str:
        return f"iter{self.generation}/text{self.index}"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " ..."


def initial_messages(task: str, i: int, k: int) -> list[dict]:
    user = (f"Task: {task}\n\nWrite one text for this task. This is candidate {i} of {k} in the first "
            f"generation: make it different from what the other candidates are likely to write.")
    return [{"role": "system", "content": GENERATOR_SYSTEM}, {"role": "user", "content": user}]


def tournament(history: list[Scored], rng: random.Random, size: int = 2) -> Scored:
    contenders = [history[rng.randrange(len(history))] for _ in range(min(size, len(history)))]
    return max(contenders, key=lambda s: (s.score, -s.generation, -s.index))


def select_pool(history: list[Scored], seed: str, size: int = 0) -> list[Scored]:
    """Up to `size` (default POOL) distinct texts, each the winner of a tournament of two."""
    size = size or POOL
    rng = random.Random(seed)
    pool: list[Scored] = []
    for _ in range(size * 4):  # a few redraws when a winner is already in the pool
        if len(pool) >= min(size, len(history)):
            break
        pick = tournament(history, rng)
        if pick.label not in {p.label for p in pool}:
            pool.append(pick)
    return pool


def ranked(history: list[Scored]) -> list[Scored]:
    order = sorted(history, key=lambda s: (-s.score, s.generation, s.index))
    if len(order) <= HISTORY_SHOWN:
        return order
    worst = max(2, HISTORY_SHOWN // 4)
    return order[: HISTORY_SHOWN - worst] + order[-worst:]


def evolve_messages(task: str, history: list[Scored], pool: list[Scored], i: int, k: int) -> list[dict]:
    lines = "\n".join(f"[score {s.score:g}] {_cut(s.text)}" for s in ranked(history))
    offered = "\n".join(f"P{n} [score {s.score:g}]: {_cut(s.text)}" for n, s in enumerate(pool, 1))
    user = (
        f"Task: {task}\n\n"
        "Earlier texts for this task and the evaluator's scores (0-10, higher is better), best first:\n"
        f"{lines}\n\n"
        f"Possible parents:\n{offered}\n\n"
        f"Write candidate {i} of {k} of the next generation: select the two parents above that the scores suggest "
        "are most promising (selection), combine their traits, favouring those of the best-scoring texts "
        "(crossover), then change one thing so the text moves further in the direction the scores reward "
        "(mutation). It must still fulfil the task."
    )
    return [{"role": "system", "content": GENERATOR_SYSTEM}, {"role": "user", "content": user}]


def render_messages(messages: list[dict]) -> str:
    """The input_prompts/ file: the messages exactly as sent, readable."""
    return "\n\n".join(f"### {m['role']}\n{m['content']}" for m in messages) + "\n"


def clean_text(reply: str) -> str:
    """The model's reply as a text: code fences and wrapping quotes removed."""
    text = reply.strip()
    if text.startswith("```") and text.endswith("```") and len(text) > 6:
        text = text[3:-3].split("\n", 1)[-1] if "\n" in text[3:-3] else text[3:-3]
    text = text.strip()
    for q1, q2 in (('"', '"'), ("「", "」"), ("'", "'")):
        if len(text) > 2 and text.startswith(q1) and text.endswith(q2) and q1 not in text[1:-1]:
            text = text[1:-1].strip()
    return text
