"""Postings: segments and their sort order."""

from __future__ import annotations

import numpy as np

from ragkit.search import postings


def test_stable_order_matches_numpy():

    rng = np.random.default_rng(1)
    for hi in (5, 70_000, 2**31 - 1):
        keys = rng.integers(0, hi, 20_000).astype(np.int32)
        assert np.array_equal(postings._stable_order(keys), np.argsort(keys, kind="stable"))


def test_the_document_whose_first_pages_name_the_year_is_put_ahead(tmp_path, monkeypatch):
    """Two filings of one company, named by accession numbers, both mentioning 2021 (the 2022 filing as its
    comparison year). The cover page, part of the document's card, says which filing reports 2021: the cards
    widen that filing's lead, page by page; without them only the pages' own words count."""
    from search_fixtures import fresh, write_page

    db = tmp_path / "database"
    filings = {"0000909832-21-000014": ("2021", "2020"), "0000909832-22-000021": ("2022", "2021")}
    for acc, (year, prior) in filings.items():
        write_page(db, f"fin/{acc}/cover/page_001.md", f"# Annual report\nCostco Wholesale, fiscal year {year}.")
        write_page(db, f"fin/{acc}/cover/page_002.md", "# Contents\nBusiness. Risk factors.", page=2)
        for n in range(3, 6):
            write_page(db, f"fin/{acc}/notes/page_{n:03d}.md",
                       f"# Notes\nLeases and other items, {year} compared with {prior}.", page=n)
        write_page(db, f"fin/{acc}/balance/page_006.md",
                   f"# Balance sheet\nTotal long-term liabilities {year} {prior}.", page=6)
    question = "What were Costco's total long-term liabilities in FY2021?"

    def lead(weight: float) -> float:
        monkeypatch.setattr(postings, "CARD_WEIGHT", weight)
        hits = {h.path.split("/")[1]: h.score for h in fresh(db).search(question, k=10)
                if h.path.endswith("balance/page_006.md")}
        return hits["0000909832-21-000014"] - hits["0000909832-22-000021"]

    off, on = lead(0.0), lead(0.3)
    assert on > off > 0, (off, on)
    # a question about the other year: the cards now favour the other filing
    question = "What were Costco's total long-term liabilities in FY2022?"
    assert lead(0.3) < lead(0.0) < 0
