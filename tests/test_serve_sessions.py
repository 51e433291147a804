"""Chat sessions of `rag serve`: which question is a follow-up (and carries the previous subject into its
search) and which stands alone (searched as itself), on a written-down set in Japanese, English and Korean;
the chain of follow-ups; and GET /sessions/{id}, what a page needs to show a conversation again."""

from __future__ import annotations

from functools import partial

import httpx
import pytest
from liveserver import LiveServer

from ragkit.core.config import Settings
from ragkit.serve.app import ServeOptions
from ragkit.serve.sessions import Turn, is_follow_up, key_terms, own_words_lead_elsewhere, rewrite_offline

get = partial(httpx.get, timeout=120)
post = partial(httpx.post, timeout=120)


def offline(db) -> Settings:
    return Settings(db=db, provider="offline", provider_reason="test", cache=False)


# (the question before, the question). Halves "a" and "b": the constants of sessions.py (MIN_CONTENT_CHARS_JA,
# MIN_CONTENT_WORDS, the ellipsis patterns) were set looking at half "a"; half "b" was held out and checked after.
FOLLOW_UPS = {
    "ja": [
        ("a", "出張の日当はいくらですか？", "海外出張の場合は？"),
        ("b", "出張の日当はいくらですか？", "それはいつまでに精算しますか？"),
        ("a", "出張の日当はいくらですか？", "管理職は？"),
        ("b", "冷蔵室の温度設定を「強」にすると何度ですか", "「弱」ではどうですか？"),
        ("a", "浄水フィルターはどれくらいの頻度で替えればよいですか？", "品番は？"),
        ("b", "東京に出張したとき、一般社員の宿泊費はいくらまで出ますか？", "大阪の場合はどうですか？"),
        ("a", "急速冷凍は何分で終わりますか？", "その後どうなりますか？"),
        ("b", "東京に出張したとき、一般社員の宿泊費はいくらまで出ますか？", "管理職だといくらですか？"),
        ("a", "GR-K460 の発売日はいつですか？", "価格はいくらですか？"),
        ("b", "出張の日当はいくらですか？", "宿泊費も同じですか？"),
        ("a", "パスワードは何文字以上必要ですか？", "期限は？"),
        ("b", "操作パネルに「E5」と表示されました。どういう意味ですか？", "他にはどんなエラーがありますか？"),
        # the user's third question (report H1): 「この規程」 names no document, it points back at the one discussed
        ("a", "パスワードは何文字以上必要ですか？", "この規程はいつから施行されますか？"),
        ("b", "出張旅費の精算期限はいつですか？", "では、領収書は必要ですか？"),
    ],
    "en": [
        ("a", "Is multi-factor authentication required for VPN access?", "What about for email?"),
        ("b", "When is the GR-K460 released?", "And its price?"),
        ("a", "How long must passwords be?", "And for administrators?"),
        ("b", "How quickly must a security incident be reported?", "Who do I call?"),
        ("a", "How long are backups kept?", "What about security logs?"),
        ("b", "How long can a VPN session last?", "Is it the same for contractors?"),
        ("a", "What is the daily allowance for a business trip?", "How about managers?"),
        ("b", "How long must passwords be?", "How often do they expire?"),
        ("a", "How long are backups kept?", "Why?"),
        ("b", "How long can a VPN session last?", "Then what happens?"),
        ("a", "Is multi-factor authentication required for VPN access?", "Also for source control?"),
        ("b", "When does the new office open?", "Where is it?"),
    ],
    "ko": [
        ("a", "사무실 이사는 언제 하나요?", "새 사무실 주소는요?"),
        ("b", "새 건물 주차 공간은 몇 면인가요?", "신청 마감은요?"),
        ("a", "사무실 이사는 언제 하나요?", "그럼 업무는 언제부터 시작하나요?"),
        ("b", "새 건물 주차 공간은 몇 면인가요?", "그건 누구에게 신청하나요?"),
        ("a", "VPN 접속에 다중 인증이 필요한가요?", "이메일은요?"),
        ("b", "사무실 이사는 언제 하나요?", "거기까지 어떻게 가나요?"),
        ("a", "비밀번호는 몇 자 이상이어야 하나요?", "관리자는 어떤가요?"),
        ("b", "새 사무실 업무는 언제 시작하나요?", "시간은요?"),
        ("a", "출장 일당은 얼마인가요?", "해외 출장의 경우는요?"),
        ("b", "사무실 이사는 언제 하나요?", "이유는 뭔가요?"),
        ("a", "주차 등록 마감일은 언제인가요?", "그 다음에는 어떻게 되나요?"),
        ("b", "출장 일당은 얼마인가요?", "관리자도 마찬가지인가요?"),
    ],
}
STANDALONE = {
    "ja": [  # the first three: the report's H1 chain and its s2.py case
        ("a", "クラウド・バイ・デフォルト原則とは何ですか？", "パスワードは何文字以上必要ですか？"),
        ("b", "パスワードは何文字以上必要ですか？", "都道府県別の預貯金残高で最も多いのはどこですか？"),
        ("a", "How long must passwords be?", "育児休業は何日取れますか？"),
        ("b", "What is the daily allowance for a business trip?", "有給休暇は何日ですか"),
        ("a", "出張の日当はいくらですか？", "クラウド・バイ・デフォルト原則とは何ですか？"),
        ("b", "冷蔵室の温度設定を「強」にすると何度ですか", "出張の日当はいくらですか？"),
        ("a", "出張の日当はいくらですか？", "浄水フィルターはどれくらいの頻度で替えればよいですか？"),
        ("b", "急速冷凍は何分で終わりますか？", "GR-K460 の発売日はいつですか？"),
        ("a", "GR-K460 の発売日はいつですか？", "急速冷凍は何分で終わりますか？"),
        ("b", "浄水フィルターはどれくらいの頻度で替えればよいですか？", "精算の期限はいつですか？"),
        ("a", "出張の日当はいくらですか？", "冷蔵庫を設置するとき、上にはどれだけ空ける必要がありますか？"),
        ("b", "GR-K460 の発売日はいつですか？", "東京に出張したとき、一般社員の宿泊費はいくらまで出ますか？"),
    ],
    "en": [
        ("a", "Is multi-factor authentication required for VPN access?", "How long must passwords be?"),
        ("b", "How long must passwords be?", "What is the retention period for Confidential data records?"),
        ("a", "How long must passwords be?", "How quickly must a suspected security incident be reported?"),
        ("b", "When is the GR-K460 released?", "How long are backups and security logs kept?"),
        ("a", "How long are backups kept?", "What is the daily allowance for a business trip?"),
        ("b", "How long are backups kept?", "What is Northwind Analytics' parental leave policy?"),
        ("a", "Is multi-factor authentication required for VPN access?", "How many days of paid leave do we get?"),
        ("b", "How long are backups kept?", "Who approves remote access requests?"),
        ("a", "How long must passwords be?", "What is the VPN timeout?"),
        ("b", "How long are backups kept?", "Is MFA required for VPN access?"),
        ("a", "How long must passwords be?", "When is the GR-K460 released?"),
        ("b", "How quickly must a security incident be reported?", "What is the minimum password length?"),
    ],
    "ko": [
        ("a", "VPN 접속에 다중 인증이 필요한가요?", "사무실 이사는 언제 하고, 새 사무실에서는 언제부터 일하나요?"),
        ("b", "사무실 이사는 언제 하나요?", "새 건물에서 회사가 쓸 수 있는 주차 공간은 몇 면인가요?"),
        ("a", "사무실 이사는 언제 하나요?", "새 사무실 구내식당의 점심 가격은 얼마인가요?"),
        ("b", "사무실 이사는 언제 하나요?", "주차 등록 마감일은 언제인가요?"),
        ("a", "사무실 이사는 언제 하나요?", "비밀번호는 몇 자 이상이어야 하나요?"),
        ("b", "비밀번호는 몇 자 이상이어야 하나요?", "출장 일당은 얼마인가요?"),
        ("a", "출장 일당은 얼마인가요?", "육아 휴직은 며칠 쓸 수 있나요?"),
        ("b", "출장 일당은 얼마인가요?", "새 사무실 주소는 어디인가요?"),
        ("a", "새 사무실 주소는 어디인가요?", "이사 당일에는 출근하지 않아도 되나요?"),
        ("b", "사무실 이사는 언제 하나요?", "보안 사고는 얼마나 빨리 보고해야 하나요?"),
        ("a", "사무실 이사는 언제 하나요?", "냉장고 정수 필터는 얼마나 자주 교체하나요?"),
        ("b", "사무실 이사는 언제 하나요?", "연차 휴가는 며칠인가요?"),
    ],
}


