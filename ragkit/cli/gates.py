"""Pieces the commands share past parsing: the CSV encoding flag, --fail-under gates and how a command ends on them,
--print-path, and the option parser that lets --fail-on-regression stand alone."""

from __future__ import annotations

from pathlib import Path

import typer

from ragkit.core.console import make_console

console = make_console()
err = make_console(stderr=True)


def csv_encoding(flag: str | None) -> str | None:
    """--encoding, else RAG_CSV_ENCODING, checked (for the commands that need no other setting)."""
    from ragkit.core.config import check_encoding, env_value

    if flag is not None:
        return check_encoding(flag, "--encoding")
    return check_encoding(env_value("RAG_CSV_ENCODING"), "RAG_CSV_ENCODING")


def write_path(path: Path | None, wanted: bool) -> None:
    """--print-path: the file written, alone on stdout (nothing when nothing was written)."""
    if wanted and path is not None:
        console.out(str(path), highlight=False)


def finish_with_gates(report, out=console) -> None:
    """Exit 1 when rows failed; else 3 when a --fail-under gate is not met (one line per gate the library checked:
    report.gates)."""
    from ragkit.evaluate.gates import EXIT_GATE

    results = report.gates
    for r in results:
        (out if r.passed else err).print(r.line(), markup=False, highlight=False)
    if report.errors:
        raise typer.Exit(1)
    if any(not r.passed for r in results):
        raise typer.Exit(EXIT_GATE)


class OptionalDeltaCommand(typer.core.TyperCommand):
    """Lets `--fail-on-regression` stand alone (tolerance 0) or take a DELTA (click options need a value)."""

    def parse_args(self, ctx, args):
        from typer._click.exceptions import UsageError as ParseError

        args = list(args)
        word = None  # a word after the flag that is no number: a file (the flag stood alone) or a mistyped DELTA
        for i, a in enumerate(args):
            if a == "--fail-on-regression":
                nxt = args[i + 1] if i + 1 < len(args) else None
                try:
                    float(nxt) if nxt is not None else None
                except ValueError:
                    word, nxt = nxt, None
                if nxt is None:
                    args.insert(i + 1, "0")
                break
        try:
            return super().parse_args(ctx, args)
        except ParseError as e:
            # `--fail-on-regression abc OLD NEW`: the word was no file but the DELTA, not an "extra argument"
            if word is not None and not word.startswith("-") and "extra argument" in e.format_message():
                raise ParseError(f"--fail-on-regression: {word!r} is not a number", ctx=ctx) from None
            raise
