"""`rag genqa` on a hand-made page tree: the offline generator (honest, deterministic, a mix of kinds and
languages), source handling, and the LLM generator through the real `openai` client against the scripted
OpenAI-compatible server (good, duplicate, unsupported and invalid-JSON items)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from fakeserver import openai_settings
from typer.testing import CliRunner

from ragkit import genqa
from ragkit.cli import app
from ragkit.cli.render import print_genqa_report
from ragkit.core.config import Settings
from ragkit.core.csvio import read_csv, split_checklist, split_multi
from ragkit.core.errors import RagError, UsageError
from ragkit.core.pagefile import NO_TEXT_MARKER, PageMeta, parse_page, render_page
from ragkit.core.paths import page_number
from ragkit.core.text import is_refusal, normalize

PAGES: dict[str, tuple[str, str, int, str]] = {
    # rel path: (source, section, page, body)
    "家電/fridge/仕様/page_001.md": ("corpus/家電/fridge.pdf", "仕様", 1, """# 仕様

| 項目 | 値 |
|---|---|
| 定格内容積 | 540L |
| 消費電力量 | 280kWh/年 |
| 質量 | 98kg |

本体の外形寸法は幅685mm、奥行き699mm、高さ1833mm です。
"""),
    "家電/fridge/仕様/page_002.md": ("corpus/家電/fridge.pdf", "仕様", 2, """# 製氷機の使いかた

自動製氷機は給水タンクに水を入れると約2時間で最初の氷ができます。
給水タンクは週に1回、水洗いしてください。
製氷皿は取り外して洗わないでください。
"""),
    "家電/fridge/お手入れ/page_003.md": ("corpus/家電/fridge.pdf", "お手入れ", 3, """# 庫内のお手入れ

庫内の棚は中性洗剤を薄めたぬるま湯で拭いてください。
ドアパッキンの汚れは歯ブラシで落とし、年に2回は点検してください。
"""),
    "家電/fridge/お手入れ/page_004.md": ("corpus/家電/fridge.pdf", "お手入れ", 4, NO_TEXT_MARKER + "\n"),
    "policy/security/Access Control/page_001.md": ("corpus/policy/security.pdf", "Access Control", 1, """# Access Control

Passwords must be at least 14 characters long and are rotated every 90 days.
Multi-factor authentication is required for all remote VPN connections.
Accounts are locked after 5 failed login attempts.
"""),
    "policy/security/Access Control/page_002.md": ("corpus/policy/security.pdf", "Access Control", 2, """# Privileged Accounts

Administrator accounts are reviewed by the security team every quarter.
Shared administrator credentials are stored in the approved password vault.
Emergency access must be logged and justified within 24 hours.
"""),
    "policy/security/Incident Response/page_003.md": ("corpus/policy/security.pdf", "Incident Response", 3,
                                                      """# Incident Response

Suspected incidents must be reported to the SOC hotline within 1 hour of discovery.
The incident commander classifies each incident as low, medium, high or critical severity.
Forensic images are retained for 180 days.
"""),
    "공지/notice/안내/page_001.md": ("corpus/공지/notice.pdf", "안내", 1, """# 도서관 이용 안내

도서관은 평일 오전 9시부터 오후 10시까지 운영합니다.
대출 기간은 14일이며 최대 5권까지 빌릴 수 있습니다.
연체 시 하루에 100원의 연체료가 부과됩니다.
"""),
    "공지/notice/안내/page_002.md": ("corpus/공지/notice.pdf", "안내", 2, """# 열람실 예약