def _cases(table: dict, follows: bool) -> list:
    kind = "follow-up" if follows else "standalone"
    return [pytest.param(before, q, follows, id=f"{kind}-{lang}-{half}{i}") for lang, rows in table.items()
            for i, (half, before, q) in enumerate(rows)]


@pytest.mark.parametrize(("before", "question", "follows"), _cases(FOLLOW_UPS, True) + _cases(STANDALONE, False))
def test_a_follow_up_carries_the_subject_and_a_question_that_stands_alone_is_searched_as_itself(
        before, question, follows):
    history = [Turn(before, before, "…")]
    searched = rewrite_offline(question, history)
    assert is_follow_up(question) == follows
    if follows:
        assert searched.startswith(question) and len(searched) > len(question), searched  # it carried something
    else:
        assert searched == question


def test_the_set_has_ten_of_each_kind_in_each_language():
    for table in (FOLLOW_UPS, STANDALONE):
        assert all(len(rows) >= 10 for rows in table.values()) and set(table) == {"ja", "en", "ko"}


def test_the_reports_chain_does_not_pile_up_earlier_questions():
    """Report H1: one session, four questions; each turn carried the terms of the turn before, carried ones
    included, so the fourth was searched with the words of all three before it."""
    history: list[Turn] = []
    searched = []
    for q in ("クラウド・バイ・デフォルト原則とは何ですか？", "パスワードは何文字以上必要ですか？",
              "この規程はいつから施行されますか？", "都道府県別の預貯金残高で最も多いのはどこですか？"):
        s = rewrite_offline(q, history[-3:])
        searched.append(s)
        history.append(Turn(q, s, "…"))
    assert searched[1] == "パスワードは何文字以上必要ですか？"
    assert "クラウド" not in searched[2] and "パスワード" in searched[2]  # 「この規程」: the one just asked about
    assert searched[3] == "都道府県別の預貯金残高で最も多いのはどこですか？"


