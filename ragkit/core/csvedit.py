"""Editing one column of a user's own CSV in place (the optimizer's `Optimized Reference Document`, DESIGN §6),
leaving everything else as the user's spreadsheet wrote it.

The file keeps its encoding (Shift_JIS/CP932, UTF-8 with or without a byte order mark, UTF-16/32), line endings,
quoting, column order, empty padding columns and blank rows; the bytes of every cell and row that is not edited
stay as they were (CP932 has two codes for some characters, so decoding and encoding again is not enough). A new
column goes after the last one. When a new value cannot be written in the file's encoding, the file is written
as UTF-8 with a byte order mark and the edit says so. The previous file is kept as `<name>.bak-YYYYMMDD_HHMMSS`.

    set_column(path, column, values, *, encoding=None) -> ColumnEdit | None   # values: row position -> text
    set_columns(path, {column: values}, *, encoding=None, output=None) -> ColumnEdit | None   # one backup
    edit_notes(path, {column: values}, *, encoding=None) -> list[str]   # set_columns' notes, nothing written
    restore(path, backup) -> None   # the backup's bytes put back over path, atomically
    file_sha256(path) -> str"""

from __future__ import annotations

import codecs
import hashlib
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ragkit.core.csvio import _separator, escape_cell, read_csv, sniff_encoding, unescape_cell
from ragkit.core.errors import RagError
from ragkit.core.paths import atomic_write_bytes

_LABELS = {"utf-8": "UTF-8", "cp932": "Shift_JIS/CP932", "utf-16-le": "UTF-16LE", "utf-16-be": "UTF-16BE",
           "utf-32-le": "UTF-32LE", "utf-32-be": "UTF-32BE"}


@dataclass
class ColumnEdit:
    """What set_column wrote: the file, its backup and their SHA-256 (an undo tells from them whether the file
    was changed since), and what the user should be told (a change of encoding)."""

    path: Path  # the file written (set_columns' output when given)
    backup: Path | None  # None when a new file was written (output)
    sha256: str
    backup_sha256: str
    encoding: str | None = None  # what the file was read with when not detected (--encoding)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Record:
    fields: list[str]  # raw field texts, quotes included
    term: str  # "\r\n", "\n", "\r", or "" (the last record without a line break)
    start: int  # offsets of the record (terminator included) in the text
    end: int

    @property
    def blank(self) -> bool:
        return self.fields == [""]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def set_column(path: Path, column: str, values: dict[int, str], *, encoding: str | None = None
               ) -> ColumnEdit | None:
    """Set `column` of the data rows at these positions (0 = the first row after the header, as read_csv
    numbers them) to these values, adding the column after the last one when the file has none; a backup first.
    None when nothing would change (nothing is written)."""
    return set_columns(path, {column: values}, encoding=encoding)


def set_columns(path: Path, columns: dict[str, dict[int, str]], *, encoding: str | None = None,
                output: Path | None = None) -> ColumnEdit | None:
    """set_column for several columns at once (one backup). With `output`, the edited file is written there
    instead (a new file: an existing one is refused) and `path` is left as it is, with no backup. None when
    nothing would change (nothing is written)."""
    path = Path(path)
    original = path.read_bytes()
    data, notes, encoding = _edited(path, original, columns, encoding)
    if data == original:
        return None
    if output is not None:
        output = Path(output)
        if output.exists():
            raise RagError(f"{output}: already exists; nothing was written (choose another file)")
        output.parent.mkdir(parents=True, exist_ok=True)
        with open(output, "xb") as f:  # never over a file that appeared meanwhile
            f.write(data)
        return ColumnEdit(output, None, hashlib.sha256(data).hexdigest(), "", encoding, notes)
    backup = _backup(path)
    atomic_write_bytes(path, data, mode=path.stat().st_mode & 0o7777)
    return ColumnEdit(path, backup, hashlib.sha256(data).hexdigest(), file_sha256(backup), encoding, notes)


