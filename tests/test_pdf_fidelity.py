"""Page fidelity of PDF pages: statements as tables, running headers and footers, printed page numbers, two columns.
Every PDF is made here with PyMuPDF."""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf

from ragkit.core.pagefile import PageMeta, first_heading, parse_page, render_page
from ragkit.core.paths import iter_pages
from ragkit.ingest import CONVERTER_VERSION, ingest_sources, printed_numbers
from ragkit.ingest.manifest import CONVERTER_CHANGES
from ragkit.ingest.pdf import _pdf_page_markdown
from ragkit.ingest.pdf_layout import reading_order
from ragkit.ingest.pdf_margins import line_key
from ragkit.ingest.pdf_tables import figure_tables, rows


def put(page, x: float, y: float, text: str, size: float = 9, *, right: bool = False, bold: bool = False) -> None:
    """Text with its baseline at y, starting at x (or ending at x when right-aligned)."""
    font = "hebo" if bold else "helv"
    if right:
        x -= pymupdf.get_text_length(text, fontname=font, fontsize=size)
    page.insert_text((x, y), text, fontname=font, fontsize=size)


def ingest(tmp: Path, name: str, doc) -> dict[int, tuple[PageMeta, str]]:
    src = tmp / "src" / f"{name}.pdf"
    src.parent.mkdir(parents=True, exist_ok=True)
    doc.save(src)
    db = tmp / "database"
    report = ingest_sources([src], db=db, progress=False, workers=1)
    assert not report.failed, report.failed
    out = {}
    for rel in iter_pages(db):
        meta, body = parse_page((db / rel).read_text(encoding="utf-8"))
        if Path(meta.source).stem == name:
            out[meta.page] = (meta, body)
    return out


def table_lines(body: str) -> list[str]:
    return [ln for ln in body.splitlines() if ln.startswith("|")]


# ------------------------------------------------------------------------------------------ statements

STATEMENT = [  # label, indent, figures (None: a caption row), a "$" before the figures
    ("Revenues", 0, ["6,779,511", "5,504,656", "4,374,562"], True),
    ("Cost of revenues", 18, ["4,591,476", "3,752,760", "3,117,203"], False),
    ("Operating income", 0, ["305,826", "402,648", "228,347"], False),
    ("Other income (expense):", 0, None, False),
    ("Interest expense", 18, ["(132,716)", "(50,219)", "(29,142)"], False),
    ("Loss on extinguishment of debt", 18, ["-", "-", "(25,129)"], False),  # helv has no em dash
    ("Net income", 0, ["122,641", "266,799", "112,403"], True),
]
RIGHTS = [416, 502, 588]  # the right edges of the three figure columns


def statement_page(doc) -> None:
    page = doc.new_page()
    put(page, 18, 30, "Table of Contents", 7.5, bold=True)
    put(page, 200, 70, "CONSOLIDATED STATEMENTS OF OPERATIONS", 9, bold=True)
    put(page, 236, 80, "(in thousands, except per share data)", 9, bold=True)
    put(page, 427, 108, "Year ended December 31,", 7.5, bold=True)
    for year, right in zip(("2015", "2014", "2013"), RIGHTS, strict=True):
        put(page, right - 28, 122, year, 7.5, bold=True)
    y = 135
    for label, indent, figures, dollar in STATEMENT:
        put(page, 19 + indent, y, label)
        for fig, right in zip(figures or [], RIGHTS, strict=False):
            if dollar:
                put(page, right - 74, y, "$")
            put(page, right + (3 if fig.startswith("(") else 0), y, fig, right=True)
        y += 13.5
    put(page, 197, y + 12, "See accompanying notes to consolidated financial statements.")


def test_a_statement_is_a_table_with_one_row_per_line_item(isolated_env):
    doc = pymupdf.open()
    statement_page(doc)
    [(_meta, body)] = ingest(isolated_env, "netflix", doc).values()
    rows_md = table_lines(body)
    assert rows_md[0] == "| Year ended December 31, | 2015 | 2014 | 2013 |", body
    assert rows_md[1] == "|---|---|---|---|"
    assert "| Revenues | $ 6,779,511 | $ 5,504,656 | $ 4,374,562 |" in rows_md
    assert "| Cost of revenues | 4,591,476 | 3,752,760 | 3,117,203 |" in rows_md
    assert "| Other income (expense): |  |  |  |" in rows_md
    assert "| Interest expense | (132,716) | (50,219) | (29,142) |" in rows_md
    assert "| Loss on extinguishment of debt | - | - | (25,129) |" in rows_md
    assert "| Net income | $ 122,641 | $ 266,799 | $ 112,403 |" in rows_md
    assert len(rows_md) == 2 + len(STATEMENT)  # one row per line item, none run together
    assert not re.search(r"\|\s*\$\s*\|", body)  # no currency sign in a cell of its own
    assert "CONSOLIDATED STATEMENTS OF OPERATIONS" in body.split("|")[0]  # the title stays above the table


def line(x0: float, y: float, text: str, x1: float | None = None, size: float = 8.0, bno: int = 0) -> list:
    """A line record [block, x0, y0, x1, y1, size, bold, text], about 0.45 em per character."""
    return [bno, x0, y - size, x1 if x1 is not None else x0 + 0.45 * size * len(text), y + 1, size, False, text]


