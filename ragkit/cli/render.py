"""What the commands print: the library returns data, and this module turns it into lines for a terminal or a log,
or into one JSON object."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragkit.core.models import Answer, SearchHit, Source
from ragkit.core.paths import reference_path
from ragkit.core.text import clean_json, one_line, strip_controls

if TYPE_CHECKING:  # each command imports only its own stages (pandas alone takes a second to import)
    from ragkit.evaluate.results import BatchReport
    from ragkit.evolve import EvolveReport
    from ragkit.genqa.common import GenqaReport
    from ragkit.ingest import IngestReport
    from ragkit.optimize import OptimizeReport


def print_answer(answer: Answer, *, fmt: str = "text", console: Any = None, err_console: Any = None) -> None:
    """Show an Answer: fmt "json" prints exactly Answer.to_json() as one JSON object on stdout; "text" prints
    the answer, its sources (path and page), refusal/offline/general-knowledge notes, tokens, cost, time.

    An error is one line on `err_console` (stderr unless given), as every command's errors are; in text mode it
    is all that is printed (a failed answer has no text), so `a=$(rag ask ...)` never captures the error as the
    answer. In JSON it is the object's `error` only: said once."""
    from rich.console import Console
    from rich.markup import escape

    from ragkit.core.console import make_console

    console = console if console is not None else Console()
    if answer.error and fmt != "json":
        err_console = err_console if err_console is not None else make_console(stderr=True)
        err_console.print(f"[red]error:[/red] {escape(one_line(answer.error))}", highlight=False)
    if fmt == "json":
        console.out(json.dumps(clean_json(answer.to_json()), ensure_ascii=False), highlight=False)
        return
    if answer.error:
        return
    if answer.provider == "offline":
        # said even when the answer text carries its own offline note: the strategy name alone would suggest
        # that agent, naive and synth differ offline
        console.print("[yellow]offline:[/yellow] deterministic extractive answer, no model; agent, naive and "
                      "synth are one engine offline; set OPENAI_API_KEY for model answers", highlight=False)
    if answer.fallback == "reread":
        # what happened, in the order it happened: the agent's own reply was a refusal; a second call answered
        console.print("[yellow]note:[/yellow] the agent first replied that the documents do not answer this; a "
                      "second call, given only the question and the pages it had read, found this answer on them "
                      "(so its confidence is capped: the two calls disagree); check the cited page", highlight=False)
    elif answer.fallback == "unconfirmed":
        console.print("[yellow]note:[/yellow] the agent answered, but one focused reading of its start and cited "
                      "pages found no answer there, so it refuses", highlight=False)
    elif answer.fallback:
        console.print(f"[yellow]note:[/yellow] the model read no page itself, so the agent searched as "
                      f"{answer.fallback} does and answered from those pages", highlight=False)
    if answer.general_knowledge:
        console.print("[yellow]general knowledge:[/yellow] nothing relevant was found in the documents; "
                      "this answer does not come from them", highlight=False)
    if answer.answer:
        console.print(answer.answer, markup=False, highlight=False)
    if answer.refused and answer.documents_meant:
        console.print(f"[yellow]refused:[/yellow] the question names no document, and "
                      f"{len(answer.documents_meant)} hold its words: name the one you mean", highlight=False)
    elif answer.refused and answer.closest:
        console.print("[yellow]refused:[/yellow] no sentence answers in the question's words; closest in meaning, "
                      "not checked to answer it:", highlight=False)
        _print_pages(answer.closest, console)
    elif answer.refused:
        console.print("[yellow]refused:[/yellow] the documents do not contain the answer", highlight=False)
    if answer.sources:
        console.print("\n[bold]Sources[/bold]")
        _print_pages(answer.sources, console)
    u = answer.usage
    cost = "cost unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}"
    # the model the server says answered, when it is not the one asked for (a typo llama-server ignores)
    model = f"{answer.model} (served: {answer.served_model})" if answer.served_model else answer.model
    console.print(f"\n[dim]{answer.provider} · {escape(model)} · {answer.strategy} · {answer.steps} step{'s' if answer.steps != 1 else ''} · "
                  f"{u.input_tokens:,} in / {u.output_tokens:,} out tokens · {cost} · "
                  f"confidence {answer.confidence:.2f} · {answer.latency_ms / 1000:.1f} s[/dim]", highlight=False)



