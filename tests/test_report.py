"""rag report: a self-contained HTML file, checked in headless Chromium (not blank, filters, no network)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from browser import browser  # noqa: F401 - the pytest fixture
from typer.testing import CliRunner

from ragkit.cli import app
from ragkit.evaluate.runs import load_run, load_runs
from ragkit.reports.html import checklist_status, histogram_svg, write_report

COLS = ["Question", "Ground Truth", "Reference Document", "Checklist", "RAG Answer", "Retrieved Files",
        "Checklist Recall", "Checklist TP", "Checklist FN", "Ref Recall", "Evaluation Reason", "Judge Overall",
        "Contain Match", "Refused", "Input Tokens", "Output Tokens", "Cost USD", "Latency ms", "Error"]
P1 = "database/家電/fridge/care/page_003.md"
P2 = "database/office/policy/rules/page_001.md"


def _row(q, ref_doc, retrieved, ref_recall, chk, tp, fn, reason, *, refused="False", overall="0.8",
         answer="An answer <b>not bold</b>", error=""):
    return {"Question": q, "Ground Truth": f"truth of {q}", "Reference Document": ref_doc,
            "Checklist": "every 3 months\nmodel HF-2201" if ref_doc else "", "RAG Answer": answer,
            "Retrieved Files": retrieved, "Checklist Recall": chk, "Checklist TP": tp, "Checklist FN": fn,
            "Ref Recall": ref_recall, "Evaluation Reason": reason, "Judge Overall": overall,
            "Contain Match": "True" if chk == "1.0" else "False", "Refused": refused, "Input Tokens": "1200",
            "Output Tokens": "80", "Cost USD": "0.000300", "Latency ms": "1500", "Error": error}


def _write(path: Path, rows: list[dict]) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLS, lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8-sig"))
    return path


@pytest.fixture
def runs(isolated_env) -> tuple[Path, Path]:
    old = _write(isolated_env / "old_results.csv", [
        _row("How often is the filter replaced?", P1, P1, "1.0", "1.0", "2", "0", "checklist 2/2 covered"),
        _row("Which model is the filter?", P1, P2, "0.0", "0.5", "1", "1",
             "checklist 1/2 covered (missed: every 3 months); refs 0/1 found"),
        _row("How long must passwords be?", P2, P2, "1.0", "1.0", "2", "0", "checklist 2/2 covered"),
        _row("What is the parental leave policy?", "", "", "", "", "", "", "correctly refused",
             refused="True", overall=""),
    ])
    new = _write(isolated_env / "new_results.csv", [
        _row("How often is the filter replaced?", P1, P2, "0.0", "0.0", "0", "2",
             "refused an answerable question", refused="True", overall="0.1"),
        _row("Which model is the filter?", P1, P1, "1.0", "1.0", "2", "0", "checklist 2/2 covered"),
        _row("How long must passwords be?", P2, P2, "1.0", "1.0", "2", "0", "checklist 2/2 covered"),
        _row("What is the parental leave policy?", "", "", "", "", "", "", "answered although ...",
             overall="0.0", error="timeout"),
    ])
    return old, new


def test_checklist_items_covered_and_missed(runs):
    old = load_run(runs[0])
    status = [checklist_status(r) for r in old.rows]
    assert status[0] == [("every 3 months", True), ("model HF-2201", True)]
    assert status[1] == [("every 3 months", False), ("model HF-2201", True)]
    assert status[3] == []
    new = load_run(runs[1])
    assert checklist_status(new.rows[0]) == [("every 3 months", False), ("model HF-2201", False)]


def test_histogram_svg_counts():
    svg = histogram_svg("Ref Recall", [("a", [0.0, 1.0, 1.0, 0.55])])
    assert svg.count("<rect") == 3 and "a: 2 question(s) in [0.9, 1]" in svg and "in [0.5, 0.6)" in svg


def test_report_file_is_self_contained_and_refuses_to_overwrite(runs, isolated_env):
    out = write_report(list(runs), isolated_env / "out" / "report.html")
    text = out.read_text(encoding="utf-8")
    for external in ("<link", "src=\"http", "src='http", "@import", "url(http"):
        assert external not in text
    assert "default-src 'none'" in text  # the page may not fetch anything
    assert "An answer &lt;b&gt;not bold&lt;/b&gt;" in text and "<b>not bold</b>" not in text
    # links to page files are relative to the report
    assert 'href="../database/%E5%AE%B6%E9%9B%BB/fridge/care/page_003.md"' in text
    r = CliRunner().invoke(app, ["report", str(runs[0]), "-o", str(out)])
    assert r.exit_code == 1 and "already exists" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = CliRunner().invoke(app, ["report", *map(str, runs), "-o", str(out), "--force", "--label", "baseline",
                                 "--label", "candidate"])
    assert r.exit_code == 0 and "report:" in r.stdout
    assert "<h3>candidate against baseline</h3>" in out.read_text(encoding="utf-8")
    r = CliRunner().invoke(app, ["report", str(runs[0]), "-o", str(out), "--force", "--label", "a", "--label", "b"])
    assert r.exit_code == 2 and "2 labels for 1 results CSV" in r.stderr
    r = CliRunner().invoke(app, ["report", str(runs[0])])  # default: next to the CSV
    assert r.exit_code == 0 and (isolated_env / "old_results.html").is_file()
    bad = isolated_env / "bad.csv"
    bad.write_text("Question\nx\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["report", str(bad)])
    assert r.exit_code == 1 and "not a results CSV" in r.stderr and "Traceback" not in r.output


def test_the_report_says_its_datas_language_and_lists_that_languages_font_first(isolated_env):
    """Report s57-ko L3: a report of Korean questions said lang="en" and listed no Korean font (Hangul was drawn
    with whatever font the browser fell back to, a Japanese one where one is installed)."""
    import re

    def report_of(name: str, questions: list[str]) -> str:
        rows = [_row(q, P1, P1, "1.0", "1.0", "2", "0", "checklist 2/2 covered") for q in questions]
        out = write_report(_write(isolated_env / f"{name}.csv", rows), isolated_env / f"{name}.html")
        return out.read_text(encoding="utf-8")

    for name, questions, lang, first in (
            ("ko", ["연차는 며칠인가요?", "USB를 써도 되나요?", "What is CSAT?"], "ko", "Noto Sans CJK KR"),
            ("ja", ["年休は何日ですか？", "USBは使えますか？"], "ja", "Noto Sans CJK JP"),
            ("en", ["How long must passwords be?", "年休は何日ですか？", "What is MFA?"], "en", "Noto Sans CJK JP")):
        text = report_of(name, questions)
        assert f'<html lang="{lang}">' in text, name
        fonts = re.search(r"body\{font:[^;]*;", text).group(0)
        other = "Noto Sans CJK JP" if first.endswith("KR") else "Noto Sans CJK KR"
        assert fonts.index(first) < fonts.index(other), (name, fonts)


def test_a_comparison_report_is_named_after_both_runs_beside_the_newest(runs, isolated_env):
    """`rag report OLD NEW` was OLD.html beside OLD: it said nothing of NEW and took the name of OLD's own report.
    Now OLD_vs_NEW.html beside NEW (the newest run; a baseline is often kept elsewhere)."""
    old, new = runs
    (isolated_env / "results").mkdir()
    new = new.rename(isolated_env / "results" / new.name)
    r = CliRunner().invoke(app, ["report", str(old)])
    assert r.exit_code == 0 and (isolated_env / "old_results.html").is_file()
    r = CliRunner().invoke(app, ["report", str(old), str(new)])  # no collision with OLD's own report
    want = isolated_env / "results" / "old_results_vs_new_results.html"
    assert r.exit_code == 0, r.output
    assert want.is_file() and f"report: {want}" in r.stdout.replace("\n", "")
    assert "<h3>" in want.read_text(encoding="utf-8")
    r = CliRunner().invoke(app, ["report", str(old), str(new)])
    assert r.exit_code == 1 and "already exists" in r.stderr


def _distinct_colours(png: bytes) -> int:
    import pymupdf

    pix = pymupdf.Pixmap(png)
    data = pix.samples
    step = pix.n * 97  # a sample of the pixels is enough
    return len({bytes(data[i:i + 3]) for i in range(0, len(data) - 3, step)})


def test_report_in_headless_chromium(runs, isolated_env, browser):  # noqa: F811 - fixture
    out = write_report(list(runs), isolated_env / "report.html")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.resolve().as_uri())
    page.wait_for_load_state("load")
    assert errors == []
    assert requests == [out.resolve().as_uri()]  # the page itself and nothing else

    png = page.screenshot(full_page=True)
    assert _distinct_colours(png) > 8  # not blank: text, tables, coloured bars
    assert page.locator("svg.hist rect").count() > 0
    assert page.locator("#headline").inner_text().count("[") >= 4  # confidence intervals

    def visible() -> int:
        return page.locator("details.q:not([hidden])").count()

    assert visible() == 4 and page.inner_text("#f-count") == "showing 4 of 4"
    page.select_option("#f-kind", "failed")  # q1 fails in new, q2 in old, q4 (error) in new
    assert visible() == 3
    page.select_option("#f-kind", "refused")
    assert visible() == 2
    page.select_option("#f-kind", "worse")  # q1 got worse in the new run
    assert visible() == 1
    assert "How often is the filter replaced?" in page.locator("details.q:not([hidden]) summary").inner_text()
    page.select_option("#f-kind", "all")
    page.select_option("#f-doc", "office/policy")
    assert visible() == 1
    page.select_option("#f-doc", "")
    page.fill("#f-text", "model")
    assert visible() == 1 and page.inner_text("#f-count") == "showing 1 of 4"

    # a row expands to question, ground truth, answers, checklist and pages with links
    row = page.locator("details.q:not([hidden])")
    row.locator("summary").click()
    body = row.locator(".body")
    assert body.is_visible()
    text = body.inner_text()
    assert "truth of Which model is the filter?" in text and "An answer <b>not bold</b>" in text
    assert body.locator("li.missed").count() == 1 and body.locator("li.covered").count() == 3
    assert body.locator("a[href$='page_003.md']").count() >= 2
    assert requests == [out.resolve().as_uri()]  # still nothing fetched
    page.close()


def test_one_results_csv_as_a_str_is_one_run_not_its_characters(runs, isolated_env):
    """write_report("results.csv"): the file, not the characters of its name ('/' a folder, 'r' no file)."""
    out = write_report(str(runs[0]))
    assert out == runs[0].with_suffix(".html") and out.is_file()
    assert len(load_runs(runs[1])) == 1
