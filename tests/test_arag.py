"""Strategy arag (the A-RAG seed's tools and loop): the tools on a small page tree, the loop through the real openai
client against the scripted server, the read set, the step cap and best-effort answer, the offline path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeserver import openai_settings
from test_tools import index_for, make_db
from typer.testing import CliRunner

from ragkit.answer import STRATEGIES, ask
from ragkit.answer import arag as arag_mod
from ragkit.answer.aragtools import ARagTools, highlight, keyword_score, parse_keywords
from ragkit.cli import app
from ragkit.core.config import Settings

RESET_PAGE = "manuals/router/setup/page_003.md"
RESET_REF = f"database/{RESET_PAGE}"
FINAL = json.dumps({"answer": "Hold the RESET button for 10 seconds until the LED blinks orange.",
                    "sources": [RESET_PAGE], "refused": False})
Q = "How do I reset the router?"


@pytest.fixture(autouse=True)
def keyword_only_index(monkeypatch):
    """The loop tests script the model: no embedding model (semantic_search says the index stood in)."""
    monkeypatch.setenv("RAG_EMBED", "0")


@pytest.fixture
def db(isolated_env) -> Path:
    return make_db(isolated_env)


@pytest.fixture
def server(scripted_server):
    scripted_server.reject_json_schema = True
    return scripted_server


def run(server, db, question=Q, **kw):
    return ask(question, openai_settings(server, db=db), strategy="arag", index=index_for(db), **kw)


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


# -- the tools -------------------------------------------------------------------------------------------
def test_keyword_score_is_the_seeds_formula_and_longer_keywords_weigh_more():
    assert keyword_score(["led", "reset button"], "reset button led, led") == (2 * 3 + 1 * 12,
                                                                              {"led": 2, "reset button": 1})
    assert parse_keywords("RESET button, LED") == ["reset button", "led"]
    # one phrase of several words counts its words too; CJK separators split
    assert parse_keywords("reset the router") == ["reset the router", "router", "reset", "the"]
    assert parse_keywords("製氷機、24時間") == ["24時間", "製氷機"]
    assert highlight("Hold the RESET button for 10 seconds.", ["reset"]) == "Hold the **RESET** button for 10 seconds."


def test_keyword_search_ranks_by_exact_matches_with_highlighted_snippets(db):
    tools = ARagTools(db, index_for(db))
    out = tools.keyword_search("RESET button, LED")
    lines = out.splitlines()
    assert lines[1].startswith(f"1. [{RESET_PAGE}] (page 3, score ")
    assert "**RESET button**" in out and "**LED**" in out
    assert "reset button×1" in out
    # the Japanese manual, across its PDF line break ("待ってく\nださい")
    out = tools.keyword_search("待ってください")
    assert "家電/冷蔵庫/操作と機能/page_008.md" in out and "**待ってください**" in out
    assert tools.keyword_search("zzqx").startswith("No chunk contains")
    assert tools.call("keyword_search", {"keywords": ""}).startswith("Error: no keywords")


def test_chunk_read_keeps_a_read_set_and_stays_in_the_database(db, tmp_path):
    (tmp_path / "outside.md").write_text("OUTSIDE", encoding="utf-8")
    tools = ARagTools(db, index_for(db))
    first = tools.chunk_read(RESET_PAGE)
    assert "Hold the RESET button for 10 seconds" in first and tools.read_set == {RESET_PAGE}
    again = tools.chunk_read(f"{RESET_PAGE}, manuals/router/setup/page_004.md")
    assert f"[{RESET_PAGE}: already read for this question; skipped" in again
    assert "Firmware update" in again and "Hold the RESET" not in again
    # the searches mark what was read
    assert "[already read]" in tools.keyword_search("RESET")
    for bad in ("../outside.md", "/etc/passwd", str(tmp_path / "outside.md")):
        out = tools.call("chunk_read", {"paths": bad})
        assert "OUTSIDE" not in out and "Error" in out
    assert tools.call("read_page", {"path": RESET_PAGE}).startswith("Error: there is no tool 'read_page'")
    names = [s["function"]["name"] for s in tools.schemas()]
    assert names == ["keyword_search", "semantic_search", "chunk_read"]
    desc = tools.schemas()[0]["function"]
    assert "occurrences in the chunk x keyword length" in desc["description"]
    assert desc["parameters"]["required"] == ["keywords"]


def test_semantic_search_stores_sentence_vectors_with_the_index(db, monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "1")
    from ragkit.search import sentences as S

    if S.get_embedder() is None:
        pytest.skip("the embedding package is not installed")
    S._SHARED.clear()
    tools = ARagTools(db, index_for(db))
    out = tools.semantic_search("Which code means that there is no network?")
    assert out.splitlines()[1].startswith("1. [manuals/router/setup/page_004.md]")
    assert "closest sentence: Error code E-17 means no network." in out
    si = tools.sentences
    assert si.embedded == 5 and (db / ".ragkit" / S.SENTENCE_FILE).is_file()
    # a new process (a fresh SentenceIndex) reads them back: nothing is embedded again for a question
    fresh = S.SentenceIndex(db, si.embedder)
    assert fresh.search("no network error code", index_for(db).pages(), k=1)[0][0] == "manuals/router/setup/page_004.md"
    assert fresh.embedded == 0
    # a changed page is embedded anew (its content hash changed), the others come from the cache
    page = db / "manuals/router/setup/page_004.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nA blinking red light means overheating.\n", encoding="utf-8")
    assert fresh.ensure(index_for(db).pages()) == 1
    # a torn cache file is no error: the pages are embedded anew and searched
    (db / ".ragkit" / S.SENTENCE_FILE).write_bytes(b"not a database" * 10)
    torn = S.SentenceIndex(db, si.embedder)
    assert torn.search("no network error code", index_for(db).pages(), k=1)[0][0] == "manuals/router/setup/page_004.md"
    assert torn.embedded == 5


# -- the loop through the scripted server ---------------------------------------------------------------
def test_loop_searches_reads_and_answers_with_the_three_tools(server, db, tmp_path):
    server.enqueue(tool_calls=[("keyword_search", {"keywords": "RESET, router"})])
    server.enqueue(tool_calls=[("chunk_read", {"paths": RESET_PAGE})])
    server.enqueue(content=FINAL)
    trace = tmp_path / "trace.jsonl"
    a = run(server, db, trace_path=trace)
    assert a.error is None and a.strategy == "arag" and a.answer.startswith("Hold the RESET")
    assert [s.path for s in a.sources] == [RESET_REF] and a.pages_read == [RESET_REF]
    assert a.max_loops_reached is False and a.steps == 3
    assert a.to_json()["metadata"]["max_loops_reached"] is False
    first = server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["keyword_search", "semantic_search", "chunk_read"]
    system = " ".join(first["messages"][0]["content"].split())
    assert "at most 15 steps" in system and "keyword_search" in system
    assert f"1. [{RESET_PAGE}]" in tool_messages(server.requests[1])[0]
    assert "Hold the RESET button" in tool_messages(server.requests[2])[1]
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert [e["tool"] for e in events if e["event"] == "tool"] == ["keyword_search", "chunk_read"]


def test_an_answer_before_any_tool_is_not_accepted(server, db):
    """A weak model answers at once ("To answer this, I'll need to search..."): the first step asks for a tool
    (tool_choice required), a reply without one is sent back once with the instruction to search first."""
    server.enqueue(content="To answer this question, I'll need to search for relevant information.")
    server.enqueue(tool_calls=[("chunk_read", {"paths": RESET_PAGE})])
    server.enqueue(content=FINAL)
    a = run(server, db)
    assert server.requests[0]["tool_choice"] == "required" and server.requests[2]["tool_choice"] == "auto"
    nudge = server.requests[1]["messages"][-1]
    assert nudge["role"] == "user" and "not called any tool yet" in nudge["content"]
    # (a server that answered a "required" turn without a tool is not asked "required" again: llm.py learns it)
    assert a.error is None and a.answer.startswith("Hold the RESET") and a.pages_read == [RESET_REF]


def test_a_model_that_never_calls_a_tool_gets_the_question_searched_for_it(server, db):
    server.set_responder(lambda body: {"content": FINAL} if "tools" not in body
                         else {"content": "The answer is probably in the manual."})
    a = run(server, db)
    assert len([r for r in server.requests if "tools" in r]) == 2  # the answer and the one answer after the nudge
    final = server.requests[-1]
    assert "tools" not in final
    user = final["messages"][1]["content"]
    assert "answered twice without calling a tool" in user and "Hold the RESET button for 10 seconds" in user
    assert a.error is None and a.answer.startswith("Hold the RESET") and a.sources[0].path == RESET_REF
    assert RESET_REF in a.pages_read and a.max_loops_reached is False


def test_a_chunk_read_twice_is_skipped_with_a_note(server, db):
    server.enqueue(tool_calls=[("chunk_read", {"paths": RESET_PAGE})])
    server.enqueue(tool_calls=[("chunk_read", {"paths": RESET_PAGE})])
    server.enqueue(content=FINAL)
    a = run(server, db)
    second = tool_messages(server.requests[2])[1]
    assert "already read for this question; skipped" in second and "Hold the RESET" not in second
    assert a.error is None and a.pages_read == [RESET_REF]


def test_the_step_cap_then_a_best_effort_answer(server, db):
    def always_search(body):
        if "tools" not in body:  # the best-effort call has no tools
            return {"content": FINAL}
        n = len(body["messages"])
        return {"tool_calls": [("keyword_search", {"keywords": f"reset {n}"})] if n % 2
                else [("chunk_read", {"paths": RESET_PAGE})]}

    server.set_responder(always_search)
    a = run(server, db, max_tokens=10**7)
    tool_turns = [r for r in server.requests if "tools" in r]
    assert len(tool_turns) == arag_mod.MAX_LOOPS == 15
    final = server.requests[-1]
    assert "tools" not in final and [m["role"] for m in final["messages"]] == ["system", "user"]
    user = final["messages"][1]["content"]
    assert "step cap (15 steps) is reached" in user and "Hold the RESET button for 10 seconds" in user
    assert "best answer now" in user
    assert a.error is None and a.max_loops_reached is True and a.answer.startswith("Hold the RESET")
    assert a.steps == 16 and a.sources[0].path == RESET_REF
    assert a.confidence < 0.9  # a forced answer is less sure


def test_summarization_gets_22_steps_and_the_summary_prompt(server, db):
    server.set_responder(lambda body: {"content": FINAL} if "tools" not in body
                         else {"tool_calls": [("semantic_search", {"query": "router"})]})
    a = run(server, db, "Summarise what the router guide says about setup.", task="summarization",
            max_tokens=10**7)  # the token guard (--max-tokens) is not what this test is about
    assert len([r for r in server.requests if "tools" in r]) == arag_mod.SUMMARY_MAX_LOOPS == 22
    system = " ".join(server.requests[0]["messages"][0]["content"].split())
    assert "at most 22 steps" in system and "summary of about 200 words" in system
    assert a.max_loops_reached is True
    # without an embedding model the index's search stood in, and the result said so
    assert "the index's search stood in" in tool_messages(server.requests[1])[0]


def test_a_tool_call_written_as_text_is_run(server, db):
    server.enqueue(content=json.dumps({"name": "chunk_read", "arguments": {"paths": RESET_PAGE}}))
    server.enqueue(content=FINAL)
    a = run(server, db)
    assert a.error is None and a.pages_read == [RESET_REF]
    assert "Hold the RESET button" in server.requests[1]["messages"][-1]["content"]


# -- offline ---------------------------------------------------------------------------------------------
def test_offline_runs_the_extractive_engine_over_what_the_tools_returned(db, tmp_path):
    trace = tmp_path / "t.jsonl"
    a = ask("How long do I hold the RESET button?", Settings(db=db), strategy="arag", index=index_for(db),
            trace_path=trace)
    assert a.provider == "offline" and a.strategy == "arag" and a.error is None and not a.refused
    assert a.answer.startswith("[arag offline: no model runs the tool loop")
    assert "10 seconds" in a.answer and a.sources[0].path == RESET_REF
    assert a.to_json()["metadata"]["engine"] == "offline-extractive"
    assert RESET_REF in a.pages_read and a.max_loops_reached is False
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    tools = [e["tool"] for e in events if e["event"] == "tool"]
    assert tools[:2] == ["keyword_search", "semantic_search"] and "chunk_read" in tools
    offline = [e for e in events if e["event"] == "offline"][0]
    assert RESET_PAGE in offline["chunks"]


def test_offline_refuses_when_the_tools_find_nothing_relevant(db):
    a = ask("What is the capital of Mongolia?", Settings(db=db), strategy="arag", index=index_for(db))
    assert a.refused and a.answer.startswith("[arag offline")


def test_arag_is_a_registered_strategy_for_ask_and_batch(db, isolated_env):
    assert "arag" in STRATEGIES
    r = CliRunner().invoke(app, ["ask", "How long do I hold the RESET button?", "--strategy", "arag",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout[r.stdout.index("{"):])
    assert out["metadata"]["strategy"] == "arag" and out["sources"][0]["path"] == RESET_REF
    csv = isolated_env / "q.csv"
    csv.write_text(f"Question,Reference Document\nHow long do I hold the RESET button?,{RESET_REF}\n",
                   encoding="utf-8")
    r = CliRunner().invoke(app, ["batch", str(csv), "--strategy", "arag", "--workers", "1"])
    assert r.exit_code == 0, r.output
    import pandas as pd

    res = pd.read_csv(next((isolated_env / "results").glob("q_results_*[0-9].csv")), encoding="utf-8-sig")
    assert res.loc[0, "Ref Recall"] == 1.0 and bool(res.loc[0, "Max Loops Reached"]) is False
    cols = list(res.columns)
    assert cols.index("Max Loops Reached") == cols.index("Steps") + 1


def test_chat_takes_the_arag_strategy(db):
    import httpx
    from liveserver import LiveServer

    with LiveServer(Settings(db=db, provider="offline", provider_reason="test", cache=False)) as srv:
        r = httpx.post(srv.url + "/chat", json={"query": "How long do I hold the RESET button?", "strategy": "arag"},
                       timeout=120)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["metadata"]["strategy"] == "arag" and body["answer"].startswith("[arag offline")
        assert body["sources"][0]["path"].endswith(RESET_PAGE)


def test_rag_ask_task_summarization_reaches_the_loop(server, db, monkeypatch):
    from fakeserver import TEST_KEY

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    server.enqueue(tool_calls=[("chunk_read", {"paths": RESET_PAGE})])
    server.enqueue(content=FINAL)
    r = CliRunner().invoke(app, ["ask", "Summarise what the router guide says about setup.", "--strategy", "arag",
                                 "--task", "summarization", "--format", "json", "--no-cache"])
    assert r.exit_code == 0, r.output
    system = " ".join(server.requests[0]["messages"][0]["content"].split())
    assert "at most 22 steps" in system and "summary of about 200 words" in system
    assert json.loads(r.stdout)["sources"][0]["path"] == RESET_REF
    assert "Hold the RESET button" in tool_messages(server.requests[1])[0]  # the page was read
    r = CliRunner().invoke(app, ["ask", "x", "--task", "essay"])
    assert r.exit_code == 2 and "unknown task 'essay'" in r.output and "Traceback" not in r.output
