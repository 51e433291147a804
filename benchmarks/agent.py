"""Benchmark of `rag ask`: the agent's own (non-LLM) overhead and the offline engine's quality.

Prints ONE JSON line:

- ``overhead``: the `agent` strategy (ragkit.answer.agent.ask) answering the sample questions against a zero-latency
  scripted OpenAI-compatible server (tests/fakeserver.py) that plays list_dir -> search -> read_page ->
  answer. The server answers at once, so the wall time per question is ragkit's overhead: prompts, tools,
  index searches, page reads, the real `openai` client and HTTP on 127.0.0.1. p50/p95 in ms.
- ``sample``: the offline engine on examples/questions.csv (pages cited, refusals, multi-page coverage).
- ``mmlongbench``: the offline engine on ../shared/bench/mmlongbench-doc (73 PDFs ingested into one
  database; questions.jsonl): page recall (any required page cited; share of required pages cited),
  retrieval ceiling (any required page among the pages examined), Contain-Match (seed 004: the normalised
  ground truth is a substring of the normalised answer; for a list answer every item must be), refusal
  accuracy on the unanswerable questions, answered rate on the answerable ones, latency. Skipped with a
  message when the benchmark folder is absent.

    uv run python benchmarks/agent.py [--limit N] [--repeat R] [--db-dir DIR] [--skip-mm] [--skip-overhead]

--db-dir keeps the ingested MMLongBench database between runs (default: a temporary folder, removed).

With a real model (``--base-url``) it measures the model path instead, on MMLongBench-Doc, and prints one JSON
line per strategy plus a final one:

    uv run python benchmarks/agent.py --base-url http://127.0.0.1:8088/v1 --model qwen2.5-coder-1.5b \
        --limit 20 [--unanswerable 5] [--strategies agent,naive] [--max-steps 6] [--page-chars 3000] [--ids A,B] \
        [--start-pages 0]

``--limit N`` questions: N - U answerable ones whose evidence is text (this ingest reads no images), spread
evenly over the file, and U unanswerable ones (``--unanswerable``, default a quarter). Per strategy: page
recall (a required page cited; the pages read too), Contain-Match, both together (a right page cited and
an answer holding the ground truth: ``right_page_and_answer``), refusals of answerable and unanswerable
questions, agent fallbacks (to naive's pages), re-reads (the agent refused, the reading of its start pages
answered) and unconfirmed answers (the agent answered, the reading refused), steps, tokens and seconds per
question. ``--page-chars`` cuts the page text every
strategy is given (the tools' results and naive/synth's pages alike) so a small local model's context and
speed allow the run; the JSON says which cut was used. ``--start-pages N`` starts the agent with the question
searched and its top N pages read (RAG_START_PAGES; default 5; 0 starts it from the bare tree). Per-question lines go to stderr as they finish.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from benchdata import shared_bench  # noqa: E402

BENCH = shared_bench()
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # fakeserver.ScriptedServer

from ragkit.answer.extractive import answer_offline  # noqa: E402
from ragkit.core.csvio import read_csv, split_multi  # noqa: E402
from ragkit.core.pagefile import parse_page  # noqa: E402
from ragkit.core.paths import resolve_in_db, strip_db_prefix  # noqa: E402
from ragkit.evaluate.judges import answer_text_for_judging  # noqa: E402
from ragkit.ingest import ingest_sources  # noqa: E402
from ragkit.search import open_index  # noqa: E402


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    i = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return round(s[i], 2)


def ratio(num: float, den: float) -> float | None:
    return round(num / den, 4) if den else None


def sample_questions() -> list[dict]:
    df = read_csv(REPO / "examples" / "questions.csv")
    return [{k: ("" if v != v or v is None else str(v)) for k, v in r.items()} for r in df.to_dict("records")]


# -- 1. agent overhead against a zero-latency scripted server ------------------------------------------
def _responder(question_paths: dict):
    """list_dir -> search -> read_page (the first page the search returned) -> final JSON answer."""

    def respond(body: dict) -> dict:
        msgs = body.get("messages", [])
        tools = [m for m in msgs if m.get("role") == "tool"]
        question = next((m.get("content") for m in msgs if m.get("role") == "user"), "") or ""
        if not body.get("tools"):  # a forced final call without tools: answer from what was given
            return {"content": json.dumps({"answer": "(scripted) budget answer", "sources": [], "refused": False})}
        if len(tools) == 0:
            return {"tool_calls": [("list_dir", {"path": ""})]}
        if len(tools) == 1:
            return {"tool_calls": [("search", {"query": str(question)[:200]})]}
        if len(tools) == 2:
            # search lines look like "1. a/b c/page_004.md (page 4, score 1.234) — title"
            found = re.findall(r"^\d+\. (.+?\.md) \(page", tools[-1].get("content") or "", re.M)
            question_paths[question] = found[0] if found else ""
            if found:
                return {"tool_calls": [("read_page", {"path": found[0]})]}
        path = question_paths.get(question, "")
        return {"content": json.dumps({"answer": "(scripted) the answer", "sources": [path] if path else [],
                                       "refused": False}, ensure_ascii=False)}

    return respond


def bench_overhead(db: Path, questions: list[str], repeat: int) -> dict:
    try:
        from fakeserver import ScriptedServer, openai_settings

        from ragkit.answer import ask
    except Exception as e:  # the agent is another helper's module
        return {"measured": False, "reason": f"ragkit.answer.agent.ask not importable: {e}"}
    index = open_index(db, progress=False)
    server = ScriptedServer()
    paths: dict = {}
    server.set_responder(_responder(paths))
    settings = openai_settings(server, db=db)
    try:
        ask(questions[0], settings, strategy="agent", index=index)  # warm-up: imports, client, index caches
        times, calls, errors, cited = [], [], 0, 0
        for _ in range(repeat):
            for q in questions:
                n0 = len(server.requests)
                t0 = time.perf_counter()
                a = ask(q, settings, strategy="agent", index=index)
                times.append((time.perf_counter() - t0) * 1000)
                calls.append(len(server.requests) - n0)
                errors += bool(a.error)
                cited += bool(a.sources)
    finally:
        server.close()
    return {"measured": True, "questions": len(times), "llm_calls_per_question": statistics.mean(calls),
            "p50_ms": pct(times, 50), "p95_ms": pct(times, 95), "mean_ms": round(statistics.mean(times), 2),
            "per_llm_call_p50_ms": round(pct(times, 50) / max(1.0, statistics.mean(calls)), 2),
            "errors": errors, "answers_with_sources": cited}


# -- 2. offline engine on the sample corpus ------------------------------------------------------------
class TimedIndex:
    """The real index, with the time spent in search() summed (to separate retrieval from extraction)."""

    def __init__(self, index) -> None:
        self.index, self.search_ms = index, 0.0

    def search(self, *a, **kw):
        t0 = time.perf_counter()
        try:
            return self.index.search(*a, **kw)
        finally:
            self.search_ms += (time.perf_counter() - t0) * 1000

    def pages(self, *a, **kw):
        return self.index.pages(*a, **kw)


def timed_answer(question: str, index: TimedIndex, db: Path):
    """answer_offline plus the engine's own time (total minus index.search)."""
    before = index.search_ms
    a = answer_offline(question, index, db)
    return a, a.latency_ms - (index.search_ms - before)


