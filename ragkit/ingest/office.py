"""DOCX and PPTX -> pages through markitdown: DOCX split at page breaks (or top-level headings), PPTX one
page per slide with the deck's own sections.

    convert_docx(job) -> DocResult
    convert_pptx(job) -> DocResult

A DOCX's headings come from its paragraph styles (`_docx_style_map`): Title, Heading 1-6 and any style that
carries an outline level, found by style id, built-in name or outline level, so a Japanese or Korean Word's
styles ("見出し 1", "제목") count too. A table's first row is its header, in DOCX as in PPTX."""

from __future__ import annotations

import html
import io
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from ragkit.ingest.limits import check_zip
from ragkit.ingest.pages import (
    FRONT_SECTION,
    ConvertError,
    DocResult,
    Job,
    emit_pages,
    range_sections,
    reason_line,
    section_level,
)

# ---------------------------------------------------------------------------------------------- Office

_BREAK_TOKEN = "RAGKITPAGEBREAKX9"
_BREAK_XML = f'</w:r><w:r><w:t xml:space="preserve"> {_BREAK_TOKEN} </w:t></w:r><w:r>'
_DOCX_BREAK_RE = re.compile(r'<w:br\s+w:type="page"\s*/>|<w:lastRenderedPageBreak\s*/>')
_TITLE_RE = re.compile(r"<dc:title>([^<]*)</dc:title>")


def _office_title(zf: zipfile.ZipFile) -> str:
    try:
        core = zf.read("docProps/core.xml").decode("utf-8", "replace")
    except KeyError:
        return ""
    m = _TITLE_RE.search(core)
    return html.unescape(m.group(1)).strip() if m else ""


def _markitdown(data: bytes, ext: str, style_map: str = "") -> str:
    """markitdown's markdown for a DOCX or PPTX. A table's first row is its header: PPTX tables arrive with it
    marked (<th>), DOCX tables as plain rows, which markdownify would put under an empty header row."""
    from markitdown import MarkItDown, StreamInfo

    res = MarkItDown(enable_plugins=False).convert_stream(
        io.BytesIO(data), stream_info=StreamInfo(extension=ext), table_infer_header=True,
        **({"style_map": style_map} if style_map else {}))
    return res.markdown or ""


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
# Word stores a built-in style under its English name whatever the language of its interface, but other writers
# (and templates made in a localised Word) may keep the name the user saw: Japanese, Korean and Chinese too
_TITLE_NAMES = frozenset({"title", "表題", "タイトル", "제목", "标题", "標題"})
_SUBTITLE_NAMES = frozenset({"subtitle", "副題", "サブタイトル", "부제", "부제목", "副标题", "副標題"})
_HEADING_NAME = re.compile(r"^(?:heading|見出し|제목|标题|標題)\s*([1-9])$")
_HEADING_ID = re.compile(r"^Heading([1-9])$")


