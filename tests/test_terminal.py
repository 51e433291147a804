"""What `rag` prints does not depend on the terminal (issue 16): one-line errors at any width, no control
characters from documents or models, help that reads like the README, JSON errors, and an ingest that a
kill cannot leave running. The CLI runs as a real subprocess with a pipe for stdout, as in CI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pymupdf
import pytest
import typer
from fakeserver import interrupted_while_waiting
from pagetree import write_pages
from test_ingest import body_pages, make_pdf

from ragkit.cli import app
from ragkit.core.paths import iter_pages, sanitize_name
from ragkit.core.progress import PlainProgress, progress_bar

REPO = Path(__file__).resolve().parents[1]
ESC_TEXT = "Safe text \x1b[2J cleared \x1b]0;PWNED\x07 and a bell \x07 and C1 \x9b31m end"


def rag(*args: str, env: dict | None = None, columns: str | None = None, timeout: float = 120,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`rag ARGS` as a child process whose stdout and stderr are pipes (no terminal), like CI."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_"))}
    e.pop("COLUMNS", None)
    if columns is not None:
        e["COLUMNS"] = columns
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "ragkit.cli", *args], capture_output=True, text=True,
                          env=e, timeout=timeout, cwd=cwd or Path.cwd(), stdin=subprocess.DEVNULL)


# ------------------------------------------------------------------------------ 1. one line at any width


@pytest.mark.parametrize("columns", [None, "40", "300"])
def test_an_error_is_one_line_whatever_the_width(isolated_env, columns):
    db = isolated_env / ("a-database-folder-with-a-rather-long-name-" * 3)
    write_pages(db, {"d/doc/s/page_001.md": ("doc", "s", 1, "hello world")})
    res = rag("search", "--embed", "--db", str(db), env={"RAG_EMBED": "0"}, columns=columns)
    assert res.returncode == 1, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "RAG_EMBED is off" in lines[0], res.stderr
    assert str(db) in lines[0] and "Traceback" not in res.stderr


@pytest.mark.parametrize("columns", ["40", "300"])
def test_a_usage_error_is_one_line_and_exit_2(isolated_env, columns):
    res = rag("search", "x" * 10, "--format", "yaml-with-a-very-long-name-to-wrap-on-a-narrow-terminal",
              columns=columns)
    assert res.returncode == 2
    assert len(res.stderr.splitlines()) == 1 and "--format must be text or json" in res.stderr


def test_ingest_counts_every_source_and_says_its_failures_on_stderr(isolated_env):
    """Report s54 L2: with 6 sources (4 unchanged, 2 broken) the progress line said `1/1 doc (100%)`, and the
    `failed:` lines went to stdout with the table. The line counts every source given; failures go to stderr."""
    src = isolated_env / "docs" / "c"
    for i in range(4):
        make_pdf(src / f"doc{i}.pdf", body_pages(1))
    assert rag("ingest", "docs", "--workers", "1").returncode == 0
    (src / "broken.pdf").write_text("not a pdf at all", encoding="utf-8")
    (src / "broken.docx").write_text("not a zip either", encoding="utf-8")
    make_pdf(src / "new.pdf", body_pages(1))
    res = rag("ingest", "docs", "--workers", "1")
    assert res.returncode == 1, res.stderr
    progress = [ln for ln in res.stderr.splitlines() if ln.startswith("ingest: ")]
    assert progress and progress[-1].startswith("ingest: 7/7 doc (100%)"), res.stderr
    failed = [ln for ln in res.stderr.splitlines() if ln.startswith("failed: ")]
    assert len(failed) == 2 and "broken.pdf" in "".join(failed) and "broken.docx" in "".join(failed), res.stderr
    assert "failed:" not in res.stdout and "broken.pdf" not in res.stdout, res.stdout


def test_pipes_get_a_few_plain_progress_lines_not_carriage_returns(isolated_env):
    src = isolated_env / "docs" / "c"
    for i in range(8):
        make_pdf(src / f"doc{i}.pdf", body_pages(2))
    res = rag("ingest", "docs", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert "\r" not in res.stderr and "\x1b" not in res.stderr + res.stdout
    progress = [ln for ln in res.stderr.splitlines() if ln.startswith("ingest: ")]
    assert 1 <= len(progress) <= 5, res.stderr
    assert progress[-1].startswith("ingest: 8/8 doc (100%)")


def test_plain_progress_reports_quarters_and_a_stop():
    import io

    buf = io.StringIO()
    bar = progress_bar(total=100, desc="batch", unit="q", file=buf)
    assert isinstance(bar, PlainProgress)  # a StringIO is not a terminal
    for _ in range(60):
        bar.update(1)
    bar.set_postfix_str("Ref Recall 0.50\x1b[2J")
    bar.close()
    lines = [re.sub(r" \[\d+ s\]", "", ln) for ln in buf.getvalue().splitlines()]
    assert lines == ["batch: 25/100 q (25%)", "batch: 50/100 q (50%)",
                     "batch: 60/100 q (60%), Ref Recall 0.50[2J stopped"]


def test_a_resumed_run_does_not_announce_what_was_already_done():
    import io

    buf = io.StringIO()
    with progress_bar(total=4, initial=3, desc="batch", unit="q", file=buf) as bar:
        bar.update(1)
    assert buf.getvalue().splitlines()[0].startswith("batch: 4/4 q (100%)")
    assert len(buf.getvalue().splitlines()) == 1


# ------------------------------------------------------------------- 2. documents cannot drive the terminal


def test_control_characters_never_reach_a_page_file_or_the_terminal(isolated_env):
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 100), "Escape test page about refrigerator defrosting.", fontname="helv", fontsize=11)
    doc.save(isolated_env / "plain.pdf")
    doc.close()
    # a hand-edited page (or a converter we do not control) holding escape sequences
    db = isolated_env / "database"
    res = rag("ingest", "plain.pdf")
    assert res.returncode == 0, res.stderr
    write_pages(db, {"c/evil/s/page_001.md": ("evil\x1b]0;PWNED\x07", "s", 1,
                                              f"Defrosting the refrigerator. {ESC_TEXT}")})
    out = rag("search", "defrosting refrigerator", env={"RAG_EMBED": "0"})
    assert out.returncode == 0, out.stderr
    assert "cleared" in out.stdout
    for ch in ("\x1b", "\x07", "\x9b"):
        assert ch not in out.stdout + out.stderr
    ask = rag("ask", "How is the refrigerator defrosted?", env={"RAG_EMBED": "0"})
    assert ask.returncode == 0, ask.stderr
    assert "\x1b" not in ask.stdout + ask.stderr and "\x07" not in ask.stdout
    # JSON loses them too (issue 33): json.dumps would write "\u001b", which `jq -r` turns back into an ESC
    js = rag("search", "defrosting refrigerator", "--format", "json", env={"RAG_EMBED": "0"})
    assert "\x1b" not in js.stdout and "\\u001b" not in js.stdout and "\\u0007" not in js.stdout
    assert "cleared" in js.stdout
    json.loads(js.stdout)


def test_ingest_removes_control_characters_from_page_text(isolated_env):
    from ragkit.ingest.pages import Job, emit_pages

    db = isolated_env / "database"
    job = Job(src="x.pdf", shown="x.pdf", kind=".pdf", db=str(db), folder="c/x")
    res = emit_pages(job, "Title\x1b[2J", [f"Body {ESC_TEXT}"], ["Sec\x1b]0;t\x07"])
    text = res.texts[0]  # what `rag ingest` writes to res.pages[0]
    assert "Body Safe text [2J cleared ]0;PWNED and a bell  and C1 31m end" in text
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)


# ---------------------------------------------------------------------------------------------- 3. help


def _commands() -> dict:
    """Every command by name, a group's subcommands as "group sub" (`rag index sync`)."""
    out = {}
    for name, cmd in typer.main.get_command(app).commands.items():
        subs = getattr(cmd, "commands", None)
        out.update({f"{name} {s}": c for s, c in subs.items()} if subs else {name: cmd})
    return out


