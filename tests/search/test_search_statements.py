"""Financial statements: a page titled as a primary statement is known as one, a question about a fiscal
period's line items or measures needs the statements that report them, and those come before the notes and the
discussion that repeat the words."""

from __future__ import annotations

import pytest
from search_fixtures import fresh, top, write_page

from ragkit.search.statements import asked_statements, page_statements

_TABLE = "\n| | 2021 | 2020 |\n|---|---|---|\n| Revenues | $ 44,538 | $ 37,403 |\n"


@pytest.mark.parametrize("title,terms", [
    ("## CONSOLIDATED BALANCE SHEETS", ["§balance"]),
    ("AMAZON.COM, INC. CONSOLIDATED STATEMENTS OF OPERATIONS (in millions, except per share data)", ["§income"]),
    ("## 3M Company and Subsidiaries Consolidated Balance Shee t At December 31", ["§balance"]),  # a broken word
    ("## 3M Company and Subsidiaries Consolidated Statement of Incom e Years ended December 31", ["§income"]),
    ("Consolidated Statements of Earnings", ["§income"]),
    ("CONDENSED CONSOLIDATED STATEMENTS OF CASH FLOWS (Unaudited)", ["§cashflow"]),
    ("Consolidated Statements of Financial Condition", ["§balance"]),
    ("CONSOLIDATED STATEMENTS OF CONDITION", ["§balance"]),  # a bank's
    ("Statement of Consolidated Operations", ["§income"]),
    ("CONSOLIDATED STATEMENTS OF OPERATIONS AND COMPREHENSIVE LOSS", ["§income"]),
    ("## Consolidated Statements of Changes in Shareholders' Equity", ["§equity"]),
    ("(1) 連結貸借対照表", ["§balance"]),
    ("(2) 連結損益計算書及び連結包括利益計算書", ["§income"]),
    ("(3) 連結キャッシュ・フロー計算書", ["§cashflow"]),
    ("연결 재무상태표", ["§balance"]),
    # not a statement: comprehensive income, a note about one, a sentence naming one, off-balance sheet
    ("## CONSOLIDATED STATEMENTS OF COMPREHENSIVE INCOME", []),
    ("## NOTE 7. Supplemental Balance Sheet Information", []),
    ("4. | Balance Sheet Components Content Assets", []),
    ("The following tables present the fair values included within the Consolidated Balance Sheets:", []),
    ("Acquired intangible assets, included within other assets on our consolidated balance sheets, consist of:", []),
    ("#### OFF-BALANCE SHEET ARRANGEMENTS", []),
])
def test_a_page_titled_as_a_statement_is_one(title, terms):
    assert page_statements(title + "\n" + _TABLE) == terms


def test_a_statement_title_needs_a_table_of_figures_below_it():
    assert page_statements("## Consolidated Balance Sheets\nSee the next page.") == []
    assert page_statements("## Consolidated Balance Sheets\n| Assets | Liabilities |\n|---|---|\n") == []
    # a title further down the page, under prose, is a reference to the statement, not its title
    assert page_statements("Liquidity was strong.\nWe paid dividends.\nWe issued debt.\n"
                           "## Consolidated Balance Sheets\n" + _TABLE) == []


@pytest.mark.parametrize("question,terms", [
    ("what is the FY2021 inventory turnover ratio for Nike?", ["§balance", "§income"]),
    ("What is the FY2018 capital expenditure amount (in USD millions) for 3M based on the cash flow statement?",
     ["§cashflow"]),
    ("what goodwill does Best Buy have for the fiscal year ending January 28, 2023?", ["§balance"]),
    ("What is Amazon's FY2017 days payable outstanding (DPO)?", ["§balance"]),
    ("What was Acme's revenue in Q3 2024?", ["§income"]),
    ("2025年3月期の連結貸借対照表の総資産は？", ["§balance"]),  # a statement named, in any language
    # no fiscal period: the words may be about anything (a survey's household income)
    ("how does Best Buy record merchandise inventories?", []),
    ("What share of households has an income below the median?", []),
    # a fiscal period, but no line item
    ("Who was the CEO of Acme in fiscal 2019?", []),
])
def test_a_question_needs_the_statements_of_its_line_items(question, terms):
    assert asked_statements(question) == terms


STATEMENT_QUESTIONS = {
    "What is the FY2021 inventory turnover ratio for Acme?": ("filings/acme/statements/page_061.md",
                                                             "filings/acme/statements/page_059.md"),
    "What was Acme's FY2021 capital expenditure?": ("filings/acme/statements/page_062.md",),
}


