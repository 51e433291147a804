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


def test_rag_demo_with_another_database_and_results_folder(isolated_env):
    """`rag demo --db demodb`: the sample CSV names its pages under ./database; the demo's copy names them under
    the database it was given, so the batch finds them (it stopped with "17 reference page(s) not found")."""
    proc = subprocess.run([sys.executable, "-m", "ragkit.cli", "demo", "--db", "demodb", "--results", "demores"],
                          capture_output=True, text=True, timeout=300, cwd=isolated_env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    work = read_csv(isolated_env / "demores" / "demo" / "sample_questions.csv")
    refs = [r for r in work["Reference Document"] if r]
    assert refs and all(r.startswith("demodb/") for r in refs), refs[:3]
    summary = read_csv(next((isolated_env / "demores").glob("sample_questions_results_*_summary.csv")))
    assert float(summary.loc[summary["Metric"] == "Ref Recall", "Mean"].iloc[0]) > 0.5
    assert not (isolated_env / "database").exists()
