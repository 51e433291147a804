"""CSV in and out, the way spreadsheet users need it (DESIGN §4).

In: UTF-8, UTF-8 with BOM or Shift_JIS/CP932. Out: utf-8-sig, formula-looking cells escaped with a
leading apostrophe (stripped again when we read our own files), never over an existing file.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime
from pathlib import Path

import pandas as pd

from ragkit.errors import RagError
from ragkit.paths import atomic_write_text

ENCODINGS = ("utf-8-sig", "cp932")
_FORMULA = re.compile(r"^(?:[=+@\t\r]|-(?=\S))")
_ESCAPED = re.compile(r"^'(?:[=+@\t\r]|-(?=\S))")


def escape_cell(value: object) -> str:
    s = "" if value is None else str(value)
    if s == "nan" and isinstance(value, float):
        return ""
    return "'" + s if _FORMULA.match(s) else s


def unescape_cell(value: str) -> str:
    return value[1:] if isinstance(value, str) and _ESCAPED.match(value) else value


def decode_bytes(data: bytes, name: str) -> str:
    for enc in ENCODINGS:
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            continue
    raise RagError(f"{name}: not UTF-8 or Shift_JIS text; save it as CSV UTF-8")


def read_csv(path: Path, *, required: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read a CSV as strings (no NaN: empty cells are ""), detecting UTF-8/BOM/CP932.

    Column names are stripped; `required` columns missing -> one-line error listing what was found.
    """
    path = Path(path)
    if not path.is_file():
        raise RagError(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RagError(f"{path}: cannot read ({e.strerror or e})") from None
    text = decode_bytes(data, str(path))
    if not text.strip():
        raise RagError(f"{path}: the file is empty")
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skip_blank_lines=False)
    except (pd.errors.ParserError, csv.Error) as e:
        raise RagError(f"{path}: not a valid CSV ({str(e).splitlines()[0]})") from None
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        found = ", ".join(repr(c) for c in df.columns) or "none"
        raise RagError(f"{path}: missing column {', '.join(repr(m) for m in missing)}; columns found: {found}")
    return df.map(unescape_cell)


def to_csv_text(df: pd.DataFrame) -> str:
    out = df.copy()
    out.columns = [escape_cell(c) for c in out.columns]
    out = out.map(escape_cell)
    buf = io.StringIO()
    out.to_csv(buf, index=False, lineterminator="\r\n")
    return buf.getvalue()


def write_csv(df: pd.DataFrame, path: Path, *, overwrite: bool = False) -> Path:
    """Write utf-8-sig atomically. Refuses to replace an existing file unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise RagError(f"{path}: already exists; refusing to overwrite")
    atomic_write_text(path, to_csv_text(df), encoding="utf-8-sig")
    return path


def timestamped_path(results_dir: Path, stem: str, kind: str = "results", *, now: datetime | None = None) -> Path:
    """`results/<stem>_<kind>_YYYYMMDD_HHMMSS.csv`, made unique (`_2`, `_3`, ...) if that name is taken."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    ts = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    base = f"{stem}_{kind}_{ts}"
    path = results_dir / f"{base}.csv"
    n = 2
    while path.exists():
        path = results_dir / f"{base}_{n}.csv"
        n += 1
    return path


def summary_path_for(results_path: Path) -> Path:
    """`..._results_YYYYMMDD_HHMMSS.csv` -> `..._results_YYYYMMDD_HHMMSS_summary.csv`."""
    return results_path.with_name(results_path.stem + "_summary.csv")


def split_multi(cell: str) -> list[str]:
    """A multi-valued cell: one value per line, or separated by `;`."""
    if not cell:
        return []
    return [v.strip() for v in re.split(r"[\r\n;]+", cell) if v.strip()]


def split_checklist(cell: str) -> list[str]:
    """Checklist items, one per line; leading bullets ("- ", "* ", "・", "1. ") removed."""
    items = []
    for line in re.split(r"[\r\n]+", cell or ""):
        line = re.sub(r"^\s*(?:[-*•・●]|\d+[.)])\s*", "", line).strip()
        if line:
            items.append(line)
    return items


def join_multi(values: list[str]) -> str:
    return "\n".join(values)
