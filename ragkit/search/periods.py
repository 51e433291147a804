"""Fiscal periods, in Japanese and English, as terms of their own: a page that reports "2025年3月期 第3四半期" and a
question that asks about it both hold "§fy2025q3", which a neighbouring period's report of the same company does
not. "§" is never part of a word, so no text can produce these terms by accident.

    period_terms(text) -> list[str]   # e.g. ["§fy2025", "§q3", "§fy2025q3"], ["§end2024-03"]

Understood: 2025年3月期, 2024年度, 令和5年度 / 平成30年度, 第3四半期 (累計), 上期・下期・上半期・下半期・中間期,
中間決算, 通期, FY2024 / FY24 / fiscal (year) 2019, Q3 / 3Q / third quarter, first / second half, H1 / H2, and
"(quarter | year | period | months | weeks) ended (ending) March 31, 2024" (the period's end month), "the second
quarter of 2023"; in Korean 2024년도 / 2024 회계연도 (사업연도), 3분기, 상반기・하반기・반기. The second quarter and the
half year name one report: each brings the other's terms.

    reported_periods(text) -> list[str]   # a page's: the same, and the quarter a year-to-date period is

A filing names its quarter by the year so far: "the three and six months ended June 30, 2023" is a second quarter's
report, "the nine months (thirty-nine weeks) ended October 29, 2022" a third quarter's; the fiscal year is the one
ending in the month before the period began (Nike's six months ended November 30, 2023: FY2024 Q2). A page that
names three months ended and no longer period ended, and no other quarter, is a first quarter's. Only pages are read
so: a question that says "the six months ended June 30" names the period by its end, as a cover does.
"""

from __future__ import annotations

import re

from ragkit.core.text import normalize

_KANJI_DIGITS = {"一": 1, "二": 2, "三": 3, "四": 4, "1": 1, "2": 2, "3": 3, "4": 4}
_ERAS = {"令和": 2018, "平成": 1988}
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), start=1)}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_ORDINAL_Q = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}

_ERA = r"(?P<e>令和|平成)\s*(?P<n>\d{1,2}|元)\s*年"  # a Japanese era year: 令和5年, 平成元年
# a fiscal year: 2025年3月期, 2024年度, 令和5年度, FY2024, FY 24, fiscal 2019, fiscal year 2019, 2024년도, 2024 회계연도
_FY = re.compile(
    r"(?P<ja>(?<!\d)(?P<y1>(?:19|20)\d\d)\s*年\s*(?P<m1>\d{1,2})\s*月\s*期)"
    r"|(?P<nendo>(?<!\d)(?P<y2>(?:19|20)\d\d)\s*年\s*度)"
    rf"|(?P<era>{_ERA}\s*度?)"
    r"|(?P<fy>\bfy\s*'?(?P<y3>(?:19|20)?\d\d)(?![\d]))"
    r"|(?P<fiscal>\bfiscal\s+(?:year\s+)?(?P<y4>(?:19|20)\d\d)\b)"
    r"|(?P<ko>(?<!\d)(?P<y5>(?:19|20)\d\d)\s*(?:년\s*도|(?:년\s*)?(?:회\s*계|사\s*업)\s*연\s*도))")
# a part of a year: 第3四半期, 3Q, Q3, third quarter, 3분기, 上期 / 下期, 상반기 / 하반기, 반기, first half, H1
_PART = re.compile(
    r"第\s*(?P<jq>[1-4一二三四])\s*四\s*半\s*期"
    r"|(?<![a-z0-9])(?:(?P<q1>[1-4])\s*q|q\s*(?P<q2>[1-4]))(?![a-z0-9])"
    r"|\b(?P<oq>first|1st|second|2nd|third|3rd|fourth|4th)\s+(?:fiscal\s+)?quarter\b"
    r"|(?<!\d)(?P<kq>[1-4])\s*분\s*기"
    r"|(?P<h1>上\s*期|上\s*半\s*期|中\s*間\s*(?:期|決\s*算|(?:連\s*結\s*)?会\s*計\s*期\s*間)|first\s+half|\bh1\b"
    r"|상\s*반\s*기|(?<![상하])반\s*기)"
    r"|(?P<h2>下\s*期|下\s*半\s*期|second\s+half|\bh2\b|하\s*반\s*기)")
