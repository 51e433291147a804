"""DOCX and PPTX conversion: what a slide's shapes and a Word document's parts become in the page files (report
s57-office: tables closed off, bullets kept apart, running lines, footnotes, titles, chapters in body text,
page size, password-protected files)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.core.pagefile import parse_page
from ragkit.ingest.office import PAGE_CHARS, convert_docx, convert_pptx
from ragkit.ingest.pages import ConvertError, Job

OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def convert(path: Path) -> list[tuple[object, str]]:
    """(front matter, body) of each page the converter makes of one file."""
    kind = path.suffix.lower()
    job = Job(str(path), path.name, kind, str(path.parent / "db"), "cat/doc")
    res = (convert_docx if kind == ".docx" else convert_pptx)(job)
    return [(meta, body.strip()) for meta, body in map(parse_page, res.texts)]


# ------------------------------------------------------------------------------------------------- PPTX


def _deck(path: Path, slides: list[dict]) -> Path:
    """A deck of title-and-content slides: title, bullets (body placeholder paragraphs as (level, text)),
    a table, a chart, extra text boxes (each a list of paragraphs), a group of boxes."""
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    prs = Presentation()
    for spec in slides:
        s = prs.slides.add_slide(prs.slide_layouts[1] if "bullets" in spec else prs.slide_layouts[5])
        s.shapes.title.text = spec["title"]
        if "bullets" in spec:
            tf = s.placeholders[1].text_frame
            for i, (level, text) in enumerate(spec["bullets"]):
                p = tf.paragraphs[0] if i == 0 else tf.add_paragraph()
                p.text, p.level = text, level
        top = Inches(2)
        if "table" in spec:
            rows = spec["table"]
            t = s.shapes.add_table(len(rows), len(rows[0]), Inches(1), top, Inches(6), Inches(1.5)).table
            for r, row in enumerate(rows):
                for c, v in enumerate(row):
                    t.cell(r, c).text = v
            top += Inches(2)
        if "chart" in spec:
            data = CategoryChartData()
            data.categories = [c for c, _v in spec["chart"]]
            data.add_series("売上高（億円）", [v for _c, v in spec["chart"]])
            s.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), top, Inches(6), Inches(3), data)
            top += Inches(3)
        if "group" in spec:
            g = s.shapes.add_group_shape()
            for i, text in enumerate(spec["group"]):
                g.shapes.add_textbox(Inches(1 + i * 1.5), top, Inches(1.4), Inches(0.5)).text_frame.text = text
            top += Inches(0.6)
        for k, paras in enumerate(spec.get("boxes", [])):
            tf = s.shapes.add_textbox(Inches(1), top + Inches(0.5 * k), Inches(5), Inches(0.4)).text_frame
            for i, text in enumerate(paras):
                (tf.paragraphs[0] if i == 0 else tf.add_paragraph()).text = text
    path.parent.mkdir(parents=True, exist_ok=True)
    prs.save(path)
    return path


def test_pptx_chart_and_table_are_closed_off_from_the_next_shape(tmp_path):
    """Report H2: the chart's last row read `| 2025年度 | 498.0 |社外秘`, and a line right under a table row is one
    more row of it in markdown; the offline answer then quoted the wrong year."""
    path = _deck(tmp_path / "d.pptx", [
        {"title": "売上高の推移", "chart": [("2024年度", 455.0), ("2025年度", 498.0)], "boxes": [["出典：決算資料"]]},
        {"title": "初任給", "table": [["区分", "初任給"], ["大学卒", "260,000円"]], "boxes": [["2026年4月時点"]]},
    ])
    (_m1, chart), (_m2, table) = convert(path)
    assert "| 2025年度 | 498.0 |\n\n出典：決算資料" in chart, chart
    assert "| 大学卒 | 260,000円 |\n\n2026年4月時点" in table, table
    for body in (chart, table):
        assert all(ln.endswith("|") for ln in body.splitlines() if ln.startswith("|")), body


def test_pptx_bullets_stay_apart_as_list_items(tmp_path):
    """Report M3: a body placeholder's paragraphs were bare lines ("本社：東京都千代田区\\n事業：…"), one paragraph in
    markdown, run together by snippets and question generation."""
    from ragkit.genqa.pagetext import parse_blocks

    path = _deck(tmp_path / "d.pptx", [{
        "title": "会社概要",
        "bullets": [(0, "設立：1985年"), (0, "本社：東京都千代田区"), (1, "大阪支社あり"), (0, "事業：専門商社")],
        "group": ["エントリー", "書類選考", "内定"],
        "boxes": [["出典", "2026年3月時点"]],
    }])
    [(_meta, body)] = convert(path)
    assert "- 設立：1985年\n- 本社：東京都千代田区\n  - 大阪支社あり\n- 事業：専門商社" in body, body
    assert "- エントリー\n- 書類選考\n- 内定" in body, body  # a group of boxes: a flow chart's steps
    assert "出典\n\n2026年3月時点" in body, body  # a text box's plain paragraphs
    paragraphs = [p for b in parse_blocks(body) for p in b.paragraphs]
    assert "本社：東京都千代田区" in paragraphs and "エントリー" in paragraphs, paragraphs


def test_pptx_text_on_most_slides_is_a_running_line(tmp_path):
    """Report M6: a 社外秘 box on every slide was in every slide's body (and glued into its table). Text repeated
    on most slides goes to `running`, once; a title repeated as often, or a box on few slides, stays."""
    secret = ["社外秘"]
    path = _deck(tmp_path / "d.pptx", [
        {"title": "会社概要", "bullets": [(0, "設立：1985年")], "boxes": [secret]},
        {"title": "会社概要", "table": [["区分", "初任給"], ["大学卒", "260,000円"]], "boxes": [secret]},
        {"title": "会社概要", "bullets": [(0, "本社：東京")], "boxes": [secret, ["出典：社内資料"]]},
        {"title": "選考", "bullets": [(0, "面接")], "boxes": [["出典：社内資料"]]},
    ])
    pages = convert(path)
    assert [m.running for m, _b in pages] == ["社外秘", "社外秘", "社外秘", ""]
    assert all("社外秘" not in b for _m, b in pages)
    assert all(b.startswith(("# 会社概要", "# 選考")) for _m, b in pages)
    assert pages[1][1].endswith("| 大学卒 | 260,000円 |")
    assert "出典：社内資料" in pages[2][1] and "出典：社内資料" in pages[3][1]


# ------------------------------------------------------------------------------------------------- DOCX


def _with_footnote(path: Path, after: str, note: str) -> None:
    """Add footnote 1 (text `note`) to a saved DOCX, referenced after the text `after`."""
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    with zipfile.ZipFile(path) as zf:
        files = {i.filename: zf.read(i.filename) for i in zf.infolist()}
    doc = files["word/document.xml"].decode()
    doc = doc.replace(f"{after}</w:t></w:r>", f'{after}</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r>', 1)
    files["word/document.xml"] = doc.encode()
    files["word/footnotes.xml"] = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{w}">'
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
        '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
        f'</w:footnote><w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t>{note}</w:t></w:r></w:p>'
        '</w:footnote></w:footnotes>').encode()
    files["[Content_Types].xml"] = files["[Content_Types].xml"].decode().replace(
        "</Types>", '<Override PartName="/word/footnotes.xml" ContentType="application/vnd.openxmlformats-'
        'officedocument.wordprocessingml.footnotes+xml"/></Types>').encode()
    files["word/_rels/document.xml.rels"] = files["word/_rels/document.xml.rels"].decode().replace(
        "</Relationships>", '<Relationship Id="rIdFn1" Type="http://schemas.openxmlformats.org/officeDocument/'
        '2006/relationships/footnotes" Target="footnotes.xml"/></Relationships>').encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def _page_field(paragraph) -> None:
    from docx.oxml import parse_xml

    paragraph.add_run("- ")
    paragraph._p.append(parse_xml(
        '<w:fldSimple xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" w:instr=" PAGE ">'
        "<w:r><w:t>1</w:t></w:r></w:fldSimple>"))
    paragraph.add_run(" -")


def _rules(path: Path, *, header: bool = True, footnote: bool = True) -> Path:
    """A 規程 of three chapters split by page breaks, a header 社外秘 and a page-number footer, a footnote
    referenced in chapter 1."""
    from docx import Document
    from docx.enum.text import WD_BREAK

    d = Document()
    d.core_properties.title = "就業規則"
    for n, (chapter, text) in enumerate([("総則", "事項を定める。"), ("勤務", "始業は午前9時。"), ("賃金", "毎月25日に支払う。")]):
        if n:
            d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
        d.add_heading(f"第{n + 1}章 {chapter}", level=1)
        d.add_paragraph(text)
    if header:
        d.sections[0].header.paragraphs[0].text = "社外秘　株式会社サンプル商事"
        _page_field(d.sections[0].footer.paragraphs[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(path)
    if footnote:
        _with_footnote(path, "事項を定める。", "従業員には試用期間中の者を含む。")
    return path


def test_docx_header_and_footer_are_running_lines(tmp_path):
    """Report M6: a DOCX's header (社外秘 …) was dropped without a trace; it is each page's `running` line now, and
    a footer that is only the page number says nothing more."""
    pages = convert(_rules(tmp_path / "就業規則.docx", footnote=False))
    assert len(pages) == 3
    assert {m.running for m, _b in pages} == {"社外秘 株式会社サンプル商事"}
    assert all("社外秘" not in b and "- 1 -" not in b for _m, b in pages)


def test_docx_footnote_is_on_the_page_that_cites_it(tmp_path):
    """Report M2: the footnote went to the end of the document's last page, as item 1 of a list, with dead
    `#footnote-1` anchors."""
    pages = convert(_rules(tmp_path / "就業規則.docx", header=False))
    bodies = [b for _m, b in pages]
    assert "事項を定める。[^1]" in bodies[0], bodies[0]
    assert bodies[0].rstrip().endswith("[^1]: 従業員には試用期間中の者を含む。"), bodies[0]
    assert all("試用期間" not in b for b in bodies[1:]), bodies
    assert not any("#footnote" in b or "↑" in b for b in bodies)


def test_docx_opening_with_chapter_one_is_named_by_its_file(tmp_path):
    """Report M4: no title in the metadata and a first heading 「第1章 目的」: the document is its file's stem, as for
    a PDF whose first page opens with chapter 1."""
    from docx import Document

    d = Document()
    d.core_properties.title = ""
    for n, (chapter, text) in enumerate([("目的", "育児休業を定める。"), ("対象者", "従業員。")], 1):
        d.add_heading(f"第{n}章 {chapter}", level=1)
        d.add_paragraph(text)
    d.save(tmp_path / "育児休業規程.docx")
    pages = convert(tmp_path / "育児休業規程.docx")
    assert {m.document for m, _b in pages} == {"育児休業規程"}
    assert [m.section for m, _b in pages] == ["第1章 目的", "第2章 対象者"]


def test_docx_chapters_set_in_body_text_are_its_sections(tmp_path):
    """Report M5: a 規程 whose chapter headings are bold Normal paragraphs (「第1章　総則」), with no heading style
    and no page break, was one page; its chapters are its sections now, as a PDF's numbered chapters are."""
    from docx import Document

    for titled in (False, True):
        d = Document()
        if titled:  # a Title paragraph alone splits nothing: the chapters still do
            d.add_paragraph("服務規程", style="Title")
        for n, chapter in enumerate(["総則", "人事", "服務"], 1):
            d.add_paragraph().add_run(f"第{n}章　{chapter}").bold = True
            d.add_paragraph(f"第{n}条　{chapter}に関する定めは本条による。")
        d.add_paragraph("第4章の規定は別に定める。")  # a sentence that starts with a chapter's label: no heading
        d.save(tmp_path / "規程.docx")
        pages = convert(tmp_path / "規程.docx")
        assert [m.section for m, _b in pages] == ["front matter"] * titled + ["第1章 総則", "第2章 人事", "第3章 服務"]
        assert pages[titled][1].startswith("## 第1章 総則") and "第4章の規定" in pages[-1][1]


