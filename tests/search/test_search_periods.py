"""Fiscal periods in Japanese and English: understood in questions and pages, and a question about one period
never ranks a neighbouring period's report of the same company first."""

from __future__ import annotations

import pytest
from search_fixtures import fresh, top, write_page

from ragkit.search.periods import period_terms, reported_periods


@pytest.mark.parametrize("text,terms", [
    ("2025年3月期 第3四半期決算短信", ["§fy2025", "§q3", "§fy2025q3"]),
    ("2025年３月期第３四半期累計期間", ["§fy2025", "§q3", "§fy2025q3"]),
    ("2024年度の予算", ["§fy2024"]),
    ("令和5年度 補正予算", ["§fy2023"]),
    ("令和元年度", ["§fy2019"]),
    ("平成30年度", ["§fy2018"]),
    ("2024年3月期 上期の営業利益", ["§fy2024", "§h1", "§q2", "§fy2024h1", "§fy2024q2"]),
    # the second quarter's cumulative report is the half year's: 第2四半期(累計), 中間期, 上期, first half
    ("2025年3月期 中間決算短信〔日本基準〕", ["§fy2025", "§h1", "§q2", "§fy2025h1", "§fy2025q2"]),
    ("2025年3月期 第2四半期（中間期）", ["§fy2025", "§q2", "§h1", "§fy2025q2", "§fy2025h1"]),
    ("2025年3月期の中間配当", ["§fy2025"]),
    ("下半期", ["§h2"]),
    ("FY2024 Q3 revenue", ["§fy2024", "§q3", "§fy2024q3"]),
    ("3Q FY24", ["§fy2024", "§q3", "§fy2024q3"]),
    ("net income in fiscal 2019", ["§fy2019"]),
    ("the third quarter of fiscal year 2024", ["§fy2024", "§q3", "§fy2024q3"]),
    ("Q3 2024", ["§q3", "§fy2024q3"]),
    ("first half of 2023", ["§h1", "§q2", "§fy2023h1", "§fy2023q2"]),
    ("first half", ["§h1", "§q2"]),
    ("revenue in the second quarter of 2023", ["§q2", "§h1", "§fy2023q2", "§fy2023h1"]),
    ("the third quarter of the year, 2023", ["§q3"]),
    ("For the quarterly period ended March 31, 2024", ["§end2024-03"]),
    ("for the year ended Dec. 31, 2023", ["§end2023-12"]),
    ("for the fiscal year ending January 28, 2023", ["§end2023-01"]),
    ("for the 13 weeks ended October 29, 2022", ["§end2022-10"]),
    # a question names a year to date by its end, as a cover does (a page also says which quarter it is: below)
    ("for the six months ended June 30, 2023", ["§end2023-06"]),
    ("2024년 3분기 매출액", ["§q3", "§fy2024q3"]),
    ("2024년도 사업보고서", ["§fy2024"]),
    ("2024 회계연도", ["§fy2024"]),
    ("2024년 상반기 영업이익", ["§h1", "§q2", "§fy2024h1", "§fy2024q2"]),
    ("반기보고서", ["§h1", "§q2"]),
    ("하반기", ["§h2"]),
    ("분기보고서", []),
    ("13분기 연속", []),
    ("2024年12月31日現在", []),
    ("version 2.1 of the iq3 model", []),
])
def test_periods_are_read_in_japanese_english_and_korean(text, terms):
    assert period_terms(text) == terms


