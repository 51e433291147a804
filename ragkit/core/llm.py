"""LLM providers behind one small interface, a registry and a response cache, with token and cost accounting.

    Provider: name, model, is_offline; chat(messages, *, tools=None, tool_choice="auto", ...) -> Completion
    get_provider(settings, *, role="answer" | "judge") -> Provider;  @register("name") adds one
    MockModel: queued replies for tests;  estimate_cost(model, input_tokens, output_tokens) -> float | None"""

from __future__ import annotations

import email.utils
import hashlib
import json
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragkit.core import waiting
from ragkit.core.config import Settings
from ragkit.core.errors import RagError
from ragkit.core.models import Completion, ToolCall, Usage
from ragkit.core.paths import atomic_write_bytes
from ragkit.core.provenance import endpoint, url_problem, url_secrets
from ragkit.core.secrets import mask, scrub

MAX_ATTEMPTS = 3  # DESIGN §3: at most 3 attempts per call

# USD per 1M tokens (input, output), list prices. A model missing here has an unknown cost (None), never 0.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}

JSON_INSTRUCTION = "Reply with JSON only: one JSON object, no prose and no code fences."


# -- cost ---------------------------------------------------------------------------------------------
def _price_key(model: str) -> str:
    name = model.strip().lower()
    name = name.rsplit("/", 1)[-1]  # "openai/gpt-4o" -> "gpt-4o"
    return re.sub(r"-\d{4}-\d{2}-\d{2}$", "", name)  # dated snapshots share the base price


def estimate_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """Estimated USD cost of one call; None when the model is not in PRICES (unknown, not free)."""
    price = PRICES.get(_price_key(model))
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def rough_tokens(text: str) -> int:
    """~4 characters per token; used only when a server reports no usage."""
    return max(1, len(text) // 4) if text else 0


# -- registry -----------------------------------------------------------------------------------------
REGISTRY: dict[str, type[Provider]] = {}


def register(name: str) -> Callable[[type[Provider]], type[Provider]]:
    def deco(cls: type[Provider]) -> type[Provider]:
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return deco


def get_provider(settings: Settings, *, role: str = "answer") -> Provider:
    """The provider for `settings.provider`; role "judge" uses `settings.judge_model`."""
    if role not in ("answer", "judge"):
        raise ValueError(f"role must be 'answer' or 'judge', got {role!r}")
    cls = REGISTRY.get(settings.provider)
    if cls is None:
        raise RagError(f"unknown provider {settings.provider!r}: choose one of {', '.join(sorted(REGISTRY))}")
    model = settings.judge_model if role == "judge" else settings.model
    return cls(settings, model=model)


# -- response cache -----------------------------------------------------------------------------------
class ResponseCache:
    """Exact-match on-disk cache: one JSON file per request hash, written atomically (threads/processes), readable
    by its owner only (files 0600, folders 0700: a reply may quote a confidential page). `secrets` are masked in
    what is stored (a reply that echoes the API key must not keep it on disk)."""

    def __init__(self, directory: Path, secrets: tuple[str, ...] = ()) -> None:
        self.dir = Path(directory)
        self.secrets = secrets
        self._closed = False  # whether _close_old_folders ran

    def _close_old_folders(self) -> None:
        """Once per cache: the folders an older ragkit made 0755 (their files 0644) become 0700, so what it
        stored is no longer readable by other users either."""
        self._closed = True
        for folder in (self.dir, *(d for d in self.dir.iterdir() if d.is_dir() and len(d.name) == 2)):
            if folder.stat().st_mode & 0o077:
                folder.chmod(0o700)

    @staticmethod
    def key(request: dict) -> str:
        blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        try:
            doc = json.loads(self._path(key).read_text(encoding="utf-8"))
            calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in doc["tool_calls"]]
            content = doc["content"]
            finish = doc.get("finish_reason")
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or damaged entry: just ask again
        # a replayed answer sends nothing: zero tokens, zero calls; its cost is the provider's to say (Provider.chat)
        return Completion(content=content, tool_calls=calls, usage=Usage(cost_usd=0.0, cached=1),
                          finish_reason=finish, cached=True)

    def put(self, key: str, completion: Completion, *, model: str) -> None:
        def hide(text: str | None) -> str | None:
            return text if text is None else mask(text, *self.secrets)

        doc = {
            "model": model,
            "content": hide(completion.content),
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": hide(c.arguments)}
                           for c in completion.tool_calls],
            "finish_reason": completion.finish_reason,
            "original_usage": {"input_tokens": completion.usage.input_tokens,
                               "output_tokens": completion.usage.output_tokens},
        }
        path = self._path(key)
        try:
            for folder in (self.dir, path.parent):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write_bytes(path, json.dumps(doc, ensure_ascii=False).encode("utf-8"), mode=0o600)
            if not self._closed:
                self._close_old_folders()
        except OSError:
            pass  # a cache that cannot be written must not fail the call