def test_figures_and_currency_signs_in_one_piece_of_text_get_a_cell_each():
    # 3M's statements set "32,765  $" as one piece: a figure and the next column's currency sign
    recs = [line(57, 100, "(Millions)"), line(370, 100, "2018", 383), line(436, 100, "2017", 449),
            line(502, 100, "2016", 515)]
    y = 110
    for label, a, b, c in (("Net sales", "32,765", "31,657", "30,109"), ("Cost of sales", "16,682", "16,055",
                                                                           "15,118"),
                           ("Gain on sale", "—", "(586)", "(111)"), ("Net income", "5,363", "4,869", "5,058")):
        recs += [line(57, y, label), line(340, y, "$", 352), line(382, y, f"{a}  $", 418),
                 line(448, y, f"{b}  $", 484), line(514, y, c, 540)]
        y += 10
    rs = rows(recs)
    [(start, (md, end))] = figure_tables(rs).items()
    assert (start, end) == (0, len(rs))
    assert md.splitlines()[0] == "| (Millions) | 2018 | 2017 | 2016 |"
    assert "| Net sales | $ 32,765 | $ 31,657 | $ 30,109 |" in md
    assert "| Cost of sales | $ 16,682 | $ 16,055 | $ 15,118 |" in md
    assert "| Gain on sale | $ — | $ (586) | $ (111) |" in md


def test_years_set_left_of_right_aligned_figures_head_their_columns_under_a_centred_caption():
    # Activision's statements: the years stand left of the figures' right edges, the caption is centred over
    # the columns without reaching the first one
    recs = [line(401, 84, "For the Years Ended December 31,", 514), line(364, 97, "2019", 380),
            line(450, 97, "2018", 466), line(535, 97, "2017", 550)]
    y = 110
    for label, a, b, c in (("Product sales", "$ 1,975", "$ 2,255", "$ 2,110"),
                           ("Total net revenues", "6,489", "7,500", "7,017"),
                           ("Loss on extinguishment of debt", "—", "40", "12"),
                           ("Interest and other expense (income), net", "(26)", "71", "146")):
        recs += [line(20, y, label), line(407 - 4 * len(a), y, a, 407), line(495 - 4 * len(b), y, b, 495),
                 line(577 - 4 * len(c), y, c, 577)]
        y += 12
    [(md, _end)] = figure_tables(rows(recs)).values()
    lines = md.splitlines()
    assert lines[0] == "| For the Years Ended December 31, | 2019 | 2018 | 2017 |", md
    assert "| Product sales | $ 1,975 | $ 2,255 | $ 2,110 |" in lines
    assert "| Interest and other expense (income), net | (26) | 71 | 146 |" in lines


def test_a_running_line_is_never_a_heading_of_its_own():
    # "ACME, INC. AND SUBSIDIARIES" heads the notes pages (a running line there) and, in the same type, tops the
    # statement's title, which it is part of; alone, it is a plain line
    key = {(line_key("ACME, INC. AND SUBSIDIARIES"), 12.0)}
    recs = [line(200, 60, "ACME, INC. AND SUBSIDIARIES", 400, 12), line(190, 74, "CONSOLIDATED BALANCE SHEETS", 410, 12),
            line(56, 110, "Cash and cash equivalents at the end of the year were held in banks.", 540, 9)]
    md = _pdf_page_markdown(recs, {12.0: 1}, 9.0, 595, key)
    assert first_heading(md) == "ACME, INC. AND SUBSIDIARIES CONSOLIDATED BALANCE SHEETS"
    alone = _pdf_page_markdown([recs[0], recs[2]], {12.0: 1}, 9.0, 595, key)
    assert alone.startswith("ACME, INC. AND SUBSIDIARIES\n\nCash and"), alone  # no "#": a plain line
    assert _pdf_page_markdown([recs[0], recs[2]], {12.0: 1}, 9.0, 595).startswith("# ACME, INC.")  # not running


def test_a_wrapped_label_joins_the_row_that_carries_its_figures_and_prose_is_no_table():
    recs = [line(19, 100, "Revenues"), line(380, 100, "1,234", 416), line(466, 100, "1,000", 502),
            line(19, 112, "Depreciation of property and equipment, including internal-use software and"),
            line(36, 122, "other amortization, including content costs"), line(380, 122, "6,281", 416),
            line(466, 122, "8,116", 502),
            line(19, 134, "Stock-based compensation"), line(380, 134, "2,119", 416), line(466, 134, "2,975", 502),
            line(19, 160, "Revenues grew 12% in 2019 and 8% in 2018, as the paragraph below the table says.")]
    rs = rows(recs)
    [(md, end)] = figure_tables(rs).values()
    assert "| Depreciation of property and equipment, including internal-use software and other amortization, " \
           "including content costs | 6,281 | 8,116 |" in md
    assert end == len(rs) - 1  # the paragraph after the table is not a row of it
    assert md.count("\n") == 1 + 3  # header, rule, three line items