열람실 좌석은 모바일 앱에서 최대 4시간 동안 예약할 수 있습니다.
예약 후 30분 이내에 입실하지 않으면 자동으로 취소됩니다.
"""),
}


def build_db(root: Path) -> Path:
    """Write the pages under root (the database folder) and return it."""
    for rel, (source, section, page, body) in PAGES.items():
        meta = PageMeta(source=source, document=rel.split("/")[1], section=section, page=page)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_page(meta, body), encoding="utf-8")
    return root


CONTRACT = ["Question", "Ground Truth", "Reference Document", "Page", "Checklist"]


def check_questions(path: Path, *, offline: bool = True) -> pd.DataFrame:
    """Every row honest: references exist and match their pages, checklists non-empty (and, offline, taken
    from the ground truth), unanswerable rows have no reference and a refusal as ground truth."""
    assert path.is_file() and path.read_bytes().startswith(b"\xef\xbb\xbf")  # utf-8-sig
    df = read_csv(path)
    assert list(df.columns[:5]) == CONTRACT and list(df.columns[5:]) == ["Kind", "Language"]
    for _, row in df.iterrows():
        refs, pages = split_multi(row["Reference Document"]), split_multi(row["Page"])
        items = split_checklist(row["Checklist"])
        assert row["Question"].strip() and row["Ground Truth"].strip() and items
        if row["Kind"] == "unanswerable":
            assert refs == [] and pages == [] and is_refusal(row["Ground Truth"])
            continue
        assert len(refs) == len(pages) >= (2 if row["Kind"] == "multi" else 1)
        assert row["Kind"] in ("single", "multi")
        for ref, page in zip(refs, pages, strict=True):
            text = Path(ref).read_text(encoding="utf-8")  # relative to the cwd, or absolute
            assert NO_TEXT_MARKER not in text
            assert page_number(ref) == int(page) == parse_page(text)[0].page
        assert 1 <= len(items) <= 6
        if offline:
            texts = [Path(r).read_text(encoding="utf-8") for r in refs]
            check_offline_row(row, items, texts)
    return df


def _whole_claim(item: str) -> bool:
    """A checkable statement, not a fragment such as "6 L", "2015 W" or "33 / 33"."""
    if re.search(r"[぀-ヿ一-龥가-힣]", item):
        return len(item) >= 6 and bool(re.search(r"[぀-ヿ一-龥가-힣]{2}", item))
    return len(re.findall(r"[A-Za-z]{2,}", item)) >= 2


def _foreign_words(question: str, lang: str) -> list[str]:
    """Words of another script than the question's language (a Japanese question holding "become insolvent")."""
    if lang == "en":
        return re.findall(r"[぀-ヿ一-龥가-힣]+", question)
    return re.findall(r"[A-Za-z][A-Za-z0-9-]*", question)


def check_offline_row(row, items: list[str], texts: list[str]) -> None:
    """An offline question: one language, its answer not in it, whole claims from the ground truth, and
    (multi-page) a claim from each of its pages."""
    q, gt = row["Question"], row["Ground Truth"]
    assert q.rstrip().endswith(("?", "？", "。")), q
    assert normalize(gt) not in normalize(q)
    corpus = normalize(" ".join(texts) + " " + " ".join(Path(r).parts[-3] for r in split_multi(row["Reference Document"])))
    for word in _foreign_words(q, row["Language"]):  # a name such as "LED" or "VPN" comes from the page itself
        assert normalize(word) in corpus, (word, q)
    for item in items:
        assert normalize(item) in normalize(gt), (item, gt)
        assert _whole_claim(item), (item, q)
    if row["Kind"] == "multi":
        from ragkit.core.text import tokenize

        for text in texts:
            page_tokens = set(tokenize(text))
            assert any(len(set(tokenize(i)) & page_tokens) >= 0.6 * len(set(tokenize(i))) for i in items), \
                (items, text[:200])


def offline_settings(**kw) -> Settings:
    values = dict(db=Path("database"), results=Path("results"), provider="offline", cache=False)
    values.update(kw)
    return Settings(**values)