def bench_sample(db: Path, rows: list[dict]) -> dict:
    index = TimedIndex(open_index(db, progress=False))
    cwd = Path.cwd()
    os.chdir(db.parent)  # Reference Documents are then "database/..." as in questions.csv
    try:
        ans = una = hit_any = hit_all = multi = multi_all = refused_ok = false_refusals = 0
        recall_sum = 0.0
        ms, engine = [], []
        for r in rows:
            required = split_multi(r.get("Reference Document", ""))
            a, own = timed_answer(r["Question"], index, Path("database"))
            ms.append(a.latency_ms)
            engine.append(own)
            cited = {s.path for s in a.sources}
            if not required:
                una += 1
                refused_ok += a.refused
                continue
            ans += 1
            false_refusals += a.refused
            got = sum(1 for p in required if p in cited)
            hit_any += got > 0
            hit_all += got == len(required)
            recall_sum += got / len(required)
            if len(required) > 1:
                multi += 1
                multi_all += got == len(required)
    finally:
        os.chdir(cwd)
    return {"answerable": ans, "cited_a_required_page": hit_any, "cited_all_required_pages": hit_all,
            "page_recall": ratio(recall_sum, ans), "multi_page": multi, "multi_page_all_cited": multi_all,
            "false_refusals": false_refusals, "unanswerable": una, "refused_unanswerable": refused_ok,
            "p50_ms": pct(ms, 50), "p95_ms": pct(ms, 95),
            "engine_p50_ms": pct(engine, 50), "engine_p95_ms": pct(engine, 95)}


