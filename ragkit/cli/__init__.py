"""The `rag` command line: parse flags, call the library, print. No logic lives here."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from typer.core import TyperArgument

from ragkit.answer import STRATEGIES
from ragkit.cli.gates import OptionalDeltaCommand, csv_encoding, finish_with_gates, write_path
from ragkit.cli.options import DbOpt, EncodingOpt
from ragkit.cli.refs import refs_update
from ragkit.core.config import LIMIT_BY_FIELD, Limits, load_settings
from ragkit.core.console import make_console
from ragkit.core.errors import Interrupted, RagError, UsageError
from ragkit.core.text import one_line
from ragkit.evaluate import BATCH_STRATEGIES


def _usage_name(self) -> str:
    """An argument in a usage line by its name, as help pages write it: `SOURCE...`, `QUESTION`, `[QUERY]`."""
    name = self.display_name_raw
    if self.nargs != 1 and not name.endswith("..."):
        name += "..."
    return name if self.required else f"[{name}]"


# typer's own usage style shows a required argument as {NAME} and its Python type beside it (<list[Path]>)
TyperArgument._usage_display_name = _usage_name
TyperArgument.display_type_rich = lambda self, ctx: None

class _OneLineErrors(typer.core.TyperGroup):
    """A usage error from the parser (an unknown option, a value out of range, a missing argument) is one line
    on stderr and exit 2, like every other error, not click's usage block."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        from typer._click.exceptions import ClickException, NoArgsIsHelpError
        from typer._click.exceptions import UsageError as ParseError
        from typer.exceptions import Abort

        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                              **extra)
            code = rv if isinstance(rv, int) else 0
        except NoArgsIsHelpError as e:  # `rag` alone: the help, as before
            e.show()
            code = e.exit_code
        except ClickException as e:
            ctx = getattr(e, "ctx", None)
            hint = f" (see {ctx.command_path} --help)" if isinstance(e, ParseError) and ctx else ""
            err.print(f"[red]error:[/red] {escape(one_line(e.format_message()))}{escape(hint)}", highlight=False)
            code = e.exit_code
        except Abort:
            err.print("aborted", highlight=False)
            code = 1
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=_OneLineErrors,
    help="ragkit: build, run and measure RAG over a per-page markdown tree of your documents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help: Rich's markup would eat "[...]" in help texts and box-draw into logs
    rich_markup_mode=None,
)
console = make_console()
err = make_console(stderr=True)

# Every option shows its default (the value, or where it comes from when the environment can set it).
ResultsOpt = Annotated[Path | None, typer.Option(
    "--results", metavar="DIR", help="Results folder.  [default: ./results, or env RAG_RESULTS]", show_default=False)]
ProviderOpt = Annotated[str | None, typer.Option(
    "--provider", metavar="openai|offline", help="Who answers."
    "  [default: env RAG_PROVIDER, else openai with a key, offline without]",
    show_default=False)]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", metavar="NAME", help="Model name.  [default: env RAG_MODEL, else gpt-4o-mini]", show_default=False)]
StrategyOpt = Annotated[str, typer.Option(
    "--strategy", metavar="|".join(STRATEGIES),
    help="agent: tool-using navigation; naive: one search, one call; synth: drafts per result, synthesised; "
         "longctx: whole candidate documents in the context; arag: the A-RAG paper's keyword_search, "
         "semantic_search and chunk_read loop.")]
FormatOpt = Annotated[str, typer.Option("--format", metavar="text|json", help="Output format.")]
NoCacheOpt = Annotated[bool, typer.Option(
    "--no-cache", help="Bypass the on-disk LLM response cache.  [default: off]", show_default=False)]
WorkersOpt = Annotated[int | None, typer.Option(
    "--workers", metavar="N", help="Questions in parallel.  [default: 5, or env RAG_WORKERS]", show_default=False)]
MaxStepsOpt = Annotated[int | None, typer.Option(
    "--max-steps", metavar="N", help="Agent tool-using turns per question."
    "  [default: 12, or env RAG_MAX_STEPS]",
    show_default=False)]
