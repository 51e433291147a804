"""DOCX and PPTX -> pages: a DOCX through markitdown, split at page breaks (or top-level headings, or chapter
headings set in body text) and cut to PAGE_CHARS when Word's own pages are unknown; a PPTX one page per slide
(slides.read_slides) with the deck's own sections.

    convert_docx(job) -> DocResult
    convert_pptx(job) -> DocResult

A DOCX's headings come from its paragraph styles (`_docx_style_map`): Title, Heading 1-6 and any style that
carries an outline level, found by style id, built-in name or outline level, so a Japanese or Korean Word's
styles ("見出し 1", "제목") count too. A table's first row is its header, in DOCX as in PPTX. Its headers and
footers are every page's running lines; a footnote goes to the page that cites it. An OLE file (a password-
protected document, an old .doc/.ppt) fails with a line that says so (`ole_reason`)."""

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
    chapter_of,
    emit_pages,
    range_sections,
    reason_line,
    section_level,
)
from ragkit.ingest.pdf import part_heading

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
    """markitdown's markdown for a DOCX. A table's first row is its header: DOCX tables arrive as plain rows, which
    markdownify would put under an empty header row."""
    from markitdown import MarkItDown, StreamInfo

    res = MarkItDown(enable_plugins=False).convert_stream(
        io.BytesIO(data), stream_info=StreamInfo(extension=ext), table_infer_header=True,
        **({"style_map": style_map} if style_map else {}))
    return res.markdown or ""


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
# an OLE compound file: what Word and PowerPoint write for a document saved with a password (the encrypted
# package inside) and for the old .doc/.ppt formats; never a zip
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def ole_reason(kind: str) -> str:
    """The one-line reason an OLE file named .docx/.pptx cannot be read (kind: "DOCX" or "PPTX")."""
    app, old = ("Word", ".doc") if kind == "DOCX" else ("PowerPoint", ".ppt")
    return (f"password-protected or old-format {app} file ({old} renamed): open it in {app} and save it as a "
            f"normal .{kind.lower()} without a password")
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


_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_REL_RE = re.compile(r'<Relationship\b[^>]*?\bId="([^"]+)"[^>]*?\bTarget="([^"]+)"|'
                     r'<Relationship\b[^>]*?\bTarget="([^"]+)"[^>]*?\bId="([^"]+)"')
_HF_REF_RE = re.compile(r'<w:(?:header|footer)Reference\b[^>]*?\br:id="([^"]+)"')
# a page number's field, and the words around it ("Page 3 of 12", "- 3 -", "3 / 12 ページ"), say nothing
_PAGE_FIELDS = frozenset({"PAGE", "NUMPAGES", "SECTIONPAGES"})
_PAGE_WORDS = re.compile(r"(?i)\b(?:page|of|p)\b\.?|ページ|頁")


def _paragraph_texts(root: ET.Element) -> list[str]:
    """The text of each paragraph of a header or footer part, page-number fields left out, a text box's paragraphs
    on their own (read once: the VML copy under mc:Fallback is skipped)."""
    out: list[str] = []

    def walk(el: ET.Element, buf: list[str], field: list[str], skip: list[bool]) -> None:
        for child in el:
            tag = child.tag
            if tag == _MC_FALLBACK:
                continue
            if tag == f"{_W}p":
                inner: list[str] = []
                walk(child, inner, [], [False])
                out.append("".join(inner))
                continue
            if tag == f"{_W}fldSimple":
                instr = (child.get(f"{_W}instr") or "").split()
                if instr and instr[0].upper() in _PAGE_FIELDS:
                    continue
            elif tag == f"{_W}fldChar":
                kind = child.get(f"{_W}fldCharType")
                if kind == "begin":
                    field.append("")
                elif kind == "separate" and field:  # the field's result follows: a page number's is left out
                    skip[0] = field[-1].split()[:1] in ([f] for f in _PAGE_FIELDS)
                elif kind == "end" and field:
                    field.pop()
                    skip[0] = False
            elif tag == f"{_W}instrText" and field:
                field[-1] += (child.text or "").upper()
            elif tag == f"{_W}t" and not skip[0]:
                buf.append(child.text or "")
            elif tag in (f"{_W}tab", f"{_W}br"):
                buf.append(" ")
            walk(child, buf, field, skip)

    walk(root, [], [], [False])
    return out


