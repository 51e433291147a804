"""Fusion and ranking: the fiscal year a question names picks the document that reports it."""

from __future__ import annotations

from search_fixtures import fresh, top, write_page

from ragkit.search import postings, ranking


def _filing(db, year: int, name: str) -> None:
    # an annual report names its own year and the two before it; its revenue page compares them all
    for p, body in ((1, f"# Acme Corp annual report\nFiscal year ended December 31, {year}. Form 10-K."),
                    (2, f"# Contents\nBusiness, risks, results for {year}, {year - 1} and {year - 2}."),
                    (30, f"# Revenue\nRevenue by year: {year} 120, {year - 1} 110, {year - 2} 100 (millions)."),
                    # ... and discusses the year before at length: a later filing names that year more often
                    (31, f"# Results\n{year} compared with {year - 1}. In {year - 1} costs rose; {year - 1} "
                         f"margins fell; {year - 1} was a hard year.")):
        write_page(db, f"filings/{name}/s/page_{p:03d}.md", body, source=f"src/{name}.pdf", page=p)


def _revenue_pages_in_order(idx, question: str) -> list[str]:
    """The two filings' revenue pages (the page the question is about), in the order search ranks them."""
    return [h.path.split("/")[1] for h in idx.search(question, k=10) if h.path.endswith("page_030.md")]


def test_the_filing_that_reports_the_year_comes_first(tmp_path, monkeypatch):
    db = tmp_path / "database"
    # file names that say nothing of the year (EDGAR accession numbers)
    _filing(db, 2020, "0000001-21-000047")  # its revenue page names 2019 too, as the prior year
    _filing(db, 2019, "0000001-20-000031")
    write_page(db, "misc/other/s/page_001.md", "# Other\nNothing about revenue.", source="src/o.pdf")
    idx = fresh(db)
    y2019, y2020 = "0000001-20-000031", "0000001-21-000047"
    assert top(idx, "What was Acme's revenue in FY2019?", k=1)[0].startswith(f"filings/{y2019}/")
    assert _revenue_pages_in_order(idx, "What was Acme's revenue in FY2019?") == [y2019, y2020]
    assert _revenue_pages_in_order(idx, "What was Acme's revenue in FY2020?") == [y2020, y2019]
    monkeypatch.setattr(ranking, "YEAR_WEIGHT", 0.0)
    # the document cards alone (the cover names the fiscal year) still tell the filings apart ...
    assert _revenue_pages_in_order(idx, "What was Acme's revenue in FY2019?") == [y2019, y2020]
    assert _revenue_pages_in_order(idx, "What was Acme's revenue in FY2020?") == [y2020, y2019]
    monkeypatch.setattr(postings, "CARD_WEIGHT", 0.0)
    idx = fresh(db)
    # ... without either, both questions rank the two revenue pages alike: one of them is wrong
    assert (_revenue_pages_in_order(idx, "What was Acme's revenue in FY2019?")
            == _revenue_pages_in_order(idx, "What was Acme's revenue in FY2020?"))