def edit_notes(path: Path, columns: dict[str, dict[int, str]], *, encoding: str | None = None) -> list[str]:
    """What set_columns would tell the user (the file would change its encoding), writing nothing: a dry run's."""
    path = Path(path)
    return _edited(path, path.read_bytes(), columns, encoding, dry_run=True)[1]


def _edited(path: Path, data: bytes, columns: dict[str, dict[int, str]], encoding: str | None, *,
            dry_run: bool = False) -> tuple[bytes, list[str], str | None]:
    """The file's bytes with `columns` set, the notes for the user, and the encoding the result is read with."""
    read_csv(path, encoding=encoding)  # the same checks as every read: a file it refuses is not edited
    notes: list[str] = []
    for column, values in columns.items():
        edited = _edit(data, str(path), column, values, encoding, notes, dry_run=dry_run)
        if edited is not None:
            data = edited
            if notes:
                encoding = None  # now UTF-8 with a byte order mark, whatever --encoding said
    return data, notes, encoding


def _edit(data: bytes, name: str, column: str, values: dict[int, str], encoding: str | None,
          notes: list[str], *, dry_run: bool = False) -> bytes | None:
    """The file's bytes with `column` set as set_column says; None when nothing would change. A note is added
    when the file had to become UTF-8 with a byte order mark (`dry_run`: would have to)."""
    text, bom, codec = sniff_encoding(data, name, encoding)
    body = data[len(bom):]
    sep = _separator(text)
    records = _records(text, sep)
    header = [_value(f) for f in records[0].fields]
    quote_all = all(f.startswith('"') for f in records[0].fields)
    names = [h.strip() for h in header]
    col = names.index(column) if column in names else None
    added = col is None
    if added:
        if not any(v for v in values.values()):
            return None
        col = len(header)
    pieces: dict[int, str] = {}  # record -> its new text (terminator included)
    appended: dict[int, str] = {}  # record -> text added after its last field (a new column)
    for k, rec in enumerate(records):
        if k == 0:
            if added:
                appended[k] = sep + _raw(column, sep, quote_all)
            continue
        value = values.get(k - 1)
        if rec.blank and not value:
            continue  # a blank line stays one
        if added and len(rec.fields) <= col:
            appended[k] = sep * (col - len(rec.fields)) + sep + _raw(value or "", sep, quote_all)
        elif added and value:  # a row running on into the header's padding: its (empty) field there
            fields = list(rec.fields)
            fields[col] = _raw(value, sep, quote_all)
            pieces[k] = sep.join(fields) + rec.term
        elif value is not None and (_value(rec.fields[col]) if col < len(rec.fields) else "") != value:
            fields = rec.fields + [""] * (col + 1 - len(rec.fields))
            fields[col] = _raw(value, sep, quote_all)
            pieces[k] = sep.join(fields) + rec.term
    if not pieces and not appended:
        return None
    try:
        return bom + _assemble(body, text, records, pieces, appended, codec)
    except UnicodeEncodeError as e:
        label = _LABELS.get(codecs.lookup(codec).name, codec)
        now = "writing it would make it" if dry_run else "the file is now"
        notes.append(f"{name}: {e.object[e.start:e.end]!r} cannot be written in {label}, the file's encoding: "
                     f"{now} UTF-8 with a byte order mark (Excel opens it)")
        return codecs.BOM_UTF8 + _assemble(body, text, records, pieces, appended, None)


def restore(path: Path, backup: Path) -> None:
    """Put the backup's bytes back over `path` (atomically, keeping the file's permissions)."""
    path = Path(path)
    atomic_write_bytes(path, Path(backup).read_bytes(), mode=path.stat().st_mode & 0o7777)


def _backup(path: Path) -> Path:
    """Copy `path` to `<name>.bak-YYYYMMDD_HHMMSS` (made unique with `_2`, `_3`, ...)."""
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    n = 2
    while backup.exists():
        backup = path.with_name(f"{path.name}.bak-{stamp}_{n}")
        n += 1
    shutil.copy2(path, backup)
    return backup