def _style_roles(styles_xml: bytes) -> dict[str, tuple[str, str | int]]:
    """{paragraph style id: (its name, "title" | "subtitle" | heading level 1-9)} for the styles of
    word/styles.xml that make a title, a subtitle or a heading: by built-in style id (Title, Heading1), by name
    (case ignored, localised names too) or, for headings under any name, by the outline level the style sets or
    inherits (what Word's navigation pane lists)."""
    root = ET.fromstring(styles_xml)
    styles: dict[str, tuple[str, str | None, int | None]] = {}  # id: (name, based on, outline level)
    for st in root.iter(f"{_W}style"):
        if st.get(f"{_W}type") != "paragraph" or not st.get(f"{_W}styleId"):
            continue
        name_el, based_el = st.find(f"{_W}name"), st.find(f"{_W}basedOn")
        lvl_el = st.find(f"{_W}pPr/{_W}outlineLvl")
        lvl = lvl_el.get(f"{_W}val") if lvl_el is not None else None
        styles[st.get(f"{_W}styleId")] = (
            name_el.get(f"{_W}val", "") if name_el is not None else "",
            based_el.get(f"{_W}val") if based_el is not None else None,
            int(lvl) if lvl is not None and lvl.isdigit() else None)

    def outline(sid: str | None, depth: int = 0) -> int | None:
        if sid not in styles or depth > 10:
            return None
        _name, based, lvl = styles[sid]
        return lvl if lvl is not None else outline(based, depth + 1)

    roles: dict[str, tuple[str, str | int]] = {}
    for sid, (name, _based, _lvl) in styles.items():
        key = " ".join(name.split()).casefold()
        m = _HEADING_ID.match(sid) or _HEADING_NAME.match(key)
        if sid == "Title" or key in _TITLE_NAMES:
            roles[sid] = (name, "title")
        elif sid == "Subtitle" or key in _SUBTITLE_NAMES:
            roles[sid] = (name, "subtitle")
        elif m:
            roles[sid] = (name, int(m.group(1)))
        elif (lvl := outline(sid)) is not None and lvl < 9:  # 9: body text
            roles[sid] = (name, lvl + 1)
    return roles


def _docx_style_map(zf: zipfile.ZipFile, document_xml: str) -> str:
    """A mammoth style map for this DOCX: its Title paragraphs are `#` (the document's title, its first heading)
    and its headings one level down (Heading 1 is `##`), when the document uses a title style; else its headings
    keep their levels. A subtitle stays a paragraph: it names no section. "" when word/styles.xml is missing or
    unreadable (mammoth's own map then finds the English-named headings)."""
    try:
        roles = _style_roles(zf.read("word/styles.xml"))
    except (KeyError, ET.ParseError):
        return ""
    used = set(re.findall(r'<w:pStyle\s+w:val="([^"]*)"', document_xml))
    shift = int(any(role == "title" for sid, (_n, role) in roles.items() if sid in used))
    lines = []
    for _sid, (name, role) in roles.items():
        if not name:
            continue
        target = "p:fresh" if role == "subtitle" else \
            f"h{1 if role == 'title' else min(int(role) + shift, 6)}:fresh"
        quoted = name.replace("\\", "\\\\").replace("'", "\\'")
        lines.append(f"p[style-name='{quoted}'] => {target}")
    return "\n".join(lines)


def _open_zip(job: Job, kind: str) -> tuple[bytes, zipfile.ZipFile]:
    """The file's bytes and its zip, once its members are known to unpack within the limits."""
    data = Path(job.src).read_bytes()
    if not data.startswith(b"PK"):
        raise ConvertError(f"not a {kind} file (not a zip archive)")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise ConvertError(f"corrupt {kind} ({reason_line(e)})") from None
    check_zip(zf, job.limits, kind)
    return data, zf


_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _top_heading_level(md: str) -> int | None:
    """The level of the headings that split a DOCX into sections (pages.section_level, as for PDF outlines)."""
    return section_level([len(m.group(1)) for m in _MD_HEADING.finditer(md)])


