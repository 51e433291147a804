"""The offline extractive engine on a small hand-made page tree (ja / en / ko, prose, lists, tables)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from pagetree import write_pages

from ragkit.answer.extractive import REFUSE_BELOW, answer_offline
from ragkit.answer.extractive.engine import REFUSE_BELOW_MEANING, _analyse, calibrated
from ragkit.answer.extractive.qwords import unnamed_share, weigh
from ragkit.answer.extractive.terms import _question_terms, question_words
from ragkit.answer.extractive.units import page_units as _units
from ragkit.core import text as T
from ragkit.core.models import Answer
from ragkit.core.pagefile import PageMeta, render_page
from ragkit.search import open_index

PAGES = {
    "家電/冷蔵庫/操作と機能/page_008.md": (
        "冷蔵庫 取扱説明書", "操作と機能", 8,
        "# 温度の設定\n冷蔵室の温度は「強」「中」「弱」の3段階で切り替えられます。\n"
        "工場出荷時は「中」（約3℃）に設定されています。\n\n"
        "## 製氷\n製氷皿には水道水を入れてください。\n自動製氷は約2時間で最初の氷ができます。\n",
    ),
    "家電/冷蔵庫/お手入れ/page_012.md": (
        "冷蔵庫 取扱説明書", "お手入れ", 12,
        "# お手入れのしかた\n庫内は柔らかい布で水拭きしてく\nださい。\n"
        "シンナーやベンジンは使わないでください。樹脂部品が傷むおそれがあります。\n",
    ),
    "家電/冷蔵庫/仕様/page_020.md": (
        "冷蔵庫 取扱説明書", "仕様", 20,
        "# 仕様\n| 項目 | 仕様 |\n|---|---|\n| 定格内容積 | 540L |\n| 消費電力量 | 250kWh/年 |\n"
        "| 質量 | 112kg |\n",
    ),
    "policy/security_policy/Access control/page_002.md": (
        "Security Policy", "Access control", 2,
        "# Passwords\nPasswords must be at least 12 characters long.\n"
        "Passwords must be changed every 90 days and may not reuse the last five passwords.\n\n"
        "# Remote access\nRemote access requires the company VPN and multi-factor authentication.\n",
    ),
    "policy/security_policy/Incidents/page_005.md": (
        "Security Policy", "Incidents", 5,
        "# Incident reporting\nEmployees must report a suspected security incident to the security team "
        "within 24 hours.\nReports are sent by email to security@example.com.\n\n"
        "# Backups\nServers are backed up nightly and backups are kept for 30 days.\n",
    ),
    "공지/관리사무소 공지/공지/page_001.md": (
        "관리사무소 공지", "공지", 1,
        "# 엘리베이터 정기 점검 안내\n엘리베이터 정기 점검은 3월 15일 오전 10시부터 오후 2시까지 진행됩니다.\n"
        "점검 시간에는 계단을 이용해 주시기 바랍니다.\n\n"
        "# 분리수거 안내\n재활용품 분리수거는 매주 화요일 저녁에 합니다.\n",
    ),
}

ANSWERABLE = [
    # question, expected page (db-relative), text the quoted evidence must contain, language
    ("冷蔵室の温度は工場出荷時に何度に設定されていますか？", "家電/冷蔵庫/操作と機能/page_008.md", "約3℃", "ja"),
    ("自動製氷で最初の氷ができるまでどのくらいかかりますか？", "家電/冷蔵庫/操作と機能/page_008.md", "約2時間", "ja"),
    ("冷蔵庫の定格内容積はいくつですか？", "家電/冷蔵庫/仕様/page_020.md", "540L", "ja"),
    ("How often must passwords be changed?", "policy/security_policy/Access control/page_002.md", "90 days", "en"),
    ("Within how many hours must a security incident be reported?",
     "policy/security_policy/Incidents/page_005.md", "24 hours", "en"),
    ("How long are server backups kept?", "policy/security_policy/Incidents/page_005.md", "30 days", "en"),
    ("엘리베이터 정기 점검은 언제 진행됩니까?", "공지/관리사무소 공지/공지/page_001.md", "3월 15일", "ko"),
    ("재활용품 분리수거는 무슨 요일에 합니까?", "공지/관리사무소 공지/공지/page_001.md", "매주 화요일", "ko"),
    ("庫内のお手入れには何を使いますか？", "家電/冷蔵庫/お手入れ/page_012.md", "柔らかい布で水拭きしてください", "ja"),
]

UNANSWERABLE = [
    ("What is the company's parental leave policy for new employees?", "en"),
    ("洗濯機の脱水時間は何分ですか？", "ja"),
    ("수영장 운영 시간은 어떻게 됩니까?", "ko"),
]


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    db = write_pages(tmp_path_factory.mktemp("offline") / "database", PAGES, source="src/{document}.pdf")
    return db, open_index(db, progress=False)


@pytest.mark.parametrize("question,page,must_contain,lang", ANSWERABLE)
def test_answers_cite_the_right_page(mini, question, page, must_contain, lang):
    db, index = mini
    a = answer_offline(question, index, db)
    assert isinstance(a, Answer)
    assert not a.refused, a.answer
    assert a.sources and a.sources[0].path == (db / page).resolve().as_posix()
    assert a.sources[0].page == int(Path(page).stem.split("_")[1])
    assert must_contain in a.answer and must_contain in a.sources[0].excerpt
    assert "offline" in a.answer
    assert T.detect_lang(a.answer) == lang  # notice and labels in the question's language
    assert f"[1] {a.sources[0].path} p.{a.sources[0].page}" in a.answer
    assert calibrated(min(REFUSE_BELOW, REFUSE_BELOW_MEANING)) <= a.confidence <= 1.0
    assert a.provider == "offline" and a.model == "offline" and a.steps == 1
    assert a.usage.input_tokens == a.usage.output_tokens == 0 and a.usage.cost_usd == 0.0
    assert a.latency_ms > 0
    assert a.sources[0].path in a.pages_read
    assert not T.is_refusal(a.answer)


@pytest.mark.parametrize("question,lang", UNANSWERABLE)
def test_refuses_when_the_documents_do_not_answer(mini, question, lang):
    db, index = mini
    a = answer_offline(question, index, db)
    assert a.refused, a.answer
    assert a.sources == []
    assert a.answer.startswith(T.refusal_text(lang))
    assert "offline" in a.answer and T.is_refusal(a.answer)
    assert 0.0 <= a.confidence < REFUSE_BELOW


def test_multi_page_question_cites_both_pages(mini):
    db, index = mini
    a = answer_offline("How many characters must passwords have, and within how many hours must a security "
                       "incident be reported?", index, db)
    assert not a.refused
    cited = {Path(s.path).parent.name for s in a.sources}
    assert cited == {"Access control", "Incidents"}
    assert "12 characters" in a.answer and "24 hours" in a.answer
    assert "[2]" in a.answer


def test_table_rows_are_quoted_with_their_header(mini):
    db, _ = mini
    body = (db / "家電/冷蔵庫/仕様/page_020.md").read_text(encoding="utf-8").split("---\n", 2)[2]
    texts = [u.text for u in _units(body, "x.md", 0, "仕様")]
    assert "項目: 定格内容積; 仕様: 540L" in texts
    assert not any(set(t) <= set("|-: ") for t in texts)  # the separator row is not a unit


def test_question_words_are_not_content():
    assert "何度" not in _question_terms("何度に設定されていますか")
    # interrogatives in hiragana ask as 何 does, and the past polite ending only asks
    assert [w for w, _ in question_words("売上高はいくらでしたか？")] == ["売上高"]
    assert [w for w, _ in question_words("申告期限はいつですか？")] == ["申告期限"]
    # "how often" (どれくらいの頻度): 頻度 frames the question; a page answers "約3か月ごとに"
    filter_q = "浄水フィルターはどれくらいの頻度で替えればよいですか？"
    assert "頻度" not in [w for w, _ in question_words(filter_q)]
    assert "頻度" in [w for w, _ in question_words("頻度の高い問い合わせは何ですか？")]
    # a run of hiragana is inflection, never a name the database lacks ("えればよい" of 替えればよい)
    words = question_words(filter_q)
    held = Counter(t for w, terms in words if not re.fullmatch("[\u3040-\u309f]+", w) for t in terms)
    assert unnamed_share(weigh(words, 100, held), held) == 0.0
    assert _question_terms("How many characters?") == ["character"]
    assert "언제" not in _question_terms("점검은 언제 진행됩니까?")
    assert "점검" in _question_terms("점검은 언제 진행됩니까?")
    # "who" as a subject (누가) and "how many days" (며칠) ask, as 누구 and 몇 do: the database never holds them
    assert _question_terms("헌법재판관은 누가 임명하나요?") == _question_terms("헌법재판관은 임명하나요?")
    assert "며칠" not in " ".join(_question_terms("법률은 며칠 안에 공포해야 하나요?"))
    # a counter after a numeral sheds its particle ("9명은" is "9명"): a word no page holds otherwise
    assert [w for w, _ in question_words("헌법재판관 9명은 누가 임명하나요?")] == ["헌법재판관", "9", "명", "임명"]
    # the polite question ending written as its own word only asks
    assert _question_terms("비밀번호는 몇 자 이상이어야 합니까?") == _question_terms("비밀번호는 몇 자 이상이어야?")
    # the copula's past after a noun ("몇 척이었나요", "얼마였나요") asks about the noun: 척, 얼마 (an interrogative)
    assert [w for w, _ in question_words("선박은 2009년에 몇 척이었나요?")] == ["선박", "2009", "년", "척"]
    assert [w for w, _ in question_words("순이익은 얼마였나요?")] == ["순이익"]
    # nouns that work as "during", "about" frame the question ("몇 년 동안", "재판 도중에", "예산에 대한")
    assert _question_terms("대통령은 몇 년 동안 재임하나요?") == _question_terms("대통령은 몇 년 재임하나요?")
    assert _question_terms("재판 도중에 법원은 무엇을 하나요?") == _question_terms("재판 법원은 무엇을 하나요?")


def test_deterministic_and_json_shape(mini):
    db, index = mini
    q = "How often must passwords be changed?"
    first, second = answer_offline(q, index, db), answer_offline(q, index, db)
    strip = lambda a: {k: v for k, v in a.to_json().items() if k != "metadata"}  # noqa: E731
    assert strip(first) == strip(second)
    assert first.pages_read == second.pages_read
    doc = json.loads(json.dumps(first.to_json()))
    assert set(doc) == {"answer", "refused", "sources", "confidence", "general_knowledge", "metadata"}
    assert doc["metadata"]["provider"] == "offline" and doc["metadata"]["cost_usd"] == 0.0
    assert doc["metadata"]["engine"] == "offline-extractive"  # one engine, whatever strategy was asked


@pytest.mark.parametrize("question", ["", "   ", "???", "\x00\x01\x02", "🙂🙂🙂", "../../etc/passwd",
                                      "SELECT * FROM pages; --", "a" * 100_000, "パスワード " * 5000])
def test_never_crashes_on_odd_input(mini, question):
    db, index = mini
    a = answer_offline(question, index, db)
    assert isinstance(a, Answer) and "offline" in a.answer
    assert a.refused or a.sources
    assert 0.0 <= a.confidence <= 1.0


def test_sees_pages_added_later(tmp_path):
    db = tmp_path / "database"
    first = db / "a/doc/s/page_001.md"
    first.parent.mkdir(parents=True)
    first.write_text(render_page(PageMeta(document="doc", page=1), "# Intro\nThis guide covers the printer."),
                     encoding="utf-8")
    index = open_index(db, progress=False)
    assert answer_offline("What toner cartridge does the printer use?", index, db).refused
    new = db / "a/doc/s/page_002.md"
    new.write_text(render_page(PageMeta(document="doc", page=2),
                               "# Supplies\nThe printer uses the TN-2420 toner cartridge."), encoding="utf-8")
    index.add_page("a/doc/s/page_002.md")
    a = answer_offline("What toner cartridge does the printer use?", index, db)
    assert not a.refused and "TN-2420" in a.answer
    assert a.sources[0].path.endswith("page_002.md")


def test_reference_paths_are_relative_inside_the_project(tmp_path, monkeypatch, mini):
    db, index = mini
    monkeypatch.chdir(db.parent)
    a = answer_offline("How often must passwords be changed?", index, Path("database"))
    assert a.sources[0].path == "database/policy/security_policy/Access control/page_002.md"
    assert all(p.startswith("database/") for p in a.pages_read)


class _PageList:
    """Only the page list: enough for the corpus statistics."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def pages(self, prefix=None):
        from ragkit.core.paths import iter_pages

        return iter_pages(self.db)