def _docx_running(zf: zipfile.ZipFile, document_xml: str) -> list[str]:
    """The lines of the headers and footers the document's sections use (first-page and even-page ones too), each
    once, in the order the sections name them; a line that is only a page number goes (the page is numbered)."""
    try:
        rels = zf.read("word/_rels/document.xml.rels").decode("utf-8", "replace")
    except KeyError:
        return []
    targets = {m[0] or m[3]: m[1] or m[2] for m in _REL_RE.findall(rels)}
    lines: list[str] = []
    for rid in dict.fromkeys(_HF_REF_RE.findall(document_xml)):
        target = targets.get(rid, "")
        name = target.lstrip("/") if target.startswith("/") else f"word/{target}"
        try:
            root = ET.fromstring(zf.read(name))
        except (KeyError, ET.ParseError):
            continue
        for text in _paragraph_texts(root):
            text = " ".join(text.split())
            if any(ch.isalpha() for ch in _PAGE_WORDS.sub("", text)):
                lines.append(text)
    return list(dict.fromkeys(lines))


def _open_zip(job: Job, kind: str) -> tuple[bytes, zipfile.ZipFile]:
    """The file's bytes and its zip, once its members are known to unpack within the limits."""
    data = Path(job.src).read_bytes()
    if data.startswith(OLE_MAGIC):
        raise ConvertError(ole_reason(kind))
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


# mammoth's footnote and endnote marks: the reference in the text, and the notes listed at the document's end
_NOTE_REF = re.compile(r"\[\[(\d+)\]\]\(#(foot|end)note-(-?\d+)\)")
_NOTE_BACK = re.compile(r"\s*\[↑\]\(#(foot|end)note-ref-(-?\d+)\)")
_NOTE_ITEM = re.compile(r"^\d+\.\s+")


def _notes_to_their_pages(md: str) -> tuple[str, dict[tuple[str, str], str]]:
    """(the markdown without the list of notes mammoth puts at its end, {(kind, id): the note's text}). A note's
    text ends with its link back to its reference ("[↑](#footnote-ref-1)"); its paragraphs are joined."""
    backs = list(_NOTE_BACK.finditer(md))
    if not backs:
        return md, {}
    # the list starts at the item line of the first note
    start = md.rfind("\n", 0, backs[0].start()) + 1
    while start > 0 and not _NOTE_ITEM.match(md[start:]):
        start = md.rfind("\n", 0, start - 1) + 1
    notes: dict[tuple[str, str], str] = {}
    pos = start
    for m in backs:
        text = _NOTE_ITEM.sub("", md[pos:m.start()].strip(), count=1)
        notes[(m.group(1), m.group(2))] = " ".join(text.split())
        pos = m.end()
    return md[:start].rstrip() + md[pos:].rstrip(), notes


def _place_notes(bodies: list[str], notes: dict[tuple[str, str], str]) -> list[str]:
    """Each note at the end of the page that refers to it, as a markdown footnote ("[^1]" in the text, "[^1]: ..."
    below it); an endnote's mark is "[^e1]". A note no page refers to stays on the last page."""
    out, placed = [], set()
    for body in bodies:
        here: list[str] = []

        def mark(m: re.Match, here: list[str] = here) -> str:
            key = (m.group(2), m.group(3))
            label = f"{'e' if key[0] == 'end' else ''}{m.group(1)}"
            if key in notes and key not in placed:
                placed.add(key)
                here.append(f"[^{label}]: {notes[key]}")
            return f"[^{label}]"

        body = _NOTE_REF.sub(mark, body)
        out.append(body + ("\n\n" + "\n".join(here) if here else ""))
    rest = [f"[^{'e' if k[0] == 'end' else ''}{k[1]}]: {t}" for k, t in notes.items() if k not in placed]
    if rest and out:
        out[-1] += "\n\n" + "\n".join(rest)
    return out


_BOLD_PARA = re.compile(r"^\*\*(.+?)\*\*$")
_CHAPTER_SCHEMES = ("第章", "第編", "第部", "제장", "제편", "제부", "chapter", "part")
_HEADING_CHARS = 60  # a chapter's heading set in body text is one short line