# -- offline generator --------------------------------------------------------------------------------
def test_offline_mix_of_kinds_and_languages_all_honest():
    db = build_db(Path("database"))
    report = genqa.generate_questions(db, offline_settings(), max_questions=12, progress=False)
    assert report.errors == [] and report.path is not None
    assert re.fullmatch(r"database_questions_\d{8}_\d{6}\.csv", report.path.name)
    assert report.path.parent == Path("results")
    df = check_questions(report.path)
    assert len(df) == len(report.questions) == 12
    assert set(df["Kind"]) == {"single", "multi", "unanswerable"}
    assert {"ja", "en", "ko"} <= set(df["Language"])
    # the language of a question is the language of its page
    for _, row in df[df["Kind"] != "unanswerable"].iterrows():
        assert row["Language"] == genqa.detect_lang(Path(split_multi(row["Reference Document"])[0]).read_text())
    refs = {r for cell in df["Reference Document"] for r in split_multi(cell)}
    assert all(r.startswith("database/") for r in refs)  # Reference Document form: relative to the cwd
    assert "database/家電/fridge/お手入れ/page_004.md" not in refs  # no text layer: never asked about
    assert len({Path(r).parts[1] for r in refs}) == 3  # spread over every document
    # multi-page questions name pages of one document
    for cell in df[df["Kind"] == "multi"]["Reference Document"]:
        assert len({Path(r).parts[1] for r in split_multi(cell)}) == 1
    # the table row "定格内容積 | 540L" became a question whose answer is the cell
    row = df[df["Question"].str.contains("定格内容積")]
    assert not row.empty and "540L" in row.iloc[0]["Ground Truth"] and "540L" in row.iloc[0]["Checklist"]
    assert "540L" not in row.iloc[0]["Question"]


def test_offline_is_deterministic_and_never_overwrites():
    db = build_db(Path("database"))
    a = genqa.generate_questions(db, offline_settings(), max_questions=10, progress=False)
    b = genqa.generate_questions(db, offline_settings(), max_questions=10, progress=False)
    assert a.path != b.path and a.path.exists() and b.path.exists()
    pd.testing.assert_frame_equal(read_csv(a.path), read_csv(b.path))


def test_max_and_per_page_are_respected():
    db = build_db(Path("database"))
    r = genqa.generate_questions(db, offline_settings(), max_questions=3, per_page=2, progress=False)
    assert len(r.questions) == 3
    counts = r.counts()
    assert counts["unanswerable"] == 1 and counts["single"] >= 1
    singles = [q for q in r.questions if q.kind == "single"]
    per_page: dict[str, int] = {}
    for q in singles:
        per_page[q.refs[0]] = per_page.get(q.refs[0], 0) + 1
    assert max(per_page.values()) <= 2
    one = genqa.generate_questions(db, offline_settings(), max_questions=1, progress=False)
    assert [q.kind for q in one.questions] == ["single"]


def test_subfolder_source_uses_only_its_pages():
    build_db(Path("database"))
    r = genqa.generate_questions(Path("database/policy"), offline_settings(), max_questions=6, progress=False)
    df = check_questions(r.path)
    assert r.path.name.startswith("policy_questions_")
    refs = [x for cell in df["Reference Document"] for x in split_multi(cell)]
    assert refs and all(x.startswith("database/policy/security/") for x in refs)
    assert set(df[df["Kind"] != "unanswerable"]["Language"]) == {"en"}
    assert set(df[df["Kind"] == "unanswerable"]["Language"]) == {"en"}


def test_unanswerable_topics_present_in_the_corpus_are_not_used(monkeypatch):
    db = build_db(Path("database"))
    # a page outside the source folder does talk about Brazilian warranty: that topic is absent no more
    # (found through the index, since the generator only read the pages of database/policy)
    extra = db / "家電/fridge/保証/page_005.md"
    extra.parent.mkdir(parents=True)
    extra.write_text(render_page(PageMeta(source="corpus/家電/fridge.pdf", document="fridge",
                                          section="保証", page=5),
                                 "# Warranty\nProducts sold in Brazil carry a warranty of 2 years from delivery "
                                 "to the customer."), encoding="utf-8")
    assert "policy" in genqa.domain_kinds(genqa.resolve_source(Path("database/policy"), offline_settings())[1])
    for kind in list(genqa.DOMAIN_TOPICS):
        monkeypatch.setitem(genqa.DOMAIN_TOPICS, kind, {"en": [
            ("What is the warranty period for this product when it is used in Brazil?", ["warranty", "brazil"]),
            ("Which cryptocurrency wallets are approved for paying salaries?", ["cryptocurrency"]),
        ]} if kind == "policy" else {})
    r = genqa.generate_questions(Path("database/policy"), offline_settings(), max_questions=14, progress=False)
    unans = [q.question for q in r.questions if q.kind == "unanswerable"]
    assert unans == ["Which cryptocurrency wallets are approved for paying salaries?"]
    assert r.dropped["present"] == 1