# -- 3. offline engine on MMLongBench-Doc -------------------------------------------------------------
_CM_DROP = re.compile(r"[\s,$%'\"`’‘“”]+")


def cm_norm(s: str) -> str:
    """Contain-Match normal form: NFKC, case-folded, without spaces, commas, quotes, '$' and '%'."""
    return _CM_DROP.sub("", unicodedata.normalize("NFKC", s).casefold()).rstrip(".")


def contain_match(truth: str, answer: str) -> bool:
    items: list[str] = [truth]
    if truth.strip().startswith("[") and truth.strip().endswith("]"):
        try:
            parsed = ast.literal_eval(truth.strip())
            if isinstance(parsed, list) and parsed:
                items = [str(x) for x in parsed]
        except (ValueError, SyntaxError):
            pass
    # the answer's words only: its source list names page files under a random temporary folder, which could
    # hold the ground truth ("4") by chance and made Contain-Match vary from run to run
    hay = cm_norm(answer_text_for_judging(answer))
    return all(cm_norm(i) and cm_norm(i) in hay for i in items)


def page_map(db: Path, index) -> dict[str, tuple[str, int]]:
    """db-relative page path -> (source PDF file name, 1-based page) from each page's front matter."""
    out = {}
    for rel in index.pages():
        meta, _ = parse_page(resolve_in_db(db, rel).read_text(encoding="utf-8", errors="replace"))
        out[rel] = (Path(meta.source).name, meta.page)
    return out


def bench_mm(limit: int | None, db_dir: Path | None) -> dict:
    if not (BENCH / "questions.jsonl").exists() or not (BENCH / "pdfs").is_dir():
        return {"skipped": f"{BENCH} not found"}
    tmp = None
    if db_dir is None:
        tmp = Path(tempfile.mkdtemp(prefix="ragkit-mmlb-"))
        db_dir = tmp
    db = db_dir / "database"
    try:
        t0 = time.perf_counter()
        report = ingest_sources([BENCH / "pdfs"], db=db, progress=False)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = TimedIndex(open_index(db, progress=False))
        index_s = time.perf_counter() - t0
        pages = page_map(db, index)
        qs = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text(encoding="utf-8").splitlines()
              if line.strip()]
        if limit:
            qs = qs[:limit]
        t0 = time.perf_counter()
        answer_offline("warm-up question about the documents", index, db)  # corpus statistics, first search
        stats_s = time.perf_counter() - t0
        rows, ms, engine, errors = [], [], [], []
        for q in qs:
            try:
                a, own = timed_answer(q["question"], index, db)
            except Exception as e:  # counted and reported, never silently scored as a refusal
                errors.append(f"{q['id']}: {type(e).__name__}: {e}"[:200])
                continue
            ms.append(a.latency_ms)
            engine.append(own)
            req = {(q["doc"], p) for p in q["pages"]}
            cited = {pages.get(strip_db_prefix(db, s.path)) for s in a.sources}
            read = {pages.get(strip_db_prefix(db, p)) for p in a.pages_read}
            text_only = not any(("Chart" in e or "Figure" in e) for e in q.get("evidence_sources", []))
            rows.append({"answerable": q["answerable"], "req": len(req), "refused": a.refused,
                         "any": bool(req & cited), "share": len(req & cited) / len(req) if req else None,
                         "read_any": bool(req & read), "cm": contain_match(q["answer"], a.answer),
                         "text_only": text_only, "conf": a.confidence})
        A = [r for r in rows if r["answerable"] and r["req"]]
        AT = [r for r in A if r["text_only"]]
        U = [r for r in rows if not r["answerable"]]
        ans_all = [r for r in rows if r["answerable"]]
        return {
            "pdfs": len(list((BENCH / "pdfs").glob("*.pdf"))), "pages": len(pages), "ingest_failed": len(report.failed),
            "questions": len(rows), "errors": len(errors), "first_error": errors[0] if errors else None,
            "answerable_with_pages": len(A), "unanswerable": len(U),
            "page_recall_any": ratio(sum(r["any"] for r in A), len(A)),
            "page_recall_R": ratio(sum(r["share"] for r in A), len(A)),
            "retrieval_ceiling_any": ratio(sum(r["read_any"] for r in A), len(A)),
            "text_only_page_recall_any": ratio(sum(r["any"] for r in AT), len(AT)), "text_only_n": len(AT),
            "contain_match": ratio(sum(r["cm"] for r in ans_all), len(ans_all)),
            "text_only_contain_match": ratio(sum(r["cm"] for r in AT), len(AT)),
            "answered_rate_answerable": ratio(sum(not r["refused"] for r in ans_all), len(ans_all)),
            "refusal_accuracy_unanswerable": ratio(sum(r["refused"] for r in U), len(U)),
            "p50_ms": pct(ms, 50), "p95_ms": pct(ms, 95),
            "engine_p50_ms": pct(engine, 50), "engine_p95_ms": pct(engine, 95),
            "ingest_s": round(ingest_s, 1), "index_open_s": round(index_s, 1), "first_call_s": round(stats_s, 2),
        }
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