@pytest.mark.parametrize("text,terms", [
    ("Statements of Income for the three and six months ended June 30, 2023 and 2022",
     ["§end2023-06", "§q2", "§h1", "§fy2023q2", "§fy2023h1"]),
    ("Nine Months Ended September 30, 2023", ["§end2023-09", "§q3", "§fy2023q3"]),
    # a fiscal year ending in May (FY2024 began in June 2023), in June (FY2023 began in July 2022), in January
    ("THREE AND SIX MONTHS ENDED NOVEMBER 30, 2023", ["§end2023-11", "§q2", "§h1", "§fy2024q2", "§fy2024h1"]),
    ("nine months ended February 29, 2024", ["§end2024-02", "§q3", "§fy2024q3"]),
    ("six months ended December 31, 2022", ["§end2022-12", "§q2", "§h1", "§fy2023q2", "§fy2023h1"]),
    ("the thirty-nine weeks ended October 29, 2022", ["§end2022-10", "§q3", "§fy2023q3"]),
    ("26 weeks ended July 29, 2023", ["§end2023-07", "§q2", "§h1", "§fy2024q2", "§fy2024h1"]),
    # a quarter alone is a first quarter's report (Nike's, in August, is FY2024's; a retailer's thirteen weeks)
    ("three months ended March 31, 2023 and 2022", ["§end2023-03", "§q1", "§fy2023q1"]),
    # a year of weeks ends near a month's end: in a month's first days, the period closes the month before
    ("Three and Six Months Ended July 1, 2023 and June 25, 2022", ["§end2023-07", "§q2", "§h1", "§fy2023q2",
                                                                  "§fy2023h1"]),
    ("nine months ended July 1, 2023", ["§end2023-07", "§q3", "§fy2023q3"]),
    ("Three Months Ended April 1, 2023", ["§end2023-04", "§q1", "§fy2023q1"]),
    ("For the three months ended August 31, 2023", ["§end2023-08", "§q1", "§fy2024q1"]),
    ("Thirteen weeks ended April 29, 2023", ["§end2023-04", "§q1", "§fy2024q1"]),
    # ... unless a longer period or another quarter is named beside it
    ("three months and year ended December 31, 2023", ["§end2023-12"]),
    ("the three and twelve months ended December 31, 2023", ["§end2023-12"]),
    ("Fourth quarter: the three months ended December 31, 2023", ["§q4", "§end2023-12"]),
    ("twelve months ended June 30, 2023", ["§end2023-06"]),
    # the latest period is the one reported, the others its comparatives
    ("the six months ended June 30, 2023 compared with the six months ended June 30, 2022",
     ["§end2023-06", "§end2022-06", "§q2", "§h1", "§fy2023q2", "§fy2023h1"]),
    # quarters ending in different months are compared, not reported
    ("MAUs for the three months ended December 31, 2019, as compared to the three months ended September 30, 2019",
     ["§end2019-12", "§end2019-09"]),
])
def test_a_page_reports_the_quarter_its_year_to_date_ends(text, terms):
    assert reported_periods(text) == terms


def _report(db, company: str, name: str, quarter: int, sales: str, outlook: str = "") -> None:
    body = (f"# {company} 2025年3月期 第{quarter}四半期決算短信\n"
            f"売上高 {sales} 百万円、営業利益 1,200 百万円。\n{outlook}")
    write_page(db, f"決算/{name}/p/page_001.md", body, source=f"src/{name}.pdf")
    write_page(db, f"決算/{name}/p/page_002.md", f"# 連結財務諸表\n売上高 {sales} 百万円\n四半期純利益 800 百万円",
               source=f"src/{name}.pdf", page=2)


def test_a_korean_question_about_one_quarter_finds_that_quarters_report(tmp_path):
    """As in Japanese: the second-quarter report's outlook talks about the third quarter more than the third
    quarter's own report does."""
    db = tmp_path / "database"
    for name, company, quarter, sales, extra in (
            ("hanbit_q2", "한빛전자", 2, "4,510", "3분기 매출액은 전년 3분기 매출액을 넘어설 전망이며, 3분기 수주도 늘었다."),
            ("hanbit_q3", "한빛전자", 3, "6,820", ""),
            ("nuri_q3", "누리화학", 3, "1,290", "")):
        write_page(db, f"보고서/{name}/p/page_001.md", f"# {company} 2024년 {quarter}분기 보고서\n"
                   f"매출액 {sales} 억원, 영업이익 120 억원. {extra}", source=f"src/{name}.pdf")
        write_page(db, f"보고서/{name}/p/page_002.md", f"# 재무제표\n매출액 {sales} 억원\n당기순이익 80 억원",
                   source=f"src/{name}.pdf", page=2)
    idx = fresh(db)
    for mode in ("keyword", "hybrid"):
        assert top(idx, "한빛전자의 2024년 3분기 매출액은?", k=1, mode=mode)[0].startswith("보고서/hanbit_q3/"), mode
        assert top(idx, "한빛전자 2024년 2분기 매출액", k=1, mode=mode)[0].startswith("보고서/hanbit_q2/"), mode


