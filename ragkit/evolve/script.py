"""The seed's pipeline script: a shell script with one idempotent step per experiment and generation.

Each step is `rag evolve CSV --only ID --until N`: a finished generation is skipped, so the script can be run
again after any failure and continues where it stopped; a failing step (or a missing `rag`) stops it with a
non-zero exit status. `RAG` overrides the command (e.g. RAG="uv run rag").
"""

from __future__ import annotations

import os
import shlex
from datetime import UTC, datetime
from pathlib import Path

from ragkit.core.errors import RagError
from ragkit.core.paths import atomic_write_text
from ragkit.evolve.runner import load


def pipeline_script(csv_path: Path, *, results: Path, only: list[str] | None = None,
                    workdir: Path | None = None, encoding: str | None = None) -> str:
    experiments = load(Path(csv_path), only, encoding)
    enc = f" --encoding {shlex.quote(encoding)}" if encoding else ""
    q = shlex.quote
    lines = [
        "#!/usr/bin/env bash",
        f"# Written by `rag evolve {csv_path} --script` at "
        f"{datetime.now(UTC).isoformat(timespec='seconds')}.",
        "# One step per experiment generation; every step is idempotent (finished generations are skipped),",
        "# so after a failure fix the cause and run this script again.",
        "# In a clone without `rag` installed: RAG=\"uv run rag\" bash THIS_SCRIPT",
        "set -eu  # the first failing step stops the script with its exit status",
        f"cd {q(str((workdir or Path.cwd()).absolute()))}",
        'RAG=${RAG:-rag}',
        'command -v "${RAG%% *}" >/dev/null 2>&1 || { echo "$0: ${RAG%% *}: command not found; install it '
        '(uv tool install .) or run RAG=\\"uv run rag\\" bash $0" >&2; exit 127; }',
    ]
    for exp in experiments:
        lines.append("")
        lines.append(f"# {exp.experiment_id}: {exp.max_generations} generation(s) of {exp.k}, "
                     f"{exp.adapter_type}/{exp.model_name}, evaluator {exp.evaluator_type}")
        for n in range(exp.max_generations):
            lines.append(f"$RAG evolve {q(str(csv_path))} --results {q(str(results))} "
                         f"--only {q(exp.experiment_id)} --until {n + 1}{enc}")
    return "\n".join(lines) + "\n"


def write_pipeline_script(csv_path: Path, script: Path, *, results: Path, only: list[str] | None = None,
                          encoding: str | None = None) -> Path:
    """Write the script (executable); an existing file is never replaced."""
    script = Path(script)
    if script.is_dir():
        raise RagError(f"{script}: is a folder; name a file for the script (nothing was written)")
    if script.exists():
        raise RagError(f"{script}: already exists; remove it or choose another name (nothing was written)")
    text = pipeline_script(csv_path, results=results, only=only, encoding=encoding)
    atomic_write_text(script, text)
    os.chmod(script, 0o755)
    return script