def test_near_duplicates_are_detected():
    assert genqa.is_duplicate("What is the rated capacity of the fridge?", ["What is the rated capacity?"])
    assert genqa.is_duplicate("定格内容積は何リットルですか？", ["定格内容積は何リットル？"])
    assert not genqa.is_duplicate("How long is the loan period?", ["What are the opening hours?"])
    assert not genqa.is_duplicate("製氷機の使いかたは？", ["庫内のお手入れの方法は？"])


def test_numbers_and_terms_extraction():
    # "5 failed": a verb is no unit; a bare one-digit number (list numbering) is no key point
    assert genqa.numbers_in("Passwords must be at least 14 characters long and rotated every 90 days; "
                            "5 failed attempts.") == ["14 characters", "90 days"]
    assert genqa.numbers_in("出張終了後14日以内に約2時間、幅650mm") == ["14日", "2時間", "650mm"]
    assert "6호선" in genqa.numbers_in("지하철 6호선 하늘역 2번 출구")
    terms = genqa.terms_in("自動製氷機は給水タンクに水を入れると約2時間で最初の氷ができます。")
    assert "自動製氷機" in terms and "給水タンク" in terms and "最初" not in terms
    ko = genqa.terms_in("도서관은 평일 오전 9시부터 운영합니다.")
    assert "도서관" in ko and "시부터" not in ko and not any(t.endswith("니다") for t in ko)


