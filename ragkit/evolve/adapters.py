"""Model adapters for the evolution loop: `openai` (any OpenAI-compatible server, through llm.py's provider,
response cache and cost accounting) and `dummy` (no key, no model: random Pokemon names and random scores).

An adapter answers chat messages with text. Transport failures are retried by the provider (3 attempts with
backoff); an unusable reply (empty text) is asked again here, also at most 3 times; after that the call raises
RagError and the experiment stops.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ragkit.core.config import Settings
from ragkit.core.errors import RagError
from ragkit.core.llm import MAX_ATTEMPTS, REGISTRY, Provider, get_provider
from ragkit.core.models import Usage

# the seed's sample task guesses Pokemon; the dummy adapter draws from these (types vary on purpose)
POKEMON = (
    "Pikachu", "Charmander", "Charizard", "Vulpix", "Ninetales", "Growlithe", "Arcanine", "Ponyta", "Magmar",
    "Flareon", "Squirtle", "Blastoise", "Psyduck", "Lapras", "Vaporeon", "Bulbasaur", "Oddish", "Bellsprout",
    "Chikorita", "Geodude", "Onix", "Gastly", "Gengar", "Jigglypuff", "Snorlax", "Eevee", "Mewtwo", "Dragonite",
    "Cyndaquil", "Torchic", "Treecko", "Mudkip", "Lucario", "Magikarp", "Gyarados", "Machop", "Abra",
)

# The cap of one generated text: the tasks ask for short texts, and a weak local model that loops stops here
# instead of writing for the whole request timeout (Qwen2.5-Coder-1.5B wrote 6,000+ tokens for "one or two
# sentences" without it)
GENERATION_MAX_TOKENS = 1024
ADAPTERS = ("dummy", "openai")  # plus any other provider registered in llm.REGISTRY (see adapter_names)


def adapter_names() -> tuple[str, ...]:
    """`dummy`, `openai`, and any further chat provider registered with llm.register (not offline/mock)."""
    extra = sorted(n for n, cls in REGISTRY.items() if n not in ADAPTERS and n != "mock" and not cls.is_offline)
    return (*ADAPTERS, *extra)


@dataclass
class Reply:
    text: str
    usage: Usage
    cached: bool = False


class Adapter:
    """One model behind the loop. `provider` is what ragkit's judges use (offline for dummy)."""

    name = "base"
    is_dummy = False

    def __init__(self, model: str, provider: Provider) -> None:
        self.model = model
        self.provider = provider

    def complete(self, messages: list[dict], *, temperature: float, purpose: str, seed: str = "") -> Reply:
        raise NotImplementedError


class ProviderAdapter(Adapter):
    """Every real model: llm.py's provider does the HTTP, retries, cache and cost."""

    def __init__(self, settings: Settings, model: str) -> None:
        provider = get_provider(settings.with_(model=model, judge_model=model))
        super().__init__(model, provider)
        self.name = provider.name

    def complete(self, messages: list[dict], *, temperature: float, purpose: str, seed: str = "") -> Reply:
        total = Usage(cost_usd=0.0)
        cached = True
        for _ in range(MAX_ATTEMPTS):
            c = self.provider.chat(messages, temperature=temperature, max_tokens=GENERATION_MAX_TOKENS)
            total.add(c.usage)
            cached = cached and c.cached
            text = (c.content or "").strip()
            if text:
                return Reply(text, total, cached)
            if c.cached:  # a cached empty reply would repeat forever: nudge the request so it is asked again
                messages = [*messages, {"role": "user", "content": "Your reply was empty. Reply with the text."}]
        raise RagError(f"{purpose}: {self.model} returned an empty reply {MAX_ATTEMPTS} times")


class DummyAdapter(Adapter):
    """No key, no model: a random Pokemon name for every generation call, random scores for evaluation.

    Seeded per call (experiment, generation, candidate), so a re-run repeats itself exactly."""

    name = "dummy"
    is_dummy = True

    def __init__(self, settings: Settings, model: str) -> None:
        super().__init__(model, get_provider(settings.with_(provider="offline")))

    @staticmethod
    def rng(*seed: object) -> random.Random:
        return random.Random(":".join(str(s) for s in seed))

    def complete(self, messages: list[dict], *, temperature: float, purpose: str, seed: str = "") -> Reply:
        name = self.rng("text", seed, purpose).choice(POKEMON)
        return Reply(name, Usage(input_tokens=0, output_tokens=0, cost_usd=0.0, calls=1))

    def random_score(self, *seed: object) -> float:
        return float(self.rng("score", *seed).randint(0, 10))


def make_adapter(adapter_type: str, model: str, settings: Settings) -> Adapter:
    if adapter_type == "dummy":
        return DummyAdapter(settings, model)
    if adapter_type in adapter_names():
        return ProviderAdapter(settings.with_(provider=adapter_type), model)
    raise RagError(f"unknown adapter_type {adapter_type!r}: choose one of {', '.join(adapter_names())}")