def test_document_frequencies_are_cached_on_disk_and_invalidated(tmp_path):
    import os

    from ragkit.answer.extractive import corpus

    db = tmp_path / "database"
    for i in range(1, 61):
        p = db / f"c/doc/s/page_{i:03d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render_page(PageMeta(document="doc", page=i), f"# Page {i}\ncommon words here"),
                     encoding="utf-8")
    n, df = corpus.corpus_stats(db, _PageList(db))
    assert n == 60 and df["common"] == 60 and df["zebra"] == 0
    cache = db / ".ragkit" / corpus.STATS_FILE
    assert cache.exists()
    corpus._STATS.clear()  # a new process: loads the file instead of reading the pages
    assert corpus.corpus_stats(db, _PageList(db))[1]["common"] == 60
    # every document's terms come back with them, keyed by the file the pages were converted from
    docs = corpus.documents(db, _PageList(db)).terms
    assert list(docs) == ["c/doc"] and {"common", "page"} <= docs["c/doc"] and "zebra" not in docs["c/doc"]
    other = db / "c/other/s/page_001.md"
    other.parent.mkdir(parents=True)
    other.write_text(render_page(PageMeta(source="other.pdf", document="other", page=1), "zebra"), encoding="utf-8")
    assert "zebra" in corpus.documents(db, _PageList(db)).terms["other.pdf"]  # a page added: counted
    other.unlink()
    edited = db / "c/doc/s/page_007.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "\nzebra crossing\n", encoding="utf-8")
    os.utime(edited, ns=(1, 1))  # a different signature even on coarse-mtime filesystems
    corpus._STATS.clear()
    assert corpus.corpus_stats(db, _PageList(db))[1]["zebra"] == 1  # stale cache file ignored
    (db / "c/doc/s/page_001.md").unlink()
    assert corpus.corpus_stats(db, _PageList(db))[0] == 59  # a removed page: recounted