def test_a_label_wrapped_over_three_lines_is_one_row():
    # Netflix's balance sheet: "Common stock, $0.001 par value; ..." runs over three lines, the figures on the last;
    # its first line was a row of its own with empty figure cells
    recs = [line(19, 100, "Total liabilities"), line(380, 100, "7,979,445", 416), line(466, 100, "5,184,792", 502),
            line(36, 112, "Common stock, $0.001 par value; 4,990,000,000 and 160,000,000 shares authorized at 2015"),
            line(36, 122, "and December 31, 2014, respectively; 427,940,440 and 422,910,887 issued and outstanding"),
            line(36, 132, "at December 31, 2015, respectively"), line(380, 132, "1,324,809", 416),
            line(466, 132, "1,042,870", 502),
            line(19, 144, "Retained earnings"), line(380, 144, "941,925", 416), line(466, 144, "819,284", 502)]
    [(md, _end)] = figure_tables(rows(recs)).values()
    assert "| Common stock, $0.001 par value; 4,990,000,000 and 160,000,000 shares authorized at 2015 and December " \
           "31, 2014, respectively; 427,940,440 and 422,910,887 issued and outstanding at December 31, 2015, " \
           "respectively | 1,324,809 | 1,042,870 |" in md, md
    assert md.count("\n") == 1 + 3  # header, rule, three line items
    # a note set under a figure, in its column, over two lines is no label of the row below
    recs = [line(19, 100, "Mr. R.A. Shah"), line(380, 100, "14", 416), line(466, 100, "8", 502),
            line(466, 110, "(includes 4 as", 520), line(466, 120, "chairmanships)", 522),
            line(19, 132, "Mr. K.K. Modi"), line(380, 132, "11", 416), line(466, 132, "2", 502),
            line(19, 144, "Mr. S.V. Shanbhag"), line(380, 144, "5", 416), line(466, 144, "7", 502)]
    assert not any("chairmanships) Mr. K.K. Modi" in md for md, _end in figure_tables(rows(recs)).values())


def test_japanese_negative_figures_are_figures():
    recs = [line(40, 100, "売上高"), line(300, 100, "12,345", 340), line(400, 100, "11,000", 440),
            line(40, 112, "営業利益"), line(300, 112, "△1,234", 340), line(400, 112, "▲56", 440),
            line(40, 124, "経常利益"), line(300, 124, "(1,200)", 340), line(400, 124, "30", 440)]
    [(md, _end)] = figure_tables(rows(recs)).values()
    assert "| 営業利益 | △1,234 | ▲56 |" in md and "| 経常利益 | (1,200) | 30 |" in md