# the end of a reported period: "quarter ended March 31, 2024", "year ended December 31, 2023"
_DATE = r"(?P<mon>[a-z]{3,9})\.?\s+(?P<d>\d{1,2}),?\s+(?P<y>(?:19|20)\d\d)\b"  # "march 31, 2024", "dec. 31 2023"
_ENDED = re.compile(r"\b(?:period|quarter|year|months|weeks)\s+end(?:ed|ing)\s+" + _DATE)
# year to date: "six months ended June 30, 2023", "thirty-nine weeks ended October 29, 2022"
_YEAR_TO_DATE = re.compile(
    r"\b(?P<n>six|nine|6|9|twenty[- ]six|thirty[- ]nine|26|39)\s+(?:months|weeks)\s+end(?:ed|ing)\s+" + _DATE)
_QUARTER_OF = {"six": 2, "6": 2, "twenty six": 2, "26": 2, "nine": 3, "9": 3, "thirty nine": 3, "39": 3}
# a quarter alone, "the three months (thirteen weeks) ended March 31, 2023": a first quarter's report, when the page
# names no longer period ended (a later quarter's year to date, a year: "three months and year ended") and no other
# quarter ("fourth quarter results: three months ended December 31")
_QUARTER_ALONE = re.compile(r"\b(?:(?:three|3)\s+months|(?:thirteen|13)\s+weeks)\s+end(?:ed|ing)\s+" + _DATE)
# A period of weeks ends on a weekday near its month's end: in a month's first days, it closes the month before
# ("six months ended July 1, 2023": January to June)
EARLY_DAYS = 7
_LONGER = re.compile(
    r"\b(?:six|nine|twelve|6|9|12)\s+months\s+(?:end|and)|\b(?:twenty[- ]six|thirty[- ]nine|fifty[- ]t\w+|26|39|52|53)"
    r"\s+weeks\s+(?:end|and)|\byears?\s+end(?:ed|ing)\b|\band\s+(?:fiscal\s+)?years?\b")
_BARE_YEAR = re.compile(r"(?<![\d.,])(?:19|20)\d\d(?![\d.,%])")
BESIDE = 2  # ... and between a part and a plain year ("Q3 2024", "H1 2023", "2024年第3四半期"), or " of " ("the
# second quarter of 2023")
_OF = re.compile(r"\s+of\s+")
NEAR = 12  # characters between a fiscal year and a part that names the same period ("2025年3月期 第3四半期")
# One report covers both: the second quarter's cumulative summary is the half year's (第2四半期(累計) = 中間期 = 上期;
# since 2024 a Japanese company's second-quarter 決算短信 is called 中間決算短信; a 10-Q for the second quarter
# reports the six months too)
_SAME_REPORT = {"q2": ("q2", "h1"), "h1": ("h1", "q2")}


_ERA_YEAR = re.compile(_ERA)


def _western(era: str, n: str) -> int:
    """The Western year of an era year: 令和 "5" -> 2023, 平成 "元" (its first year) -> 1989."""
    return _ERAS[era] + (1 if n == "元" else int(n))


def era_years(text: str) -> set[str]:
    """The Western years of the Japanese era years a text names ("令和5年" -> "2023", "平成元年" -> "1989")."""
    return {str(_western(e, n)) for e, n in _ERA_YEAR.findall(text)}


def _year(m: re.Match) -> int | None:
    if m["ja"]:
        return int(m["y1"])
    if m["nendo"]:
        return int(m["y2"])
    if m["era"]:
        return _western(m["e"], m["n"])
    if m["ko"]:
        return int(m["y5"])
    y = m["y3"] or m["y4"]
    if y is None:
        return None
    return int(y) if len(y) == 4 else 2000 + int(y)


def _part(m: re.Match) -> str:
    if m["jq"] or m["q1"] or m["q2"] or m["kq"]:
        return f"q{_KANJI_DIGITS.get(m['jq'] or m['q1'] or m['q2'] or m['kq'])}"
    if m["oq"]:
        return f"q{_ORDINAL_Q[m['oq']]}"
    return "h1" if m["h1"] else "h2"


def period_terms(text: str) -> list[str]:
    """The period terms a text names, each once, in order of appearance."""
    return _named_periods(normalize(text))


