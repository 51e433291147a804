"""`rag serve` against a real uvicorn server on 127.0.0.1 with a real HTTP client (httpx)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import httpx
import pytest
from fakeserver import TEST_KEY, openai_settings
from liveserver import LiveServer
from typer.testing import CliRunner

from ragkit.core.config import Settings
from ragkit.core.errors import UsageError
from ragkit.serve import check_bind
from ragkit.serve.app import ServeOptions
from ragkit.serve.sessions import SessionStore, Turn, rewrite_offline

# generous timeouts: the machine is shared and slow; nothing here measures speed
get = partial(httpx.get, timeout=120)
post = partial(httpx.post, timeout=120)
delete = partial(httpx.delete, timeout=120)
request = partial(httpx.request, timeout=120)

MFA_Q = "Is multi-factor authentication required for VPN access?"
FOLLOW_UP = "What about for email?"  # means nothing on its own: which rule, for email?
PASSWORD_PAGE = "3. Passwords and Authentication/page_004.md"


def offline(db: Path) -> Settings:
    return Settings(db=db, provider="offline", provider_reason="test", cache=False)


def make_pdf(path: Path, pages: list[str]) -> Path:
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_text((72, 72), text, fontsize=12)
    doc.save(path)
    doc.close()
    return path


def cited(resp: dict) -> list[str]:
    return [s["path"] for s in resp["sources"]]


# ---------------------------------------------------------------------------------------------- chat
def test_chat_offline_answers_with_sources_and_metadata(sample_db_copy):
    with LiveServer(offline(sample_db_copy)) as srv:
        r = post(srv.url + "/chat", json={"query": MFA_Q})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["refused"] is False and body["general_knowledge"] is False
        assert "Multi-factor authentication" in body["answer"]
        assert any(p.endswith(PASSWORD_PAGE) for p in cited(body))
        src = body["sources"][0]
        assert set(src) == {"path", "page", "printed_page", "title", "excerpt", "score"}
        assert src["page"] == 4 and src["path"].startswith("policies/")  # relative to the database
        md = body["metadata"]
        for key in ("provider", "model", "strategy", "steps", "tokens", "cost_usd", "latency_ms"):
            assert key in md
        assert md["provider"] == "offline" and md["strategy"] == "agent"
        assert re.fullmatch(r"[A-Za-z0-9_-]{16,64}", body["session_id"])
        # a Japanese question is answered from the Japanese manual
        r = post(srv.url + "/chat", json={"query": "冷蔵室の温度設定を「強」にすると、庫内はだいたい何度になりますか？"},
                       timeout=60)
        assert r.status_code == 200 and "約2℃" in r.json()["answer"], r.text
        # bad requests are JSON errors
        assert post(srv.url + "/chat", json={"query": "  "}).json()["error"].startswith("query")
        r = post(srv.url + "/chat", json={"query": "x", "strategy": "magic"})
        assert r.status_code == 422 and "strategy" in r.json()["error"]
        r = post(srv.url + "/chat", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422 and "error" in r.json()


def test_request_errors_name_the_field_and_the_page_has_a_favicon(sample_db_copy):
    """/search without a query said 'query.query: Field required', a non-JSON /chat body '0: JSON decode
    error', and the browser's /favicon.ico was a 404 in the log."""
    with LiveServer(offline(sample_db_copy)) as srv:
        r = get(srv.url + "/search")
        assert r.status_code == 422 and r.json() == {"error": "query: required"}, r.text
        r = post(srv.url + "/chat", content=b"{not json", headers={"content-type": "application/json"})
        err = r.json()["error"]
        assert r.status_code == 422 and err.startswith("the request body is not valid JSON: "), err
        assert "0:" not in err and "JSON decode error" != err.rsplit(": ", 1)[-1], err
        r = post(srv.url + "/chat", json={"session_id": "x"})
        assert r.status_code == 422 and r.json() == {"error": "query: required"}, r.text
        r = get(srv.url + "/favicon.ico")
        assert r.status_code == 204 and not r.content


def test_two_turn_session_uses_the_first_question(sample_db_copy):
    with LiveServer(offline(sample_db_copy)) as srv:
        first = post(srv.url + "/chat", json={"query": MFA_Q}).json()
        sid = first["session_id"]
        second = post(srv.url + "/chat", json={"query": FOLLOW_UP, "session_id": sid}).json()
        assert second["session_id"] == sid
        # the follow-up became a standalone query carrying the first question's subject...
        query = second["metadata"]["search_query"]
        assert "email" in query and "authentication" in query and "vpn" in query.lower()
        assert any(p.endswith(PASSWORD_PAGE) for p in cited(second)), second
        assert "mandatory for email" in second["answer"]
        # ...which the same words without the session do not find
        alone = post(srv.url + "/chat", json={"query": FOLLOW_UP}).json()
        assert alone["session_id"] != sid and alone["metadata"]["search_query"] == FOLLOW_UP
        assert not any(p.endswith(PASSWORD_PAGE) for p in cited(alone)), alone


def test_session_survives_a_restart_and_unknown_sessions_are_refused(sample_db_copy):
    settings = offline(sample_db_copy)
    with LiveServer(settings) as srv:
        sid = post(srv.url + "/chat", json={"query": MFA_Q}).json()["session_id"]
    assert (sample_db_copy / ".ragkit" / "sessions.sqlite3").is_file()
    with LiveServer(settings) as srv:
        r = post(srv.url + "/chat", json={"query": FOLLOW_UP, "session_id": sid})
        assert r.status_code == 200, r.text
        assert "authentication" in r.json()["metadata"]["search_query"]
        for bad in ("nosuchsessionxx", "../../etc/passwd", "x' OR 1=1 --"):
            r = post(srv.url + "/chat", json={"query": "hi", "session_id": bad})
            assert r.status_code == 404 and "session" in r.json()["error"]


def test_history_is_bounded(tmp_path):
    store = SessionStore(tmp_path, max_turns=3, max_sessions=2)
    sid = store.new()
    for i in range(5):
        store.add(sid, Turn(f"q{i}", f"q{i}", f"a{i}"))
    assert [t.query for t in store.history(sid)] == ["q2", "q3", "q4"]
    s2, s3 = store.new(), store.new()
    assert store.exists(s3) and store.exists(s2) and not store.exists(sid)  # least recently used dropped


def test_offline_rewrite_leaves_standalone_questions_alone():
    hist = [Turn(MFA_Q, MFA_Q, "…")]
    assert rewrite_offline("What is the retention period for Confidential data records?", hist) \
        == "What is the retention period for Confidential data records?"
    assert rewrite_offline(FOLLOW_UP, []) == FOLLOW_UP
    ja = rewrite_offline("「弱」ではどうですか？", [Turn("冷蔵室の温度設定を「強」にすると何度ですか", "冷蔵室の温度設定を「強」にすると何度ですか", "")])
    assert "冷蔵室" in ja and "温度設定" in ja


def _naive_responder(body: dict) -> dict:
    """A model: rewrites follow-ups by naming MFA, and answers from the first search result it is given."""
    system = body["messages"][0]["content"]
    user = body["messages"][-1]["content"]
    if "standalone question" in system:
        return {"content": "Is multi-factor authentication required for email?"}
    m = re.search(r"=== Search result \[1\]: (\S+)", user)
    page = m.group(1) if m else ""
    return {"content": json.dumps({"answer": "Yes, MFA is mandatory [1].", "sources": [page], "refused": False})}


def test_chat_through_a_model_with_a_session(sample_db_copy, scripted_server):
    scripted_server.set_responder(_naive_responder)
    settings = openai_settings(scripted_server, db=sample_db_copy)
    with LiveServer(settings) as srv:
        r = post(srv.url + "/chat", json={"query": MFA_Q, "strategy": "naive"})
        assert r.status_code == 200, r.text
        first = r.json()
        assert first["metadata"]["provider"] == "openai" and first["metadata"]["tokens"] > 0
        assert first["answer"] == "Yes, MFA is mandatory [1]." and any(p.endswith(PASSWORD_PAGE) for p in cited(first))
        n = len(scripted_server.requests)
        assert n == 1  # no history yet: no rewrite call
        r = post(srv.url + "/chat", json={"query": FOLLOW_UP, "strategy": "naive",
                                                "session_id": first["session_id"]})
        second = r.json()
        rewrite, answer = scripted_server.requests[n:]
        # step 1 saw the history; the answerer got the standalone question
        assert MFA_Q in rewrite["messages"][-1]["content"] and FOLLOW_UP in rewrite["messages"][-1]["content"]
        assert "Question: Is multi-factor authentication required for email?" in answer["messages"][-1]["content"]
        assert second["metadata"]["search_query"] == "Is multi-factor authentication required for email?"
        assert second["metadata"]["tokens"] > first["metadata"]["tokens"] * 0  # rewrite tokens are counted
        assert TEST_KEY not in r.text
        # a model failure is a JSON error without the key, not a traceback
        scripted_server.set_responder(None)
        scripted_server.enqueue(status=401, body={"error": {"message": f"Incorrect API key provided: {TEST_KEY}"}})
        r = post(srv.url + "/chat", json={"query": MFA_Q, "strategy": "naive"})
        assert r.status_code == 502 and "error" in r.json() and TEST_KEY not in r.text


def test_chat_streams_steps_then_the_answer(sample_db_copy, scripted_server):
    scripted_server.set_responder(_naive_responder)
    with LiveServer(openai_settings(scripted_server, db=sample_db_copy)) as srv:
        with httpx.stream("POST", srv.url + "/chat", json={"query": MFA_Q, "strategy": "naive", "stream": True},
                          timeout=60) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            text = "".join(r.iter_text())
    events = [(m.group(1), json.loads(m.group(2))) for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", text)]
    names = [e for e, _ in events]
    assert names[0] == "session" and names[-1] == "answer", names
    steps = [d["event"] for e, d in events if e == "step"]
    assert "search" in steps and "llm" in steps, steps
    final = events[-1][1]
    assert final["answer"] == "Yes, MFA is mandatory [1]." and final["session_id"] == events[0][1]["session_id"]
    assert TEST_KEY not in text


def test_an_offline_chat_streams_its_searches_and_the_pages_it_read(sample_db_copy):
    """An offline /chat stream gave the `start` step and then the answer, while docs/serve.md promises one step per
    agent step (searches, pages read). The extractive engine's searches and the pages it read are steps now, named
    as the API names pages (relative to the database), and the pages cited are among those read."""
    with LiveServer(offline(sample_db_copy)) as srv:
        with httpx.stream("POST", srv.url + "/chat", json={"query": MFA_Q, "stream": True}, timeout=120) as r:
            text = "".join(r.iter_text())
    events = [(m.group(1), json.loads(m.group(2))) for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", text)]
    assert [e for e, _ in events][-1] == "answer", text[:500]
    steps = [d for e, d in events if e == "step"]
    assert [s["event"] for s in steps][0] == "start" and "db" not in steps[0]
    searches = [s for s in steps if s["event"] == "search"]
    assert searches and searches[0]["query"] and searches[0]["hits"], steps
    read = [s for s in steps if s["event"] == "read"]
    assert len(read) == 1 and read[0]["pages"], steps
    pages = set(read[0]["pages"])
    assert pages <= {h for s in searches for h in s["hits"]}
    assert all(not p.startswith(("/", "database/")) for p in pages), pages
    assert set(cited(events[-1][1])) <= pages and str(sample_db_copy) not in text


# ------------------------------------------------------------------------------------- search, pages
def test_search_returns_what_rag_search_json_prints_with_db_relative_paths(sample_db_copy):
    from ragkit.cli import app
    from ragkit.search import embed_db

    # Vectors are filled in the background, so a search ranks by keywords until its candidates have theirs:
    # give every page its vector first, so that the CLI and the server rank on the same state (CI saw 8.87
    # keyword vs 1.05 hybrid when the filler finished between the two calls).
    assert embed_db(sample_db_copy, progress=False)[1] > 0
    cli = CliRunner().invoke(app, ["search", "password length", "--db", str(sample_db_copy), "-k", "3",
                                   "--format", "json"])
    assert cli.exit_code == 0, cli.output
    with LiveServer(offline(sample_db_copy)) as srv:
        r = get(srv.url + "/search", params={"query": "password length", "k": 3})
        assert r.status_code == 200
        printed = json.loads(cli.stdout)
        assert r.json() == [{**h, "path": h["path"].removeprefix("database/")} for h in printed]
        assert r.json()[0]["path"] == "policies/information_security_policy/" + PASSWORD_PAGE
        r = get(srv.url + "/search", params={"query": "password", "path": "policies"})
        assert r.json() and all(h["path"].startswith("policies/") for h in r.json())
        assert get(srv.url + "/search", params={"query": "x", "path": "nowhere"}).status_code == 400
        assert get(srv.url + "/search", params={"query": "x", "k": 0}).status_code == 422
        assert get(srv.url + "/search").json()["error"].startswith("query")


def test_pages_open_citations_and_never_escape(sample_db_copy, isolated_env):
    (isolated_env / "secret.md").write_text("TOP SECRET", encoding="utf-8")
    with LiveServer(offline(sample_db_copy)) as srv:
        ref = "database/policies/information_security_policy/" + PASSWORD_PAGE
        r = get(srv.url + "/pages/" + ref)
        assert r.status_code == 200 and "at least 14 characters" in r.json()["markdown"]
        rel = ref.removeprefix("database/")
        assert r.json()["page"] == 4 and r.json()["path"] == rel
        assert get(srv.url + "/pages/" + rel).json()["markdown"] == r.json()["markdown"]
        for bad in ("%2e%2e/secret.md", "..%2fsecret.md", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "%2Fetc%2Fpasswd",
                    "policies%5c..%5c..%5csecret.md", ".ragkit/sessions.sqlite3", ".ragkit/ingest-manifest.json",
                    "policies", "nope.md"):
            r = get(srv.url + "/pages/" + bad)
            assert r.status_code in (400, 404), (bad, r.status_code, r.text)
            assert set(r.json()) == {"error"} and "TOP SECRET" not in r.text and "Traceback" not in r.text


def test_replicas_on_one_folder_mounted_at_two_paths_name_pages_alike(sample_db_copy, isolated_env, tmp_path):
    """Two replicas serve one shared folder mounted at different paths (here: the folder moved between them). The
    API gave server paths (`database/...` here, absolute outside the working directory), so replica B answered a
    citation from replica A with 400/404, and the same upload with 409 "would go to the same folder" (an upload
    was recorded by its absolute path). Now every path is relative to the database: B opens what A gave, lists
    the same paths, and the same file again is 200 `unchanged` (also for an upload an older ragkit recorded by
    A's absolute path). The streamed start step no longer names the server's --db argument."""
    pdf = make_pdf(tmp_path / "harbor.pdf", ["Zanzibarite harbor crane manual", "Crane zanzibarite maintenance"])

    def upload(url: str):
        with pdf.open("rb") as fh:
            return post(url + "/documents", files={"file": ("harbor.pdf", fh)}, data={"category": "港湾"})

    with LiveServer(offline(sample_db_copy)) as a:
        assert upload(a.url).status_code == 201
        cited_a = cited(post(a.url + "/chat", json={"query": MFA_Q}).json())
        hits_a = [h["path"] for h in get(a.url + "/search", params={"query": "zanzibarite"}).json()]
        docs_a = get(a.url + "/documents").json()["documents"]
        with httpx.stream("POST", a.url + "/chat", json={"query": MFA_Q, "stream": True}, timeout=120) as r:
            text = "".join(r.iter_text())
    assert cited_a and hits_a and all(not p.startswith(("/", "database/")) for p in cited_a + hits_a)
    steps = [json.loads(m.group(1)) for m in re.finditer(r"event: step\ndata: (.*)\n\n", text)]
    start = next(s for s in steps if s.get("event") == "start")
    assert "db" not in start and str(sample_db_copy) not in text and '"database/' not in text, text[:500]
    # an upload recorded as an older ragkit did: by the absolute path of A's mount
    manifest_path = sample_db_copy / ".ragkit" / "ingest-manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    key = next(k for k, e in manifest["sources"].items() if e["folder"] == "港湾/harbor")
    manifest["sources"][str(sample_db_copy / ".ragkit/uploads/港湾/harbor.pdf")] = manifest["sources"].pop(key)
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")

    mount_b = isolated_env / "mnt-b"
    sample_db_copy.rename(mount_b)
    with LiveServer(offline(mount_b)) as b:
        for path in cited_a + hits_a:
            r = get(b.url + "/pages/" + path)
            assert r.status_code == 200 and r.json()["path"] == path, (path, r.text)
        assert [h["path"] for h in get(b.url + "/search", params={"query": "zanzibarite"}).json()] == hits_a
        assert get(b.url + "/documents").json()["documents"] == docs_a
        r = upload(b.url)
        assert r.status_code == 200 and r.json()["unchanged"] is True, r.text
        r = get(b.url + "/pages/" + str(mount_b / hits_a[0]))  # the server's own absolute path still opens
        assert r.status_code == 200 and r.json()["path"] == hits_a[0]


# ------------------------------------------------------------------------------------------ documents
def test_upload_list_show_delete_and_search_follows(sample_db_copy, tmp_path):
    pdf = make_pdf(tmp_path / "harbor.pdf", ["Zanzibarite harbor crane manual", "Crane zanzibarite maintenance"])
    with LiveServer(offline(sample_db_copy)) as srv:
        assert get(srv.url + "/search", params={"query": "zanzibarite"}).json() == []
        with pdf.open("rb") as fh:
            r = post(srv.url + "/documents", files={"file": ("harbor.pdf", fh, "application/pdf")},
                           data={"category": "港湾"})
        assert r.status_code == 201, r.text
        doc = r.json()
        assert doc["name"] == "harbor" and doc["category"] == "港湾" and doc["pages"] == 2 and doc["sections"]
        listed = get(srv.url + "/documents").json()["documents"]
        assert doc["id"] in [d["id"] for d in listed] and len(listed) == 6
        tree = get(srv.url + f"/documents/{doc['id']}").json()
        pages = [p for s in tree["sections"] for p in s["pages"]]
        assert [p["page"] for p in pages] == [1, 2]
        hits = get(srv.url + "/search", params={"query": "zanzibarite"}).json()
        assert {h["path"] for h in hits} == {p["path"] for p in pages}
        assert get(srv.url + "/pages/" + pages[0]["path"]).status_code == 200
        # the same file again changes nothing
        with pdf.open("rb") as fh:
            r = post(srv.url + "/documents", files={"file": ("harbor.pdf", fh)}, data={"category": "港湾"},
                           timeout=120)
        assert r.status_code == 200 and r.json()["unchanged"] is True

        r = delete(srv.url + f"/documents/{doc['id']}")
        assert r.status_code == 200 and r.json()["deleted_pages"] == 2
        assert get(srv.url + "/search", params={"query": "zanzibarite"}).json() == []
        assert doc["id"] not in [d["id"] for d in get(srv.url + "/documents").json()["documents"]]
        assert not (sample_db_copy / "港湾").exists()
        assert not list((sample_db_copy / ".ragkit" / "uploads").rglob("harbor.pdf"))
        assert delete(srv.url + f"/documents/{doc['id']}").status_code == 404
        assert get(srv.url + "/documents/..%2F..%2Fetc").status_code == 404
        # deleted, then uploaded again: ingested again (the manifest forgot it)
        with pdf.open("rb") as fh:
            r = post(srv.url + "/documents", files={"file": ("harbor.pdf", fh)})
        assert r.status_code == 201 and r.json()["pages"] == 2


def test_documents_count_their_own_pages_and_copies_apart(sample_db_copy, tmp_path):
    """GET /documents listed a 2-page PDF with an optimizer's copy of one page as 3 pages, and a copy at category
    level as a document of its own; DELETE left that copy behind, still searchable."""
    from ragkit.optimize import CopyManager, Journal
    from ragkit.search import open_index

    pdf = make_pdf(tmp_path / "harbor.pdf", ["Zanzibarite harbor crane manual", "Crane zanzibarite maintenance"])
    with LiveServer(offline(sample_db_copy)) as srv:
        with pdf.open("rb") as fh:
            doc = post(srv.url + "/documents", files={"file": ("harbor.pdf", fh)}, data={"category": "港湾"}).json()
        pages = sorted(p for p in open_index(sample_db_copy).pages() if p.startswith("港湾/harbor/"))
        journal = Journal(sample_db_copy)
        manager = CopyManager(sample_db_copy, open_index(sample_db_copy), journal)
        made = [manager.place(pages[1], f"{pages[1].rsplit('/', 1)[0]}/crane maintenance", "t")[0],
                manager.place(pages[1], "港湾/crane maintenance", "t")[0]]
        for rel in made:
            manager.release(rel, "t", keep=True)
        journal.close()
        listed = [d for d in get(srv.url + "/documents").json()["documents"] if d["category"] == "港湾"]
        assert [(d["name"], d["pages"], d["copies"]) for d in listed] == [("harbor", 2, 2)]
        r = delete(srv.url + f"/documents/{doc['id']}")
        assert r.status_code == 200 and (r.json()["deleted_pages"], r.json()["deleted_copies"]) == (2, 2)
        assert not (sample_db_copy / "港湾").exists()
        assert get(srv.url + "/search", params={"query": "zanzibarite"}).json() == []


class _LostIndex:
    """An index whose cluster went away after the upload's or deletion's check: its writes fail."""

    backend = "embedded"

    def update_pages(self, written: list[str], removed: list[str]) -> None:
        from ragkit.search.opensearch.client import ClusterError

        raise ClusterError("OpenSearch at http://127.0.0.1:9: unreachable")


def test_the_upload_and_delete_warnings_do_not_name_the_servers_path(sample_db_copy, tmp_path):
    """The warnings of an upload stored but not indexed, and of a deletion the index did not take, said to run
    `rag index sync --db /the/server's/absolute/path`, while every path the API gives is relative to the database.
    Now they say to run `rag index sync` on the server's database."""
    from ragkit.serve.documents import delete_document, list_documents, upload_document

    pdf = make_pdf(tmp_path / "harbor.pdf", ["Zanzibarite harbor crane manual"]).read_bytes()
    up = upload_document(sample_db_copy, "harbor.pdf", pdf, "港湾", _LostIndex())
    doc = next(d for d in list_documents(sample_db_copy) if d.folder == "港湾/harbor")
    gone = delete_document(sample_db_copy, doc, _LostIndex())
    for out in (up, gone):
        assert out["indexed"] is False and "`rag index sync` on the server's database" in out["warning"], out
        assert "--db" not in out["warning"] and str(sample_db_copy) not in out["warning"], out


def test_hostile_uploads_are_refused_or_confined(sample_db_copy, tmp_path, isolated_env):
    pdf = make_pdf(tmp_path / "ok.pdf", ["Quokka observation notes"]).read_bytes()
    with LiveServer(offline(sample_db_copy), ServeOptions(max_upload_mb=0.05)) as srv:
        up = srv.url + "/documents"
        r = post(up, files={"file": ("notes.pdf", b"this is not a pdf at all", "application/pdf")})
        # each refusal names the file, as a conversion's failure ("broken.pdf: ...") does
        assert r.status_code == 422 and r.json()["error"] == "notes.pdf: the uploaded file is not a PDF (no %PDF header)"
        r = post(up, files={"file": ("broken.pdf", b"%PDF-1.7\n garbage garbage\n")})
        assert r.status_code == 422 and "broken.pdf" in r.json()["error"], r.text
        r = post(up, files={"file": ("slides.pptx", b"PK\x03\x04 not really a zip")})
        assert r.status_code == 422 and r.json()["error"].startswith("slides.pptx: "), r.text
        r = post(up, files={"file": ("../empty.docx", b"")})
        assert r.status_code == 422 and r.json()["error"] == "empty.docx: the uploaded file is empty", r.text
        r = post(up, files={"file": ("run.exe", pdf)})
        assert r.status_code == 415
        r = post(up, files={"file": ("업무 보고서.hwp", b"HWP Document File")})  # s57-ko M5: what to do with it
        assert r.status_code == 415 and "save it as PDF or DOCX first" in r.json()["error"], r.text
        r = post(up, files={"file": ("big.pdf", pdf + b"0" * 60_000)})
        assert r.status_code == 413 and "limit" in r.json()["error"]
        # the same body streamed without a Content-Length
        def chunks():
            yield b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\n\r\n%PDF-1.7\n'
            for _ in range(1500):  # 1.5 MB: past the limit (0.05 MB) plus the form's allowance (1 MB)
                yield b"0" * 1024
        r = post(up, content=chunks(), headers={"content-type": "multipart/form-data; boundary=x"})
        assert r.status_code == 413
        for name in ("../../x.pdf", "/tmp/abs.pdf", "C:\\Windows\\..\\win.pdf", "..\\..\\back.pdf"):
            r = post(up, files={"file": (name, pdf)})
            assert r.status_code == 201, (name, r.text)
            stem = re.split(r"[\\/]", name)[-1][:-4]
            assert r.json()["name"] == stem
            assert (sample_db_copy / "uploads" / stem).is_dir()
            assert (sample_db_copy / ".ragkit" / "uploads" / "uploads" / f"{stem}.pdf").is_file()
        assert not (isolated_env / "x.pdf").exists() and not (tmp_path / "x.pdf").exists()
        assert not Path("/tmp/abs").exists()
        r = post(up, files={"file": ("a.pdf", pdf)}, data={"category": "../../escape"})
        assert r.status_code == 201 and r.json()["category"] == "escape"  # separators stripped
        assert not (isolated_env.parent / "escape").exists()


def test_an_upload_into_a_category_linked_out_of_the_database_writes_nothing(sample_db_copy, tmp_path):
    """Report s56-sec H1: a category folder (or .ragkit/uploads/<category>) that is a symlink out of the database
    took an upload's pages and its original, and left a manifest entry, while the answer said 400. It is 400
    naming the category, and nothing is written anywhere."""
    from ragkit.ingest.manifest import MANIFEST

    pdf = make_pdf(tmp_path / "z.pdf", ["Quokka observation notes"]).read_bytes()
    outside = tmp_path / "outside"
    for name in ("cat", "store", "doc"):
        (outside / name).mkdir(parents=True)
    (sample_db_copy / "linkcat").symlink_to(outside / "cat")
    (sample_db_copy / ".ragkit" / "uploads" / "linkstore").mkdir(parents=True)  # not yet a category folder
    (sample_db_copy / ".ragkit" / "uploads" / "linkstore").rmdir()
    (sample_db_copy / ".ragkit" / "uploads" / "linkstore").symlink_to(outside / "store")
    (sample_db_copy / "real").mkdir()
    (sample_db_copy / "real" / "z").symlink_to(outside / "doc")
    manifest = (sample_db_copy / ".ragkit" / MANIFEST).read_bytes()
    with LiveServer(offline(sample_db_copy)) as srv:
        for cat, folder in (("linkcat", "linkcat"), ("linkstore", "uploads/linkstore"), ("real", "real/z")):
            r = post(srv.url + "/documents", files={"file": ("z.pdf", pdf)}, data={"category": cat})
            assert r.status_code == 400, r.text
            assert r.json()["error"].startswith(f"z.pdf: cannot store it in the category {cat!r}: the folder "
                                                f"{folder!r} is a symbolic link that leads out of"), r.text
        assert not [p for p in outside.rglob("*") if p.is_file()]
        assert (sample_db_copy / ".ragkit" / MANIFEST).read_bytes() == manifest
        assert not list((sample_db_copy / ".ragkit" / "uploads").rglob("z.pdf"))


def test_the_document_list_leaves_out_a_page_linked_out_of_the_database(sample_db_copy, tmp_path):
    """Report s56-sec H2 (fixed by iter_pages, 5c0e09f): GET /documents counted a page file symlinked to a file
    outside the database, and GET /documents/{id} showed that file's first heading as the page's title."""
    outside = tmp_path / "page_777.md"
    outside.write_text("---\ntitle: x\n---\n# TOPSECRET-HEADING salary table\nOUTSIDE-CANARY payroll\n")
    with LiveServer(offline(sample_db_copy)) as srv:
        before = {d["path"]: d for d in get(srv.url + "/documents").json()["documents"]}
        doc = next(d for d in before.values() if d["category"] == "공지")
        first = next(p for p in sample_db_copy.glob(f"{doc['path']}/*/page_*.md"))
        (first.parent / "page_003.md").symlink_to(outside)
        after = {d["path"]: d for d in get(srv.url + "/documents").json()["documents"]}
        assert after == before
        r = get(srv.url + f"/documents/{doc['id']}")
        assert r.status_code == 200 and r.json()["pages"] == doc["pages"]
        assert "TOPSECRET" not in r.text and "page_003.md" not in r.text, r.text


def test_a_page_lying_directly_in_a_category_is_a_document_named_by_its_file(sample_db_copy):
    """Report s56-sec L7: `policies/hard.md` (a page put there by hand, which search and the agent's tools read) was
    listed as a document with an empty name ("policies / (1 pages)" on the page). It is named by its file name,
    opens, and deletes alone."""
    (sample_db_copy / "policies" / "hard.md").write_text("# Hard rules\nNo USB sticks.\n", encoding="utf-8")
    with LiveServer(offline(sample_db_copy)) as srv:
        listed = get(srv.url + "/documents").json()["documents"]
        assert all(d["name"] for d in listed), listed
        stray = next(d for d in listed if d["path"] == "policies/hard.md")
        assert (stray["category"], stray["name"], stray["pages"]) == ("policies", "hard.md", 1)
        tree = get(srv.url + f"/documents/{stray['id']}").json()
        assert [p["title"] for s in tree["sections"] for p in s["pages"]] == ["Hard rules"]
        assert delete(srv.url + f"/documents/{stray['id']}").json()["deleted_pages"] == 1
        assert not (sample_db_copy / "policies" / "hard.md").exists()
        assert len(get(srv.url + "/documents").json()["documents"]) == len(listed) - 1


def test_an_upload_of_another_file_with_the_same_name_is_refused_unless_it_replaces(sample_db_copy, tmp_path):
    """Report s56-sec H4: a second upload named like an earlier one, with other content, replaced it (its pages
    and its stored original) with 201 and nothing said. It is 409 naming the document, unless the form says
    replace=true; the same file again stays unchanged."""
    first = make_pdf(tmp_path / "a.pdf", ["Zanzibarite harbor crane manual", "Crane zanzibarite maintenance"])
    second = make_pdf(tmp_path / "b.pdf", ["Quokka observation notes"])
    stored = sample_db_copy / ".ragkit" / "uploads" / "uploads" / "report.pdf"
    with LiveServer(offline(sample_db_copy)) as srv:
        up = srv.url + "/documents"
        r = post(up, files={"file": ("report.pdf", first.read_bytes())})
        assert r.status_code == 201 and r.json()["replaced"] is False, r.text
        doc = r.json()
        r = post(up, files={"file": ("report.pdf", second.read_bytes())})
        assert r.status_code == 409, r.text
        assert r.json()["error"] == (f"report.pdf: the document 'uploads/report' (id {doc['id']}, 2 pages) already "
                                     "exists with other content; upload it with replace=true to replace it, or "
                                     "rename the file"), r.text
        assert r.json()["existing"]["id"] == doc["id"] and r.json()["existing"]["pages"] == 2
        assert stored.read_bytes() == first.read_bytes()
        assert get(up + f"/{doc['id']}").json()["pages"] == 2
        r = post(up, files={"file": ("report.pdf", first.read_bytes())}, data={"replace": "false"})
        assert r.status_code == 200 and r.json()["unchanged"] is True, r.text
        r = post(up, files={"file": ("report.pdf", second.read_bytes())}, data={"replace": "maybe"})
        assert r.status_code == 422 and r.json()["error"] == "replace: 'maybe' is not true or false"
        r = post(up, files={"file": ("report.pdf", second.read_bytes())}, data={"replace": "true"})
        assert r.status_code == 201 and r.json()["replaced"] is True and r.json()["pages"] == 1, r.text
        assert r.json()["id"] == doc["id"] and stored.read_bytes() == second.read_bytes()
        assert [h["path"] for h in get(srv.url + "/search", params={"query": "zanzibarite"}).json()] == []
        # another kind of file by the same name is its own upload: replacing it is deleting it first
        r = post(up, files={"file": ("report.docx", _docx(tmp_path))}, data={"replace": "true"})
        assert r.status_code == 409 and "existing" not in r.json(), r.text
        assert r.json()["error"] == (f"report.docx: the document 'uploads/report' (id {doc['id']}, 1 pages) already "
                                     "exists, uploaded as 'report.pdf'; delete it first (DELETE "
                                     f"/documents/{doc['id']}), or rename the file"), r.text



def test_two_uploads_of_one_name_racing_do_not_both_pass_the_check(sample_db_copy, tmp_path, monkeypatch):
    """Two uploads of the same name with other content, at once: each looked for a document in the way before
    either had written one, so both passed and the second silently replaced the first. The check and the write
    are one step per document folder now: one is stored (201), the other refused (409). The race is forced: each
    upload waits, after its check, for the other to have checked too (up to 3 s)."""
    import threading

    import ragkit.serve.documents as docs

    both_checked = threading.Barrier(2, timeout=3)
    checked = docs._in_the_way

    def check_then_wait(*args, **kw):
        found = checked(*args, **kw)
        try:
            both_checked.wait()
        except threading.BrokenBarrierError:
            pass  # the other upload could not check meanwhile: it waits for this one's write
        return found

    monkeypatch.setattr(docs, "_in_the_way", check_then_wait)
    files = [make_pdf(tmp_path / "a.pdf", ["Zanzibarite harbor crane manual"]),
             make_pdf(tmp_path / "b.pdf", ["Quokka observation notes"])]
    statuses: list[int] = []
    with LiveServer(offline(sample_db_copy)) as srv:
        threads = [threading.Thread(target=lambda f=f: statuses.append(
            post(srv.url + "/documents", files={"file": ("race.pdf", f.read_bytes())}).status_code)) for f in files]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(statuses) == [201, 409], statuses

def _docx(tmp_path: Path) -> bytes:
    import docx

    d = docx.Document()
    d.add_paragraph("Wombat burrow survey")
    d.save(tmp_path / "w.docx")
    return (tmp_path / "w.docx").read_bytes()


# ------------------------------------------------------------------------------------------ security
def test_token_is_required_by_the_api_not_by_its_description(sample_db_copy):
    """Every endpoint that reads or changes data needs the token; /docs and /openapi.json, which describe the API
    and hold no data, open in a browser (which cannot send the header) and say how to send it."""
    # 16 wrong tokens follow: more than a client may send in a minute before 429 (test_serve_guard.py)
    with LiveServer(offline(sample_db_copy), ServeOptions(token="s3cret-token", failed_tokens_per_minute=100)) as srv:
        health = get(srv.url + "/health")
        assert health.status_code == 200 and health.json()["status"] == "ok" and health.json()["index"] == "embedded"
        for method, path in (("GET", "/search?query=password"), ("GET", "/documents"), ("POST", "/chat"),
                             ("GET", "/pages/policies"), ("DELETE", "/documents/x"), ("GET", "/docs/x"),
                             ("GET", "/openapi.json/x"), ("GET", "/docs%2F..%2Fdocuments")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
                r = request(method, srv.url + path, headers=headers, json={"query": "x"})
                assert r.status_code == 401, (path, headers, r.status_code)
                assert "Authorization: Bearer" in r.json()["error"] and "token box" in r.json()["error"]
        ok = {"Authorization": "Bearer s3cret-token"}
        assert get(srv.url + "/search", params={"query": "password"}, headers=ok).status_code == 200
        docs = get(srv.url + "/docs")
        assert docs.status_code == 200 and "needs its token" in docs.text and "token box" in docs.text
        assert f"curl -H \"Authorization: Bearer $RAG_API_TOKEN\" '{srv.url}/search?query=" in docs.text
        assert "s3cret-token" not in docs.text
        schema = get(srv.url + "/openapi.json")
        assert schema.status_code == 200 and schema.json()["paths"]["/chat"] and "s3cret-token" not in schema.text
    with LiveServer(offline(sample_db_copy)) as srv:  # no token: the page says none is needed
        docs = get(srv.url + "/docs").text
        assert "needs no token" in docs and "Bearer" not in docs


def test_refuses_to_listen_beyond_loopback_without_a_token(sample_db_copy):
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("0.0.0.0", "a-token-of-16+chars")
    with pytest.raises(UsageError):
        check_bind("0.0.0.0", None)
    from ragkit.cli import app

    r = CliRunner().invoke(app, ["serve", "--db", str(sample_db_copy), "--host", "0.0.0.0"])
    assert r.exit_code == 2
    assert "without a token" in r.stderr and len(r.stderr.strip().splitlines()) == 2  # provider note + error


def test_rag_serve_command_runs_uvicorn(sample_db_copy, tmp_path):
    """The real command: token, page, a failing chat, an upload (which starts the conversion process), and
    Ctrl-C, which stops the server and that process without a traceback."""
    import signal
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAG_API_TOKEN": "cli-token", "OPENAI_API_KEY": TEST_KEY,
           "OPENAI_API_BASE": "http://127.0.0.1:9/v1"}
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", "serve", "--db", str(sample_db_copy),
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert get(url + "/documents").status_code == 401
        assert get(url + "/docs").status_code == 200  # the start-up line's /docs opens in a browser
        r = get(url + "/documents", headers={"Authorization": "Bearer cli-token"})
        assert r.status_code == 200 and len(r.json()["documents"]) == 5
        page = get(url + "/")
        assert page.status_code == 200 and "<title>ragkit</title>" in page.text and "https://" not in page.text
        # the model is unreachable: the chat fails as one JSON line, without the key
        r = post(url + "/chat", json={"query": MFA_Q, "strategy": "naive"},
                       headers={"Authorization": "Bearer cli-token"})
        assert r.status_code == 502 and TEST_KEY not in r.text
        pdf = make_pdf(tmp_path / "harbor.pdf", ["Zanzibarite harbor crane manual"])
        with pdf.open("rb") as fh:
            r = post(url + "/documents", files={"file": ("harbor.pdf", fh, "application/pdf")},
                     headers={"Authorization": "Bearer cli-token"}, timeout=120)
        assert r.status_code == 201, r.text
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole process group
        proc.wait(timeout=30)
        for _ in range(100):  # the conversion process ends with the server
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("a process of the server survived Ctrl-C")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    out = (tmp_path / "serve.log").read_text()
    assert f"127.0.0.1:{port}" in out and TEST_KEY not in out and "Traceback" not in out, out
    assert "type it into the page's token box" in out and "cli-token" not in out, out


def test_upload_while_searching_and_chatting(sample_db_copy, tmp_path):
    """Handlers share the index: searches and chats during an upload all succeed, and afterwards both the old
    pages and the new ones are found."""
    import threading

    pdf = make_pdf(tmp_path / "late.pdf", ["Wombatite conveyor belt manual"] * 3)
    failures: list[str] = []
    done = threading.Event()
    counts = {"search": 0, "chat": 0}

    def hammer(url: str) -> None:
        while not done.is_set():
            r = get(url + "/search", params={"query": "password length"})
            if r.status_code != 200 or not r.json() or not r.json()[0]["path"].endswith(PASSWORD_PAGE):
                failures.append(f"search {r.status_code} {r.text[:200]}")
            counts["search"] += 1
            r = post(url + "/chat", json={"query": MFA_Q})
            if r.status_code != 200 or "Multi-factor" not in r.json().get("answer", ""):
                failures.append(f"chat {r.status_code} {r.text[:200]}")
            counts["chat"] += 1

    with LiveServer(offline(sample_db_copy)) as srv:
        threads = [threading.Thread(target=hammer, args=(srv.url,)) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            with pdf.open("rb") as fh:
                r = post(srv.url + "/documents", files={"file": ("late.pdf", fh)})
            assert r.status_code == 201, r.text
        finally:
            done.set()
            for t in threads:
                t.join(300)
        assert not failures, failures[:3]
        assert counts["search"] >= 3 and counts["chat"] >= 3
        hits = get(srv.url + "/search", params={"query": "wombatite"}).json()
        assert len(hits) == 3 and all(h["path"].startswith("uploads/late/") for h in hits)


def test_rag_serve_shows_the_indexing_of_a_fresh_database_before_it_listens(tmp_path, capfd):
    """The app builds the index before listening: on a fresh database of over 200 pages `rag serve` (which passes
    progress=True) shows its "indexing pages" lines; the app made from Python stays quiet by default."""
    from pagetree import write_pages

    from ragkit.serve.app import create_app

    pages = {f"a/d/s/page_{i:03d}.md": ("d", "s", i, f"Pump {i} runs daily.") for i in range(1, 202)}
    create_app(offline(write_pages(tmp_path / "quiet", pages)), ServeOptions())
    assert "indexing pages" not in capfd.readouterr().err
    create_app(offline(write_pages(tmp_path / "shown", pages)), ServeOptions(progress=True))
    assert "indexing pages" in capfd.readouterr().err
