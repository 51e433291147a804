"""Query understanding: named pages, figures and tables, misspelt words."""

from __future__ import annotations

import json

import pytest
from search_fixtures import fresh, top, write_empty_slide_deck, write_page

from ragkit.search import query as q_mod
from ragkit.search.index import Index
from ragkit.search.understand import idf


def test_a_misspelt_word_finds_the_indexed_word_one_edit_away(tmp_path):
    d = tmp_path / "database"
    write_page(d, "fin/netflix/statements/page_043.md", "# Netflix\nNetflix working capital grew.", page=43)
    write_page(d, "fin/other/statements/page_010.md", "# Other\nWorking capital of another firm.", page=10)
    idx = fresh(d)
    for typo in ("Netfilx", "Neflix", "Netflixx", "Netflox"):  # swap, deletion, insertion, replacement
        assert top(idx, f"{typo} working capital", k=1) == ["fin/netflix/statements/page_043.md"], typo
    assert idx.search("Qwertyuiop") == []  # nothing one edit away: nothing found
    assert idx.query_terms("Netflix")["netflix"] == 1  # a known word is left alone


def test_a_page_the_query_names_comes_first(tmp_path):
    d = tmp_path / "database"
    for n in range(1, 6):
        write_page(d, f"manuals/camry/pages_001-010/page_{n:03d}.md", f"# Car {n}\nThe car is shown in red.", page=n)
    write_page(d, "manuals/other/pages_001-010/page_003.md", "# Boat\nA boat in blue.", page=3)
    idx = fresh(d)
    assert top(idx, "How many cars appear on page 3?", k=1) == ["manuals/camry/pages_001-010/page_003.md"]
    assert top(idx, "What color is the car on the cover?", k=1) == ["manuals/camry/pages_001-010/page_001.md"]
    assert top(idx, "4ページの車", k=1) == ["manuals/camry/pages_001-010/page_004.md"]
    assert top(idx, "5페이지 car", k=1) == ["manuals/camry/pages_001-010/page_005.md"]
    # the page number alone does not bring in a page that has none of the query's words
    hits = top(idx, "car on page 3")
    assert hits[0] == "manuals/camry/pages_001-010/page_003.md"
    assert "manuals/other/pages_001-010/page_003.md" not in hits


def test_a_named_page_without_the_querys_words_stands_on_its_documents_evidence(tmp_path):
    d = tmp_path / "database"
    write_page(d, "cars/camry/pages_001-010/page_001.md", "# Camry\nThe new Camry sedan, cars for every road.")
    write_page(d, "cars/camry/pages_001-010/page_002.md", "# Engine\nThe hybrid engine of these cars.", page=2)
    write_page(d, "cars/camry/pages_001-010/page_003.md", "<!-- ragkit: no text layer on this page -->", page=3)
    write_page(d, "boats/yacht/pages_001-010/page_003.md", "<!-- ragkit: no text layer on this page -->", page=3)
    write_page(d, "boats/yacht/pages_001-010/page_001.md", "# Yacht\nSails and a keel.")
    idx = fresh(d)
    # page 3 of the camry brochure is a photo: no words, but its document is about cars
    assert top(idx, "How many cars appear on page 3?", k=1) == ["cars/camry/pages_001-010/page_003.md"]
    assert top(idx, "How many cars appear on page 3?", k=1, path="cars/camry") == [
        "cars/camry/pages_001-010/page_003.md"]
    # the yacht's page 3 is not brought in: nothing in its document matches the question
    assert "boats/yacht/pages_001-010/page_003.md" not in top(idx, "How many cars appear on page 3?")
    # the marker of a page without text is not content: it matches no query
    assert idx.search("no text layer on this page") == []