# -- issue 18: typos, one document per answer, one engine ---------------------------------------------
@pytest.mark.parametrize("question", ["How often must pasword be changed?", "How often must passwrods be changed?"])
def test_a_misspelt_word_search_tolerates_does_not_make_the_answerer_refuse(mini, question):
    db, index = mini
    a = answer_offline(question, index, db)
    assert not a.refused, a.answer
    assert "90 days" in a.answer and a.sources[0].path.endswith("Access control/page_002.md")


def test_respell_maps_only_unknown_words_one_edit_away():
    from collections import Counter

    from ragkit.answer.extractive.qwords import respell_term as _respell

    df = Counter({"password": 5, "passport": 1, "netflix": 2})
    assert _respell("pasword", df) == "password"
    assert _respell("netfilx", df) == "netflix"  # a transposition
    assert _respell("password", df) == "password"  # known words stay
    assert _respell("zzzzqq", df) == "zzzzqq"  # nothing near: unchanged
    assert _respell("pas", df) == "pas"  # too short to guess


def test_no_sentence_from_a_second_unrelated_document(tmp_path):
    pages = {
        "policy/security_policy/Access/page_002.md": (
            "Security Policy", "Access", 2,
            "# Passwords\nPasswords must be at least 12 characters long and changed every 90 days.\n"),
        "manuals/router_guide/Setup/page_004.md": (
            "Router Guide", "Setup", 4,
            "# Router admin password\nThe router admin password must be changed at first login by the owner.\n"),
    }
    db = write_pages(tmp_path / "database", pages, source="src/{document}.pdf")
    a = answer_offline("How long must passwords be, and when must the router admin password be changed?",
                       open_index(db, progress=False), db)
    docs = {s.path.split("/")[1] for s in a.sources}
    assert len(docs) <= 1, a.answer  # the quote never mixes two documents