MaxTokensOpt = Annotated[int | None, typer.Option(
    "--max-tokens", metavar="N", help="Agent token budget per question."
    "  [default: 60000, or env RAG_MAX_TOKENS]",
    show_default=False)]

FailUnderOpt = Annotated[list[str] | None, typer.Option(
    "--fail-under", metavar="METRIC=VALUE",
    help='Quality gate, repeatable (e.g. "Ref Recall=0.8"): exit 3 when the metric\'s mean over the results '
         "is below VALUE.  [default: no gate]", show_default=False)]
PrintPathOpt = Annotated[bool, typer.Option(
    "--print-path", help="Print only the path of the CSV written on stdout, for scripts (`q=$(rag genqa ... "
    "--print-path)`); the report goes to stderr.  [default: off]", show_default=False)]
ContextTokensOpt = Annotated[int | None, typer.Option(
    "--context-tokens", metavar="N", help="longctx: token budget of the documents put in the context."
    "  [default: 32000, or env RAG_CONTEXT_TOKENS]", show_default=False)]



def _limit_option(field: str):
    lim, default = LIMIT_BY_FIELD[field], getattr(Limits(), field)
    unit = f" {lim.unit}" if lim.unit else ""
    return Annotated[float | None, typer.Option(
        lim.flag, metavar={"s": "SECONDS", "": "N"}.get(lim.unit, lim.unit), help=f"Limit: {lim.what}.  [default: {default:g}{unit}, or env {lim.env}]",
        show_default=False)]


UnpackedOpt = _limit_option("unpacked_mb")
MemberOpt = _limit_option("member_mb")
RatioOpt = _limit_option("zip_ratio")
PageTextOpt = _limit_option("page_text_mb")
DocTimeoutOpt = _limit_option("doc_seconds")
DocMemoryOpt = _limit_option("memory_mb")


def _version(value: bool) -> None:
    if value:
        from ragkit import __version__

        console.out(f"ragkit {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", callback=_version, is_eager=True)] = False,
) -> None:
    """ragkit: build, run and measure RAG over a per-page markdown tree of your documents."""


def _fail(message: str, code: int, json_out: bool) -> None:
    """One line on stderr; with --format json instead `{"error": ...}` on stdout (docs/commands.md), so a script
    reading JSON sees the failure as JSON, and the failure is said once."""
    message = one_line(message)
    if json_out:
        console.out(json.dumps({"error": message}, ensure_ascii=False), highlight=False)
    else:
        err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    raise typer.Exit(code) from None


def _item_errors(errors: list[str]) -> None:
    """The items a command could not do (the others were done): one line each on stderr, then exit 1."""
    for e in errors:
        err.print(f"[red]error:[/red] {escape(one_line(e))}", highlight=False)
    if errors:
        raise typer.Exit(1)


RESUMABLE = "interrupted; finished work is on disk, run the same command again to continue"
# `rag search` embeds the pages in scope still without a vector first when there are at most this many (a few
# seconds at ~55 pages/s): a one-off search right after `rag ingest` then ranks by meaning as the README says;
# more wait for `rag search --embed`, `rag batch` or the background thread
SEARCH_EMBED_UPTO = 200


def handle_errors(fn: Callable | None = None, *, interrupted: str = RESUMABLE) -> Callable:
    """User mistakes become one line on stderr and an exit status; never a traceback. Ctrl-C exits 130 with
    `interrupted`: a command that keeps no work to continue (one question, a report) says just "interrupted"."""
    if fn is None:
        return functools.partial(handle_errors, interrupted=interrupted)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        json_out = kwargs.get("fmt") == "json"
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            _fail(e.cli_message(), 2, json_out)
        except RagError as e:
            _fail(e.cli_message(), 1, json_out)
        except KeyboardInterrupt as e:
            if json_out:  # a script reading the JSON gets a document saying so, as for every other failure
                console.out(json.dumps({"error": "interrupted"}), highlight=False)
            elif not isinstance(e, Interrupted):  # else the command has said what it stopped and kept
                err.print(interrupted, markup=False, highlight=False)
            raise typer.Exit(130) from None

    return wrapper


def _say_provider(settings) -> None:
    if settings.provider == "offline":
        err.print(f"[yellow]provider: offline[/yellow] ({settings.provider_reason})", highlight=False)


