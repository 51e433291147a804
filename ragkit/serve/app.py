"""The FastAPI app of `rag serve` (the HTTP API of the Agentic RAG API seed, DESIGN §9) and its web page.

Every handler calls the library the CLI calls: `ragkit.answer.agent.ask`, `ragkit.search` search, `ragkit.ingest`.
Handlers are plain functions, so FastAPI runs them in its thread pool; they share one index (thread-safe) and
one model provider (the openai client is thread-safe). Errors are JSON `{"error": ...}`, never a traceback,
and the model API key is scrubbed from anything sent back. An OpenSearch cluster that cannot be reached or fails
is 503 on every endpoint that needs it (the document list, a document's tree and a page are read from the files,
and answer without it), and `/health` says so (503, "degraded"), so that a load balancer stops routing here; so
does an index that holds none of the database's pages (the node restarted empty), which /search and /chat answer
with 409 and the command that fixes it.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragkit.answer import STRATEGIES
from ragkit.core.config import Settings
from ragkit.core.errors import PathEscapeError, RagError, UsageError
from ragkit.core.text import clean_json
from ragkit.search.opensearch.client import ClusterError
from ragkit.serve import documents as docs
from ragkit.serve.guard import FAILED_TOKENS_PER_MINUTE, SECURITY_HEADERS, Guard, TokenFailures, is_loopback
from ragkit.serve.guard import send_json as _send_json
from ragkit.serve.sessions import (
    CHECK_PAGES,
    HISTORY_FOR_REWRITE,
    ClusterSessionStore,
    SessionStore,
    Turn,
    own_words_lead_elsewhere,
    rewrite_offline,
    rewrite_with_model,
    valid_session_id,
)

log = logging.getLogger("ragkit.serve")
STATIC = Path(__file__).with_name("static")
MAX_QUERY_CHARS = 4000
MAX_JSON_BODY = 1 << 20  # bytes of any request that is not an upload
# open without the token: they hold no data (health, the page shell whose API calls carry the token, and the
# API's description, so a browser can read it); everything else needs it
OPEN_PATHS = ("/health", "/", "/docs", "/openapi.json", "/favicon.ico")
OPEN_PREFIXES = ("/static/",)
TOKEN_NEEDED = ("missing or wrong token: send Authorization: Bearer <token> (the web page at / sends the one "
                "typed into its token box)")
STEP_FIELD_CHARS = 300  # a streamed step's text fields are cut to this
HEALTH_TIMEOUT = 2.0  # seconds /health waits for the cluster: a load balancer's probe must not hang
HEALTH_TTL = 5.0  # seconds a cluster check is reused: frequent probes cost the cluster one request per TTL


@dataclass
class ServeOptions:
    token: str | None = None
    max_upload_mb: float = 100.0
    progress: bool = False  # the index's indexing lines on stderr while it is built at start (`rag serve`)
    host: str = "127.0.0.1"  # the address listened on: on loopback without a token, Host and Origin are checked
    failed_tokens_per_minute: int = FAILED_TOKENS_PER_MINUTE  # per client; then 429 until its minute is over


class ChatRequest(BaseModel):
    query: str = Field(..., max_length=MAX_QUERY_CHARS)
    session_id: str | None = None
    strategy: str | None = None
    stream: bool = False


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: a request body larger than its limit is cut off while it arrives (413), whether or not
    the client sent a Content-Length, so an oversized upload never fills the disk or the memory."""

    def __init__(self, app, upload_limit: int) -> None:
        self.app = app
        self.upload_limit = upload_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.upload_limit + (1 << 20) if scope["path"].rstrip("/") == "/documents" else MAX_JSON_BODY
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                return await _send_json(send, 413, _too_large_message(self.upload_limit, scope))
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _TooLarge()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _send_json(send, 413, _too_large_message(self.upload_limit, scope))


def _too_large_message(upload_limit: int, scope) -> str:
    if scope["path"].rstrip("/") == "/documents":
        return f"the upload is larger than the limit of {upload_limit / (1 << 20):g} MB (--max-upload-mb)"
    return f"the request body is larger than {MAX_JSON_BODY // 1024} KB"