def test_an_optimizer_copy_is_quoted_with_the_rest_of_its_document(tmp_path, monkeypatch):
    """A page the optimizer copied into a folder named after a question is still its document (front matter
    `source`): a two-part question may be answered from the copy and the original's other pages together.
    Sentences of another document are never spliced in."""
    monkeypatch.setenv("RAG_EMBED", "0")
    hotel = "## Lodging\n\nHotel costs are reimbursed up to 150 dollars per night.\n"
    meals = "## Meals\n\nThe meal allowance for business travel is 60 dollars per day.\n"
    pages = {
        "policies/travel/Lodging/page_003.md": ("Travel policy", "Lodging", 3, hotel),
        "policies/travel/Meals/page_004.md": ("Travel policy", "Meals", 4, meals),
        "policies/per diem for food on trips/page_004.md": ("Travel policy", "Meals", 4, meals),  # the copy
        "manuals/camera/Setup/page_002.md": ("Camera manual", "Setup", 2,
                                              "## Setup\n\nThe hotel mode keeps the camera quiet at night.\n"),
    }
    for i, text in enumerate(["Charge the battery before first use.", "Insert the memory card until it clicks.",
                              "Press the shutter button halfway to focus.", "Clean the lens with a soft cloth.",
                              "Firmware updates are installed from the menu."]):
        pages[f"manuals/camera/Use/page_01{i}.md"] = ("Camera manual", "Use", 10 + i, f"## Use\n\n{text}\n")
    db = write_pages(tmp_path / "database", pages)
    an = _analyse("What is the per diem for food on trips, and are hotel costs reimbursed?",
                  open_index(db, progress=False), db, 5)
    assert [u.rel for u in an.chosen] == ["policies/travel/Lodging/page_003.md",
                                          "policies/per diem for food on trips/page_004.md"]