def _options(cmd) -> list:
    # typer 0.29 vendors click (typer._click): its parameters are not `click.Option`s
    return [p for p in cmd.params if p.param_type_name == "option"]


def test_every_option_shows_its_default_and_flags_are_flags():
    from typer._click import Context

    group = typer.main.get_command(app)
    seen = 0
    for name, cmd in _commands().items():
        ctx = Context(cmd, info_name=name, parent=Context(group, info_name="rag"))
        for param in _options(cmd):
            seen += 1
            opts, help_text = param.get_help_record(ctx)
            assert "[default: " in help_text, f"rag {name} {opts}: no default shown in {help_text!r}"
            assert not re.search(r"\w \.(\s|$)", help_text), f"rag {name} {opts}: stray ' .' in {help_text!r}"
            assert "<bool>" not in opts, f"rag {name} {opts}"
            assert not re.search(r"\[default: \(", help_text), help_text
    assert seen > 30


def test_help_in_a_pipe_has_no_boxes_or_stray_fragments():
    for args in ([], ["ingest"], ["search"], ["ask"], ["batch"], ["eval"], ["genqa"], ["demo"]):
        res = rag(*args, "--help", columns="40")
        assert res.returncode == 0, res.stderr
        assert "╭" not in res.stdout and "<bool>" not in res.stdout and "\x1b" not in res.stdout
        assert not re.search(r"\w \.(\s|$)", res.stdout), res.stdout


