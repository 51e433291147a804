"""LLM providers behind one small interface, a registry, a response cache, and token/cost accounting.

INTERFACE (owned by the providers work; others rely on it):

    class Provider: name: str; model: str; is_offline: bool
        chat(messages, *, tools=None, tool_choice="auto", response_format=None, temperature=0.0,
             max_tokens=None) -> Completion
    chat_json(provider, messages, *, schema: dict | None = None, schema_name="result", retries=3)
        -> tuple[dict, Usage]          # json_schema -> json_object -> prompt-and-parse; raises RagError
    get_provider(settings, *, role="answer" | "judge") -> Provider
    MockModel(Provider): enqueue(content=None, tool_calls=None, usage=None) for unit tests
    estimate_cost(model, input_tokens, output_tokens) -> float | None   # None = unknown model
"""