def acme_filing(db) -> None:
    """A 10-K whose discussion and notes use the words of the questions, and whose statements hold each of them
    once among their line items."""
    src = "src/acme_2021_10k.pdf"
    write_page(db, "filings/acme/cover/page_001.md",
               "# Acme Corp. Form 10-K\nFor the fiscal year ended May 31, 2021. Acme sells shoes and apparel.",
               source=src, page=1)
    topics = ["risk factors", "properties", "legal proceedings", "employees", "markets", "suppliers", "taxes",
              "leases", "pensions", "segments", "stock plans", "controls", "revenue recognition", "derivatives"]
    for i, topic in enumerate(topics):
        write_page(db, f"filings/acme/other/page_{i + 10:03d}.md",
                   f"# {topic.title()}\nOur {topic}: see the notes. Demand for "
                   f"our products and the cost of {topic} may change; store count and sales channels grew.",
                   source=src, page=i + 10)
    write_page(db, "filings/acme/mdna/page_031.md",
               "# Management's Discussion and Analysis\nIn fiscal 2021 demand recovered in every region and our "
               "stores turned their stock faster than in fiscal 2020. Capital spending plans for fiscal 2022 "
               "include new stores, distribution centers and technology. Wholesale partners reopened their doors.",
               source=src, page=31)
    write_page(db, "filings/acme/notes/page_071.md",
               "# Note 2 - Accounting Policies\nInventories are stated at the lower of cost and net realizable "
               "value. Revenues are recognized when control passes to the customer. Advertising is expensed as "
               "incurred. Leases are recognized on the balance of their terms. Fiscal 2021 ended on May 31, 2021.",
               source=src, page=71)
    write_page(db, "filings/acme/statements/page_059.md",
               "ACME CORP. CONSOLIDATED STATEMENTS OF INCOME (in millions)\n\n| Year ended May 31, | 2021 | 2020 |\n"
               "|---|---|---|\n| Revenues | $ 44,538 | $ 37,403 |\n| Cost of sales | 24,576 | 21,162 |\n"
               "| Gross profit | 19,962 | 16,241 |\n| Selling and administrative expense | 13,025 | 13,126 |\n"
               "| Interest expense | 262 | 89 |\n| Income before income taxes | 6,661 | 2,887 |\n"
               "| Net income | $ 5,727 | $ 2,539 |", source=src, page=59)
    write_page(db, "filings/acme/statements/page_061.md",
               "ACME CORP. CONSOLIDATED BALANCE SHEETS (in millions)\n\n| May 31, | 2021 | 2020 |\n|---|---|---|\n"
               "| Cash and equivalents | $ 9,889 | $ 8,348 |\n| Accounts receivable, net | 4,463 | 2,749 |\n"
               "| Inventories | 6,854 | 7,367 |\n| Total current assets | 26,291 | 20,556 |\n"
               "| Property, plant and equipment, net | 4,904 | 4,866 |\n| Goodwill | 242 | 223 |\n"
               "| Total assets | $ 37,740 | $ 31,342 |\n| Accounts payable | 2,836 | 2,248 |\n"
               "| Long-term debt | 9,413 | 9,406 |\n| Total shareholders' equity | 12,767 | 8,055 |",
               source=src, page=61)
    write_page(db, "filings/acme/statements/page_062.md",
               "ACME CORP. CONSOLIDATED STATEMENTS OF CASH FLOWS (in millions)\n\n| Year ended May 31, | 2021 | 2020 |\n"
               "|---|---|---|\n| Net income | $ 5,727 | $ 2,539 |\n| Depreciation | 744 | 721 |\n"
               "| Cash provided by operations | 6,657 | 2,485 |\n| Purchases of property, plant and equipment | "
               "(695) | (1,086) |\n| Dividends | (1,638) | (1,452) |\n| Cash used by financing activities | "
               "(1,459) | 2,491 |", source=src, page=62)


def test_a_fiscal_question_finds_the_statements_before_the_discussion(tmp_path):
    """Inventory turnover is computed from the income statement and the balance sheet, capital expenditure is on
    the cash flow statement; the discussion and the inventory note use the questions' words, the statements
    bury them among their line items or never say them."""
    db = tmp_path / "database"
    acme_filing(db)
    idx = fresh(db)
    for mode in ("keyword", "hybrid"):
        for question, pages in STATEMENT_QUESTIONS.items():
            assert set(top(idx, question, k=len(pages), mode=mode)) == set(pages), (mode, question)



OTHERS = ["Zenith", "Borealis", "Cobalt", "Dynamo", "Ember", "Fjord"]


def other_filings(db) -> None:
    """Other companies' 10-Ks for the same year, whose balance sheets hold the same line items."""
    for i, name in enumerate(OTHERS):
        src = f"src/{name.lower()}_2021_10k.pdf"
        write_page(db, f"filings/{name.lower()}/cover/page_001.md",
                   f"# {name} Inc. Form 10-K\nFor the fiscal year ended December 31, 2021. {name} makes pumps.",
                   source=src, page=1)
        write_page(db, f"filings/{name.lower()}/statements/page_040.md",
                   f"{name.upper()} INC. CONSOLIDATED BALANCE SHEETS (in millions)\n\n| December 31, | 2021 | 2020 |\n"
                   f"|---|---|---|\n| Inventories | 1,204 | 1,100 |\n| Goodwill | {3310 + i} | 3,305 |\n"
                   "| Total assets | $ 12,400 | $ 11,950 |\n| Long-term debt | 2,900 | 3,100 |", source=src, page=40)


def test_only_the_filing_asked_about_has_its_statements_lifted(tmp_path):
    """Every filing has a balance sheet: a question about Acme's goodwill lifts Acme's, not the other companies'
    (same line items, same year), which would come before Acme's own pages about it."""
    db = tmp_path / "database"
    acme_filing(db)
    write_page(db, "filings/acme/notes/page_075.md",
               "# Note 6 - Goodwill\nGoodwill of Acme was tested for impairment in the fourth quarter of fiscal 2021; "
               "no impairment was recorded.", source="src/acme_2021_10k.pdf", page=75)
    other_filings(db)
    idx = fresh(db)
    for mode in ("keyword", "hybrid"):
        got = top(idx, "What was Acme's goodwill in FY2021?", k=5, mode=mode)
        assert got[:2] == ["filings/acme/statements/page_061.md", "filings/acme/notes/page_075.md"], (mode, got)
        assert all(p.startswith("filings/acme/") for p in got), (mode, got)
        # and the other way round
        assert top(idx, "What was Zenith's goodwill in FY2021?", k=1, mode=mode) == [
            "filings/zenith/statements/page_040.md"], mode
