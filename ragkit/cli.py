"""The `rag` command line: parse flags, call the library, print. No logic lives here."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragkit.config import load_settings
from ragkit.errors import RagError, UsageError

app = typer.Typer(
    help="ragkit: build, run and measure RAG over a per-page markdown tree of your documents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True, soft_wrap=True)  # an error is one line whatever the width

DbOpt = Annotated[Path | None, typer.Option("--db", help="Database folder [env RAG_DB; default ./database].")]
ResultsOpt = Annotated[
    Path | None, typer.Option("--results", help="Results folder [env RAG_RESULTS; default ./results].")
]
ProviderOpt = Annotated[
    str | None, typer.Option("--provider", help="openai | offline [env RAG_PROVIDER; offline when no key].")
]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Model name [env RAG_MODEL].")]
StrategyOpt = Annotated[str, typer.Option("--strategy", help="agent | naive | synth.")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Bypass the on-disk LLM response cache.")]
MaxStepsOpt = Annotated[
    int | None, typer.Option("--max-steps", help="Agent tool-using turns per question [env RAG_MAX_STEPS; 12].")
]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", help="Agent token budget per question [env RAG_MAX_TOKENS; 60000].")
]


def handle_errors(fn):
    """User mistakes become one line on stderr and an exit status; never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            err.print(f"[red]error:[/red] {e}", highlight=False, markup=True)
            raise typer.Exit(2) from None
        except RagError as e:
            err.print(f"[red]error:[/red] {e}", highlight=False, markup=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted; finished work is on disk, run the same command again to continue")
            raise typer.Exit(130) from None

    return wrapper


def _say_provider(settings) -> None:
    if settings.provider == "offline":
        err.print(f"[yellow]provider: offline[/yellow] ({settings.provider_reason})", highlight=False)


@app.command()
@handle_errors
def ingest(
    sources: Annotated[list[Path], typer.Argument(help="PDF/DOCX/PPTX files or folders to ingest.")],
    db: DbOpt = None,
    category: Annotated[str | None, typer.Option("--category", help="Category folder for every source.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-ingest sources even when unchanged.")] = False,
    workers: Annotated[int | None, typer.Option("--workers", help="Parallel processes (default: cores).")] = None,
) -> None:
    """Turn documents into one markdown file per page: DB/<category>/<document>/<section>/page_NNN.md."""
    from ragkit.ingest import ingest_sources, print_report

    settings = load_settings(db=db)
    report = ingest_sources(sources, db=settings.db, category=category, force=force, workers=workers)
    print_report(report, console)
    if report.failed:
        raise typer.Exit(1)


@app.command()
@handle_errors
def search(
    query: Annotated[str | None, typer.Argument(help="What to look for (any language).")] = None,
    db: DbOpt = None,
    path: Annotated[str | None, typer.Option("--path", help="Only pages under this folder.")] = None,
    k: Annotated[int, typer.Option("-k", help="Number of results.")] = 10,
    fmt: Annotated[str, typer.Option("--format", help="text | json.")] = "text",
    embed: Annotated[bool, typer.Option(
        "--embed", help="First give every page a vector (~60 pages/s), so meaning finds pages on its own in a "
                        "database of more than 1,000 pages; QUERY is then optional.")] = False,
) -> None:
    """Hybrid keyword + meaning search over the page tree."""
    from ragkit.index import embed_db, print_hits, search_db

    if fmt not in ("text", "json"):
        raise UsageError(f"--format must be text or json, got {fmt!r}")
    if k < 1:
        raise UsageError(f"-k must be at least 1, got {k}")
    if query is not None and not query.strip():
        query = None
    if query is None and not embed:
        raise UsageError("give a QUERY to search for (or --embed to only embed the pages)")
    settings = load_settings(db=db)
    if embed:
        done, total = embed_db(settings.db)
        err.print(f"embedded {done} page(s); all {total} page(s) have a vector")
        if query is None:
            return
    hits = search_db(settings.db, query, k=k, path=path)
    print_hits(hits, settings.db, fmt=fmt, console=console)


@app.command()
@handle_errors
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    db: DbOpt = None,
    strategy: StrategyOpt = "agent",
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json.")] = "text",
    trace: Annotated[Path | None, typer.Option("--trace", help="Write every step as JSONL here.")] = None,
    no_cache: NoCacheOpt = False,
    max_steps: MaxStepsOpt = None,
    max_tokens: MaxTokensOpt = None,
) -> None:
    """Answer a question from the database and cite the pages used."""
    from ragkit.agent import ask as ask_question
    from ragkit.agent import print_answer

    if fmt not in ("text", "json"):
        raise UsageError(f"--format must be text or json, got {fmt!r}")
    settings = load_settings(db=db, provider=provider, model=model, cache=not no_cache, max_steps=max_steps,
                             max_tokens=max_tokens)
    if fmt == "text":
        _say_provider(settings)
    result = ask_question(question, settings, strategy=strategy, trace_path=trace)
    print_answer(result, fmt=fmt, console=console)
    if result.error:
        raise typer.Exit(1)