def test_a_row_of_words_in_a_figure_tables_columns_stays_in_the_table(isolated_env):
    """A user's ruled Korean table, whose rows hold figures (the figure-table reading takes it): its last row states
    no amount ("교통비 | 실비 | 실비 | 실비") and was left out of the table as a paragraph holding pipes."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 70), "출장비 기준표", fontname="korea", fontsize=18)
    cells = [["항목", "서울", "부산", "제주"], ["숙박비", "120,000원", "100,000원", "110,000원"],
             ["식비", "50,000원", "45,000원", "48,000원"], ["교통비", "실비", "실비", "실비"]]
    for r, row in enumerate(cells):
        for c, text in enumerate(row):
            page.insert_text((72 + 120 * c, 120 + 20 * r), text, fontname="korea", fontsize=11)
    for k in range(5):
        page.draw_line((68, 105 + 20 * k), (548, 105 + 20 * k))
        page.draw_line((68 + 120 * k, 105), (68 + 120 * k, 185))
    page.insert_text((72, 230), "위 표의 금액은 1박 또는 1일 기준입니다.", fontname="korea", fontsize=11)
    [(_meta, body)] = ingest(isolated_env, "travel", doc).values()
    assert table_lines(body) == ["| 항목 | 서울 | 부산 | 제주 |", "|---|---|---|---|",
                                 "| 숙박비 | 120,000원 | 100,000원 | 110,000원 |", "| 식비 | 50,000원 | 45,000원 | 48,000원 |",
                                 "| 교통비 | 실비 | 실비 | 실비 |"], body
    assert body.rstrip().endswith("\n\n위 표의 금액은 1박 또는 1일 기준입니다.")


def test_a_last_row_of_short_words_is_a_row_but_one_over_figures_heads_the_next_table():
    # the second table's header row is words over figures: it starts that table, not ends the first
    recs = [line(19, 100, "Postage"), line(380, 100, "1,234", 416), line(466, 100, "1,000", 502),
            line(19, 112, "Handling"), line(380, 112, "2,119", 416), line(466, 112, "2,975", 502),
            line(19, 124, "Shipping"), line(390, 124, "Free", 416), line(470, 124, "At cost", 502),
            line(19, 160, "Reasons"), line(390, 160, "Share", 416), line(470, 160, "Prop.", 502),
            line(19, 172, "Late"), line(380, 172, "33.3", 416), line(466, 172, "25.0", 502),
            line(19, 184, "Lost"), line(380, 184, "12.5", 416), line(466, 184, "8.3", 502),
            line(19, 208, "Shipping is free in 2019 and 2018, as the paragraph below the tables says.")]
    rs = rows(recs)
    [(first, end), (second, end2)] = figure_tables(rs).values()
    assert first.endswith("| Handling | 2,119 | 2,975 |\n| Shipping | Free | At cost |") and end == 3, first
    assert second.startswith("| Reasons | Share | Prop. |\n|---|---|---|\n| Late | 33.3 | 25.0 |"), second
    assert end2 == len(rs) - 1  # the paragraph after the tables is not a row of them


def test_figures_marked_with_letters_are_rows_of_the_table_wherever_they_stand():
    """A survey table (MMLongBench-Doc's PIP_Seniors, page 23) marks a figure with the letters of the rows it
    differs from ("8bd"): such a row under a group label ("Age") was read as a row of words over figures and
    started a second table, and one at a group's end ("d $75,000+ | 8c | 7bc") ended the table, leaving the next
    group's label a line alone and its table an empty header row. One table now, its group labels on their rows."""
    recs = [line(19, 100, "All 65+"), line(380, 100, "6%", 396), line(466, 100, "3%", 482),
            line(25, 112, "Gender"),
            line(19, 124, "a Male"), line(384, 124, "6", 392), line(470, 124, "4", 478),
            line(19, 136, "b Female"), line(384, 136, "5", 392), line(470, 136, "3", 478),
            line(25, 148, "Age"),
            line(19, 160, "a 65-69"), line(380, 160, "8bd", 396), line(466, 160, "6bcd", 482),
            line(19, 172, "b 70-74"), line(384, 172, "4", 392), line(470, 172, "3", 478),
            line(19, 184, "d $75,000+"), line(380, 184, "8c", 396), line(466, 184, "7bc", 482),
            line(25, 196, "Community Type"),
            line(19, 208, "a Urban"), line(384, 208, "6", 392), line(470, 208, "4", 478),
            line(19, 220, "c Rural"), line(384, 220, "3", 392), line(470, 220, "1", 478),
            line(19, 256, "Note: columns marked with a letter differ significantly from that row.")]
    rs = rows(recs)
    [(table, end)] = figure_tables(rs).values()
    assert table.split("\n")[2:] == [
        "| All 65+ | 6% | 3% |", "| Gender a Male | 6 | 4 |", "| b Female | 5 | 3 |", "| Age a 65-69 | 8bd | 6bcd |",
        "| b 70-74 | 4 | 3 |", "| d $75,000+ | 8c | 7bc |", "| Community Type a Urban | 6 | 4 |",
        "| c Rural | 3 | 1 |"], table
    assert end == len(rs) - 1  # the note is no row


# ------------------------------------------------------------------------------------------ running lines


def report_pages(n: int = 6, first_number: int = 3):
    """A report whose pages carry a running header of two pieces ("ACME Annual Report 2023" left, the chapter
    right), a bold running title that would read as a heading, and a footer with the printed number."""
    doc = pymupdf.open()
    for i in range(n):
        page = doc.new_page()  # 595 x 842
        chapter = "1 Getting Started" if i < 3 else "2 Workout monitoring"
        put(page, 56, 40, "ACME Annual Report 2023", 9)
        put(page, 440, 40, chapter, 9)
        put(page, 56, 56, "Table of Contents", 14, bold=True)  # a link on every page, larger than the text
        put(page, 56, 120, f"Section {i + 1} heading", 18, bold=True)
        for k in range(6):
            put(page, 56, 150 + 14 * k, f"Body text of page {i + 1}, line {k + 1}, about the product and its use.",
                10)
        put(page, 56, 815, "Copyright © ACME Ltd.", 8)
        put(page, 520, 815, str(first_number + i), 8)
    return doc


def test_running_headers_and_footers_leave_the_body_and_are_kept_once_in_the_front_matter(isolated_env):
    pages = ingest(isolated_env, "report", report_pages())
    assert len(pages) == 6
    for n, (meta, body) in pages.items():
        for words in ("ACME Annual Report", "Getting Started", "Workout monitoring", "Table of Contents",
                      "Copyright"):
            assert words not in body, (n, body)
        chapter = "1 Getting Started" if n <= 3 else "2 Workout monitoring"
        assert meta.running == f"ACME Annual Report 2023 · {chapter} · Table of Contents · Copyright © ACME Ltd."
        assert first_heading(body) == f"Section {n} heading"  # never a running line
        assert meta.printed_page == str(n + 2)  # the footer's number, not the chapter's
        assert body.startswith(f"# Section {n} heading")
        assert not re.search(rf"^{n + 2}$", body, re.MULTILINE)  # the printed number left the body too
    text = (isolated_env / "database" / iter_pages(isolated_env / "database")[0]).read_text(encoding="utf-8")
    assert text.count("ACME Annual Report 2023") == 1  # once, in the front matter


def test_lines_repeated_on_two_pages_or_inside_the_text_stay(isolated_env):
    doc = pymupdf.open()
    for i in range(5):
        page = doc.new_page()
        if i < 2:
            put(page, 56, 40, "Draft for review", 9)  # on two pages only: not running
        put(page, 56, 60 if i % 2 else 40, "Parameters", 10, bold=True)  # heads a few pages, stands inside more
        for k in range(3):
            put(page, 56, 300 + 60 * k, "Parameters", 10, bold=True)
            put(page, 56, 314 + 60 * k, f"Parameter {k} of function {i} is described here in full.", 10)
    pages = ingest(isolated_env, "api", doc)
    assert [m.running for m, _b in pages.values()] == [""] * 5
    assert "Draft for review" in pages[1][1] and "Draft for review" in pages[2][1]
    assert all(b.count("Parameters") == 4 for _m, b in pages.values())


def test_a_table_header_repeated_on_each_page_of_the_table_stays(isolated_env):
    doc = pymupdf.open()
    for i in range(4):
        page = doc.new_page()
        put(page, 56, 40, "Object Storage Service", 10)
        put(page, 147, 90, "Item", 10.5, bold=True)
        put(page, 240, 90, "Description", 10.5, bold=True)
        for k in range(4):
            put(page, 147, 112 + 16 * k, f"Limit {i}.{k}", 10.5)
            put(page, 240, 112 + 16 * k, f"At most {k + 1} requests per second on page {i + 1}.", 10.5)
    pages = ingest(isolated_env, "obs", doc)
    for meta, body in pages.values():
        assert meta.running == "Object Storage Service"
        assert re.search(r"^\| Item \| Description \|$", body, re.MULTILINE), body


# ------------------------------------------------------------------------------------------ printed pages


def test_a_page_number_that_follows_the_text_half_way_down_is_found(isolated_env):
    # an EDGAR filing: the footer comes right after the text, wherever the text ends
    doc = pymupdf.open()
    for i in range(6):
        page = doc.new_page()
        put(page, 18, 30, "Table of Contents", 7.5)
        lines = 3 + (i * 7) % 11
        for k in range(lines):
            put(page, 18, 70 + 12 * k, f"Item text {k} on this page of the annual report, page {i + 1}.", 9)
        put(page, 18, 70 + 12 * lines + 20, f"2021 FORM 10-K {i + 40}", 7.5)
    pages = ingest(isolated_env, "tenk", doc)
    assert [pages[n][0].printed_page for n in range(1, 7)] == [str(n + 39) for n in range(1, 7)]
    assert all("FORM 10-K" not in b and "FORM 10-K" in m.running for m, b in pages.values())


def test_pages_of_the_financial_statements_keep_the_letter_of_their_numbers(isolated_env):
    doc = pymupdf.open()
    for i in range(5):
        page = doc.new_page()
        put(page, 18, 30, "Table of Contents", 7.5)
        for k in range(8):
            put(page, 56, 100 + 14 * k, f"Note {i + 1}, paragraph {k + 1}: what the statements show this year.", 10)
        put(page, 290, 800, f"F-{i + 3}", 9)
    pages = ingest(isolated_env, "filing", doc)
    assert [pages[n][0].printed_page for n in range(1, 6)] == [f"F-{n + 2}" for n in range(1, 6)]
    assert all(m.running == "Table of Contents" and "F-" not in b for m, b in pages.values())


def test_a_chapter_number_in_the_running_header_is_not_the_page_number():
    # pages 1-3 of chapter 1, then chapter 2, with their folios 11..16: each page carries both
    cands = [{1, 11}, {1, 12}, {1, 13}, {2, 14}, {2, 15}, {2, 16}]
    assert printed_numbers(cands) == ["11", "12", "13", "14", "15", "16"]
    # a numbering only some pages follow loses a tie to the one all pages follow
    assert printed_numbers([{3806}, {3807}, {1, 3808}, {2, 3809}, {3, 3810}, {3811}]) == [
        str(n) for n in range(3806, 3812)]


# ------------------------------------------------------------------------------------------ two columns

LEFT = ["Recommendation systems help users to find their", "favourite items among millions of candidates and",
        "have been studied for decades by many groups. A", "first paragraph ends on this shorter line here.",
        "A second paragraph starts with an indent and it", "goes on over several lines of the left column so",
        "that it reaches the foot of the column while the", "sentence goes on at the top of the next column"]
RIGHT = ["which is where this paragraph continues and ends.", "Another paragraph follows it in the right column",
         "with its own first line indented like the others", "and a last line that is much shorter than it.",
         "The last paragraph of the page starts with an", "indent, fills a few lines of the right column and",
         "ends here, at the foot of the right column, with", "a full stop after the last word of the page."]


def two_column_page(doc, right_first: bool) -> None:
    page = doc.new_page()  # 595 wide: columns at 56..290 and 305..540
    put(page, 150, 60, "A Study of Two Columns", 16, bold=True)
    order = [(305, RIGHT), (56, LEFT)] if right_first else [(56, LEFT), (305, RIGHT)]
    for x, texts in order:
        for k, text in enumerate(texts):
            indent = 10 if (x, k) in ((56, 4), (305, 1), (305, 4)) else 0
            put(page, x + indent, 100 + 12 * k, text, 9.5)


def test_two_columns_keep_their_reading_order_and_paragraphs(isolated_env):
    doc = pymupdf.open()
    two_column_page(doc, right_first=True)  # the PDF holds the right column first
    two_column_page(doc, right_first=False)
    pages = ingest(isolated_env, "paper", doc)
    for _meta, body in pages.values():
        paras = [p.strip() for p in body.split("\n\n") if not p.startswith("#")]
        assert paras[0].startswith("Recommendation systems") and paras[0].endswith("shorter line here.")
        assert paras[1].startswith("A second paragraph") and "next column which is where" in paras[1]
        assert paras[1].endswith("continues and ends.")  # one paragraph across the column break
        assert paras[2].startswith("Another paragraph") and paras[2].endswith("much shorter than it.")
        assert paras[3].startswith("The last paragraph") and paras[3].endswith("last word of the page.")
        assert len(paras) == 4


def test_side_by_side_rows_are_a_table_and_keep_their_order():
    # a two-column table of prose cells, each cell a block of its own: reading it column by column would tear
    # every row apart
    recs = []
    for k in range(6):
        recs.append(line(56, 100 + 30 * k, f"Term number {k} in the glossary of words", 270, 9, bno=2 * k))
        recs.append(line(305, 100 + 30 * k, f"The definition of term number {k}, in a sentence", 540, 9,
                         bno=2 * k + 1))
    assert reading_order(recs, 595) == recs


KO_LEFT = ["제1조 근무 시간은 오전 9시부터", "오후 6시까지로 한다.", "제2조 점심 시간은 낮 12시부터", "오후 1시까지로 한다."]
KO_RIGHT = ["제3조 야간 근무는 오후 10시", "이후의 근무를 말한다.", "제4조 야간 근무 수당은 통상", "임금의 50%를 가산한다."]


def test_two_korean_columns_on_shared_baselines_are_prose_not_a_table(isolated_env):
    """A user's Korean page of two columns of articles whose lines share baselines (PyMuPDF puts each baseline's
    left and right line in one block) became a two-column table, every sentence cut across rows. Each column's
    lines run to its edge mid-sentence and go on below: it is read left column first, one paragraph per article
    (the right column's last lines stop about as far right as its first ones)."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 60), "제2장 근무 시간", fontname="korea", fontsize=18)
    for k, (left, right) in enumerate(zip(KO_LEFT * 2, KO_RIGHT * 2, strict=True)):
        page.insert_text((50, 100 + 16 * k), left, fontname="korea", fontsize=10)
        page.insert_text((320, 100 + 16 * k), right, fontname="korea", fontsize=10)
    (_meta, body), = ingest(isolated_env, "근무규정", doc).values()
    assert not table_lines(body), body
    paras = [p.strip() for p in body.split("\n\n") if not p.startswith("#")]
    left = [f"{KO_LEFT[0]} {KO_LEFT[1]}", f"{KO_LEFT[2]} {KO_LEFT[3]}"]
    right = [f"{KO_RIGHT[0]} {KO_RIGHT[1]}", f"{KO_RIGHT[2]} {KO_RIGHT[3]}"]
    assert paras == left * 2 + right * 2, body


def test_side_by_side_lines_in_one_block_are_columns_only_when_they_run_as_sentences():
    # each baseline one block holding a left and a right line, as PyMuPDF gives the Korean page: cells of phrases
    # with no sentence in them, or a figure among the lines, keep the PDF's order (row by row); sentences wrapped
    # at the columns' edges are read column by column
    def page(left: tuple[str, str], right: tuple[str, str]) -> list[list]:
        recs = []
        for k in range(8):
            recs += [line(56, 100 + 12 * k, left[k % 2], 270 if k % 2 == 0 else 180, 9, bno=k),
                     line(305, 100 + 12 * k, right[k % 2], 540 if k % 2 == 0 else 420, 9, bno=k)]
        return recs

    phrases = page(("Annual maintenance of the cooling system", "and of its filters"),
                   ("Replacement of the worn parts of the pump", "by the service partner"))
    sentences = page(("The cooling system is serviced once a year", "together with its filters."),
                     ("The worn parts of the pump are replaced by", "the service partner."))
    figures = [ln[:] for ln in sentences]
    figures[3][7] = "1,250"
    assert reading_order(phrases, 595) == phrases
    assert reading_order(figures, 595) == figures
    assert [ln[1] for ln in reading_order(sentences, 595)] == [56] * 8 + [305] * 8
    split = [ln[:] for ln in sentences]  # each line a block of its own, rows side by side: a table, as before
    for k, ln in enumerate(split):
        ln[0] = k
    assert reading_order(split, 595) == split


def test_a_japanese_paragraph_indented_with_spaces_is_never_split_mid_sentence(isolated_env):
    """A Japanese standard indents each paragraph's first line with spaces, which PyMuPDF counts in the line's box:
    the paragraph's second line then looked indented against the first, and the sentence was split
    ("…目的とし" / "て化粧品に…"). A line starts where its text does; each paragraph is whole."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    lines = [(70.9, "４ 防腐剤及び紫外線吸収剤の配合の制限"),
             (70.9, "  化粧品に配合される防腐剤（化粧品中の微生物の発育を抑制することを目的とし"),
             (82.9, "て化粧品に配合される物をいう。）は、別表第３に掲げる物でなければならない。"),
             (70.9, "  化粧品に配合される紫外線吸収剤（紫外線を特異的に吸収する物であって、紫外"),
             (82.9, "線による有害な影響から皮膚又は毛髪を保護することを目的として化粧品に配合"),
             (82.9, "されるものをいう。）は、別表第４に掲げる物でなければならない。")]
    for k, (x, text) in enumerate(lines):
        page.insert_text((x, 118 + 18 * k), text, fontname="japan", fontsize=12)
    (_meta, body), = ingest(isolated_env, "化粧品基準", doc).values()
    paras = [p.strip() for p in body.split("\n\n")]
    assert paras[-3] == "４ 防腐剤及び紫外線吸収剤の配合の制限", body  # a heading in body type, on its own
    assert all(p.endswith("。") for p in paras[-2:]), body
    assert paras[-2].endswith("化粧品中の微生物の発育を抑制することを目的として化粧品に配合される物をいう。）は、"
                              "別表第３に掲げる物でなければならない。"), body
    assert paras[-1] == ("化粧品に配合される紫外線吸収剤（紫外線を特異的に吸収する物であって、紫外線による有害な影響から"
                         "皮膚又は毛髪を保護することを目的として化粧品に配合されるものをいう。）は、別表第４に掲げる物で"
                         "なければならない。"), body



