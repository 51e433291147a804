"""The README's first command, as a new user runs it: `rag demo` in an empty folder, offline."""

from __future__ import annotations

import subprocess
import sys

from ragkit.core.csvio import read_csv


def test_rag_demo_runs_the_quick_start_offline(isolated_env):
    proc = subprocess.run([sys.executable, "-m", "ragkit.cli", "demo"], capture_output=True, text=True,
                          timeout=300, cwd=isolated_env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "offline" in proc.stdout
    summaries = list((isolated_env / "results").glob("sample_questions_results_*_summary.csv"))
    assert len(summaries) == 1
    summary = read_csv(summaries[0])
    recall = summary.loc[summary["Metric"] == "Ref Recall", "Mean"].iloc[0]
    assert float(recall) > 0.5  # the sample questions' pages are found, offline
    assert any((isolated_env / "database").rglob("page_*.md"))
