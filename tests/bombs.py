"""Hostile documents made on the fly, never stored: a DOCX whose word/document.xml unpacks to far more than the
file, and a PDF whose one page holds a huge compressed text stream. Both are written in chunks, so making a
300 MB bomb costs this process a few MB.

    docx_bomb(path, unpacked_mb=300)   # ~300 KB on disk
    pdf_text_bomb(path, text_mb=184)   # ~0.5 MB on disk
    small_docx(path)                   # a plain, valid DOCX of one paragraph (the same skeleton)
    pdf_with_content(path, content, forms={})  # one page of raw content operators, optional form XObjects
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>")
_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="word/document.xml"/></Relationships>')
_DOC_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
             '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>')
_DOC_TAIL = "</w:body></w:document>"
_PARA = "<w:p><w:r><w:t>{}</w:t></w:r></w:p>"


def _docx(path: Path, paragraphs, ) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", _CONTENT_TYPES)
        zf.writestr("_rels/.rels", _RELS)
        with zf.open("word/document.xml", "w", force_zip64=True) as fh:
            fh.write(_DOC_HEAD.encode())
            for chunk in paragraphs:
                fh.write(chunk)
            fh.write(_DOC_TAIL.encode())
    return path


def small_docx(path: Path, text: str = "A small, honest document.") -> Path:
    return _docx(path, [_PARA.format(text).encode()])


def docx_bomb(path: Path, unpacked_mb: float = 300) -> Path:
    """A DOCX whose word/document.xml unpacks to `unpacked_mb` MB of one paragraph repeated (ratio ~1000:1)."""
    para = _PARA.format("x" * 200).encode()
    block = para * ((1 << 20) // len(para))  # ~1 MB
    n = max(1, round(unpacked_mb * (1 << 20) / len(block)))
    return _docx(path, (block for _ in range(n)))


def _flate(chunks) -> bytes:
    comp = zlib.compressobj(9)
    return b"".join(comp.compress(c) for c in chunks) + comp.flush()


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d /Filter /FlateDecode %s>>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def _write_pdf(path: Path, objs: list[bytes]) -> Path:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path


def pdf_with_content(path: Path, content, forms: dict[str, bytes] | None = None) -> Path:
    """A one-page PDF whose content stream is `content` (bytes, or an iterable of byte chunks), with font /F1
    (Helvetica) and the form XObjects `forms` (name -> their content; each can draw the others by name)."""
    forms = forms or {}
    chunks = [content] if isinstance(content, bytes) else content
    names = list(forms)
    first = 6  # objects 1-5: catalog, pages, page, content, font; then one per form
    xobjects = b" ".join(b"/%s %d 0 R" % (n.encode(), first + i) for i, n in enumerate(names))
    resources = b"<< /Font << /F1 5 0 R >> /XObject << %s >> >>" % xobjects
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources %s >>" % resources,
        _stream(_flate(chunks)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for n in names:
        objs.append(_stream(_flate([forms[n]]),
                            b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources %s " % resources))
    return _write_pdf(path, objs)


def pdf_text_bomb(path: Path, text_mb: float = 184) -> Path:
    """A one-page PDF whose content stream shows `text_mb` MB of text (one Tj per line of 100 characters),
    flate-compressed: the file is a few hundred KB."""
    line = b"BT /F1 1 Tf 10 10 Td (" + b"A" * 100 + b") Tj ET\n"
    n = max(1, round(text_mb * (1 << 20) / 100))
    block = line * 10_000
    return pdf_with_content(path, (block if k + 10_000 <= n else line * (n - k) for k in range(0, n, 10_000)))


def slow_pdf(path: Path, pages: int = 3000) -> Path:
    """A harmless PDF that takes long to convert: `pages` pages of a few hundred characters each (about 10-30 s
    on a laptop core). For the tests of what happens while a conversion runs: a wall-time limit, a server
    that stops, an upload waiting for another."""
    line = b"BT /F1 9 Tf 50 %d Td (Page %d line %d of a long and harmless manual, with words to index.) Tj ET\n"
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages)),
                                                          pages),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i in range(pages):
        content = b"".join(line % (760 - 12 * k, i + 1, k + 1) for k in range(60))
        objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                    b"/Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * i))
        objs.append(_stream(_flate([content])))
    return _write_pdf(path, objs)