def test_a_chain_of_follow_ups_carries_the_first_subject_once():
    history = [Turn("Is multi-factor authentication required for VPN access?",
                    "Is multi-factor authentication required for VPN access?", "Yes.")]
    for q in ("What about for email?", "And for SMS?", "Also for source control?"):
        s = rewrite_offline(q, history)
        history.append(Turn(q, s, "…"))
    last = history[-1].search_query
    assert "authentication" in last and "vpn" in last and "email" not in last and "sms" not in last, last
    assert all(key_terms(t.search_query).count("authentication") == 1 for t in history)


def test_terms_are_not_carried_into_another_language():
    """s2.py: 「育児休業は何日取れますか？」 after "How long must passwords be?" was searched with "long must
    passwords"; a short question after one in another language is not given that language's words either."""
    en = [Turn("How long must passwords be?", "How long must passwords be?", "…")]
    assert rewrite_offline("育児休業は何日取れますか？", en) == "育児休業は何日取れますか？"
    assert rewrite_offline("管理職は？", en) == "管理職は？"
    ja = [Turn("出張の日当はいくらですか？", "出張の日当はいくらですか？", "…")]
    assert rewrite_offline("What about managers?", ja) == "What about managers?"


def test_a_korean_question_is_measured_by_its_words_as_spaced_with_particles_and_endings_off():
    """Report s57-ko H2: 「연차는 며칠인가요?」 ("how many days of annual leave?") after a refund question was
    taken for a follow-up and searched with the refund question's words: 며칠 counted as a bare question word,
    though it is 몇 일 ("how many days") written as one, and 「연차는 몇 일인가요?」 stood alone. A particle written
    onto a Latin word ("USB를") was a word of its own, and the carried terms kept their particles and endings
    (「환불은 며칠 이내에 가능한가요」)."""
    before = [Turn("환불은 며칠 이내에 가능한가요?", "환불은 며칠 이내에 가능한가요?", "…")]
    for q in ("연차는 며칠인가요?", "연차는 며칠입니까?", "연차는 몇 일인가요?", "직원은 몇명인가요?"):
        assert not is_follow_up(q) and rewrite_offline(q, before) == q, q
    for q in ("이유는 뭔가요?", "가격은 얼마인가요?", "USB는요?", "USB는 언제?"):  # one word and what it asks
        assert is_follow_up(q), q
    assert key_terms("환불은 며칠 이내에 가능한가요?") == ["환불", "이내", "가능"]
    assert key_terms("USB는요?") == ["usb"] and key_terms("그건 누구에게 신청하나요?") == ["신청"]
    assert rewrite_offline("USB는요?", before) == "USB는요? 환불 이내 가능"
    # the counter after 몇 says what was counted, and is carried as 何文字 is in Japanese
    assert key_terms("새 건물 주차 공간은 몇 면인가요?") == ["건물", "주차", "공간", "면"]


