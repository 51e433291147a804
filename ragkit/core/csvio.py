"""CSV in and out, the way spreadsheet users need it (DESIGN §4).

In: UTF-8 (with or without BOM), UTF-16/32 with a BOM (or without one, when the header is ASCII), Shift_JIS/CP932,
CP949/EUC-KR; any other encoding is refused by name unless `--encoding` names it; comma, semicolon or tab
separated; a row that would shift its cells is refused. Out: utf-8-sig, formula-looking cells escaped with a leading apostrophe
(stripped again when we read our own files), never over an existing file.
"""

from __future__ import annotations

import codecs
import csv
import functools
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
# The longest cell read: the csv module's own default limit, checked here so that the error names the cell.
MAX_CELL_CHARS = 131_072
# The most named columns read. A question CSV has a few dozen (ragkit's own columns plus a user's notes); a
# results CSV rewritten by a spreadsheet keeps them. Thousands are a generated or broken file, and each unknown
# column is carried through every row and checked against the known names: 20 times this took over a minute.
MAX_COLUMNS = 1_000


ENCODING_FLAG = {"encoding=": "--encoding"}  # how `rag` spells the keyword a message names (errors.RagError)

def escape_cell(value: object) -> str:
    s = "" if value is None else str(value)
    if s == "nan" and isinstance(value, float):
        return ""
    return "'" + s if _FORMULA.match(s) else s


def unescape_cell(value: str) -> str:
    return value[1:] if isinstance(value, str) and _ESCAPED.match(value) else value


# (mark, the codec that reads the file and drops the mark, the codec that writes the text after the mark)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32", "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32", "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8-sig", "utf-8"), (codecs.BOM_UTF16_LE, "utf-16", "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16", "utf-16-be"))
_LABELS = {"utf-32": "UTF-32", "utf-8-sig": "UTF-8", "utf-16": "UTF-16", "utf-16-le": "UTF-16LE",
           "utf-16-be": "UTF-16BE", "utf-32-le": "UTF-32LE", "utf-32-be": "UTF-32BE"}
_KANA = re.compile(r"[\u3041-\u30ff]")
_PRIVATE = re.compile(r"[\ue000-\uf8ff]")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_HAN = re.compile(r"[\u4e00-\u9fff]")
_SJIS_COMMON = object()  # marks the Shift_JIS candidate, judged from its bytes
_KOREAN = frozenset("이다의는에하을를고가서지한로기수도사리자어있나정대그인시면일것해우적주")  # frequent syllables
KOREAN_COMMON = 0.15  # the share of a Korean text's syllables among them (docs/evaluation.md: measured)


def _utf8_error(data: bytes) -> UnicodeDecodeError:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e
    raise AssertionError("valid UTF-8")  # pragma: no cover - called only after a decoding failed


def decode_bytes(data: bytes, name: str, encoding: str | None = None) -> str:
    """The text of a CSV file, never by a guess that could corrupt it (DESIGN §4).

    Read: a byte order mark's encoding (UTF-8, UTF-16, UTF-32; a mark always wins), else valid UTF-8 with
    non-ASCII text (it wins over an `encoding` that is not a UTF: legacy text is never valid UTF-8), else
    `encoding` when given, else UTF-16/32 without a mark when the header line is plain ASCII (its NUL bytes say
    which), else UTF-8, else Shift_JIS/CP932 or CP949 (_japanese_or_korean). Anything else is refused with one
    line naming the likely encoding and the `--encoding` that reads it."""
    return sniff_encoding(data, name, encoding)[0]


