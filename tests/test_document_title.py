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


@pytest.mark.parametrize("heading", ["1. Passwords", "2.3 Scope of this policy", "Chapter 1 Introduction",
                                     "第1章 総則", "第１章総則", "제1장 총칙", "Section IV Remedies"])
def test_a_heading_numbered_as_a_part_is_no_document_title(heading):
    """A PDF without title metadata whose first page opens with its first chapter (a new user's work rules,
    "第1章総則", and security policy, "1. Passwords") was titled by that chapter in every citation."""
    page = f"# {heading}\n\ntext of the first section"
    assert document_title("", page, "就業規則_2026年版") == "就業規則_2026年版"
    # a real title above the chapter still wins, and a year is no part number
    assert document_title("", f"# Work Rules 2026\n\n## {heading}\n\ntext", "stem") == "Work Rules 2026"
    assert document_title("", "# 2019 Annual Report\n\ntext", "stem") == "2019 Annual Report"