# -- 4. a real model on MMLongBench-Doc ----------------------------------------------------------------
def pick_questions(qs: list[dict], limit: int, unanswerable: int) -> list[dict]:
    """`limit` questions: answerable text-evidence ones and `unanswerable` ones, each spread evenly."""
    def spread(pool: list[dict], n: int) -> list[dict]:
        if n <= 0 or not pool:
            return []
        step = len(pool) / n
        return [pool[int(i * step)] for i in range(min(n, len(pool)))]

    text = [q for q in qs if q["answerable"] and q["pages"]
            and not any(("Chart" in e or "Figure" in e or "Table" in e) for e in q.get("evidence_sources", []))]
    una = spread([q for q in qs if not q["answerable"]], unanswerable)
    ans = spread(text, limit - unanswerable)
    # interleaved, so a run stopped early (--deadline-min) still holds both kinds
    out: list[dict] = []
    every = max(1, round(limit / max(1, len(una))))
    while ans or una:
        if una and (len(out) % every == every - 1 or not ans):
            out.append(una.pop(0))
        else:
            out.append(ans.pop(0))
    return out


def cut_arag_pages(n: int) -> None:
    """arag under the same page cut: each page chunk_read shows, and what its best-effort call is given (as much
    as naive's five pages)."""
    from ragkit.answer import arag as arag_mod
    from ragkit.answer.aragtools import MAX_READ, ARagTools

    read = ARagTools.read_page

    def read_cut(self, path: str) -> str:
        text = read(self, path)
        return text if len(text) <= n else text[:n] + f"\n[... cut at {n} characters for this run]"

    ARagTools.read_page = read_cut
    ARagTools.max_result_chars = n * MAX_READ + 500
    arag_mod.BEST_EFFORT_CHARS = 5 * n


