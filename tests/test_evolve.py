"""`rag evolve` (seed 003): the dummy adapter end to end, skip and resume (a real kill), the 3-attempt stop,
the hidden target, the rule evaluators, a scripted model that learns, the CSV checks and the pipeline script.
Model paths go through the real openai client to the scripted server (tests/fakeserver.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fakeserver import TEST_KEY, openai_settings
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.config import Settings
from ragkit.core.errors import RagError
from ragkit.core.jsonreply import JSON_MAX_TOKENS
from ragkit.evolve import run_experiments
from ragkit.evolve.adapters import GENERATION_MAX_TOKENS
from ragkit.evolve.evaluators import RULE_EVALUATORS, KeywordEvaluator, RegexEvaluator
from ragkit.evolve.experiments import REQUIRED
from ragkit.evolve.score import Evaluator, Score

HEADER = ",".join(REQUIRED)
TASK = "Describe one real Pokemon in one or two sentences."
GEN_SYSTEM = "You write texts for a task"
EVAL_SYSTEM = "You are an evaluator with a hidden preference"
FIRE = ("Charmander", "Charizard", "Vulpix", "Ninetales", "Growlithe", "Arcanine", "Ponyta", "Magmar", "Flareon",
        "Cyndaquil", "Torchic")


def write_csv(path: Path, *rows: str) -> Path:
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def dummy_row(exp_id: str = "dummy", gens: int = 3, k: int = 4, evaluator: str = "rule_regex",
              target: str = "|".join(FIRE)) -> str:
    return f"{exp_id},{gens},{k},none,dummy,{TASK},{target},{evaluator}"


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def role(body: dict) -> str:
    system = body["messages"][0]["content"]
    if system.startswith(GEN_SYSTEM):
        return "generator"
    if system.startswith(EVAL_SYSTEM):
        return "evaluator"
    return "other"


def cli(*args: str):
    return CliRunner().invoke(app, ["evolve", *args])


# -- dummy adapter end to end ---------------------------------------------------------------------------
def test_dummy_run_writes_the_seed_layout(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=3, k=4))
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 0, r.output
    root = isolated_env / "out" / "dummy"
    files = tree(root)
    for n in range(1, 4):
        for i in range(1, 5):
            for f in (f"iter{n}/texts/text{i}.txt", f"iter{n}/input_prompts/prompt_{i}.txt",
                      f"iter{n}/logic/creation_prompt_{i}.txt"):
                assert f in files
        metrics = json.loads((root / f"iter{n}/metrics.json").read_text(encoding="utf-8"))
        assert [m["file"] for m in metrics] == [f"text{i}.txt" for i in range(1, 5)]
        for i, m in enumerate(metrics, 1):
            text = (root / f"iter{n}/texts/text{i}.txt").read_text(encoding="utf-8").strip()
            assert m["reason"] == ""  # rule evaluator
            assert m["score"] == (10.0 if text in FIRE else 0.0)  # the regex evaluator really scored the text
    names = {(root / f"iter{n}/texts/text{i}.txt").read_text().strip() for n in range(1, 4) for i in range(1, 5)}
    assert len(names) > 2  # random Pokemon names, not one constant
    usage = json.loads((root / "logs/token_usage.json").read_text(encoding="utf-8"))
    assert usage["total"]["calls"] == 12 and usage["generator"]["calls"] == 12 and usage["cost_known"]
    assert set(usage["generations"]) == {"0", "1", "2"}
    log = (root / "logs/execution.log").read_text(encoding="utf-8")
    assert "iter3: done" in log and "response:" in log
    logic = (root / "iter2/logic/creation_prompt_1.txt").read_text(encoding="utf-8")
    assert "P1 iter1/text" in logic and "raw reply" in logic
    summary = json.loads((root / "summary.json").read_text(encoding="utf-8"))
    assert summary["complete"] and [g["generation"] for g in summary["generations"]] == [1, 2, 3]
    assert "iter1: best" in r.stdout and "best:" in r.stdout


def test_dummy_llm_evaluator_gives_random_scores_with_a_reason(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=2, k=5, evaluator="llm", target="fire types"))
    assert cli(str(csv), "--results", "out").exit_code == 0
    scores = [m["score"] for n in range(1, 3)
              for m in json.loads((isolated_env / f"out/dummy/iter{n}/metrics.json").read_text())]
    assert all(0 <= s <= 10 for s in scores) and len(set(scores)) > 1


def test_finished_generations_are_skipped_and_more_generations_extend(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=2, k=3))
    assert cli(str(csv), "--results", "out").exit_code == 0
    root = isolated_env / "out" / "dummy"
    before = {f: (root / f).stat().st_mtime_ns for f in tree(root) if f.startswith("iter")}
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 0 and r.stdout.count("skipped") == 2
    assert {f: (root / f).stat().st_mtime_ns for f in before} == before  # nothing rewritten
    write_csv(csv, dummy_row(gens=3, k=3))  # a longer run continues the same experiment
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 0 and r.stdout.count("skipped") == 2 and (root / "iter3/metrics.json").is_file()
    write_csv(csv, dummy_row(gens=3, k=4))  # another k would mix two experiments: refused, nothing touched
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 1 and "different k" in r.output and not (root / "iter1/texts/text4.txt").exists()


def test_until_stops_after_that_generation(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=3, k=2))
    assert cli(str(csv), "--results", "out", "--until", "1").exit_code == 0
    root = isolated_env / "out" / "dummy"
    assert (root / "iter1/metrics.json").is_file() and not (root / "iter2").exists()


# -- resume after a real kill ---------------------------------------------------------------------------
def test_resume_after_kill_keeps_finished_work(scripted_server, isolated_env, tmp_path):
    """A subprocess is killed (SIGKILL) while the server holds back iter2/text2; the next run keeps iter1 and
    iter2/text1 (no request is made for them again) and finishes."""
    gate = threading.Event()
    counter = {"n": 0}

    def responder(body: dict) -> dict:
        user = body["messages"][-1]["content"]
        if "candidate 2 of 2 of the next generation" in user and not gate.is_set():
            return {"content": "late", "delay": 60}
        counter["n"] += 1
        return {"content": f"Text number {counter['n']} about a fire Pokemon" if counter["n"] % 2 else
                f"Text number {counter['n']} about a water Pokemon"}

    scripted_server.set_responder(responder)
    csv = write_csv(isolated_env / "exp.csv", f"kill,3,2,gpt-4o-mini,openai,{TASK},fire,rule_keyword")
    env = {**os.environ, "OPENAI_API_KEY": TEST_KEY, "OPENAI_API_BASE": scripted_server.base_url,
           "RAG_CACHE_DIR": str(tmp_path / "cache"), "RAG_TIMEOUT": "120"}
    cmd = [sys.executable, "-m", "ragkit.cli", "evolve", str(csv), "--results", "out"]
    proc = subprocess.Popen(cmd, cwd=isolated_env, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    root = isolated_env / "out" / "kill"
    try:
        end = time.monotonic() + 120
        while not (root / "iter2/input_prompts/prompt_2.txt").is_file():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "timed out"
            time.sleep(0.05)
        time.sleep(0.3)  # the request for iter2/text2 is now held by the server
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert (root / "iter1/metrics.json").is_file() and (root / "iter2/texts/text1.txt").is_file()
    assert not (root / "iter2/texts/text2.txt").exists() and not (root / "iter2/metrics.json").exists()
    kept = (root / "iter2/texts/text1.txt").read_text(encoding="utf-8")
    requests_before = len(scripted_server.requests)
    gate.set()
    done = subprocess.run(cmd, cwd=isolated_env, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    new = scripted_server.requests[requests_before:]
    assert len(new) == 1 + 2  # iter2/text2, then iter3's two texts: nothing finished was asked again
    assert (root / "iter2/texts/text1.txt").read_text(encoding="utf-8") == kept
    assert "iter1: complete, skipped" in (root / "logs/execution.log").read_text(encoding="utf-8")
    assert json.loads((root / "summary.json").read_text())["complete"]
    usage = json.loads((root / "logs/token_usage.json").read_text())
    assert usage["generator"]["calls"] == 6  # 2 + 1 before the kill (the held call was never answered) + 3


# -- model failures -------------------------------------------------------------------------------------
def test_three_failed_attempts_stop_the_experiment_and_others_still_run(scripted_server, isolated_env):
    for _ in range(3):
        scripted_server.enqueue(status=503)
    csv = write_csv(isolated_env / "exp.csv", f"broken,2,2,gpt-4o-mini,openai,{TASK},fire,rule_keyword",
                    dummy_row("fine", gens=1, k=2))
    settings = openai_settings(scripted_server)
    report = run_experiments(csv, settings, results=isolated_env / "out")
    assert len(scripted_server.requests) == 3 and scripted_server.statuses == [503, 503, 503]
    broken, fine = report.results
    assert broken.error and "3 attempts failed" in broken.error and "iter1" in broken.error
    assert TEST_KEY not in broken.error
    assert not (isolated_env / "out/broken/iter1/metrics.json").exists()
    assert fine.error is None and (isolated_env / "out/fine/iter1/metrics.json").is_file()


def test_cli_exit_1_and_one_line_error(scripted_server, isolated_env, monkeypatch):
    for _ in range(3):
        scripted_server.enqueue(status=500)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_API_BASE", scripted_server.base_url)
    monkeypatch.setenv("RAG_CACHE_DIR", str(isolated_env / "cache"))
    csv = write_csv(isolated_env / "exp.csv", f"broken,2,2,gpt-4o-mini,openai,{TASK},fire,rule_keyword")
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 1 and "Traceback" not in r.output
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "broken: iter1:" in errors[0] and TEST_KEY not in r.output


# -- the hidden target ----------------------------------------------------------------------------------
def test_target_preference_reaches_only_the_evaluator(scripted_server, isolated_env):
    target = "ZEBRA-PREFERENCE-42 loves volcanic creatures"

    def responder(body: dict) -> dict:
        if role(body) == "evaluator":
            user = body["messages"][-1]["content"]
            # the evaluator sees the target, and its reason even repeats it
            score = 9 if "lava" in user.split("Text:", 1)[1] else 2
            return {"content": json.dumps({"score": score, "reason": f"matches {target}? {score > 5}"})}
        n = len(scripted_server.requests)
        return {"content": f"A Pokemon that lives near lava, variant {n}" if n % 3 else f"A calm Pokemon {n}"}

    scripted_server.set_responder(responder)
    csv = write_csv(isolated_env / "exp.csv", f"secret,3,3,gpt-4o-mini,openai,{TASK},{target},llm")
    report = run_experiments(csv, openai_settings(scripted_server), results=isolated_env / "out")
    assert report.errors == []
    roles = [role(b) for b in scripted_server.requests]
    assert roles.count("generator") == 9 and roles.count("evaluator") == 9
    # every reply is capped: a weak local model that loops stops (a 1.5B model wrote 6,000+ tokens without it)
    assert {(w, b.get("max_tokens")) for b, w in zip(scripted_server.requests, roles, strict=True)} == {
        ("generator", GENERATION_MAX_TOKENS), ("evaluator", JSON_MAX_TOKENS)}
    for body, who in zip(scripted_server.requests, roles, strict=True):
        sent = json.dumps(body, ensure_ascii=False)
        assert (target in sent) == (who == "evaluator")  # the check can fail: the evaluator's requests have it
        assert ("ZEBRA" in sent) == (who == "evaluator")
    root = isolated_env / "out" / "secret"
    for rel in tree(root):
        content = (root / rel).read_text(encoding="utf-8")
        if rel.endswith("metrics.json"):
            continue  # the evaluator's own output: its reasons may name the target
        assert "ZEBRA" not in content, rel
    metrics = json.loads((root / "iter1/metrics.json").read_text())
    assert any("ZEBRA" in m["reason"] for m in metrics)
    # later generations see scores, never reasons
    later = [b for b, w in zip(scripted_server.requests, roles, strict=True) if w == "generator"][3:]
    assert later and all("[score " in b["messages"][-1]["content"] and "matches" not in b["messages"][-1]["content"]
                         for b in later)


def test_a_target_echoed_by_the_model_is_redacted_from_the_log(scripted_server, isolated_env):
    scripted_server.set_responder(lambda body: {"content": "I guess you like fire and flame"})
    csv = write_csv(isolated_env / "exp.csv", f"echo,1,1,gpt-4o-mini,openai,{TASK},fire and flame,rule_keyword")
    run_experiments(csv, openai_settings(scripted_server), results=isolated_env / "out")
    log = (isolated_env / "out/echo/logs/execution.log").read_text(encoding="utf-8")
    assert "I guess you like [target]" in log and "fire and flame" not in log


# -- rule evaluators ------------------------------------------------------------------------------------
def test_keyword_evaluator():
    ev = KeywordEvaluator("fire, flame、ＢＬＡＺＥ")
    assert ev.keywords == ["fire", "flame", "blaze"]
    assert ev.evaluate("A FIRE type with a blaze").score == pytest.approx(10 * 2 / 3, abs=1e-3)
    assert ev.evaluate("A water type").score == 0.0
    assert ev.evaluate("fire flame blaze").reason == ""
    assert KeywordEvaluator("炎\nほのお").evaluate("ほのおタイプ").score == 5.0  # one per line, Japanese
    with pytest.raises(RagError):
        KeywordEvaluator(" , ")


def test_regex_evaluator():
    ev = RegexEvaluator("^char\\w+\nfire|flame\n\\d{3}")
    assert ev.evaluate("Charizard is a fire type").score == pytest.approx(10 * 2 / 3, abs=1e-3)
    assert ev.evaluate("Number 006") .score == pytest.approx(10 / 3, abs=1e-3)
    assert ev.evaluate("Squirtle").score == 0.0 and ev.evaluate("x").reason == ""
    with pytest.raises(RagError) as e:
        RegexEvaluator("ok\nsecret[unclosed")
    assert "pattern 2" in str(e.value) and "secret" not in str(e.value)  # never spells the target out


def test_a_new_rule_evaluator_is_one_class_and_one_entry(isolated_env, monkeypatch):
    class LengthEvaluator(Evaluator):
        name = "rule_length"

        def evaluate(self, text: str, *, seed: str = "") -> Score:
            return Score(min(10.0, len(text) / int(self.target)))

    monkeypatch.setitem(RULE_EVALUATORS, "rule_length", LengthEvaluator)
    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=1, k=2, evaluator="rule_length", target="1"))
    assert cli(str(csv), "--results", "out").exit_code == 0
    metrics = json.loads((isolated_env / "out/dummy/iter1/metrics.json").read_text())
    texts = [(isolated_env / f"out/dummy/iter1/texts/text{i}.txt").read_text().strip() for i in (1, 2)]
    assert [m["score"] for m in metrics] == [min(10.0, len(t)) for t in texts]


# -- a scripted model that learns from scores -----------------------------------------------------------
VOCAB = ("water", "fire", "grass", "flame", "rock", "blaze", "ice", "hot")


def learner(body: dict) -> dict:
    """Generation 0: plain texts. Later: take the best-scoring text of the history shown, add the next word of
    VOCAB it lacks (a mutation). It never sees the target; it only reads scores."""
    user = body["messages"][-1]["content"]
    if "first generation" in user:
        i = int(re.search(r"candidate (\d+)", user).group(1))
        return {"content": f"Pokemon number {i}"}
    best = re.findall(r"^\[score ([\d.]+)\] (.*)$", user, re.M)
    top = max(best, key=lambda m: float(m[0]))[1]
    i = int(re.search(r"candidate (\d+) of", user).group(1))
    missing = [w for w in VOCAB if w not in top.split()]
    word = missing[(i - 1) % len(missing)] if missing else "again"
    return {"content": f"{top} {word}"}


def test_best_score_rises_with_a_model_that_learns(scripted_server, isolated_env):
    scripted_server.set_responder(learner)
    csv = write_csv(isolated_env / "exp.csv", f"learn,6,8,gpt-4o-mini,openai,{TASK},\"fire, flame, blaze, hot\","
                                              "rule_keyword")
    report = run_experiments(csv, openai_settings(scripted_server), results=isolated_env / "out")
    assert report.errors == []
    curve = [g["best"] for g in report.results[0].curve]
    # one more target word per generation, learnt from scores alone
    assert curve == [0.0, 2.5, 5.0, 7.5, 10.0, 10.0]


# -- the experiment CSV ---------------------------------------------------------------------------------
def test_a_japanese_experiment_id_is_a_folder_name(isolated_env):
    """'日本語実験' was refused as "not a plain folder name (letters, digits, ...)": letters of any script are
    letters; separators, '..', control characters and device names are still refused."""
    import unicodedata

    csv = write_csv(isolated_env / "exp.csv", dummy_row("日本語実験", gens=1, k=2), dummy_row("실험_1", gens=1, k=1))
    r = cli(str(csv), "--results", "out", "--only", unicodedata.normalize("NFD", "日本語実験"), "--only", "실험_1")
    assert r.exit_code == 0, r.output
    assert (isolated_env / "out/日本語実験/iter1/metrics.json").is_file()
    assert (isolated_env / "out/실험_1/iter1/metrics.json").is_file()
    for bad in ("実験/1", "..", ".隠し", "CON", "実験\x01", "実験.", "実験 1", "-実験"):
        csv = write_csv(isolated_env / "bad.csv", dummy_row(bad))
        r = cli(str(csv), "--results", "bad-out")
        assert r.exit_code == 1 and "row 2, experiment_id:" in r.output and "not a plain folder name" in r.output, bad
        assert "Traceback" not in r.output and not (isolated_env / "bad-out").exists()


@pytest.mark.parametrize("row, expect", [
    (dummy_row(k=0), "row 2, k: must be between 1 and 100"),
    (dummy_row(gens="x"), "row 2, max_generations: must be a whole number"),
    (dummy_row("../up"), "row 2, experiment_id:"),
    (dummy_row(evaluator="magic"), "row 2, evaluator_type: 'magic' is not one of"),
    (dummy_row().replace(",dummy,", ",gemini,"), "row 2, adapter_type: 'gemini'"),
    (dummy_row(target=""), "row 2, target_preference: empty"),
])
def test_bad_experiment_rows_are_one_line_errors(isolated_env, row, expect):
    csv = write_csv(isolated_env / "exp.csv", row)
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 1 and expect in r.output and "Traceback" not in r.output
    assert not (isolated_env / "out").exists()


def test_duplicate_ids_unknown_only_and_missing_columns(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row("a"), dummy_row("a"))
    assert "row 3, experiment_id: 'a' is already used on row 2" in cli(str(csv)).output
    csv = write_csv(isolated_env / "exp.csv", dummy_row("a"))
    r = cli(str(csv), "--only", "b")
    assert r.exit_code == 2 and "--only b: no such experiment_id" in r.output
    (isolated_env / "bad.csv").write_text("experiment_id,k\nx,1\n", encoding="utf-8")
    r = cli(str(isolated_env / "bad.csv"))
    assert r.exit_code == 1 and "missing column" in r.output


def test_only_checks_and_runs_only_the_selected_rows(isolated_env):
    """A bad row the user did not select (`--only`) does not stop the selected one; selected, it is reported."""
    bad_gens = dummy_row("bad_gens").replace(",3,4,", ",two,4,", 1)
    csv = write_csv(isolated_env / "exp.csv", dummy_row("good", gens=1, k=1), bad_gens,
                    "bad id!,1,1,none,dummy,x,y,rule_regex", dummy_row("nope").replace(",dummy,", ",nosuch,", 1))
    r = cli(str(csv), "--results", "out", "--only", "good")
    assert r.exit_code == 0, r.output
    assert (isolated_env / "out/good/iter1/metrics.json").is_file() and not (isolated_env / "out/bad_gens").exists()
    r = cli(str(csv), "--results", "out", "--only", "bad_gens")
    assert r.exit_code == 1 and "row 3, max_generations: must be a whole number, got 'two'" in r.output
    r = cli(str(csv), "--results", "out", "--only", "missing")
    assert r.exit_code == 2 and "--only missing: no such experiment_id" in r.output and "good" in r.output


def test_shift_jis_csv_and_only(isolated_env):
    csv = isolated_env / "exp.csv"
    rows = [dummy_row("a", gens=1, k=1), "b,1,1,none,dummy,実在するポケモンを説明せよ,炎,rule_keyword"]
    csv.write_bytes((HEADER + "\n" + "\n".join(rows) + "\n").encode("cp932"))
    r = cli(str(csv), "--results", "out", "--only", "b")
    assert r.exit_code == 0, r.output
    assert (isolated_env / "out/b/iter1/metrics.json").is_file() and not (isolated_env / "out/a").exists()
    assert "実在するポケモンを説明せよ" in (isolated_env / "out/b/iter1/input_prompts/prompt_1.txt").read_text()


# -- the pipeline script --------------------------------------------------------------------------------
def test_pipeline_script_runs_every_step_and_never_overwrites(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row("a", gens=2, k=2), dummy_row("b", gens=1, k=1))
    r = cli(str(csv), "--results", "out", "--script", "run.sh")
    assert r.exit_code == 0, r.output
    script = isolated_env / "run.sh"
    text = script.read_text(encoding="utf-8")
    assert os.access(script, os.X_OK) and text.startswith("#!/usr/bin/env bash") and "set -eu" in text
    steps = [ln for ln in text.splitlines() if ln.startswith("$RAG evolve")]
    assert len(steps) == 3 and steps[1].endswith("--only a --until 2") and steps[2].endswith("--only b --until 1")
    assert not (isolated_env / "out").exists()  # writing the script runs nothing
    env = {**os.environ, "RAG": f"{sys.executable} -m ragkit.cli"}
    for _ in range(2):  # the second run only skips
        done = subprocess.run(["bash", str(script)], cwd="/", env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert (isolated_env / "out/a/iter2/metrics.json").is_file() and (isolated_env / "out/b/iter1/metrics.json").is_file()
    assert "skipped" in done.stdout
    r = cli(str(csv), "--script", "run.sh")
    assert r.exit_code == 1 and "already exists" in r.output and script.read_text(encoding="utf-8") == text


def test_pipeline_script_without_rag_fails_and_says_how_to_run_it(isolated_env):
    """In a clone `rag` is not on PATH: the script printed 'rag: command not found' and a tester saw exit 0.
    It stops before any step, non-zero, naming RAG="uv run rag", under bash and sh alike; a failing step
    stops it too."""
    csv = write_csv(isolated_env / "exp.csv", dummy_row("a", gens=2, k=1))
    assert cli(str(csv), "--results", "out", "--script", "run.sh").exit_code == 0
    bare = {k: v for k, v in os.environ.items() if k != "RAG"} | {"PATH": "/usr/bin:/bin"}
    for shell in ("bash", "sh"):
        done = subprocess.run([shell, "run.sh"], cwd=isolated_env, env=bare, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 127 and 'RAG="uv run rag" bash run.sh' in done.stderr, (shell, done.stderr)
    failing = bare | {"RAG": f"{sys.executable} -m ragkit.cli --no-such-option"}
    done = subprocess.run(["bash", "run.sh"], cwd=isolated_env, env=failing, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and not (isolated_env / "out").exists(), done.stderr


# -- ragkit's judges as evaluators ----------------------------------------------------------------------
def test_ragkit_checklist_evaluator_with_the_dummy_adapter_uses_the_lexical_judge(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=1, k=3, evaluator="ragkit_checklist",
                                                        target="\"Fire type\nevolves into Charmeleon\""))
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 0, r.output
    metrics = json.loads((isolated_env / "out/dummy/iter1/metrics.json").read_text())
    assert all(m["score"] == 0.0 and "0/2 checklist items covered" in m["reason"] and "lexical" in m["reason"]
               for m in metrics)  # a bare Pokemon name covers neither key point


def test_settings_default_results_folder(isolated_env):
    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=1, k=1))
    report = run_experiments(csv, Settings(results=isolated_env / "res"))
    assert report.errors == [] and (isolated_env / "res/dummy/iter1/metrics.json").is_file()


# -- the worked example: evolving the naive strategy's answer prompt -----------------------------------------
def test_ragkit_naive_scores_prompts_by_checklist_and_reports_the_holdout(scripted_server, sample_db_copy,
                                                                        isolated_env, repo_root):
    """Prompts are scored by answering the training questions with `naive` under each prompt and judging the
    answers' checklists; the best prompt and the built-in one are then scored on held-out questions."""
    naive_systems: list[str] = []

    def responder(body: dict) -> dict:
        messages = body["messages"]
        system, user = messages[0]["content"], messages[-1]["content"]
        if system.startswith(GEN_SYSTEM):
            if "candidate 2 of 2 in the first generation" in user:
                return {"content": "Quote every figure exactly. STYLE-NUMBERS"}
            return {"content": "Answer briefly."}
        if body.get("response_format"):  # the checklist judge
            n = int(re.search(r"Checklist \((\d+) items\)", user).group(1))
            good = "GOOD" in user.split("Answer:", 1)[1].split(">>>", 1)[0]
            return {"content": json.dumps({"items": [{"item": j, "covered": good, "evidence": "e"}
                                                     for j in range(1, n + 1)], "extra_points": []})}
        naive_systems.append(system)  # a naive answer: good only under the prompt that asks for figures
        answer = "GOOD 2℃" if "STYLE-NUMBERS" in system else "meh"
        return {"content": json.dumps({"answer": answer, "sources": [], "refused": False})}

    scripted_server.set_responder(responder)
    examples = repo_root / "examples" / "evolve"
    train = isolated_env / "train.csv"
    from ragkit.core.csvio import read_csv

    rows = read_csv(examples / "naive_train.csv")
    rows.iloc[[0, 3]].to_csv(train, index=False)  # one Japanese, one English answerable question
    holdout = isolated_env / "holdout.csv"
    read_csv(examples / "naive_holdout.csv").iloc[[0]].to_csv(holdout, index=False)
    csv = isolated_env / "exp.csv"
    csv.write_text(HEADER + ",holdout_csv\n" + f"naive,2,2,gpt-4o-mini,openai,Write instructions for answering "
                   f"questions from document pages.,{train},ragkit_naive,{holdout}\n", encoding="utf-8")
    report = run_experiments(csv, openai_settings(scripted_server, db=Path("database")),
                             results=isolated_env / "out")
    root = isolated_env / "out" / "naive"
    assert report.errors == [], report.errors
    m0 = json.loads((root / "iter1/metrics.json").read_text(encoding="utf-8"))
    assert [m["score"] for m in m0] == [0.0, 10.0]
    assert "Checklist F1 1.000 over 2 question(s)" in m0[1]["reason"]
    # the evolved text replaced the naive instructions; the rules and reply format stayed
    evolved = [s for s in naive_systems if s.startswith("Quote every figure exactly. STYLE-NUMBERS")]
    assert evolved and all("Reply with only this JSON object" in s for s in evolved)
    assert any(s.startswith("You answer a question from the document pages") for s in naive_systems)  # built-in
    held = json.loads((root / "holdout.json").read_text(encoding="utf-8"))
    assert held["holdout_best"]["score"] == 10.0 and held["holdout_builtin_prompt"]["score"] == 0.0
    assert held["train_builtin_prompt"]["score"] == 0.0
    assert report.results[0].best["score"] == 10.0
    usage = json.loads((root / "logs/token_usage.json").read_text(encoding="utf-8"))
    assert usage["evaluator"]["calls"] > 0 and "holdout" in usage["generations"]


