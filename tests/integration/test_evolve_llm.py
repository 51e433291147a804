"""`rag evolve` on a real model (the `llm` suite: skipped unless RAG_TEST_BASE_URL is set).

    eval "$(../shared/local-llm/serve.sh)"
    RAG_TEST_BASE_URL=$OPENAI_API_BASE uv run pytest -m llm tests/integration/test_evolve_llm.py -s

Tiny on purpose (2 generations of 2 texts, a rule evaluator: 4 model calls): it proves the generator path on a
real server, the layout and the token accounting, and prints the score curve. A 1.5B model is not expected to
learn the preference in two generations, so the curve is shown, not asserted.
"""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from ragkit.cli import app

BASE_URL = os.environ.get("RAG_TEST_BASE_URL", "").strip()
MODEL = os.environ.get("RAG_TEST_MODEL", "").strip() or "qwen2.5-coder-1.5b"

pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(not BASE_URL, reason="RAG_TEST_BASE_URL is not set: needs a real OpenAI-compatible server "
                                            "(../shared/local-llm/serve.sh)"),
]
TARGET = "fire, flame, burn, hot, blaze"


def test_two_generations_on_a_real_model(isolated_env, monkeypatch):
    for k, v in {"OPENAI_API_BASE": BASE_URL, "OPENAI_API_KEY": os.environ.get("RAG_TEST_API_KEY") or "sk-local",
                 "RAG_TIMEOUT": os.environ.get("RAG_TEST_TIMEOUT", "900")}.items():
        monkeypatch.setenv(k, v)
    csv = isolated_env / "exp.csv"
    csv.write_text("experiment_id,max_generations,k,model_name,adapter_type,task_definition,target_preference,"
                   f"evaluator_type\nreal,2,2,{MODEL},openai,Describe one real Pokemon in one or two sentences.,"
                   f"\"{TARGET}\",rule_keyword\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["evolve", str(csv), "--results", "out", "--no-cache"])
    assert r.exit_code == 0, r.output
    print(r.stdout)
    root = isolated_env / "out" / "real"
    for n in (1, 2):  # generation n is iter{n}, as the evolution spec lays it out
        metrics = json.loads((root / f"iter{n}/metrics.json").read_text(encoding="utf-8"))
        assert len(metrics) == 2 and all(0 <= m["score"] <= 10 for m in metrics)
        for i in (1, 2):
            text = (root / f"iter{n}/texts/text{i}.txt").read_text(encoding="utf-8").strip()
            assert text  # the model wrote something
            prompt = (root / f"iter{n}/input_prompts/prompt_{i}.txt").read_text(encoding="utf-8")
            assert "fire" not in prompt.split("Earlier texts")[0].lower()  # the task part never names the target
            assert TARGET not in prompt
    usage = json.loads((root / "logs/token_usage.json").read_text(encoding="utf-8"))
    assert usage["generator"]["calls"] == 4 and usage["generator"]["output_tokens"] > 0
    assert TARGET not in (root / "logs/execution.log").read_text(encoding="utf-8")