def _print_pages(sources: list[Source], console: Any) -> None:
    """A numbered list of pages: path, page, title, and the excerpt when there is one."""
    from rich.markup import escape

    for i, s in enumerate(sources, 1):
        title = f" — {escape(s.title)}" if s.title else ""
        console.print(f"  {i}. [cyan]{escape(s.path)}[/cyan] (page {s.page}){title}", highlight=False)
        if s.excerpt:
            console.print(f"     [dim]{escape(s.excerpt[:200])}[/dim]", highlight=False)

# -- rag ingest ---------------------------------------------------------------------------------------
_SHOW_IGNORED = 10  # names listed before "and N more"


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _SHOW_IGNORED} more" if len(names) > _SHOW_IGNORED else ""
    return ", ".join(names[:_SHOW_IGNORED]) + more


def print_ingest_report(report: IngestReport, console, err_console=None) -> None:
    """A summary table, then one line per failure on `err_console` (stderr unless given), as every command's
    errors are."""
    from rich.markup import escape
    from rich.table import Table

    from ragkit.ingest import outdated_note

    table = Table(title=f"rag ingest -> {escape(strip_controls(report.db))}", title_justify="left")
    for col in ("documents", "pages", "skipped (unchanged)", "failed", "pages without text", "seconds"):
        table.add_column(col, justify="right")
    table.add_row(
        str(report.documents), str(report.pages), str(report.skipped), str(len(report.failed)),
        str(report.pages_without_text), f"{report.seconds:.1f}",
    )
    console.print(table)
    if report.removed:
        console.print(f"removed {len(report.removed)} outdated page file(s)", highlight=False)
    if report.copies_refreshed or report.copies_removed:
        console.print(f"copies of re-converted pages elsewhere in their category (the optimizer's): "
                      f"{len(report.copies_refreshed)} refreshed from the new page, {len(report.copies_removed)} "
                      "removed (their page is gone)", highlight=False)
    if report.pruned:
        console.print(f"pruned {len(report.pruned)} document(s) whose file is gone: "
                      f"{escape(_listed(report.pruned))}", highlight=False)
    if report.orphans:
        console.print(f"[yellow]kept:[/yellow] {len(report.orphans)} document(s) whose file under the folders "
                      f"given is gone (renamed or deleted): {escape(_listed(report.orphans))}; `--prune` removes "
                      "them", highlight=False)
    if report.ignored:
        shown = ", ".join(report.ignored[:_SHOW_IGNORED])
        more = f" and {len(report.ignored) - _SHOW_IGNORED} more" if len(report.ignored) > _SHOW_IGNORED else ""
        console.print(f"ignored {len(report.ignored)} file(s) of other types: {strip_controls(shown)}{more}",
                      highlight=False, markup=False)
        from ragkit.ingest.run import convert_first

        if hint := convert_first(report.ignored):
            console.print(f"  {hint}", highlight=False, markup=False)
    if report.hidden:
        shown = ", ".join(report.hidden[:_SHOW_IGNORED])
        more = f" and {len(report.hidden) - _SHOW_IGNORED} more" if len(report.hidden) > _SHOW_IGNORED else ""
        console.print(f"skipped {len(report.hidden)} hidden file(s) and folder(s): {strip_controls(shown)}{more}",
                      highlight=False, markup=False)
    if report.temporaries:
        console.print(f"removed {report.temporaries} half-written page file(s) an interrupted ingest left",
                      highlight=False)
    for path, warning in report.warnings:
        console.print(f"warning: {strip_controls(path)}: {warning}", highlight=False, markup=False)
    if report.outdated:
        console.print(outdated_note(report), highlight=False, markup=False, soft_wrap=True)
    if report.failed:
        from ragkit.core.console import make_console

        err_console = err_console if err_console is not None else make_console(stderr=True)
    for path, reason in report.failed:
        err_console.print(f"failed: {strip_controls(path)}: {one_line(reason)}", highlight=False, markup=False,
                          soft_wrap=True)


