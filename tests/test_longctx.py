"""Strategy longctx: whole candidate documents in the context, cut to the token budget (scripted server)."""

from __future__ import annotations

import json

import pytest
from fakeserver import TEST_KEY, openai_settings
from pagetree import write_pages
from typer.testing import CliRunner

from ragkit.answer import ask
from ragkit.answer import longctx as L
from ragkit.cli import app
from ragkit.core.config import Settings

FILLER = "The compressor hums quietly while the fan moves cold air through the compartments. " * 6
PAGES = {
    "home/fridge/care/page_001.md": ("fridge", "care", 1, "Fridge manual. " + FILLER),
    "home/fridge/care/page_002.md": ("fridge", "care", 2, "Cleaning the shelves. " + FILLER),
    "home/fridge/care/page_003.md": ("fridge", "care", 3, "Replace the water filter every 3 months. " + FILLER),
    "home/fridge/care/page_004.md": ("fridge", "care", 4, "Ice maker: the first ice takes 24 hours. " + FILLER),
    "office/policy/rules/page_001.md": ("policy", "rules", 1, "Passwords must be 14 characters long."),
}
REPLY = json.dumps({"answer": "Every 3 months.", "sources": ["home/fridge/care/page_001.md"], "refused": False})


@pytest.fixture(autouse=True)
def _budget(monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")


def _context(body: dict) -> str:
    user = body["messages"][1]["content"]
    return user.split("\n\n", 2)[2]


def test_budget_is_respected_and_documents_go_in_whole_in_order(isolated_env, scripted_server, monkeypatch):
    db = write_pages(isolated_env / "database", PAGES)
    settings = openai_settings(scripted_server, db=db)
    settings = settings.with_(context_tokens=5000)
    scripted_server.enqueue(content=REPLY)
    a = ask("How often should the fridge water filter be replaced?", settings, strategy="longctx")
    assert a.error is None and a.answer == "Every 3 months." and a.strategy == "longctx"
    ctx = _context(scripted_server.requests[0])
    # the whole fridge document, page after page in reading order, not only the page the search found
    order = [ctx.index(f"home/fridge/care/page_00{n}.md") for n in (1, 2, 3, 4)]
    assert order == sorted(order) and L.CUT_MARK not in ctx
    assert FILLER.strip() in ctx
    assert L.estimate_tokens(ctx) <= 5000
    assert [s.path for s in a.sources] == ["database/home/fridge/care/page_001.md"]
    assert len(scripted_server.requests) == 1 and a.steps == 1

    # a small budget: the context stops at it, the last page is cut and says so
    settings = settings.with_(context_tokens=260)
    scripted_server.enqueue(content=REPLY)
    a = ask("How often should the fridge water filter be replaced?", settings, strategy="longctx")
    ctx = _context(scripted_server.requests[1])
    assert L.estimate_tokens(ctx) <= 260 < L.estimate_tokens(_context(scripted_server.requests[0]))
    assert ctx.endswith(L.CUT_MARK) and "home/fridge/care/page_001.md" in ctx
    assert "home/fridge/care/page_004.md" not in ctx
    assert "The last page is cut" in scripted_server.requests[1]["messages"][1]["content"]


def test_estimate_and_cut():
    assert L.estimate_tokens("") == 0
    assert L.estimate_tokens("abcd" * 10) == 10
    assert L.estimate_tokens("冷蔵庫") == 3 and L.estimate_tokens("냉장고 ab") == 4  # 3 + ceil(3 / 4)
    text = "冷蔵庫の温度 settings " * 50
    for budget in (1, 7, 100):
        assert L.estimate_tokens(L._cut_to(text, budget)) <= budget


def test_cli_context_tokens_flag_wins(isolated_env, scripted_server, monkeypatch):
    write_pages(isolated_env / "database", PAGES)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_API_BASE", scripted_server.base_url)
    monkeypatch.setenv("RAG_CONTEXT_TOKENS", "5000")
    from ragkit.core.config import load_settings

    assert load_settings().context_tokens == 5000 and load_settings(context_tokens=200).context_tokens == 200
    scripted_server.enqueue(content=REPLY)
    r = CliRunner().invoke(app, ["ask", "How often should the fridge water filter be replaced?", "--strategy",
                                 "longctx", "--context-tokens", "200", "--no-cache", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["metadata"]["strategy"] == "longctx"
    assert L.estimate_tokens(_context(scripted_server.requests[0])) <= 200
    r = CliRunner().invoke(app, ["ask", "x", "--strategy", "longctx", "--context-tokens", "0"])
    assert r.exit_code == 2 and "--context-tokens" in r.stderr


def test_offline_longctx_reads_only_the_pages_in_budget_and_says_so(isolated_env):
    db = write_pages(isolated_env / "database", PAGES)
    settings = Settings(db=db, provider="offline", model="offline", cache=False)
    a = ask("How often should the fridge water filter be replaced?", settings, strategy="longctx")
    assert a.answer.startswith("[longctx offline:") and "4 pages of 1 document that fit in 32000 tokens" in a.answer
    assert not a.refused and "every 3 months" in a.answer.lower()
    assert all("/fridge/" in p for p in a.pages_read) and len(a.pages_read) == 4
    # the notice is not judged as a point of the answer (it would lower Checklist Precision)
    from ragkit.evaluate.judges import lexical_checklist

    plain = ask("How often should the fridge water filter be replaced?", settings, strategy="naive")
    items = ["every 3 months"]
    assert lexical_checklist(a.answer, items).n_extra == lexical_checklist(plain.answer, items).n_extra
    # with a budget too small to reach the filter page, it cannot quote it
    settings = settings.with_(context_tokens=120)
    a = ask("How often should the fridge water filter be replaced?", settings, strategy="longctx")
    assert "every 3 months" not in a.answer.lower()
    assert all("page_003" not in p for p in a.pages_read)
