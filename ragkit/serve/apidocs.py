"""The API page at /docs: made here from the app's OpenAPI schema, one self-contained HTML page (no script, no
font or stylesheet from anywhere else), so it works offline and tells no third party it was opened. The
schema itself is at /openapi.json. Both are open without the token (they describe the API and hold no data);
the page says how to send the token: the web page's token box, or the header."""

from __future__ import annotations

import html
import json
from typing import Any

_CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{margin-bottom:.2rem} .op{border:1px solid #ddd;border-radius:6px;margin:1rem 0;padding:.6rem 1rem}
.m{display:inline-block;min-width:4.5rem;font-weight:700;font-family:monospace} .p{font-family:monospace}
.GET{color:#1565c0}.POST{color:#2e7d32}.DELETE{color:#c62828}.PUT,.PATCH{color:#ef6c00}
table{border-collapse:collapse;margin:.4rem 0} td,th{border:1px solid #eee;padding:.2rem .5rem;text-align:left}
code,pre{background:#f6f6f6;border-radius:4px;padding:0 .2rem} pre{padding:.5rem;overflow:auto}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _type(schema: dict, schemas: dict) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type(s, schemas) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_type(schema.get('items', {}), schemas)}"
    return str(schema.get("type", "any"))


def _fields(name: str, schemas: dict) -> str:
    model = schemas.get(name, {})
    props = model.get("properties", {})
    if not props:
        return ""
    required = set(model.get("required", []))
    rows = "".join(f"<tr><td class=p>{_e(k)}</td><td>{_e(_type(v, schemas))}</td>"
                   f"<td>{'required' if k in required else _e(json.dumps(v.get('default')))}</td></tr>"
                   for k, v in props.items())
    return f"<table><tr><th>field</th><th>type</th><th>required / default</th></tr>{rows}</table>"


def _operation(path: str, method: str, op: dict, schemas: dict) -> str:
    parts = [f"<div class=op><span class='m {method.upper()}'>{method.upper()}</span> <span class=p>{_e(path)}</span>"]
    if op.get("summary"):
        parts.append(f" — {_e(op['summary'])}")
    if op.get("description"):
        parts.append(f"<p>{_e(op['description'])}</p>")
    params = op.get("parameters", [])
    if params:
        rows = "".join(f"<tr><td class=p>{_e(p['name'])}</td><td>{_e(p.get('in', ''))}</td>"
                       f"<td>{_e(_type(p.get('schema', {}), schemas))}</td>"
                       f"<td>{'required' if p.get('required') else ''}</td></tr>" for p in params)
        parts.append(f"<table><tr><th>parameter</th><th>in</th><th>type</th><th></th></tr>{rows}</table>")
    body = op.get("requestBody", {}).get("content", {})
    for kind, content in body.items():
        ref = _type(content.get("schema", {}), schemas)
        parts.append(f"<p>body: <code>{_e(kind)}</code> {_e(ref)}</p>{_fields(ref, schemas)}")
    codes = ", ".join(f"{_e(code)} {_e(r.get('description', ''))}" for code, r in op.get("responses", {}).items())
    if codes:
        parts.append(f"<p>responses: {codes}</p>")
    parts.append("</div>")
    return "".join(parts)


def _using(token_required: bool, origin: str) -> str:
    """How to call the API from here: with a token, the web page's token box, or the header a program sends."""
    url = _e(f"{origin}/search?query=password")
    if not token_required:
        return f"<p>This server needs no token: <code>curl '{url}'</code>.</p>"
    return ("<p><b>This server needs its token</b> for every call that reads or changes data; this page and "
            "<code>/openapi.json</code> need none. In a browser, open the <a href='/'>web page</a> and type the "
            "token into its token box (top right): every call the page makes then carries it. From a program, "
            "send <code>Authorization: Bearer &lt;token&gt;</code>, e.g. "
            f"<code>curl -H \"Authorization: Bearer $RAG_API_TOKEN\" '{url}'</code>.</p>")


def api_page(schema: dict[str, Any], *, token_required: bool = False, origin: str = "") -> str:
    """The /docs page; `origin` (scheme://host:port as the browser reached the server) is used in the examples."""
    info = schema.get("info", {})
    schemas = schema.get("components", {}).get("schemas", {})
    ops = [_operation(path, method, op, schemas) for path, methods in schema.get("paths", {}).items()
           for method, op in methods.items() if isinstance(op, dict)]
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(info.get('title', 'API'))} API"
            f"</title><style>{_CSS}</style></head><body><h1>{_e(info.get('title', 'API'))} API "
            f"<small>{_e(info.get('version', ''))}</small></h1><p>{_e(info.get('description', ''))}</p>"
            + _using(token_required, origin) +
            "<p>The machine-readable schema (OpenAPI 3) is at <a href='/openapi.json'><code>/openapi.json</code></a>. "
            "Errors are JSON: <code>{\"error\": \"one line\"}</code>.</p>" + "".join(ops) + "</body></html>")
