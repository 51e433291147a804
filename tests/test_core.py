"""Shared helpers: text normalisation, safe paths, CSV encodings and formula escaping, settings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ragkit.core import csvio, paths, text
from ragkit.core.config import load_settings
from ragkit.core.errors import PathEscapeError, RagError, UsageError


def test_cjk_line_break_join_and_tokens():
    assert text.join_cjk_breaks("設定を削除してく\nださい") == "設定を削除してください"
    assert text.join_cjk_breaks("hello\nworld") == "hello\nworld"
    toks = text.tokenize("接続を削除する")
    assert "削除" in toks and "接続" in toks
    assert "파일" in text.tokenize("파일을 삭제합니다")
    assert text.tokenize("The Quick fox", drop_stopwords=True) == ["quick", "fox"]
    assert text.tokenize("ＡＢＣ１２３") == ["abc123"]  # NFKC full-width -> ASCII



def test_a_labels_space_stays_where_other_gaps_between_han_and_kana_go():
    j = text.join_cjk_breaks
    assert j("第2章 勤務時間と休憩") == "第2章 勤務時間と休憩"
    assert j("（基準）第二条\u3000法第三十七条の二") == "（基準）第二条 法第三十七条の二"
    assert j("第３条の２  従業員は") == "第３条の２ 従業員は"
    assert j("附則 この規則は") == "附則 この規則は"
    assert j("法第三条 の規定") == "法第三条の規定"  # a label inside a word: no label
    assert j("第 二 章 総 則") == "第二章総則"  # a space between every character says nothing
    assert j("第2章\n勤務時間、休憩時\n間") == "第2章勤務時間、休憩時間"  # line breaks are joined as before
    # a list item's number at a line's start (law-style lists): its space stays, and the line break before it
    assert j("次のとおり\n一 都道府県知事\n十二 市町村長\nイ 事業所得") == "次のとおり\n一 都道府県知事\n十二 市町村長\nイ 事業所得"
    assert j("休 憩 時 間 は 一 斉 に") == "休憩時間は一斉に" and j("一\n都道府県") == "一都道府県"
    assert j("の条件は 一 都道府県") == "の条件は一都道府県"  # not at a line's start: joined as before
    assert text.normalize("一 都道府県") == text.normalize("一都道府県")
    # comparisons and search terms see one form, with the space or without
    assert text.normalize("第2章 勤務時間") == text.normalize("第2章勤務時間") == "第2章勤務時間"
    assert text.tokenize("第2章 勤務時間") == text.tokenize("第2章勤務時間")

def test_detect_lang_and_refusal():
    assert text.detect_lang("冷蔵庫の温度を設定するには？") == "ja"
    assert text.detect_lang("휴학은 어떻게 신청합니까?") == "ko"
    assert text.detect_lang("How do I reset it?") == "en"
    assert text.is_refusal(text.refusal_text("ja"))
    assert not text.is_refusal("The temperature is 3 degrees.")


@pytest.mark.parametrize("answer", [
    *(text.refusal_text(lang) for lang in ("en", "ja", "ko", "zh")),
    "I cannot answer this from the documents.\n(offline extractive answer)\nThe question points at one document.",
    "(offline extractive answer)\nI cannot answer this from the documents.",  # a notice ahead of it is an aside
    "この質問には資料から\n回答できません。", "**I cannot answer this from the documents.**", "", "  ",
    "文書からはお答えできません。", "The documents do not contain this information.",
])
def test_a_refusal_leads_with_it(answer):
    assert text.is_refusal(answer)


@pytest.mark.parametrize("answer", [
    "Passwords must be at least 12 characters. I cannot answer the second part from the documents.",
    "パスワードは12文字以上です。2つ目の質問には回答できません。",
    "비밀번호는 12자 이상입니다. 두 번째 질문에는 답할 수 없습니다.",
    # the plain-words refusal is a refusal only as the whole sentence
    "The documents do not contain this information directly, but page 3 says passwords have 12 characters.",
])
def test_an_answer_that_declines_one_part_is_no_refusal(answer):
    assert not text.is_refusal(answer)


@pytest.mark.parametrize("raw, sentences", [
    ("Revenues for the quarter ended Mar. 31, 2016 were up. Costs fell.",
     ["Revenues for the quarter ended Mar. 31, 2016 were up.", "Costs fell."]),
    ("Paid in U.S. dollars, e.g. the fee. See Fig. 3 and No. 5. Item 7. Management",
     ["Paid in U.S. dollars, e.g. the fee.", "See Fig. 3 and No. 5.", "Item 7.", "Management"]),
    ("Sales rose in 2015. 2016 was flat.\nMar.\n31", ["Sales rose in 2015.", "2016 was flat.", "Mar.", "31"]),
    ("Report it within 2 hours, ext. 4455. Call Tel. 0120 or see p. 4, approx. 5 min. Done.",
     ["Report it within 2 hours, ext. 4455.", "Call Tel. 0120 or see p. 4, approx. 5 min.", "Done."]),
    ("これは文。次の文！終わり", ["これは文。", "次の文！", "終わり"]),
    ("化粧品は、医薬品の成分（別表第2 から第4 に掲げる成分を除く。）を配合してはならない。次の文。閉じない（括弧。次。",
     ["化粧品は、医薬品の成分（別表第2 から第4 に掲げる成分を除く。）を配合してはならない。", "次の文。", "閉じない（括弧。",
      "次。"]),
])
def test_a_period_after_an_abbreviation_or_before_a_lower_case_word_ends_no_sentence(raw, sentences):
    assert text.split_sentences(raw) == sentences


@pytest.mark.parametrize(
    "raw,expected",
    [("a/b", "a b"), ("x" * 300, "x" * 80), ("word " * 40, ("word " * 16).strip()),
     ("ab " + "y" * 100, "ab " + "y" * 77), ("CON", "_CON"), ("..", "untitled"), ("冷蔵庫\x00", "冷蔵庫"),
     ('ta<b>le:"q"|?*', "ta b le q")],
)
def test_sanitize_name(raw, expected):
    assert paths.sanitize_name(raw) == expected


@pytest.mark.parametrize("raw,expected", [
    ("\u202e fdp.exe", "fdp.exe"), ("\u202eevil\u202c", "evil"), ("取扱\u2066説明書\u2069", "取扱説明書"),
    ("a\u200bb\u200c\u200d\u200e\u200f", "ab"), ("\ufeffnotes", "notes"), ("\u200b", "untitled"),
    (".\u0301.", "untitled"), ("\u0301x", "x"), ("x \u0301y", "x y"),
    ("e\u0301te\u0301", "été"), ("か\u3099", "が"),  # a mark on a letter is part of it (NFC composes it)
    # Hangul fillers are letters that draw nothing; composed syllables and jamo stay
    ("\u3164", "untitled"), ("휴가\u3164규정", "휴가규정"), ("\uffa0공지\u115f\u1160", "공지"), ("ᄀ한ㄱ", "ᄀ한ㄱ"),
])
def test_sanitize_name_drops_invisible_characters(raw, expected):
    """Report s56-sec L3: bidi controls, zero-width characters, the BOM and lone combining marks survived, so
    an upload named `\u202e fdp.exe.pdf` became a document shown as `exe.pdf`."""
    assert paths.sanitize_name(raw) == expected


def test_resolve_in_db_refuses_escapes(tmp_path):
    db = tmp_path / "db"
    (db / "a").mkdir(parents=True)
    (db / "a" / "page_001.md").write_text("x")
    outside = tmp_path / "secret.txt"
    outside.write_text("s")
    (db / "link").symlink_to(outside)
    assert paths.resolve_in_db(db, "a/page_001.md") == (db / "a" / "page_001.md").resolve()
    for bad in ["../secret.txt", "/etc/passwd", "a/../../secret.txt", "link", "a\\page_001.md", "a\x00b",
                "C:/x"]:
        with pytest.raises(PathEscapeError):
            paths.resolve_in_db(db, bad)


def test_page_listings_leave_out_symlinks_that_lead_out(tmp_path):
    """A page file that is a symlink to a file outside the database is not a page of it: neither listed
    (iter_pages: the OpenSearch sync, the run record's fingerprint), nor stat'ed for the cluster's behind-check
    (page_stats), as the built-in index's scan already left it out; a symlink to a page inside stays a page."""
    from ragkit.core.provenance import database_state
    from ragkit.search.opensearch.synced import page_stats
    from ragkit.search.persistence import scan_pages

    db = tmp_path / "db"
    (db / "a").mkdir(parents=True)
    (db / "a" / "page_001.md").write_text("inside", encoding="utf-8")
    outside = tmp_path / "secret.md"
    outside.write_text("confidential", encoding="utf-8")
    before = database_state(db).sha256
    (db / "a" / "page_002.md").symlink_to(outside)
    (db / "a" / "page_003.md").symlink_to(db / "a" / "page_001.md")
    expected = ["a/page_001.md", "a/page_003.md"]
    assert paths.iter_pages(db) == expected
    assert paths.iter_pages(db, "a") == expected
    assert sorted(page_stats(db)) == expected == sorted(page_stats(db, "a"))
    assert page_stats(db, "a/page_002.md") == {}
    assert [rel for rel, _, _ in scan_pages(db)] == expected == [rel for rel, _, _ in scan_pages(db, under="a")]
    outside.write_text("changed", encoding="utf-8")
    (db / "a" / "page_003.md").unlink()
    assert database_state(db).sha256 == before  # the outside file's content is never read


def test_page_filename_widths():
    assert paths.page_filename(8, 20) == "page_008.md"
    assert paths.page_filename(8, 1200) == "page_0008.md"
    assert paths.page_number("x/page_0123.md") == 123


def test_csv_encodings_and_formula_escape(tmp_path):
    df = pd.DataFrame({"Question": ["=1+1", "冷蔵庫の温度は？", "-5 is fine", "-x"], "Page": ["1", "2", "3", "4"]})
    out = csvio.write_csv(df, tmp_path / "o.csv")
    raw = out.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    assert "'=1+1" in raw.decode("utf-8-sig") and "'-x" in raw.decode("utf-8-sig")
    back = csvio.read_csv(out)
    assert list(back["Question"]) == list(df["Question"])
    with pytest.raises(RagError, match="refusing to overwrite"):
        csvio.write_csv(df, out)
    sj = tmp_path / "sj.csv"
    sj.write_bytes("Question,Page\n冷蔵庫の温度は？,1\n".encode("cp932"))
    assert csvio.read_csv(sj)["Question"][0] == "冷蔵庫の温度は？"
    with pytest.raises(RagError, match="missing column 'Question'; columns found: 'Frage'"):
        bad = tmp_path / "bad.csv"
        bad.write_text("Frage\nx\n")
        csvio.read_csv(bad, required=("Question",))


def test_timestamped_paths_never_collide(tmp_path):
    a = csvio.timestamped_path(tmp_path, "qs")
    a.write_text("x")
    b = csvio.timestamped_path(tmp_path, "qs", now=None)
    assert a != b and a.name.startswith("qs_results_")
    assert csvio.summary_path_for(a).name.endswith("_summary.csv")


def test_settings_precedence(monkeypatch, tmp_path):
    s = load_settings()
    assert s.provider == "offline" and "no OPENAI_API_KEY" in s.provider_reason
    Path(".env").write_text("OPENAI_API_KEY=sk-from-dotenv\nRAG_MODEL=from-dotenv\n")
    s = load_settings()
    assert s.provider == "openai" and s.model == "from-dotenv"
    assert "sk-from-dotenv" not in repr(s)
    monkeypatch.setenv("RAG_MODEL", "from-env")
    assert load_settings().model == "from-env"
    assert load_settings(model="from-flag").model == "from-flag"
    # the judge is the answering model unless named (as the README's local-model recipe relies on)
    assert load_settings().judge_model == "from-env"
    monkeypatch.setenv("RAG_JUDGE_MODEL", "judge-env")
    assert load_settings().judge_model == "judge-env"
    assert load_settings(judge_model="judge-flag").judge_model == "judge-flag"
    with pytest.raises(UsageError):
        load_settings(provider="bogus")


def test_atomic_write_gives_normal_permissions(tmp_path):
    import os
    import stat

    mask = os.umask(0o022)
    os.umask(mask)
    target = tmp_path / "out.csv"
    paths.atomic_write_text(target, "a,b\r\n", encoding="utf-8-sig")
    assert target.read_bytes() == b"\xef\xbb\xbfa,b\r\n"  # BOM kept, line endings untouched
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask


def test_one_line_collapses_whitespace_and_cuts_with_an_ellipsis():
    assert text.one_line("a\n b\t\tc ") == "a b c"
    assert text.one_line("x" * 10, 5) == "xxxx…"
    assert text.one_line("short", 5) == "short"
    assert text.one_line(ValueError("bad\nthing")) == "bad thing"
