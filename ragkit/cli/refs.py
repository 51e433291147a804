"""`rag refs update`: parse, call ragkit.evaluate.refs.update_references, print (cli/render), exit 1 when a path
was not found. Registered by ragkit/cli/__init__.py, which wraps it in its error handler."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ragkit.cli.gates import console, csv_encoding, err
from ragkit.cli.options import DbOpt, EncodingOpt
from ragkit.core.config import load_settings
from ragkit.core.text import one_line


def refs_update(
    csv: Annotated[Path, typer.Argument(
        metavar="QUESTIONS.csv", help="A question CSV (or a results CSV) whose page paths to update.",
        show_default=False)],
    db: DbOpt = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="FILE", help="Write the updated CSV to this new file (an existing one is "
        "refused).  [default: none]", show_default=False)] = None,
    in_place: Annotated[bool, typer.Option(
        "--in-place", help="Rewrite QUESTIONS.csv itself, keeping the previous file as <name>.bak-YYYYMMDD_HHMMSS."
        "  [default: off]", show_default=False)] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only say what would change; write nothing.  [default: off]", show_default=False)] = False,
    encoding: EncodingOpt = None,
) -> None:
    """Rewrite the page paths of a question CSV that a re-ingest moved to other section folders to where the
    pages are now (only those paths change; the file keeps its encoding, line endings and every other byte)."""
    from ragkit.cli.render import print_refs_report
    from ragkit.evaluate.refs import update_references

    report = update_references(csv, load_settings(db=db).db, output=output, in_place=in_place, dry_run=dry_run,
                               encoding=csv_encoding(encoding))
    print_refs_report(report, console)
    for e in report.errors():
        err.print(f"[red]error:[/red] {escape(one_line(e))}", highlight=False)
    if report.errors():
        raise typer.Exit(1)