def _body_chapters(md: str) -> str:
    """A DOCX without heading styles: its chapter headings set in body text (a paragraph of its own, bold or
    short, "**第1章　総則**", "第2章 国内出張", "Chapter 3") are `##` headings, when they run 1, 2, 3, ... (at
    least two of one scheme, as for a PDF's numbered chapters)."""
    lines = md.split("\n")
    found: dict[str, list[int]] = {}  # scheme -> line numbers of its run
    expect: dict[str, int] = {}
    for i, line in enumerate(lines):
        if (i and lines[i - 1].strip()) or (i + 1 < len(lines) and lines[i + 1].strip()):
            continue  # not a paragraph of its own
        m = _BOLD_PARA.match(line.strip())
        text = m.group(1) if m else line.strip()
        if not text or len(text) > _HEADING_CHARS or (not m and text.endswith(("。", "."))):
            continue
        c = chapter_of(text)
        if c is None or c[0] not in _CHAPTER_SCHEMES:
            continue
        if c[1] == expect.get(c[0], 1):
            found.setdefault(c[0], []).append(i)
            expect[c[0]] = c[1] + 1
    best = max(found.values(), key=len, default=[])
    if len(best) < 2:
        return md
    for i in best:
        m = _BOLD_PARA.match(lines[i].strip())
        lines[i] = "## " + " ".join((m.group(1) if m else lines[i]).split())
    return "\n".join(lines)


# A DOCX page when Word's own pages are unknown (no rendered page breaks): at most this many characters, cut at
# paragraphs. A printed A4 page holds about 1,500-2,000 characters of Japanese text or 3,000-3,500 of English
# (docs/ingest.md).
PAGE_CHARS = 3000


def _split_long(body: str, limit: int = PAGE_CHARS) -> list[str]:
    """A body longer than `limit` cut at paragraph boundaries (blank lines) into pieces of at most `limit`
    characters; a paragraph (a table) longer than that stays whole. A heading never ends a piece."""
    if len(body) <= limit:
        return [body]
    pieces: list[str] = []
    cur: list[str] = []
    size = 0
    for para in re.split(r"\n\s*\n", body):
        if not para.strip():
            continue
        if cur and size + len(para) + 2 > limit:
            tail = []
            while cur and _MD_HEADING.fullmatch(cur[-1].strip()):  # a heading goes with what it heads
                tail.insert(0, cur.pop())
            if cur:
                pieces.append("\n\n".join(cur))
                cur, size = tail, sum(len(t) + 2 for t in tail)
            else:
                cur = tail
        cur.append(para)
        size += len(para) + 2
    if cur:
        pieces.append("\n\n".join(cur))
    return pieces


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
        running = _docx_running(zf, xml)
        n_breaks = len(_DOCX_BREAK_RE.findall(xml))
        rendered = "<w:lastRenderedPageBreak" in xml  # the pages are Word's own
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
    md, notes = _notes_to_their_pages(md)
    top = _top_heading_level(md)
    if top is None or len(re.findall(rf"(?m)^#{{{top}}} ", md)) < 2:  # no headings split it (a Title alone)
        md = _body_chapters(md)
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
    if not rendered:
        bodies = [piece for b in bodies for piece in _split_long(b)]
    bodies = _place_notes(bodies, notes)
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
    if part_heading(first_heading):  # the document opens with its first chapter: no title printed on it
        first_heading = ""
    return emit_pages(job, title or first_heading or path.stem, bodies, sections, running=[running] * len(bodies))


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
    from ragkit.ingest.slides import read_slides

    path = Path(job.src)
    data, zf = _open_zip(job, "PPTX")
    with zf:
        title = _office_title(zf)
        try:
            slides = read_slides(data)
        except Exception as e:
            raise ConvertError(f"corrupt PPTX ({reason_line(e)})") from None
        if not slides:
            raise ConvertError("PPTX has no slides")
        bodies = [s.body for s in slides]
        sections = _pptx_sections(zf, len(bodies)) or range_sections(len(bodies))
    first_heading = ""
    for b in bodies:
        m = _MD_HEADING.search(b)
        if m:
            first_heading = m.group(2).strip()
            break
    if part_heading(first_heading):  # the first slide opens with chapter 1: no title printed on it
        first_heading = ""
    return emit_pages(job, title or first_heading or path.stem, bodies, sections,
                      printed=[s.printed for s in slides], running=[s.running for s in slides])
