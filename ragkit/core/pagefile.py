"""The page file format: a small front matter (source, document, section, page, printed_page when it differs,
running: the page's running header and footer lines), then the page's markdown. Values are single-line; the
parser forgives hand edits.

    render_page(meta, body) -> str;  parse_page(text) -> (PageMeta, body);  first_heading(body);  has_text(body)"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragkit.core.text import one_line

NO_TEXT_MARKER = "<!-- ragkit: no text layer on this page -->"
FRONT_PAGES = 3  # a document's first pages: where a report names the period it covers (its cover, its title page)
RUNNING_SEP = " · "
_FM = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n?", re.DOTALL)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
# a line holding only an HTML comment: ragkit's markers (NO_TEXT_MARKER, "page could not be read"), not content
MARKER_LINE = re.compile(r"(?m)^\s*<!--.*?-->\s*$")


@dataclass
class PageMeta:
    source: str = ""
    document: str = ""
    section: str = ""
    page: int = 0
    printed_page: str = ""  # the number (or label) printed on the page when it differs from `page`: "17", "iii"
    running: str = ""  # the running header/footer lines taken out of the body, joined by RUNNING_SEP


def render_page(meta: PageMeta, body: str) -> str:
    fm = (
        f"---\nsource: {one_line(meta.source)}\ndocument: {one_line(meta.document)}\n"
        f"section: {one_line(meta.section)}\npage: {int(meta.page)}\n"
        + (f"printed_page: {one_line(meta.printed_page)}\n" if meta.printed_page.strip() else "")
        + (f"running: {one_line(meta.running)}\n" if meta.running.strip() else "")
        + "---\n"
    )
    return fm + body.strip("\n") + "\n"


def parse_page(text: str) -> tuple[PageMeta, str]:
    """(front matter, body). A file without front matter is all body."""
    m = _FM.match(text)
    if not m:
        return PageMeta(), text
    meta = PageMeta()
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "page":
            try:
                meta.page = int(value)
            except ValueError:
                pass
        elif key in ("source", "document", "section", "printed_page", "running"):
            setattr(meta, key, value)
    return meta, text[m.end() :]


def first_heading(body: str) -> str:
    """The page's first markdown heading, else its first non-empty line (shortened)."""
    m = _HEADING.search(body)
    if m:
        return m.group(1).strip()
    for line in body.splitlines():
        line = line.strip()
        if line and not line.startswith("<!--"):
            return line[:80]
    return ""


def has_text(body: str) -> bool:
    """Whether a page's markdown holds anything but markers: a page without a text layer (a scan, a photo, an
    empty slide) holds only NO_TEXT_MARKER."""
    return bool((MARKER_LINE.sub("", body) if "<!--" in body else body).strip())