def convert_docx(job: Job) -> DocResult:
    path = Path(job.src)
    data, zf = _open_zip(job, "DOCX")
    with zf:
        try:
            xml = zf.read("word/document.xml").decode("utf-8")
        except KeyError:
            raise ConvertError("corrupt DOCX (no word/document.xml)") from None
        title = _office_title(zf)
        style_map = _docx_style_map(zf, xml)
        n_breaks = len(_DOCX_BREAK_RE.findall(xml))
        if n_breaks:
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
                for item in zf.infolist():
                    payload = zf.read(item.filename)
                    if item.filename == "word/document.xml":
                        payload = _DOCX_BREAK_RE.sub(_BREAK_XML, xml).encode("utf-8")
                    out.writestr(item, payload)
            data = buf.getvalue()
    try:
        md = _markitdown(data, ".docx", style_map)
    except Exception as e:
        raise ConvertError(f"corrupt DOCX ({reason_line(e)})") from None
    top = _top_heading_level(md)
    if n_breaks:
        chunks = re.split(rf"[*_\\]*{_BREAK_TOKEN}[*_\\]*", md)
        # a hard break followed by Word's rendered-break marker gives an empty chunk: one break, not two
        bodies = [chunks[0]] + [c for c in chunks[1:] if c.strip()]
        if not bodies[0].strip() and len(bodies) > 1:
            bodies = bodies[1:]
    elif top:
        bodies, cur = [], []
        for line in md.splitlines():
            m = _MD_HEADING.match(line)
            if m and len(m.group(1)) == top and any(x.strip() for x in cur):
                bodies.append("\n".join(cur))
                cur = []
            cur.append(line)
        bodies.append("\n".join(cur))
    else:
        bodies = [md]
    bodies = [b.strip() for b in bodies]
    # sections: the top-level heading in force at the top of each page
    sections: list[str] = []
    current = None
    first_heading = ""
    for b in bodies:
        heads = [m for m in _MD_HEADING.finditer(b) if top and len(m.group(1)) == top]
        if not first_heading:
            m = _MD_HEADING.search(b)
            first_heading = m.group(2).strip() if m else ""
        # as for PDF outlines: a page belongs to the first top-level heading on it, else to the one in force
        page_sec = heads[0].group(2).strip() if heads else current
        if heads:
            current = heads[-1].group(2).strip()
        sections.append(page_sec or FRONT_SECTION)
    if top is None:
        sections = range_sections(len(bodies))
    return emit_pages(job, title or first_heading or path.stem, bodies, sections)


_SLIDE_RE = re.compile(r"<!--\s*Slide number:\s*(\d+)\s*-->")
_SLD_ID_RE = re.compile(r'<p:sldId\b[^>]*\bid="(\d+)"')
_PPT_SECTION_RE = re.compile(r'<p14:section\b[^>]*\bname="([^"]*)"[^>]*>(.*?)</p14:section>', re.DOTALL)
_SECTION_SLD_RE = re.compile(r'<p14:sldId\b[^>]*\bid="(\d+)"')


def _pptx_sections(zf: zipfile.ZipFile, n: int) -> list[str] | None:
    """The deck's own PowerPoint sections (p14:sectionLst), one title per slide, or None."""
    try:
        pres = zf.read("ppt/presentation.xml").decode("utf-8")
    except KeyError:
        return None
    order = _SLD_ID_RE.findall(pres.split("<p:sldIdLst>", 1)[-1].split("</p:sldIdLst>", 1)[0])
    found = _PPT_SECTION_RE.findall(pres)
    if not found or len(order) != n:
        return None

    by_id = {sid: html.unescape(name).strip() or "untitled" for name, body in found
             for sid in _SECTION_SLD_RE.findall(body)}
    out, current = [], FRONT_SECTION
    for sid in order:
        current = by_id.get(sid, current)
        out.append(current)
    return out


def convert_pptx(job: Job) -> DocResult:
    path = Path(job.src)
    data, zf = _open_zip(job, "PPTX")
    with zf:
        title = _office_title(zf)
        try:
            md = _markitdown(data, ".pptx")
        except Exception as e:
            raise ConvertError(f"corrupt PPTX ({reason_line(e)})") from None
        parts = _SLIDE_RE.split(md)
        # parts = [before, num1, body1, num2, body2, ...]
        bodies = [parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)]
        if not bodies:
            raise ConvertError("PPTX has no slides")
        sections = _pptx_sections(zf, len(bodies)) or range_sections(len(bodies))
    first_heading = ""
    for b in bodies:
        m = _MD_HEADING.search(b)
        if m:
            first_heading = m.group(2).strip()
            break
    return emit_pages(job, title or first_heading or path.stem, bodies, sections)