def test_a_numbered_heading_in_body_type_stands_apart_from_its_indented_paragraph(isolated_env):
    """A numbered heading set in body type (「２ …の配合の禁止」, "1 Introduction") over a paragraph whose first line
    is indented ran into it (「…の配合の禁止化粧品は、…」). A footnote whose second line is set in under its
    marker, a little longer than the first, is still one paragraph."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    lines = [(70.9, "２ 防腐剤、紫外線吸収剤及びタール色素以外の成分の配合の禁止"),
             (82.9, "　化粧品は、医薬品の成分（添加剤としてのみ使用される成分を除く。）その他これ"),
             (70.9, "に類する物を配合してはならない。"),
             (70.9, "３ 成分の配合の制限"),
             (82.9, "　化粧品は、別表第２の成分名の欄に掲げる物を配合する場合は、同表の最大配合量"),
             (70.9, "の範囲内でなければならない。")]
    for k, (x, text) in enumerate(lines):
        page.insert_text((x, 118 + 18 * k), text, fontname="japan", fontsize=12)
    put(page, 56, 300, "1 Introduction", 12)
    put(page, 68, 316, "Retrieval systems are judged by what they find for a question, and this", 12)
    put(page, 56, 332, "paper measures them on documents nobody tuned them on.", 12)
    # a hanging indent: the second line runs 31 points (under 4 ems) past the first, its first word would fit
    first, second = ("(5) Represents the future cash payments due as part of the transition tax on",
                     "to the earnings of our foreign subsidiaries, net of the tax credits we use in each.")
    assert 12 < pymupdf.get_text_length(second, fontsize=12) + 12 - pymupdf.get_text_length(first, fontsize=12) < 4 * 12
    put(page, 56, 380, first, 12)
    put(page, 68, 396, second, 12)
    (_meta, body), = ingest(isolated_env, "化粧品基準", doc).values()
    paras = [p.strip() for p in body.split("\n\n")]
    assert "２ 防腐剤、紫外線吸収剤及びタール色素以外の成分の配合の禁止" in paras, body
    assert "化粧品は、医薬品の成分（添加剤としてのみ使用される成分を除く。）その他これに類する物を配合してはならない。" \
        in paras, body
    assert "３ 成分の配合の制限" in paras, body
    assert "1 Introduction" in paras, body
    assert any(p.startswith("Retrieval systems") and p.endswith("tuned them on.") for p in paras), body
    footnote = [p for p in paras if "transition tax" in p]
    assert len(footnote) == 1 and footnote[0].endswith("we use in each."), body


def test_a_numbered_labels_space_stays_and_a_sentence_broken_at_a_line_end_is_joined(isolated_env):
    """Whitespace between two Han/Kana characters is joined (a sentence broken mid-word at a line end, a PDF that
    sets a space between every character), but the space a line sets between a chapter's, section's or article's
    label and its title or text is the author's: 「第2章 勤務時間と休憩」 had become 「第2章勤務時間と休憩」."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 90), "就業規則", fontname="japan", fontsize=20)
    page.insert_text((72, 130), "第2章 勤務時間と休憩", fontname="japan", fontsize=16)
    page.insert_text((72, 160), "第1節 勤務時間", fontname="japan", fontsize=14)
    lines = [(72, "第3条 従業員の所定労働時間は、休憩時間を除き、1日について8時間とし、始業及び終業の時刻"),
             (72, "は就業規則の定めるところによる。"),
             (72, "第三十七条の二 会社は、業務の都合により必要がある場合は、休憩時間を繰り上げ、又は繰り下げることがで"),
             (72, "きる。"),
             (72, "附則 この規則は、令和6年4月1日から施行する。"),
             (72, "休 憩 時 間 は 一 斉 に 与 え る")]
    for k, (x, text) in enumerate(lines):
        page.insert_text((x, 200 + 18 * k), text, fontname="japan", fontsize=10.5)
    (_meta, body), = ingest(isolated_env, "就業規則", doc).values()
    paras = [p.strip() for p in body.split("\n\n")]
    assert "## 第2章 勤務時間と休憩" in paras, body
    assert "### 第1節 勤務時間" in paras, body
    assert ("第3条 従業員の所定労働時間は、休憩時間を除き、1日について8時間とし、始業及び終業の時刻は就業規則の定めるところ"
            "による。") in paras, body  # its sentence broken mid-word at the line end ("時刻" / "は") is joined
    assert "第三十七条の二 会社は、業務の都合により必要がある場合は、休憩時間を繰り上げ、又は繰り下げることができる。" in paras, body
    assert paras[-1] == "附則 この規則は、令和6年4月1日から施行する。休憩時間は一斉に与える", body  # spaced out: joined



