"""What `rag genqa` prints after a run."""

from __future__ import annotations

from collections import Counter

from ragkit.genqa.common import DUPLICATE_JACCARD, KINDS, GenqaReport

# every count in `GenqaReport.dropped`, said so that a reader knows what was left out and why
DROP_REASONS = {
    "duplicate": f"near-duplicates of a question already kept (word overlap >= {DUPLICATE_JACCARD})",
    "present": "unanswerable candidates the collection does answer after all (found by search or in the page "
               "text), so not used as unanswerable",
    "unsupported": "model questions whose answer or checklist the verification call found unsupported by the pages",
    "unverified": "model questions whose verification call failed (no valid reply)",
    "invalid": "model items without a question, an answer or a checklist",
    "language": "model questions not written in the language asked for",
}


def print_genqa_report(report: GenqaReport, console) -> None:
    from rich.table import Table

    table = Table(title="Generated questions", show_header=True)
    table.add_column("Kind")
    table.add_column("Count", justify="right")
    counts = report.counts()
    for kind in KINDS:
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
            console.print(f"dropped {n}: {DROP_REASONS.get(reason, reason)}", highlight=False)
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
    for e in report.errors:
        console.print(f"[red]error:[/red] {e}", highlight=False)
    if report.path is not None:
        console.print(f"questions written to {report.path}", highlight=False)
    else:
        console.print("[red]no questions file written[/red]")