def test_a_page_is_also_named_by_the_number_printed_on_it(tmp_path, monkeypatch):
    d = tmp_path / "database"
    # a manual whose printed numbering starts after a cover and a contents page: file page n shows n - 2
    for n in range(1, 9):
        write_page(d, f"manuals/tv/pages_001-010/page_{n:03d}.md", f"# Part {n}\nThe remote control and its buttons.",
                   page=n, printed=str(n - 2) if n > 2 else "")
    idx = fresh(d)
    hits = top(idx, "What does the remote control do on page 4?", k=2)
    assert set(hits) == {"manuals/tv/pages_001-010/page_004.md", "manuals/tv/pages_001-010/page_006.md"}
    assert top(idx, "remote control buttons, page 6", k=1) == ["manuals/tv/pages_001-010/page_006.md"]
    # a hit says what is printed on its page, for the agent and in `rag search` (JSON and table)
    hit = idx.search("remote control buttons, page 6", k=1)[0]
    assert (hit.page, hit.printed_page) == (6, "4")
    from typer.testing import CliRunner

    from ragkit.cli import app
    res = CliRunner().invoke(app, ["search", "remote control, page 6", "--db", str(d), "--format", "json", "-k", "2"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert (data[0]["page"], data[0]["printed_page"]) == (6, "4")
    res = CliRunner().invoke(app, ["search", "remote control, page 6", "--db", str(d), "-k", "1"])
    assert res.exit_code == 0 and "(printed 4)" in res.stdout
    # only file page 8 is printed "6" or numbered 8: "page 8" finds file page 8 first, then nothing printed 8
    assert top(idx, "remote control on page 8", k=1) == ["manuals/tv/pages_001-010/page_008.md"]
    # the printed number is read again when a page changes, and comes back with the snapshot on reopening
    write_page(d, "manuals/tv/pages_001-010/page_005.md", "# Part 5\nThe remote control and its buttons.",
               page=5, printed="12")
    idx.refresh()
    assert top(idx, "remote control, page 12", k=1) == ["manuals/tv/pages_001-010/page_005.md"]
    assert idx._maybe_snapshot(force=True)
    loaded = []
    real = Index._load_snapshot
    monkeypatch.setattr(Index, "_load_snapshot", lambda self: loaded.append(real(self)) or loaded[-1])
    again = fresh(d)
    assert loaded == [True]
    assert top(again, "remote control, page 12", k=1) == ["manuals/tv/pages_001-010/page_005.md"]


@pytest.mark.parametrize("query, pages", [
    ("What is on page 12?", {12}), ("pages 3 and 4", {3, 4}), ("pp. 5-7 and p.9", {5, 6, 7, 9}),
    ("the 3rd page", {3}), ("the first slide", {1}), ("on the cover", {1}), ("What does the warranty cover?", set()),
    ("12ページの表", {12}), ("第12页", {12}), ("12페이지에서", {12}), ("표지에 있는", {1}), ("How many pages?", set()),
    ("How many cars appear on page three?", {3}), ("the date at the top of page(1)", {1}),
    ("from Page 3 to Page 6", {3, 4, 5, 6}), ("pages 3 through 5", {3, 4, 5}), ("a one page summary", set()),
    ("Is there a signature on the last page?", {q_mod.LAST_PAGE}), ("最後のページ", {q_mod.LAST_PAGE}),
    ("마지막 페이지", {q_mod.LAST_PAGE}), ("the last pages of the book", set()),
    # an example of the answer's form names no page
    ("List all pages with the logo. The answer should be formatted as a list like ['Page 2', 'Page 4'].", set()),
    ('Which pages explain it? Answer as a list, for example, ["Page 17", "Page 25"]', set()),
    ('How many people are on page 17? Write a list, e.g., ["1","2"]', {17}),
    ("해당 페이지를 목록으로 답하세요. 예: [3페이지, 5페이지]", set()),
    ("page 3 (like [this])", {3}),
])
def test_page_refs(query, pages):
    assert q_mod.page_refs(query) == pages


def test_the_last_page_is_each_documents_highest_page(tmp_path):
    d = tmp_path / "database"
    for n in (1, 2, 3):
        write_page(d, f"manuals/camry/pages_001-010/page_{n:03d}.md", f"# Car {n}\nA signature of the dealer.", page=n)
    for n in (1, 2, 3, 4, 5):
        write_page(d, f"manuals/boat/pages_001-010/page_{n:03d}.md", f"# Boat {n}\nA signature here.", page=n)
    idx = fresh(d)
    assert set(top(idx, "Is there a signature on the last page?", k=2)) == {
        "manuals/camry/pages_001-010/page_003.md", "manuals/boat/pages_001-010/page_005.md"}
    # the last page moves when a page is added
    write_page(d, "manuals/camry/pages_001-010/page_004.md", "# Car 4\nA signature again.", page=4)
    idx.refresh()
    assert "manuals/camry/pages_001-010/page_004.md" in top(idx, "signature on the last page", k=2)


def test_the_last_page_names_only_a_text_less_page_that_is_its_documents_last(tmp_path):
    """A page without text is a hit only when the query names it (query.may_show), but "the last page" let every
    text-less page through: the empty third slide of a four-slide deck came for "the last page of the quarterly
    review" (by its folder's words). Now only a document's last page is named so."""
    d = tmp_path / "database"
    empty = write_empty_slide_deck(d)
    fourth = write_page(d, empty.replace("page_003", "page_004"), "# Next steps\nThe board meets in June.", page=4)
    idx = fresh(d)
    question = "What is on the last page of the quarterly review?"
    found = top(idx, question, k=5, mode="keyword")
    assert empty.replace("page_003", "page_004") in found and empty not in found, found
    assert empty in top(idx, "What is on page 3 of the quarterly review?", k=5, mode="keyword")
    fourth.unlink()  # now the empty slide is the deck's last
    idx.refresh()
    assert empty in top(idx, question, k=5, mode="keyword")


@pytest.mark.parametrize("query, labels", [
    ("In figure 4, which nodes are retrieved?", ["§figure4"]),
    ("For the examples in Figure 5 and Figure 6", ["§figure5", "§figure6"]),
    ("Figures 5, 6 and 8", ["§figure5", "§figure6", "§figure8"]),
    ("What does Fig. 3 show?", ["§figure3"]),
    ("Among figure 1-3, how many", ["§figure1.3", "§figure1", "§figure2", "§figure3"]),
    ("the blue items in Table1-1", ["§table1.1"]),
    ("Table 2.1", ["§table2.1"]),
    ("図4の温度は", ["§figure4"]),
    ("表 2 の値", ["§table2"]),
    ("그림 3에서", ["§figure3"]),
    ("Exhibit 10", ["§exhibit10"]),
    ("How many figures are in the paper?", []),
    ("the config 3 file", []),
    ("In subfigure 2", []),
])
def test_label_refs(query, labels):
    assert q_mod.label_refs(query) == labels


def test_a_figure_the_query_names_is_the_page_its_caption_is_on(tmp_path):
    d = tmp_path / "database"
    # page 7 shows Figure 4; pages 6 and 9 talk about it and about nodes more than page 7 does
    write_page(d, "papers/raptor/method/page_006.md",
               "# Method\nThe tree has nodes. Figure 4 shows which nodes are retrieved; the nodes of each layer "
               "are retrieved by similarity, and 4 layers of nodes are built.", page=6)
    write_page(d, "papers/raptor/results/page_007.md",
               "# Results\nFigure 4: Querying process: highlighted nodes are the ones retrieved for two questions.",
               page=7)
    write_page(d, "papers/raptor/appendix/page_009.md",
               "# Appendix\nThe nodes we retrieved: for each of 4 datasets, nodes of every layer (figure 2).", page=9)
    write_page(d, "papers/other/results/page_004.md",
               "# Results\nTable 4: nodes retrieved per question.", page=4)
    idx = fresh(d)
    assert top(idx, "In figure 4, which nodes are retrieved for both questions?")[0] == \
        "papers/raptor/results/page_007.md"
    # in Japanese, and as a table: page 13 says 消費電力 twice and holds a 2, page 12 is Table 2
    write_page(d, "manuals/fridge/spec/page_012.md", "# 仕様\n表 2 消費電力と冷却性能\n| 項目 | 値 |\n| 消費電力 | 250 W |",
               page=12)
    write_page(d, "manuals/fridge/power/page_013.md",
               "# 省エネ\n消費電力は表示の2倍になることがあります。消費電力を抑えるには", page=13)
    write_page(d, "manuals/fridge/setup/page_002.md", "# 設置\n表 1 設置に必要な寸法\n| 幅 | 60 cm |", page=2)
    idx.refresh()
    assert top(idx, "表2の消費電力は?")[0] == "manuals/fridge/spec/page_012.md"


# -- query weights ----------------------------------------------------------------------------------------
def test_frame_weight_is_learned_from_question_phrasing():
    table = q_mod.learn_question_terms([
        "Round your answer to two decimal places: what is the revenue of Acme?",
        "What is the margin of Zenith? Round to one decimal place.",
        "How many stores does Corning have? Answer in decimal form, round it.",
    ])
    assert table["questions"] == 3 and {"round", "decimal"} <= set(table["df"])
    assert "acme" not in table["df"]  # in one question only: a name, not phrasing
    # "round" in every question, on 2 of 1000 pages: a frame word; a word as common in pages as in questions is not
    assert q_mod.frame_weight("round", 2, 1000, table) < 0.3
    assert q_mod.frame_weight("round", 999, 1000, table) > 0.99
    assert q_mod.frame_weight("acme", 2, 1000, table) == 1.0


def test_question_frame_words_weigh_less_than_the_entity(tmp_path):
    db = tmp_path / "database"
    for i in range(30):  # many pages about other things; two hold the instruction words
        write_page(db, f"misc/doc{i}/s/page_001.md", f"# Notes {i}\nGeneral text about topic {i} and more.")
    write_page(db, "misc/math/s/page_001.md", "# Rounding\nRound to one decimal place: decimal rounding rules.")
    write_page(db, "fin/zenith/s/page_001.md", "# Zenith results\nZenith operating margin was 12 percent.")
    idx = fresh(db)
    table = q_mod.learn_question_terms(["round to one decimal place"] * 3 + ["what is it, round it"] * 3)
    query = "What is the Zenith margin? Round to one decimal place."
    q_mod.set_question_terms({"questions": 0, "df": {}})
    try:
        before = top(idx, query, k=1)
        q_mod.set_question_terms(table)
        after = top(idx, query, k=1)
    finally:
        q_mod.set_question_terms(None)
    assert before == ["misc/math/s/page_001.md"]  # the instructions win without the learned weights
    assert after == ["fin/zenith/s/page_001.md"]


def test_a_derived_sub_token_never_outweighs_its_source(tmp_path):
    db = tmp_path / "database"
    for i in range(20):
        write_page(db, f"filings/co{i}/s/page_001.md", f"# Annual report {i}\nFiscal 2019 results FY2019 revenue.")
    write_page(db, "budget/us/s/page_001.md", "# Budget\nFY budget tables, FY totals, FY outlays.")
    write_page(db, "filings/acme/s/page_002.md", "# Acme\nAcme revenue for FY2019 was 10 million.")
    idx = fresh(db)
    q = idx.query_terms("Acme revenue FY2019")
    n = idx._n_alive
    assert q["fy"] * idf(idx._df("fy"), n) <= q["fy2019"] * idf(idx._df("fy2019"), n) + 1e-9
    assert "budget/us/s/page_001.md" not in top(idx, "Acme revenue FY2019", k=3)
    assert q_mod.derived_terms("FY2019 revenue") == {"fy2019": ["fy", "2019"]}


def test_a_name_is_not_stemmed_into_another_word(tmp_path):
    """"Corning" stemmed is "corn": the company's page must beat pages about corn, and a page does not get
    longer (so weaker) because its Title Case words are kept twice."""
    from ragkit.core.text import name_forms, search_terms

    assert name_forms("Revenue of Corning Incorporated") == {"corning": "corn", "incorporated": "incorporat"}
    assert search_terms("Corning grew") == ["corning", "corn", "grew"]
    assert search_terms("corning grew") == ["corn", "grew"]  # lower case: only the stem, as before
    d = tmp_path / "database"
    write_page(d, "fin/corning/results/page_010.md", "# Results\nCorning net sales grew in optical products.")
    for i in range(3):  # several pages about corn: "corn" alone is a common word here
        write_page(d, f"agri/crops/corn/page_{i + 1:03d}.md", f"# Corn {i}\nCorn growing and net sales of corn.",
                   page=i + 1)
    idx = fresh(d)
    assert top(idx, "What were Corning's net sales?", k=1) == ["fin/corning/results/page_010.md"]
    assert idx.query_terms("Corning sales")["corning"] > 0  # searched as itself too


@pytest.mark.parametrize("query, named", [
    ("FY2019 revenue", {2019}), ("in 2019 and 2020", {2019, 2020}), ("the 10,2019 units", set()),
    # an example of the answer's form names no year
    ("Which years does the pie chart show? Format them in a list like ['2006', '2007', '2011']", set()),
    ("Net income in 2021? Answer as a list, e.g., [2020]", {2021}),
])
def test_years_a_question_names(query, named):
    assert q_mod.years(query) == named
