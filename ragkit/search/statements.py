"""Financial statements: which primary statement a page is, and which statements a question needs, as one term
each ("§balance", "§income", "§cashflow", "§equity").

    page_statements(body) -> terms   # the statements a page's title names, when a table of figures follows
    asked_statements(query) -> terms  # the statements named, or holding the line items and measures asked for

A filing's figures are on its statement pages, but the words of a question ("inventory turnover", "goodwill")
are on many pages of the same filing, and a statement page holds each of them once among a hundred line items:
by words alone the balance sheet ranks below the notes that discuss its lines.
"""

from __future__ import annotations

import re

from ragkit.core.text import detect_lang, search_terms
from ragkit.search.periods import period_terms
from ragkit.search.synonyms import holds, phrase_terms

KINDS = ("balance", "income", "cashflow", "equity")
STATEMENT_TERMS = frozenset(f"§{k}" for k in KINDS)

# A statement's title, matched with the spaces taken out (PDF text breaks words: "Balance Shee t").
_TITLES = [(kind, re.compile(pattern)) for kind, pattern in (
    ("balance", r"balancesheets?|statements?of(?:consolidated)?(?:financial)?(?:position|condition)|貸借対照表|"
                r"재무상태표"),
    ("cashflow", r"statements?of(?:consolidated)?cashflows?|cashflowstatements?|キャッシュ・?フロー計算書|현금흐름표"),
    ("equity", r"statements?of(?:consolidated)?(?:changesin)?(?:stockholders|shareholders|shareowners)['’]?"
               r"(?:equity|deficit)|statements?of(?:changesin)?equity|株主資本等変動計算書|자본변동표"),
    # "Statements of Comprehensive Income" is not the income statement (other comprehensive income)
    ("income", r"statements?of(?:consolidated)?(?:operations|income|earnings|profitorloss)|incomestatements?|"
               r"profitandloss(?:statement|account)|損益計算書|損益及び包括利益計算書|(?<!포괄)손익계산서"),
)]
# Notes about a statement ("Supplemental Balance Sheet Information", "Balance Sheet Components") are not it.
_NOT_A_STATEMENT = re.compile(r"(?i)supplement|components|information")
# Words that may stand before a title in lower case: "3M Company and Subsidiaries Consolidated ...".
_CONNECTORS = {"and", "of", "&", "the"}
TITLE_LINE_MAX = 140  # a longer line is a sentence that mentions a statement
TITLE_AT_MOST = 90  # ... and so is a title that starts further in
TITLE_LINES = 3  # the first lines of a page that may be its title (above its first table)


def _title_kinds(line: str) -> list[str]:
    s = line.strip().lstrip("#").strip()
    if len(s) > TITLE_LINE_MAX or s.endswith(".") or _NOT_A_STATEMENT.search(s[:TITLE_AT_MOST]):
        return []
    s = s[:TITLE_AT_MOST]
    at = [i for i, ch in enumerate(s) if not ch.isspace()]
    squashed = "".join(s[i] for i in at)
    low = squashed.lower()
    out = []
    for kind, title in _TITLES:
        m = title.search(low)
        if not m:
            continue
        first = squashed[m.start()]
        if first.isascii() and first.islower():
            continue  # English titles are capitalised; a sentence's "balance sheets" is not
        before = s[: at[m.start()]]
        if before.rstrip().endswith("-"):
            continue  # "OFF-BALANCE SHEET ARRANGEMENTS"
        if any(w[:1].islower() and w not in _CONNECTORS for w in re.findall(r"[^\s|:()]+", before)):
            continue  # "The following tables present ... the Consolidated Balance Sheets:"
        out.append(kind)
    return out


def page_statements(body: str) -> list[str]:
    """The statement terms of a page whose title (one of its first lines, above its first table) names a primary
    financial statement, and which holds a table of figures."""
    lines = [ln for ln in body.splitlines() if ln.strip()]
    above: list[str] = []
    for ln in lines:
        if ln.lstrip().startswith("|"):
            break
        above.append(ln)
    else:
        return []  # no table
    if not any(ln.lstrip().startswith("|") and any(c.isdigit() for c in ln) for ln in lines[len(above):]):
        return []
    kinds: list[str] = []
    for ln in above[:TITLE_LINES]:
        kinds += [k for k in _title_kinds(ln) if k not in kinds]
    return [f"§{k}" for k in kinds]


# What a question asks for, and the statements that report it. The words are matched as consecutive terms.
_NAMED = """
balance: balance sheet | statement of financial position | statement of financial condition | 貸借対照表 | 재무상태표
income: income statement | statement of operations | statements of operations | statement of income | statement of earnings | profit and loss | p&l | 損益計算書 | 손익계산서
cashflow: cash flow statement | statement of cash flows | cash flows statement | キャッシュ・フロー計算書 | キャッシュフロー計算書 | 현금흐름표
equity: statement of stockholders equity | statement of shareholders equity | statement of changes in equity | 株主資本等変動計算書 | 자본변동표
"""
# English line items and measures: a question about a fiscal period that names one needs these statements.
_ITEMS = """
balance: total assets | current assets | assets | current liabilities | total liabilities | liabilities | inventory | inventories | receivable | receivables | payable | payables | debt | goodwill | working capital | property and equipment | property plant and equipment | pp&e | fixed asset | fixed assets | book value | capitalization | invested capital | capital employed | retained earnings | stockholders equity | shareholders equity | total equity | equity | current ratio | quick ratio | cash ratio | leverage | turnover | days payable | days sales | days inventory | dpo | dso | dio | cash conversion cycle | return on assets | return on equity | roa | roe | roce
income: revenue | revenues | net sales | sales | cost of sales | cost of goods sold | cogs | cost of revenue | gross profit | gross margin | operating income | operating profit | operating margin | operating expenses | net income | net earnings | net profit | net loss | ebit | ebitda | interest expense | income tax | income taxes | tax rate | earnings per share | eps | r&d | research and development | sg&a | selling general and administrative | advertising | margin | interest coverage | turnover | return on assets | return on equity | roa | roe | roce
cashflow: capital expenditure | capital expenditures | capex | purchases of property and equipment | operating cash flow | cash from operations | operating activities | investing activities | financing activities | free cash flow | cash flow | depreciation and amortization | depreciation | d&a | ebitda | dividends paid | repurchases | buybacks
"""


def _table(text: str) -> list[tuple[str, list[list[str]]]]:
    out = []
    for line in text.strip().splitlines():
        kind, _, phrases = line.partition(":")
        out.append((kind.strip(), phrase_terms(phrases.split("|"))))
    return out


_NAMED_TABLE = _table(_NAMED)
_ITEMS_TABLE = _table(_ITEMS)


def asked_statements(query: str) -> list[str]:
    """The statement terms of a question: the statements it names (any language), and, for an English question
    about a fiscal period ("FY2019", "the fiscal year ending January 28, 2023", "Q3 2024"), those reporting the
    line items and measures it names ("inventory turnover": income statement and balance sheet)."""
    seq = search_terms(query, drop_stopwords=True)
    kinds = [kind for kind, phrases in _NAMED_TABLE if any(holds(seq, p) for p in phrases)]
    if not kinds and detect_lang(query) == "en" and period_terms(query):
        kinds = [kind for kind, phrases in _ITEMS_TABLE if any(holds(seq, p) for p in phrases)]
    return [f"§{k}" for k in dict.fromkeys(kinds)]
