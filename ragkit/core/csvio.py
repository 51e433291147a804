"""CSV in and out, the way spreadsheet users need it (DESIGN §4).

In: UTF-8, UTF-8 with BOM, UTF-16 with BOM or Shift_JIS/CP932; comma, semicolon or tab separated. Out: utf-8-sig, formula-looking cells escaped with a
leading apostrophe (stripped again when we read our own files), never over an existing file.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import pandas as pd

from ragkit.core.errors import RagError
from ragkit.core.paths import atomic_write_text

ENCODINGS = ("utf-8-sig", "cp932")
_FORMULA = re.compile(r"^(?:[=+@\t\r]|-(?=\S))")
_ESCAPED = re.compile(r"^'(?:[=+@\t\r]|-(?=\S))")
SEPARATORS = {",": "comma", ";": "semicolon", "\t": "tab"}


def escape_cell(value: object) -> str:
    s = "" if value is None else str(value)
    if s == "nan" and isinstance(value, float):
        return ""
    return "'" + s if _FORMULA.match(s) else s


def unescape_cell(value: str) -> str:
    return value[1:] if isinstance(value, str) and _ESCAPED.match(value) else value


def decode_bytes(data: bytes, name: str) -> str:
    """UTF-16 with a BOM (Excel's "Unicode text"), UTF-8 with or without a BOM, else Shift_JIS/CP932."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise RagError(f"{name}: starts with a UTF-16 byte order mark but is not valid UTF-16; "
                           "save it as CSV UTF-8") from None
    for enc in ENCODINGS:
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            continue
    hint = " (it looks like UTF-16 without a byte order mark)" if data[:200].count(b"\x00") > 10 else ""
    raise RagError(f"{name}: cannot decode the text; tried UTF-8, UTF-16 with a byte order mark and "
                   f"Shift_JIS/CP932{hint}; save it as CSV UTF-8")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (short strings: column names)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _squash(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).casefold()


def near_miss(name: str, known: Iterable[str]) -> str | None:
    """The known column that `name` nearly spells (case, spacing, one or two edits), or None."""
    if name in known:
        return None
    sq = _squash(name)
    best: tuple[int, str] | None = None
    for k in known:
        if _squash(k) == sq:
            return k
        limit = 1 if len(k) <= 5 else 2
        d = _edits(name.casefold(), k.casefold())
        if d <= limit and (best is None or d < best[0]):
            best = (d, k)
    return best[1] if best else None


def _separator(text: str) -> str:
    """The field separator, from the header line: a comma unless the header has none and has `;` or tabs."""
    header = text.split("\n", 1)[0]
    if "," in header:
        return ","
    counts = {sep: header.count(sep) for sep in (";", "\t")}
    sep, n = max(counts.items(), key=lambda kv: kv[1])
    return sep if n else ","


def read_csv(path: Path, *, required: tuple[str, ...] = (), known: Iterable[str] | None = None) -> pd.DataFrame:
    """Read a CSV as strings (no NaN: empty cells are ""), strictly.

    - Encodings: UTF-8 (with or without BOM), UTF-16 with a BOM, Shift_JIS/CP932.
    - Separator: comma, or semicolon/tab when the header line has no comma.
    - A row with more (non-empty) fields than the header is an error naming the row; missing fields are "".
    - Column names are stripped; `required` columns missing -> one-line error listing what was found;
      with `known`, a column whose name nearly matches a known one is an error naming both (other unknown
      columns pass through); a column name given twice is an error.
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
    sep = _separator(text)
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
        header = next(reader)
        records: list[list[str]] = []
        for fields in reader:
            if len(fields) > len(header) and any(f.strip() for f in fields[len(header):]):
                raise RagError(f"{path}: row {len(records) + 2} (line {reader.line_num}) has {len(fields)} "
                               f"fields but the header has {len(header)}; a {SEPARATORS.get(sep, sep)} inside a cell "
                               "needs the cell in double quotes")
            records.append((fields + [""] * len(header))[: len(header)])
    except csv.Error as e:
        raise RagError(f"{path}: not a valid CSV ({str(e).splitlines()[0]})") from None
    columns = [str(c).strip() or f"Unnamed: {i}" for i, c in enumerate(header)]
    dup = next((c for i, c in enumerate(columns) if c in columns[:i]), None)
    if dup is not None:
        raise RagError(f"{path}: the column {dup!r} appears twice; rename or remove one")
    if known is not None:
        known = tuple(known)
        for c in columns:
            k = near_miss(c, known)
            if k is not None:
                raise RagError(f"{path}: column {c!r} looks like {k!r}; rename it to {k!r} (or to something "
                               "clearly different to keep it as an extra column)")
    missing = [c for c in required if c not in columns]
    if missing:
        found = ", ".join(repr(c) for c in columns) or "none"
        seps = [name for s_, name in SEPARATORS.items() if s_ != sep and s_ in text.split("\n", 1)[0]]
        also = f"; the header also contains {' and '.join(seps)}s" if seps else ""
        raise RagError(f"{path}: missing column {', '.join(repr(m) for m in missing)}; columns found: {found} "
                       f"(read as {SEPARATORS.get(sep, repr(sep))}-separated{also})")
    df = pd.DataFrame(records, columns=columns, dtype=str)
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