def test_docx_without_headings_or_breaks_is_cut_into_pages(tmp_path):
    """Report M5: 150 articles with no heading and no break were one 47 KB page. A page is cut at paragraphs into
    pieces of at most PAGE_CHARS characters; no text is lost or repeated."""
    from docx import Document

    d = Document()
    articles = [f"第{n}条 社員は、業務上知り得た情報第{n}号を適切に管理しなければならない。" * 3 for n in range(1, 151)]
    for a in articles:
        d.add_paragraph(a)
    d.save(tmp_path / "細則.docx")
    pages = convert(tmp_path / "細則.docx")
    bodies = [b for _m, b in pages]
    assert len(bodies) > 1 and all(len(b) <= PAGE_CHARS for b in bodies), [len(b) for b in bodies]
    assert [p for b in bodies for p in b.split("\n\n")] == articles
    assert pages[0][0].section.startswith("pages_001-")


def test_password_protected_or_old_format_office_file_says_so(isolated_env):
    """Report L1: an encrypted .docx (an OLE container, as Word writes it) failed with "not a zip archive"."""
    src = isolated_env / "in" / "cat"
    src.mkdir(parents=True)
    (src / "パスワード付き.docx").write_bytes(OLE + b"\0" * 4000)
    (src / "旧説明会.pptx").write_bytes(OLE + b"\0" * 4000)
    res = CliRunner().invoke(app, ["ingest", "in"])
    out = res.stdout + (res.stderr if res.stderr_bytes is not None else "")
    assert res.exit_code == 1 and "Traceback" not in out
    fails = [ln for ln in out.splitlines() if ln.startswith("failed: ")]
    assert len(fails) == 2, out
    assert any(re.search(r"パスワード付き\.docx: password-protected or old-format Word file .*\.docx", ln) for ln in fails)
    assert any(re.search(r"旧説明会\.pptx: password-protected or old-format PowerPoint file", ln) for ln in fails)
    # the converter says the same when the file reaches it (a file replaced between the walk and its conversion)
    job = Job(str(src / "パスワード付き.docx"), "x.docx", ".docx", str(isolated_env / "db"), "cat/doc")
    with pytest.raises(ConvertError, match="password-protected or old-format Word file"):
        convert_docx(job)


