"""Options that commands defined outside ragkit/cli/__init__.py share with it (the database, the CSV encoding):
each declared once, its default shown in --help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DbOpt = Annotated[Path | None, typer.Option(
    "--db", metavar="DIR", help="Database folder.  [default: ./database, or env RAG_DB]", show_default=False)]
EncodingOpt = Annotated[str | None, typer.Option(
    "--encoding", metavar="NAME", help="Read input CSVs in this encoding (e.g. cp1252, latin-1, euc-jp, utf-16-le). "
    "Without it: UTF-8, UTF-16/32 with a BOM, Shift_JIS/CP932; any other is refused by name."
    "  [default: env RAG_CSV_ENCODING, else none]", show_default=False)]