def test_bad_sources_are_one_line_errors(tmp_path):
    build_db(Path("database"))
    with pytest.raises(RagError, match="no such file or folder"):
        genqa.generate_questions(Path("nowhere"), offline_settings(), progress=False)
    Path("notes.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(RagError, match="not a database folder or a PDF/DOCX/PPTX"):
        genqa.generate_questions(Path("notes.txt"), offline_settings(), progress=False)
    docs = Path("docs")
    docs.mkdir()
    (docs / "manual.pdf").write_bytes(b"%PDF-1.4")
    with pytest.raises(RagError, match=r"no page files .*run `rag ingest docs` first"):
        genqa.generate_questions(docs, offline_settings(), progress=False)
    with pytest.raises(UsageError, match="--per-page"):
        genqa.generate_questions(Path("database"), offline_settings(), per_page=0, progress=False)
    with pytest.raises(UsageError, match="--max"):
        genqa.generate_questions(Path("database"), offline_settings(), max_questions=0, progress=False)
    assert not Path("results").exists()  # nothing written on bad input


def test_cli_genqa_offline_prints_kinds_and_path():
    build_db(Path("database"))
    result = CliRunner().invoke(app, ["genqa", "database", "--provider", "offline", "--max", "8"])
    assert result.exit_code == 0, result.output
    assert "unanswerable" in result.output and "offline" in result.output
    written = sorted(Path("results").glob("database_questions_*.csv"))
    assert len(written) == 1 and written[0].name in result.output.replace("\n", "")
    check_questions(written[0])
    bad = CliRunner().invoke(app, ["genqa", "database", "--provider", "offline", "--per-page", "0"])
    assert bad.exit_code == 2


def test_lang_keeps_the_pages_written_in_it_and_unknown_codes_are_usage_errors():
    db = build_db(Path("database"))
    r = genqa.generate_questions(db, offline_settings(), max_questions=6, lang="EN", progress=False)
    assert r.questions and all(q.lang == "en" for q in r.questions)
    assert all(ref.startswith("policy/") for q in r.questions for ref in q.refs)  # never a translated template
    assert any("left out" in n for n in r.notes) and "left out" in printed(r)
    # offline, a language no page is written in: said plainly, nothing written
    with pytest.raises(RagError, match="no page is written in English"):
        genqa.generate_questions(db / "家電", offline_settings(), max_questions=5, lang="en", progress=False)
    bad = CliRunner().invoke(app, ["genqa", "database", "--provider", "offline", "--lang", "xx"])
    assert bad.exit_code == 2 and "--lang 'xx' is not supported" in bad.output and "Traceback" not in bad.output
    fr = CliRunner().invoke(app, ["genqa", "database", "--provider", "offline", "--lang", "fr"])
    assert fr.exit_code == 2 and "offline questions are written in en, ja, ko" in fr.output
    assert list(Path("results").iterdir()) == [r.path]  # only the first run wrote a file
    with pytest.raises(UsageError):
        genqa.check_lang("english", offline=False)
    assert genqa.check_lang(" FR ", offline=False) == "fr"


def test_offline_questions_ask_for_one_fact_in_the_words_of_the_page():
    build_db(Path("database"))
    r = genqa.generate_questions(Path("database"), offline_settings(), max_questions=12, per_page=3, progress=False)
    by_answer = {q.ground_truth: q for q in r.questions if q.kind == "single"}
    # a figure with its subject: the question keeps the page's words and asks for the figure
    q = by_answer.get("Passwords must be at least 14 characters long and are rotated every 90 days.")
    assert q is not None and "how many characters" in q.question and "14" not in q.question
    assert q.checklist == ["Passwords must be at least 14 characters long and are rotated every 90 days"]
    ja = [q for q in r.questions if q.lang == "ja" and q.kind == "single"]
    assert any(re.search(r"何時間|何回|何年|何ミリ", q.question) and q.question.endswith("？") for q in ja)
    ko = [q for q in r.questions if q.lang == "ko" and q.kind == "single"]
    assert any(re.search(r"몇 |며칠|얼마", q.question) and q.question.endswith("니까?") for q in ko)
    # no templated question about "what the document states"
    assert not any("document state" in q.question or "どのように記載" in q.question for q in r.questions)


def test_facts_from_tables_and_sentences():
    from ragkit.genqa.common import Context

    page = genqa.PageInfo(rel="m/manual/s/page_001.md", page=1, doc="m", doc_title="manual", section="s", lang="en",
                          body="""# Water units

| Unit | Capacity | Flow |
|---|---|---|
| Unit 1 | 4 L | 2 L/min |
| Unit 2 | 6 L | 3 L/min |

The boiler heats the water to 95 °C within 12 minutes of switching on.
""")
    ctx = Context(db=Path("."), pages=[page], settings=offline_settings(), lang=None, per_page=3, seed=1, progress=False)
    facts = {f.question: f for f in genqa.page_facts(page, ctx, set())}
    assert facts["What is the Capacity of Unit 2?"].checklist == ["Unit 2, Capacity: 6 L"]
    assert "6 L" not in "What is the Capacity of Unit 2?"
    temp = [f for f in facts.values() if "what temperature" in f.question or "how many minutes" in f.question]
    assert temp and all(_whole_claim(i) for f in temp for i in f.checklist)


# -- LLM generator through the scripted OpenAI-compatible server ---------------------------------------
LLM_PAGES = {
    # page number -> (section, body); one English document, five pages
    1: ("Access", "# Passwords\nPasswords must be at least 14 characters long. ALPHA-PAGE."),
    2: ("Access", "# Remote access\nRemote access requires the company VPN and MFA. BRAVO-PAGE."),
    3: ("Incidents", "# Reporting\nReport incidents to the SOC within 1 hour. CHARLIE-PAGE."),
    4: ("Incidents", "# Forensics\nForensic images are kept for 180 days by the SOC team. DELTA-PAGE."),
    5: ("Retention", "# Logs\nSecurity logs are retained for 13 months in the archive. ECHO-PAGE."),
}


def build_llm_db(root: Path) -> Path:
    for num, (section, body) in LLM_PAGES.items():
        path = root / "policy" / "security" / section / f"page_{num:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        filler = " Every employee and contractor of the company follows this rule without exception."
        path.write_text(render_page(PageMeta(source="docs/security.pdf", document="Security Policy",
                                             section=section, page=num), body + filler), encoding="utf-8")
    return root


def _item(question: str, answer: str, pages: list[int], checklist: list[str] | None = None) -> dict:
    return {"question": question, "answer": answer, "checklist": checklist or [f"{answer} (a)", f"{answer} (b)",
                                                                               f"{answer} (c)"],
            "pages": pages}


def _reply(obj) -> dict:
    return {"content": json.dumps(obj, ensure_ascii=False)}


def llm_responder(body: dict) -> dict:
    """Answers by what is asked, so the order of parallel requests does not matter."""
    system = body["messages"][0]["content"]
    user = body["messages"][-1]["content"] if body["messages"][-1]["role"] == "user" else ""
    first_user = body["messages"][1]["content"]
    if system.startswith("You check"):  # verification: the question marked UNSUPPORTED is not supported
        if "UNSUPPORTED" in user:
            return _reply({"supported": False, "unsupported_items": ["the 30-character rule"]})
        return _reply({"supported": True, "unsupported_items": []})
    if system.startswith("You write test questions"):  # unanswerable: one topic present, one absent
        return _reply({"items": [
            {"question": "How long are forensic images kept in the cloud archive?", "key_terms": ["forensic"]},
            {"question": "What is the travel allowance for visiting the Osaka office?",
             "key_terms": ["travel allowance", "Osaka"]},
        ]})
    pages = [int(n) for n in re.findall(r"=== Page (\d+) ", first_user)]
    if len(pages) > 1:  # a page group: one question over both pages
        return _reply({"items": [_item(f"How do pages {pages[0]} and {pages[1]} relate?",
                                       f"Combined answer {pages[0]}-{pages[1]}", pages)]})
    if "ALPHA-PAGE" in first_user:  # a good item and a near-duplicate of it
        return _reply({"items": [_item("What is the minimum password length?", "14 characters", [1]),
                                 _item("What is the minimum length of a password?", "14 characters", [1])]})
    if "BRAVO-PAGE" in first_user:  # an item the pages do not support, and a good one
        return _reply({"items": [_item("UNSUPPORTED: how long must a VPN password be?", "30 characters", [2]),
                                 _item("What does remote access require?", "The VPN and MFA", [2])]})
    if "CHARLIE-PAGE" in first_user:  # never valid JSON, however often asked
        return {"content": "Sure! Here are your questions: {question: oops"}
    if "DELTA-PAGE" in first_user:
        return _reply({"items": [_item("How long are forensic images kept?", "180 days", [4, 99])]})
    if "ECHO-PAGE" in first_user:
        return _reply({"items": [_item("How long are security logs retained?", "13 months", ["5"])]})
    return {"status": 500}


def test_llm_generator_drops_duplicates_and_unsupported_and_skips_invalid_json(scripted_server):
    db = build_llm_db(Path("database"))
    scripted_server.set_responder(llm_responder)
    settings = openai_settings(scripted_server, db=db, results=Path("results"), workers=3)
    report = genqa.generate_questions(db, settings, per_page=2, max_questions=20, progress=False)

    assert report.errors == [], report.errors
    singles = sorted(q.question for q in report.questions if q.kind == "single")
    assert singles == ["How long are forensic images kept?", "How long are security logs retained?",
                       "What does remote access require?", "What is the minimum password length?"]
    assert report.dropped["duplicate"] == 1  # "minimum length of a password"
    assert report.dropped["unsupported"] == 1  # verification said no
    # the page that never gave valid JSON: 3 attempts, then skipped and reported, the run went on
    charlie = "database/policy/security/Incidents/page_003.md"
    assert [w for w, _ in report.skipped] == [charlie]
    assert "no valid JSON" in report.skipped[0][1]
    asked_charlie = [r for r in scripted_server.requests
                     if "CHARLIE-PAGE" in r["messages"][1]["content"] and r["messages"][1]["content"].count(
                         "=== Page") == 1 and r["messages"][0]["content"].startswith("You write evaluation")]
    assert len(asked_charlie) == 3
    # page references follow the model's pages, limited to the pages it was shown
    by_q = {q.question: q for q in report.questions}
    assert by_q["How long are forensic images kept?"].pages == [4]
    assert by_q["How long are security logs retained?"].refs == ["policy/security/Retention/page_005.md"]
    multi = [q for q in report.questions if q.kind == "multi"]
    assert multi and all(len(q.refs) == 2 and q.pages == sorted(q.pages) for q in multi)
    # unanswerable: the topic the corpus does cover ("forensic") is dropped after the lexical check
    unans = [q for q in report.questions if q.kind == "unanswerable"]
    assert [q.question for q in unans] == ["What is the travel allowance for visiting the Osaka office?"]
    assert report.dropped["present"] == 1 and unans[0].refs == [] and is_refusal(unans[0].ground_truth)
    # one verification call per kept or dropped answerable question, each showing the page text
    verifications = [r for r in scripted_server.requests if r["messages"][0]["content"].startswith("You check")]
    assert len(verifications) == 5 + len(multi)
    assert all("=== Page" in r["messages"][1]["content"] for r in verifications)
    # tokens and cost are counted (gpt-4o-mini has a price)
    assert report.usage.input_tokens > 0 and report.usage.output_tokens > 0 and report.usage.cost_usd > 0
    df = check_questions(report.path, offline=False)
    assert len(df) == len(report.questions)
    row = df[df["Question"] == "What is the minimum password length?"].iloc[0]
    assert split_checklist(row["Checklist"]) == ["14 characters (a)", "14 characters (b)", "14 characters (c)"]
    assert row["Reference Document"] == "database/policy/security/Access/page_001.md" and row["Page"] == "1"
    assert "sk-test-SECRET-KEY" not in report.path.read_text(encoding="utf-8-sig")
    shown = printed(report)
    assert "skipped 1" in shown and charlie in shown and "no valid JSON" in shown
    assert f"tokens in {report.usage.input_tokens}" in shown and "cost $" in shown
    assert str(report.path) in shown.replace("\n", "")


def printed(report) -> str:
    from rich.console import Console

    console = Console(record=True, width=200)
    print_genqa_report(report, console)
    return console.export_text()


def test_llm_language_follows_the_page_unless_forced(scripted_server):
    db = Path("database")
    page = db / "家電" / "fridge" / "仕様" / "page_001.md"
    page.parent.mkdir(parents=True)
    page.write_text(render_page(PageMeta(source="fridge.pdf", document="冷蔵庫", section="仕様", page=1),
                                "# 仕様\n定格内容積は540Lです。年間消費電力量は280kWhです。製氷皿は週に1回洗ってください。"),
                    encoding="utf-8")
    scripted_server.set_responder(lambda body: _reply({"items": []}) if not body["messages"][0]["content"]
                                  .startswith("You check") else _reply({"supported": True, "unsupported_items": []}))
    settings = openai_settings(scripted_server, db=db, results=Path("results"), workers=1, model="my-local-llama")
    report = genqa.generate_questions(db, settings, max_questions=1, progress=False)
    assert "in Japanese" in scripted_server.requests[0]["messages"][1]["content"]
    # the model gave no questions: nothing written, said so; its cost is unknown, not zero
    assert report.questions == [] and report.errors and report.usage.cost_usd is None
    assert "cost unknown" in printed(report) and "no questions file written" in printed(report)
    genqa.generate_questions(db, settings, max_questions=1, lang="ko", progress=False)
    assert "in Korean" in scripted_server.requests[-1]["messages"][1]["content"]
    # asked for French, a model may answer in Japanese (the page's language): that question is dropped
    scripted_server.set_responder(lambda body: _reply({"items": [
        _item("定格内容積は何リットルですか？", "540L", [1], ["定格内容積は540Lです"]),
        _item("Quel est le volume utile du réfrigérateur ?", "540 L", [1], ["Le volume utile est de 540 L"]),
    ]}) if not body["messages"][0]["content"].startswith("You check") else _reply({"supported": True,
                                                                                    "unsupported_items": []}))
    fr = genqa.generate_questions(db, settings, max_questions=1, per_page=2, lang="fr", progress=False)
    assert [q.question for q in fr.questions] == ["Quel est le volume utile du réfrigérateur ?"]
    assert fr.dropped["language"] == 1 and "not written in the language asked for" in printed(fr)


def test_llm_provider_down_is_an_error_not_a_crash(scripted_server):
    db = build_llm_db(Path("database"))
    scripted_server.set_responder(lambda body: {"status": 500})
    settings = openai_settings(scripted_server, db=db, results=Path("results"), workers=1)
    report = genqa.generate_questions(db, settings, max_questions=10, progress=False)
    assert report.questions == [] and report.path is None and not Path("results").exists()
    assert any("provider failures in a row" in e for e in report.errors)
    assert any("HTTP 500" in e for e in report.errors)
    # three pages failed one after another (each after its retries and format fallbacks), then it stopped
    asked = {re.search(r"=== Page (\d+)", r["messages"][-1]["content"]).group(1) for r in scripted_server.requests}
    assert len(asked) == genqa.MAX_CONSECUTIVE_FAILURES < len(LLM_PAGES)
    assert len(report.skipped) == genqa.MAX_CONSECUTIVE_FAILURES
    assert "sk-test-SECRET-KEY" not in " ".join(report.errors)


def test_sampling_spreads_over_documents_and_sections_and_groups_are_related():
    import random

    def page(doc, section, n):
        return genqa.PageInfo(rel=f"{doc}/{section}/page_{n:03d}.md", page=n, doc=doc, doc_title=doc,
                              section=section, body="x", lang="en")

    pages = [page("a", "s1", n) for n in (1, 2, 3)] + [page("a", "s2", n) for n in (4, 5)] + \
        [page("b", "t1", n) for n in range(1, 7)]
    order = genqa.sample_pages(pages, random.Random(1))
    assert sorted(p.rel for p in order) == sorted(p.rel for p in pages)  # every page once
    assert {order[0].doc, order[1].doc} == {"a", "b"}  # documents alternate
    first_a = [p.section for p in order if p.doc == "a"][:2]
    assert set(first_a) == {"s1", "s2"}  # and inside a document, sections do
    assert [p.rel for p in genqa.sample_pages(pages, random.Random(1))] == [p.rel for p in order]
    for size in (2, 3):
        groups = genqa.related_groups(pages, random.Random(2), size=size)
        assert groups
        for g in groups:
            assert 2 <= len(g) <= size and len({p.doc for p in g}) == 1
            assert len({p.rel for p in g}) == len(g)
        used = [p.rel for g in groups for p in g]
        assert len(used) == len(set(used))  # a page is in one group at most
    triples = [g for g in genqa.related_groups(pages, random.Random(2), size=3) if len(g) == 3]
    assert triples and all([p.page for p in g] == list(range(g[0].page, g[0].page + 3)) and
                           len({p.section for p in g}) == 1 for g in triples)


def test_unusable_sources_exit_1_with_one_line():
    empty = Path("database/docs/empty/s")
    empty.mkdir(parents=True)
    (empty / "page_001.md").write_text(render_page(PageMeta(source="e.pdf", page=1), "# Cover"), encoding="utf-8")
    (empty / "page_002.md").write_text(render_page(PageMeta(source="e.pdf", page=2), NO_TEXT_MARKER),
                                       encoding="utf-8")
    result = CliRunner().invoke(app, ["genqa", "database", "--provider", "offline"])
    assert result.exit_code == 1 and "no pages with text" in result.output
    assert "Traceback" not in result.output
    Path("broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    result = CliRunner().invoke(app, ["genqa", "broken.pdf", "--provider", "offline"])
    assert result.exit_code == 1 and "broken.pdf: ingest failed" in result.output
    assert "Traceback" not in result.output and not Path("results").exists()
