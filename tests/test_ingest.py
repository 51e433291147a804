"""rag ingest: layout, names, front matter, outline mapping, incremental runs, DOCX/PPTX, bad input."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
from pathlib import Path

import pymupdf
import pytest
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.cli.render import print_ingest_report
from ragkit.core.errors import RagError
from ragkit.core.pagefile import NO_TEXT_MARKER, parse_page
from ragkit.core.paths import iter_pages
from ragkit.ingest import (
    CONVERTER_VERSION,
    IngestReport,
    ingest_sources,
    join_breaks,
    outdated_note,
    outline_sections,
    printed_numbers,
)
from ragkit.ingest.pages import heading_sections
from ragkit.ingest.pdf_margins import band_folios

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def make_pdf(path: Path, pages: list[list[tuple[str, float]]], toc: list | None = None, title: str = "",
             font: str = "japan") -> Path:
    """A PDF whose page i holds the (text, font size) lines of pages[i]; an empty list = no text layer."""
    doc = pymupdf.open()
    for lines in pages:
        page = doc.new_page()
        y = 72.0
        if not lines:  # a scanned-looking page: a drawing, no text
            page.draw_rect(pymupdf.Rect(100, 100, 300, 300), fill=(0.5, 0.5, 0.5))
        for text, size in lines:
            page.insert_text((72, y + size), text, fontname=font, fontsize=size)
            y += size * 1.6
    if toc:
        doc.set_toc(toc)
    if title:
        doc.set_metadata({"title": title})
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(path)
    doc.close()
    return path


def body_pages(n: int, heading: str = "見出し") -> list[list[tuple[str, float]]]:
    return [[(f"{heading}{i}", 18), (f"本文のテキストです。ページ{i}の内容。", 10), ("二行目の本文。", 10)]
            for i in range(1, n + 1)]


def read(db: Path, rel: str):
    return parse_page((db / rel).read_text(encoding="utf-8"))


def run_cli(*args: str):
    res = CliRunner().invoke(app, ["ingest", *args])
    out = res.stdout + (res.stderr if res.stderr_bytes is not None else "")
    return res.exit_code, out


# --------------------------------------------------------------------------------------- layout and names


def test_layout_front_matter_and_markdown(isolated_env):
    src = isolated_env / "docs" / "家電" / "冷蔵庫 GR-1.pdf"
    pages = [
        [("表紙", 24)],
        [("目次", 18), ("安全上のご注意……3", 10)],
        [("安全上のご注意", 18), ("電源プラグは定期的に掃除してく", 10), ("ださい。", 10),
         ("・延長コードは使わないでください。", 10)],
        [("温度の設定", 18), ("冷蔵室は約3℃です。", 10)],
    ]
    make_pdf(src, pages, toc=[[1, "安全上のご注意", 3], [2, "警告", 3], [1, "使いかた", 4]], title="冷蔵庫 取扱説明書")
    db = isolated_env / "database"
    report = ingest_sources([isolated_env / "docs"], db=db, progress=False, workers=1)
    assert not report.failed and report.documents == 1 and report.pages == 4
    assert iter_pages(db) == [
        "家電/冷蔵庫 GR-1/front matter/page_001.md",
        "家電/冷蔵庫 GR-1/front matter/page_002.md",
        "家電/冷蔵庫 GR-1/使いかた/page_004.md",
        "家電/冷蔵庫 GR-1/安全上のご注意/page_003.md",
    ]
    meta, body = read(db, "家電/冷蔵庫 GR-1/安全上のご注意/page_003.md")
    assert meta.source == "docs/家電/冷蔵庫 GR-1.pdf"  # relative to the cwd it lies in
    assert (meta.document, meta.section, meta.page) == ("冷蔵庫 取扱説明書", "安全上のご注意", 3)
    assert "# 安全上のご注意" in body
    assert "掃除してください。" in body  # the CJK line break is joined
    assert "- 延長コードは使わないでください。" in body
    assert read(db, "家電/冷蔵庫 GR-1/front matter/page_001.md")[0].section == "front matter"


def test_source_outside_cwd_is_absolute_and_title_falls_back(tmp_path, isolated_env):
    src = make_pdf(tmp_path / "elsewhere" / "plain.pdf", [[("Introduction", 20), ("Body text here.", 10)]],
                   font="helv")
    db = isolated_env / "database"
    ingest_sources([src], db=db, progress=False, workers=1)
    [rel] = iter_pages(db)
    assert rel == "elsewhere/plain/page_001/page_001.md"  # category = the file's own folder; one page: page_001
    meta, _ = read(db, rel)
    assert meta.source == src.as_posix() and meta.document == "Introduction"


def test_category_option_and_sanitised_names(isolated_env):
    src = make_pdf(isolated_env / "in" / "ctrl\x01name.pdf", body_pages(3),
                   toc=[[1, "A/B: 設定?", 1], [1, "A B 設定", 2], [1, "節" * 300, 3]])
    db = isolated_env / "database"
    long_cat = "長" * 300
    report = ingest_sources([src], db=db, category="x/y" + long_cat, progress=False, workers=1)
    assert not report.failed
    pages = iter_pages(db)
    cat = pages[0].split("/")[0]
    assert len(cat) == 80 and cat.startswith("x y長")
    # the two outline titles sanitise to the same name: they get distinct folders
    assert {p.split("/", 2)[2] for p in pages} == {"A B 設定/page_001.md", "A B 設定 (2)/page_002.md",
                                                   "節" * 80 + "/page_003.md"}
    assert read(db, pages[0])[0].section in ("A/B: 設定?", "A B 設定", "節" * 300)  # the title itself is kept
    assert pages[0].split("/")[1] == "ctrl name"


# ------------------------------------------------------------------------------------------- sections


def test_outline_mapping_rules():
    toc = [[1, "A", 1], [1, "B", 3], [1, "C", 3], [2, "C.1", 4], [1, "D", 6], [1, "Ghost", 99], [1, "Zero", 0]]
    assert outline_sections(toc, 6) == ["A", "A", "B", "C", "C", "D"]
    # pages before the first entry, and a document whose outline starts at level 2
    assert outline_sections([[2, "X", 2], [3, "x", 2], [2, "Y", 3]], 3) == ["front matter", "X", "Y"]
    assert outline_sections([[1, "Out", 50]], 3) is None
    # a single root entry (the document's title) above the chapters: the chapters are the sections
    assert outline_sections([[1, "Manual", 1], [2, "Intro", 1], [2, "Use", 2], [3, "u", 3]], 3) == [
        "Intro", "Use", "Use"]
    assert outline_sections([], 3) is None


def test_no_outline_falls_back_to_page_ranges(isolated_env):
    src = make_pdf(isolated_env / "c" / "long.pdf", body_pages(23))
    db = isolated_env / "database"
    ingest_sources([src], db=db, progress=False, workers=1)
    folders = sorted({p.split("/")[2] for p in iter_pages(db)})
    assert folders == ["pages_001-010", "pages_011-020", "pages_021-023"]


def test_a_page_range_of_one_page_is_named_as_one_page():
    """The last range of an 11-page document was "pages_011-011"; a range of one page is "page_011"."""
    from ragkit.ingest.pages import range_sections

    assert range_sections(11)[-2:] == ["pages_001-010", "page_011"]
    assert range_sections(1) == ["page_001"] and range_sections(12)[-1] == "pages_011-012"
    assert range_sections(1001)[-1] == "page_1001" and range_sections(1001)[0] == "pages_0001-0010"


def test_numbered_chapter_headings_are_the_sections_of_a_pdf_without_outline():
    # a label alone over its title, a contents page (three chapters on one page starts none), a sub-number
    pages = ["# 報告書", "## 目次\n## 第1章 総則\n## 第2章 勤務\n## 第3章 賃金", "## 第1章\n# 総則\n本文",
             "## 2.1 範囲\n本文", "## 第二章 勤務\n本文", "本文", "## 第３章 賃金"]
    assert heading_sections(pages) == ["front matter", "front matter", "第1章 総則", "第1章 総則",
                                       "第二章 勤務", "第二章 勤務", "第３章 賃金"]
    en = ["# Title\n## 1 Introduction", "## 2 Related Work\n## 2.1 Older", "text", "## 3 Method",
          "## 2019 Annual Report", "## 4 Results"]
    assert heading_sections(en) == ["1 Introduction", "2 Related Work", "2 Related Work", "3 Method", "3 Method",
                                    "4 Results"]
    assert heading_sections(["## PART I", "x", "## PART II Market", "x"]) == ["PART I", "PART I", "PART II Market",
                                                                           "PART II Market"]
    assert heading_sections(["## 제1장 총칙", "## 제2장 근무"]) == ["제1장 총칙", "제2장 근무"]
    # not a run: one chapter, numbers out of sequence, a year, chapters that start past the first third
    assert heading_sections(["## 第1章 総則", "本文", "本文"]) is None
    assert heading_sections(["## 3 Method", "## 5 Results"]) is None
    assert heading_sections(["## 2019 Report", "## 2020 Report"]) is None
    assert heading_sections(["x"] * 10 + ["## 1. Note", "## 2. Note"]) is None
    # a longer run that starts late (a filing's notes) gives way to a shorter one that starts early (its parts)
    filing = ["x", "## PART I", "x", "## PART II", "x", "## PART III", "x", "x", "x", "x", "x", "x",
              "## 1. Note", "## 2. Note", "## 3. Note", "## 4. Note"]
    assert heading_sections(filing) == ["front matter"] + ["PART I"] * 2 + ["PART II"] * 2 + ["PART III"] * 11


def test_pdf_without_outline_takes_its_chapter_headings_as_sections(isolated_env):
    pages = [[("就業規則", 22), ("この規則は従業員の労働条件を定める。", 10)],
             [("第1章 総則", 18), ("第1条 この規則は全ての従業員に適用する。", 10)],
             [("第1条の続きの本文です。", 10), ("二行目の本文。", 10)],
             [("第2章 勤務時間", 18), ("所定労働時間は1日8時間とする。", 10)]]
    src = make_pdf(isolated_env / "規程" / "就業規則.pdf", pages)
    db = isolated_env / "database"
    ingest_sources([src], db=db, progress=False, workers=1)
    by_page = {int(re.search(r"page_(\d+)", p)[1]): p.split("/")[2] for p in iter_pages(db)}
    assert by_page[1] == "front matter"
    assert by_page[2] == by_page[3] != by_page[4]
    assert by_page[2].startswith("第1章") and by_page[4].startswith("第2章")
    assert read(db, next(p for p in iter_pages(db) if p.endswith("page_004.md")))[0].section == by_page[4]


def test_printed_numbers_need_a_neighbour_that_agrees():
    # a cover and a contents page without a number, then 1, 2, (a full-page picture), 4, 5
    assert printed_numbers([set(), set(), {1}, {2}, set(), {4}, {5}]) == ["", "", "1", "2", "3", "4", "5"]
    # a lone number (a year in a footer, a figure number) agrees with no neighbour: not a page number
    assert printed_numbers([{2019}, set(), {7}, set(), set(), set(), set()]) == [""] * 7
    # two runs: front matter numbered from 1, then the body numbered from 1 again
    assert printed_numbers([{1}, {2}, {1, 2020}, {2}, {3}]) == ["1", "2", "1", "2", "3"]
    # a long gap is not filled: the numbering in between is not known
    assert printed_numbers([{1}, {2}] + [set()] * 6 + [{9}, {10}]) == ["1", "2"] + [""] * 6 + ["9", "10"]


def test_folio_forms_in_the_header_and_footer_bands():
    def at(y: float, text: str) -> list:  # a line record [block, x0, y0, x1, y1, size, bold, text] on an 800pt page
        return [0, 72.0, y, 300.0, y + 10, 9.0, False, text]

    forms = ["12", "- 13 -", "Page 14", "15 / 40", "16ページ", "p.17", "18쪽", "（１９）", "20 | Annual Report",
             "Annual Report | 21", "Case: 21-13199 Date Filed: 01/05/2022 Page: 22 of 40"]
    assert sorted(band_folios([at(780, t) for t in forms], 800)) == list(range(12, 23))
    assert band_folios([at(20, "33")], 800) == {33}  # in the header
    # not folios: mid-page numbers, numbers inside text
    assert band_folios([at(400, "22"), at(780, "Figure 3"), at(780, "2019 edition"), at(780, "1,234")],
                             800) == set()


def test_the_number_printed_on_a_page_goes_into_its_front_matter(isolated_env):
    # a manual: cover and contents unnumbered, then pages printed 1..6 in the footer, a year in the header
    doc = pymupdf.open()
    for i in range(8):
        page = doc.new_page()
        page.insert_text((72, 100), f"Chapter text number {i + 1}.", fontname="helv", fontsize=11)
        if i >= 2:
            page.insert_text((72, 40), "2024 edition", fontname="helv", fontsize=9)
            page.insert_text((290, page.rect.height - 30), f"- {i - 1} -", fontname="helv", fontsize=9)
    src = isolated_env / "c" / "manual.pdf"
    src.parent.mkdir(parents=True)
    doc.save(src)
    # a paper whose PDF carries page labels: roman front matter, then the proceedings' own numbering
    labelled = pymupdf.open()
    for i in range(4):
        labelled.new_page().insert_text((72, 100), f"Paper page {i + 1}.", fontname="helv", fontsize=11)
    labelled.set_page_labels([{"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1},
                              {"startpage": 2, "prefix": "", "style": "D", "firstpagenum": 6981}])
    paper = isolated_env / "c" / "paper.pdf"
    labelled.save(paper)
    db = isolated_env / "database"
    ingest_sources([src, paper], db=db, progress=False, workers=1)
    printed = {rel: read(db, rel)[0].printed_page for rel in iter_pages(db)}
    assert [printed[f"c/manual/pages_001-008/page_{n:03d}.md"] for n in range(1, 9)] == [
        "", "", "1", "2", "3", "4", "5", "6"]
    assert [printed[f"c/paper/pages_001-004/page_{n:03d}.md"] for n in range(1, 5)] == [
        "i", "ii", "6981", "6982"]
    text = (db / "c/manual/pages_001-008/page_005.md").read_text(encoding="utf-8")
    assert "page: 5\nprinted_page: 3\nrunning: 2024 edition\n---" in text  # the header's words leave the body
    assert "printed_page" not in (db / "c/manual/pages_001-008/page_001.md").read_text(encoding="utf-8")


def test_several_sections_on_one_page(isolated_env):
    src = make_pdf(isolated_env / "c" / "doc.pdf", body_pages(3), toc=[[1, "One", 1], [1, "Two", 2],
                                                                      [1, "Three", 2]])
    db = isolated_env / "database"
    ingest_sources([src], db=db, progress=False, workers=1)
    assert iter_pages(db) == ["c/doc/One/page_001.md", "c/doc/Three/page_003.md", "c/doc/Two/page_002.md"]


def test_pdf_table_and_heading_levels(isolated_env):
    path = isolated_env / "t" / "table.pdf"
    path.parent.mkdir()
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 80), "Specifications", fontname="helv", fontsize=20)
    page.insert_text((72, 110), "Details", fontname="helv", fontsize=14)
    rows = [["Item", "Value"], ["Width", "650 mm"], ["Mass", "95 kg"], ["Power", "100 V"]]
    y = 130
    for row in rows:
        for c, cell in enumerate(row):
            x = 72 + c * 150
            page.draw_rect(pymupdf.Rect(x, y, x + 150, y + 20), width=0.7)
            page.insert_text((x + 4, y + 14), cell, fontname="helv", fontsize=10)
        y += 20
    page.insert_text((72, y + 30), "Body text below the table.", fontname="helv", fontsize=10)
    doc.save(path)
    db = isolated_env / "database"
    ingest_sources([path], db=db, progress=False, workers=1)
    _, body = read(db, iter_pages(db)[0])
    assert "# Specifications" in body and "## Details" in body
    assert re.search(r"\|\s*Width\s*\|\s*650 mm\s*\|", body), body
    assert "Body text below the table." in body


def test_join_breaks_keeps_korean_spacing():
    assert join_breaks("してく\nださい") == "してください"
    assert join_breaks("주차 공간은\n20면입니다") == "주차 공간은\n20면입니다"
    assert join_breaks("새 사무실\n위치") == "새 사무실 위치"
    assert join_breaks("冷蔵 室") == "冷蔵室"


# ---------------------------------------------------------------------------------------- incremental


def test_incremental_skip_replace_force(isolated_env):
    src = make_pdf(isolated_env / "s" / "cat" / "doc.pdf", body_pages(4),
                   toc=[[1, "Old A", 1], [1, "Old B", 3]])
    db = isolated_env / "database"
    first = ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    assert first.pages == 4
    # a user adds a page in another folder and an optimizer copy next to ours
    (db / "mine").mkdir()
    (db / "mine" / "note.md").write_text("keep me")
    (db / "cat/doc/Old B/page_003_2.md").write_text("an optimizer copy")

    again = ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    assert (again.skipped, again.documents, again.pages) == (1, 0, 0)

    make_pdf(src, body_pages(2), toc=[[1, "New", 1]])  # changed: fewer pages, other sections
    changed = ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    assert (changed.documents, changed.pages, changed.skipped) == (1, 2, 0)
    assert sorted(changed.removed) == ["cat/doc/Old A/page_001.md", "cat/doc/Old A/page_002.md",
                                       "cat/doc/Old B/page_003.md", "cat/doc/Old B/page_004.md"]
    assert not (db / "cat/doc/Old A").exists()  # emptied folders go
    assert (db / "cat/doc/Old B/page_003_2.md").exists()  # never delete what we did not write
    assert (db / "mine" / "note.md").read_text() == "keep me"
    assert set(iter_pages(db)) == {"cat/doc/New/page_001.md", "cat/doc/New/page_002.md",
                                   "cat/doc/Old B/page_003_2.md", "mine/note.md"}

    forced = ingest_sources([isolated_env / "s"], db=db, force=True, progress=False, workers=1)
    assert (forced.documents, forced.pages, forced.skipped) == (1, 2, 0)
    assert not forced.outdated and not outdated_note(forced)
    code, out = run_cli("s", "--workers", "1")
    assert code == 0 and "Traceback" not in out


def test_forget_document_removes_its_pages_and_entry_and_a_later_ingest_brings_it_back(isolated_env):
    from ragkit.ingest import forget_document

    src = make_pdf(isolated_env / "s" / "cat" / "doc.pdf", body_pages(3))
    make_pdf(isolated_env / "s" / "cat" / "other.pdf", body_pages(2))
    db = isolated_env / "database"
    ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    (db / "cat/doc/note.md").write_text("a user's note")  # not a page this ingest wrote
    pages = [p for p in iter_pages(db) if p.startswith("cat/doc/") and p.endswith(".md") and "page_" in p]
    assert len(pages) == 3

    removed, copies = forget_document(db, "cat/doc", pages, sources_under=isolated_env / "uploads")
    assert sorted(removed) == sorted(pages)
    left = iter_pages(db)
    assert [p for p in left if p.startswith("cat/doc/")] == ["cat/doc/note.md"], left
    assert len([p for p in left if p.startswith("cat/other/")]) == 2, left
    assert src.exists()  # the user's own source is never deleted
    manifest = json.loads((db / ".ragkit" / "ingest-manifest.json").read_text(encoding="utf-8"))
    assert [v["folder"] for v in manifest["sources"].values()] == ["cat/other"]
    # the manifest forgot it: the same source is converted again, the other one is still unchanged
    again = ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    assert (again.documents, again.pages, again.skipped) == (1, 3, 1)


def test_forget_document_takes_one_page_as_a_str_or_path(isolated_env):
    """A str is one page, not its characters (each a path under the database: "c" would be a file there)."""
    from ragkit.ingest import forget_document

    make_pdf(isolated_env / "s" / "cat" / "doc.pdf", body_pages(3))
    db = isolated_env / "database"
    ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    pages = sorted(p for p in iter_pages(db) if p.startswith("cat/doc/") and "page_" in p)
    assert len(pages) == 3
    removed, _ = forget_document(db, "cat/doc", pages[0])
    assert removed == [pages[0]]
    removed, _ = forget_document(str(db), "cat/doc", Path(pages[1]))
    assert removed == [pages[1]]
    assert sorted(p for p in iter_pages(db) if p.startswith("cat/doc/")) == [pages[2]]


def _optimizer_copy(db: Path, original: str, folder: str) -> str:
    """A copy the optimizer made and kept (its own code: journaled, indexed, confirmed)."""
    from ragkit.optimize import CopyManager, Journal
    from ragkit.search import open_index

    journal = Journal(db)
    copies = CopyManager(db, open_index(db), journal)
    rel, created = copies.place(original, folder, "test")
    assert created
    copies.release(rel, "test", keep=True)
    journal.close()
    return rel


def test_optimizer_copies_follow_their_page_when_the_document_is_ingested_again(isolated_env):
    """The tester's report: after a page was deleted from the PDF, ingest replaced the document's pages but the
    optimizer's copy of page 2 kept serving the old page 2, with --force too. Now a copy is rewritten from the
    new page of the same number, or removed (with the folder it leaves empty) when that page is gone, and the
    summary says so."""
    src = make_pdf(isolated_env / "pdfs" / "英語レポート.pdf", body_pages(3, "Old"))
    db = isolated_env / "database"
    ingest_sources([src], db=db, category="pdfs", progress=False, workers=1)
    pages = sorted(p for p in iter_pages(db) if p.startswith("pdfs/英語レポート/"))
    section = pages[1].rsplit("/", 1)[0]
    copy2 = _optimizer_copy(db, pages[1], f"{section}/docket district court")
    copy3 = _optimizer_copy(db, pages[2], "pdfs/topic three")
    (db / "pdfs/topic three/note.md").write_text("a user's note")
    edited = _optimizer_copy(db, pages[2], "pdfs/edited")
    (db / edited).write_text((db / edited).read_text(encoding="utf-8") + "\nmy own line\n", encoding="utf-8")

    make_pdf(src, body_pages(2, "New"))  # one page fewer, every page's text changed
    code, out = run_cli(str(src), "--db", str(db), "--category", "pdfs", "--workers", "1")
    assert code == 0, out
    assert "1 refreshed from the new page, 1 removed (their page is gone)" in " ".join(out.split())
    new2 = next(p for p in iter_pages(db) if p.startswith("pdfs/英語レポート/") and p.endswith("page_002.md")
                and "docket" not in p)
    assert (db / copy2).read_bytes() == (db / new2).read_bytes()
    assert read(db, copy2)[0].page == 2 and "New2" in read(db, copy2)[1]
    assert not (db / copy3).exists() and (db / "pdfs/topic three/note.md").exists()
    assert "my own line" in (db / edited).read_text(encoding="utf-8")  # edited by hand: no longer a copy

    forced = ingest_sources([src], db=db, category="pdfs", force=True, progress=False, workers=1)
    assert (forced.copies_refreshed, forced.copies_removed) == ([], [])  # nothing changed: nothing to say
    assert (db / copy2).read_bytes() == (db / new2).read_bytes()


def test_removing_a_document_removes_its_copies(isolated_env):
    """--prune and serve's DELETE /documents (forget_document) left the optimizer's copies of the removed pages
    behind in the category, still searchable, copies of nothing."""
    from ragkit.ingest import forget_document

    make_pdf(isolated_env / "s" / "cat" / "guide.pdf", body_pages(2))
    make_pdf(isolated_env / "s" / "cat" / "other.pdf", body_pages(2))
    db = isolated_env / "database"
    ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    guide = sorted(p for p in iter_pages(db) if p.startswith("cat/guide/"))
    other = sorted(p for p in iter_pages(db) if p.startswith("cat/other/"))
    copy = _optimizer_copy(db, guide[0], "cat/topic")
    kept = _optimizer_copy(db, other[0], "cat/topic")
    os.replace(isolated_env / "s" / "cat" / "guide.pdf", isolated_env / "s" / "cat" / "guide v2.pdf")
    pruned = ingest_sources([isolated_env / "s"], db=db, prune=True, progress=False, workers=1)
    assert pruned.pruned == ["cat/guide"] and pruned.copies_removed == [copy]
    assert not (db / copy).exists() and (db / kept).exists()

    removed, copies = forget_document(db, "cat/other", other)
    assert sorted(removed) == other and copies == [kept]
    assert not (db / "cat/topic").exists()


def test_pages_from_an_earlier_converter_are_named_and_left_alone_until_forced(isolated_env):
    make_pdf(isolated_env / "s" / "cat" / "doc.pdf", body_pages(2))
    db = isolated_env / "database"
    ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    manifest_path = db / ".ragkit" / "ingest-manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    (entry,) = manifest["sources"].values()
    assert entry["converter"] == CONVERTER_VERSION
    assert not ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1).outdated

    # a database written before the manifest recorded the converter (version 1)
    del entry["converter"]
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    page = db / "cat/doc/pages_001-002/page_001.md"
    before = page.read_text(encoding="utf-8")
    again = ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    assert (again.skipped, again.documents, again.outdated) == (1, 0, [str(Path("s/cat/doc.pdf"))])
    assert page.read_text(encoding="utf-8") == before  # unchanged sources are not rewritten unasked
    note = outdated_note(again)
    assert "1 unchanged document (e.g. s/cat/doc.pdf) was converted by an earlier ragkit" in note
    assert "--force" in note and "printed page numbers" in note
    code, out = run_cli("s", "--workers", "1")
    assert code == 0 and "converted by an earlier ragkit" in " ".join(out.split())

    forced = ingest_sources([isolated_env / "s"], db=db, force=True, progress=False, workers=1)
    assert forced.documents == 1 and not forced.outdated
    assert not ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1).outdated


def test_moved_source_takes_over_its_folder(isolated_env):
    make_pdf(isolated_env / "a" / "cat" / "doc.pdf", body_pages(2))
    db = isolated_env / "database"
    ingest_sources([isolated_env / "a"], db=db, progress=False, workers=1)
    (isolated_env / "b").mkdir()
    os.replace(isolated_env / "a" / "cat", isolated_env / "b" / "cat")
    report = ingest_sources([isolated_env / "b"], db=db, progress=False, workers=1)
    assert not report.failed and report.pages == 2
    assert read(db, "cat/doc/pages_001-002/page_001.md")[0].source == "b/cat/doc.pdf"


def test_a_renamed_or_deleted_source_is_named_then_pruned_on_request(isolated_env):
    """A file renamed in the folder ingested left both documents in the database, silently, and search returned
    both: the run names the one whose file is gone, and --prune removes it (its pages, folders and manifest
    entry). A document ingested from elsewhere is never touched."""
    src = isolated_env / "src"
    make_pdf(src / "cat" / "guide.pdf", body_pages(2))
    make_pdf(src / "cat" / "notes.pdf", body_pages(1))
    make_pdf(isolated_env / "other" / "keep.pdf", body_pages(1))
    db = isolated_env / "database"
    ingest_sources([src], db=db, progress=False, workers=1)
    ingest_sources([isolated_env / "other"], db=db, progress=False, workers=1)
    os.replace(src / "cat" / "guide.pdf", src / "cat" / "guide v2.pdf")
    (src / "cat" / "notes.pdf").unlink()
    report = ingest_sources([src], db=db, progress=False, workers=1)
    assert sorted(report.orphans) == ["cat/guide", "cat/notes"] and report.pruned == []
    assert (db / "cat" / "guide").is_dir() and (db / "cat" / "guide v2").is_dir()  # kept unless asked
    result = CliRunner().invoke(app, ["ingest", str(src), "--db", str(db), "--prune"])
    assert result.exit_code == 0, result.output
    assert "pruned 2 document(s) whose file is gone: cat/guide, cat/notes" in result.output
    assert sorted(p.name for p in (db / "cat").iterdir()) == ["guide v2"]
    assert (db / "other" / "keep").is_dir()  # the other folder's document: not under the folders given
    again = ingest_sources([src], db=db, progress=False, workers=1)
    assert again.orphans == [] and again.skipped == 1


def test_pages_deleted_by_hand_are_written_again_by_the_next_ingest(isolated_env):
    """An unchanged source whose document folder (or one page file) was deleted by hand was skipped as
    unchanged, so only --force brought it back."""
    import shutil

    make_pdf(isolated_env / "src" / "cat" / "guide.pdf", body_pages(3))
    make_pdf(isolated_env / "src" / "cat" / "notes.pdf", body_pages(1))
    db = isolated_env / "database"
    first = ingest_sources([isolated_env / "src"], db=db, progress=False, workers=1)
    assert first.pages == 4
    shutil.rmtree(db / "cat" / "guide")
    again = ingest_sources([isolated_env / "src"], db=db, progress=False, workers=1)
    assert again.documents == 1 and again.pages == 3 and again.skipped == 1, again
    assert sorted(p.relative_to(db).as_posix() for p in db.rglob("page_*.md")) == sorted(first.written)
    (db / first.written[0]).unlink()
    assert ingest_sources([isolated_env / "src"], db=db, progress=False, workers=1).documents == 1
    assert ingest_sources([isolated_env / "src"], db=db, progress=False, workers=1).skipped == 2


def test_two_ingests_at_once_share_the_database_safely(isolated_env):
    import json
    import threading

    make_pdf(isolated_env / "t" / "a" / "one.pdf", body_pages(2))
    make_pdf(isolated_env / "t" / "b" / "two.pdf", body_pages(3))
    db = isolated_env / "database"
    reports: list[IngestReport] = []

    def run(sub: str):
        reports.append(ingest_sources([isolated_env / "t" / sub], db=db, progress=False, workers=1))

    threads = [threading.Thread(target=run, args=(sub,)) for sub in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.pages for r in reports) == [2, 3]
    manifest = json.loads((db / ".ragkit" / "ingest-manifest.json").read_text(encoding="utf-8"))
    assert len(manifest["sources"]) == 2  # neither run lost the other's record
    assert len(iter_pages(db)) == 5


def test_parallel_workers(isolated_env):
    for i in range(3):
        make_pdf(isolated_env / "p" / "cat" / f"d{i}.pdf", body_pages(2))
    db = isolated_env / "database"
    report = ingest_sources([isolated_env / "p"], db=db, progress=False, workers=2)
    assert (report.documents, report.pages, report.failed) == (3, 6, [])


# -------------------------------------------------------------------------------------------- DOCX/PPTX


def test_docx_split_on_page_breaks_and_headings(isolated_env):
    from docx import Document
    from docx.enum.text import WD_BREAK

    d = Document()
    d.core_properties.title = "規程"
    d.add_paragraph("前文です。")
    d.add_heading("第1章 総則", level=1)
    d.add_paragraph("総則の本文。")
    d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    d.add_paragraph("総則の続き。")
    d.add_heading("第2章 旅費", level=1)
    d.add_paragraph("旅費の本文。")
    d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    d.add_heading("第3章 精算", level=1)
    d.add_paragraph("精算の本文。")
    path = isolated_env / "o" / "規程.docx"
    path.parent.mkdir()
    d.save(path)

    nd = Document()
    nd.add_heading("Alpha", level=1)
    nd.add_paragraph("alpha text")
    nd.add_heading("Beta", level=1)
    nd.add_paragraph("beta text")
    nd.save(isolated_env / "o" / "nobreaks.docx")

    db = isolated_env / "database"
    report = ingest_sources([isolated_env / "o"], db=db, progress=False, workers=1)
    assert not report.failed
    pages = iter_pages(db)
    assert [p for p in pages if p.startswith("o/規程/")] == [
        "o/規程/第1章 総則/page_001.md", "o/規程/第2章 旅費/page_002.md", "o/規程/第3章 精算/page_003.md"]
    meta, body = read(db, "o/規程/第2章 旅費/page_002.md")
    assert meta.document == "規程" and "総則の続き。" in body and "旅費の本文" in body
    assert "RAGKIT" not in body
    assert [p for p in pages if p.startswith("o/nobreaks/")] == [
        "o/nobreaks/Alpha/page_001.md", "o/nobreaks/Beta/page_002.md"]
    assert "beta text" in read(db, "o/nobreaks/Beta/page_002.md")[1]


def test_pptx_one_page_per_slide(isolated_env):
    from pptx import Presentation

    prs = Presentation()
    for i in range(1, 4):
        s = prs.slides.add_slide(prs.slide_layouts[1])
        s.shapes.title.text = f"スライド{i}"
        s.placeholders[1].text = f"内容{i}"
    path = isolated_env / "deck" / "説明会.pptx"
    path.parent.mkdir()
    prs.save(path)
    db = isolated_env / "database"
    report = ingest_sources([path], db=db, progress=False, workers=1)
    assert not report.failed and report.pages == 3
    pages = iter_pages(db)
    assert pages == [f"deck/説明会/pages_001-003/page_00{i}.md" for i in (1, 2, 3)]
    meta, body = read(db, pages[1])
    assert meta.page == 2 and "スライド2" in body and "内容2" in body and "内容3" not in body


# ------------------------------------------------------------------------------------------- bad input


def _zero_page_pdf(path: Path) -> None:
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 3\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    path.write_bytes(bytes(out))


def test_bad_inputs_one_line_each_others_ingested(isolated_env):
    src = isolated_env / "bad" / "cat"
    good = make_pdf(src / "good.pdf", body_pages(2))
    make_pdf(src / "scan.pdf", [[("text page", 12)], []], font="helv")  # page 2 has no text layer
    data = good.read_bytes()
    (src / "corrupt.pdf").write_bytes(data[:9] + b"\x00garbage" * 50)
    (src / "notapdf.pdf").write_text("hello, I am text")
    _zero_page_pdf(src / "empty.pdf")
    enc = pymupdf.open(good)
    enc.save(src / "locked.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    (src / "gone.pdf").symlink_to(src / "does-not-exist.pdf")
    (src / "good.docx").write_text("a text file named like a DOCX")
    (src / "broken.pptx").write_bytes(b"PK\x03\x04 not really a zip")
    (src / "notes.txt").write_text("ignored while walking")
    other = make_pdf(isolated_env / "bad" / "other" / "good.pdf", body_pages(1))

    code, out = run_cli("bad", "--category", "same", "--workers", "2")
    assert code == 1, out
    assert "Traceback" not in out
    fails = {ln.split(": ", 2)[1]: ln for ln in out.splitlines() if ln.startswith("failed: ")}
    expect = {
        "bad/cat/corrupt.pdf": "corrupt PDF",
        "bad/cat/notapdf.pdf": "not a PDF",
        "bad/cat/empty.pdf": "no pages",
        "bad/cat/locked.pdf": "encrypted",
        "bad/cat/gone.pdf": "broken symbolic link",
        "bad/cat/good.docx": "not a DOCX file",
        "bad/cat/broken.pptx": "corrupt PPTX",
        # bad/cat/good.pdf came first and keeps same/good; bad/other/good.pdf would overwrite it
        "bad/other/good.pdf": "same folder same/good as bad/cat/good.pdf",
    }
    assert set(fails) == set(expect), out
    for name, reason in expect.items():
        assert reason in fails[name], fails[name]
    db = isolated_env / "database"
    assert iter_pages(db) == ["same/good/pages_001-002/page_001.md", "same/good/pages_001-002/page_002.md",
                              "same/scan/pages_001-002/page_001.md", "same/scan/pages_001-002/page_002.md"]
    assert read(db, "same/scan/pages_001-002/page_002.md")[1].strip() == NO_TEXT_MARKER
    assert read(db, "same/good/pages_001-002/page_001.md")[0].source == "bad/cat/good.pdf"
    assert other.exists()


def test_nothing_is_written_through_a_folder_linked_out_of_the_database(isolated_env):
    """Report s56-sec H1: a category folder that is a symlink out of the database took an ingest's pages (exit 0,
    a manifest entry); so did a document or section folder. Each is refused before anything is written, with one
    line naming the folder, and the other sources are ingested."""
    from ragkit.ingest.manifest import MANIFEST, load_manifest

    db = isolated_env / "database"
    outside = isolated_env / "outside"
    for name in ("cat", "doc", "section"):
        (outside / name).mkdir(parents=True)
    (db / "linked").mkdir(parents=True)
    (db / "linked" / "doc2").symlink_to(outside / "doc")  # a document folder
    (db / "linked" / "doc3" / "pages_001-002").parent.mkdir()
    (db / "linked" / "doc3" / "pages_001-002").symlink_to(outside / "section")  # a section folder
    (db / "real").mkdir()
    (db / "inside").symlink_to(db / "real")  # a link that stays inside is a folder like any other
    src = isolated_env / "in"
    for stem in ("doc1", "doc2", "doc3"):
        make_pdf(src / f"{stem}.pdf", body_pages(2))
    (db / "linkcat").symlink_to(outside / "cat")
    code, out = run_cli(str(src / "doc1.pdf"), "--category", "linkcat")
    assert code == 1 and "failed: in/doc1.pdf: the folder 'linkcat' is a symbolic link that leads out of the " \
        "database" in out, out
    code, out = run_cli("in", "--category", "linked")
    assert code == 1, out
    fails = sorted(ln for ln in out.splitlines() if ln.startswith("failed: "))
    assert fails == ["failed: in/doc2.pdf: the folder 'linked/doc2' is a symbolic link that leads out of the "
                     "database; nothing is written through it",
                     "failed: in/doc3.pdf: the folder 'linked/doc3/pages_001-002' is a symbolic link that leads "
                     "out of the database; nothing is written through it"], out
    assert iter_pages(db) == ["linked/doc1/pages_001-002/page_001.md", "linked/doc1/pages_001-002/page_002.md"]
    assert not [p for p in outside.rglob("*") if p.is_file()]
    assert [e["folder"] for e in load_manifest(db / ".ragkit" / MANIFEST)["sources"].values()] == ["linked/doc1"]
    report = ingest_sources([src / "doc1.pdf"], db=db, category="inside", progress=False, workers=1)
    assert not report.failed and report.pages == 2


def test_a_clash_of_long_names_is_one_short_line_that_tells_them_apart(isolated_env):
    # two names that differ only after the 80 characters a folder name keeps
    names = ["가" * 40 + "나" * 43, "가" * 40 + "나" * 40 + "다" * 3]
    for name in names:
        make_pdf(isolated_env / "long" / f"{name}.pdf", body_pages(1))
    code, out = run_cli("long")
    assert code == 1, out
    [line] = [ln for ln in out.splitlines() if ln.startswith("failed: ")]
    failing, reason = line.removeprefix("failed: ").split(": ", 1)
    owner = next(n for n in names if n not in failing)
    assert failing.startswith("long/") and Path(failing).stem in names  # named in full, as every failure is
    # the folder's and the other file's names clipped (each 80+ characters, 400+ in all before); the command that
    # follows names the failing file in full, as a command must
    said, command = reason.split("`rag ingest ", 1)
    assert len(said) < 230 and said.count("…") == 2, reason
    assert command.startswith(f"{failing} --db database --category ")
    assert reason.startswith(f"would go to the same folder long/{'가' * 20}…")
    assert f"{owner[-10:]}.pdf; rename one of them" in reason  # the other file's end tells it apart


def test_the_same_file_named_another_way_is_the_same_source(isolated_env, monkeypatch):
    """The manifest keyed a source by its absolute path as given (`/x/proj/../src/a.pdf`), so the same file named
    from another working directory, by its absolute path or through a symlink failed as "would go to the same
    folder ... as" itself (exit 1). Now it is the same source: skipped when unchanged, updated when changed; the
    front matter names it relative to the working directory, or absolutely outside it (DESIGN §1), never `../`."""
    src = make_pdf(isolated_env / "src" / "upload" / "guide.pdf", body_pages(2))
    (isolated_env / "src-link").symlink_to(isolated_env / "src")
    (isolated_env / "proj").mkdir()
    monkeypatch.chdir(isolated_env / "proj")
    code, out = run_cli("../src/upload", "--db", "../db")
    assert code == 0, out
    db = isolated_env / "db"
    page = "upload/guide/pages_001-002/page_001.md"
    monkeypatch.chdir(isolated_env)
    for spelling in ("src/upload", str(isolated_env / "src" / "upload"), "src-link/upload",
                     "proj/../src/upload/guide.pdf"):
        code, out = run_cli(spelling, "--db", "db")
        assert code == 0 and "failed:" not in out, (spelling, out)
        assert re.search(r"│\s+0 │\s+0 │\s+1 │\s+0 │", out), (spelling, out)  # 0 documents, 0 pages, 1 unchanged
    assert read(db, page)[0].source == str(src)  # outside the working directory: absolute, not ../src/...
    make_pdf(src, body_pages(3))
    code, out = run_cli("src-link/upload", "--db", "db")
    assert code == 0 and "failed:" not in out, out
    assert len(iter_pages(db)) == 3
    manifest = json.loads((db / ".ragkit" / "ingest-manifest.json").read_text(encoding="utf-8"))
    assert list(manifest["sources"]) == [str(src)]  # one record, under the file's real path
    assert read(db, "upload/guide/pages_001-003/page_001.md")[0].source == "src-link/upload/guide.pdf"


def test_a_database_recorded_with_unnormalised_paths_keeps_working(isolated_env):
    """A manifest an older ragkit wrote (`/x/proj/../src/a.pdf`) is read as the same source: unchanged is
    skipped, changed replaces that record (one record left, its old pages gone)."""
    src = make_pdf(isolated_env / "src" / "cat" / "a.pdf", body_pages(2))
    db = isolated_env / "db"
    ingest_sources([src], db=db, progress=False, workers=1)
    path = db / ".ragkit" / "ingest-manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    old_key = str(isolated_env / "proj" / ".." / "src" / "cat" / "a.pdf")
    manifest["sources"] = {old_key: manifest["sources"][str(src)]}
    path.write_text(json.dumps(manifest), encoding="utf-8")
    again = ingest_sources([isolated_env / "src"], db=db, progress=False, workers=1)
    assert (again.failed, again.skipped, again.documents) == ([], 1, 0)
    make_pdf(src, body_pages(3))
    changed = ingest_sources([isolated_env / "src"], db=db, progress=False, workers=1)
    assert (changed.failed, changed.documents, changed.pages) == ([], 1, 3)
    assert list(json.loads(path.read_text(encoding="utf-8"))["sources"]) == [str(src)]
    assert iter_pages(db) == [f"cat/a/pages_001-003/page_00{i}.md" for i in (1, 2, 3)]


def test_a_shared_folder_mounted_elsewhere_is_the_same_document(isolated_env):
    """The shared sources mounted at a second path: on the same machine (both paths exist) the same content at the
    same destination folder is the same document (skipped), not a clash; where the recorded path does not exist
    (another machine) it is taken over as a moved file, without a failure; a changed file updates the document; a
    different file beside the recorded one, which still exists, is still a clash."""
    a = make_pdf(isolated_env / "mnt-a" / "docs" / "manual.pdf", body_pages(2))
    db = isolated_env / "db"
    ingest_sources([isolated_env / "mnt-a"], db=db, progress=False, workers=1)
    b = isolated_env / "mnt-b" / "docs" / "manual.pdf"
    b.parent.mkdir(parents=True)
    b.write_bytes(a.read_bytes())
    both = ingest_sources([isolated_env / "mnt-b"], db=db, progress=False, workers=1)  # mnt-a is there too
    assert (both.failed, both.skipped, both.documents) == ([], 1, 0)
    (isolated_env / "mnt-a").rename(isolated_env / "elsewhere")  # the other machine: only mnt-b is there
    alone = ingest_sources([isolated_env / "mnt-b"], db=db, progress=False, workers=1)
    # taken over as a moved file is (test_moved_source_takes_over_its_folder): its pages name where it is now
    assert (alone.failed, alone.documents, alone.pages, alone.orphans) == ([], 1, 2, [])
    assert read(db, "docs/manual/pages_001-002/page_001.md")[0].source == "mnt-b/docs/manual.pdf"
    make_pdf(b, body_pages(3))
    changed = ingest_sources([isolated_env / "mnt-b"], db=db, progress=False, workers=1)
    assert (changed.failed, changed.documents, changed.pages) == ([], 1, 3)
    assert len(iter_pages(db)) == 3
    # a different file where the recorded one exists: two files, one folder
    other = make_pdf(isolated_env / "mnt-c" / "docs" / "manual.pdf", body_pages(1))
    clash = ingest_sources([other], db=db, progress=False, workers=1)
    assert len(clash.failed) == 1 and "would go to the same folder docs/manual" in clash.failed[0][1], clash.failed


def test_nested_folders_the_recorded_source_keeps_its_folder_and_the_hint_works_inside_a_walk(isolated_env):
    """Report s57-office M1: src/規程/人事/通達.pdf (ingested earlier) and a new src/大阪支社/人事/通達.pdf both map to
    人事/通達. The walk meets the new one first: it took the folder, then failed at the write, and the recorded one
    failed too, on every run. Now the recorded one keeps its folder (skipped, unchanged) and the new one fails with
    a command for that file alone; once followed, later walks of src/ keep it in its category, with no failure."""
    src, db = isolated_env / "src", isolated_env / "database"
    make_pdf(src / "規程" / "人事" / "通達.pdf", body_pages(2, "本社"))
    first = ingest_sources([src], db=db, progress=False, workers=1)
    assert (first.failed, first.documents) == ([], 1)
    make_pdf(src / "大阪支社" / "人事" / "通達.pdf", body_pages(1, "支社"))
    for _ in range(2):
        run = ingest_sources([src], db=db, progress=False, workers=1)
        assert [f[0] for f in run.failed] == ["src/大阪支社/人事/通達.pdf"] and run.skipped == 1, run.failed
        assert "would go to the same folder 人事/通達 as src/規程/人事/通達.pdf" in run.failed[0][1]
        assert "本社1" in " ".join(p.read_text(encoding="utf-8") for p in (db / "人事/通達").rglob("*.md"))
    command = re.search(r"`rag ingest (.+?)` \(later ingests", run.failed[0][1]).group(1)
    assert command == "src/大阪支社/人事/通達.pdf --db database --category 大阪支社_人事"
    code, out = run_cli(*shlex.split(command), "--workers", "1")
    assert code == 0, out
    assert [p for p in iter_pages(db) if p.startswith("大阪支社_人事/")] == ["大阪支社_人事/通達/page_001/page_001.md"]
    again = ingest_sources([src], db=db, progress=False, workers=1)  # the routine walk: nothing fails or moves
    assert (again.failed, again.skipped, again.documents) == ([], 2, 0)
    make_pdf(src / "大阪支社" / "人事" / "通達.pdf", body_pages(2, "支社"))  # edited: updated where it is
    edited = ingest_sources([src], db=db, progress=False, workers=1)
    assert (edited.failed, edited.documents) == ([], 1)
    assert sorted(p.split("/")[0] for p in iter_pages(db)) == ["人事"] * 2 + ["大阪支社_人事"] * 2
    copy = src / "東京" / "人事" / "通達.pdf"  # an identical copy of the recorded one: the same document, no clash
    copy.parent.mkdir(parents=True)
    copy.write_bytes((src / "規程" / "人事" / "通達.pdf").read_bytes())
    same = ingest_sources([src], db=db, progress=False, workers=1)
    assert (same.failed, same.skipped, same.documents) == ([], 3, 0)


def test_pages_without_text_are_counted_not_failed(isolated_env):
    src = make_pdf(isolated_env / "x" / "scan.pdf", [[], []])
    report = ingest_sources([src], db=isolated_env / "database", progress=False, workers=1)
    assert (report.failed, report.pages, report.pages_without_text) == ([], 2, 2)


@pytest.mark.parametrize("setup,needle", [
    (lambda w: None, "no such file or folder"),
    (lambda w: (w / "missing").mkdir(), "no PDF, DOCX or PPTX files"),
    (lambda w: (w / "missing").write_text("x"), "unsupported file type"),
])
def test_unusable_single_source_exit_1(isolated_env, setup, needle):
    setup(isolated_env)
    code, out = run_cli("missing")
    assert code == 1 and "Traceback" not in out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and "missing" in lines[0] and needle in lines[0], out


def test_unsupported_given_explicitly_next_to_good_file(isolated_env):
    good = make_pdf(isolated_env / "d" / "ok.pdf", body_pages(1))
    (isolated_env / "d" / "sheet.xlsx").write_text("x")
    code, out = run_cli(str(good), "d/sheet.xlsx", "--workers", "1")
    assert code == 1 and "failed: d/sheet.xlsx: unsupported file type '.xlsx'" in out
    assert (isolated_env / "database" / "d" / "ok").is_dir()


def test_an_hwp_file_says_to_convert_it_first(isolated_env):
    """Report s57-ko M5: `.hwp`, the format most Korean regulations come in, got "use PDF, DOCX or PPTX", and in a
    folder only "ignored 1 file(s) of other types": nothing said what to do with it."""
    good = make_pdf(isolated_env / "d" / "ok.pdf", body_pages(1))
    (isolated_env / "d" / "업무 보고서.hwp").write_bytes(b"HWP Document File")
    code, out = run_cli(str(good), "d/업무 보고서.hwp", "--workers", "1")
    assert code == 1 and "failed: d/업무 보고서.hwp: unsupported file type '.hwp': HWP (Hangul word processor) is " \
        "not read; save it as PDF or DOCX first" in " ".join(out.split()), out
    (isolated_env / "d" / "규정.hwpx").write_bytes(b"PK")
    code, out = run_cli("d", "--workers", "1")
    assert code == 0 and "ignored 2 file(s) of other types" in out, out
    assert "HWP/HWPX files are not read: save them as PDF or DOCX first" in " ".join(out.split()), out


def test_unreadable_file_reports_reason(isolated_env):
    src = make_pdf(isolated_env / "u" / "secret.pdf", body_pages(1))
    if os.geteuid() == 0:  # root reads anything: a directory named like a PDF cannot be read as a file
        src.unlink()
        src.mkdir()
        make_pdf(isolated_env / "u" / "readable.pdf", body_pages(1))
        code, out = run_cli("u/secret.pdf", "u/readable.pdf", "--workers", "1")
        assert code == 1 and "u/secret.pdf" in out and "Traceback" not in out
    else:
        src.chmod(0)
        code, out = run_cli("u", "--workers", "1")
        assert code == 1 and "failed: u/secret.pdf: cannot read file (Permission denied)" in out


def test_print_report_lists_failures(isolated_env):
    from io import StringIO

    from rich.console import Console

    buf, err = StringIO(), StringIO()
    rep = IngestReport(documents=2, pages=5, skipped=1, failed=[("a [b].pdf", "corrupt PDF")], pages_without_text=1)
    print_ingest_report(rep, Console(file=buf, width=120), Console(file=err, width=120))
    text = buf.getvalue()
    assert "documents" in text and "failed:" not in text  # the failures are errors: on stderr (report s54 L2)
    assert "failed: a [b].pdf: corrupt PDF" in err.getvalue()


def test_empty_source_list():
    with pytest.raises(RagError):
        ingest_sources([], db=Path("database"), progress=False)


# ----------------------------------------------------------------------------------------- sample corpus


def test_sample_questions_reference_existing_pages(sample_db):
    with open(EXAMPLES / "questions.csv", encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 12
    assert list(rows[0]) == ["Question", "Ground Truth", "Reference Document", "Page", "Checklist"]
    unanswerable = multi = 0
    for row in rows:
        refs = [r for r in row["Reference Document"].splitlines() if r.strip()]
        if not refs:
            unanswerable += 1
            continue
        multi += len(refs) > 1
        pages = row["Page"].splitlines()
        assert len(pages) == len(refs)
        for ref, page in zip(refs, pages, strict=True):
            assert ref.startswith("database/")
            path = sample_db / ref.removeprefix("database/")
            assert path.is_file(), ref
            meta, _ = parse_page(path.read_text(encoding="utf-8"))
            assert meta.page == int(page)
        assert 2 <= len(row["Checklist"].splitlines()) <= 4
    assert unanswerable >= 3 and multi >= 2


def test_sample_corpus_shape(sample_db):
    pages = iter_pages(sample_db)
    fridge = [p for p in pages if p.startswith("家電/冷蔵庫_取扱説明書/")]
    assert len(fridge) >= 20
    sections = {p.split("/")[2] for p in fridge}
    assert {"安全上のご注意", "各部の名前", "使いかた", "お手入れ", "仕様"} <= sections
    assert any("|---" in (sample_db / p).read_text(encoding="utf-8") for p in fridge)
    assert any(p.startswith("공지/") for p in pages) and any(p.endswith(".md") and "新製品説明会" in p for p in pages)
    assert sum(p.stat().st_size for p in (EXAMPLES / "corpus").rglob("*") if p.is_file()) < 3 * 1024 * 1024


def test_docx_last_rendered_page_breaks(isolated_env):
    from docx import Document
    from docx.oxml import OxmlElement

    d = Document()
    d.add_heading("Intro", level=1)
    d.add_paragraph("first page text")
    para = d.add_paragraph("second page text")  # Word marks where it last paginated
    para.runs[0]._r.insert(0, OxmlElement("w:lastRenderedPageBreak"))
    path = isolated_env / "w" / "rendered.docx"
    path.parent.mkdir()
    d.save(path)
    db = isolated_env / "database"
    report = ingest_sources([path], db=db, progress=False, workers=1)
    assert report.pages == 2
    assert iter_pages(db) == ["w/rendered/Intro/page_001.md", "w/rendered/Intro/page_002.md"]
    assert "second page text" in read(db, "w/rendered/Intro/page_002.md")[1]
    assert "second page text" not in read(db, "w/rendered/Intro/page_001.md")[1]


# Title, Subtitle and Heading 1 as a Japanese or Korean Word (or a template made in one) may name them, with
# style ids that are not the English ones; the Korean Heading 1 is a style of the user's own that only sets an
# outline level
_LOCALISED_STYLES = {
    "en": {},
    "ja": {"Title": ("表題", "a3"), "Subtitle": ("副題", "a5"), "Heading 1": ("見出し 1", "1")},
    "ko": {"Title": ("제목", "a3"), "Subtitle": ("부제", "a5"), "Heading 1": ("조항", "a7")},
}


@pytest.mark.parametrize("lang", sorted(_LOCALISED_STYLES))
def test_docx_title_style_is_the_documents_title_and_top_heading(isolated_env, lang):
    from docx import Document
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    d = Document()
    styles = {}
    for builtin in ("Title", "Subtitle", "Heading 1"):
        name, sid = _LOCALISED_STYLES[lang].get(builtin, (builtin, ""))
        if lang == "ko" and builtin == "Heading 1":
            st = d.styles.add_style(name, WD_STYLE_TYPE.PARAGRAPH)
            lvl = OxmlElement("w:outlineLvl")
            lvl.set(qn("w:val"), "0")
            st.element.get_or_add_pPr().append(lvl)
        else:
            st = d.styles[builtin]
            st.name = name
        if sid:
            st.style_id = sid
        styles[builtin] = st
    d.add_paragraph("Remote Work Policy", style=styles["Title"])
    d.add_paragraph("Effective 2025", style=styles["Subtitle"])
    d.add_paragraph("1. Eligibility", style=styles["Heading 1"])
    d.add_paragraph("Employees may work remotely.")
    d.add_paragraph("2. Equipment", style=styles["Heading 1"])
    d.add_paragraph("A monitor allowance of 300 USD.")
    path = isolated_env / "w" / "policy.docx"
    path.parent.mkdir()
    d.save(path)
    db = isolated_env / "database"
    assert not ingest_sources([path], db=db, progress=False, workers=1).failed
    pages = iter_pages(db)
    # the title opens the document (its front matter); the Heading 1s are the sections, one level down
    assert pages == ["w/policy/1. Eligibility/page_002.md", "w/policy/2. Equipment/page_003.md",
                     "w/policy/front matter/page_001.md"]
    assert {read(db, p)[0].document for p in pages} == {"Remote Work Policy"}
    front = read(db, "w/policy/front matter/page_001.md")[1]
    assert front.splitlines()[0] == "# Remote Work Policy"
    assert "Effective 2025" in front and "#" not in front.replace("# Remote Work Policy", "")  # no section
    assert read(db, pages[0])[1].startswith("## 1. Eligibility")


def test_docx_table_header_is_its_first_row_as_in_pptx(isolated_env):
    from docx import Document
    from pptx import Presentation
    from pptx.util import Inches

    cells = [["Item", "Allowance", "Renewal"], ["Monitor", "300 USD", "3 years"]]
    d = Document()
    t = d.add_table(rows=2, cols=3)
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    tp = slide.shapes.add_table(2, 3, Inches(1), Inches(1), Inches(6), Inches(1)).table
    for r, row in enumerate(cells):
        for c, v in enumerate(row):
            t.cell(r, c).text = v
            tp.cell(r, c).text = v
    (isolated_env / "o").mkdir()
    d.save(isolated_env / "o" / "table.docx")
    prs.save(isolated_env / "o" / "deck.pptx")
    db = isolated_env / "database"
    assert not ingest_sources([isolated_env / "o"], db=db, progress=False, workers=1).failed
    expected = "| Item | Allowance | Renewal |\n| --- | --- | --- |\n| Monitor | 300 USD | 3 years |"
    for p in iter_pages(db):
        assert read(db, p)[1].strip() == expected, p


def test_pptx_uses_the_decks_own_sections(isolated_env):
    from lxml import etree
    from pptx import Presentation

    prs = Presentation()
    for i in range(1, 4):
        s = prs.slides.add_slide(prs.slide_layouts[5])
        s.shapes.title.text = f"Slide {i}"
    ids = [s.slide_id for s in prs.slides]
    p14 = "http://schemas.microsoft.com/office/powerpoint/2010/main"
    sections = [("Opening", ids[:1]), ("Details", ids[1:])]
    xml = (f'<p:extLst xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main">'
           f'<p:ext uri="{{521415D9-36F7-43E2-AB2F-B90AF26B5E84}}"><p14:sectionLst xmlns:p14="{p14}">'
           + "".join(f'<p14:section name="{name}" id="{{00000000-0000-0000-0000-00000000000{k}}}"><p14:sldIdLst>'
                     + "".join(f'<p14:sldId id="{i}"/>' for i in sids) + "</p14:sldIdLst></p14:section>"
                     for k, (name, sids) in enumerate(sections))
           + "</p14:sectionLst></p:ext></p:extLst>")
    prs.part._element.append(etree.fromstring(xml))
    path = isolated_env / "deck" / "sections.pptx"
    path.parent.mkdir()
    prs.save(path)
    db = isolated_env / "database"
    ingest_sources([path], db=db, progress=False, workers=1)
    assert iter_pages(db) == ["deck/sections/Details/page_002.md", "deck/sections/Details/page_003.md",
                              "deck/sections/Opening/page_001.md"]
