"""Reading what a model wrote: its final answer (parse_final) and tool calls written as text
(textual_tool_calls). Small models and servers without function calling write both in many shapes; these
readers are lenient so the agent loses neither an answer nor a search to formatting.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# -- parsing the model's final reply -------------------------------------------------------------------
_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)"', re.S)
_REFUSED_FIELD = re.compile(r'"refused"\s*:\s*(true|false)', re.I)
_MD_PATH = re.compile(r"[^\s\"'`()\[\]<>,;|]+\.md\b")
_SOURCES_LINE = re.compile(r"^\s*(?:sources?|retrieved files|出典|참고)\s*[:：]\s*(.*)$", re.I | re.M)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


@dataclass
class FinalReply:
    answer: str
    cited: list[str | int]
    refused: bool | None  # None: the model did not say
    parsed: bool  # the reply was the JSON object we asked for


def parse_final(content: str | None) -> FinalReply:
    """The model's final reply, read leniently: a JSON object (also fenced or surrounded by prose), else a
    broken JSON object's "answer" string, else the plain text; cited paths from "sources" or from any .md
    path mentioned (a trailing "SOURCES: a.md; b.md" line works too)."""
    from ragkit.core.jsonreply import extract_json

    text = (content or "").strip()
    try:
        data = extract_json(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("answer"), str):
        refused = data.get("refused")
        if isinstance(refused, str):
            refused = refused.strip().lower() == "true"
        cited = data.get("sources") or []
        if isinstance(cited, str):
            cited = re.split(r"[;\n|]+", cited)
        if not isinstance(cited, list):
            cited = []
        cited = [c.get("path", "") if isinstance(c, dict) else c for c in cited]
        cited = [c for c in cited if isinstance(c, str | int) and not isinstance(c, bool)]
        return FinalReply(data["answer"].strip(), cited, refused if isinstance(refused, bool) else None, True)
    m = _ANSWER_FIELD.search(text)
    if m:  # a JSON object cut off or malformed after its "answer" field
        try:
            answer = json.loads(f'"{m.group(1)}"')
        except ValueError:
            answer = m.group(1)
        r = _REFUSED_FIELD.search(text)
        rest = text[m.end():]
        return FinalReply(answer.strip(), _MD_PATH.findall(rest), (r.group(1).lower() == "true") if r else None, False)
    fenced = _FENCE.search(text)
    if fenced and not fenced.group(1).lstrip().startswith("{"):
        text = (text[:fenced.start()] + fenced.group(1) + text[fenced.end():]).strip()
    cited: list[str | int] = []
    s = _SOURCES_LINE.search(text)
    if s:
        cited = _MD_PATH.findall(text[s.start():])
        text = text[:s.start()].strip()
    else:
        cited = _MD_PATH.findall(text)
    return FinalReply(text, cited, None, False)


_TOOL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_NAME_KEYS = ("name", "function", "tool", "tool_name")
_ARG_KEYS = ("arguments", "parameters", "args", "input")


def _as_call(data: Any, names: tuple[str, ...] | None = None) -> tuple[str, str] | None:
    """(name, arguments JSON) from one parsed object in the shapes models write, else None:
    {"name", "arguments"|"parameters"}, {"function": {"name", "arguments"}}, {"name": "search", "query": ...}
    (the parameters beside the name), {"search": {"query": ...}}; arguments as an object or a JSON string."""
    from ragkit.answer.tools import TOOL_NAMES

    names = names or TOOL_NAMES
    if not isinstance(data, dict) or "answer" in data:
        return None
    if isinstance(data.get("function"), dict):
        data = data["function"]
    name = next((data[k] for k in _NAME_KEYS if isinstance(data.get(k), str)), None)
    if name is None and len(data) == 1:
        (only, value), = data.items()
        if only in names and isinstance(value, dict):
            name, data = only, {"arguments": value}
    if name not in names:
        return None
    args = next((data[k] for k in _ARG_KEYS if k in data), None)
    if args is None:
        args = {k: v for k, v in data.items() if k not in _NAME_KEYS and k not in ("type", "id")}
    return name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _json_values(text: str) -> list[Any]:
    """Every top-level JSON value in a text (objects and lists), in order."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    i = 0
    while (m := _JSON_START.search(text, i)) is not None:
        try:
            value, end = decoder.raw_decode(text, m.start())
        except ValueError:
            i = m.start() + 1
            continue
        out.append(value)
        i = end
    return out


_JSON_START = re.compile(r"[\[{]")


def textual_tool_calls(content: str | None, names: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    """Tool calls a model wrote into its reply instead of the API's tool_calls, as (name, arguments JSON):
    plain or fenced JSON, {"name": ..., "arguments": ...} (also with doubled braces {{...}}), a list of such
    objects, <tool_call> tags (Qwen, Hermes). A final answer object ({"answer": ...}) is not a call."""
    text = (content or "").strip()
    if not text:
        return []
    tagged = _TOOL_TAG.findall(text)
    chunks = tagged if tagged else [text]
    for undouble in (False, True):  # {{"name": ...}} (a template's escaped braces, copied) on the second pass
        calls: list[tuple[str, str]] = []
        for chunk in chunks:
            if undouble:
                chunk = chunk.replace("{{", "{").replace("}}", "}")
            for value in _json_values(chunk):
                for item in value if isinstance(value, list) else [value]:
                    call = _as_call(item, names)
                    if call is not None:
                        calls.append(call)
        if calls or "{{" not in text:
            return calls
    return []