def test_a_carried_search_whose_pages_hold_the_words_asked_only_apart_from_the_subject_is_not_used():
    """Report s57-ko H2: "USB는요?" after 「환불은 며칠 이내에 가능한가요?」 was searched with the refund words; the
    refund page came first and the security notice, which holds USB, second, so the check (does any best page
    hold the question's own words?) passed, and the refund rule was quoted as the answer. A page must hold the
    words asked together with the subject carried (half its words at least)."""
    refund = "제품 수령 후 14일 이내에는 전액 환불이 가능하다."
    security = "usb 저장장치 사용은 원칙적으로 금지됩니다. 분실 시 1시간 이내에 신고합니다."
    pages = {"USB는요? 환불 이내 가능": [refund, security], "USB는요?": [security]}
    assert own_words_lead_elsewhere("USB는요?", "USB는요? 환불 이내 가능", pages.__getitem__)
    # a page on USB refunds holds both: the carried search stands
    both = "usb 제품은 개봉 후 7일 이내 환불이 가능합니다."
    pages = {"USB는요? 환불 이내 가능": [refund, both], "USB는요?": [both]}
    assert not own_words_lead_elsewhere("USB는요?", "USB는요? 환불 이내 가능", pages.__getitem__)
    # the carried words as the index reads them: "reported" is held by "report"
    incident = "report any suspected incident to the security team within 1 hour, by calling extension 4111."
    pages = {"Who do I call? quickly must security incident reported": [incident], "Who do I call?": [incident]}
    assert not own_words_lead_elsewhere("Who do I call?", "Who do I call? quickly must security incident reported",
                                        pages.__getitem__)


# ------------------------------------------------------------------------------------ the real app, offline
def _chat(srv, query: str, sid: str | None = None) -> dict:
    r = post(srv.url + "/chat", json={"query": query, **({"session_id": sid} if sid else {})})
    assert r.status_code == 200, r.text
    return r.json()


def _cites(resp: dict, page: str) -> bool:
    return any(s["path"].endswith(page) for s in resp["sources"])


FILTER_PAGE = "冷蔵庫_取扱説明書/お手入れ/page_016.md"
RULES_PAGE = "出張旅費規程/第1章 総則/page_001.md"


def test_one_session_answers_new_questions_as_asked_and_follow_ups_with_the_subject(sample_db_copy):
    """Report H1 over the sample corpus: one session, each question on another document. The second and third
    were searched with the earlier questions' words (the third with both earlier ones); now each is searched as
    itself and answered from its own document, while a follow-up still carries what it needs."""
    with LiveServer(offline(sample_db_copy)) as srv:
        first = _chat(srv, "出張の日当はいくらですか？")
        sid = first["session_id"]
        fu = _chat(srv, "海外出張の場合は？", sid)  # a real follow-up: it carries the subject of the first
        assert "出張" in fu["metadata"]["search_query"] and "日当" in fu["metadata"]["search_query"]
        assert _cites(fu, RULES_PAGE) and "海外出張規程" in fu["answer"]
        for q, page in (("浄水フィルターはどれくらいの頻度で替えればよいですか？", FILTER_PAGE),
                        ("GR-K460 の発売日はいつですか？", "新製品説明会/pages_001-006/page_002.md")):
            r = _chat(srv, q, sid)
            assert r["metadata"]["search_query"] == q and _cites(r, page), r
        # a question in another language is not given this session's Japanese words
        en = _chat(srv, "How long must passwords be?", sid)
        assert en["metadata"]["search_query"] == "How long must passwords be?"
        ja = _chat(srv, "育児休業は何日取れますか？", sid)
        assert ja["metadata"]["search_query"] == "育児休業は何日取れますか？"