def test_the_example_csv_runs_its_dummy_row_and_explains_the_rest_without_a_key(isolated_env, repo_root):
    r = cli(str(repo_root / "examples/experiments.csv"), "--results", "out")
    assert r.exit_code == 1  # the openai rows need a key or a server
    assert (isolated_env / "out/pokemon_dummy/iter3/metrics.json").is_file()
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 4 and all("needs OPENAI_API_KEY" in e for e in errors)
    assert not (isolated_env / "out/pokemon_fire").exists()


def test_a_run_started_with_iter0_resumes_in_its_own_numbering(isolated_env):
    """Runs made before generations were numbered from 1 (iter0, iter1, ...) are resumed, not restarted."""
    import shutil

    csv = write_csv(isolated_env / "exp.csv", dummy_row(gens=3, k=2))
    assert cli(str(csv), "--results", "out", "--until", "2").exit_code == 0
    root = isolated_env / "out" / "dummy"
    # make it an old run: iter1, iter2 -> iter0, iter1
    for old, new in ((1, 0), (2, 1)):
        shutil.move(root / f"iter{old}", root / f"iter{new}")
    kept = (root / "iter1/texts/text1.txt").read_text(encoding="utf-8")
    r = cli(str(csv), "--results", "out")
    assert r.exit_code == 0, r.output
    assert (root / "iter2/metrics.json").is_file() and not (root / "iter3").exists()
    assert (root / "iter1/texts/text1.txt").read_text(encoding="utf-8") == kept
    log = (root / "logs/execution.log").read_text(encoding="utf-8")
    assert "iter0: complete, skipped" in log and "iter1: complete, skipped" in log and "iter2: done" in log


