"""`rag refs update`: a question CSV's references to pages a re-ingest moved to other section folders are rewritten
to where the pages are now, every other byte of the file kept; pages that are gone are named and left alone.

End to end: real ingests of PDFs made here, a re-ingest that gives the document an outline (its pages leave
`pages_001-004/` for chapter folders) and drops a page, and a document pruned."""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import pytest
from test_ingest import body_pages, make_pdf
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.csvio import read_csv
from ragkit.core.errors import RagError
from ragkit.core.paths import iter_pages
from ragkit.core.text import one_line
from ragkit.evaluate.refs import update_references
from ragkit.evaluate.scoring import check_references, read_questions
from ragkit.ingest import ingest_sources


@pytest.fixture(autouse=True)
def keyword_search_only(monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")


OLD = "規程/rules/pages_001-004"  # the fallback sections of a PDF without an outline
CH1, CH2 = "規程/rules/第1章 総則", "規程/rules/第2章 運用"  # its sections once it has one


def ingest_and_move(work: Path) -> Path:
    """Ingest rules.pdf (4 pages, no outline), keep.pdf and gone.pdf; then re-ingest rules.pdf with chapters as
    its outline and 3 pages, and prune gone.pdf. Returns the database."""
    src, db = work / "s", work / "database"
    make_pdf(src / "規程" / "rules.pdf", body_pages(4))
    make_pdf(src / "規程" / "keep.pdf", body_pages(2, "Keep"))
    make_pdf(src / "規程" / "gone.pdf", body_pages(2, "Gone"))
    ingest_sources([src], db=db, progress=False, workers=1)
    assert f"{OLD}/page_003.md" in iter_pages(db)
    make_pdf(src / "規程" / "rules.pdf", body_pages(3), toc=[[1, "第1章 総則", 1], [1, "第2章 運用", 3]])
    (src / "規程" / "gone.pdf").unlink()
    ingest_sources([src], db=db, progress=False, workers=1, prune=True, force=True)
    assert {p for p in iter_pages(db) if p.startswith("規程/rules/")} == {
        f"{CH1}/page_001.md", f"{CH1}/page_002.md", f"{CH2}/page_003.md"}
    return db


def question_csv(refs: dict[str, str], *, keep_ref: str) -> str:
    """The CSV's text (CRLF, a quoted multi-line cell, a `;` and a `|`): `refs` fills the rows that name rules.pdf
    pages, `keep_ref` names a page that did not move. Rows 2 and 5 never change; ≒ is there for CP932 below."""
    rows = [
        ["Question", "Ground Truth", "Reference Document", "Page", "Checklist"],
        ["保存期間は？", "約≒5年", keep_ref, "1", '"5年"\n保存'],
        ["第3条は何を定める？", "運用", refs["three"], "3", "運用"],
        ["総則と定義は？", "総則", f'{refs["one"]}\n{refs["two"]};{refs["gone"]}', "1;2", "総則"],
        ["保証期間は？", "", "", "", ""],
        ["最後の頁は？", "x≒y", keep_ref + "|" + keep_ref.replace("page_001", "page_002"), "1", "x"],
        ["第4条は？", "", refs["four"], "4", ""],
    ]

    def cell(v: str) -> str:
        return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\n;') else v

    return "".join(",".join(cell(v) for v in row) + "\r\n" for row in rows)


def encode(text: str, encoding: str) -> bytes:
    data = text.encode(encoding)
    if encoding == "cp932":  # NEC's ≒ (0x8790): decoding and encoding again would write IBM's 0x81E0
        data = data.replace("≒".encode("cp932"), b"\x87\x90")
    return data


def forms(db: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The references as written before the re-ingest and what they must become: project-relative
    (`database/...`), database-relative and absolute."""
    absolute = db.resolve().as_posix()
    before = {"three": f"database/{OLD}/page_003.md", "one": f"{OLD}/page_001.md",
              "two": f"{absolute}/{OLD}/page_002.md", "gone": "database/規程/gone/pages_001-002/page_001.md",
              "four": f"database/{OLD}/page_004.md"}
    after = {**before, "three": f"database/{CH2}/page_003.md", "one": f"{CH1}/page_001.md",
             "two": f"{absolute}/{CH1}/page_002.md"}
    return before, after


def run(*args: str):
    res = CliRunner().invoke(app, ["refs", "update", *args])
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "cp932"])
def test_moved_references_are_rewritten_and_every_other_byte_kept(isolated_env, encoding):
    db = ingest_and_move(isolated_env)
    before, after = forms(db)
    keep = "database/規程/keep/pages_001-002/page_001.md"
    original = encode(question_csv(before, keep_ref=keep), encoding)
    expected = encode(question_csv(after, keep_ref=keep), encoding)
    assert original != expected
    csv = isolated_env / "q.csv"
    csv.write_bytes(original)

    # batch stops before asking, and its hint names the command
    res = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--strategy", "search"])
    assert res.exit_code == 1 and f"rag refs update {csv} --db {db} --in-place" in res.stderr

    # a dry run says what would change and writes nothing
    code, out, err = run(str(csv), "--db", str(db), "--dry-run")
    assert code == 1 and csv.read_bytes() == original and sorted(p.name for p in isolated_env.iterdir()) == [
        "database", "q.csv", "s"]
    assert f"row 3, Reference Document: {before['three']} -> {after['three']}" in out
    assert ("q.csv: 6 rows, 3 references to update in 2 rows, 1 not found, 1 to check by hand (dry run: nothing "
            "written)") in out

    # -o: a new file; the input stays as it was
    code, out, err = run(str(csv), "--db", str(db), "-o", "new.csv")
    assert code == 1 and csv.read_bytes() == original
    assert Path("new.csv").read_bytes() == expected  # encoding, CRLF, quoting, untouched rows: byte for byte
    assert "3 references updated in 2 rows, 1 not found, 1 to check by hand" in out
    # the pages that are gone: one line each, naming the row and the field
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all(ln.startswith("error: ") for ln in lines)
    assert f"row 4, column 'Reference Document': {before['gone']}: its document 規程/gone is no longer" in lines[0]
    # page 4 was removed; its body is the line every page of this PDF has (the others are running lines, numbers
    # aside): it is on three pages now, and which one is not guessed
    assert (f"row 7, column 'Reference Document': {before['four']}: its document was re-ingested and the text of "
            f"that page is on 3 of its pages now (database/{CH1}/page_001.md, ") in lines[1]
    code, _, err = run(str(csv), "--db", str(db), "-o", "new.csv")  # never over an existing file
    assert code == 1 and "new.csv: already exists" in err and Path("new.csv").read_bytes() == expected

    # --in-place: the same bytes, the previous file kept as a backup
    code, out, _ = run(str(csv), "--db", str(db), "--in-place")
    assert code == 1 and csv.read_bytes() == expected
    backup = Path(re.search(r"previous file kept as (\S+)", out).group(1))
    assert backup.name.startswith("q.csv.bak-") and backup.read_bytes() == original

    # a second run has nothing left to move
    code, out, _ = run(str(csv), "--db", str(db), "--in-place")
    assert code == 1 and "0 references updated in 0 rows, 1 not found, 1 to check by hand" in out
    assert csv.read_bytes() == expected


def test_after_the_update_batch_runs(isolated_env):
    """Without gone pages: exit 0, and `rag batch` now takes the CSV it refused."""
    db = ingest_and_move(isolated_env)
    before, after = forms(db)
    before["gone"] = after["gone"] = "database/規程/keep/pages_001-002/page_002.md"
    before["four"] = after["four"] = ""
    keep = "database/規程/keep/pages_001-002/page_001.md"
    csv = isolated_env / "q.csv"
    csv.write_bytes(encode(question_csv(before, keep_ref=keep), "cp932"))
    with pytest.raises(RagError, match="rag refs update"):
        check_references(read_questions(csv).to_dict("records"), db, csv)
    code, out, err = run(str(csv), "--db", str(db), "--in-place")
    assert (code, err) == (0, "") and "6 rows, 3 references updated in 2 rows, 0 not found" in out
    assert csv.read_bytes() == encode(question_csv(after, keep_ref=keep), "cp932")
    res = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--strategy", "search", "--results", "r"])
    assert res.exit_code == 0, res.output


def test_a_page_number_in_two_section_folders_is_not_guessed(isolated_env):
    """A copy of the page in another folder of the document is not one of its pages: the record of what the page
    held finds the page. Without that record (a database whose pages an older ragkit moved) the page number is
    only a guess: its pages of that number are named to check by hand, nothing is written."""
    db = ingest_and_move(isolated_env)
    other = db / "規程/rules/付録"
    other.mkdir()
    (other / "page_003.md").write_text((db / CH2 / "page_003.md").read_text(encoding="utf-8"), encoding="utf-8")
    csv = isolated_env / "q.csv"
    csv.write_text(f"Question,Reference Document\nq,{OLD}/page_003.md\n", encoding="utf-8")
    assert [c.new for c in update_references(csv, db, dry_run=True).changes] == [f"{CH2}/page_003.md"]
    manifest = db / ".ragkit/ingest-manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    for entry in data["sources"].values():
        entry.pop("replaced", None)
    manifest.write_text(json.dumps(data), encoding="utf-8")
    report = update_references(csv, db, in_place=True)
    assert report.changes == [] and report.written is None and len(report.missing) == 1
    assert "no record says what that page held" in report.errors()[0] and "row 2" in report.errors()[0]
    assert f"whether it is now 規程/rules/付録/page_003.md or {CH2}/page_003.md" in report.errors()[0]


def test_usage(isolated_env):
    csv = isolated_env / "q.csv"
    csv.write_text("Question\nq\n", encoding="utf-8")
    assert run(str(csv))[0] == 2
    assert run(str(csv), "--in-place", "--dry-run")[0] == 2


def test_a_results_csv_for_rag_eval_gets_its_retrieved_files_moved_too(isolated_env):
    """rag eval re-scores Retrieved Files against the references: both move, or its Ref metrics would count the
    page found as a false positive."""
    db = ingest_and_move(isolated_env)
    csv = isolated_env / "r.csv"
    csv.write_text("Question,Reference Document,Page,RAG Answer,Retrieved Files\n"
                   f'q,database/{OLD}/page_003.md,3,x,"database/{OLD}/page_003.md\ndatabase/{OLD}/page_001.md"\n',
                   encoding="utf-8-sig")
    res = CliRunner().invoke(app, ["eval", str(csv), "--db", str(db), "--results", "r"])
    assert res.exit_code == 1 and f"rag refs update {csv} --db {db} --in-place" in res.stderr
    code, out, err = run(str(csv), "--db", str(db), "--in-place")
    assert (code, err) == (0, "") and "3 references updated in 1 rows" in out
    assert csv.read_text(encoding="utf-8-sig") == (
        "Question,Reference Document,Page,RAG Answer,Retrieved Files\n"
        f'q,database/{CH2}/page_003.md,3,x,"database/{CH2}/page_003.md\ndatabase/{CH1}/page_001.md"\n')
    res = CliRunner().invoke(app, ["eval", str(csv), "--db", str(db), "--results", "r", "--print-path"])
    assert res.exit_code == 0, res.output
    assert read_csv(Path(res.stdout.strip()))["Ref TP"].tolist() == ["1"]


def test_a_dry_run_says_the_file_would_become_utf8_as_the_real_run_does(isolated_env):
    """A moved page's new path Shift_JIS cannot hold: writing turns the file into UTF-8 with a byte order mark, and
    the dry run says so too (it said nothing of it)."""
    src, db = isolated_env / "s", isolated_env / "database"
    make_pdf(src / "規程" / "rules.pdf", body_pages(2))
    ingest_sources([src], db=db, workers=1)
    old = "規程/rules/pages_001-002"
    make_pdf(src / "規程" / "rules.pdf", body_pages(2), toc=[[1, "Café", 1]])  # its pages go to a section so named
    ingest_sources([src], db=db, workers=1)
    assert (db / "規程/rules/Café/page_002.md").is_file()
    csv = isolated_env / "q.csv"
    original = f"Question,Reference Document\r\n規程は？,{old}/page_002.md\r\n".encode("cp932")
    csv.write_bytes(original)
    code, out, err = run(str(csv), "--db", str(db), "--dry-run")
    assert (code, err) == (0, "") and csv.read_bytes() == original
    assert "1 references to update in 1 rows" in out
    assert ("q.csv: 'é' cannot be written in Shift_JIS/CP932, the file's encoding: writing it would make it UTF-8 "
            "with a byte order mark") in one_line(out)
    code, out, err = run(str(csv), "--db", str(db), "-o", "new.csv")
    assert (code, err) == (0, "") and "the file is now UTF-8 with a byte order mark" in one_line(out)
    assert Path("new.csv").read_bytes() == codecs.BOM_UTF8 + original.decode("cp932").replace(
        "pages_001-002", "Café").encode("utf-8")


# ------------------------------------------------------------------ pages followed by their text, not their number


def make_deck(path: Path, slides: list[tuple[str, str]]) -> None:
    from pptx import Presentation

    prs = Presentation()
    for title, body in slides:
        s = prs.slides.add_slide(prs.slide_layouts[1])
        s.shapes.title.text = title
        s.placeholders[1].text = body
    path.parent.mkdir(parents=True, exist_ok=True)
    prs.save(path)


DECK = [("会社概要", "設立 1985年"), ("事業内容", "専門商社"), ("初任給と待遇", "大学院卒 285,000円"),
        ("売上高", "2025年度 498億円"), ("選考フロー", "エントリーから内定まで")]


def test_a_slide_inserted_before_a_referenced_one_is_followed_by_its_text_not_its_number(isolated_env):
    """A slide added as slide 2 moves every later slide one number on, and the deck grows out of its range folder
    (pages_001-005 -> pages_001-006). The old page_003 (初任給) is now page_004: the references follow the text
    (before: page_003, now 会社概要's neighbour 事業内容, "0 not found"). A slide edited at the same time cannot be
    followed: it is listed to check by hand, not rewritten, in the dry run, in place, and in batch's hint."""
    deck = isolated_env / "s" / "採用" / "説明会.pptx"
    db = isolated_env / "database"
    make_deck(deck, DECK)
    ingest_sources([deck], db=db, workers=1)
    old = "database/採用/説明会/pages_001-005"
    make_deck(deck, [DECK[0], ("企業理念", "誠実と挑戦"), *DECK[1:3], ("売上高", "2025年度 512億円"), DECK[4]])
    ingest_sources([deck], db=db, workers=1)
    new = "database/採用/説明会/pages_001-006"
    assert "初任給と待遇" in (isolated_env / new / "page_004.md").read_text(encoding="utf-8")
    csv = isolated_env / "q.csv"
    original = (f"Question,Reference Document\n初任給は？,{old}/page_003.md\n選考は？,{old}/page_005.md\n"
                f"売上高は？,{old}/page_004.md\n設立は？,{old}/page_001.md\n")
    csv.write_text(original, encoding="utf-8")

    res = CliRunner().invoke(app, ["batch", str(csv), "--db", str(db), "--strategy", "search"])
    assert res.exit_code == 1
    msg = one_line(res.stderr)
    assert f"hint: {old}/page_003.md is now {new}/page_004.md" in msg
    assert f"but {old}/page_004.md: its document was re-ingested and the text of that page is on none" in msg

    code, out, err = run(str(csv), "--db", str(db), "--dry-run")
    assert code == 1 and csv.read_text(encoding="utf-8") == original
    assert f"row 2, Reference Document: {old}/page_003.md -> {new}/page_004.md" in out
    assert f"row 3, Reference Document: {old}/page_005.md -> {new}/page_006.md" in out
    assert f"row 5, Reference Document: {old}/page_001.md -> {new}/page_001.md" in out
    assert "3 references to update in 3 rows, 0 not found, 1 to check by hand" in one_line(out)
    assert f"row 4, column 'Reference Document': {old}/page_004.md: its document was re-ingested" in one_line(err)

    code, out, err = run(str(csv), "--db", str(db), "--in-place")
    assert code == 1 and csv.read_text(encoding="utf-8") == (
        f"Question,Reference Document\n初任給は？,{new}/page_004.md\n選考は？,{new}/page_006.md\n"
        f"売上高は？,{old}/page_004.md\n設立は？,{new}/page_001.md\n")


def test_the_history_is_bounded_and_older_moves_are_followed_through_it(isolated_env):
    """Each re-conversion that removes pages records what they held, over the records before it, at most KEEP of
    them: a CSV two edits behind its deck is still followed; one more than KEEP re-conversions behind is not
    guessed."""
    from ragkit.core.pagehistory import KEEP

    deck = isolated_env / "s" / "採用" / "説明会.pptx"
    db = isolated_env / "database"
    make_deck(deck, DECK[:3])
    ingest_sources([deck], db=db, workers=1)
    csv = isolated_env / "q.csv"
    csv.write_text("Question,Reference Document\n初任給は？,採用/説明会/pages_001-003/page_003.md\n",
                   encoding="utf-8")
    slides = list(DECK[:3])
    for i in range(KEEP + 1):
        slides.insert(0, (f"追加{i}", f"追加の本文{i}"))
        make_deck(deck, slides)
        ingest_sources([deck], db=db, workers=1)
        report = update_references(csv, db, dry_run=True)
        if i < KEEP:
            assert [c.new for c in report.changes] == [f"採用/説明会/pages_001-{4 + i:03d}/page_{4 + i:03d}.md"]
    manifest = json.loads((db / ".ragkit/ingest-manifest.json").read_text(encoding="utf-8"))
    (entry,) = manifest["sources"].values()
    assert len(entry["replaced"]) == KEEP
    # the first folder was recorded KEEP + 1 re-conversions ago: forgotten; the page of its number (another slide)
    # is offered to check by hand, not written
    assert report.changes == [] and report.missing[0].reason == "unrecorded"
    assert report.missing[0].candidates == [f"採用/説明会/pages_001-{4 + KEEP:03d}/page_003.md"]