def test_an_example_of_the_answers_form_names_no_year(mini):
    """Years in an example of the answer's form ("list them like ['2014', '2018']") are not years the question asks
    about: the answer is the one the question gets without the example, not a refusal for years no page holds."""
    from ragkit.answer.extractive.checks import years_named

    assert years_named("Which years? List all of them like ['2014', '2018', '2020'].") == set()
    assert years_named("Revenue in 2019? Answer as a list, e.g. [1, 2]") == {"2019"}
    db, index = mini
    plain = answer_offline("How often must passwords be changed?", index, db)
    asked = answer_offline("How often must passwords be changed? Answer like ['1998', '2031'].", index, db)
    assert not plain.refused and not asked.refused, asked.answer
    assert asked.sources[0].path == plain.sources[0].path


@pytest.mark.parametrize("question,lang", [
    ("How do I update the firmware from a USB stick, according to 英語レポート?", "en"),
    ("How long must passwords be, according to 冷蔵庫 取扱説明書?", "en"),
    ("Security Policyによるとパスワードは何文字以上ですか？", "ja"),
    ("watch_dによると充電時間は？", "ja"),
])
def test_an_english_question_naming_a_japanese_document_is_answered_in_english(mini, question, lang):
    """The reply's language is the sentence's, not the script of a document name in it: an English question
    naming 英語レポート got 「この質問には資料から回答できません。」."""
    db, index = mini
    assert T.detect_lang(question) == lang
    a = answer_offline(question, index, db)
    assert T.detect_lang(a.answer.splitlines()[0]) == lang, a.answer
    other = T.REFUSALS["ja" if lang == "en" else "en"]
    assert other not in a.answer, a.answer


QUALIFIED = {
    "人事/育児休業規程/第2条 期間/page_003.md": (
        "育児休業規程", "第2条 期間", 3,
        "## 第2条 期間\n\n育児休業の期間は、子が1歳に達するまでの連続した期間とする。ただし、保育所に入所できない場合は、"
        "子が2歳に達するまで延長できる。\n\n育児休業の申出は、休業開始予定日の1か月前までに人事部へ書面で行う。\n"),
    "人事/育児休業規程/第3条 手当/page_004.md": (
        "育児休業規程", "第3条 手当", 4,
        "## 第3条 手当\n\n育児休業手当は月額5万円とする。\n\nなお、賞与の算定期間は別に定める。\n"),
    "policy/security/Passwords/page_002.md": (
        "Security Policy", "Passwords", 2,
        "# Passwords\n\nPasswords must be at least 12 characters long. However, service accounts must use at "
        "least 24 characters. Passwords are stored hashed.\n\n- Remote access requires the company VPN.\n"
        "Unless a manager approves an exception in writing.\n"),
}