# -- rag batch / rag eval -----------------------------------------------------------------------------------------
# what a user needs first (DESIGN §5); TN and accuracy stay in the CSVs: over a whole database they say little
def _headline() -> tuple[tuple[str, str], ...]:
    from ragkit.evaluate.retrieval import SEARCH_COLUMNS

    return (
        ("Ref Recall", "Ref Recall"),
        *((c, c) for c in SEARCH_COLUMNS),  # only --strategy search computes them; absent columns are not shown
        ("Checklist Recall", "Checklist Recall"),
        ("Checklist Precision", "Checklist Precision"),
        ("Judge Passed", "Judge pass rate"),
        ("Refusal Rate Answerable", "Refused, answerable"),
        ("Refusal Rate Unanswerable", "Refused, unanswerable"),
        # summarization rows (the Task column): their own section of the summary, named as in its CSV
        ("Summarization ROUGE-2 F1", "Summarization ROUGE-2 F1"),
        ("Summarization G-Eval Faithfulness", "Summarization G-Eval Faithfulness (1-5)"),
        ("Summarization G-Eval Coverage", "Summarization G-Eval Coverage (1-5)"),
        ("Summarization G-Eval", "Summarization G-Eval"),  # "not measured": no judge model scored them
        ("Summarization Page Recall", "Summarization Page Recall"),
        ("Summarization Page Precision", "Summarization Page Precision"),
        ("Summarization Word Count", "Summarization Word Count"),
    )