QUARTER_QUESTIONS = {"北海商事の2025年3月期第3四半期の売上高は？": "決算/hokkai_q3/",
                     "北海商事 2025年3月期 第2四半期 売上高": "決算/hokkai_q2/"}


def quarter_reports(db) -> None:
    """One company's second- and third-quarter summaries, the second talking about the third quarter's sales (its
    outlook) more than the third's own does, and another company's third quarter."""
    outlook = ("当社グループの業績の見通しについて、売上高は引き続き堅調に推移すると見込んでおり、"
               "第3四半期以降の売上高も前年を上回る見込みです。第3四半期の売上高の見通しは据え置きます。")
    _report(db, "北海商事", "hokkai_q2", 2, "45,100", outlook)
    _report(db, "北海商事", "hokkai_q3", 3, "68,200")
    _report(db, "南海物産", "nankai_q3", 3, "12,900")


def test_a_question_about_one_quarter_finds_that_quarters_report(tmp_path):
    """The second-quarter summary talks about the third quarter's sales (its outlook) more than the third
    quarter's own summary does; only the period it reports tells them apart."""
    db = tmp_path / "database"
    quarter_reports(db)
    idx = fresh(db)
    for question, report in QUARTER_QUESTIONS.items():
        assert top(idx, question, k=1, mode="keyword")[0].startswith(report), question


def test_english_periods_pick_their_filing(tmp_path):
    db = tmp_path / "database"
    ends = {2: "June 30", 3: "September 30"}
    for q, rev in ((2, "5,504"), (3, "6,779")):
        talk = ("Revenues in the quarter ended September 30 are expected to grow; revenues for September and "
                "the quarter ended September 30 will reflect new pricing. " if q == 2 else "")
        write_page(db, f"filings/acme_q{q}/cover/page_001.md",
                   f"# Acme Corp Form 10-Q\nFor the quarterly period ended {ends[q]}, 2024\n{talk}Revenues {rev} million",
                   source=f"src/acme_q{q}.pdf")
    idx = fresh(db)
    assert top(idx, "Acme revenues in the quarter ended September 30, 2024", k=1, mode="keyword")[0] \
        == "filings/acme_q3/cover/page_001.md"


def _ten_q(db, name: str, cover: str, contents: str, body: str, form: str = "10-Q") -> None:
    period = "fiscal year" if form == "10-K" else "quarterly period"
    write_page(db, f"filings/{name}/cover/page_001.md",
               f"# Acme Corp Form {form}\nFor the {period} ended {cover}\nCommission file number 1-0000",
               source=f"src/{name}.pdf")
    write_page(db, f"filings/{name}/cover/page_002.md", f"# Index\nCondensed Consolidated Statements of Income for "
               f"the {contents}\nCondensed Consolidated Balance Sheets", source=f"src/{name}.pdf", page=2)
    write_page(db, f"filings/{name}/mdna/page_003.md", f"# Management's Discussion and Analysis\n{body}",
               source=f"src/{name}.pdf", page=3)


TEN_Q_QUESTIONS = {"What is Acme's quick ratio for Q2 of FY2023?": "filings/acme_q2/",
                   "Acme current assets in the second quarter of 2023": "filings/acme_q2/",
                   "Acme revenue for FY2023 Q3": "filings/acme_q3/",
                   "Acme current liabilities in the first quarter of 2023": "filings/acme_q1/"}


def ten_q_filings(db) -> None:
    """Three 10-Qs of one year and the 10-K before them: none says which quarter it is on its cover, the second and
    third quarters' discussions compare with the quarter before more than that quarter's own does, and the 10-K
    talks about first quarters. Only the year to date tells them apart."""
    _ten_q(db, "acme_q1", "March 31, 2023", "three months ended March 31, 2023 and 2022",
           "Revenue was $1,020 million. Current assets were $900 million and current liabilities $610 million.")
    _ten_q(db, "acme_q2", "June 30, 2023", "three and six months ended June 30, 2023 and 2022",
           "Revenue was $1,110 million. Current assets were $950 million and current liabilities $640 million, "
           "up from first quarter current liabilities of $610 million; first quarter current assets were lower.")
    _ten_q(db, "acme_q3", "September 30, 2023", "three and nine months ended September 30, 2023 and 2022",
           "Revenue was $1,180 million, up from the second quarter. Current assets were $990 million, up from the "
           "second quarter, and current liabilities $650 million, as in the second quarter.")
    _ten_q(db, "acme_10k", "December 31, 2022", "years ended December 31, 2022, 2021 and 2020",
           "Revenue was $4,300 million. Current liabilities were $600 million; in the first quarter current "
           "liabilities rose, and first quarter current liabilities are expected to rise again.", form="10-K")