def test_a_new_office_converter_outdates_office_pages_only(isolated_env):
    """Converter 11 changed DOCX and PPTX pages only: a PDF converted by converter 10 is not named as outdated (its
    pages would not change with --force), a DOCX converted by it is."""
    import json

    import pymupdf

    from ragkit.ingest import ingest_sources

    src = isolated_env / "s" / "cat"
    src.mkdir(parents=True)
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "A page of text.")
    pdf.save(src / "a.pdf")
    _rules(src / "b.docx", footnote=False)
    db = isolated_env / "database"
    assert not ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1).failed
    path = db / ".ragkit" / "ingest-manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    for entry in manifest["sources"].values():
        entry["converter"] = 10
    path.write_text(json.dumps(manifest), encoding="utf-8")
    again = ingest_sources([isolated_env / "s"], db=db, progress=False, workers=1)
    assert again.skipped == 2 and again.outdated == [str(Path("s/cat/b.docx"))]


def test_footnote_marks_are_no_words_to_quote_or_ask_about():
    """A footnote at the foot of its page (`[^1]: …`, after a list that ends without a full stop, as on the
    report's page 1) is a paragraph of its own for question generation, and neither it nor its mark in the text
    is quoted or asked about with its marks."""
    from ragkit.answer.extractive.units import page_units
    from ragkit.genqa.pagetext import parse_blocks

    body = ("### 第1条（目的）\n\nこの規則は、従業員の就業に関する事項を定める。[^1]\n\n1. 正社員\n2. 契約社員\n\n"
            "[^1]: 従業員には試用期間中の者を含む。")
    paragraphs = [p for b in parse_blocks(body) for p in b.paragraphs]
    assert "従業員には試用期間中の者を含む。" in paragraphs, paragraphs
    assert "この規則は、従業員の就業に関する事項を定める。" in paragraphs, paragraphs
    assert not any("契約社員" in p and "試用期間" in p for p in paragraphs), paragraphs
    quoted = [u.text for u in page_units(body, "p.md", 0, "就業規則")]
    assert "従業員には試用期間中の者を含む。" in quoted, quoted
    assert "この規則は、従業員の就業に関する事項を定める。" in quoted, quoted