@app.command()
@handle_errors
def ingest(
    sources: Annotated[list[Path], typer.Argument(
        metavar="SOURCE...", help="PDF/DOCX/PPTX files or folders to ingest.", show_default=False)],
    db: DbOpt = None,
    category: Annotated[str | None, typer.Option(
        "--category", metavar="NAME", help="Category folder for every source."
        "  [default: the source's parent folder name]",
        show_default=False)] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Re-ingest sources even when unchanged.  [default: off]", show_default=False)] = False,
    prune: Annotated[bool, typer.Option(
        "--prune", help="Remove the documents whose file under the folders given is gone (renamed or deleted). "
        " [default: off: they are kept and named]", show_default=False)] = False,
    workers: Annotated[int | None, typer.Option(
        "--workers", metavar="N", help="Parallel processes.  [default: the number of cores]", show_default=False)] = None,
    index: Annotated[str | None, typer.Option(
        "--index", metavar="ENGINE", help="Where the pages are indexed: embedded, or "
        "opensearch+http://HOST:9200[/PREFIX] (stored in the database; credentials from RAG_OPENSEARCH_USER / "
        "RAG_OPENSEARCH_PASSWORD or RAG_OPENSEARCH_API_KEY).  [default: env RAG_INDEX, else what the database "
        "has, else embedded]", show_default=False)] = None,
    max_unpacked_mb: UnpackedOpt = None,
    max_member_mb: MemberOpt = None,
    max_zip_ratio: RatioOpt = None,
    max_page_text_mb: PageTextOpt = None,
    doc_timeout: DocTimeoutOpt = None,
    max_doc_memory_mb: DocMemoryOpt = None,
) -> None:
    """Turn documents into one markdown file per page: DB/<category>/<document>/<section>/page_NNN.md."""
    from ragkit.cli.render import print_ingest_report, print_sync_report
    from ragkit.search.backend import ingest_into

    settings = load_settings(db=db, limits=dict(
        unpacked_mb=max_unpacked_mb, member_mb=max_member_mb, zip_ratio=max_zip_ratio,
        page_text_mb=max_page_text_mb, doc_seconds=doc_timeout, memory_mb=max_doc_memory_mb))
    report, synced = ingest_into(sources, db=settings.db, index=index, category=category, force=force,
                                 workers=workers, limits=settings.limits, prune=prune, progress=True)
    print_ingest_report(report, console, err)
    if synced is not None:
        print_sync_report(synced, settings.db, console)
    if report.failed:
        raise typer.Exit(1)


index_app = typer.Typer(help="The search index of a database.", no_args_is_help=True, add_completion=False)
app.add_typer(index_app, name="index")


@index_app.command("sync")
@handle_errors
def index_sync(db: DbOpt = None, new_id: Annotated[bool, typer.Option(
        "--new-id", help="First give the database a new id and, with OpenSearch, its own new index on the same "
        "cluster (for a copy of another database, which would share that one's index).  [default: off]",
        show_default=False)] = False, index: Annotated[str | None, typer.Option(
        "--index", metavar="ENGINE", help="First point the database at this index, as `rag ingest --index` does: "
        "embedded, or opensearch+http://HOST:9200[/PREFIX] (a cluster that moved to a new address; every command "
        "and `rag serve` replica then uses it).  [default: the index the database has]",
        show_default=False)] = None) -> None:
    """Make the index match the page files: add, update and delete (a second run changes nothing). After an
    upgrade that analyses pages differently, a cluster's pages get their new terms and keep their vectors."""
    from ragkit.cli.render import print_sync_report
    from ragkit.search.backend import sync_index

    settings = load_settings(db=db)
    print_sync_report(sync_index(settings.db, new_id=new_id, index=index), settings.db, console)


optimize_app = typer.Typer(help="The copies `rag batch --optimize | --enable-rl` kept.", no_args_is_help=True,
                            add_completion=False)
app.add_typer(optimize_app, name="optimize")