def create_app(settings: Settings, options: ServeOptions | None = None, *, provider: Any = None) -> FastAPI:
    """The app over the database at settings.db. `provider` overrides the one settings choose (tests)."""
    from ragkit.core.llm import get_provider
    from ragkit.core.secrets import scrub
    from ragkit.search import open_index
    from ragkit.search.indexconfig import index_config

    options = options or ServeOptions()
    db = Path(settings.db).resolve()
    if not db.is_dir():
        raise RagError(f"{settings.db}: no such folder (the database to serve)")
    from ragkit.core.provenance import url_secrets

    secrets = (str(settings.api_key or ""), *url_secrets(settings.api_base))
    token = options.token or None
    provider = provider if provider is not None else get_provider(settings)
    try:
        open_index(db, progress=options.progress)  # built (or brought up to date) now, not at the first request
        start_problem = None
    except ClusterError as e:
        # a replica (re)started during an outage comes up degraded, as a running one goes degraded: /health says
        # 503, the files answer (/documents, /pages), and every request opens the index again, so it recovers
        # once the cluster answers
        start_problem = str(e)
    upload_limit = int(options.max_upload_mb * (1 << 20))
    # /docs is made here (apidocs.py): FastAPI's own loads Swagger UI from a CDN, blank offline
    app = FastAPI(title="ragkit", version=_version(), docs_url=None, redoc_url=None,
                  description="Answer, search and manage the documents of one ragkit database.")
    app.state.start_problem = start_problem
    app.add_middleware(BodyLimit, upload_limit=upload_limit)

    def clean(message: object) -> str:
        return scrub(" ".join(str(message).split())[:500], *secrets)

    def error(status: int, message: object, **extra: Any) -> JSONResponse:
        return JSONResponse({"error": clean(message), **extra}, status_code=status)

    @app.middleware("http")
    async def failures(request: Request, call_next):
        """One line on stderr per request that failed on the server's side (5xx: an outage, a model's failure, a
        bug) or was refused as in conflict with the database (409: the index holds no pages): what an operator
        must see to notice an outage. Method, path (without its query, which may hold a question), status and
        time; never a header or a body."""
        t0 = time.monotonic()
        what = f"{request.method} {request.url.path[:200]}"
        try:
            response = await call_next(request)
        except Exception as e:  # a bug: the app's last handler answers 500 (and logs the traceback)
            log.warning("%s", f"{what} -> 500 ({type(e).__name__})")
            raise
        if request.url.path == "/health" or (response.status_code < 500 and response.status_code != 409):
            return response  # /health: a probe every few seconds; its changes of state are logged once each
        # the cause, as the client reads it (already one line, the model API key scrubbed): an error is small
        body = b"".join([chunk async for chunk in response.body_iterator])
        try:
            cause = str(json.loads(body).get("error") or "")[:300]
        except (ValueError, AttributeError):
            cause = ""
        log.warning("%s", f"{what} -> {response.status_code} ({(time.monotonic() - t0) * 1000:.0f} ms)"
                    + (f": {cause}" if cause else ""))
        return Response(body, status_code=response.status_code, headers=dict(response.headers),
                        background=response.background)

    failures_by_client = TokenFailures(options.failed_tokens_per_minute)

    @app.middleware("http")
    async def auth(request: Request, call_next):
        path = request.url.path
        if token and not ((path.rstrip("/") or "/") in OPEN_PATHS or path.startswith(OPEN_PREFIXES)):
            client = request.client.host if request.client else "?"
            wait = failures_by_client.blocked(client)
            if wait:
                return JSONResponse({"error": f"too many wrong tokens from {client[:60]}: try again in {wait:.0f} s"},
                                    status_code=429, headers={"Retry-After": str(max(1, round(wait)))})
            given = request.headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
                if given:  # a guess (the page, before its token box is filled, sends none: not counted)
                    failures_by_client.failed(client)
                return JSONResponse({"error": TOKEN_NEEDED}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        return await call_next(request)

    # outermost: its headers go on every response (a 413, a 401 too), and a foreign request is refused first
    app.add_middleware(Guard, check_origin=not token and is_loopback(options.host))

    @app.exception_handler(docs.ClientError)
    async def _client_error(_: Request, e: docs.ClientError):
        return error(e.status, e)

    @app.exception_handler(UsageError)
    async def _usage_error(_: Request, e: UsageError):
        return error(400, e)

    @app.exception_handler(PathEscapeError)
    async def _escape_error(_: Request, e: PathEscapeError):
        return error(400, e)

    @app.exception_handler(ClusterError)
    async def _cluster_error(_: Request, e: ClusterError):
        # the index behind this server failed, not the request: another replica (or a retry) may answer it
        return error(503, e)

    @app.exception_handler(RagError)
    async def _rag_error(_: Request, e: RagError):
        return error(409 if "no pages" in str(e) else 400, e)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, e: RequestValidationError):
        """One line naming the field (`query: required`), not the framework's `query.query: Field required`."""
        first = e.errors()[0] if e.errors() else {}
        kind, loc = first.get("type", ""), [str(x) for x in first.get("loc", ())]
        if kind == "json_invalid":
            detail = (first.get("ctx") or {}).get("error") or first.get("msg", "")
            return error(422, f"the request body is not valid JSON: {detail}")
        if loc and loc[0] in ("body", "query", "path", "header", "cookie"):
            loc = loc[1:]  # where the field came from: the field's name says enough
        msg = "required" if kind == "missing" else str(first.get("msg", "invalid request"))
        if not loc:
            return error(422, "the request body is required (a JSON object)" if kind == "missing"
                         else f"invalid request: {msg}")
        return error(422, f"{'.'.join(loc)}: {msg}")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, e: StarletteHTTPException):
        return error(e.status_code, e.detail if isinstance(e.detail, str) else "request refused")

    @app.exception_handler(Exception)
    async def _bug(_: Request, e: Exception):  # a bug: logged here, one line (no traceback) to the client
        log.exception("internal error")
        # answered from outside the middleware stack (Starlette's last handler), where Guard adds no headers
        response = error(500, f"internal error ({type(e).__name__})")
        response.headers.update({k.decode(): v.decode() for k, v in SECURITY_HEADERS})
        return response

    def index():
        return open_index(db, progress=False)

    local_store: list[SessionStore] = []  # made once: it creates its tables

    def store(ix: Any) -> SessionStore | ClusterSessionStore:
        """The sessions of `ix`, the index the database names now (index()): with a cluster, they live there too, so
        that every replica continues every session, and they follow the database when it moves to another address
        (`rag index sync --index`), as searches do."""
        if getattr(ix, "backend", "") == "opensearch":
            return ClusterSessionStore(ix.client, ix.sessions_name)
        if not local_store:
            local_store.append(SessionStore(db / ".ragkit"))
        return local_store[0]

    # ------------------------------------------------------------------------------------------ endpoints
    checked: dict[str, Any] = {}  # the last index check: at, problem (None when fine), state
    checking = threading.Lock()

    def index_health() -> tuple[str | None, str]:
        """(the index's problem or None, a word on its state), from a cluster check at most HEALTH_TTL old."""
        if index_config(db).backend != "opensearch":  # read each time: the database may have moved to a cluster
            return None, "embedded"
        with checking:  # one check at a time: probes arriving together share it
            if time.monotonic() - checked.get("at", float("-inf")) >= HEALTH_TTL:
                was = checked.get("problem", start_problem)
                checked.update(zip(("problem", "state"), _index_health(index), strict=True))
                checked["at"] = time.monotonic()
                if bool(was) != bool(checked["problem"]):  # one line when the state changes, not one per probe
                    log.warning("%s", f"health: degraded: {clean(checked['problem'])}" if checked["problem"]
                                else f"health: ok again ({checked['state']})")
            return checked["problem"], checked["state"]

    @app.get("/health")
    def health() -> JSONResponse:
        problem, state = index_health()
        if problem:
            return JSONResponse({"status": "degraded", "version": _version(), "index": clean(problem)},
                                status_code=503)
        return JSONResponse({"status": "ok", "version": _version(), "index": state})

    @app.get("/docs", include_in_schema=False)
    def api_docs(request: Request) -> HTMLResponse:
        from ragkit.serve.apidocs import api_page

        return HTMLResponse(api_page(app.openapi(), token_required=bool(token),
                                     origin=str(request.base_url).rstrip("/")))

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:  # the page has no icon: say so, rather than a 404 in every log
        return Response(status_code=204)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> FileResponse:
        files = {p.name: p for p in STATIC.iterdir() if p.is_file()}
        if name not in files:
            raise docs.ClientError(404, f"no static file {name[:80]!r}")
        kind = {"js": "text/javascript", "css": "text/css"}.get(name.rsplit(".", 1)[-1], "text/plain")
        return FileResponse(files[name], media_type=f"{kind}; charset=utf-8")

    @app.get("/search")
    def search(query: str = Query(..., max_length=MAX_QUERY_CHARS), k: int = Query(10, ge=1, le=100),
               path: str | None = None) -> Response:
        """What `rag search QUERY --format json` prints: [{path, page, title, score, snippet, printed_page?}], with
        each path relative to the database (as every answer of the API names pages)."""
        from ragkit.search import hits_json, search_db

        if not query.strip():
            raise docs.ClientError(422, "query: the search query is empty")
        if "\x00" in query:
            raise docs.ClientError(422, "query: contains a NUL character")
        hits = search_db(db, query, k=k, path=path or None, strict=True)
        out = [{**h, "path": docs.api_path(db, h["path"])} for h in hits_json(hits, db)]
        return Response(json.dumps(clean_json(out), ensure_ascii=False, indent=2),
                        media_type="application/json")

    @app.get("/documents")
    def list_documents() -> dict:
        return {"documents": [d.summary(db) for d in docs.list_documents(db)]}

    @app.get("/documents/{document_id}")
    def show_document(document_id: str) -> dict:
        return docs.document_tree(db, docs.find_document(db, document_id))

    @app.delete("/documents/{document_id}")
    def delete_document(document_id: str) -> dict:
        return docs.delete_document(db, docs.find_document(db, document_id), index())

    @app.post("/documents", status_code=201)
    async def upload(request: Request) -> JSONResponse:
        """Ingest a PDF, DOCX or PPTX. Multipart form fields: `file` (required), `category` (a folder name,
        default "uploads"), `replace` ("true" to replace a document of the same name and category that holds other
        content; without it that upload is 409, with the `existing` document's summary when replace=true would
        replace it). 201 ingested (`replaced`
        says whether it replaced one), 200 `unchanged` (the same file again), 202 stored but not indexed, 400 a
        category that leads out of the database, 409 a name in use, 413 too large, 415 not a document type, 422
        not what its extension says."""
        from starlette.concurrency import run_in_threadpool

        form = await request.form(max_files=1, max_fields=5)
        try:
            file = form.get("file")
            if file is None or isinstance(file, str):
                raise docs.ClientError(422, "file: send the document as the multipart field 'file'")
            data = await file.read(upload_limit + 1)
            if len(data) > upload_limit:
                raise docs.ClientError(413, _too_large_message(upload_limit, {"path": "/documents"}))
            category = form.get("category")
            category = category if isinstance(category, str) else None
            replace = form.get("replace")
            replace = replace.strip().lower() if isinstance(replace, str) else ""
            if replace not in ("", "true", "false", "1", "0", "yes", "no", "on", "off"):
                raise docs.ClientError(422, f"replace: {replace[:20]!r} is not true or false")
            name = file.filename or ""
        finally:
            await form.close()
        # in the thread pool: the conversion waits on another process, and index() may re-scan the files
        try:
            result = await run_in_threadpool(
                lambda: docs.upload_document(db, name, data, category, index(), settings.limits,
                                             replace=replace in ("true", "1", "yes", "on")))
        except docs.DocumentExists as e:
            return error(409, e, existing=e.existing)
        # 202: stored, not yet indexed (the cluster failed after the pages were written; the body says what to do)
        status = 202 if not result["indexed"] else 200 if result.get("unchanged") else 201
        return JSONResponse(result, status_code=status)

    @app.get("/pages/{path:path}")
    def read_page(path: str) -> dict:
        return docs.read_page(db, path)

    @app.get("/sessions/{session_id}")
    def show_session(session_id: str) -> dict:
        """A session's turns, oldest first (its last 20): what the user asked (`query`), what was searched
        (`search_query`), the answer and its cited pages, so that a page can show the conversation again after a
        reload. An unknown session, or one dropped as least recently used, is 404."""
        sessions = store(index())
        if not valid_session_id(session_id) or not sessions.exists(session_id):
            raise docs.ClientError(404, f"session_id: no session {session_id[:80]!r} (start a new one by leaving "
                                        "session_id out of /chat)")
        return {"session_id": session_id,
                "turns": [{"query": t.query, "search_query": t.search_query, "answer": t.answer,
                           "sources": [_cited_page(db, p) for p in t.sources]} for t in sessions.history(session_id)]}

    @app.post("/chat")
    def chat(req: ChatRequest):
        """Answer `query` in a session (a new one without `session_id`); with `stream`, server-sent events."""
        query = req.query.strip()
        if not query:
            raise docs.ClientError(422, "query: the question is empty")
        if "\x00" in query:
            raise docs.ClientError(422, "query: contains a NUL character")
        strategy = req.strategy or "agent"
        if strategy not in STRATEGIES:
            raise docs.ClientError(422, f"strategy: unknown strategy {strategy!r}; choose one of "
                                        f"{', '.join(STRATEGIES)}")
        ix = index()  # one index for the whole answer: its sessions, its searches
        sessions = store(ix)
        if req.session_id is not None:
            if not valid_session_id(req.session_id) or not sessions.exists(req.session_id):
                raise docs.ClientError(404, f"session_id: no session {req.session_id[:80]!r} (start a new one "
                                            "by leaving session_id out)")
            sid = req.session_id
        else:
            sid = sessions.new()
        if req.stream:
            return StreamingResponse(_stream(sid, query, strategy, ix), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        result, status = _answer(sid, query, strategy, None, ix)
        return JSONResponse(clean_json(result), status_code=status)

    def _prepare(sid: str, query: str, strategy: str, ix: Any) -> tuple[str, str, Any]:
        """(standalone search query, question for the answerer, rewrite usage)."""
        history = store(ix).history(sid, HISTORY_FOR_REWRITE)
        if provider.is_offline:
            standalone, usage = rewrite_offline(query, history), None
            if own_words_lead_elsewhere(query, standalone, lambda q: _best_pages(ix, q)):
                standalone = query
        else:
            standalone, usage = rewrite_with_model(query, history, provider)
        question = standalone
        if history and not provider.is_offline and strategy in ("agent", "arag"):
            # the agent (and arag) chooses its own searches, so it can also be shown the conversation itself
            convo = "\n".join(f"- Q: {t.query}\n  A: {t.answer[:300]}" for t in history)
            question = f"{standalone}\n\n(Earlier in this conversation:\n{convo})"
        return standalone, question, usage

    def _best_pages(ix: Any, query: str) -> list[str]:
        """The normalized text of the best CHECK_PAGES pages for `query` by its words (the rewrite's check)."""
        from ragkit.core.text import normalize

        texts = []
        for hit in ix.search(query, k=CHECK_PAGES, mode="keyword"):
            try:
                texts.append(normalize((db / hit.path).read_text(encoding="utf-8")))
            except OSError:  # deleted since it was indexed: it holds nothing
                continue
        return texts

    def _answer(sid: str, query: str, strategy: str, trace_path: Path | None, ix: Any) -> tuple[dict, int]:
        from ragkit.answer import ask

        standalone, question, rewrite_usage = _prepare(sid, query, strategy, ix)
        # offline, the rewrite only adds an earlier question's words to the user's: they find the pages, the
        # user's own words choose the quotes (ask's `search`); a model's rewrite is a whole question of its own
        carried = provider.is_offline and standalone != query
        answer = ask(query if carried else question, settings, strategy=strategy, index=ix, provider=provider,
                     trace_path=trace_path, search=standalone if carried else None)
        if rewrite_usage is not None:
            answer.usage.add(rewrite_usage)
        if answer.error:
            # the cluster failing mid-answer is the index's outage (503, as everywhere else), not the model's
            return {"error": clean(answer.error), "session_id": sid}, 503 if answer.error_kind == "index" else 502
        answer.question = query
        out = _chat_json(db, answer, sid, standalone, clean)
        store(ix).add(sid, Turn(query, standalone, out["answer"], [s["path"] for s in out["sources"]]))
        return out, 200

    def _stream(sid: str, query: str, strategy: str, ix: Any):
        """Yield the agent's steps (its trace, as it is written) and then the answer, as server-sent events."""
        trace_dir = db / ".ragkit" / "serve-traces"
        trace_dir.mkdir(parents=True, exist_ok=True)
        trace = trace_dir / f"{uuid.uuid4().hex}.jsonl"
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = _answer(sid, query, strategy, trace, ix)
            except docs.ClientError as e:
                box["result"] = ({"error": clean(e)}, e.status)
            except ClusterError as e:
                box["result"] = ({"error": clean(e)}, 503)
            except RagError as e:
                box["result"] = ({"error": clean(e)}, 400)
            except Exception as e:  # noqa: BLE001 - reported to the client as one line
                log.exception("internal error")
                box["result"] = ({"error": f"internal error ({type(e).__name__})"}, 500)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        yield _sse("session", {"session_id": sid})
        pos = 0
        try:
            while True:
                done = not worker.is_alive()
                if trace.exists():
                    with trace.open("rb") as fh:
                        fh.seek(pos)
                        chunk = fh.read()
                    complete = chunk[: chunk.rfind(b"\n") + 1]
                    pos += len(complete)
                    for line in complete.decode("utf-8", "replace").splitlines():
                        step = _step(line)
                        if step is not None:
                            yield _sse("step", step)
                if done:
                    break
                time.sleep(0.05)
            result, status = box.get("result", ({"error": "no answer"}, 500))
            if status >= 500 or status == 409:  # the response itself said 200: its event says the failure
                log.warning("%s", f"POST /chat (stream) -> {status}: {str(result.get('error') or '')[:300]}")
            yield _sse("answer" if status == 200 else "error", {**result, "status": status})
        finally:
            trace.unlink(missing_ok=True)

    def _step(line: str) -> dict | None:
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if not isinstance(record, dict) or record.get("event") == "answer":
            return None  # the answer itself comes last, in the response's shape
        record.pop("db", None)  # the start step's database as the server was started: its own file system
        if isinstance(record.get("arguments"), dict):  # a tool's arguments (the query searched): one string
            record["arguments"] = json.dumps(record["arguments"], ensure_ascii=False)
        for key in ("pages", "hits"):  # pages read or found: named as the API names them
            if isinstance(record.get(key), list):
                record[key] = [docs.api_path(db, p) if isinstance(p, str) else p for p in record[key]]
        return {k: (clean(v)[:STEP_FIELD_CHARS] if isinstance(v, str) else v) for k, v in record.items()
                if isinstance(v, str | int | float | bool | list) or v is None}

    return app


def _index_health(open_ix: Any) -> tuple[str | None, str]:
    """(problem or None, state) of the index behind the server (`open_ix()` gives it): backend.check_index, within
    HEALTH_TIMEOUT."""
    from ragkit.search.backend import check_index

    try:
        return None, check_index(open_ix(), timeout=HEALTH_TIMEOUT)
    except RagError as e:  # unreachable, no answer, red, empty; refused credentials; an index ragkit cannot use
        return str(e), "degraded"


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(clean_json(data), ensure_ascii=False)}\n\n"