def sniff_encoding(data: bytes, name: str, encoding: str | None = None) -> tuple[str, bytes, str]:
    """(the text, as decode_bytes reads it; the byte order mark the file starts with, or b""; the codec that
    writes the text after that mark as the file had it): what writing a user's file back in its own encoding
    needs (csvedit)."""
    for bom, enc, writer in _BOMS:
        if data.startswith(bom):
            return _strict(data, enc, name, f"starts with a {_LABELS[enc]} byte order mark but is not valid "
                                            f"{_LABELS[enc]}"), bom, writer
    if encoding:
        utf8 = codecs.lookup(encoding).name == "utf-8"
        if not utf8 and not codecs.lookup(encoding).name.startswith("utf-") and not data.isascii():
            try:  # a default for a colleague's files (RAG_CSV_ENCODING=cp949) does not spoil a UTF-8 one
                return data.decode("utf-8"), b"", "utf-8"
            except UnicodeDecodeError:
                pass
        text = _strict(data, "utf-8-sig" if utf8 else encoding, name, f"is not valid {encoding} (encoding=)")
        return text.lstrip("\ufeff"), b"", "utf-8" if utf8 else encoding
    wide = _bomless_unicode(data)
    if wide:
        return _strict(data, wide, name, f"looks like {_LABELS[wide]} without a byte order mark but is not valid "
                                         f"{_LABELS[wide]}"), b"", wide
    try:
        return data.decode("utf-8"), b"", "utf-8"
    except UnicodeDecodeError:
        pass
    legacy = _japanese_or_korean(data)
    if legacy:
        return legacy[0], b"", legacy[1]
    why, codec = _refusal(data)
    raise RagError(f"{name}: {why}", flags={f"encoding={codec!r}": f"--encoding {codec}", **ENCODING_FLAG})


# A non-ASCII character or two inside a Latin word ("R鬆nion"), or a half-width katakana against a letter
# ("Straﾟe"): what Latin-1 or CP1252 text looks like when it is decoded as CP932.
_GLUED = re.compile(r"[A-Za-z][^\x00-\x7f]{1,2}[A-Za-z]|[A-Za-z][\uff61-\uff9f]|[\uff61-\uff9f][A-Za-z]")


def _decoded(data: bytes, codec: str) -> str | None:
    try:
        return data.decode(codec)
    except UnicodeDecodeError:
        return None


def _japanese_or_korean(data: bytes) -> tuple[str, str] | None:
    """(text, codec) for a file in Shift_JIS/CP932 (Excel on Japanese Windows) or CP949/EUC-KR (on Korean
    Windows), or None. Many files decode as both: Korean bytes read as CP932 are half-width katakana and kanji,
    never kana; Japanese bytes read as CP949 are the rare syllables of its extended area. So: kana in the CP932
    reading is Japanese; else common Korean syllables in the CP949 reading (_reads_as_korean) are Korean, unless
    the EUC-JP reading has kana (refused then, naming EUC-JP, as before); else
    a CP932 reading with nothing glued into a Latin word (kanji only) is Japanese."""
    japanese = _decoded(data, "cp932")
    if japanese is not None and _reads_as_japanese(japanese) and _KANA.search(japanese):
        return japanese, "cp932"
    korean = _decoded(data, "cp949")
    euc_jp = _decoded(data, "euc-jp")  # Japanese in EUC-JP reads as CP949 too; its kana are Korean's jamo rows
    if korean is not None and _reads_as_korean(korean) and not (euc_jp and _KANA.search(euc_jp)):
        return korean, "cp949"
    if japanese is not None and _reads_as_japanese(japanese):
        return japanese, "cp932"
    return None


def _reads_as_korean(text: str) -> bool:
    """Whether text decoded as CP949 is Korean: no private-use characters, nothing glued into a Latin word,
    and at least KOREAN_COMMON of its syllables among the most frequent ones (other double-byte text decodes
    into CP949's extended syllables, which are rare)."""
    if _PRIVATE.search(text) or _GLUED.search(text) or "\x00" in text:
        return False
    syllables = _HANGUL.findall(text)
    return bool(syllables) and sum(ch in _KOREAN for ch in syllables) >= KOREAN_COMMON * len(syllables)


def _reads_as_japanese(text: str) -> bool:
    """Whether text decoded as CP932 is Japanese rather than another encoding's bytes: no private-use
    characters (CP932's user area, where Latin-1's ö and ñ land) and no NUL, and kana (which no Latin
    text decodes to), or else nothing glued into a Latin word."""
    if _PRIVATE.search(text) or "\x00" in text:
        return False
    return bool(_KANA.search(text)) or not _GLUED.search(text)