@optimize_app.command("undo")
@handle_errors
def optimize_undo(run: Annotated[str | None, typer.Argument(metavar="[RUN]", help="The run id, as the batch printed it "
                  "(--list shows them).  [default: the latest run]", show_default=False)] = None, db: DbOpt = None,
                  list_: Annotated[bool, typer.Option("--list", help="List the runs whose copies are in the database "
                  "instead.  [default: off]", show_default=False)] = False) -> None:
    """Remove the copies one optimization run kept (those edited since are left and named), the folders left
    empty, their index entries, and their aliases in the input CSV's Optimized Reference Document (backed up)."""
    from ragkit.cli.render import print_undo_report
    from ragkit.optimize import list_runs, undo_run

    settings = load_settings(db=db)
    print_undo_report(list_runs(settings.db) if list_ else undo_run(settings.db, run, progress=True), console)


refs_app = typer.Typer(help="The page paths a question CSV names.", no_args_is_help=True, add_completion=False)
app.add_typer(refs_app, name="refs")
refs_app.command("update")(handle_errors(refs_update))


@app.command()
@handle_errors
def search(
    query: Annotated[str | None, typer.Argument(
        metavar="QUERY", help="What to look for (any language).", show_default=False)] = None,
    db: DbOpt = None,
    path: Annotated[str | None, typer.Option(
        "--path", metavar="PREFIX", help="Only pages under this folder.  [default: the whole database]", show_default=False)] = None,
    k: Annotated[int, typer.Option("-k", metavar="N", help="Number of results.")] = 10,
    fmt: FormatOpt = "text",
    embed: Annotated[bool, typer.Option(
        "--embed", help="First give every page a vector (~60 pages/s), so meaning finds pages on its own in a "
                        "database of more than 1,000 pages; QUERY is then optional.  [default: off]", show_default=False)] = False,
) -> None:
    """Hybrid keyword + meaning search over the page tree."""
    from ragkit.cli.render import print_hits
    from ragkit.search import embed_db, search_db

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
    # an index holding no page (a cluster that restarted empty) fails as /search does (409), not as no hits
    hits = search_db(settings.db, query, k=k, path=path, strict=True, embed_upto=SEARCH_EMBED_UPTO, progress=True)
    print_hits(hits, settings.db, fmt=fmt, console=console)


@app.command()
@handle_errors(interrupted="interrupted")
def ask(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question.", show_default=False)],
    db: DbOpt = None,
    strategy: StrategyOpt = "agent",
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    fmt: FormatOpt = "text",
    trace: Annotated[Path | None, typer.Option(
        "--trace", metavar="FILE", help="Write every step as JSONL here.  [default: no trace]", show_default=False)] = None,
    no_cache: NoCacheOpt = False,
    max_steps: MaxStepsOpt = None,
    max_tokens: MaxTokensOpt = None,
    context_tokens: ContextTokensOpt = None,
    task: Annotated[str, typer.Option(
        "--task", metavar="qa|summarization", help="qa answers the question; summarization writes the summary "
        "it asks for (arag: its longer step cap).")] = "qa",
) -> None:
    """Answer a question from the database and cite the pages used."""
    from ragkit.answer import ask as ask_question
    from ragkit.cli.render import print_answer
    from ragkit.core.waiting import Heartbeat, waiting_text

    if fmt not in ("text", "json"):
        raise UsageError(f"--format must be text or json, got {fmt!r}")
    settings = load_settings(db=db, provider=provider, model=model, cache=not no_cache, max_steps=max_steps,
                             max_tokens=max_tokens, context_tokens=context_tokens)
    if fmt == "text":
        _say_provider(settings)
    with Heartbeat(lambda w: f"ask: {waiting_text(w)}", file=sys.stderr):
        result = ask_question(question, settings, strategy=strategy, trace_path=trace, task=task, progress=True)
    print_answer(result, fmt=fmt, console=console, err_console=err)
    if result.error:
        raise typer.Exit(1)