def _chat_json(db: Path, answer, sid: str, standalone: str, clean) -> dict:
    from ragkit.core.pagefile import parse_page
    from ragkit.core.paths import resolve_in_db, strip_db_prefix

    sources = []
    text = answer.answer
    for s in answer.sources:
        printed = ""
        try:
            meta, _ = parse_page(resolve_in_db(db, strip_db_prefix(db, s.path)).read_text(encoding="utf-8"))
            printed = meta.printed_page
        except (OSError, RagError):
            pass
        sources.append({"path": docs.api_path(db, s.path), "page": s.page, "printed_page": printed, "title": s.title,
                        "excerpt": clean(s.excerpt), "score": round(float(s.score), 4)})
    closest = [{**c, "path": docs.api_path(db, c["path"])} for c in answer.closest_json()]
    for c, shown in zip(closest, answer.closest, strict=True):  # an offline refusal names them in its text too
        text = text.replace(shown.path, c["path"])
    u = answer.usage
    return {
        "answer": text,  # ask() already scrubbed the key
        "sources": sources,
        "refused": answer.refused,
        "general_knowledge": answer.general_knowledge,
        "session_id": sid,
        "metadata": {
            "provider": answer.provider, "model": answer.model, "strategy": answer.strategy,
            "steps": answer.steps, "tokens": u.input_tokens + u.output_tokens, "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cost_usd": u.cost_usd, "latency_ms": round(answer.latency_ms, 1),
            "confidence": round(answer.confidence, 3), "search_query": standalone, "index": answer.index,
            **({"documents_meant": answer.documents_meant} if answer.documents_meant else {}),
            **({"closest_by_meaning": closest} if closest else {}),
        },
    }


def _cited_page(db: Path, path: str) -> dict:
    """{path, page, printed_page, title} of a page a turn cited, read from its file now, as /chat's `sources`
    name it (without the excerpt and score of that answer); a page deleted since gives its path alone, with page
    null."""
    from ragkit.core.pagefile import first_heading, parse_page
    from ragkit.core.paths import resolve_in_db

    try:
        meta, body = parse_page(resolve_in_db(db, path).read_text(encoding="utf-8"))
    except (OSError, RagError, ValueError):
        return {"path": path, "page": None, "printed_page": "", "title": ""}
    return {"path": path, "page": meta.page, "printed_page": meta.printed_page, "title": first_heading(body)[:200]}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ragkit")
    except Exception:  # noqa: BLE001 - not installed (running from a checkout)
        return "0"