def bench_real(args: argparse.Namespace) -> list[dict]:
    from ragkit.answer import ask
    from ragkit.answer import run as run_mod
    from ragkit.answer import tools as tools_mod
    from ragkit.core.config import Secret, Settings

    if not (BENCH / "questions.jsonl").exists():
        print(json.dumps({"benchmark": "agent-real-model", "skipped": f"{BENCH} not found"}))
        return []
    db_dir = args.db_dir or Path(tempfile.mkdtemp(prefix="ragkit-mmlb-"))
    db = db_dir / "database"
    report = ingest_sources([BENCH / "pdfs"], db=db, progress=False)
    index = open_index(db, progress=False)
    index.ensure_embeddings(progress=False)  # every question ranks on the same state, as in `rag batch`
    pages = page_map(db, index)
    qs = [json.loads(line) for line in (BENCH / "questions.jsonl").read_text(encoding="utf-8").splitlines()
          if line.strip()]
    chosen = pick_questions(qs, args.limit or 20, args.unanswerable if args.unanswerable is not None
                            else max(1, (args.limit or 20) // 4))
    if args.ids:  # rerun some of the same selection (e.g. after a change that only affects those questions)
        want = {i.strip() for i in args.ids.split(",") if i.strip()}
        chosen = [q for q in chosen if q["id"] in want]
    if args.page_chars:  # one cut for every strategy: the agent's tool results and naive/synth's pages
        run_mod.CONTEXT_PAGE_CHARS = args.page_chars
        tools_mod.MAX_RESULT_CHARS = args.page_chars
        cut_arag_pages(args.page_chars)
    if args.reply_tokens:  # one output cap for every model call of every strategy
        from ragkit.answer import agent as agent_mod

        run_mod.REPLY_MAX_TOKENS = agent_mod.REPLY_MAX_TOKENS = args.reply_tokens
    settings = Settings(db=db, provider="openai", provider_reason="benchmark", model=args.model,
                        judge_model=args.model, api_key=Secret(os.environ.get("OPENAI_API_KEY") or "sk-local"),
                        api_base=args.base_url, cache=args.cache, cache_dir=db_dir / "llm-cache",
                        timeout=args.timeout, max_steps=args.max_steps, max_tokens=args.max_tokens)
    if args.start_pages is not None:
        settings = settings.with_(start_pages=args.start_pages)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    rows: list[dict] = []
    started = time.perf_counter()
    stopped = None
    for q in [] if args.skip_qa else chosen:  # question by question, every strategy on it, so a partial run compares like with like
        if args.deadline_min and time.perf_counter() - started > args.deadline_min * 60:
            stopped = f"--deadline-min {args.deadline_min} reached after {len(rows) // len(strategies)} questions"
            break
        for strategy in strategies:
            t0 = time.perf_counter()
            a = ask(q["question"], settings, strategy=strategy, index=index)
            secs = time.perf_counter() - t0
            req = {(q["doc"], p) for p in q["pages"]}
            cited = {pages.get(strip_db_prefix(db, s.path)) for s in a.sources}
            read = {pages.get(strip_db_prefix(db, p)) for p in a.pages_read}
            row = {"id": q["id"], "strategy": strategy, "answerable": q["answerable"], "refused": a.refused,
                   "cited_right_page": bool(req & cited), "read_right_page": bool(req & read),
                   "cm": contain_match(q["answer"], a.answer) if q["answerable"] else None,
                   "steps": a.steps, "tokens": a.usage.input_tokens + a.usage.output_tokens,
                   "seconds": round(secs, 1), "fallback": a.fallback, "error": a.error,
                   "answer": a.answer[:160]}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), file=sys.stderr, flush=True)
    lines = []
    for strategy in [] if args.skip_qa else strategies:
        mine = [r for r in rows if r["strategy"] == strategy]
        A = [r for r in mine if r["answerable"]]
        U = [r for r in mine if not r["answerable"]]
        lines.append({
            "benchmark": "agent-real-model", "strategy": strategy, "model": args.model, "questions": len(mine),
            "planned": len(chosen), "stopped": stopped, "answerable": len(A), "unanswerable": len(U),
            "page_recall": ratio(sum(r["cited_right_page"] for r in A), len(A)),
            "read_right_page": ratio(sum(r["read_right_page"] for r in A), len(A)),
            "contain_match": ratio(sum(bool(r["cm"]) for r in A), len(A)),
            # a right page cited with a wrong answer counts in page recall: this counts only both together
            "right_page_and_answer": ratio(sum(bool(r["cm"]) and r["cited_right_page"] for r in A), len(A)),
            "refused_answerable": ratio(sum(r["refused"] for r in A), len(A)),
            "refused_unanswerable": ratio(sum(r["refused"] for r in U), len(U)),
            "fallbacks": sum(r["fallback"] == "naive" for r in mine),
            "rereads": sum(r["fallback"] == "reread" for r in mine),
            "unconfirmed": sum(r["fallback"] == "unconfirmed" for r in mine),
            "errors": sum(bool(r["error"]) for r in mine),
            "first_error": next((r["error"] for r in mine if r["error"]), None),
            "steps_per_question": round(statistics.mean(r["steps"] for r in mine), 2) if mine else None,
            "tokens_per_question": round(statistics.mean(r["tokens"] for r in mine)) if mine else None,
            "seconds_per_question": round(statistics.mean(r["seconds"] for r in mine), 1) if mine else None,
            "max_steps": args.max_steps, "start_pages": settings.start_pages, "page_chars": args.page_chars or None,
            "reply_tokens": run_mod.REPLY_MAX_TOKENS, "response_cache": args.cache,
            "ingest_failed": len(report.failed), "run_wall_minutes": round((time.perf_counter() - started) / 60, 1),
            "date": time.strftime("%Y-%m-%d"),
        })
        print(json.dumps(lines[-1], ensure_ascii=False), flush=True)
    if args.summaries:
        lines += bench_real_summaries(args, settings, index, db, db_dir, strategies, ask)
    if args.db_dir is None:
        shutil.rmtree(db_dir, ignore_errors=True)
    return lines


