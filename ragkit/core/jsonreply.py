"""JSON replies from any model: one object found in the reply, checked against a small schema, asked for with
json_schema, then json_object, then the prompt alone (servers reject what they do not support).

    chat_json(provider, messages, *, schema=None, schema_name="result", retries=3, max_tokens=JSON_MAX_TOKENS)
        -> tuple[dict, Usage]
    json_object / json_array / json_type: schema builders; extract_json(text) -> dict
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from ragkit.core.errors import RagError
from ragkit.core.llm import Provider
from ragkit.core.models import Usage
from ragkit.core.secrets import scrub

# The cap of one JSON reply: a judge's reasons and scores or a batch of generated questions fit; a weak local
# model that loops stops there instead of writing for minutes.
JSON_MAX_TOKENS = 2048
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


def extract_json(text: str | None) -> dict:
    """The JSON object in a model reply: the whole text, a ```json fence, or the first {...} block.

    Raises ValueError saying what was wrong (fed back to the model by chat_json)."""
    if text is None or not text.strip():
        raise ValueError("the reply was empty")
    candidates = [text.strip()] + [m.strip() for m in _FENCE.findall(text)]
    decoder = json.JSONDecoder()
    for cand in candidates:
        try:
            value = json.loads(cand)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        raise ValueError(f"expected a JSON object, got a JSON {type(value).__name__}")
    for m in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    try:
        json.loads(text.strip())
    except ValueError as e:
        raise ValueError(f"no JSON object found ({e.msg} at line {e.lineno} column {e.colno})") from None
    raise ValueError("no JSON object found")


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "number": (int, float)}


# The schemas of structured replies (sent as json_schema where the server takes it, checked by check_schema either
# way) are written with these, so each says only its fields.
def json_type(name: str, description: str = "") -> dict:
    """A scalar field: "string", "number", "integer" or "boolean" (a fresh dict each time: never shared)."""
    return {"type": name, **({"description": description} if description else {})}


def json_array(items: dict) -> dict:
    return {"type": "array", "items": items}


def json_object(properties: dict, required: list[str] | None = None) -> dict:
    """An object with these properties, all of them required unless `required` names fewer."""
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else list(required)}


def check_schema(data: dict, schema: dict | None) -> None:
    """A light check of the top level: required keys present and basic types right (ValueError otherwise)."""
    if not schema:
        return
    missing = [k for k in schema.get("required", []) if k not in data]
    if missing:
        raise ValueError(f"missing required key(s): {', '.join(missing)}")
    for key, spec in (schema.get("properties") or {}).items():
        want = _TYPES.get(spec.get("type")) if isinstance(spec, dict) else None
        if key in data and want is not None and data[key] is not None:
            ok = isinstance(data[key], want) and not (want is not bool and isinstance(data[key], bool)
                                                      and spec.get("type") != "boolean")
            if not ok:
                raise ValueError(f"key {key!r} should be of type {spec.get('type')}")


def chat_json(
    provider: Provider,
    messages: list[dict],
    *,
    schema: dict | None = None,
    schema_name: str = "result",
    retries: int = 3,
    validate: Callable[[dict], None] | None = None,
    max_tokens: int = JSON_MAX_TOKENS,
) -> tuple[dict, Usage]:
    """Ask for a JSON object; retry up to `retries` times telling the model what was wrong.

    Uses response_format json_schema (with a schema) or json_object; providers that reject those degrade to
    prompt-and-parse. `validate(data)` may raise ValueError for a reply that parses but is unusable (e.g. a
    score out of range): that attempt is retried like invalid JSON, with the message fed back.
    Returns (object, usage summed over attempts); RagError when no attempt parsed. Each reply is capped at
    `max_tokens`.
    """
    if schema:
        rf = {"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": False}}
    else:
        rf = {"type": "json_object"}
    total = Usage(cost_usd=0.0)
    convo = list(messages)
    problem = "no attempt made"
    for _ in range(max(1, retries)):
        completion = provider.chat(convo, response_format=rf, temperature=0.0, max_tokens=max_tokens)
        total.add(completion.usage)
        try:
            data = extract_json(completion.content)
            check_schema(data, schema)
            if validate is not None:
                validate(data)
            return data, total
        except ValueError as e:
            problem = str(e)
        hint = f" matching this JSON schema: {json.dumps(schema, ensure_ascii=False)}" if schema else ""
        convo = convo + [
            {"role": "assistant", "content": completion.content or ""},
            {"role": "user", "content": f"Your reply was not usable: {problem}. "
                                        f"Reply again with only one JSON object{hint}."},
        ]
    raise RagError(scrub(f"{provider.name}: no valid JSON from {provider.model} after {max(1, retries)} "
                         f"attempts: {problem}", provider.settings.api_key))