def print_batch_report(report: BatchReport, console) -> None:
    """Key metrics, totals of tokens, cost and wall time, errors, and the paths of the files written."""
    from rich.table import Table

    from ragkit.evaluate.metrics import parse_number
    from ragkit.evaluate.summarization import NOT_MEASURED

    title = "rag eval" if report.kind == "eval" else "rag batch"
    by_metric = {r.get("Metric"): r for r in report.summary}
    table = Table(title=f"{title}: {report.questions} rows", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("mean", justify="right")
    table.add_column("micro", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("covers")
    headline = list(_headline())
    if report.optimize is not None:  # only when this run optimized
        # the rows' answers scored against original|copy (an empty cell: the Reference Document), not an "after"
        # figure: the before/after measurement is the optimize lines below
        headline.append(("Opt Ref Recall", "Opt Ref Recall"))
    judged = by_metric.get("Judge Passed") or {}
    if not parse_number(judged.get("Rows")) or str(judged.get("Covers") or "").startswith("unanswerable"):
        # no judge scored an answer (offline): the rule's refusals alone would read as a 100% pass rate
        headline = [("Contain Match", "Contain-Match") if h[0] == "Judge Passed" else h for h in headline]
    shown = 0
    for m, label in headline:
        r = by_metric.get(m)
        if r is None or parse_number(r.get("Rows")) in (None, 0.0):
            continue
        # a figure no judge measured reads as the CSV says it ("not measured"), never as a blank mean
        mean = r.get("Total") if r.get("Mean") in (None, "") and r.get("Total") == NOT_MEASURED else r.get("Mean")
        table.add_row(label, _num(mean), _num(r.get("Micro")), str(r.get("Rows")), str(r.get("Covers") or ""))
        shown += 1
    if shown:
        console.print(table)
    elif report.kind == "batch":
        console.print("no ground truth columns: answers only, no metrics", highlight=False)
    rule = by_metric.get("Passed by rule")
    if rule is not None:
        console.print(f"passed by rule: {rule.get('Total')} refusal(s) of unanswerable questions (judge columns set "
                      "by rule, not by a judge; left out of the judge means)", highlight=False, markup=False)
    for note in report.run.notes:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)

    lines = [f"rows: {report.questions}"
             + (f", resumed from checkpoint: {report.resumed}" if report.resumed else "")
             + (f", blank rows skipped: {report.skipped_blank}" if report.skipped_blank else ""),
             *_usage_lines(report),
             f"wall time: {report.wall_s:.1f} s"]
    for line in lines:
        console.print(line, highlight=False)
    if report.optimize is not None:
        print_optimize_report(report.optimize, console)
    if report.measure is not None:
        for line in report.measure.lines():
            console.print(f"optimize: {line}", highlight=False, markup=False, soft_wrap=True)
    if report.missed_pages:
        console.print(f"{report.missed_pages} reference page(s) were missed in {report.missed_rows} question(s); "
                      "nothing was changed: --optimize copies them where the agent would look, --enable-rl keeps "
                      "only the copies that help", highlight=False, markup=False, soft_wrap=True)
    if report.errors:
        console.print(f"[red]{len(report.errors)} error(s)[/red]:", highlight=False)
        for e in report.errors[:10]:
            console.print(f"  {e}", highlight=False, markup=False)
        if len(report.errors) > 10:
            console.print(f"  ... {len(report.errors) - 10} more (see the Error / Judge Error columns)",
                          highlight=False)
        if report.checkpoint_kept and report.checkpoint_path is not None:
            console.print(f"run the same command again to retry the failed rows (checkpoint "
                          f"{report.checkpoint_path})", highlight=False, markup=False)
    if report.results_path:
        console.print(f"results: {report.results_path}", highlight=False, markup=False)
    if report.summary_path:
        console.print(f"summary: {report.summary_path}", highlight=False, markup=False)
    if report.run_path:
        console.print(f"run record: {report.run_path}", highlight=False, markup=False)


def _usage_lines(report: BatchReport) -> list[str]:
    """The tokens and cost lines. An eval asked nothing: its answers' figures are the re-scored results' (as its
    summary says), its judges' are its own."""
    u, judges = report.usage, report.judge_usage
    judge_tokens = judges.input_tokens + judges.output_tokens
    if report.kind == "eval" and not report.answer_usage_known:
        tokens = f"tokens: answers unknown (not in the re-scored results); judges {judges.input_tokens:,} in / " \
                 f"{judges.output_tokens:,} out"
    else:
        tokens = f"tokens: {u.input_tokens:,} in / {u.output_tokens:,} out"
        if report.kind == "eval":
            tokens += f" (answers from the re-scored results, not asked again; judges: {judge_tokens:,})"
        elif judges.calls or judges.input_tokens:
            tokens += f" (judges: {judge_tokens:,})"
    if u.cost_usd is None:
        cost = "unknown (a model without a price" + (", or no Cost USD in the re-scored results)"
                                                   if report.kind == "eval" else ")")
    elif report.run.retrieval_only and not u.calls and not u.cost_usd:
        cost = "$0 (retrieval only: no model calls)"
    elif report.provider == "offline" and not u.calls and not u.cost_usd:
        cost = "$0 (offline: no model calls)"
    else:
        cost = f"${u.cost_usd:.4f}"
    return [tokens, f"cost: {cost}"]


def _num(v: Any) -> str:
    if v in (None, ""):
        return "-"
    try:
        return f"{float(v):.3f}"
    except (TypeError, ValueError):
        return str(v)


# -- rag batch --optimize / --enable-rl -------------------------------------------------------------
def print_optimize_report(report: OptimizeReport, console) -> None:
    """A few lines for the end of `rag batch`."""
    from ragkit.optimize import OPT_COL

    for note in report.notes:
        console.print(f"optimize: {note}", highlight=False)
    if not report.analysed and not report.errors:
        held = (f" ({report.held_out_missed} held-out row(s) missed one: held-out rows measure the copies, they "
                "never drive one)" if report.held_out_missed else "")
        console.print(f"optimize: no missed reference pages among the {report.rows_scored} training row(s){held}; "
                      "nothing copied", highlight=False, markup=False, soft_wrap=True)
        return
    console.print(f"optimize: {report.analysed} rows analysed; copies created {report.created}, kept "
                  f"{report.kept}, rolled back {report.rolled_back}", highlight=False)
    if report.enable_rl:
        console.print(f"optimize: {report.fixed} of {report.analysed} rows reached Ref Recall 1 after re-asking",
                      highlight=False)
    kept = [r.copy for r in report.copies if r.outcome == "kept" and r.created]
    if kept and not report.enable_rl:
        console.print("optimize: --optimize keeps every copy it makes (one pass, nothing re-asked: the Ref Recall "
                      "lines below tell whether they helped); --enable-rl keeps only the copies that help",
                      highlight=False, markup=False, soft_wrap=True)
    db = report.record_path.parents[2] if report.record_path else None
    for rel in kept[:10]:
        console.print(f"optimize: kept copy {reference_path(db, rel) if db else rel}", highlight=False, markup=False)
    if len(kept) > 10:
        console.print(f"optimize: ... {len(kept) - 10} more copies", highlight=False)
    if report.record_path:
        console.print(f"optimize: the copies are listed in {report.record_path}; `rag optimize undo "
                      f"{report.record_path.stem} --db {report.record_path.parents[2]}` removes them", highlight=False,
                      markup=False, soft_wrap=True)
    if report.csv_path:
        console.print(f"optimize: updated {report.csv_path} (`{OPT_COL}`); previous file kept as "
                      f"{report.backup_path}", highlight=False)
    for e in report.errors[:10]:
        console.print(f"optimize: [red]error[/red] {e}", highlight=False)
    if len(report.errors) > 10:
        console.print(f"optimize: ... {len(report.errors) - 10} more errors", highlight=False)


def print_undo_report(report, console) -> None:
    """What `rag optimize undo` removed and left, or (a list of run records) the runs it can undo."""
    from rich.markup import escape as escape_markup

    if isinstance(report, list):
        for r in report:
            console.print(f"{r['run']}  {r.get('date', '')}  {r.get('mode', '')}  {len(r['copies'])} copies  "
                          f"{r.get('input_csv') or ''}", highlight=False, markup=False, soft_wrap=True)
        if not report:
            console.print("no optimization run has copies in this database", highlight=False)
        return
    console.print(f"optimize undo {report.run}: removed {len(report.removed)} copies"
                  + (f", {len(report.missing)} already gone" if report.missing else ""), highlight=False)
    for rel in report.edited:
        console.print(f"[yellow]kept:[/yellow] {escape_markup(rel)} was edited since the run; delete it by hand if "
                      "it should go, then run undo again", highlight=False)
    if report.restored_from:
        console.print(f"restored {report.csv_path} as it was before the run (byte for byte, from "
                      f"{report.restored_from})", highlight=False, markup=False)
    elif report.csv_path:
        console.print(f"updated {report.csv_path} (`Optimized Reference Document`); previous file kept as "
                      f"{report.backup_path}", highlight=False, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False, markup=False)


def print_refs_report(report, console) -> None:
    """What `rag refs update` changed (or, in a dry run, would change), a summary line, and where it wrote."""
    for c in report.changes:
        console.print(f"row {c.row}, {c.column}: {c.old} -> {c.new}", highlight=False, markup=False,
                      soft_wrap=True)
    verb = "to update" if report.dry_run else "updated"
    console.print(f"{report.csv}: {report.rows} rows, {len(report.changes)} references {verb} in "
                  f"{report.rows_changed} rows, {len(report.missing) - report.to_check} not found"
                  + (f", {report.to_check} to check by hand" if report.to_check else "")
                  + (" (dry run: nothing written)" if report.dry_run else ""), highlight=False, markup=False)
    if report.written and report.backup:
        undo = f"mv {shlex.quote(str(report.backup))} {shlex.quote(str(report.written))}"
        console.print(f"rewrote {report.written}; previous file kept as {report.backup} (to undo: {undo})",
                      highlight=False, markup=False)
    elif report.written:
        console.print(f"wrote {report.written}", highlight=False, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False, markup=False)


# -- rag search -----------------------------------------------------------------------------------------
def print_hits(hits: list[SearchHit], db: Path, *, fmt: str = "text", console: Any = None) -> None:
    """A table of hits, or (fmt "json") the JSON list of search.hits_json."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ragkit.search import hits_json

    console = console or Console()
    if fmt == "json":
        console.out(json.dumps(clean_json(hits_json(hits, db)), ensure_ascii=False, indent=2), highlight=False)
        return
    if not hits:
        console.print("no matching pages")
        return
    from ragkit.search.backend import index_label, ranking_note

    table = Table(show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("page file", overflow="fold")
    table.add_column("p.", justify="right")
    table.add_column("title / snippet", overflow="fold")
    table.add_column("score", justify="right")
    for i, h in enumerate(hits, 1):
        page = f"{h.page}\n(printed {escape(h.printed_page)})" if h.printed_page else str(h.page)
        table.add_row(str(i), escape(reference_path(Path(db), h.path)), page,
                      f"[bold]{escape(h.title)}[/bold]\n{escape(h.snippet)}", f"{h.score:.3f}")
    console.print(table)
    console.print(f"{ranking_note(hits)}; index: {index_label(Path(db))}", highlight=False, markup=False,
                  style="dim")


# -- rag genqa ------------------------------------------------------------------------------------------
# every count in `GenqaReport.dropped`, said so that a reader knows what was left out and why
def _drop_reasons() -> dict[str, str]:
    from ragkit.genqa.common import DUPLICATE_JACCARD

    return {
        "duplicate": f"near-duplicates of a question already kept (word overlap >= {DUPLICATE_JACCARD}, or the "
                     "same answer in words from the same pages)",
        "checklist": "checklist points naming a figure or a subject neither their answer nor their question holds "
                     "(left out of the checklist; the question kept)",
        "present": "unanswerable candidates the collection does answer after all (found by search or in the page "
                   "text), so not used as unanswerable",
        "unsupported": "model questions whose answer or checklist the verification call found unsupported by the pages",
        "unverified": "model questions whose verification call failed (no valid reply)",
        "invalid": "model items without a question, an answer or a checklist",
        "language": "model questions not written in the language asked for",
    }


def genqa_interrupted(report: GenqaReport) -> str:
    """The line `rag genqa` stopped by Ctrl-C ends with: what it kept."""
    if report.questions:
        return f"interrupted; the {len(report.questions)} question(s) confirmed until then are in {report.path}"
    return "interrupted; no question was confirmed yet, so no question file was written"


def print_genqa_report(report: GenqaReport, console) -> None:
    if report.interrupted and not report.questions:
        return  # nothing was generated: the interrupted line says so
    from rich.table import Table

    from ragkit.genqa.common import KINDS

    table = Table(title="Generated questions", show_header=True)
    table.add_column("Kind")
    table.add_column("Count", justify="right")
    counts = report.counts()
    for kind in (*KINDS, "summarization"):
        if kind in counts:
            table.add_row(kind, str(counts[kind]))
    table.add_row("total", str(len(report.questions)))
    console.print(table)
    langs = Counter(q.lang for q in report.questions)
    if langs:
        console.print("languages: " + ", ".join(f"{k} {v}" for k, v in sorted(langs.items())), highlight=False)
    console.print(f"pages: {report.pages_used} referenced of {report.pages_total} usable in {report.source}",
                  highlight=False)
    for reason, n in sorted(report.dropped.items()):
        if n:
            console.print(f"dropped {n}: {_drop_reasons().get(reason, reason)}", highlight=False)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False)
    u = report.usage
    if report.provider == "offline":
        console.print("provider: offline (deterministic, no model; 0 tokens, cost 0)", highlight=False)
    else:
        cost = "unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}"
        console.print(f"provider: {report.provider} ({report.model}); tokens in {u.input_tokens}, "
                      f"out {u.output_tokens}, calls {u.calls}; cost {cost}", highlight=False)
    if report.skipped:
        console.print(f"[yellow]skipped {len(report.skipped)}:[/yellow]")
        for where, reason in report.skipped[:20]:
            console.print(f"  {where.replace(chr(10), ' + ')}: {reason}", highlight=False, markup=False)
        if len(report.skipped) > 20:
            console.print(f"  ... and {len(report.skipped) - 20} more", highlight=False)
    # report.errors are printed by the CLI, one line each on stderr (as every command's errors)
    if report.path is not None:
        console.print(f"questions written to {report.path}", highlight=False)
        if report.run_path is not None:
            console.print(f"run record: {report.run_path}", highlight=False, markup=False)
    else:
        console.print("[red]no questions file written[/red]")


# -- rag evolve -----------------------------------------------------------------------------------------
def print_evolve_report(report: EvolveReport, console: Any) -> None:
    from rich.markup import escape

    for r in report.results:
        console.print(f"[bold]{escape(r.experiment_id)}[/bold]  {escape(str(r.folder))}", highlight=False)
        for c in r.curve:
            note = "  (done before, skipped)" if c["skipped"] else ""
            console.print(f"  iter{c['generation']}: best {c['best']:g}  mean {c['mean']:g}  "
                          f"best so far {c['best_so_far']:g}{note}", highlight=False)
        if r.best:
            console.print(f"  best: {escape(r.best['file'])} (score {r.best['score']:g})", highlight=False)
        if r.holdout and "holdout_best" in r.holdout:
            console.print(f"  held-out: best prompt {r.holdout['holdout_best']['score']:g}, built-in prompt "
                          f"{r.holdout['holdout_builtin_prompt']['score']:g}", highlight=False)
        if r.tokens:
            cost = r.tokens.get("cost_usd")
            console.print(f"  {r.tokens['total_tokens']} tokens in {r.tokens['calls']} model call(s); cost "
                          f"{'unknown' if cost is None else f'${cost:.4f}'}", highlight=False)
        if r.error:  # the error itself is one line on stderr (the CLI); here only where to look
            console.print("  stopped: see the error for this experiment", highlight=False)


# -- rag index sync --------------------------------------------------------------------------------------
def print_sync_report(report: Any, db: Path, console: Any) -> None:
    """One line: what the index of `db` gained, changed and lost (None: the embedded engine, rescanned)."""
    from ragkit.search import index_config

    cfg = index_config(db)
    if report is None:
        console.print(f"index: {cfg.label}, up to date with the page files of {db}", highlight=False)
        return
    again = getattr(report, "reanalysed", 0)
    updated = f"{report.updated} updated" + (f" ({again} analysed again by this ragkit)" if again else "")
    console.print(f"index: {cfg.label}: {report.added} added, {updated}, {report.deleted} deleted, "
                  f"{report.unchanged} unchanged ({report.seconds:.1f} s)", highlight=False, markup=False)