def _named_periods(norm: str) -> list[str]:
    """period_terms() of a normalized text."""
    out: list[str] = []
    years = [(m.start(), m.end(), y) for m in _FY.finditer(norm) if (y := _year(m)) and 1990 <= y <= 2060]
    parts = [(m.start(), m.end(), _part(m)) for m in _PART.finditer(norm)]
    for _s, _e, y in years:
        out.append(f"§fy{y}")
    bare = [(m.start(), m.end(), int(m[0])) for m in _BARE_YEAR.finditer(norm)]
    for s, e, part in parts:
        same = _SAME_REPORT.get(part, (part,))
        out += [f"§{p}" for p in same]
        # the fiscal year written closest to it, before or after, within NEAR characters; else a plain year
        # right beside it ("Q3 2024", "2024年第3四半期")
        near = [(min(abs(s - ye), abs(ys - e)), y) for ys, ye, y in years
                if min(abs(s - ye), abs(ys - e)) <= NEAR]
        near = near or [(min(abs(s - ye), abs(ys - e)), y) for ys, ye, y in bare
                        if min(abs(s - ye), abs(ys - e)) <= BESIDE or _OF.fullmatch(norm, e, ys)]
        if near:
            out += [f"§fy{min(near)[1]}{p}" for p in same]
    for m in _ENDED.finditer(norm):
        month = _MONTHS.get(m["mon"][:3])
        if month:
            out.append(f"§end{m['y']}-{month:02d}")
    return list(dict.fromkeys(out))


def reported_periods(text: str) -> list[str]:
    """The period terms a page reports: period_terms(), and the quarter its latest year-to-date period is (a quarter
    alone, on a page naming no longer period ended, is a first quarter)."""
    norm = normalize(text)
    out = _named_periods(norm)
    ends = [(*end, _QUARTER_OF[m["n"].replace("-", " ")]) for m in _YEAR_TO_DATE.finditer(norm) if (end := _closed(m))]
    if not ends and not _LONGER.search(norm) and not {"§q2", "§q3", "§q4", "§h1", "§h2"} & set(out):
        ends = [(*end, 1) for m in _QUARTER_ALONE.finditer(norm) if (end := _closed(m))]
        if len({month for _y, month, _q in ends}) > 1:
            ends = []  # quarters ending in different months: a discussion comparing quarters, not one quarter's report
    if ends:
        # the latest: what the page reports (the earlier ones are its comparatives)
        y, month, quarter = max(ends)
        start = (month - 3 * quarter) % 12 + 1  # the fiscal year's first month (weeks: the nearest month)
        last = (start - 2) % 12 + 1
        same = _SAME_REPORT.get(f"q{quarter}", (f"q{quarter}",))
        out += [f"§{p}" for p in same] + [f"§fy{y + (last < month)}{p}" for p in same]
    return list(dict.fromkeys(out))


def _closed(m: re.Match) -> tuple[int, int] | None:
    """(year, month) a period's end date closes (EARLY_DAYS), or None for a word that is no month."""
    month = _MONTHS.get(m["mon"][:3])
    if not month:
        return None
    year = int(m["y"])
    if int(m["d"]) <= EARLY_DAYS:
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return year, month


def specific_periods(terms: list[str]) -> list[str]:
    """The periods among these terms that tell a company's reports apart: a year with its quarter or half, else
    a period's end month. A fiscal year alone is the year (ranking.YEAR_WEIGHT's), a bare quarter no period."""
    for test in (lambda t: t.startswith("§fy") and not t[3:].isdigit(), lambda t: t.startswith("§end")):
        found = [t for t in terms if test(t)]
        if found:
            return found
    return []


def another_of_kind(asked: list[str], term: str) -> bool:
    """Whether a period term names another period of the kind asked (specific_periods' terms: a year's quarter or
    half, or a period's end), not one of those asked."""
    kind = "§end" if asked[0].startswith("§end") else "§fy"
    return term.startswith(kind) and term not in asked and (kind == "§end" or not term[3:].isdigit())


def reports_another(asked: list[str], reported: set[str]) -> bool:
    """Whether a document reporting these period terms reports another period of the kind asked (specific_periods'
    terms) and not the one asked: the same company's previous quarter, when the question names one."""
    if not asked or reported & set(asked):
        return False
    return any(another_of_kind(asked, t) for t in reported)