# -- providers ----------------------------------------------------------------------------------------
class Provider:
    """One chat model. Subclasses implement `_complete`; `chat` adds the response cache."""

    name = "base"
    is_offline = False

    def __init__(self, settings: Settings | None = None, *, model: str | None = None) -> None:
        self.settings = settings if settings is not None else Settings()
        self.model = model or self.settings.model
        self._cache = ResponseCache(self.settings.cache_dir, self.secrets) if self.settings.cache else None
        # the model the replies say answered when it is not `model` (see Completion.model, waiting.same_model)
        self.served_model: str | None = None

    def __repr__(self) -> str:  # never shows settings (and so never the key)
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r})"

    @property
    def base_url(self) -> str:
        """The endpoint as messages and cache keys show it: never a credential of the URL (provenance.endpoint)."""
        return endpoint(self.settings.api_base)

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown or stored: the API key and the secret parts of the base URL."""
        return tuple(s for s in (str(self.settings.api_key or ""), *url_secrets(self.settings.api_base)) if s)

    def cache_key(self, request: dict) -> str:
        return ResponseCache.key({"provider": self.name, "model": self.model, "base_url": self.base_url,
                                  **request})

    def chat(
        self,
        messages: list[dict],
        *,
        tools: list[dict] | None = None,
        tool_choice: str | dict | None = "auto",
        response_format: dict | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        request = {"messages": messages, "tools": tools or None, "tool_choice": tool_choice if tools else None,
                   "response_format": response_format, "temperature": temperature, "max_tokens": max_tokens}
        key = self.cache_key(request) if self._cache is not None else None
        if key is not None and (hit := self._cache.get(key)) is not None:
            hit.usage.cost_usd = self.cost(0, 0)
            return hit
        with waiting.calling() as sent:  # the waiting lines (core.waiting) count it in flight until it returns
            completion = self._complete(request)
            sent.append(completion.usage.input_tokens)
        if not waiting.same_model(self.model, completion.model):
            self.served_model = completion.model
            waiting.served(self.model, completion.model)
        if key is not None:
            self._cache.put(key, completion, model=self.model)
        return completion

    def _complete(self, request: dict) -> Completion:
        raise NotImplementedError

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        """What a call of this many tokens costs; None when the model has no price. A cache hit is 0 tokens: $0 for
        a priced model, unknown for one without a price, as every other figure of that model (a row of 0.000000
        beside the summary's "cost unknown" read as free)."""
        return 0.0


@register("offline")
class OfflineProvider(Provider):
    """No model at all. Components check `is_offline` and take their deterministic offline path."""

    is_offline = True

    def __init__(self, settings: Settings | None = None, *, model: str | None = None) -> None:
        super().__init__(settings, model="offline")
        self._cache = None

    def _complete(self, request: dict) -> Completion:
        raise RagError("the offline provider has no chat model: set OPENAI_API_KEY (or provider='openai') "
                       "for model answers; offline components use their deterministic path",
                       flags={"provider='openai'": "--provider openai"})


_REJECTED: dict[tuple[str, str], set[str]] = {}  # (base_url, model) -> features that endpoint rejected
_REJECTED_LOCK = threading.Lock()


def forget_rejections() -> None:
    """Forget what endpoints rejected (tests reuse 127.0.0.1 ports, so one test must not teach the next)."""
    with _REJECTED_LOCK:
        _REJECTED.clear()


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _Fatal(Exception):
    def __init__(self, reason: str, feature: str | None = None, *, transient: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.feature = feature  # a request feature the server seems to reject: downgrade it and ask again
        self.transient = transient  # a 5xx: the feature, or just a failing server (so it costs an attempt)


def _retry_after(headers: Any) -> float | None:
    """Seconds from Retry-After / retry-after-ms (number or HTTP date); None when absent or unreadable."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def _error_message(exc: Any) -> str:
    """The server's own error message when it sent one, else the exception text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return str(msg)[:300]
    return str(getattr(exc, "message", None) or exc)[:300]


@register("openai")
class OpenAIProvider(Provider):
    """Any OpenAI-compatible endpoint through the official client; we own retries (client max_retries=0).

    Features a server rejects (response_format json_schema / json_object, tool_choice "required") are
    remembered per instance and downgraded: json_schema -> json_object -> prompt-and-parse; required -> auto.
    """

    def __init__(self, settings: Settings | None = None, *, model: str | None = None) -> None:
        super().__init__(settings, model=model)
        s = self.settings
        if not s.api_key and not s.api_base:
            raise RagError("provider openai needs OPENAI_API_KEY (or OPENAI_API_BASE for a local server)")
        self.max_attempts = MAX_ATTEMPTS
        self._malformed = url_problem(s.api_base)
        # features this endpoint rejected: "json_schema", "json_object", "tool_choice", "temperature",
        # "max_tokens"; seeded from what other instances learnt about the same endpoint and model
        # The set is shared by every instance (and so every thread) talking to the same endpoint and model:
        # what one request learns applies at once to requests other threads have in flight (see _complete).
        self._endpoint = (self.base_url, self.model)
        with _REJECTED_LOCK:
            self.rejected: set[str] = _REJECTED.setdefault(self._endpoint, set())
        self.waits: list[float] = []  # backoff waits actually slept, for inspection
        self._lock = threading.Lock()
        self._client: Any = None

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        return estimate_cost(self.model, input_tokens, output_tokens)

    def _client_get(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(
                    api_key=str(self.settings.api_key) or "not-needed",  # local servers take any key
                    base_url=self.settings.api_base or None,
                    timeout=self.settings.timeout,
                    max_retries=0,
                )
            return self._client

    # -- request shaping ------------------------------------------------------------------------------
    def _shape(self, request: dict) -> tuple[dict, str | None]:
        """The API kwargs after remembered downgrades; also the feature a failure would be blamed on."""
        messages = list(request["messages"])
        kwargs: dict[str, Any] = {"model": self.model}
        if "temperature" not in self.rejected:  # reasoning models only take their default temperature
            kwargs["temperature"] = request["temperature"]
        if request["max_tokens"] is not None:
            # newer OpenAI models renamed the parameter
            name = "max_completion_tokens" if "max_tokens" in self.rejected else "max_tokens"
            kwargs[name] = request["max_tokens"]
        blame: str | None = None
        rf = request["response_format"]
        asked = rf.get("type") if isinstance(rf, dict) else None
        if asked in ("json_schema", "json_object"):
            kind: str | None = asked
            schema = (rf.get("json_schema") or {}).get("schema") if asked == "json_schema" else None
            if kind == "json_schema" and "json_schema" in self.rejected:
                kind = "json_object"
            if kind == "json_object" and "json_object" in self.rejected:
                kind = None  # prompt-and-parse
            if kind is not None:
                kwargs["response_format"] = rf if kind == asked else {"type": "json_object"}
                blame = kind
            if kind != "json_schema":
                # json_object needs the word JSON in the prompt (OpenAI rule); a downgrade loses the schema,
                # so say it in words
                messages = _with_json_instruction(messages, schema, always=kind != asked)
        elif rf is not None:
            kwargs["response_format"] = rf
        tools = request["tools"]
        if tools:
            kwargs["tools"] = tools
            choice = request["tool_choice"]
            forced = choice == "required" or isinstance(choice, dict)
            if forced and "tool_choice" in self.rejected:
                choice = "auto"
            if choice is not None:
                kwargs["tool_choice"] = choice
            if forced and choice != "auto" and blame is None:
                blame = "tool_choice"
        kwargs["messages"] = messages
        return kwargs, blame

    # -- the call -------------------------------------------------------------------------------------
    def _complete(self, request: dict) -> Completion:
        """Send the request, downgrading features the server rejects and retrying transient failures.

        The API kwargs are rebuilt from `request` before every attempt, so a feature that another thread
        learnt is rejected while this request was in flight is dropped from its retry too (a request
        built before the lesson is never re-sent unchanged): such a failure is not counted as an attempt.
        """
        if self._malformed:  # no request can reach it: say so now, not after 3 "connection failed" attempts
            raise self._error(f"the base URL (OPENAI_API_BASE / OPENAI_BASE_URL) is malformed: {self._malformed}")
        attempt, downgrades, reason = 0, 0, ""
        while True:
            kwargs, blame = self._shape(request)
            try:
                completion = self._once(kwargs, blame)
                if blame == "tool_choice" and not completion.tool_calls:
                    # a server that answers "required" without a tool call does not honour it (llama.cpp's
                    # lets some models write free text, then pads to max_tokens): ask later requests "auto"
                    self._reject("tool_choice")
                return completion
            except _Fatal as e:
                if e.feature is None:
                    raise self._error(e.reason) from None
                downgrades += 1
                if downgrades > 6:  # one per feature at most; more means the server rejects everything
                    raise self._error("the server rejected every fallback request format") from None
                if e.transient and e.feature not in self.rejected:
                    # a 5xx may be the feature (llama.cpp) or a failing server: the request without the
                    # feature is also the next of the 3 attempts (DESIGN §3), so a dead server is asked 3 times
                    attempt += 1
                    reason = e.reason
                    if attempt >= self.max_attempts:
                        raise self._error(f"{self.max_attempts} attempts failed: {reason}") from None
                self._reject(e.feature)  # remember (for every instance), then ask again without it
            except _Retryable as e:
                if self._shape(request)[0] != kwargs:
                    continue  # another thread learnt a rejection meanwhile: the request is different now
                attempt += 1
                reason = e.reason
                if attempt >= self.max_attempts:
                    raise self._error(f"{self.max_attempts} attempts failed: {reason}") from None
                wait = self.settings.retry_base_delay * 2 ** (attempt - 1) * (1 + random.random() * 0.5)
                if e.retry_after is not None:
                    wait = max(wait, e.retry_after)
                wait = min(wait, self.settings.retry_max_delay)
                self.waits.append(wait)
                time.sleep(wait)

    def _reject(self, feature: str) -> None:
        with _REJECTED_LOCK:
            self.rejected.add(feature)
            _REJECTED.setdefault(self._endpoint, self.rejected).add(feature)

    def _error(self, reason: str) -> RagError:
        return RagError(scrub(f"openai ({self.model} at {self.base_url or 'api.openai.com'}): {reason}",
                              *self.secrets))

    def _once(self, kwargs: dict, blame: str | None) -> Completion:
        import openai

        try:
            resp = self._client_get().chat.completions.create(**kwargs)
        except openai.APITimeoutError:
            # a local model on a CPU writes ~10 tokens/s: name the setting that gives it longer
            t = self.settings.timeout
            raise _Retryable(f"timed out after {t:g}s; a slow model needs longer: raise RAG_TIMEOUT (now {t:g} s)"
                             ) from None
        except openai.APIConnectionError as e:
            raise _Retryable(f"connection failed: {_error_message(e)}") from None
        except openai.APIStatusError as e:
            status = e.status_code
            msg = _error_message(e)
            if status == 429:
                raise _Retryable(f"HTTP 429 rate limited: {msg}", _retry_after(e.response.headers)) from None
            low = msg.lower()
            if status in (400, 422):  # "Unsupported value: 'temperature'", "use 'max_completion_tokens'"
                for param in ("temperature", "max_tokens"):
                    if param in low and param in kwargs:
                        raise _Fatal(f"HTTP {status}: {msg}", param) from None
            if blame is not None and (status in (400, 404, 415, 422) or status >= 500):
                # maybe the feature: downgrade (also when another thread has just learnt it: this request
                # was built before, and its retry is rebuilt without the feature)
                raise _Fatal(f"HTTP {status}: {msg}", blame, transient=status >= 500) from None
            if status >= 500 or status == 408:
                raise _Retryable(f"HTTP {status} server error: {msg}") from None
            hint = {401: " (check OPENAI_API_KEY)", 403: " (access denied)",
                    404: " (check the model name and OPENAI_API_BASE)"}.get(status, "")
            raise _Fatal(f"HTTP {status}{hint}: {msg}") from None
        except (openai.APIResponseValidationError, ValueError) as e:
            raise _Retryable(f"invalid response from server: {_error_message(e)}") from None
        return self._to_completion(resp, kwargs)

    def _to_completion(self, resp: Any, kwargs: dict) -> Completion:
        choices = getattr(resp, "choices", None)
        if not choices:
            raise _Retryable("invalid response from server: no choices")
        choice = choices[0]
        msg = choice.message
        calls = []
        for i, tc in enumerate(msg.tool_calls or []):
            fn = getattr(tc, "function", None)
            if fn is None:
                continue
            calls.append(ToolCall(id=tc.id or f"call_{i}", name=fn.name or "", arguments=_arguments_text(fn.arguments)))
        usage = getattr(resp, "usage", None)
        if usage is not None and usage.prompt_tokens is not None:
            tin, tout = int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)
        else:  # some local servers omit usage: estimate so budgets still work
            tin = rough_tokens(json.dumps(kwargs["messages"], ensure_ascii=False))
            tout = rough_tokens((msg.content or "") + "".join(c.arguments for c in calls))
        return Completion(
            content=msg.content,
            tool_calls=calls,
            usage=Usage(input_tokens=tin, output_tokens=tout, cost_usd=self.cost(tin, tout), calls=1),
            finish_reason=choice.finish_reason,
            model=served if isinstance(served := getattr(resp, "model", None), str) and served.strip() else None,
        )


def _arguments_text(arguments: Any) -> str:
    """A tool call's arguments as JSON text: OpenAI sends a string, some servers a JSON object."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def _with_json_instruction(messages: list[dict], schema: dict | None, *, always: bool) -> list[dict]:
    """Tell the model to answer in JSON (in the first system message, where every chat template takes it)."""
    text = json.dumps(messages, ensure_ascii=False).lower()
    if not always and "json" in text:
        return messages
    instruction = JSON_INSTRUCTION
    if schema:
        instruction += " It must match this JSON schema: " + json.dumps(schema, ensure_ascii=False)
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        first = dict(messages[0])
        first["content"] = f"{first['content']}\n\n{instruction}"
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


@register("mock")
class MockModel(Provider):
    """A provider for unit tests: replies come from a queue (`enqueue`), requests are recorded.

    No cache unless settings with cache on are given. An empty queue raises RuntimeError (fail loudly).
    """

    def __init__(self, settings: Settings | None = None, *, model: str | None = None) -> None:
        super().__init__(settings if settings is not None else Settings(cache=False), model=model or "mock")
        self.requests: list[dict] = []
        self._queue: deque[tuple[Completion, bool] | Exception] = deque()
        self._lock = threading.Lock()
        self._responder: Callable[[dict], Completion | None] | None = None

    def enqueue(self, content: str | None = None, tool_calls: list | None = None,
                usage: Usage | dict | None = None, *, finish_reason: str | None = None,
                error: Exception | None = None) -> None:
        """Queue one reply. tool_calls: ToolCall objects or (name, arguments[, id]) with arguments a dict
        (sent as JSON) or a str (raw). usage: Usage or {"input_tokens", "output_tokens"}; default is a rough
        count with cost 0. error: raise this instead of replying."""
        if error is not None:
            with self._lock:
                self._queue.append(error)
            return
        calls = []
        for i, tc in enumerate(tool_calls or []):
            if isinstance(tc, ToolCall):
                calls.append(tc)
                continue
            name, args = tc[0], tc[1]
            arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            calls.append(ToolCall(id=tc[2] if len(tc) > 2 else f"mock_{len(self._queue)}_{i}", name=name,
                                  arguments=arguments))
        if isinstance(usage, dict):
            usage = Usage(input_tokens=int(usage.get("input_tokens", 0)),
                          output_tokens=int(usage.get("output_tokens", 0)),
                          cost_usd=usage.get("cost_usd", 0.0), calls=1)
        counted = usage is None  # default usage: counted from the request when it arrives
        if usage is None:
            usage = Usage(input_tokens=0, output_tokens=rough_tokens(content or ""), cost_usd=0.0, calls=1)
        completion = Completion(content=content, tool_calls=calls, usage=usage,
                                finish_reason=finish_reason or ("tool_calls" if calls else "stop"))
        with self._lock:
            self._queue.append((completion, counted))

    def set_responder(self, fn: Callable[[dict], Completion | None] | None) -> None:
        """fn(request) -> Completion, used when the queue is empty."""
        self._responder = fn

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _complete(self, request: dict) -> Completion:
        with self._lock:
            self.requests.append(request)
            item = self._queue.popleft() if self._queue else None
        if item is None and self._responder is not None:
            reply = self._responder(request)
            item = (reply, False) if reply is not None else None
        if item is None:
            raise RuntimeError(f"MockModel: no queued reply for request #{len(self.requests)}")
        if isinstance(item, Exception):
            raise item
        item, counted = item
        usage = item.usage
        if counted:
            usage = Usage(input_tokens=rough_tokens(json.dumps(request["messages"], ensure_ascii=False)),
                          output_tokens=usage.output_tokens, cost_usd=usage.cost_usd, calls=1)
        return Completion(content=item.content, tool_calls=list(item.tool_calls), usage=usage,
                          finish_reason=item.finish_reason)
