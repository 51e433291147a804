"""Input CSVs are never read by a guess that can change their text (issue 33): the encodings read unasked, the
ones refused by name with the `--encoding` that reads them, rows that would shift their cells, NUL, folders."""

from __future__ import annotations

import codecs
import csv
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.csvio import read_csv
from ragkit.core.errors import RagError

ROWS = [["Question", "Ground Truth"], ["Wie groß ist die Größe?", "Größe 5"]]
JA = [["Question", "Ground Truth"], ["パスワードは何文字以上ですか？", "十二文字以上です。"]]
JA_HEADER = [["質問", "回答"], ["パスワードは何文字以上ですか？", "十二文字以上です。"]]
CP1252_ROWS = [["Question", "Ground Truth"], ["What is a “smart” quote – or €?", "Typographic"]]
KO = [["Question", "Ground Truth", "담당자 메모"], ["연차는 며칠인가요?", "연차 15일을 부여한다.", "확인 완료"]]
DEV = Path(__file__).resolve().parents[1] / "benchmarks" / "data"


def text(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    return buf.getvalue()


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def run(*args: str):
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


# ------------------------------------------------------------------------------------------------ encodings

READ_UNASKED = [
    ("utf-8", text(ROWS).encode("utf-8"), ROWS),
    ("utf-8 with BOM", text(ROWS).encode("utf-8-sig"), ROWS),
    ("utf-16 with BOM", text(JA).encode("utf-16"), JA),
    ("utf-32 with BOM", text(JA).encode("utf-32"), JA),
    ("utf-16le without BOM, ASCII header", text(JA).encode("utf-16-le"), JA),
    ("utf-16be without BOM, ASCII header", text(JA).encode("utf-16-be"), JA),
    ("utf-32le without BOM, ASCII header", text(JA).encode("utf-32-le"), JA),
    ("shift_jis", text(JA).encode("shift_jis"), JA),
    ("cp932", text(JA_HEADER).encode("cp932"), JA_HEADER),
    ("cp932 without kana", text([["質問", "Answer"], ["東京都庁", "y"]]).encode("cp932"),
     [["質問", "Answer"], ["東京都庁", "y"]]),
    ("cp949", text(KO).encode("cp949"), KO),  # Excel on Korean Windows: "CSV (쉼표로 분리)"
    ("euc-kr", text(KO).encode("euc-kr"), KO),
]


@pytest.mark.parametrize("what,data,rows", READ_UNASKED, ids=[c[0] for c in READ_UNASKED])
def test_encodings_read_without_being_asked(isolated_env, what, data, rows):
    df = read_csv(write(isolated_env / "q.csv", data))
    assert [list(df.columns), *df.values.tolist()] == rows


REFUSED = [
    ("latin-1", text(ROWS).encode("latin-1"), "Latin-1 (ISO-8859-1)", "latin-1", ROWS),
    ("cp1252", text(CP1252_ROWS).encode("cp1252"), "Windows-1252 (CP1252)", "cp1252", CP1252_ROWS),
    ("utf-16le without BOM", text(JA_HEADER).encode("utf-16-le"), "UTF-16LE without a byte order mark",
     "utf-16-le", JA_HEADER),
    ("utf-16be without BOM", text(JA_HEADER).encode("utf-16-be"), "UTF-16BE without a byte order mark",
     "utf-16-be", JA_HEADER),
    ("utf-32le without BOM", text(JA_HEADER).encode("utf-32-le"), "UTF-32LE without a byte order mark",
     "utf-32-le", JA_HEADER),
    ("euc-jp", text(JA).encode("euc-jp"), "EUC-JP", "euc-jp", JA),
]


@pytest.mark.parametrize("what,data,label,codec,rows", REFUSED, ids=[c[0] for c in REFUSED])
def test_other_encodings_are_refused_by_name_and_read_with_encoding(isolated_env, what, data, label, codec, rows):
    """Before: Latin-1 "Größe" was read as CP932 ("Gr\\ue506e") with exit 0; UTF-16/32 without a mark got
    "missing column 'Question'" with NULs in the names it found."""
    path = write(isolated_env / "q.csv", data)
    with pytest.raises(RagError) as e:
        read_csv(path, required=("Question",))
    msg = str(e.value)
    assert "\n" not in msg and f"it looks like {label}" in msg and f"encoding={codec!r}" in msg, msg
    assert f"read it with --encoding {codec}" in e.value.cli_message()  # as `rag` says it
    df = read_csv(path, encoding=codec)
    assert [list(df.columns), *df.values.tolist()] == rows


def _dev_sheets(name: str, codec: str) -> list[tuple[str, bytes]]:
    """One question CSV per dev-set question (and one of them all) in `codec`; questions it cannot hold are left
    out (Shift_JIS has no ①…)."""
    import json

    items = [json.loads(line) for line in (DEV / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for unit in [[it] for it in items] + [items]:
        try:
            out.append((unit[0]["question"], text([["Question", "Ground Truth"],
                                                   *([it["question"], it["answer"]] for it in unit)]).encode(codec)))
        except UnicodeEncodeError:
            continue
    return out


@pytest.mark.parametrize(("name", "codec", "refused"), [("ja_dev.jsonl", "cp932", None), ("ko_dev.jsonl", "cp949", None),
                                                        ("ko_dev.jsonl", "euc-kr", None),
                                                        ("ja_dev.jsonl", "euc-jp", "EUC-JP")])
def test_japanese_and_korean_sheets_are_told_apart(isolated_env, name, codec, refused):
    """Report s57-ko M1: CP949 was refused (naming CP949) while CP932 was read. Many files decode as both: each
    dev-set question as its own CSV, and the whole set as one, is read in its own encoding and gives its text
    back; EUC-JP is still refused by name (it decodes as CP949 too). Measured: ja 100/100 CP932, ko 29/29 CP949."""
    from ragkit.core.csvio import sniff_encoding

    sheets = _dev_sheets(name, codec)
    assert len(sheets) >= 20
    for question, data in sheets:
        if refused:
            with pytest.raises(RagError) as e:
                sniff_encoding(data, "q.csv")
            assert f"looks like {refused}" in str(e.value) or "Latin-1" in str(e.value), (question, str(e.value))
            continue
        got, _, used = sniff_encoding(data, "q.csv")
        assert used == codec.replace("euc-kr", "cp949") and question in got, question


def test_a_korean_sheet_through_rag_batch_and_back_in_its_encoding(isolated_env, sample_db_copy):
    """The tester's CP949 sheet (CRLF, a Korean column of notes): `rag batch` reads it without --encoding, and
    a column written into it keeps it CP949."""
    from ragkit.core.csvedit import set_column

    path = write(isolated_env / "질문.csv", text(KO).encode("cp949"))
    code, out, err = run("batch", str(path), "--strategy", "search", "--provider", "offline")
    assert code == 0, err
    results = next((isolated_env / "results").glob("질문_results_*[0-9].csv"))
    assert read_csv(results)["Question"].tolist() == ["연차는 며칠인가요?"]
    edit = set_column(path, "Optimized Reference Document", {0: "database/휴가/page_001.md"})
    assert edit is not None and edit.notes == []
    assert path.read_bytes().decode("cp949").startswith("Question,Ground Truth,담당자 메모,Optimized Reference")


def test_a_utf8_file_is_read_as_utf8_under_another_encoding(isolated_env):
    """Report s57-ko M1: with RAG_CSV_ENCODING=cp949 set for colleagues' sheets, a plain UTF-8 file was refused
    ("is not valid cp949"). Valid UTF-8 with non-ASCII text is UTF-8 (legacy text never is), as a byte order
    mark wins; the named encoding still reads what UTF-8 cannot."""
    utf8 = write(isolated_env / "u.csv", text(KO).encode("utf-8"))
    for enc in ("cp949", "cp932", "latin-1"):
        df = read_csv(utf8, encoding=enc)
        assert [list(df.columns), *df.values.tolist()] == KO, enc
    df = read_csv(write(isolated_env / "k.csv", text(KO).encode("cp949")), encoding="cp949")
    assert [list(df.columns), *df.values.tolist()] == KO


def test_a_latin1_question_csv_through_rag_batch(isolated_env, sample_db_copy):
    """The issue's case end to end: refused with one line and exit 1; read right with --encoding."""
    rows = [["Question", "Reference Document"], ["Wie groß ist die Größe des Passworts?", ""]]
    path = write(isolated_env / "fragen.csv", text(rows).encode("latin-1"))
    code, out, err = run("batch", str(path), "--strategy", "search", "--provider", "offline")
    assert code == 1 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: ") and "Latin-1" in line and "--encoding latin-1" in line, err
    assert "Größe" in line  # the sample, decoded as the encoding it names, lets the user check the guess
    assert not list(isolated_env.glob("results/*.csv"))
    code, out, err = run("batch", str(path), "--strategy", "search", "--provider", "offline", "--encoding", "latin-1")
    assert code == 0, err
    results = next((isolated_env / "results").glob("fragen_results_*[0-9].csv"))
    assert read_csv(results)["Question"].tolist() == ["Wie groß ist die Größe des Passworts?"]


def _results_csv(path: Path, encoding: str) -> Path:
    rows = [["Question", "RAG Answer", "Ref Recall"], ["Wie groß ist die Größe?", "Größe 5", "1"]]
    return write(path, text(rows).encode(encoding))


@pytest.mark.parametrize("command", ["eval", "report", "compare", "evolve"])
def test_every_command_that_reads_a_csv_takes_encoding(isolated_env, command):
    latin = isolated_env / "in.csv"
    if command == "evolve":
        header = "experiment_id,max_generations,k,model_name,adapter_type,task_definition,target_preference," \
                 "evaluator_type"
        write(latin, f"{header}\ngroesse,1,1,none,dummy,Beschreibe die Größe,groß,rule_keyword\n".encode("latin-1"))
        args = [str(latin), "--script", "steps.sh"]
    else:
        _results_csv(latin, "latin-1")
        args = {"eval": [str(latin), "--provider", "offline", "--db", "database"], "report": [str(latin)],
                "compare": [str(latin), str(_results_csv(isolated_env / "new.csv", "utf-8-sig"))]}[command]
    if command == "eval":
        (isolated_env / "database" / "c" / "d" / "s").mkdir(parents=True)
        (isolated_env / "database" / "c" / "d" / "s" / "page_001.md").write_text("# Größe\nGröße 5\n")
    code, out, err = run(command, *args)
    assert code == 1 and "--encoding latin-1" in err and "Traceback" not in err, (out, err)
    code, out, err = run(command, *args, "--encoding", "latin-1")
    assert code == 0, (out, err)
    if command == "evolve":
        assert "--encoding latin-1" in (isolated_env / "steps.sh").read_text()


def test_an_unknown_encoding_is_a_usage_error(isolated_env):
    path = write(isolated_env / "q.csv", text(ROWS).encode())
    code, out, err = run("batch", str(path), "--encoding", "klingon", "--strategy", "search")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: --encoding: unknown encoding 'klingon'")


def test_a_byte_order_mark_wins_over_encoding(isolated_env):
    """A file optimize rewrote (UTF-8 with a BOM) still reads right under the --encoding of its original."""
    df = read_csv(write(isolated_env / "q.csv", text(ROWS).encode("utf-8-sig")), encoding="latin-1")
    assert df["Question"].tolist() == ["Wie groß ist die Größe?"]


def test_the_invalid_byte_after_a_byte_order_mark_is_the_one_named(isolated_env):
    """A UTF-8 BOM followed by Shift_JIS was refused naming byte 0x73 (the `s` of "Checklist", 3 bytes before the
    invalid 0x92): the offset counted from after the mark was used in the whole file."""
    sjis = "Question,Ground Truth\r\nパスワードは？,12\r\n".encode("cp932")
    path = write(isolated_env / "q.csv", codecs.BOM_UTF8 + sjis)
    bad = sjis.index("パ".encode("cp932"))
    with pytest.raises(RagError, match=rf"starts with a UTF-8 byte order mark but is not valid UTF-8 \(line 2, "
                                       rf"byte 0x{sjis[bad]:02X}\)"):
        read_csv(path)
    # UTF-16 counts its mark in the offset already: still the right byte
    wide = codecs.BOM_UTF16_LE + "Question\nab".encode("utf-16-le") + b"\x00\xdc" + "c".encode("utf-16-le")
    with pytest.raises(RagError, match=r"not valid UTF-16 \(line 2, byte 0x00\)"):
        read_csv(write(isolated_env / "w.csv", wide))


# --------------------------------------------------------------------------------------------- rows and cells

HEADER5 = "Question,Ground Truth,Reference Document,Page,Checklist"


def test_a_row_with_more_fields_is_an_error_even_when_they_are_empty(isolated_env):
    """The issue's case: an unquoted comma in a question whose row ends in empty fields, as spreadsheet exports
    write them. Before: the question lost its second half to Ground Truth, exit 0."""
    path = write(isolated_env / "q.csv", f"{HEADER5}\nHow long must passwords be, in characters?,,,,\n".encode())
    with pytest.raises(RagError) as e:
        read_csv(path)
    msg = str(e.value)
    assert "row 2 (line 2) has 6 fields but the header has 5" in msg and "double quotes" in msg, msg
    code, out, err = run("batch", str(path), "--strategy", "search")
    assert code == 1 and "row 2 (line 2)" in err and "Traceback" not in err


def test_a_quote_that_never_closes_is_an_error_naming_where_it_opens(isolated_env):
    """A stray double quote at the start of a cell opened a quoted cell that ran to the end of the file: the
    rows after it became part of one question, and the batch ran that one row (exit 0)."""
    path = write(isolated_env / "q.csv", b'Question,Ground Truth\nFirst?,a\n"What is Sea Mist Villa?,house\n'
                                         b'What percentage of seniors go online?,59%\nWhat is EFiled?,x\n')
    with pytest.raises(RagError) as e:
        read_csv(path)
    assert "row 3 (line 3): a double quote opens a cell and never closes" in str(e.value), e.value
    code, out, err = run("batch", str(path), "--strategy", "search")
    assert code == 1 and "row 3 (line 3)" in err and "Traceback" not in err
    assert not list(isolated_env.glob("results/*_results_*"))  # nothing was run on the one swallowed row
    # text after a closing quote is refused too; quoted line breaks and doubled quotes are still cells
    bad = write(isolated_env / "b.csv", b'Question\n"What is "Sea" Mist Villa?"\n')
    with pytest.raises(RagError, match=r"row 2 \(line 2\): text follows a closing double quote"):
        read_csv(bad)
    ok = write(isolated_env / "ok.csv", b'Question,Ground Truth\n"two\nlines",x\n"a ""quoted"" word",y\n')
    assert read_csv(ok)["Question"].tolist() == ["two\nlines", 'a "quoted" word']
    late = write(isolated_env / "late.csv", b'Question,Ground Truth\n"two\nlines",x\nb,"c\n')
    with pytest.raises(RagError, match=r"row 3 \(line 4\): a double quote opens"):
        read_csv(late)


def test_a_header_that_ends_in_empty_columns_pads_its_rows(isolated_env):
    """The one exception: a header padded with empty columns (a spreadsheet's export) lets rows carry empty
    fields there, and the padding is not a column; a value in it is still an error."""
    ok = write(isolated_env / "ok.csv", b"Question,Ground Truth,,\nQ1,A1,,\nQ2,A2,,,,\nQ3,A3\n")
    df = read_csv(ok)
    assert list(df.columns) == ["Question", "Ground Truth"]
    assert df.values.tolist() == [["Q1", "A1"], ["Q2", "A2"], ["Q3", "A3"]]
    shifted = write(isolated_env / "bad.csv", b"Question,Ground Truth,,\nHow long must passwords be, in characters?,12,\n")
    with pytest.raises(RagError, match=r"row 2 \(line 2\) has a value in column 3, which has no name in the header"):
        read_csv(shifted)


def test_a_nul_in_a_question_is_refused(isolated_env, sample_db_copy):
    """Before: the NUL went raw into the results CSV."""
    path = write(isolated_env / "q.csv", b"Question,Ground Truth\nWhat is\x00 MFA?,x\n")
    code, out, err = run("batch", str(path), "--strategy", "search", "--provider", "offline")
    assert code == 1
    assert err.strip().splitlines()[-1] == (f"error: {path}: row 2 (line 2), column 'Question': contains a NUL "
                                            "character (\\0); remove it")
    assert not list(isolated_env.glob("results/*.csv"))


def test_a_cell_over_the_limit_is_named_by_row_and_column(isolated_env):
    """A 2,000,010-character question gave "not a valid CSV (field larger than field limit (131072))", the one
    input error that named no row or column. A cell under the limit still reads."""
    from ragkit.core.csvio import MAX_CELL_CHARS

    before = csv.field_size_limit()
    long = "x" * 100_000 + "?"
    ok = write(isolated_env / "ok.csv", text([["Question", "Ground Truth"], [long, "a"]]).encode())
    assert read_csv(ok)["Question"].tolist() == [long]
    huge = "y" * (MAX_CELL_CHARS + 1)
    path = write(isolated_env / "q.csv", text([["No", "Question", "Ground Truth"], ["1", "short?", "a"],
                                               ["2", huge, "b"]]).encode())
    with pytest.raises(RagError) as e:
        read_csv(path)
    assert str(e.value) == (f"{path}: row 3 (line 3), column 'Question': {MAX_CELL_CHARS + 1:,} characters, over the "
                            f"limit of {MAX_CELL_CHARS:,}")
    assert csv.field_size_limit() == before  # the csv module's global limit is left as it was
    code, out, err = run("batch", str(path), "--strategy", "search")
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    assert err.strip().splitlines()[-1] == f"error: {e.value}"


def test_a_header_with_too_many_columns_is_refused_by_its_count(isolated_env):
    """Report s56-sec M3: a question CSV with 20,000 columns ran for 76 s (80,000: over 200 s) and was accepted.
    More named columns than MAX_COLUMNS are one line naming the file and the count; the limit itself reads, and a
    spreadsheet's empty padding columns do not count."""
    from ragkit.core.csvio import MAX_COLUMNS

    def wide(name: str, columns: int, padding: int = 0) -> Path:
        header = ["Question"] + [f"c{i}" for i in range(columns - 1)] + [""] * padding
        return write(isolated_env / name, text([header, ["q?"] + ["v"] * (columns - 1) + [""] * padding]).encode())

    assert read_csv(wide("ok.csv", MAX_COLUMNS, padding=3 * MAX_COLUMNS)).shape == (1, MAX_COLUMNS)
    path = wide("w.csv", MAX_COLUMNS + 1)
    with pytest.raises(RagError) as e:
        read_csv(path)
    assert str(e.value) == (f"{path}: row 1 (the header) has {MAX_COLUMNS + 1:,} columns, over the limit of "
                            f"{MAX_COLUMNS:,}")
    code, out, err = run("batch", str(path), "--strategy", "search", "--provider", "offline")
    assert code == 1 and "Traceback" not in err and err.strip().splitlines()[-1] == f"error: {e.value}", err


def test_a_duplicate_or_misspelt_column_is_still_named_among_many(isolated_env):
    """The duplicate check (now one pass, was quadratic) and the near-miss check (now skipping names whose
    length differs by more than the edits allowed) name what they named before."""
    cols = [f"c{i}" for i in range(500)]
    path = write(isolated_env / "dup.csv", text([["Question", *cols, "c7"], ["q?", *["v"] * 501]]).encode())
    with pytest.raises(RagError, match=r"the column 'c7' appears twice; rename or remove one"):
        read_csv(path)
    path = write(isolated_env / "typo.csv", text([["Question", *cols, "Grund Truth"], ["q?", *["v"] * 501]]).encode())
    with pytest.raises(RagError, match=r"column 'Grund Truth' looks like 'Ground Truth'"):
        read_csv(path, known=("Question", "Ground Truth"))


@pytest.mark.parametrize("command", ["batch", "report", "eval", "compare"])
def test_a_folder_where_a_file_is_expected_is_named_a_folder(isolated_env, command):
    """Before: "no such file" for a folder that exists."""
    folder = isolated_env / "results"
    folder.mkdir()
    args = [str(folder), str(folder)] if command == "compare" else [str(folder)]
    code, out, err = run(command, *args, "--provider", "offline") if command in ("batch", "eval") else run(
        command, *args)
    assert code == 1 and err.strip().splitlines()[-1] == f"error: {folder}: is a folder; give a CSV file", err


def test_codecs_named_in_messages_exist():
    for name in ("latin-1", "cp1252", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "euc-jp", "cp949",
                 "gb18030", "cp932"):
        codecs.lookup(name)


def test_a_folder_given_for_the_evolve_script_is_named_a_folder(isolated_env):
    header = "experiment_id,max_generations,k,model_name,adapter_type,task_definition,target_preference,evaluator_type"
    write(isolated_env / "exp.csv", f"{header}\na,1,1,none,dummy,Describe,fire,rule_keyword\n".encode())
    (isolated_env / "steps").mkdir()
    code, out, err = run("evolve", "exp.csv", "--script", "steps")
    assert code == 1 and err.strip().splitlines()[-1] == "error: steps: is a folder; name a file for the script " \
        "(nothing was written)", err


# ------------------------------------------------------------------------------------ editing a user's CSV
# The tester's sheet (s53, M1): Shift_JIS with CRLF, extra columns after Checklist, a blank row, a quoted cell
# with a line break (LF, as Excel writes it), a trailing padding column, and 髙 in its NEC-selected code (0xEEE0;
# Python writes it back as 0xFBFC: decoding and encoding again does not give the same bytes).
SJIS_SHEET = ("No,Question,Reference Document,Checklist,担当者,メモ,\r\n"
              "1,年次有給休暇は何日？,docs/就業規則/page_003.md,最大20日,山田,髙橋さん確認済み①,\r\n"
              '2,在宅勤務は週何日？,docs/就業規則/page_004.md,"週3日\n所属長の承認",佐藤,～要確認,\r\n'
              ",,,,,,\r\n"
              "3,=SUM(A1) は？,docs/経費/page_002.md,x,,,\r\n")


def sjis_sheet(path: Path) -> bytes:
    data = SJIS_SHEET.encode("cp932").replace("髙".encode("cp932"), b"\xee\xe0")
    assert data.decode("cp932") == SJIS_SHEET and b"\xee\xe0" in data
    path.write_bytes(data)
    return data


def test_a_new_column_keeps_the_sheets_encoding_line_breaks_columns_and_bytes(isolated_env):
    """`--optimize` rewrote this file as UTF-8 with a BOM, put `Optimized Reference Document` fifth (moving
    担当者 and メモ) and dropped the padding column. Now each row's bytes stay and the column comes last."""
    from ragkit.core.csvedit import set_column

    path = isolated_env / "q.csv"
    before = sjis_sheet(path)
    edit = set_column(path, "Optimized Reference Document", {0: "docs/就業規則/page_003.md|docs/休暇/page_003.md"})
    after = path.read_bytes()
    assert edit is not None and edit.notes == [] and edit.backup.read_bytes() == before
    old, new = before.split(b"\r\n"), after.split(b"\r\n")
    assert len(new) == len(old) and not after.startswith(codecs.BOM_UTF8)
    assert new[0] == old[0] + b",Optimized Reference Document"
    assert new[1] == old[1] + ",docs/就業規則/page_003.md|docs/休暇/page_003.md".encode("cp932")
    assert [n for o, n in zip(old[2:], new[2:], strict=True) if n != (o + b"," if o else o)] == []
    df = read_csv(path)  # the padding column is still no column
    assert list(df.columns) == ["No", "Question", "Reference Document", "Checklist", "担当者", "メモ",
                                "Optimized Reference Document"]
    assert df["メモ"].tolist() == ["髙橋さん確認済み①", "～要確認", "", ""] and df["Question"][3] == "=SUM(A1) は？"
    # a second run changes that one cell, in place
    again = set_column(path, "Optimized Reference Document",
                       {0: "docs/就業規則/page_003.md|docs/休暇/page_003.md|docs/x/page_003.md", 3: ""})
    assert again is not None and again.backup.read_bytes() == after
    lines = path.read_bytes().split(b"\r\n")
    assert lines[1] == old[1] + ",docs/就業規則/page_003.md|docs/休暇/page_003.md|docs/x/page_003.md".encode("cp932")
    assert lines[2:] == new[2:]
    assert set_column(path, "Optimized Reference Document", {3: ""}) is None  # nothing to change: not written


def test_a_value_the_sheets_encoding_cannot_hold_makes_it_utf8_with_a_bom_and_says_so(isolated_env):
    from ragkit.core.csvedit import set_column

    path = isolated_env / "q.csv"
    sjis_sheet(path)
    edit = set_column(path, "Optimized Reference Document", {1: "docs/就業規則/page_004.md|docs/재택근무/page_004.md"})
    assert edit is not None and len(edit.notes) == 1
    assert "cannot be written in Shift_JIS/CP932" in edit.notes[0] and "UTF-8 with a byte order mark" in edit.notes[0]
    data = path.read_bytes()
    assert data.startswith(codecs.BOM_UTF8)
    assert data[3:].decode("utf-8").split("\r\n")[2] == \
        SJIS_SHEET.split("\r\n")[2] + ",docs/就業規則/page_004.md|docs/재택근무/page_004.md"


@pytest.mark.parametrize("encoding, bom, newline", [("utf-8", b"", "\n"), ("utf-8", codecs.BOM_UTF8, "\r\n"),
                                                    ("utf-16-le", codecs.BOM_UTF16_LE, "\r\n")])
def test_a_new_column_keeps_utf_files_as_they_were(isolated_env, encoding, bom, newline):
    from ragkit.core.csvedit import set_column

    rows = ['"Question","Reference Document"', '"Wie groß?","database/a/page_001.md"', '"Why, though?",""']
    path = write(isolated_env / "q.csv", bom + newline.join(rows).encode(encoding))  # no line break at the end
    set_column(path, "Optimized Reference Document", {0: "database/a/page_001.md|database/b/page_001.md"})
    data = path.read_bytes()
    assert data.startswith(bom) and data[len(bom):].decode(encoding) == newline.join([
        rows[0] + ',"Optimized Reference Document"',
        rows[1] + ',"database/a/page_001.md|database/b/page_001.md"', rows[2] + ',""'])