@pytest.mark.parametrize("question,quote", [
    ("育児休業の期間はいつまでですか？",
     "「育児休業の期間は、子が1歳に達するまでの連続した期間とする。ただし、保育所に入所できない場合は、子が2歳に達するまで延長できる。」"),
    ("How long must passwords be?",
     "\u201cPasswords must be at least 12 characters long. However, service accounts must use at least 24 characters.\u201d"),
    ("What does remote access require?",
     "\u201cRemote access requires the company VPN. Unless a manager approves an exception in writing.\u201d"),
])
def test_a_quote_brings_the_sentence_that_qualifies_it(tmp_path, question, quote):
    """A sentence right after the quoted one in its paragraph (or list item) that opens with a qualifier (ただし,
    However, Unless, ...) is quoted with it: "until age 1" without "but until 2 when no nursery place is found"
    is wrong for some readers, and the citation makes it look checked."""
    db = write_pages(tmp_path / "database", QUALIFIED, source="src/{document}.docx")
    a = answer_offline(question, open_index(db, progress=False), db)
    assert not a.refused and quote in a.answer, a.answer
    assert "Passwords are stored hashed" not in a.answer  # not a qualifier: not brought along


def test_a_qualifier_in_the_next_paragraph_is_not_brought_along(tmp_path):
    """Only the same paragraph: a なお paragraph after the quoted one is another provision."""
    db = write_pages(tmp_path / "database", QUALIFIED, source="src/{document}.docx")
    a = answer_offline("育児休業手当はいくらですか？", open_index(db, progress=False), db)
    assert not a.refused and "月額5万円" in a.answer, a.answer
    assert "賞与" not in a.answer


CLOUD = {
    "uploads/クラウド利用方針/pages_001-010/page_003.md": (
        "クラウド利用方針", "pages_001-010", 3,
        "目次\n\n２.１ クラウド・バイ・デフォルト原則 .................................. 4\n\n"
        "２.２ クラウドサービスの利用 .................................. 5\n"),
    "uploads/クラウド利用方針/pages_001-010/page_008.md": (
        "クラウド利用方針", "pages_001-010", 8,
        "２ 基本方針\n\n２.１ クラウド・バイ・デフォルト原則\n\n"
        "政府情報システムは、クラウド・バイ・デフォルト原則、すなわち、クラウドサービスの利用を第一候補として、"
        "その検討を行うものとする。その際、情報システム化の対象となるサービス・業務、取り扱う情報等を明確化した上で、"
        "メリット、開発の規模及び経費等を基に、検討するものとする。\n"),
}


def test_a_title_line_is_never_the_answer_alone(tmp_path):
    """A PDF's section heading is a line of its own ("２.１ クラウド・バイ・デフォルト原則"), not a markdown heading:
    it holds every word of "…原則とは何ですか？" and explains nothing. The sentence under it is quoted."""
    db = write_pages(tmp_path / "database", CLOUD, source="src/{document}.pdf")
    a = answer_offline("クラウド・バイ・デフォルト原則とは何ですか？", open_index(db, progress=False), db)
    assert not a.refused, a.answer
    assert "「政府情報システムは、クラウド・バイ・デフォルト原則、すなわち" in a.answer, a.answer
    assert a.sources[0].page == 8


def test_headings_with_nothing_under_them_are_refused(tmp_path):
    """A table of contents' entry, or a heading with no text under it, is passed over; when nothing else holds the
    question's words the engine refuses rather than quote a title."""
    pages = {"uploads/クラウド利用方針/pages_001-010/page_003.md": CLOUD["uploads/クラウド利用方針/pages_001-010/page_003.md"],
             "policy/security/Contents/page_001.md": (
                 "Security Policy", "Contents", 1, "# Contents\n\n## Incident reporting\n\n## Backup retention\n")}
    db = write_pages(tmp_path / "database", pages, source="src/{document}.pdf")
    index = open_index(db, progress=False)
    for q in ("クラウド・バイ・デフォルト原則とは何ですか？", "What is the backup retention?"):
        a = answer_offline(q, index, db)
        assert a.refused, a.answer