def _strict(data: bytes, enc: str, name: str, what: str) -> str:
    try:
        return data.decode(enc)
    except UnicodeDecodeError as e:
        # e.start counts in e.object, the bytes the codec read: utf-8-sig hands on those after its BOM
        read = e.object
        line = read[: e.start].decode(enc, "replace").count("\n") + 1
        raise RagError(f"{name}: {what} (line {line}, byte 0x{read[e.start]:02X}); save it as CSV UTF-8, or name "
                       "its encoding with encoding=", flags=ENCODING_FLAG) from None
    except LookupError:
        raise RagError(f"{name}: unknown encoding {enc!r} (encoding=)", flags=ENCODING_FLAG) from None


def _bomless_unicode(data: bytes) -> str | None:
    """UTF-16/32 without a byte order mark, told from a header line of plain ASCII (`Q\\0u\\0e\\0...`): only the
    right encoding decodes it to printable ASCII. None when there is no such header."""
    head = data[:4096]
    if b"\x00" not in head:
        return None
    for enc, unit in (("utf-32-le", 4), ("utf-32-be", 4), ("utf-16-le", 2), ("utf-16-be", 2)):
        cut = head[: len(head) // unit * unit]
        text = cut.decode(enc, "replace")
        first = text.split("\n", 1)[0].rstrip("\r")
        if len(first) >= 2 and all(" " <= ch <= "~" or ch == "\t" for ch in first):
            return enc
    return None


def _refusal(data: bytes) -> tuple[str, str]:
    """Why a file cannot be read without a guess, naming the likely encoding and how to read it; and that
    encoding's codec ("" when none is likely)."""
    likely = _likely(data)
    if likely is None:
        return ("cannot decode the text; it is not UTF-8, UTF-16/32, Shift_JIS/CP932 or CP949; save it as CSV UTF-8, or "
                "name its encoding with encoding="), ""
    label, codec = likely
    if codec == "utf-8":  # UTF-8 with a few damaged bytes: no other encoding reads it better
        e = _utf8_error(data)
        line = data[: e.start].count(b"\n") + 1
        return (f"not valid UTF-8 at line {line} (byte 0x{data[e.start]:02X}), though the rest of it is: a damaged "
                "file? fix that line, or save it as CSV UTF-8 again"), codec
    text = data.decode(codec, "replace")
    line_no, line = next(((i, ln) for i, ln in enumerate(text.split("\n"), 1) if not ln.isascii()), (1, ""))
    where = next((i for i, ch in enumerate(line) if not ch.isascii()), 0)
    sample = line[max(0, where - 12): where + 20].strip()
    return (f"not UTF-8, Shift_JIS/CP932 or CP949; it looks like {label} (line {line_no}: {sample!r}); save it as CSV "
            f"UTF-8, or read it with encoding={codec!r}"), codec


def _likely(data: bytes) -> tuple[str, str] | None:
    """(what the bytes look like, the codec that reads them) for a file that is none of the encodings read
    without being asked, or None."""
    head = data[:8192]
    if b"\x00" in head:  # wide text whose header is not ASCII: where its NUL bytes fall says which
        head = head[: len(head) // 4 * 4]
        for codec, zero, mostly in (("utf-32-le", 3, 2), ("utf-32-be", 0, 1)):
            if not any(head[zero::4]) and head[mostly::4].count(0) >= 0.9 * len(head[mostly::4]):
                return f"{_LABELS[codec]} without a byte order mark", codec
        odd, even = head[1::2].count(0), head[0::2].count(0)
        if odd and not even:
            return "UTF-16LE without a byte order mark", "utf-16-le"
        if even and not odd:
            return "UTF-16BE without a byte order mark", "utf-16-be"
        return None
    candidates = (("EUC-JP", "euc-jp", _KANA), ("EUC-KR/CP949 (Korean)", "cp949", _KOREAN),
                  ("Shift_JIS/CP932", "cp932", _SJIS_COMMON), ("GBK/GB18030 (Chinese)", "gb18030", _HAN))
    for label, codec, marker in candidates:
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        if _PRIVATE.search(text) or _GLUED.search(text):  # Latin text decodes as these too, into its words
            continue
        if marker is _KOREAN:  # other double-byte text decodes as CP949's extended syllables too: common ones?
            if _reads_as_korean(text):
                return label, codec
        elif marker is _SJIS_COMMON:  # most characters from the common rows (kana, level-1 kanji), not Latin-1's
            leads = re.findall(rb"[\x81-\x9f\xe0-\xfc][\x40-\x7e\x80-\xfc]", data)
            if leads and sum(b[0] <= 0x9F for b in leads) >= len(leads) / 2:
                return label, codec
        elif marker.search(text):
            return label, codec
    utf8_chars = len(re.findall(rb"[\xc2-\xf4][\x80-\xbf]+", head))
    if utf8_chars and utf8_chars >= len(re.findall(rb"[\x80-\xff]", head)) // 3:
        return "UTF-8 with a few invalid bytes", "utf-8"
    if any(0x80 <= b <= 0x9F for b in data):
        return "Windows-1252 (CP1252)", "cp1252"
    return "Latin-1 (ISO-8859-1)", "latin-1"


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (short strings: column names)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@functools.lru_cache(maxsize=4096)  # near_miss squashes every known name once per column
def _squash(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).casefold()


def near_miss(name: str, known: Iterable[str]) -> str | None:
    """The known column that `name` nearly spells (case, spacing, one or two edits), or None."""
    if name in known:
        return None
    sq = _squash(name)
    folded = name.casefold()
    best: tuple[int, str] | None = None
    for k in known:
        if _squash(k) == sq:
            return k
        limit = 1 if len(k) <= 5 else 2
        if abs(len(folded) - len(k.casefold())) > limit:
            continue  # the distance is at least the difference in length: no need to compute it
        d = _edits(folded, k.casefold())
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


def _csv_error(path: Path, e: csv.Error, done: int, text: str, sep: str, line_num: int) -> str:
    """The one-line error for what the csv module refused: `done` rows were read whole (the header counts as
    one); the row after them is the bad one."""
    why = str(e).splitlines()[0]
    if "unexpected end of data" in why:
        # the rows read whole end on the line before the bad row starts
        start = _line_of_row(text, sep, done)
        return (f"{path}: row {done + 1} (line {start}): a double quote opens a cell and never closes, so every "
                f"line after it would be read into that cell; close it, or double a quote inside a quoted cell "
                f'("")')
    if "expected after" in why:
        return (f"{path}: row {done + 1} (line {line_num}): text follows a closing double quote; put the whole "
                f'cell in double quotes and double the quotes inside it ("")')
    return f"{path}: not a valid CSV ({why})"


def _check_lengths(row: str, fields: list[str], header: list[str]) -> None:
    """A cell longer than MAX_CELL_CHARS is an error naming its row and column."""
    for i, f in enumerate(fields):
        if len(f) > MAX_CELL_CHARS:
            name = header[i].strip() if i < len(header) else ""
            raise RagError(f"{row}, column {repr(name) if name else i + 1}: {len(f):,} characters, over the limit "
                           f"of {MAX_CELL_CHARS:,}")


def _line_of_row(text: str, sep: str, rows: int) -> int:
    """The line the row after the first `rows` rows starts on (quoted line breaks counted)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    for _ in range(rows):
        next(reader, None)
    return reader.line_num + 1


def read_csv(path: Path, *, required: tuple[str, ...] = (), known: Iterable[str] | None = None,
             encoding: str | None = None) -> pd.DataFrame:
    """Read a CSV as strings (no NaN: empty cells are ""), strictly.

    - Encodings: see `decode_bytes` (`encoding`: what `--encoding` names, for any other).
    - Separator: comma, or semicolon/tab when the header line has no comma.
    - A row with more fields than the header is an error naming the row, even when the extra fields are empty
      (an unquoted comma shifts every cell after it). The one exception is a header that itself ends in empty
      columns (a spreadsheet's padding): those columns are dropped, and a row may fill them only with empty
      fields. So is a column without a name that is empty throughout (that padding, when ragkit appended a
      column after it: csvedit). Missing fields are "". A NUL character in a cell is an error naming its row
      and column.
    - Column names are stripped; `required` columns missing -> one-line error listing what was found;
      with `known`, a column whose name nearly matches a known one is an error naming both (other unknown
      columns pass through); a column name given twice is an error.
    """
    path = Path(path)
    if path.is_dir():
        raise RagError(f"{path}: is a folder; give a CSV file")
    if not path.is_file():
        raise RagError(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RagError(f"{path}: cannot read ({e.strerror or e})") from None
    text = decode_bytes(data, str(path), encoding)
    if not text.strip():
        raise RagError(f"{path}: the file is empty")
    sep = _separator(text)
    quote = f"a {SEPARATORS.get(sep, repr(sep))} inside a cell needs the cell in double quotes"
    # strict: a double quote that opens a cell and never closes would otherwise swallow every row after it into
    # that cell, silently
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, strict=True)
    records: list[list[str]] = []
    header: list[str] | None = None
    # the csv module's field limit is global and its error names no row or column: it is lifted while this file
    # (already in memory) is parsed, and MAX_CELL_CHARS is checked per cell instead
    limit = csv.field_size_limit(max(len(text) + 1, MAX_CELL_CHARS))
    try:
        header = next(reader)
        _check_lengths(f"{path}: row 1 (the header)", header, [])
        named = len(header)
        while named > 1 and not header[named - 1].strip():
            named -= 1  # a header that ends in empty columns: a spreadsheet's padding
        padded = named < len(header)
        if named > MAX_COLUMNS:  # a spreadsheet's empty padding columns are not counted: they are dropped
            raise RagError(f"{path}: row 1 (the header) has {named:,} columns, over the limit of {MAX_COLUMNS:,}")
        for fields in reader:
            row = f"{path}: row {len(records) + 2} (line {reader.line_num})"
            extra = fields[named:]
            if len(fields) > len(header) and not (padded and not any(f.strip() for f in extra)):
                empty = " (the extra ones are empty, but the separator before them still shifts cells)" if not any(
                    f.strip() for f in fields[len(header):]) else ""
                raise RagError(f"{row} has {len(fields)} fields but the header has {len(header)}{empty}; {quote}")
            if padded and any(f.strip() for f in extra):
                col = named + next(i for i, f in enumerate(extra) if f.strip()) + 1
                raise RagError(f"{row} has a value in column {col}, which has no name in the header (it has "
                               f"{named}); {quote}")
            _check_lengths(row, fields, header)
            nul = next((i for i, f in enumerate(fields[:named]) if "\x00" in f), None)
            if nul is not None:
                raise RagError(f"{row}, column {header[nul].strip() or nul + 1!r}: contains a NUL character (\\0); "
                               "remove it")
            records.append((fields + [""] * named)[:named])
    except csv.Error as e:
        raise RagError(_csv_error(path, e, len(records) + (header is not None), text, sep, reader.line_num)) from None
    finally:
        csv.field_size_limit(limit)
    padding = [i for i, c in enumerate(header[:named]) if not c.strip() and not any(r[i].strip() for r in records)]
    if padding and len(padding) < named:
        drop = set(padding)
        keep = [i for i in range(named) if i not in drop]
        header = [header[i] for i in keep]
        records = [[r[i] for i in keep] for r in records]
        named = len(keep)
    columns = [str(c).strip() or f"Unnamed: {i}" for i, c in enumerate(header[:named])]
    written = list(columns)
    if known is not None:
        known = tuple(known)
        # a known column written in another case or spacing ("question", "ground_truth") is that column: the
        # spelling is unambiguous, where a typo (two edits) is refused below
        canon = {_squash(k): k for k in known}
        columns = [c if c in known else canon.get(_squash(c), c) for c in columns]
    seen: dict[str, int] = {}
    dup = next((i for i, c in enumerate(columns) if seen.setdefault(c, i) != i), None)
    if dup is not None:
        first = written[seen[columns[dup]]]
        both = "" if first == written[dup] else f" (as {first!r} and {written[dup]!r})"
        raise RagError(f"{path}: the column {columns[dup]!r} appears twice{both}; rename or remove one")
    if known is not None:
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
