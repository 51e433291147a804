"""A PPTX deck's slides as markdown, read with python-pptx: one body per slide, its running lines and the number
it prints.

    read_slides(data) -> list[Slide]

Shapes are read top to bottom, then left to right (a group's shapes likewise, in its place); the title
placeholder is `#`, each paragraph of a text frame is a paragraph of its own or, when it carries a bullet (its
own, or a body placeholder's inherited one), a list item indented by its level; tables and charts are markdown
tables with their first row as header, each a block of its own; pictures their alt text; the speaker notes
follow under `### Notes:`. A text shape repeated on most slides (a 社外秘 box, a footer, at least 3 slides and
more than half of them), and the footer and date placeholders, are running lines; the slide-number placeholder
is the slide's printed number."""

from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass, field

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
# placeholders whose paragraphs inherit a bullet from the master's body style unless they say otherwise
_BULLETED = frozenset({"BODY", "OBJECT", "VERTICAL_BODY", "VERTICAL_OBJECT"})
_TITLES = frozenset({"TITLE", "CENTER_TITLE", "VERTICAL_TITLE"})
_FOOTERS = frozenset({"FOOTER", "DATE"})
_RUNNING_MIN = 3  # slides a repeated shape must be on, as a running line on PDF pages


@dataclass
class Slide:
    body: str
    running: list[str] = field(default_factory=list)
    printed: str = ""


@dataclass
class _Item:
    kind: str  # "title" | "text" | "block" (table, chart, picture) | "footer" | "number"
    text: str
    key: str = ""  # what a repeated text shape is known by: NFKC, case, spaces and digits ignored


def _key(text: str) -> str:
    return re.sub(r"[\s\d]+", "", unicodedata.normalize("NFKC", text)).casefold()


def _ph_type(shape) -> str:
    if not shape.is_placeholder:
        return ""
    try:
        return shape.placeholder_format.type.name or ""
    except (ValueError, AttributeError):
        return ""


def _para_text(p) -> str:
    # a line break inside a paragraph (<a:br/>, "\v") continues it on the next line
    return "\n".join(" ".join(line.split()) for line in p.text.replace("\v", "\n").split("\n")).strip()


def _bullet(p, inherited: bool) -> str:
    """'-' or '1.' for a list item, '' for a plain paragraph."""
    ppr = p._p.pPr
    if ppr is not None:
        if ppr.find(f"{_A}buNone") is not None:
            return ""
        if ppr.find(f"{_A}buAutoNum") is not None:
            return "1."
        if ppr.find(f"{_A}buChar") is not None or ppr.find(f"{_A}buBlip") is not None:
            return "-"
    return "-" if inherited else ""


