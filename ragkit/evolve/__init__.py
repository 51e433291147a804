"""`rag evolve`: seed 003's genetic-algorithm loop that improves texts against an evaluator's hidden preference.

Modules: experiments (the CSV), adapters (dummy / any provider of llm.py), generation (what the generator is
asked; selection), evaluators (rule registry, llm) and rag_evaluators (ragkit's judges, the naive-prompt
example), layout (files, log, token usage), runner (generations, skip/resume, report), script (the pipeline
shell script).
"""

from ragkit.evolve.runner import (
           EvolveReport,
           ExperimentResult,
           run_experiment,
           run_experiments,
)
from ragkit.evolve.script import pipeline_script, write_pipeline_script

__all__ = ["EvolveReport", "ExperimentResult", "pipeline_script", "run_experiment",
           "run_experiments", "write_pipeline_script"]