def test_a_law_style_item_numbers_space_stays(isolated_env):
    """A list item's number at a line's start and its text ("一 都道府県…", "イ 事業所得", law-style lists) were
    joined ("一都道府県…"), as converter 9 kept the space only after 第2章-style labels. The space stays, and the
    line break before the item; a sentence wrapped at a line end is still joined."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    lines = ["次に掲げる者は、届け出なければならない。",
             "一 都道府県知事の許可を受けた者",
             "二 市町村長が指定した者であつて、総務大臣が定める基準に適合するもの",
             "十二 その他の者",
             "イ 事業所得"]
    for k, text in enumerate(lines):
        page.insert_text((72, 100 + 18 * k), text, fontname="japan", fontsize=10.5)
    (_meta, body), = ingest(isolated_env, "規則", doc).values()
    got = [line.strip() for line in body.splitlines() if line.strip()]
    for line in lines[1:]:
        assert line in got, body


# ------------------------------------------------------------------------------------------ ruled tables

PLAN = [("項目", "行動内容", "期限", "担当府省庁等"),
        ("監督ガイドライン策定", "マネロン対策に関する監督ガイドラインを更新・策定するとともに、適切な監督態勢を整備するほか、"
         "リスクベースでの検査監督を強化する。", "令和4年秋", "警察庁、金融庁、財務省、その他関係省庁"),
        ("法人・信託の悪用防止", "法人及び信託がマネロンに悪用されることを防ぐため、適切なリスク評価を実施する。", "令和4年春",
         "法務省、警察庁")]


def ruled_page(doc, rows, xs: list[float], *, rules: bool = True, gap: float = 3) -> None:
    """A table of wrapped Japanese cells, its columns `gap` points from their rules (a Japanese action plan's
    項目 / 行動内容 / 期限 / 担当 layout), ruled between every row and column when `rules`."""
    page = doc.new_page(width=842, height=595)
    page.insert_text((40, 40), "行動計画の一覧", fontname="japan", fontsize=14)
    y, size = 60.0, 10
    for row in rows:
        lines = 1
        for c, text in enumerate(row):
            per = int((xs[c + 1] - xs[c] - 2 * gap) // size)
            chunks = [text[i : i + per] for i in range(0, len(text), per)]
            for k, chunk in enumerate(chunks):
                page.insert_text((xs[c] + gap, y + 14 + k * 16), chunk, fontname="japan", fontsize=size)
            lines = max(lines, len(chunks))
        height = lines * 16 + 8
        if rules:
            page.draw_line((xs[0], y), (xs[-1], y), width=0.5)
            for x in xs:
                page.draw_line((x, y), (x, y + height), width=0.5)
        y += height
    if rules:
        page.draw_line((xs[0], y), (xs[-1], y), width=0.5)
    page.insert_text((40, y + 30), "以上の行動計画を着実に実施する。", fontname="japan", fontsize=10)


def test_a_ruled_table_is_read_cell_by_cell_with_its_wrapped_lines_joined(isolated_env):
    """A Japanese action plan whose cells wrap over lines and sit 3 points from their rules: each item is one row
    holding its whole text, where reading baselines across the page spliced the deadline and ministry columns into
    the action's sentence."""
    doc = pymupdf.open()
    ruled_page(doc, PLAN, [40, 150, 450, 520, 800])
    (_meta, body), = ingest(isolated_env, "行動計画", doc).values()
    rows = table_lines(body)
    assert rows[0] == "| 項目 | 行動内容 | 期限 | 担当府省庁等 |" and rows[1] == "|---|---|---|---|"
    assert rows[2] == "| " + " | ".join(PLAN[1]) + " |"
    assert rows[3] == "| " + " | ".join(PLAN[2]) + " |" and len(rows) == 4
    assert body.index("行動計画の一覧") < body.index("| 項目") < body.index("以上の行動計画を着実に実施する。")


