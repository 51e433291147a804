"""Snippets: a page's markdown as one display line, and the window of it around the query's terms."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from ragkit.core.pagefile import MARKER_LINE
from ragkit.core.text import STOPWORDS, one_line, search_terms

# within one line only: `\s` would reach over a blank line, and the heading after it would lose its line break
_HEADING_MARK = re.compile(r"(?m)^[ \t]{0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$")
_JOIN_BREAK = re.compile(
    "(?<=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])[ \t]*\n[ \t]*"
    "(?=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")


def display_text(body: str) -> str:
    """Page markdown as one line for snippets: NFKC, heading marks dropped, a line break inside a
    Japanese/Chinese sentence joined (Korean wraps at spaces, so its line breaks become spaces)."""
    # Each step only where its marker occurs, and whitespace collapsed by one_line (str.split): this runs for
    # every search hit, and a regex pass over every character cost most of a snippet's time.
    text = unicodedata.normalize("NFKC", body)
    if "<!--" in text:
        text = MARKER_LINE.sub("", text)
    if "#" in text:
        # a blank line after a heading keeps it apart from the next line: _JOIN_BREAK joins a single line break
        # ("情報セキュリティ規程" + "第1章 パスワード" was "情報セキュリティ規程第1章 パスワード")
        text = _HEADING_MARK.sub(r"\1\n\n", text)
    if "\n" in text and not text.isascii():
        text = _JOIN_BREAK.sub("", text)
    return one_line(text)


def make_snippet(body: str, q: Counter | str, width: int = 200) -> str:
    """About `width` characters of the page around the spot holding the most distinct query terms, as display
    text (CJK line breaks joined). Only that region is cleaned, so long pages stay cheap."""
    terms = [t for t in (search_terms(q) if isinstance(q, str) else q) if t not in STOPWORDS] or list(q)
    if len(body) <= width:
        return display_text(body)
    low = body.lower()
    hits: list[tuple[int, str]] = []
    for t in set(terms):
        start = 0
        for _ in range(30):
            i = low.find(t, start)
            if i < 0:
                break
            hits.append((i, t))
            start = i + len(t)
    span = width * 3 // 2  # raw text carries markup and extra spaces
    if hits:
        hits.sort()
        # sliding window over the sorted hits: the start whose window holds the most distinct terms
        inwin: Counter = Counter()
        best, best_i, j = -1, 0, 0
        for pos, t in hits:
            inwin[t] += 1
            while pos - hits[j][0] > span:
                inwin[hits[j][1]] -= 1
                if not inwin[hits[j][1]]:
                    del inwin[hits[j][1]]
                j += 1
            if len(inwin) > best:
                best, best_i = len(inwin), hits[j][0]
        lo = max(0, best_i - width)
        lo = body.rfind("\n", 0, best_i) + 1 if 0 <= best_i - body.rfind("\n", 0, best_i) <= width else lo
    else:
        lo = 0
    text = display_text(body[lo : lo + width * 4])
    tl = text.lower()
    found = [i for i in (tl.find(t) for t in terms) if i >= 0]
    first = min(found) if found else 0
    start = max(0, first - width // 5)
    if start > 0 and text[start - 1].isalnum() and text[start].isascii():
        sp = text.find(" ", start, first)  # start at a word boundary for Latin text
        start = sp + 1 if sp >= 0 else start
    out = text[start : start + width].strip()
    before = lo > 0 or start > 0
    after = lo + width * 4 < len(body) or start + width < len(text)
    return ("…" if before else "") + out + ("…" if after else "")