@app.command()
@handle_errors
def batch(
    input_csv: Annotated[Path, typer.Argument(help="Question CSV (Question[, Ground Truth, ...]).")],
    db: DbOpt = None,
    results: ResultsOpt = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Questions in parallel [default 5].")] = None,
    enable_rl: Annotated[bool, typer.Option("--enable-rl", help="Optimize folders for missed pages.")] = False,
    strategy: StrategyOpt = "agent",
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the last interrupted run.")] = False,
    no_cache: NoCacheOpt = False,
    max_steps: MaxStepsOpt = None,
    max_tokens: MaxTokensOpt = None,
) -> None:
    """Answer every question of a CSV in parallel, score it, write results and summary CSVs."""
    from ragkit.batch import print_batch_report, run_batch

    settings = load_settings(db=db, results=results, provider=provider, model=model, workers=workers,
                             cache=not no_cache, max_steps=max_steps, max_tokens=max_tokens)
    _say_provider(settings)
    report = run_batch(input_csv, settings, strategy=strategy, enable_rl=enable_rl, resume=resume)
    print_batch_report(report, console)
    if report.errors:
        raise typer.Exit(1)


@app.command("eval")
@handle_errors
def eval_(
    results_csv: Annotated[Path, typer.Argument(help="A results CSV from `rag batch`.")],
    db: DbOpt = None,
    results: ResultsOpt = None,
    provider: ProviderOpt = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="Judge model [env RAG_JUDGE_MODEL].")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Rows judged in parallel [default 5].")] = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Re-score an existing results CSV (checklist, references, LLM-as-judge) without asking again."""
    from ragkit.batch import print_batch_report, run_eval

    settings = load_settings(db=db, results=results, provider=provider, judge_model=judge_model,
                             workers=workers, cache=not no_cache)
    _say_provider(settings)
    report = run_eval(results_csv, settings)
    print_batch_report(report, console)
    if report.errors:
        raise typer.Exit(1)


@app.command()
@handle_errors
def genqa(
    source: Annotated[Path, typer.Argument(help="A database folder, or a PDF/DOCX/PPTX to ingest first.")],
    db: DbOpt = None,
    results: ResultsOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    per_page: Annotated[int, typer.Option("--per-page", help="Questions per sampled page.")] = 1,
    max_questions: Annotated[int, typer.Option("--max", help="At most this many questions.")] = 30,
    lang: Annotated[str | None, typer.Option("--lang", help="Question language (default: the document's).")] = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Generate anticipated questions with ground truth, page references and checklists."""
    from ragkit.genqa import generate_questions, print_genqa_report

    settings = load_settings(db=db, results=results, provider=provider, model=model, cache=not no_cache)
    _say_provider(settings)
    report = generate_questions(source, settings, per_page=per_page, max_questions=max_questions, lang=lang)
    print_genqa_report(report, console)
    if report.errors:
        raise typer.Exit(1)


@app.command()
@handle_errors
def demo(
    db: DbOpt = None,
    results: ResultsOpt = None,
    provider: ProviderOpt = None,
) -> None:
    """Quick start: ingest the bundled sample corpus, answer a sample question, run the sample CSV."""
    from ragkit.demo import run_demo

    settings = load_settings(db=db, results=results, provider=provider)
    _say_provider(settings)
    ok = run_demo(settings, console)
    if not ok:
        raise typer.Exit(1)


@app.command()
@handle_errors
def serve(
    db: DbOpt = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (any but loopback needs a token).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    token: Annotated[str | None, typer.Option(
        "--token", help="Require Authorization: Bearer TOKEN on every endpoint but /health [env RAG_API_TOKEN].")] = None,
    max_upload_mb: Annotated[float, typer.Option("--max-upload-mb", help="Largest accepted upload.")] = 100.0,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """HTTP API (/chat with sessions, /search, /documents, /pages) and a web page at / over the database."""
    from ragkit.config import env_value
    from ragkit.serve import run_server

    settings = load_settings(db=db, provider=provider, model=model, cache=not no_cache)
    _say_provider(settings)
    run_server(settings, host=host, port=port, token=token or env_value("RAG_API_TOKEN") or None,
               max_upload_mb=max_upload_mb, announce=lambda line: err.print(line, highlight=False, markup=False))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - Ctrl-C outside a command body
        sys.exit(130)


if __name__ == "__main__":
    main()