def test_version():
    from ragkit import __version__

    res = rag("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"ragkit {__version__}"


def test_ctrl_c_on_ask_says_interrupted_and_nothing_about_continuing(isolated_env):
    """Ctrl-C on `rag ask` printed the batch's "interrupted; finished work is on disk, run the same command again to
    continue": one question has no finished work to continue. The command waits on a model that never answers
    when the signal reaches its process group, as Ctrl-C in a terminal does."""

    write_pages(isolated_env / "database", {"d/doc/s/page_001.md": ("doc", "s", 1, "VPN sessions last 8 hours.")})
    done = interrupted_while_waiting(["ask", "How long is a VPN session?"], isolated_env / "cache")
    proc, out, err = done, done.stdout, done.stderr
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "interrupted", err
    assert "run the same command" not in err and "Traceback" not in err and out == "", (out, err)


# --------------------------------------------------------------------------------------------- 4. JSON


def test_json_output_of_a_failure_is_an_object_with_an_error(isolated_env):
    write_pages(isolated_env / "database", {"d/doc/s/page_001.md": ("doc", "s", 1, "VPN sessions last 8 hours.")})
    env = {"OPENAI_API_KEY": "sk-test-SECRET-KEY", "OPENAI_API_BASE": "http://127.0.0.1:9/v1", "RAG_TIMEOUT": "2",
           "RAG_EMBED": "0", "RAG_CACHE_DIR": str(isolated_env / "cache")}
    res = rag("ask", "How long is a VPN session?", "--format", "json", env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["error"] and "SECRET" not in res.stdout + res.stderr
    missing = rag("search", "x", "--db", str(isolated_env / "nope"), "--format", "json")
    assert missing.returncode == 1
    # said once, as docs/commands.md says: the JSON object on stdout, nothing on stderr (report s54 L3)
    assert json.loads(missing.stdout)["error"] and missing.stderr == ""
    assert res.stderr == "" and len(res.stdout.splitlines()) == 1  # a failed answer too


def test_a_path_that_names_no_folder_is_bad_input_said_once(isolated_env):
    """Report s54 L3: `rag search --path nosuch` printed its error twice with --format json (JSON on stdout and the
    line on stderr). A folder that does not exist is unusable input (exit 1, as a --db that does not exist;
    docs/commands.md), not a malformed option (2); with --format json it is the JSON object only."""
    write_pages(isolated_env / "database", {"d/doc/s/page_001.md": ("doc", "s", 1, "VPN sessions last 8 hours.")})
    text = rag("search", "VPN", "--path", "nosuch", env={"RAG_EMBED": "0"})
    assert text.returncode == 1 and text.stdout == ""
    assert text.stderr.splitlines() == ["error: --path 'nosuch': no such folder in database (`rag search` without "
                                        "--path searches everything)"], text.stderr
    js = rag("search", "VPN", "--path", "nosuch", "--format", "json", env={"RAG_EMBED": "0"})
    assert js.returncode == 1 and js.stderr == "", js.stderr
    assert json.loads(js.stdout) == {"error": text.stderr.splitlines()[0].removeprefix("error: ")}
    usage = rag("search", "VPN", "-k", "0", "--format", "json")
    assert usage.returncode == 2 and usage.stderr == "" and "-k must be at least 1" in json.loads(usage.stdout)["error"]


def test_a_failed_answer_in_text_mode_is_one_line_on_stderr_and_nothing_on_stdout(isolated_env):
    """Report s52 L3: `rag ask` printed a model error on stdout (exit 1), so `a=$(rag ask ...)` took the error
    for the answer."""
    write_pages(isolated_env / "database", {"d/doc/s/page_001.md": ("doc", "s", 1, "VPN sessions last 8 hours.")})
    env = {"OPENAI_API_KEY": "sk-test-SECRET-KEY", "OPENAI_API_BASE": "http://127.0.0.1:9/v1", "RAG_TIMEOUT": "2",
           "RAG_EMBED": "0", "RAG_CACHE_DIR": str(isolated_env / "cache")}
    res = rag("ask", "How long is a VPN session?", env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout == "", res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: openai") and "SECRET" not in res.stderr, res.stderr


# -------------------------------------------------------------------------------------------- 5. ingest


def _marked(mark: str) -> list[int]:
    """Processes whose environment holds RAGKIT_TEST_MARK=mark (the child and everything it started)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if f"RAGKIT_TEST_MARK={mark}".encode() in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def _pages(db: Path) -> int:
    return sum(1 for _ in db.rglob("page_*.md")) if db.exists() else 0


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find the workers")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the index analyses pages in processes only with 2+ cores")
@pytest.mark.parametrize("how", ["kill", "interrupt"])
def test_a_killed_index_build_leaves_no_worker_running(isolated_env, how):
    """Thousands of new pages are analysed in worker processes. Ctrl-C ends every worker and prints one line,
    no traceback (a worker's own KeyboardInterrupt used to print one); kill -9 of the command alone takes its
    workers with it. Either way the next search builds a working index."""
    words = "revenue margin turbine valve pressure ledger audit kiln solvent harbour".split()
    pages = {}
    for i in range(6000):
        body = " ".join(f"{words[(i + j) % 10]}{j % 50} section {i} note" for j in range(150))
        pages[f"c/doc{i // 100}/s/page_{i % 100 + 1:03d}.md"] = (f"doc{i // 100}", "s", i % 100 + 1, body)
    db = write_pages(isolated_env / "database", pages)
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_"))}
    env.update(RAGKIT_TEST_MARK=mark, RAG_EMBED="0")
    cmd = [sys.executable, "-m", "ragkit.cli", "search", "turbine7 section 4321", "--db", str(db)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(_marked(mark)) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)  # the command and its two workers
        assert proc.poll() is None, "the index was built before it could be interrupted: give it more pages"
        assert len(_marked(mark)) >= 3, "no worker process was started"
        if how == "kill":
            proc.kill()  # the command alone: its workers must notice and stop
        else:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole process group
        proc.wait(timeout=60)
        if how == "interrupt":
            err = proc.stderr.read().decode()
            assert proc.returncode == 130 and "interrupted" in err, err
            assert "Traceback" not in err and "InvalidStateError" not in err, err
        deadline = time.monotonic() + 10
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _marked(mark) == [], "processes survived the kill"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
    again = subprocess.run(cmd + ["--format", "json"], env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    hits = json.loads(again.stdout)
    assert any(h["path"].endswith("c/doc43/s/page_022.md") for h in hits), hits[:3]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find the workers")
@pytest.mark.parametrize("how", ["kill", "interrupt"])
def test_a_killed_ingest_leaves_no_worker_running(isolated_env, how):
    src = isolated_env / "many" / "c"
    lines = [[(f"Line {j} of a long page about topic {i}.", 9) for j in range(40)] for i in range(60)]
    docs = 16  # enough that a fast machine is still ingesting when the signal arrives (6 were not: 360 of 360)
    for i in range(docs):
        make_pdf(src / f"doc{i}.pdf", lines, font="helv")
    db = isolated_env / "database"
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_"))}
    env["RAGKIT_TEST_MARK"] = mark
    proc = subprocess.Popen([sys.executable, "-m", "ragkit.cli", "ingest", "many", "--workers", "2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _pages(db) == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "ingest finished before it could be killed: give it more pages"
        if how == "kill":
            proc.kill()  # kill -9 of the parent alone: its workers must notice and stop
        else:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole process group
        proc.wait(timeout=60)
        at_kill = _pages(db)
        deadline = time.monotonic() + 10
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _marked(mark) == [], "processes survived the kill"
        # a worker checks its parent before each page goes into place: at most the page it was renaming at
        # that instant (one per worker, 2) completes, and none once the workers are gone
        after = _pages(db)
        assert after - at_kill <= 2, f"{after - at_kill} pages were written after the kill"
        time.sleep(1)
        assert _pages(db) == after, "pages were written after the workers were gone"
        assert at_kill < docs * len(lines)
        if how == "interrupt":
            err = proc.stderr.read().decode()
            assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)


def test_a_repaired_pdf_is_named_in_a_warning(isolated_env):
    good = make_pdf(isolated_env / "src" / "c" / "whole.pdf", body_pages(6))
    data = good.read_bytes()
    # cut at the first object boundary past 60%: MuPDF rebuilds a file cut there, while a cut inside an
    # object may leave it unopenable, and where 60% falls moved by a few bytes on CI's machine
    cut = int(len(data) * 0.6) + re.search(rb"\n\d+ 0 obj", data[int(len(data) * 0.6):]).start()
    (isolated_env / "src" / "c" / "truncated.pdf").write_bytes(data[:cut])
    res = rag("ingest", "src")
    assert res.returncode == 0, res.stderr
    warnings = [ln for ln in res.stdout.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1 and "src/c/truncated.pdf" in warnings[0], res.stdout
    assert "repaired" in warnings[0] and "may be missing" in warnings[0]


def test_an_outline_title_cannot_make_a_hidden_folder(isolated_env):
    make_pdf(isolated_env / "c" / "doc.pdf", body_pages(2), toc=[[1, "../../../../escaped", 1],
                                                                  [1, ".hidden", 2]])
    res = rag("ingest", "c")
    assert res.returncode == 0, res.stderr
    pages = iter_pages(isolated_env / "database")
    assert pages == ["c/doc/escaped/page_001.md", "c/doc/hidden/page_002.md"], pages
    assert all(not part.startswith(".") for p in pages for part in p.split("/"))
    found = rag("search", "本文のテキスト", "--format", "json", env={"RAG_EMBED": "0"})
    assert "database/c/doc/escaped/page_001.md" in [h["path"] for h in json.loads(found.stdout)]


@pytest.mark.parametrize("raw, clean", [("../../x", "x"), (". .hidden. .", "hidden"), ("...", "untitled"),
                                        ("a.b", "a.b"), (" 取扱説明書 ", "取扱説明書")])
def test_no_name_starts_with_a_dot(raw, clean):
    assert sanitize_name(raw) == clean


def test_ignored_files_are_named(isolated_env):
    src = isolated_env / "mixed" / "c"
    make_pdf(src / "doc.pdf", body_pages(1))
    (src / "notes.txt").write_text("x")
    (src / "table.xlsx").write_text("x")
    res = rag("ingest", "mixed")
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("ignored "))
    assert line == "ignored 2 file(s) of other types: mixed/c/notes.txt, mixed/c/table.xlsx", line


def test_a_table_in_a_pipe_does_not_depend_on_columns(isolated_env):
    write_pages(isolated_env / "database", {
        f"category/a-document-with-a-long-name/section {i}/page_00{i}.md":
            ("doc", "s", i, f"Refrigerator defrosting procedure, part {i}.") for i in range(1, 4)})
    narrow = rag("search", "defrosting procedure", columns="40", env={"RAG_EMBED": "0"})
    wide = rag("search", "defrosting procedure", columns="300", env={"RAG_EMBED": "0"})
    assert narrow.returncode == wide.returncode == 0, narrow.stderr
    assert narrow.stdout == wide.stdout
    assert "database/category/a-document-with-a-long-name/section 1/page_001.md" in narrow.stdout


def test_help_shows_argument_names_not_python_types():
    """Usage lines and argument rows read like help: `rag ingest [OPTIONS] SOURCE...`, never `{SOURCE...}...` or
    `<list[Path]>`."""
    for name in _commands():
        res = rag(*name.split(), "--help")
        assert res.returncode == 0, name
        usage = next(ln for ln in res.stdout.splitlines() if ln.startswith("Usage:"))
        assert "{" not in usage and "<" not in usage, usage
        assert not re.search(r"<(?:list\[|int>|str>|Path>|float>|bool>)", res.stdout), (name, res.stdout)
    assert "Usage: rag ingest [OPTIONS] SOURCE...\n" in rag("ingest", "--help").stdout


def test_search_and_ask_name_the_index_backend(isolated_env):
    """Report s54 M2: `rag search` (text and JSON) and `rag ask --format json` did not say which backend searched.
    They name it (the embedded engine here; a cluster's address, prefix and analysis in test_opensearch)."""
    write_pages(isolated_env / "database", {"d/doc/s/page_001.md": ("doc", "s", 1, "VPN sessions last 8 hours.")})
    env = {"RAG_EMBED": "0"}
    text = rag("search", "VPN sessions", env=env)
    assert text.returncode == 0 and "index: embedded" in text.stdout, text.stdout
    hits = json.loads(rag("search", "VPN sessions", "--format", "json", env=env).stdout)
    assert hits and {h["index"] for h in hits} == {"embedded"}
    ask = rag("ask", "How long do VPN sessions last?", "--format", "json", "--provider", "offline", env=env)
    assert ask.returncode == 0 and json.loads(ask.stdout)["metadata"]["index"] == "embedded", ask.stdout