def summary_items(db: Path, db_dir: Path, n: int) -> list[dict]:
    """`n` query-focused summarization items that offline `rag genqa --task summarization` writes from the
    database (request, reference summary, reference pages), written once to DB_DIR/summaries.csv and reused."""
    from ragkit.core.config import Settings
    from ragkit.genqa import generate_questions

    path = db_dir / "summaries.csv"
    if not path.exists():
        g = generate_questions(db, Settings(db=db, results=db_dir / "genqa", provider="offline"),
                               max_questions=n, task="summarization", progress=False)
        shutil.copyfile(g.path, path)
    rows = read_csv(path).fillna("").to_dict("records")
    return [{k: str(v) for k, v in r.items()} for r in rows][:n]


def bench_real_summaries(args: argparse.Namespace, settings, index, db: Path, db_dir: Path,
                         strategies: list[str], ask) -> list[dict]:
    """Each strategy writes the summaries of --summaries items (ask(task="summarization")): ROUGE-2 F1 against
    the reference summary, page recall and precision against its pages, words, and with --geval the model's own
    G-Eval faithfulness and coverage (the batch's scoring, evaluate.summarization.score_summary)."""
    from types import SimpleNamespace

    from ragkit.core.llm import get_provider
    from ragkit.core.paths import reference_path
    from ragkit.evaluate.metrics import reference_metrics
    from ragkit.evaluate.summarization import COVERAGE, FAITHFULNESS, ROUGE2, WORDS, score_summary

    items = summary_items(db, db_dir, args.summaries)
    results = db_dir / "summary-results"
    results.mkdir(parents=True, exist_ok=True)
    scorer = SimpleNamespace(judge=get_provider(settings, role="judge") if args.geval else None,
                             settings=settings.with_(results=results), db=db)
    universe = [reference_path(db, r) for r in index.pages()]
    rows: list[dict] = []
    started = time.perf_counter()
    for item in items:
        for strategy in strategies:
            t0 = time.perf_counter()
            a = ask(item["Question"], settings, strategy=strategy, index=index, task="summarization")
            secs = time.perf_counter() - t0
            cited = [reference_path(db, strip_db_prefix(db, s.path)) for s in a.sources]
            m = reference_metrics(item["Reference Document"], cited, universe)
            tp, fp, fn = m["TP"], m["FP"], m["FN"]
            cols, _usage, problems = score_summary(scorer, item, a)
            row = {"task": "summarization", "strategy": strategy, "request": item["Question"][:120],
                   "refused": a.refused, "rouge2_f1": cols[ROUGE2], "words": cols[WORDS],
                   "page_recall": ratio(tp, tp + fn), "page_precision": ratio(tp, tp + fp),
                   "faithfulness": cols.get(FAITHFULNESS), "coverage": cols.get(COVERAGE),
                   "max_loops_reached": getattr(a, "max_loops_reached", None), "steps": a.steps,
                   "tokens": a.usage.input_tokens + a.usage.output_tokens, "seconds": round(secs, 1),
                   "error": a.error or ("; ".join(problems) or None), "answer": a.answer[:200]}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), file=sys.stderr, flush=True)

    def mean(mine: list[dict], key: str) -> float | None:
        vals = [r[key] for r in mine if isinstance(r[key], (int, float)) and not isinstance(r[key], bool)]
        return round(statistics.mean(vals), 4) if vals else None

    lines = []
    for strategy in strategies:
        mine = [r for r in rows if r["strategy"] == strategy]
        lines.append({
            "benchmark": "agent-real-model", "task": "summarization", "strategy": strategy, "model": args.model,
            "items": len(mine), "refused": sum(r["refused"] for r in mine), "rouge2_f1": mean(mine, "rouge2_f1"),
            "page_recall": mean(mine, "page_recall"), "page_precision": mean(mine, "page_precision"),
            "words": mean(mine, "words"),
            "geval_faithfulness": mean(mine, "faithfulness") if args.geval else "not run (--geval off)",
            "geval_coverage": mean(mine, "coverage") if args.geval else "not run (--geval off)",
            "max_loops_reached": sum(bool(r["max_loops_reached"]) for r in mine),
            "errors": sum(bool(r["error"]) for r in mine),
            "steps_per_item": mean(mine, "steps"), "tokens_per_item": mean(mine, "tokens"),
            "seconds_per_item": mean(mine, "seconds"), "page_chars": args.page_chars or None,
            "max_tokens": args.max_tokens, "run_wall_minutes": round((time.perf_counter() - started) / 60, 1),
            "date": time.strftime("%Y-%m-%d"),
        })
        print(json.dumps(lines[-1], ensure_ascii=False), flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="MMLongBench: only the first N questions")
    ap.add_argument("--repeat", type=int, default=3, help="overhead: passes over the sample questions")
    ap.add_argument("--db-dir", type=Path, default=None, help="keep/reuse the MMLongBench database here")
    ap.add_argument("--skip-mm", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--base-url", default=None, help="a real OpenAI-compatible server: measure the model path")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--unanswerable", type=int, default=None, help="real model: how many of --limit")
    ap.add_argument("--strategies", default="agent,naive", help="real model: comma-separated")
    ap.add_argument("--max-steps", type=int, default=6, help="real model: agent tool-using turns per question")
    ap.add_argument("--max-tokens", type=int, default=30_000, help="real model: agent tokens per question")
    ap.add_argument("--timeout", type=float, default=600.0, help="real model: seconds per request")
    ap.add_argument("--start-pages", type=int, default=None,
                    help="real model: agent starts with the question's top N pages read (default: RAG_START_PAGES's)")
    ap.add_argument("--page-chars", type=int, default=None, help="real model: page text cut for every strategy")
    ap.add_argument("--cache", action="store_true",
                    help="real model: ragkit's response cache on (an identical request is answered once: the "
                         "agent's reading of the start pages is naive's very call); seconds then undercount")
    ap.add_argument("--reply-tokens", type=int, default=None,
                    help="real model: output cap of every model call (default ragkit's REPLY_MAX_TOKENS)")
    ap.add_argument("--ids", default="", help="real model: only these question ids of the --limit selection")
    ap.add_argument("--deadline-min", type=float, default=None,
                    help="real model: start no new question after this many minutes; report what finished")
    ap.add_argument("--summaries", type=int, default=0,
                    help="real model: also N summarization items (offline genqa --task summarization) per strategy")
    ap.add_argument("--geval", action="store_true", help="real model: the summaries' G-Eval by the same model")
    ap.add_argument("--skip-qa", action="store_true", help="real model: only the --summaries items")
    args = ap.parse_args(argv)
    if args.base_url:
        bench_real(args)
        return 0

    out: dict = {"benchmark": "agent"}
    rows = sample_questions()
    with tempfile.TemporaryDirectory(prefix="ragkit-sample-") as tmp:
        db = Path(tmp) / "database"
        report = ingest_sources([REPO / "examples" / "corpus"], db=db, progress=False)
        if report.failed:
            out["sample_ingest_failed"] = len(report.failed)
        if args.skip_overhead:
            out["overhead"] = {"measured": False, "reason": "--skip-overhead"}
        else:
            out["overhead"] = bench_overhead(db, [r["Question"] for r in rows], args.repeat)
        out["sample"] = bench_sample(db, rows)
    out["mmlongbench"] = {"skipped": "--skip-mm"} if args.skip_mm else bench_mm(args.limit, args.db_dir)
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
