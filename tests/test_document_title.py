"""The front matter's `document` title: metadata only when it looks like a title, else the first page's
dominant heading, else the file name (ingest.document_title)."""

from __future__ import annotations

import pytest

from ragkit.ingest import document_title, title_like


@pytest.mark.parametrize("meta, ok", [
    ("Netflix, Inc. Annual Report 2015", True), ("冷蔵庫 取扱説明書", True), ("사무실 이전 안내", True),
    ("0001065280-16-000047", False), ("About Pew Research Center", False), ("Contents", False),
    ("Untitled", False), ("report_final_v2.pdf", False), ("PH_2016.06.08_Economy-Final", False), ("", False),
    ("Microsoft Word - Contents", False), ("10-K", False),
])
def test_title_like(meta, ok):
    assert title_like(meta) is ok


def test_metadata_first_then_the_first_pages_dominant_heading_then_the_file_name():
    page = "## Fiscal 2015 highlights\n\n# Netflix Annual Report\n\ntext\n### Notes"
    assert document_title("Netflix 2015 Form 10-K", page, "NETFLIX_2015_10K") == "Netflix 2015 Form 10-K"
    assert document_title("0001065280-16-000047", page, "NETFLIX_2015_10K") == "Netflix Annual Report"
    assert document_title("Contents", "# Contents\n## **Table of contents**", "NETFLIX_2015_10K") == "NETFLIX_2015_10K"
    assert document_title("", "no heading at all", "stem") == "stem"
