"""The package's layering, read from the source: imports run one way, from later stages to earlier ones, and no
module imports itself through a circle. Every import statement counts, including those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragkit

ROOT = Path(ragkit.__file__).parent

# The pipeline's stages, earliest first (docs/architecture.md draws them). A module may import its own stage and
# earlier ones.
STAGES = ["core", "ingest", "search", "answer", "optimize", "evaluate", "reports", "genqa", "evolve", "serve",
          "cli"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The ragkit module a dotted import name refers to (a name inside a module is that module)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Every ragkit module that `module` imports, anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}") or _resolve(base)
                if target:
                    out.add(target)
        elif isinstance(node, ast.Import):
            out.update(t for a in node.names if (t := _resolve(a.name)))
    out.discard(module)
    return out


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def stage_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:  # ragkit/__init__.py: the version only
        return 0
    assert parts[1] in STAGES, f"{module}: a top-level room the layering does not know; add it to STAGES"
    return STAGES.index(parts[1])


def test_every_room_has_a_stage():
    for module in MODULES:
        stage_of(module)


def test_no_import_from_a_later_stage():
    wrong = sorted(f"{m} imports {t} ({STAGES[stage_of(t)]} comes after {STAGES[stage_of(m)]})"
                   for m, targets in GRAPH.items() for t in targets if stage_of(t) > stage_of(m))
    assert not wrong, "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_metrics_import_no_model_code():
    """A metric is a pure function of the row: it imports neither a provider nor a judge nor a strategy."""
    banned = ("ragkit.core.llm", "ragkit.evaluate.judges", "ragkit.answer")
    for module in [m for m in MODULES if m.startswith(("ragkit.evaluate.metrics", "ragkit.evaluate.rankmetrics"))]:
        assert not [t for t in GRAPH[module] if t.startswith(banned)], module


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_a_wall(module):
    """No room over about 600 lines: a module that outgrows it holds more than one concept."""
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= 650, f"{module}: {lines} lines"
