"""Providers through the real openai client against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from fakeserver import TEST_KEY, openai_settings

from ragkit.core.config import Secret, Settings, load_settings
from ragkit.core.errors import RagError, UsageError
from ragkit.core.jsonreply import JSON_MAX_TOKENS, chat_json, extract_json
from ragkit.core.llm import (
    PRICES,
    MockModel,
    OfflineProvider,
    OpenAIProvider,
    estimate_cost,
    get_provider,
)
from ragkit.core.models import ToolCall, Usage

USER = [{"role": "user", "content": "What does the ice maker do?"}]
TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search pages.",
                                           "parameters": {"type": "object",
                                                          "properties": {"query": {"type": "string"}}}}}]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}, "score": {"type": "number"}},
          "required": ["answer"]}


def provider(server, **kw) -> OpenAIProvider:
    p = get_provider(openai_settings(server, **kw))
    assert isinstance(p, OpenAIProvider)
    return p


# -- plain calls and accounting -----------------------------------------------------------------------
def test_plain_reply_counts_tokens_and_cost(scripted_server):
    scripted_server.enqueue(content="It makes ice.", usage={"prompt_tokens": 1200, "completion_tokens": 300})
    c = provider(scripted_server).chat(USER)
    assert c.content == "It makes ice." and c.tool_calls == [] and c.finish_reason == "stop"
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.calls) == (1200, 300, 1)
    assert c.usage.cost_usd == pytest.approx((1200 * 0.15 + 300 * 0.60) / 1e6)
    assert not c.cached
    body = scripted_server.requests[0]
    assert body["model"] == "gpt-4o-mini" and body["messages"] == USER and body["temperature"] == 0.0
    assert "tools" not in body and "tool_choice" not in body and "response_format" not in body


def test_default_usage_tracks_request_size(scripted_server):
    scripted_server.enqueue(content="a")
    scripted_server.enqueue(content="a")
    p = provider(scripted_server)
    small = p.chat([{"role": "user", "content": "hi"}]).usage.input_tokens
    big = p.chat([{"role": "user", "content": "word " * 2000}]).usage.input_tokens
    assert big > small + 2000


def test_unknown_model_cost_is_none_not_zero(scripted_server):
    scripted_server.enqueue(content="ok")
    c = provider(scripted_server, model="my-local-llama").chat(USER)
    assert c.usage.input_tokens > 0 and c.usage.cost_usd is None
    total = Usage(cost_usd=0.0)
    total.add(Usage(1, 1, 0.5, 1))
    total.add(c.usage)
    assert total.cost_usd is None  # unknown stays unknown when summed


def test_estimate_cost_table():
    assert estimate_cost("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert estimate_cost("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(0.15)  # dated snapshot
    assert estimate_cost("openai/gpt-4o", 0, 1_000_000) == pytest.approx(10.0)
    assert estimate_cost("llama-3-8b-instruct", 10, 10) is None
    assert estimate_cost("gpt-4o-mini", 0, 0) == 0.0
    assert all(i > 0 and o > 0 for i, o in PRICES.values())


def test_tool_calls_parsed_and_malformed_arguments_passed_raw(scripted_server):
    scripted_server.enqueue(tool_calls=[("search", {"query": "製氷機"}), ("read_page", '{"path": "a.md"')])
    c = provider(scripted_server).chat(USER, tools=TOOLS)
    assert c.finish_reason == "tool_calls" and c.content is None
    assert [t.name for t in c.tool_calls] == ["search", "read_page"]
    assert json.loads(c.tool_calls[0].arguments) == {"query": "製氷機"}
    assert c.tool_calls[1].arguments == '{"path": "a.md"'  # left for the agent to report, not fixed up
    assert all(isinstance(t, ToolCall) and t.id for t in c.tool_calls)
    body = scripted_server.requests[0]
    assert body["tools"] == TOOLS and body["tool_choice"] == "auto"


# -- retries -----------------------------------------------------------------------------------------
def test_429_then_success_retries(scripted_server):
    scripted_server.enqueue(status=429, retry_after=0)
    scripted_server.enqueue(content="fine")
    p = provider(scripted_server)
    assert p.chat(USER).content == "fine"
    assert scripted_server.statuses == [429, 200]
    assert len(p.waits) == 1


def test_retry_after_is_honoured_but_capped(scripted_server):
    scripted_server.enqueue(status=429, retry_after=3600)  # an hour: must be capped
    scripted_server.enqueue(content="ok")
    p = provider(scripted_server, retry_base_delay=0.001, retry_max_delay=0.05)
    assert p.chat(USER).content == "ok"
    assert p.waits == [0.05]

    scripted_server.enqueue(status=429, retry_after=0.2)
    scripted_server.enqueue(content="ok")
    p = provider(scripted_server, retry_base_delay=0.001, retry_max_delay=5.0)
    assert p.chat(USER).content == "ok"
    assert p.waits[0] == pytest.approx(0.2)  # the server's wait, longer than our backoff


def test_backoff_grows_exponentially(scripted_server):
    for _ in range(2):
        scripted_server.enqueue(status=503)
    scripted_server.enqueue(content="ok")
    p = provider(scripted_server, retry_base_delay=0.01, retry_max_delay=1.0)
    assert p.chat(USER).content == "ok"
    assert len(p.waits) == 2
    assert 0.01 <= p.waits[0] <= 0.015 and 0.02 <= p.waits[1] <= 0.03  # base * 2^n, plus up to 50% jitter


def test_three_500s_give_one_line_error_after_exactly_three_attempts(scripted_server):
    for _ in range(3):
        scripted_server.enqueue(status=500)
    scripted_server.enqueue(content="never reached")
    with pytest.raises(RagError) as e:
        provider(scripted_server).chat(USER)
    msg = str(e.value)
    assert "3 attempts failed" in msg and "HTTP 500" in msg and "openai" in msg
    assert "\n" not in msg
    assert len(scripted_server.requests) == 3 and scripted_server.pending == 1


def test_timeout_is_retried_then_fails(scripted_server):
    for _ in range(3):
        scripted_server.enqueue(content="too late", delay=1.0)
    with pytest.raises(RagError, match=r"3 attempts failed: timed out after 0\.2s") as e:
        provider(scripted_server, timeout=0.2).chat(USER)
    assert len(scripted_server.requests) == 3
    # report s52 M6: the line names the setting that gives a slow local model longer, with its value now
    assert "raise RAG_TIMEOUT (now 0.2 s)" in str(e.value) and "\n" not in str(e.value)


def test_timeout_then_success(scripted_server):
    scripted_server.enqueue(content="too late", delay=1.0)
    scripted_server.enqueue(content="in time")
    assert provider(scripted_server, timeout=0.2).chat(USER).content == "in time"


def test_invalid_response_body_is_retried(scripted_server):
    scripted_server.enqueue(body="<html>bad gateway</html>")
    scripted_server.enqueue(content="ok")
    assert provider(scripted_server).chat(USER).content == "ok"
    assert len(scripted_server.requests) == 2


def test_connection_refused_fails_after_three_attempts():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(provider="openai", api_key=Secret(TEST_KEY), api_base=f"http://127.0.0.1:{port}/v1",
                        cache=False, retry_base_delay=0.001, retry_max_delay=0.01)
    p = get_provider(settings)
    with pytest.raises(RagError, match="3 attempts failed: connection failed"):
        p.chat(USER)
    assert len(p.waits) == 2


def test_auth_error_is_not_retried(scripted_server):
    scripted_server.enqueue(status=401, body={"error": {"message": "Incorrect API key provided"}})
    with pytest.raises(RagError, match="HTTP 401 .check OPENAI_API_KEY.") as e:
        provider(scripted_server).chat(USER)
    assert "attempts" not in str(e.value)
    assert len(scripted_server.requests) == 1


# -- degrading for servers like llama.cpp's ----------------------------------------------------------
def test_json_schema_rejected_falls_back_to_json_object_and_remembers(scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.enqueue(content='{"answer": "ice"}')
    scripted_server.enqueue(content='{"answer": "water"}')
    p = provider(scripted_server)
    data, usage = chat_json(p, USER, schema=SCHEMA)
    assert data == {"answer": "ice"} and usage.calls == 1
    kinds = [(r.get("response_format") or {}).get("type") for r in scripted_server.requests]
    assert kinds == ["json_schema", "json_object"]
    # the schema moved into the prompt, since json_object cannot carry it
    assert '"required": ["answer"]' in scripted_server.requests[1]["messages"][0]["content"]
    data, _ = chat_json(p, USER, schema=SCHEMA)
    assert data == {"answer": "water"}
    kinds = [(r.get("response_format") or {}).get("type") for r in scripted_server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]  # remembered: no second rejection


def test_json_object_rejected_too_falls_back_to_prompt_and_parse(scripted_server):
    def responder(body):
        if "response_format" in body:
            return {"status": 400, "body": {"error": {"message": "response_format not supported"}}}
        return {"content": 'Sure! Here it is:\n```json\n{"answer": "ice"}\n```'}

    scripted_server.set_responder(responder)
    p = provider(scripted_server)
    data, _ = chat_json(p, [{"role": "system", "content": "You answer."}, *USER], schema=SCHEMA)
    assert data == {"answer": "ice"}
    last = scripted_server.requests[-1]
    assert "response_format" not in last
    assert last["messages"][0]["role"] == "system" and "Reply with JSON only" in last["messages"][0]["content"]
    assert len(last["messages"]) == 2  # instruction joined to the system message, not a second one
    assert p.rejected == {"json_schema", "json_object"}


def test_json_object_request_mentions_json(scripted_server):
    scripted_server.enqueue(content='{"a": 1}')
    data, _ = chat_json(provider(scripted_server), [{"role": "user", "content": "Give me a number."}])
    assert data == {"a": 1}
    body = scripted_server.requests[0]
    assert body["response_format"] == {"type": "json_object"}
    assert "json" in json.dumps(body["messages"]).lower()  # OpenAI refuses json_object otherwise
    assert body["max_tokens"] == JSON_MAX_TOKENS  # a reply is capped: a looping local model stops


def test_tool_choice_required_rejected_falls_back_to_auto(scripted_server):
    scripted_server.reject_tool_choice_required = True
    scripted_server.enqueue(tool_calls=[("search", {"query": "x"})])
    scripted_server.enqueue(tool_calls=[("search", {"query": "y"})])
    p = provider(scripted_server)
    c = p.chat(USER, tools=TOOLS, tool_choice="required")
    assert c.tool_calls[0].name == "search"
    p.chat(USER, tools=TOOLS, tool_choice="required")
    assert [r["tool_choice"] for r in scripted_server.requests] == ["required", "auto", "auto"]


def test_transient_5xx_without_a_feature_is_not_a_downgrade(scripted_server):
    scripted_server.enqueue(status=500)
    scripted_server.enqueue(tool_calls=[("search", {"query": "x"})])
    p = provider(scripted_server)
    p.chat(USER, tools=TOOLS)
    assert p.rejected == set()


# -- chat_json -----------------------------------------------------------------------------------------
def test_chat_json_invalid_then_valid_tells_the_model_what_was_wrong(scripted_server):
    scripted_server.enqueue(content="I think the answer is ice", usage={"prompt_tokens": 10, "completion_tokens": 5})
    scripted_server.enqueue(content='{"answer": "ice", "score": 0.9}',
                            usage={"prompt_tokens": 20, "completion_tokens": 7})
    data, usage = chat_json(provider(scripted_server), USER, schema=SCHEMA)
    assert data == {"answer": "ice", "score": 0.9}
    assert (usage.input_tokens, usage.output_tokens, usage.calls) == (30, 12, 2)
    retry = scripted_server.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "I think the answer is ice"}
    assert "not usable" in retry[-1]["content"] and "no JSON object" in retry[-1]["content"]


def test_chat_json_schema_violation_is_retried(scripted_server):
    scripted_server.enqueue(content='{"score": 1}')
    scripted_server.enqueue(content='{"answer": "x"}')
    data, _ = chat_json(provider(scripted_server), USER, schema=SCHEMA)
    assert data == {"answer": "x"}
    assert "missing required key(s): answer" in scripted_server.requests[1]["messages"][-1]["content"]


def test_chat_json_gives_up_after_retries(scripted_server):
    for _ in range(3):
        scripted_server.enqueue(content="not json {")
    with pytest.raises(RagError, match="no valid JSON .* after 3 attempts") as e:
        chat_json(provider(scripted_server), USER)
    assert "\n" not in str(e.value)
    assert len(scripted_server.requests) == 3


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ('Here you go: {"a": "b {c}"} hope that helps', {"a": "b {c}"}),
    ('{broken} then {"a": 2}', {"a": 2}),
])
def test_extract_json(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", [None, "", "no json here", "[1, 2]", '{"a": '])
def test_extract_json_rejects(text):
    with pytest.raises(ValueError):
        extract_json(text)


# -- cache ---------------------------------------------------------------------------------------------
def test_cache_hit_costs_nothing_and_skips_the_server(scripted_server, tmp_path):
    cache_dir = tmp_path / "cache"
    scripted_server.enqueue(content="ice", tool_calls=[("search", {"q": 1})])
    first = provider(scripted_server, cache=True, cache_dir=cache_dir).chat(USER, tools=TOOLS)
    # a fresh provider (as in a re-run) replays from disk
    again = provider(scripted_server, cache=True, cache_dir=cache_dir).chat(USER, tools=TOOLS)
    assert len(scripted_server.requests) == 1
    assert first.usage.cost_usd > 0 and not first.cached
    assert again.cached and again.usage.cost_usd == 0.0 and again.usage.calls == 0
    assert again.content == "ice" and again.tool_calls == first.tool_calls
    files = list(cache_dir.rglob("*.json"))
    assert len(files) == 1
    assert TEST_KEY not in files[0].read_text(encoding="utf-8")


def test_cache_hit_of_a_model_without_a_price_has_an_unknown_cost(scripted_server, tmp_path):
    """Unknown is not zero: a replay of an unpriced model costs what its every call does, unknown."""
    scripted_server.enqueue(content="ice")
    first = provider(scripted_server, cache=True, cache_dir=tmp_path / "c", model="my-local-llama").chat(USER)
    again = provider(scripted_server, cache=True, cache_dir=tmp_path / "c", model="my-local-llama").chat(USER)
    assert first.usage.cost_usd is None and again.cached and again.usage.cost_usd is None
    assert again.usage.calls == 0 and again.usage.input_tokens == 0


def test_cache_key_covers_parameters(scripted_server, tmp_path):
    scripted_server.set_responder(lambda body: {"content": "r"})
    p = provider(scripted_server, cache=True, cache_dir=tmp_path / "c")
    p.chat(USER)
    p.chat(USER, temperature=0.5)
    p.chat(USER, max_tokens=10)
    p.chat(USER, tools=TOOLS)
    p.chat(USER, response_format={"type": "json_object"})
    p.chat([{"role": "user", "content": "another question"}])
    provider(scripted_server, cache=True, cache_dir=tmp_path / "c", model="gpt-4o").chat(USER)
    assert len(scripted_server.requests) == 7
    p.chat(USER, temperature=0.5)
    assert len(scripted_server.requests) == 7


def test_cache_key_ignores_the_api_key(scripted_server, tmp_path):
    scripted_server.enqueue(content="r")
    provider(scripted_server, cache=True, cache_dir=tmp_path / "c").chat(USER)
    other = provider(scripted_server, cache=True, cache_dir=tmp_path / "c", api_key=Secret("sk-other"))
    assert other.chat(USER).cached


def test_no_cache_bypasses(scripted_server, tmp_path):
    scripted_server.set_responder(lambda body: {"content": "r"})
    for _ in range(2):
        provider(scripted_server, cache=False, cache_dir=tmp_path / "c").chat(USER)
    assert len(scripted_server.requests) == 2
    assert not (tmp_path / "c").exists()


def test_cache_default_is_on_from_load_settings(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    assert load_settings().cache is True
    assert load_settings(cache=False).cache is False


def test_cache_is_safe_with_threads(scripted_server, tmp_path):
    scripted_server.set_responder(lambda body: {"content": body["messages"][0]["content"].upper()})
    p = provider(scripted_server, cache=True, cache_dir=tmp_path / "c")
    results: list[str] = []

    def work(i):
        for j in range(5):
            results.append(p.chat([{"role": "user", "content": f"q{(i + j) % 4}"}]).content)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 30 and set(results) == {"Q0", "Q1", "Q2", "Q3"}
    files = list((tmp_path / "c").rglob("*"))
    assert len([f for f in files if f.suffix == ".json"]) == 4
    assert not [f for f in files if f.name.endswith(".tmp")]
    assert all(json.loads(f.read_text())["content"].startswith("Q") for f in files if f.suffix == ".json")


def test_damaged_cache_entry_is_ignored(scripted_server, tmp_path):
    scripted_server.set_responder(lambda body: {"content": "fresh"})
    p = provider(scripted_server, cache=True, cache_dir=tmp_path / "c")
    p.chat(USER)
    (entry,) = (tmp_path / "c").rglob("*.json")
    entry.write_text("{garbage", encoding="utf-8")
    c = p.chat(USER)
    assert c.content == "fresh" and not c.cached


# -- the key never leaks -------------------------------------------------------------------------------
def test_key_never_in_errors_reprs_or_requests(scripted_server, tmp_path):
    # a hostile/odd server echoes the key back in its error message
    echo = {"error": {"message": f"bad key {TEST_KEY} rejected"}}
    scripted_server.enqueue(status=403, body=echo)
    for _ in range(3):
        scripted_server.enqueue(status=500, body=echo)
    settings = openai_settings(scripted_server, cache=True, cache_dir=tmp_path / "c")
    p = get_provider(settings)
    errors = []
    for _ in range(2):
        with pytest.raises(RagError) as e:
            p.chat(USER)
        errors.append(e.value)
    for err in errors:
        assert TEST_KEY not in str(err) and TEST_KEY not in repr(err) and "***" in str(err)
        assert err.__cause__ is None and err.__suppress_context__
    assert TEST_KEY not in repr(p) and TEST_KEY not in repr(settings) and TEST_KEY not in str(vars(p).get("waits"))
    for headers, raw in zip(scripted_server.headers, scripted_server.raw_requests, strict=True):
        assert headers["authorization"] == f"Bearer {TEST_KEY}"
        assert TEST_KEY not in json.dumps({k: v for k, v in headers.items() if k != "authorization"})
        assert TEST_KEY.encode() not in raw


def test_key_never_in_chat_json_error(scripted_server):
    for _ in range(3):
        scripted_server.enqueue(content=f"my key is {TEST_KEY}")
    with pytest.raises(RagError) as e:
        chat_json(provider(scripted_server), USER, retries=3)
    assert TEST_KEY not in str(e.value)


# -- registry, offline, mock ---------------------------------------------------------------------------
def test_offline_is_default_and_has_no_chat_model():
    settings = load_settings()
    p = get_provider(settings)
    assert isinstance(p, OfflineProvider) and p.is_offline and p.name == "offline" and p.model == "offline"
    with pytest.raises(RagError, match="offline provider has no chat model"):
        p.chat(USER)
    with pytest.raises(RagError):
        chat_json(p, USER)
    assert not Path(".ragkit").exists()


def test_judge_role_uses_judge_model(scripted_server):
    s = openai_settings(scripted_server, model="gpt-4o-mini", judge_model="gpt-4o")
    assert get_provider(s).model == "gpt-4o-mini"
    assert get_provider(s, role="judge").model == "gpt-4o"
    with pytest.raises(ValueError):
        get_provider(s, role="writer")


def test_unknown_provider_and_missing_key():
    with pytest.raises(RagError, match="unknown provider"):
        get_provider(Settings(provider="nope"))
    with pytest.raises(RagError, match="needs OPENAI_API_KEY"):
        get_provider(Settings(provider="openai"))


def test_local_server_without_key_works(scripted_server):
    scripted_server.enqueue(content="ok")
    p = get_provider(Settings(provider="openai", api_base=scripted_server.base_url, cache=False))
    assert p.chat(USER).content == "ok"
    assert scripted_server.headers[0]["authorization"] == "Bearer not-needed"


def test_rag_timeout_env(monkeypatch):
    monkeypatch.setenv("RAG_TIMEOUT", "2.5")
    assert load_settings().timeout == 2.5
    monkeypatch.setenv("RAG_TIMEOUT", "soon")
    with pytest.raises(UsageError, match="RAG_TIMEOUT"):
        load_settings()


def test_mock_model_queue_and_records():
    m = MockModel()
    assert m.name == "mock" and not m.is_offline
    m.enqueue(tool_calls=[("search", {"query": "x"}), ("read_page", "{bad")])
    m.enqueue(content='{"ok": true}', usage=Usage(5, 6, 0.001, 1))
    c = m.chat(USER, tools=TOOLS)
    assert [t.arguments for t in c.tool_calls] == ['{"query": "x"}', "{bad"] and c.finish_reason == "tool_calls"
    assert c.usage.input_tokens > 0 and c.usage.calls == 1
    data, usage = chat_json(m, USER)
    assert data == {"ok": True} and (usage.input_tokens, usage.output_tokens) == (5, 6)
    assert m.requests[0]["tools"] == TOOLS and m.requests[1]["response_format"] == {"type": "json_object"}
    with pytest.raises(RuntimeError, match="no queued reply"):
        m.chat(USER)
    m.enqueue(error=RagError("boom"))
    with pytest.raises(RagError, match="boom"):
        m.chat(USER)


def test_mock_is_registered():
    assert isinstance(get_provider(Settings(provider="mock", cache=False)), MockModel)


def test_what_an_endpoint_rejected_is_shared_with_new_instances(scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.set_responder(lambda body: {"content": '{"answer": "a"}'})
    chat_json(provider(scripted_server), USER, schema=SCHEMA)
    chat_json(provider(scripted_server), USER, schema=SCHEMA)  # a new instance, e.g. the next batch row
    kinds = [(r.get("response_format") or {}).get("type") for r in scripted_server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]


def test_unsupported_temperature_and_max_tokens_are_dropped_or_renamed(scripted_server):
    def responder(body):
        if "temperature" in body:
            return {"status": 400, "body": {"error": {"message": "Unsupported value: 'temperature' does not "
                                                                 "support 0.0 with this model."}}}
        if "max_tokens" in body:
            return {"status": 400, "body": {"error": {"message": "Unsupported parameter: 'max_tokens'. Use "
                                                                 "'max_completion_tokens' instead."}}}
        return {"content": "ok"}

    scripted_server.set_responder(responder)
    p = provider(scripted_server, model="o4-mini")
    assert p.chat(USER, max_tokens=50).content == "ok"
    assert p.chat(USER, max_tokens=50).content == "ok"
    final = scripted_server.requests[-1]
    assert "temperature" not in final and final["max_completion_tokens"] == 50 and "max_tokens" not in final
    assert len(scripted_server.requests) == 4  # two learning rejections, then one request per call


def test_other_400s_are_not_retried_or_downgraded(scripted_server):
    scripted_server.enqueue(status=400, body={"error": {"message": "messages: too long"}})
    p = provider(scripted_server)
    with pytest.raises(RagError, match="HTTP 400: messages: too long"):
        p.chat(USER, max_tokens=5)
    assert len(scripted_server.requests) == 1 and p.rejected == set()


# -- what real servers send, and what many threads learn together -------------------------------------
def _completion_body(message: dict) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def test_tool_call_arguments_sent_as_a_json_object_become_json_text(scripted_server):
    # some servers send "arguments": {...} instead of a JSON string; it used to crash the question
    scripted_server.enqueue(body=_completion_body({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": {"query": "VPN 上限"}}}]}))
    c = provider(scripted_server).chat(USER, tools=TOOLS)
    assert c.tool_calls[0].name == "search"
    assert isinstance(c.tool_calls[0].arguments, str)
    assert json.loads(c.tool_calls[0].arguments) == {"query": "VPN 上限"}


def test_a_rejection_learnt_by_one_thread_reaches_requests_already_in_flight(scripted_server):
    # Both requests are sent with json_schema before either hears back; both are rejected. The thread that
    # hears second must not retry its unchanged request (3 x HTTP 500 = a failed row): it is rebuilt.
    barrier = threading.Barrier(2, timeout=10)

    def responder(body):
        if (body.get("response_format") or {}).get("type") == "json_schema":
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
            return {"status": 500, "body": {"error": {"message": "unsupported by this server"}}}
        return {"content": '{"answer": "ok"}'}

    scripted_server.set_responder(responder)
    results: list = []
    shared = provider(scripted_server)  # batch workers share one judge provider

    def one():
        try:
            results.append(chat_json(shared, USER, schema=SCHEMA)[0])
        except RagError as e:  # recorded, so the assertion below shows it
            results.append(str(e))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [{"answer": "ok"}, {"answer": "ok"}]
    kinds = [(r.get("response_format") or {}).get("type") for r in scripted_server.requests]
    assert kinds.count("json_schema") == 2 and kinds.count("json_object") == 2 and len(kinds) == 4


def test_five_workers_against_a_server_rejecting_json_schema_and_required_lose_no_row(scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.reject_tool_choice_required = True

    def responder(body):
        if body.get("tools"):
            return {"tool_calls": [("search", {"query": "x"})], "delay": 0.02}
        return {"content": '{"answer": "ok"}', "delay": 0.02}

    scripted_server.set_responder(responder)
    from concurrent.futures import ThreadPoolExecutor

    def row(i: int):
        p = provider(scripted_server)
        if i % 2:
            return p.chat(USER, tools=TOOLS, tool_choice="required").tool_calls[0].name
        return chat_json(p, USER, schema=SCHEMA)[0]["answer"]

    with ThreadPoolExecutor(5) as pool:
        out = list(pool.map(row, range(18)))
    assert out == ["ok" if i % 2 == 0 else "search" for i in range(18)]


def test_required_answered_without_a_tool_call_is_not_asked_again(scripted_server):
    scripted_server.enqueue(content="```json\n{\"name\": \"search\"}\n```\n\n\n\n")  # ignored "required"
    scripted_server.enqueue(tool_calls=[("search", {"query": "y"})])
    p = provider(scripted_server)
    assert p.chat(USER, tools=TOOLS, tool_choice="required").tool_calls == []
    p.chat(USER, tools=TOOLS, tool_choice="required")
    assert [r["tool_choice"] for r in scripted_server.requests] == ["required", "auto"]
    assert p.rejected == {"tool_choice"}