def test_a_filing_is_the_quarter_its_year_to_date_says(tmp_path):
    db = tmp_path / "database"
    ten_q_filings(db)
    idx = fresh(db)
    for mode in ("keyword", "hybrid"):
        for question, filing in TEN_Q_QUESTIONS.items():
            assert top(idx, question, k=1, mode=mode)[0].startswith(filing), (question, mode)


HALF_YEAR_QUESTIONS = {"東西電機の2025年3月期第2四半期の売上高は？": "決算/h1/", "東西電機 2025年3月期 上期 売上高": "決算/h1/",
                       "南北工業の2024年3月期中間期の売上高": "決算/old_q2/"}


def half_year_reports(db) -> None:
    """One company's first-quarter, half-year (called 中間決算短信 since 2024) and third-quarter summaries and last
    year's annual one; another company's second- and third-quarter summaries of the year before."""
    for name, title in (("q1", "2025年3月期 第1四半期決算短信"), ("h1", "2025年3月期 中間決算短信"),
                        ("q3", "2025年3月期 第3四半期決算短信"), ("fy", "2024年3月期 決算短信")):
        write_page(db, f"決算/{name}/p/page_001.md", f"# 東西電機 {title}\n売上高 4,{len(name)}00 百万円、営業利益 900 百万円。",
                   source=f"src/{name}.pdf")
    write_page(db, "決算/old_q2/p/page_001.md", "# 南北工業 2024年3月期 第2四半期決算短信\n売上高 7,300 百万円。",
               source="src/old_q2.pdf")
    write_page(db, "決算/old_q3/p/page_001.md", "# 南北工業 2024年3月期 第3四半期決算短信\n売上高 9,100 百万円。",
               source="src/old_q3.pdf")


def test_the_half_year_is_the_second_quarters_report(tmp_path):
    """A question asking for the second quarter finds the summary called 中間決算短信, and one asking for the half
    year finds a summary still called 第2四半期, ahead of the same company's other quarters and annual summary."""
    db = tmp_path / "database"
    half_year_reports(db)
    idx = fresh(db)
    for question, report in HALF_YEAR_QUESTIONS.items():
        assert top(idx, question, k=1, mode="keyword")[0].startswith(report), question


COMPARATIVE_QUESTIONS = {"Acme revenues for the year ended December 31, 2023": "filings/acme_2024/"}


def comparative_reports(db) -> None:
    """The 2024 10-K of a company, whose comparative column holds 2023, and a page that only shares its words."""
    write_page(db, "filings/acme_2024/cover/page_001.md",
               "# Acme Corp Form 10-K\nFor the fiscal year ended December 31, 2024\n"
               "Acme revenues were $7,010 million in 2024 and $6,350 million in 2023.", source="src/acme_2024.pdf")
    write_page(db, "notes/market/p/page_001.md",
               "# Market notes\nRevenues for the year ended across the market, December 2023: revenues were "
               "strong for the year, and revenues in December 2023 beat the year before. Acme was mentioned.",
               source="src/market.pdf")


def test_a_period_no_report_covers_leaves_the_ranking_alone(tmp_path):
    """A question about a year no filing covers (asked of the next year's 10-K, whose comparative column holds it)
    does not push that filing below a page that only shares its words: a neighbouring period's report comes
    after only when some report covers the period asked."""
    db = tmp_path / "database"
    comparative_reports(db)
    idx = fresh(db)
    for question, report in COMPARATIVE_QUESTIONS.items():
        assert top(idx, question, k=1, mode="keyword")[0].startswith(report), question
