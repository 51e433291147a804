"""Keeping secrets (the model API key, the credentials of a base URL) out of what ragkit shows or stores.

    mask(text, *secrets) -> str    each secret replaced by "***", the text otherwise unchanged
    scrub(text, *secrets) -> str   mask, then one line (for error messages)

A secret is found as it was given, and also as a server or proxy may echo it: in another case, percent-encoded
(wholly or in part), or cut off: MIN_PREFIX or more of its leading characters followed by an ellipsis or by the
end of the text. Secrets shorter than MIN_SECRET are left alone (masking "ab" would mangle every text)."""

from __future__ import annotations

import re
from functools import lru_cache

MIN_SECRET = 4  # shorter values are no secrets worth masking
MIN_PREFIX = 8  # a cut-off echo of at least this many leading characters counts as the secret
_CUT = r"(?=…|\.\.\.|\Z)"  # what ends a cut-off echo: an ellipsis, or the end of the text


def _unit(ch: str) -> str:
    """A pattern for one character of a secret: itself (any case, the pattern ignores case) or percent-encoded."""
    encoded = "".join(f"%{b:02x}" for b in ch.encode("utf-8"))
    return f"(?:{re.escape(ch)}|{encoded})"


@lru_cache(maxsize=64)
def _pattern(secret: str) -> re.Pattern[str]:
    units = [_unit(c) for c in secret]
    full = "".join(units)
    if len(secret) <= MIN_PREFIX:
        return re.compile(full, re.IGNORECASE)
    rest = ""
    for u in reversed(units[MIN_PREFIX:-1]):  # the longer prefixes, nested: (?:u8(?:u9(?:...)?)?)?
        rest = f"(?:{u}{rest})?"
    return re.compile(f"{full}|{''.join(units[:MIN_PREFIX])}{rest}{_CUT}", re.IGNORECASE)


def mask(text: str, *secrets: str | None) -> str:
    """`text` with every form of each secret (see the module's docstring) replaced by "***"."""
    out = str(text)
    for secret in sorted({str(s) for s in secrets if s and len(str(s)) >= MIN_SECRET}, key=len, reverse=True):
        # every form begins with the secret's first characters in some case, or holds a '%': most texts hold
        # neither, and skip the pattern (a trace line of a page: str.lower's cost, not the regex's)
        if "%" in out or secret[:MIN_PREFIX].lower() in out.lower():
            out = _pattern(secret).sub("***", out)
    return out


def scrub(text: str, *secrets: str | None) -> str:
    """`mask`, and kept to one line: for error messages passed on."""
    return " ".join(mask(text, *secrets).split())