@app.command()
@handle_errors
def batch(
    input_csv: Annotated[Path, typer.Argument(
        metavar="INPUT.csv", help="Question CSV (Question[, Ground Truth, ...]).", show_default=False)],
    db: DbOpt = None,
    results: ResultsOpt = None,
    workers: WorkersOpt = None,
    optimize: Annotated[bool, typer.Option(
        "--optimize", help="Copy missed pages where the agent would look (one pass; changes the database, and the "
        "input CSV's `Optimized Reference Document`, after a backup).  [default: off]", show_default=False)] = False,
    enable_rl: Annotated[bool, typer.Option(
        "--enable-rl", help="Optimize with re-asks: keep only the copies that help (changes the database, and the "
        "input CSV when a copy is kept).  [default: off]", show_default=False)] = False,
    holdout: Annotated[float | None, typer.Option(
        "--holdout", metavar="F", help="Share of questions kept out of optimization to measure it."
        "  [default: 0.25]", show_default=False)] = None,
    validate: Annotated[Path | None, typer.Option(
        "--validate", metavar="CSV", help="A second question CSV that measures the optimization instead of "
        "--holdout.  [default: none]", show_default=False)] = None,
    strategy: Annotated[str, typer.Option(
        "--strategy", metavar="|".join(BATCH_STRATEGIES),
        help="As for ask, or search: retrieval alone, no model (Ref Recall@k, MRR, nDCG@k).")] = "agent",
    k: Annotated[int | None, typer.Option(
        "-k", metavar="N", help="--strategy search: pages retrieved per question (another strategy: a usage "
        "error).  [default: 10]", show_default=False)] = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the last interrupted run.  [default: off]", show_default=False)] = False,
    no_cache: NoCacheOpt = False,
    max_steps: MaxStepsOpt = None,
    max_tokens: MaxTokensOpt = None,
    fail_under: FailUnderOpt = None,
    context_tokens: ContextTokensOpt = None,
    encoding: EncodingOpt = None,
    print_path: PrintPathOpt = False,
) -> None:
    """Answer every question of a CSV in parallel, score it, write results and summary CSVs (read-only unless
    --optimize or --enable-rl)."""
    from ragkit.cli.render import print_batch_report
    from ragkit.evaluate.batch import check_k, run_batch
    from ragkit.evaluate.gates import as_gates

    gates = as_gates(fail_under)  # a usage error is the only line: before the settings' and the provider's
    settings = load_settings(db=db, results=results, provider=provider, model=model, workers=workers,
                             cache=not no_cache, max_steps=max_steps, max_tokens=max_tokens,
                             context_tokens=context_tokens, encoding=encoding)
    check_k(strategy, k, settings)  # a usage error is the only line: before the provider's
    _say_provider(settings)
    report = run_batch(input_csv, settings, strategy=strategy, enable_rl=enable_rl, resume=resume, optimize=optimize,
                       holdout=holdout, validate=validate, k=k, gates=gates, progress=True)
    print_batch_report(report, err if print_path else console)
    write_path(report.results_path, print_path)
    finish_with_gates(report, err if print_path else console)


@app.command("eval")
@handle_errors
def eval_(
    results_csv: Annotated[Path, typer.Argument(
        metavar="RESULTS.csv", help="A results CSV from `rag batch`.", show_default=False)],
    db: DbOpt = None,
    results: ResultsOpt = None,
    provider: ProviderOpt = None,
    judge_model: Annotated[str | None, typer.Option(
        "--judge-model", metavar="NAME", help="Judge model."
        "  [default: env RAG_JUDGE_MODEL, else env RAG_MODEL, else gpt-4o-mini]",
        show_default=False)] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", metavar="N", help="Rows judged in parallel.  [default: 5, or env RAG_WORKERS]", show_default=False)] = None,
    no_cache: NoCacheOpt = False,
    fail_under: FailUnderOpt = None,
    encoding: EncodingOpt = None,
    print_path: PrintPathOpt = False,
) -> None:
    """Re-score an existing results CSV (checklist, references, LLM-as-judge) without asking again."""
    from ragkit.cli.render import print_batch_report
    from ragkit.evaluate.gates import as_gates
    from ragkit.evaluate.rescore import run_eval

    gates = as_gates(fail_under)
    settings = load_settings(db=db, results=results, provider=provider, judge_model=judge_model,
                             workers=workers, cache=not no_cache, encoding=encoding)
    _say_provider(settings)
    report = run_eval(results_csv, settings, gates=gates, progress=True)
    print_batch_report(report, err if print_path else console)
    write_path(report.results_path, print_path)
    finish_with_gates(report, err if print_path else console)


