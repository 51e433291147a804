"""Docs that cannot rot: every shell block of the README and docs/ runs on the sample corpus (a block that needs
a model, a server or a cluster says so in a `<!-- docs-test: skip (why) -->` line and is reported as skipped),
the command reference and `--help` name the same options, and every option a shell block uses exists."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_terminal import _commands

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((.+?)\)\s*-->")


def shell_blocks(doc: Path, lang: str = "bash") -> list[tuple[int, str, str | None]]:
    """(line, code, skip reason or None) of every ```bash (or ````lang`) block of `doc`."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == f"```{lang}":
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            above = next((ln for ln in reversed(lines[: start - 1]) if ln.strip()), "")
            m = SKIP.search(above)
            out.append((start, "\n".join(body), m.group(1) if m else None))
        i += 1
    return out


BLOCKS = [(doc, line, code, why) for doc in DOCS for line, code, why in shell_blocks(doc)]
# a ```python block is a script (docs/python.md): run as a file, so that its `__main__` guard is exercised
SCRIPTS = [(doc, line, code, why) for doc in DOCS for line, code, why in shell_blocks(doc, "python")]


def _long(p) -> str:
    return next((o for o in p.opts if o.startswith("--")), p.opts[0])


def _help_options(cmd) -> set[str]:
    return {_long(p) for p in cmd.params if p.param_type_name == "option"}


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    """One folder per document, shared by its blocks in order (a later block uses what an earlier one made):
    the sample corpus, its question CSVs and experiments as `examples/`, and `my-pdfs/` holding the corpus as
    a user's own documents. `uv run X` runs X; `rag` is this checkout's CLI."""
    made: dict[Path, Path] = {}
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "rag").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ragkit.cli "$@"\n')
    (bin_dir / "uv").write_text('#!/bin/sh\n[ "$1" = run ] || { echo "docs test: only `uv run` is '
                                'supported" >&2; exit 2; }\nshift\nexec "$@"\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)

    def get(doc: Path) -> tuple[Path, dict]:
        if doc not in made:
            work = tmp_path_factory.mktemp(doc.stem)
            shutil.copytree(REPO / "examples", work / "examples")
            shutil.copytree(REPO / "examples" / "corpus", work / "my-pdfs")
            made[doc] = work
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_"))}
        env.pop("COLUMNS", None)
        env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", RAG_EMBED="0", PYTHONPATH=str(REPO),
                   RAG_CACHE_DIR=str(made[doc] / ".cache"))
        return made[doc], env

    return get


@pytest.mark.parametrize("doc,line,code,why", BLOCKS,
                         ids=[f"{d.relative_to(REPO)}:{ln}" for d, ln, _, _ in BLOCKS])
def test_every_shell_block_runs(doc, line, code, why, workdirs):
    if why:
        pytest.skip(f"{doc.relative_to(REPO)}:{line}: {why}")
    work, env = workdirs(doc)
    res = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=work, env=env, capture_output=True,
                         text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, (f"{doc.relative_to(REPO)}:{line} failed (exit {res.returncode}):\n{code}\n"
                                 f"--- stdout\n{res.stdout[-2000:]}\n--- stderr\n{res.stderr[-2000:]}")
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("doc,line,code,why", SCRIPTS,
                         ids=[f"{d.relative_to(REPO)}:{ln}" for d, ln, _, _ in SCRIPTS])
def test_every_python_script_runs(doc, line, code, why, workdirs):
    """Report s55-pyuser M1: no page showed ragkit from Python; docs/python.md's script is the pipeline, run here
    as a user saves and runs it (its first line names the file)."""
    if why:
        pytest.skip(f"{doc.relative_to(REPO)}:{line}: {why}")
    work, env = workdirs(doc)
    first = code.splitlines()[0]
    name = first[1:].strip() if first.startswith("#") and first.rstrip().endswith(".py") else f"block_{line}.py"
    (work / name).write_text(code + "\n", encoding="utf-8")
    res = subprocess.run([sys.executable, name], cwd=work, env=env, capture_output=True, text=True, timeout=600,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, (f"{doc.relative_to(REPO)}:{line} failed (exit {res.returncode}):\n"
                                 f"--- stdout\n{res.stdout[-2000:]}\n--- stderr\n{res.stderr[-2000:]}")
    assert "Traceback" not in res.stderr


def test_docs_show_ragkit_from_python():
    assert any(d.name == "python.md" for d, *_ in SCRIPTS)
    assert "(docs/python.md)" in _readme_section("## Documentation")
    assert "(python.md)" in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_command_reference_and_help_agree():
    """docs/commands.md has a section per command whose option table names exactly what `--help` shows."""
    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## rag ([a-z]+(?: [a-z]+)?)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    commands = _commands()
    assert set(sections) == set(commands), f"docs {sorted(sections)} vs --help {sorted(commands)}"
    for name, cmd in commands.items():
        rows = [ln for ln in sections[name].splitlines() if ln.startswith("| `-")]
        documented = {re.findall(r"`(-[-\w]+)`", r.split("|")[1])[-1] for r in rows}
        in_help = _help_options(cmd)
        assert documented == in_help, (f"rag {name}: docs/commands.md names {sorted(documented - in_help)} that "
                                       f"--help lacks, and lacks {sorted(in_help - documented)}")


def test_every_option_a_shell_block_uses_exists():
    commands = _commands()
    seen = 0
    for doc, line, code, _ in BLOCKS:
        for raw in code.replace("\\\n", " ").splitlines():
            raw = re.sub(r"\$\([^)]*\)", "", raw.split(" # ")[0])  # a command substitution is another command
            for m in re.finditer(r"\brag ((?:index )?[a-z]+)\b([^#;&|)]*)", raw):
                name = m.group(1)
                assert name in commands, f"{doc.relative_to(REPO)}:{line}: no command `rag {name}`"
                used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", m.group(2)))
                every = {o for p in commands[name].params if p.param_type_name == "option" for o in p.opts}
                missing = used - every - {"--help"}
                assert not missing, f"{doc.relative_to(REPO)}:{line}: `rag {name}` has no option {sorted(missing)}"
                seen += 1
    assert seen >= 10  # the blocks do call rag


def _readme_section(title: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text[text.index(title):][len(title):].split("\n## ", 1)[0]


def test_the_readme_model_section_gives_the_key_as_it_can_be_given_and_names_the_timeout():
    """Report s52 M6, M7: the README said the key could be set by a flag (there is none, on purpose: a command
    line leaks into shell history and process lists), and its llama.cpp recipe timed out on a CPU model without
    a word about RAG_TIMEOUT (documented only in docs/configuration.md)."""
    section = _readme_section("## With a model")
    key = next(p for p in section.split("\n\n") if "OPENAI_API_KEY` set" in p)
    assert "environment" in key and "`.env`" in key and "(flag" not in key and "no flag" in key
    options = {o for cmd in _commands().values() for p in cmd.params if p.param_type_name == "option" for o in p.opts}
    assert not [o for o in options if "key" in o], "a key flag: the README says there is none"
    recipe = next(code for _, code, why in shell_blocks(REPO / "README.md") if "llama-server" in code)
    assert "RAG_TIMEOUT=" in recipe and "RAG_TIMEOUT" in section.split(recipe)[1]
