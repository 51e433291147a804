"""What converting one document may cost (`core.config.Limits`), checked before the cost is paid: a DOCX/PPTX's
members by their sizes in the zip directory, a PDF page by the text its content streams can show, and the
worker's memory by the kernel. A document past a limit raises `LimitError`: one line naming the limit and its
setting. The wall-time limit is the worker pool's (`workers.py`)."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable

from ragkit.core.config import Limits, tripped
from ragkit.ingest.pages import ConvertError

MB = 1 << 20
RATIO_GRACE = 1 * MB  # members that unpack to less are never refused for their ratio (small, very regular XML)
_CHUNK = 256 << 10  # content stream bytes read at a time (a larger buffer costs more to allocate per page)


class LimitError(ConvertError):
    """A document went past one of the limits; the message names the limit and its setting."""


def _mb(n: float) -> str:
    return f"{n / MB:,.0f} MB" if n >= 10 * MB else f"{n / MB:,.1f} MB"


# ------------------------------------------------------------------------------------------- DOCX / PPTX


def check_zip(zf: zipfile.ZipFile, limits: Limits, kind: str) -> None:
    """Refuse a DOCX/PPTX whose members would unpack to more than the limits allow, before any is read. The
    sizes come from the zip's directory; Python's zipfile (which markitdown's readers use too) never returns
    more bytes than a member's declared size, so a member that lies about it cannot unpack to more."""
    total = 0
    for info in zf.infolist():
        size = info.file_size
        if size > limits.member_mb * MB:
            raise LimitError(f"{kind} member {info.filename[:80]!r} unpacks to {_mb(size)}, more than one member "
                             f"may {tripped('member_mb', limits.member_mb)}")
        if size > RATIO_GRACE:
            ratio = size / max(info.compress_size, 1)
            if ratio > limits.zip_ratio:
                raise LimitError(f"{kind} member {info.filename[:80]!r} unpacks to {_mb(size)} from "
                                 f"{info.compress_size:,} bytes ({ratio:,.0f}:1, a zip bomb?) "
                                 f"{tripped('zip_ratio', limits.zip_ratio)}")
        total += size
        if total > limits.unpacked_mb * MB:
            raise LimitError(f"{kind} unpacks to more than {_mb(total)}, more than a document may "
                             f"{tripped('unpacked_mb', limits.unpacked_mb)}")


# ---------------------------------------------------------------------------------------------------- PDF

_INSIDE = re.compile(rb"[()\\]")
_HEX_PART = re.compile(rb"[0-9A-Fa-f\s]*")  # a hex string's digits, up to its ">"
_DO = re.compile(rb"/([^\s/\[\]()<>{}%]{1,127})\s*Do\b")
_TAIL = 160  # bytes carried from one chunk to the next so that a `/Name Do` across the cut is seen


def _unescape(name: str) -> str:
    """A PDF name as written (`/Fm#30`) to the name it is (`Fm0`)."""
    return re.sub(r"#([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), name) if "#" in name else name


class _Strings:
    """Counts the bytes of a content stream's strings (the operands that text is shown from), chunk by chunk.
    Every byte at string depth >= 1 counts, and so does every hex string: an upper bound of the text shown,
    whatever sits around the strings (comments, inline images)."""

    def __init__(self) -> None:
        self.depth = 0
        self.skip = 0  # bytes of the next chunk to skip (an escape cut by the chunk end)
        self.lt = False  # the chunk ended on a "<": a hex string or a dictionary begins
        self.hex = False  # a hex string cut by the chunk end
        self.count = 0

    def feed(self, data: bytes) -> None:
        pos, n = self.skip, len(data)
        self.skip = 0
        if self.lt and n:
            self.lt = False
            if data[0] == 0x3C:
                pos = 1
            else:
                self.count += 1
                self.hex = True
        if self.hex:
            h = _HEX_PART.match(data, pos)
            self.count += h.end() - pos
            pos = h.end()
            self.hex = pos == n
            if pos < n and data[pos] == 0x3E:  # >
                self.count += 1
                pos += 1
        start = 0 if self.depth else -1  # where the current string's counted part began
        paren = -2  # the next "(" at or after pos, once looked for (-1: none); bytes.find, as drawings are long
        while pos < n:
            if self.depth == 0:
                if paren != -1 and paren < pos:
                    paren = data.find(b"(", pos)
                p = data.find(b"<", pos, n if paren == -1 else paren)
                if p == -1:
                    if paren == -1:
                        return
                    self.depth, start, pos = 1, paren, paren + 1
                    continue
                if p + 1 == n:
                    self.lt = True
                    return
                if data[p + 1] == 0x3C:  # "<<" opens a dictionary
                    pos = p + 2
                    continue
                h = _HEX_PART.match(data, p + 1)
                if h.end() == n:  # the string goes on in the next chunk
                    self.count += n - p
                    self.hex = True
                    return
                if data[h.end()] == 0x3E:
                    self.count += h.end() + 1 - p
                    pos = h.end() + 1
                else:
                    pos = p + 1
                continue
            m = _INSIDE.search(data, pos)
            if m is None:
                self.count += n - start
                return
            p = m.start()
            c = data[p]
            if c == 0x5C:  # backslash: the next byte is escaped
                if p + 1 >= n:
                    self.skip = 1
                pos = p + 2
            elif c == 0x28:
                self.depth += 1
                pos = p + 1
            else:
                self.depth -= 1
                pos = p + 1
                if self.depth == 0:
                    self.count += pos - start
        if self.depth:
            self.count += n - start


def page_text_bytes(doc, page, cap: int, *, exact: bool = False) -> int:
    """An upper bound of the text `page` can show, exact up to `cap`: the bytes of the strings in its content
    streams, in the forms they draw (once per use) and in its annotations' appearances. Reads each stream in
    chunks and stops once the sum passes `cap`, so a stream that unpacks to gigabytes costs time, not memory.
    `exact`: count the strings even when the whole content is under `cap` (benchmarks/limits.py's margin)."""
    import pymupdf
    from pymupdf import mupdf

    pdf = pymupdf._as_pdf_document(doc)
    sizes: dict[tuple[int, bool], int] = {}

    def forms_of(resources: Callable[[], object]) -> Callable[[str], int | None]:
        """The xref of the form a resource dictionary (read on first use) names; None for an image or a name
        it does not hold."""
        found: dict[str, int | None] = {}
        xobjects: list = []  # the resources' XObject dictionary, once read

        def form(name: str) -> int | None:
            if name not in found:
                found[name] = None
                try:
                    if not xobjects:
                        xobjects.append(mupdf.pdf_dict_gets(resources(), "XObject"))
                    value = mupdf.pdf_dict_gets(xobjects[0], _unescape(name))
                    if mupdf.pdf_is_indirect(value) and \
                            mupdf.pdf_to_name(mupdf.pdf_dict_gets(value, "Subtype")) == "Form":
                        found[name] = mupdf.pdf_to_num(value)
                except Exception:  # noqa: BLE001 - a damaged resource dictionary names no forms
                    pass
            return found[name]
        return form

    def form_resources(xref: int) -> Callable[[str], int | None]:
        return forms_of(lambda: mupdf.pdf_dict_gets(mupdf.pdf_load_object(pdf, xref), "Resources"))

    def stream_size(xref: int, forms, depth: int, exact: bool) -> int:
        if (xref, exact) in sizes:
            return sizes[xref, exact]
        sizes[xref, exact] = 0  # a form that draws itself adds nothing more
        strings, uses = _Strings(), []
        tail = b""
        try:
            stm = mupdf.pdf_open_stream_number(pdf, xref)
            while strings.count <= cap:
                got = mupdf.fz_read(stm, raw, _CHUNK)
                if not got:
                    break
                data = mupdf.raw_to_python_bytes(raw, got)
                if exact:
                    strings.feed(data)
                else:  # the first pass: every byte could be text
                    strings.count += len(data)
                joined = tail + data
                uses += [m.group(1) for m in _DO.finditer(joined) if m.end() > len(tail)]
                tail = joined[-_TAIL:]
        except Exception:  # noqa: BLE001 - a damaged stream: what was read counts; MuPDF decides the rest
            pass
        total = strings.count
        for name in uses:
            if total > cap or depth > 20:
                break
            x = forms(name.decode("latin-1"))
            if x is not None:
                total += stream_size(x, form_resources(x), depth + 1, exact)
        sizes[xref, exact] = total
        return total

    # The page's own or inherited resources, read only when it draws an XObject, and only the names it draws
    # (Page.get_xobjects() walks every resource and cost more than the rest of this check together).
    pdf_page = pymupdf._as_pdf_page(page)
    page_forms = forms_of(lambda: mupdf.pdf_page_resources(pdf_page))

    contents = list(page.get_contents())
    appearances = []
    annots = mupdf.pdf_dict_gets(pdf_page.obj(), "Annots")
    for i in range(mupdf.pdf_array_len(annots)):  # most are links, which draw nothing
        try:
            shown = mupdf.pdf_dict_getp(mupdf.pdf_array_get(annots, i), "AP/N")
        except Exception:  # noqa: BLE001 - a damaged annotation shows nothing
            continue
        if mupdf.pdf_is_indirect(shown) and mupdf.pdf_is_stream(shown):
            appearances.append(mupdf.pdf_to_num(shown))

    def page_size(exact: bool) -> int:
        total = 0
        for xref in contents + appearances:
            total += stream_size(xref, page_forms if xref in contents else form_resources(xref), 0, exact)
            if total > cap:
                break
        return total

    # A page whose content streams are small cannot show more text than they hold; only a larger one (a
    # detailed drawing, or a bomb) is scanned for its strings, which costs more.
    raw = mupdf.new_bytes(_CHUNK)
    try:
        total = 0 if exact else page_size(False)
        return total if total <= cap and not exact else page_size(True)
    finally:
        mupdf.delete_bytes(raw)


def check_page_text(doc, page, number: int, limits: Limits) -> None:
    cap = int(limits.page_text_mb * MB)
    shown = page_text_bytes(doc, page, cap)
    if shown > cap:
        raise LimitError(f"page {number} holds more than {_mb(cap)} of text to extract "
                         f"{tripped('page_text_mb', limits.page_text_mb)}")


# ------------------------------------------------------------------------------------------------- memory


def limit_memory(limits: Limits) -> None:
    """In a worker process: the kernel refuses memory past the limit (RLIMIT_DATA: the heap and private
    mappings), so a document that would need more fails with MemoryError instead of taking the machine's
    memory. Linux only; elsewhere a no-op."""
    try:
        import resource

        soft = int(limits.memory_mb * MB)
        _old_soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    except (ImportError, ValueError, OSError, AttributeError):
        pass


_MEMORY_WORDS = re.compile(r"alloc\w* \(.*\) failed|out of memory|cannot allocate|memoryerror|bad_alloc",
                           re.IGNORECASE)


def is_memory_error(e: BaseException | str) -> bool:
    """A failed allocation: Python's MemoryError, or MuPDF's "malloc (N bytes) failed" as an error or a
    warning (MuPDF drops what it could not allocate and goes on, which would lose text silently)."""
    return isinstance(e, MemoryError) or bool(_MEMORY_WORDS.search(str(e)))


def memory_message(limits: Limits) -> str:
    return f"needs more memory than one conversion may use {tripped('memory_mb', limits.memory_mb)}"