@app.command()
@handle_errors(interrupted="interrupted; no question file was written")
def genqa(
    source: Annotated[Path, typer.Argument(
        metavar="SOURCE", help="A database folder, or a PDF/DOCX/PPTX to ingest first.", show_default=False)],
    db: DbOpt = None,
    results: ResultsOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    per_page: Annotated[int, typer.Option("--per-page", metavar="N", help="Questions per sampled page.")] = 1,
    max_questions: Annotated[int, typer.Option("--max", metavar="N", help="At most this many questions.")] = 30,
    lang: Annotated[str | None, typer.Option(
        "--lang", metavar="L", help="Question language: en, ja or ko offline (only pages written in it); with a "
        "model also zh, fr, de, es and more.  [default: each page's own]", show_default=False)] = None,
    task: Annotated[str, typer.Option(
        "--task", metavar="qa|summarization", help="qa: questions with ground truth and checklists; "
        "summarization: query-focused summarization items with reference summaries and pages.")] = "qa",
    no_cache: NoCacheOpt = False,
    print_path: PrintPathOpt = False,
) -> None:
    """Generate anticipated questions with ground truth, page references and checklists."""
    from ragkit.cli.render import genqa_interrupted, print_genqa_report
    from ragkit.genqa import generate_questions

    settings = load_settings(db=db, results=results, provider=provider, model=model, cache=not no_cache)
    _say_provider(settings)
    report = generate_questions(source, settings, per_page=per_page, max_questions=max_questions, lang=lang,
                                task=task, progress=True)
    print_genqa_report(report, err if print_path else console)
    write_path(report.path, print_path)
    if report.interrupted:  # Ctrl-C: what was kept, in one line
        err.print(genqa_interrupted(report), markup=False, highlight=False)
        raise typer.Exit(130)
    _item_errors(report.errors)


@app.command()
@handle_errors
def evolve(
    experiments_csv: Annotated[Path, typer.Argument(
        metavar="EXPERIMENTS.csv", help="Experiment CSV: experiment_id, max_generations, k, model_name, adapter_type, "
        "task_definition, target_preference, evaluator_type.", show_default=False)],
    results: ResultsOpt = None,
    only: Annotated[list[str] | None, typer.Option(
        "--only", metavar="ID", help="Run only this experiment_id (repeatable); other rows are not checked.  [default: every row]",
        show_default=False)] = None,
    until: Annotated[int | None, typer.Option(
        "--until", metavar="N", help="Stop after N generations (iter1..iterN).  [default: max_generations]",
        show_default=False)] = None,
    script: Annotated[Path | None, typer.Option(
        "--script", metavar="FILE", help="Write a shell script with one idempotent step per generation instead "
        "of running.  [default: run now]", show_default=False)] = None,
    db: DbOpt = None,
    no_cache: NoCacheOpt = False,
    encoding: EncodingOpt = None,
) -> None:
    """Evolve texts over generations against an evaluator's hidden preference."""
    from ragkit.cli.render import print_evolve_report
    from ragkit.evolve import run_experiments, write_pipeline_script

    settings = load_settings(db=db, results=results, cache=not no_cache, encoding=encoding)
    if script is not None:
        path = write_pipeline_script(experiments_csv, script, results=settings.results, only=only,
                                     encoding=settings.csv_encoding)
        console.print(f"wrote {escape(str(path))}", highlight=False)
        return
    report = run_experiments(experiments_csv, settings, only=only, until=until, progress=True)
    print_evolve_report(report, console)
    _item_errors(report.errors)


@app.command()
@handle_errors
def demo(
    db: DbOpt = None,
    results: ResultsOpt = None,
    provider: ProviderOpt = None,
) -> None:
    """Quick start: ingest the bundled sample corpus, answer a sample question, run the sample CSV."""
    from ragkit.cli.demo import run_demo

    settings = load_settings(db=db, results=results, provider=provider)
    _say_provider(settings)
    ok = run_demo(settings, console)
    if not ok:
        raise typer.Exit(1)


