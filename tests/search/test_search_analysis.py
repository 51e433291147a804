"""Text analysis: tokens per language, folder and caption fields."""

from __future__ import annotations

import pytest
from search_fixtures import fresh, top, write_page

from ragkit.core.text import search_terms
from ragkit.search import analysis


def test_japanese_two_character_words(db):
    idx = fresh(db)
    assert top(idx, "削除")[0] == "家電/冷蔵庫/操作と機能/page_008.md"  # found across the line break 削\n除
    assert top(idx, "接続")[0] == "家電/冷蔵庫/設置/page_002.md"
    hit = idx.search("接続")[0]
    assert hit.page == 2 and hit.title == "設置" and "接続" in hit.snippet


def test_korean_stem_finds_stem_with_particle(db):
    hits = fresh(db).search("파일")
    assert hits and hits[0].path == "한국어/설명서/사용법/page_004.md"
    assert "파일을 삭제하려면" in hits[0].snippet  # Korean keeps its word spaces in snippets


def test_a_heading_stays_apart_from_the_next_heading_in_snippets():
    """A DOCX's title and first heading, a blank line apart, were one word in snippets ("情報セキュリティ規程第1章
    パスワード"): the heading pattern reached over the blank line, and the single line break left was joined as a
    Japanese line wrap. A line wrapped inside a sentence is still joined."""
    from ragkit.search.snippets import display_text, make_snippet

    body = "# 情報セキュリティ規程\n\n## 第1章 パスワード\n\nパスワードは12文字\n以上とする。\n"
    assert display_text(body) == "情報セキュリティ規程 第1章 パスワード パスワードは12文字以上とする。"
    assert make_snippet(body, "パスワード").startswith("情報セキュリティ規程 第1章 パスワード")
    assert display_text("# 規程\n## 第1章 総則 ##\n本文") == "規程 第1章 総則 本文"


def test_english_and_case_folding(db):
    idx = fresh(db)
    assert top(idx, "How do I connect the ROUTER to the WAN port?")[0] == "english/router/setup/page_005.md"
    assert top(idx, "water")[0] == "english/router/safety/page_006.md"
    assert idx.search("zebra quantum") == []


def test_english_word_forms_and_letters_with_digits(tmp_path):
    d = tmp_path / "database"
    write_page(d, "fin/acme/statements/page_040.md",
               "# Balance sheet\nTotal assets at the end of fiscal 2015 were stored in the ledger.", page=40)
    write_page(d, "fin/acme/intro/page_001.md", "# Overview\nAcme makes rockets and sells them.", page=1)
    write_page(d, "fin/acme/codes/page_002.md", "# Codes\nError E1234 means the valve is stuck.", page=2)
    idx = fresh(d)
    # a light English stemmer on both sides: "storing" and "stored" meet, "asset" finds "assets"
    assert top(idx, "storing", k=1) == ["fin/acme/statements/page_040.md"]
    assert top(idx, "asset", k=1) == ["fin/acme/statements/page_040.md"]
    # "FY2015" finds "2015"; a code is still found whole
    assert top(idx, "FY2015", k=1) == ["fin/acme/statements/page_040.md"]
    assert top(idx, "e1234", k=1) == ["fin/acme/codes/page_002.md"]


def test_page_range_folders_are_not_words(tmp_path):
    d = tmp_path / "database"
    write_page(d, "docs/report/pages_001-010/page_001.md", "# Summary\nRevenue grew.", page=1)
    write_page(d, "docs/report/Pages of history/page_002.md", "# History\nFounded long ago.", page=2)
    write_page(d, "docs/report/page_011/page_011.md", "# Appendix\nMore notes.", page=11)  # a range of one page
    idx = fresh(d)
    # "pages_001-010" is how ingest names the folders of a document without an outline: no meaning to match
    assert top(idx, "pages") == ["docs/report/Pages of history/page_002.md"]
    assert top(idx, "001") == [] and top(idx, "011") == []


def test_folder_names_are_weighted(tmp_path):
    d = tmp_path / "database"
    body = "# Notes\nThe compressor hums when the ice maker runs. Clean the filter monthly."
    write_page(d, "manual/fridge/general/page_001.md", body, source="a.pdf")
    write_page(d, "manual/fridge/ice maker/page_001.md", body, source="b.pdf")
    idx = fresh(d)
    assert top(idx, "ice maker")[0] == "manual/fridge/ice maker/page_001.md"
    # the folder name alone is enough to be found
    write_page(d, "manual/fridge/製氷/page_009.md", "# 手入れ\nフィルターを掃除します。", source="c.pdf")
    idx.refresh()
    assert top(idx, "製氷")[0] == "manual/fridge/製氷/page_009.md"


def test_captions_weigh_like_headings(tmp_path):
    d = tmp_path / "database"
    write_page(d, "papers/a/results/page_004.md",
               "# Results\nOur numbers follow.\nFigure 2: Latency under load for each model\nWe report them.")
    write_page(d, "papers/b/method/page_002.md", "# Method\nLatency under load was low.")
    write_page(d, "manuals/c/仕様/page_003.md", "# 仕様\n図3 冷却性能の比較\n詳しくは次の表をご覧ください。")
    write_page(d, "manuals/d/概要/page_001.md", "# 概要\n冷却性能は高い。")
    idx = fresh(d)
    # the same words in the same order: the page whose caption says it comes first, though it is longer
    assert top(idx, "latency under load")[0] == "papers/a/results/page_004.md"
    assert top(idx, "冷却性能")[0] == "manuals/c/仕様/page_003.md"
    # "Fig." and "Figure" meet, either way round
    assert search_terms("Fig. 5") == search_terms("Figure 5") == ["figure", "5"]
    write_page(d, "papers/e/eval/page_007.md", "# Evaluation\nFig. 5. Recall by depth")
    write_page(d, "papers/f/notes/page_001.md", "# Notes\nEach figure shows recall.")
    write_page(d, "papers/g/notes/page_002.md", "# Notes\nThe figs show recall.")
    idx.refresh()
    assert top(idx, "figure 5 recall")[0] == "papers/e/eval/page_007.md"
    assert set(top(idx, "fig")) >= {"papers/e/eval/page_007.md", "papers/f/notes/page_001.md",
                                    "papers/g/notes/page_002.md"}


@pytest.mark.parametrize("caption, label", [
    ("Figure 4: Querying process", "§figure4"),
    ("Fig. 2. Overview", "§figure2"),
    ("図3 製氷室の使いかた", "§figure3"),
    ("Table 2-1 Results", "§table2.1"),
    ("TABLE 3", "§table3"),
    ("표 2 결과", "§table2"),
    ("Figure 1,234 units", None),
])
def test_caption_label(caption, label):
    assert analysis.caption_label(caption) == label
