"""The smaller hostile-input cases of issue 33: control characters in JSON output and in the HTML report, usage
errors of the parser as one line, --workers at least 1 everywhere, NUL refused in questions sent to the server."""

from __future__ import annotations

import json
import re

import pytest
from liveserver import LiveServer
from pagetree import write_pages
from test_serve import offline, post
from test_terminal import ESC_TEXT, rag

CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
ESCAPED = re.compile(r"\\u00[01][0-9a-fA-F]|\\u007[fF]|\\u00[89][0-9a-fA-F]")  # json.dumps' form of them


def _db_with_escapes(root):
    """A hand-edited page whose text holds escape sequences (ingest strips them; a user's editor does not)."""
    return write_pages(root / "database", {
        "c/evil/s/page_001.md": ("evil\x1b]0;PWNED\x07", "s", 1, f"Defrosting the refrigerator. {ESC_TEXT}")})


def _no_controls(text: str) -> None:
    assert not CONTROLS.search(text.replace("\n", "").replace("\t", "")), repr(text[:300])
    escaped = [m for m in ESCAPED.findall(text) if m.lower() not in ("\\u000a", "\\u0009")]
    assert not escaped, escaped


def test_ask_json_carries_no_control_characters(isolated_env):
    """Before: `answer` kept the ESC sequences as \\u001b, and `jq -r .answer` wrote them to the terminal."""
    _db_with_escapes(isolated_env)
    res = rag("ask", "How is the refrigerator defrosted?", "--provider", "offline", "--format", "json",
              env={"RAG_EMBED": "0"})
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert "cleared" in res.stdout  # the page's text is there, without its escape sequences
    _no_controls(res.stdout)
    for value in (out["answer"], *(s["excerpt"] for s in out["sources"]), *(s["title"] for s in out["sources"])):
        assert not CONTROLS.search(value.replace("\n", "")), value


def test_search_and_compare_json_carry_no_control_characters(isolated_env):
    _db_with_escapes(isolated_env)
    res = rag("search", "defrosting refrigerator", "--format", "json", env={"RAG_EMBED": "0"})
    assert res.returncode == 0 and "cleared" in res.stdout, res.stderr
    _no_controls(res.stdout)
    q = f"Why? {ESC_TEXT}"
    for name, recall in (("old.csv", "0"), ("new.csv", "1")):
        (isolated_env / name).write_text(f'Question,RAG Answer,Ref Recall\n"{q}","{ESC_TEXT}",{recall}\n',
                                         encoding="utf-8")
    res = rag("compare", "old.csv", "new.csv", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert "cleared" in res.stdout
    _no_controls(res.stdout)


def test_the_html_report_carries_no_control_characters(isolated_env):
    """Before: one raw ESC byte reached the report."""
    (isolated_env / "run.csv").write_text(
        f'Question,RAG Answer,Ground Truth,Ref Recall,Retrieved Files\n"Why? {ESC_TEXT}","{ESC_TEXT}",'
        f'"{ESC_TEXT}",1,"a/b\x1b[2J.md"\n', encoding="utf-8")
    res = rag("report", "run.csv", "-o", "report.html")
    assert res.returncode == 0, res.stderr
    html = (isolated_env / "report.html").read_text(encoding="utf-8")
    assert "cleared" in html
    assert not CONTROLS.search(html.replace("\n", "").replace("\t", "").replace("\r", ""))


@pytest.mark.parametrize("args,line", [
    (["batch", "q.csv", "--strategy", "search", "-k", "0"], "error: -k must be at least 1, got 0"),
    (["search", "pumps", "-k", "0"], "error: -k must be at least 1, got 0"),
    (["ingest", "--bogus", "x.pdf"], "error: No such option: --bogus (see rag ingest --help)"),
    (["batch"], "error: Missing argument 'INPUT.csv'. (see rag batch --help)"),
    (["search", "pumps", "-k", "many"], None),
    (["frobnicate"], "error: No such command 'frobnicate'. (see rag --help)"),
])
def test_a_usage_error_of_any_kind_is_one_line_and_exit_2(isolated_env, args, line):
    """Before: `rag batch --strategy search -k 0` printed click's 3-line usage block, where `rag search -k 0`
    printed one line."""
    (isolated_env / "q.csv").write_text("Question\nWhat?\n")
    res = rag(*args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    if line:
        assert lines[0] == line
    assert "Usage:" not in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("command", ["ingest", "batch", "eval"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_workers_is_at_least_one_everywhere(isolated_env, command, value):
    """Before: `rag ingest --workers 0` and `--workers -1` exited 0 saying nothing."""
    (isolated_env / "q.csv").write_text("Question,RAG Answer\nWhat?,x\n")
    target = {"ingest": "doc.pdf", "batch": "q.csv", "eval": "q.csv"}[command]
    res = rag(command, target, "--workers", value)
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[-1] == f"error: --workers must be at least 1, got {value}"
    res = rag(command, target, env={"RAG_WORKERS": value})
    assert res.returncode == 2 and res.stderr.splitlines()[-1].startswith("error: RAG_WORKERS must be at least 1")


def test_a_nul_in_a_question_to_the_server_is_refused(sample_db_copy):
    with LiveServer(offline(sample_db_copy)) as srv:
        r = post(srv.url + "/chat", json={"query": "Is MFA\x00 required?"})
        assert r.status_code == 422 and r.json() == {"error": "query: contains a NUL character"}
        r = post(srv.url + "/chat", json={"query": "Is multi-factor authentication required for VPN access?"})
        assert r.status_code == 200