def test_rag_evolve_shows_the_indexing_of_a_fresh_database(scripted_server, isolated_env, monkeypatch):
    """ragkit_naive's index is opened by the evaluator, a library call quiet by default: on a fresh database of
    over 200 pages `rag evolve` showed no "indexing pages" line. The command asks for its progress."""
    from pagetree import write_pages

    def responder(body: dict) -> dict:
        system = body["messages"][0]["content"]
        if system.startswith(GEN_SYSTEM):
            return {"content": "Answer briefly."}
        if body.get("response_format"):  # the checklist judge
            return {"content": json.dumps({"items": [{"item": 1, "covered": True, "evidence": "e"}],
                                           "extra_points": []})}
        return {"content": json.dumps({"answer": "14 characters", "sources": [], "refused": False})}

    scripted_server.set_responder(responder)
    write_pages(isolated_env / "database", {f"policies/d/s/page_{i:03d}.md": ("d", "s", i, f"Pump {i} runs daily.")
                                            for i in range(1, 202)})
    train = isolated_env / "train.csv"
    train.write_text("Question,Checklist\nHow often does pump 7 run?,daily\n", encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_API_BASE", scripted_server.base_url)
    monkeypatch.setenv("RAG_CACHE_DIR", str(isolated_env / "cache"))
    csv = write_csv(isolated_env / "exp.csv", f"naive,1,1,gpt-4o-mini,openai,Write instructions.,{train},ragkit_naive")
    r = cli(str(csv), "--results", "out", "--db", "database")
    assert r.exit_code == 0, r.output
    assert "indexing pages" in r.stderr, r.stderr