def test_rules_that_part_no_cells_of_text_are_no_table(isolated_env):
    """A map drawn with lines, its labels strewn between them, keeps its text as it was: no table."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for k in range(6):
        page.draw_line((50, 100 + 100 * k), (550, 100 + 100 * k), width=0.5)
        page.draw_line((50 + 100 * k, 100), (50 + 100 * k, 600), width=0.5)
    for k, (x, y) in enumerate([(60, 130), (200, 130), (320, 160), (70, 260), (140, 270), (330, 330), (420, 430),
                                (90, 450), (250, 480), (480, 560)]):
        put(page, x, y, f"Street {k}", 8)
        put(page, x + 55, y, f"Park {k}", 8)
        put(page, (x + 250) % 500 + 50, y, f"Lane {k}", 8)
    put(page, 60, 700, "Map of the city centre with its streets and parks.", 10)
    (_meta, body), = ingest(isolated_env, "map", doc).values()
    assert not table_lines(body) and "Street 3" in body and "Park 9" in body


# ------------------------------------------------------------------------------------------ the page file


def test_the_running_field_round_trips_and_the_converter_version_says_what_changed():
    meta = PageMeta(source="a.pdf", document="A", section="s", page=3, printed_page="1",
                    running="ACME Annual Report · 1 Getting Started")
    text = render_page(meta, "# Title\n\nBody")
    assert "printed_page: 1\nrunning: ACME Annual Report · 1 Getting Started\n---\n" in text
    assert parse_page(text)[0] == meta
    assert "running" not in render_page(PageMeta(source="a.pdf", page=1), "Body")
    assert CONVERTER_VERSION == 11 and "running" in CONVERTER_CHANGES[3] and "ruled" in CONVERTER_CHANGES[4]
    assert "heading" in CONVERTER_CHANGES[5] and "figure table" in CONVERTER_CHANGES[6]
    assert "column by column" in CONVERTER_CHANGES[7]
    assert "marked with letters" in CONVERTER_CHANGES[8] and "first chapter" in CONVERTER_CHANGES[8]
    assert "label" in CONVERTER_CHANGES[9] and "chapter headings" in CONVERTER_CHANGES[9] \
        and "sections" in CONVERTER_CHANGES[9]
    assert "page_011" in CONVERTER_CHANGES[10] and "item" in CONVERTER_CHANGES[10]
    assert "running" in CONVERTER_CHANGES[11] and "(DOCX, PPTX)" in CONVERTER_CHANGES[11]