@app.command(cls=OptionalDeltaCommand)
@handle_errors(interrupted="interrupted")
def compare(
    old: Annotated[Path, typer.Argument(
        metavar="OLD.csv", help="The earlier results CSV (the baseline).", show_default=False)],
    new: Annotated[Path, typer.Argument(metavar="NEW.csv", help="The later results CSV.", show_default=False)],
    fmt: Annotated[str, typer.Option(
        "--format", metavar="text|json|markdown", help="Output format (markdown for a CI job summary).")] = "text",
    fail_on_regression: Annotated[float | None, typer.Option(
        "--fail-on-regression", metavar="[DELTA]",
        help="Exit 3 when a quality metric's mean fell by more than DELTA (0 when no DELTA is given: any "
             "drop).  [default: no gate]", show_default=False)] = None,
    encoding: EncodingOpt = None,
) -> None:
    """Question-by-question deltas between two results CSVs, with paired tests (bootstrap, McNemar)."""
    from ragkit.evaluate.gates import EXIT_GATE
    from ragkit.reports.compare import FORMATS, compare_files

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    cmp = compare_files(old, new, encoding=csv_encoding(encoding), fail_on_regression=fail_on_regression)
    console.out(FORMATS[fmt](cmp), highlight=False)
    for g in cmp.gates:
        if g.failed:
            err.print(g.line(), markup=False, highlight=False)
    if cmp.gate_failed:
        raise typer.Exit(EXIT_GATE)


@app.command()
@handle_errors(interrupted="interrupted")
def report(
    results_csvs: Annotated[list[Path], typer.Argument(
        metavar="RESULTS.csv...", help="One or more results CSVs (compared side by side).", show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="FILE.html", help="The HTML file to write."
        "  [default: one CSV: beside it, .html; several: OLD_vs_NEW.html beside the last]", show_default=False)] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an existing output file.  [default: off]", show_default=False)] = False,
    label: Annotated[list[str] | None, typer.Option(
        "--label", metavar="NAME", help="A name for each run, in order (repeatable).  [default: what differs in "
        "their run records, else the file names]",
        show_default=False)] = None,
    encoding: EncodingOpt = None,
) -> None:
    """One self-contained HTML report (plots, filters, per-question details); no network needed to read it."""
    from ragkit.reports.html import write_report

    path = write_report(results_csvs, output, overwrite=force, labels=label, encoding=csv_encoding(encoding))
    console.print(f"report: {path}", markup=False, highlight=False)

@app.command()
@handle_errors
def serve(
    db: DbOpt = None,
    host: Annotated[str, typer.Option(
        "--host", metavar="ADDR", help="Address to listen on (any but loopback needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port to listen on.")] = 8000,
    token: Annotated[str | None, typer.Option(
        "--token", metavar="TOKEN", help="Require Authorization: Bearer TOKEN on the API; the web page sends the "
        "one typed into its token box (/, /health and the API docs /docs stay open). Prefer env RAG_API_TOKEN: "
        "a command line shows in ps. Beyond loopback: 16 characters or more."
        "  [default: env RAG_API_TOKEN, else none]", show_default=False)] = None,
    max_upload_mb: Annotated[float, typer.Option(
        "--max-upload-mb", metavar="MB", help="Largest accepted upload.")] = 100.0,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """HTTP API (/chat with sessions, /search, /documents, /pages) and a web page at / over the database."""
    from ragkit.core.config import env_value
    from ragkit.serve import run_server

    settings = load_settings(db=db, provider=provider, model=model, cache=not no_cache)
    if token is not None:
        err.print("warning: --token shows in the process list (ps) to every user of this machine; set "
                  "RAG_API_TOKEN instead", highlight=False, markup=False)
    _say_provider(settings)
    token = token if token is not None else (env_value("RAG_API_TOKEN") or None)
    run_server(settings, host=host, port=port, token=token,
               max_upload_mb=max_upload_mb, announce=lambda line: err.print(line, highlight=False, markup=False),
               progress=True)


def main() -> None:
    try:
        app(prog_name="rag")  # also under `python -m ragkit.cli`: help and errors name the command users type
    except KeyboardInterrupt:  # pragma: no cover - Ctrl-C outside a command body
        sys.exit(130)


