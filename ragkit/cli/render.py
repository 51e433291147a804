"""What the commands print: the library returns data, and this module turns it into lines for a terminal or a log,
or into one JSON object."""

from __future__ import annotations

import json
from typing import Any

from ragkit.core.models import Answer
from ragkit.core.text import one_line, strip_controls
from ragkit.ingest import IngestReport, outdated_note


def print_answer(answer: Answer, *, fmt: str = "text", console: Any = None) -> None:
    """Show an Answer: fmt "json" prints exactly Answer.to_json() as one JSON object on stdout; "text" prints
    the answer, its sources (path and page), refusal/offline/general-knowledge notes, tokens, cost, time."""
    from rich.console import Console
    from rich.markup import escape

    console = console if console is not None else Console()
    if fmt == "json":
        console.out(json.dumps(answer.to_json(), ensure_ascii=False), highlight=False)
        if answer.error:
            from ragkit.core.console import make_console

            make_console(stderr=True).print(f"[red]error:[/red] {escape(one_line(answer.error))}", highlight=False)
        return
    if answer.error:
        console.print(f"[red]error:[/red] {escape(answer.error)}", highlight=False)
    if answer.provider == "offline":
        # said even when the answer text carries its own offline note: the strategy name alone would suggest
        # that agent, naive and synth differ offline
        console.print("[yellow]offline:[/yellow] deterministic extractive answer, no model; agent, naive and "
                      "synth are one engine offline; set OPENAI_API_KEY for model answers", highlight=False)
    if answer.fallback == "reread":
        console.print("[yellow]note:[/yellow] the agent refused after reading; one focused reading of the pages "
                      "it read (as naive reads its pages) gave this answer", highlight=False)
    elif answer.fallback:
        console.print(f"[yellow]note:[/yellow] the model read no page itself, so the agent searched as "
                      f"{answer.fallback} does and answered from those pages", highlight=False)
    if answer.general_knowledge:
        console.print("[yellow]general knowledge:[/yellow] nothing relevant was found in the documents; "
                      "this answer does not come from them", highlight=False)
    if answer.answer:
        console.print(answer.answer, markup=False, highlight=False)
    if answer.refused:
        console.print("[yellow]refused:[/yellow] the documents do not contain the answer", highlight=False)
    if answer.sources:
        console.print("\n[bold]Sources[/bold]")
        for i, s in enumerate(answer.sources, 1):
            title = f" — {escape(s.title)}" if s.title else ""
            console.print(f"  {i}. [cyan]{escape(s.path)}[/cyan] (page {s.page}){title}", highlight=False)
            if s.excerpt:
                console.print(f"     [dim]{escape(s.excerpt[:200])}[/dim]", highlight=False)
    u = answer.usage
    cost = "cost unknown" if u.cost_usd is None else f"${u.cost_usd:.4f}"
    console.print(f"\n[dim]{answer.provider} · {answer.model} · {answer.strategy} · {answer.steps} step{'s' if answer.steps != 1 else ''} · "
                  f"{u.input_tokens:,} in / {u.output_tokens:,} out tokens · {cost} · "
                  f"confidence {answer.confidence:.2f} · {answer.latency_ms / 1000:.1f} s[/dim]", highlight=False)


# -- rag ingest ---------------------------------------------------------------------------------------
_SHOW_IGNORED = 10  # names listed before "and N more"


def print_ingest_report(report: IngestReport, console) -> None:
    """A summary table, then one line per failure."""
    from rich.markup import escape
    from rich.table import Table

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
    if report.ignored:
        shown = ", ".join(report.ignored[:_SHOW_IGNORED])
        more = f" and {len(report.ignored) - _SHOW_IGNORED} more" if len(report.ignored) > _SHOW_IGNORED else ""
        console.print(f"ignored {len(report.ignored)} file(s) of other types: {strip_controls(shown)}{more}",
                      highlight=False, markup=False)
    for path, warning in report.warnings:
        console.print(f"warning: {strip_controls(path)}: {warning}", highlight=False, markup=False)
    if report.outdated:
        console.print(outdated_note(report), highlight=False, markup=False, soft_wrap=True)
    for path, reason in report.failed:
        console.print(f"failed: {strip_controls(path)}: {one_line(reason)}", highlight=False, markup=False,
                      soft_wrap=True)