def test_a_follow_up_whose_carried_words_lead_elsewhere_is_searched_as_asked(sample_db_copy):
    """「製氷は？」 after a question on travel allowances has the form of a follow-up, but the pages the carried
    words find (travel rules) do not hold 製氷, while the question alone finds the manual's page that does."""
    with LiveServer(offline(sample_db_copy)) as srv:
        sid = _chat(srv, "出張の日当はいくらですか？")["session_id"]
        r = _chat(srv, "製氷は？", sid)
        assert r["metadata"]["search_query"] == "製氷は？", r
        assert r["sources"] and all("冷蔵庫_取扱説明書/" in s["path"] for s in r["sources"]), r
        # a follow-up whose carried search holds its own words keeps them
        r = _chat(srv, "What about for email?", _chat(srv, "Is multi-factor authentication required for VPN "
                                                           "access?")["session_id"])
        assert "authentication" in r["metadata"]["search_query"]


def test_a_follow_up_quotes_what_its_own_words_ask_not_the_words_it_carried(sample_db_copy):
    """Report L6: a follow-up is searched with the previous question's words carried (「出張 日当」), and the
    engine took them for words the answer must cover: after the 14日以内 or 海外出張規程 sentence it quoted the
    domestic 日当 row as well, which a reader takes for the answer to what they asked now. The carried words
    still find the pages (and the right page is cited), but a further quote is added only for the user's own words."""
    with LiveServer(offline(sample_db_copy)) as srv:
        first = _chat(srv, "出張の日当はいくらですか？")
        sid = first["session_id"]
        assert "2,000円" in first["answer"]  # the row the follow-ups must not repeat
        for q, page, said in (("それはいつまでに精算しますか？", "出張旅費規程/第3章 精算/page_003.md", "14日以内"),
                              ("海外出張の場合は？", RULES_PAGE, "海外出張規程")):
            r = _chat(srv, q, sid)
            assert "日当" in r["metadata"]["search_query"], r  # carried: it needed the subject to find the page
            assert not r["refused"] and _cites(r, page) and said in r["answer"], r
            assert "2,000円" not in r["answer"] and "日当（" not in r["answer"], r["answer"]
        # an English follow-up that needs the carried subject is still answered from it
        sid = _chat(srv, "Is multi-factor authentication required for VPN access?")["session_id"]
        r = _chat(srv, "What about for email?", sid)
        assert not r["refused"] and "mandatory for email" in r["answer"], r


def test_a_session_can_be_read_back_for_a_page_to_show_it_again(sample_db_copy):
    """Report H2: after a reload the page showed an empty chat while the session still shaped the next answer.
    GET /sessions/{id} gives its turns (question, search, answer, cited pages), with the token like /chat."""
    with LiveServer(offline(sample_db_copy), ServeOptions(token="sesame-sesame-1234")) as srv:
        auth = {"Authorization": "Bearer sesame-sesame-1234"}
        first = post(srv.url + "/chat", json={"query": "出張の日当はいくらですか？"}, headers=auth).json()
        sid = first["session_id"]
        second = post(srv.url + "/chat", json={"query": "海外出張の場合は？", "session_id": sid}, headers=auth).json()
        assert get(srv.url + f"/sessions/{sid}").status_code == 401  # the token, as for /chat
        r = get(srv.url + f"/sessions/{sid}", headers=auth)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["session_id"] == sid and [t["query"] for t in body["turns"]] == ["出張の日当はいくらですか？",
                                                                                    "海外出張の場合は？"]
        for turn, said in zip(body["turns"], (first, second), strict=True):
            assert turn["answer"] == said["answer"] and turn["search_query"] == said["metadata"]["search_query"]
            assert turn["sources"] == [{k: s[k] for k in ("path", "page", "printed_page", "title")}
                                       for s in said["sources"]]
        for bad in ("nosuchsessionxx", "x' OR 1=1 --", "a" * 200):
            r = get(srv.url + f"/sessions/{bad}", headers=auth)
            assert r.status_code == 404 and "session" in r.json()["error"], r.text
        assert "/sessions/{session_id}" in get(srv.url + "/openapi.json").json()["paths"]