def _frame_markdown(frame, inherited: bool) -> str:
    """A text frame's paragraphs: a plain paragraph each, or list items (consecutive items one per line)."""
    paras = [(p, _para_text(p)) for p in frame.paragraphs]
    paras = [(p, t) for p, t in paras if t]
    if len(paras) == 1:
        return paras[0][1]
    blocks: list[list[str]] = []
    numbers: dict[int, int] = {}
    prev_item = False
    for p, text in paras:
        mark = _bullet(p, inherited)
        if not mark:
            blocks.append([text])
            prev_item, numbers = False, {}
            continue
        level = min(p.level or 0, 8)
        numbers = {lv: n for lv, n in numbers.items() if lv <= level}
        if mark == "1.":
            numbers[level] = numbers.get(level, 0) + 1
            mark = f"{numbers[level]}."
        indent = "  " * level
        lines = text.split("\n")
        item = [f"{indent}{mark} {lines[0]}"] + [f"{indent}{' ' * (len(mark) + 1)}{ln}" for ln in lines[1:]]
        if prev_item:
            blocks[-1].extend(item)
        else:
            blocks.append(item)
        prev_item = True
    return "\n\n".join("\n".join(b) for b in blocks)


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def _table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [[_cell(c) for c in r] + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(["---"] * width) + " |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])


def _chart(chart) -> str:
    try:
        head = "### Chart"
        if chart.has_title and chart.chart_title.has_text_frame:
            head += f": {' '.join(chart.chart_title.text_frame.text.split())}"
        series = list(chart.series)
        values = [list(s.values) for s in series]
        rows = [["Category"] + [s.name for s in series]]
        for i, cat in enumerate(chart.plots[0].categories):
            rows.append([str(cat.label if hasattr(cat, "label") else cat)]
                        + ["" if i >= len(v) or v[i] is None else str(v[i]) for v in values])
        return head + "\n\n" + _table(rows)
    except Exception:  # noqa: BLE001 - a chart python-pptx cannot read (an unsupported plot type) names itself
        return "[unsupported chart]"


def _picture(shape) -> str:
    try:
        alt = shape._element._nvXxPr.cNvPr.attrib.get("descr", "")
    except AttributeError:
        alt = ""
    alt = " ".join(re.sub(r"[\[\]]", " ", alt or shape.name).split())
    return f"![{alt}]({re.sub(r'[^0-9A-Za-z_]', '', shape.name)}.jpg)"


def _has_image(shape) -> bool:
    try:
        return shape.image is not None
    except Exception:  # noqa: BLE001 - an empty picture placeholder, an SVG without a raster: no picture to name
        return False


def _sorted(shapes) -> list:
    return sorted(shapes, key=lambda s: (float("-inf") if s.top is None else s.top,
                                         float("-inf") if s.left is None else s.left))


def _items(shapes, title_id: int | None) -> list[_Item]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    out: list[_Item] = []
    for shape in _sorted(shapes):
        ph = _ph_type(shape)
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            out.extend(_items(shape.shapes, title_id))
        elif getattr(shape, "has_table", False) and shape.has_table:
            out.append(_Item("block", _table([[c.text for c in r.cells] for r in shape.table.rows])))
        elif getattr(shape, "has_chart", False) and shape.has_chart:
            out.append(_Item("block", _chart(shape.chart)))
        elif shape.shape_type == MSO_SHAPE_TYPE.PICTURE or (ph in ("PICTURE", "OBJECT") and _has_image(shape)):
            out.append(_Item("block", _picture(shape)))
        elif shape.has_text_frame:
            if ph == "SLIDE_NUMBER":
                out.append(_Item("number", " ".join(shape.text_frame.text.split())))
            elif ph in _FOOTERS:
                text = " ".join(shape.text_frame.text.split())
                if text:
                    out.append(_Item("footer", text))
            elif shape.shape_id == title_id or ph in _TITLES:
                text = " ".join(shape.text_frame.text.split())
                if text:
                    out.append(_Item("title", f"# {text}"))
            else:
                text = _frame_markdown(shape.text_frame, ph in _BULLETED)
                if text:
                    # a placeholder holds the slide's own content (slides 1-3 may read "内容1".."内容3"): only a
                    # shape put on the slides besides their layout can be a running line
                    out.append(_Item("text", text, "" if ph else _key(shape.text_frame.text)))
    return out


def _notes(slide) -> str:
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    if frame is None:
        return ""
    paras = [t for t in (_para_text(p) for p in frame.paragraphs) if t]
    return "### Notes:\n" + "\n\n".join(paras) if paras else ""


_SENTENCE_END = re.compile(r"[.。!?！？:：]$")


def _short_runs_as_lists(body: list[str]) -> list[str]:
    """Separate short one-line text shapes next to one another (the boxes of a flow chart, a group of labels)
    are the items of a list, so nothing that reads the page runs them together ("エントリー書類選考")."""
    def short(text: str) -> bool:
        return "\n" not in text and not text.startswith(("#", "|", "!", "[", "- ", "### ")) \
            and not _SENTENCE_END.search(text) and len(text) <= 40

    out: list[str] = []
    i = 0
    while i < len(body):
        j = i
        while j < len(body) and short(body[j]):
            j += 1
        if j - i >= 2:
            out.append("\n".join(f"- {t}" for t in body[i:j]))
            i = j
        else:
            out.append(body[i])
            i += 1
    return out


def read_slides(data: bytes) -> list[Slide]:
    """Each slide of the deck as a Slide (body markdown, running lines, printed number)."""
    from pptx import Presentation

    prs = Presentation(io.BytesIO(data))
    per_slide: list[tuple[list[_Item], str]] = []
    for slide in prs.slides:
        title = slide.shapes.title
        per_slide.append((_items(slide.shapes, title.shape_id if title is not None else None), _notes(slide)))
    counts: dict[str, int] = {}
    for items, _notes_md in per_slide:
        for key in {it.key for it in items if it.kind == "text" and it.key}:
            counts[key] = counts.get(key, 0) + 1
    n = len(per_slide)
    repeated = {k for k, c in counts.items() if c >= _RUNNING_MIN and c * 2 > n}
    out = []
    for items, notes in per_slide:
        body: list[str] = []
        running: list[str] = []
        printed = ""
        for it in items:
            if it.kind == "number":
                printed = printed or it.text
            elif it.kind == "footer" or (it.kind == "text" and it.key in repeated):
                running.append(" ".join(it.text.split()))
            else:
                body.append(it.text)
        body = _short_runs_as_lists(body)
        if not body and running:  # a slide of nothing but running lines keeps them
            body, running = running, []
        running = list(dict.fromkeys(running))
        out.append(Slide("\n\n".join(body + ([notes] if notes else [])), running, printed))
    return out
