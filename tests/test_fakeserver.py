"""The scripted server speaks enough OpenAI for the official client: proves the test harness itself."""

from __future__ import annotations

import json
import time

import openai
import pytest
from fakeserver import TEST_KEY, ScriptedServer, openai_settings


def _client(server: ScriptedServer, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(api_key=TEST_KEY, base_url=server.base_url, max_retries=0, timeout=timeout)


def test_plain_reply_round_trips(scripted_server):
    scripted_server.enqueue(content="hello there")
    r = _client(scripted_server).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "hello there"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens >= 1 and r.usage.completion_tokens >= 1
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert scripted_server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert scripted_server.paths == ["/v1/chat/completions"]


def test_default_usage_grows_with_request_size(scripted_server):
    scripted_server.enqueue(content="a")
    scripted_server.enqueue(content="a")
    c = _client(scripted_server)
    small = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    big = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 4000}])
    assert big.usage.prompt_tokens > small.usage.prompt_tokens + 900


def test_tool_calls_dict_and_raw_arguments(scripted_server):
    scripted_server.enqueue(tool_calls=[("search", {"query": "製氷"}), ("read_page", '{"path": "a/b.md"')])
    r = _client(scripted_server).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}],
        tools=[{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}])
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert [t.function.name for t in msg.tool_calls] == ["search", "read_page"]
    assert json.loads(msg.tool_calls[0].function.arguments) == {"query": "製氷"}
    assert msg.tool_calls[1].function.arguments == '{"path": "a/b.md"'  # malformed, passed through raw
    assert msg.tool_calls[0].id != msg.tool_calls[1].id
    assert scripted_server.requests[0]["tools"][0]["function"]["name"] == "search"


def test_explicit_usage_and_statuses(scripted_server):
    scripted_server.enqueue(status=429, retry_after=7)
    scripted_server.enqueue(status=503)
    scripted_server.enqueue(content="ok", usage={"prompt_tokens": 11, "completion_tokens": 3})
    c = _client(scripted_server)
    with pytest.raises(openai.RateLimitError) as e:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert e.value.response.headers["retry-after"] == "7"
    with pytest.raises(openai.InternalServerError) as e:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert e.value.status_code == 503
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (11, 3, 14)
    assert scripted_server.statuses == [429, 503, 200]


def test_delay_triggers_client_timeout(scripted_server):
    scripted_server.enqueue(content="late", delay=2.0)
    start = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        _client(scripted_server, timeout=0.2).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}])
    assert time.monotonic() - start < 1.5


def test_raw_invalid_body(scripted_server):
    scripted_server.enqueue(body="this is not json")
    with pytest.raises((openai.APIResponseValidationError, ValueError)):  # the client surfaces a JSONDecodeError
        _client(scripted_server).chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])


def test_empty_queue_fails_loudly(scripted_server):
    with pytest.raises(openai.InternalServerError, match="no scripted reply"):
        _client(scripted_server).chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert scripted_server.unscripted == 1


def test_responder_used_when_queue_empty(scripted_server):
    scripted_server.set_responder(lambda body: {"content": "echo " + body["messages"][-1]["content"]})
    scripted_server.enqueue(content="queued first")
    c = _client(scripted_server)
    first = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    second = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
    assert first.choices[0].message.content == "queued first"
    assert second.choices[0].message.content == "echo b"


def test_rejects_like_llama_cpp_without_consuming_queue(scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.reject_tool_choice_required = True
    scripted_server.enqueue(content="{}")
    c = _client(scripted_server)
    schema = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
    with pytest.raises(openai.InternalServerError):
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], response_format=schema)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(openai.InternalServerError):
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], tools=tools,
                                  tool_choice="required")
    assert scripted_server.pending == 1
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}],
                                  response_format={"type": "json_object"})
    assert r.choices[0].message.content == "{}"


def test_key_travels_only_in_authorization_header(scripted_server):
    scripted_server.enqueue(content="ok")
    _client(scripted_server).chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    headers = scripted_server.headers[0]
    assert headers["authorization"] == f"Bearer {TEST_KEY}"
    others = {k: v for k, v in headers.items() if k != "authorization"}
    assert TEST_KEY not in json.dumps(others)
    assert TEST_KEY.encode() not in scripted_server.raw_requests[0]


def test_openai_settings_points_at_server(scripted_server):
    s = openai_settings(scripted_server, model="other-model")
    assert s.provider == "openai" and s.api_base == scripted_server.base_url and s.model == "other-model"
    assert s.api_key == TEST_KEY and TEST_KEY not in repr(s)
    assert s.cache is False