def _records(text: str, sep: str) -> list[_Record]:
    """The records of a CSV text as written (raw fields, terminators), one per csv.reader row: read_csv has
    checked the text, so every quoted field closes and is followed by a separator or a line break."""
    plain = re.compile(f"[^{re.escape(sep)}\r\n]*")
    out: list[_Record] = []
    i, n = 0, len(text)
    while i < n:
        start, fields = i, []
        while True:
            if text.startswith('"', i):
                j = i + 1
                while True:
                    j = text.index('"', j)
                    if not text.startswith('""', j):
                        break
                    j += 2
                j += 1
            else:
                j = plain.match(text, i).end()
            fields.append(text[i:j])
            i = j
            if text.startswith(sep, i):
                i += len(sep)
                continue
            break
        term = "\r\n" if text.startswith("\r\n", i) else text[i : i + 1]
        i += len(term)
        out.append(_Record(fields, term, start, i))
    return out


def _value(raw: str) -> str:
    """A raw field's cell value (quotes removed, a formula's escaping apostrophe too)."""
    if len(raw) >= 2 and raw.startswith('"') and raw.endswith('"'):
        raw = raw[1:-1].replace('""', '"')
    return unescape_cell(raw)


def _raw(value: str, sep: str, quote_all: bool) -> str:
    s = escape_cell(value)
    if quote_all or any(c in s for c in (sep, '"', "\r", "\n")):
        return '"' + s.replace('"', '""') + '"'
    return s


def _assemble(body: bytes, text: str, records: list[_Record], pieces: dict[int, str], appended: dict[int, str],
              codec: str | None) -> bytes:
    """The new file after any byte order mark: each untouched record's own bytes, edited ones encoded with
    `codec` (None: UTF-8, the whole text). Raises UnicodeEncodeError when a new value does not fit the codec."""
    def new_text(k: int, rec: _Record) -> str:
        if k in pieces:
            return pieces[k]
        old = text[rec.start : rec.end]
        if k in appended:
            return old[: len(old) - len(rec.term)] + appended[k] + rec.term
        return old

    if codec is None:
        return "".join(new_text(k, r) for k, r in enumerate(records)).encode("utf-8")
    slices = _record_bytes(body, text, records, codec)
    if slices is None:  # no way to tell each record's bytes: the text encoded again (exact for UTF-16/32)
        return "".join(new_text(k, r) for k, r in enumerate(records)).encode(codec)
    out = []
    for k, (rec, old) in enumerate(zip(records, slices, strict=True)):
        if k in appended:
            term = rec.term.encode(codec)
            out.append(old[: len(old) - len(term)] + appended[k].encode(codec) + term)
        elif k in pieces:
            out.append(pieces[k].encode(codec))
        else:
            out.append(old)
    return b"".join(out)


def _record_bytes(body: bytes, text: str, records: list[_Record], codec: str) -> list[bytes] | None:
    """Each record's bytes in the file, told apart by the line breaks: in an ASCII-compatible encoding
    (UTF-8, CP932, ...) the n-th CR or LF character is the n-th CR or LF byte. None when that does not hold."""
    try:
        if "\r\n".encode(codec) != b"\r\n":
            return None
    except (UnicodeEncodeError, LookupError):
        return None
    chars = [m.start() for m in re.finditer("[\r\n]", text)]
    octets = [m.start() for m in re.finditer(b"[\r\n]", body)]
    if len(chars) != len(octets):
        return None
    at = dict(zip(chars, octets, strict=True))
    out, pos = [], 0
    for rec in records:
        end = len(body) if rec.end == len(text) else at[rec.end - 1] + 1
        piece = body[pos:end]
        try:
            if piece.decode(codec) != text[rec.start : rec.end]:
                return None
        except UnicodeDecodeError:
            return None
        out.append(piece)
        pos = end
    return out if pos == len(body) else None
