"""What one document may cost (issue 33): a zip bomb, a PDF page of endless text, a slow document and a greedy
one each fail alone with one line naming the limit and its setting, while the other documents are ingested.
The hostile files are made here (tests/bombs.py), never stored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bombs import docx_bomb, pdf_text_bomb, pdf_with_content, slow_pdf, small_docx
from test_ingest import body_pages, make_pdf, run_cli

from ragkit.core.config import Limits, load_settings
from ragkit.core.errors import UsageError
from ragkit.core.paths import iter_pages
from ragkit.ingest import ingest_sources
from ragkit.ingest.limits import _Strings

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="worker processes and rlimits are POSIX")


def _folder_with(tmp: Path, name: str, make) -> Path:
    """`in/cat/` holding one good PDF and the file `make(path)` writes."""
    src = tmp / "in" / "cat"
    make_pdf(src / "good.pdf", body_pages(2))
    make(src / name)
    return tmp / "in"


def _one_failure(out: str) -> str:
    failed = [line for line in out.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1, out
    return failed[0]


# --------------------------------------------------------------------------------------------- DOCX/PPTX


def test_a_docx_bomb_fails_alone_naming_the_limit_and_its_setting(isolated_env):
    """The issue's bomb: word/document.xml unpacks to 300 MB from a few hundred KB. Refused from the zip's
    directory before anything is unpacked; the good PDF next to it is ingested."""
    src = _folder_with(isolated_env, "bomb.docx", lambda p: docx_bomb(p, 300))
    code, out = run_cli(str(src), "--db", "database")
    assert code == 1, out
    line = _one_failure(out)
    assert "bomb.docx" in line and "word/document.xml" in line and "300 MB" in line, line
    assert "--max-member-mb / RAG_MAX_MEMBER_MB" in line, line
    assert "Traceback" not in out
    assert [p for p in iter_pages(isolated_env / "database") if "/good/" in p]


def test_compression_ratio_per_member_and_total_size_are_limits_too(isolated_env):
    bomb = docx_bomb(isolated_env / "b.docx", 20)  # ~250:1, under the 256 MB a member may unpack to
    db = isolated_env / "database"
    report = ingest_sources([bomb], db=db, progress=False, workers=1)
    (path, reason), = report.failed
    assert "a zip bomb?" in reason and "--max-zip-ratio / RAG_MAX_ZIP_RATIO" in reason, reason
    report = ingest_sources([bomb], db=db, progress=False, workers=1, limits=Limits(member_mb=8))
    assert "--max-member-mb" in report.failed[0][1]
    report = ingest_sources([bomb], db=db, progress=False, workers=1,
                            limits=Limits(unpacked_mb=4, zip_ratio=10_000))
    assert "--max-unpacked-mb / RAG_MAX_UNPACKED_MB" in report.failed[0][1], report.failed
    assert not iter_pages(db)


def test_a_raised_limit_lets_a_document_through_from_the_flag_the_environment_or_dotenv(isolated_env,
                                                                                        monkeypatch):
    """A DOCX whose 2 MB document.xml packs 250:1: refused by default, ingested once the ratio allowed is
    raised, whichever way the setting is given."""
    docx_bomb(isolated_env / "d" / "regular.docx", 2)
    code, out = run_cli("d", "--db", "db0")
    assert code == 1 and "--max-zip-ratio" in _one_failure(out)
    code, out = run_cli("d", "--db", "db1", "--max-zip-ratio", "1000")
    assert code == 0, out
    assert iter_pages(isolated_env / "db1")
    monkeypatch.setenv("RAG_MAX_ZIP_RATIO", "1000")
    code, out = run_cli("d", "--db", "db2")
    assert code == 0, out
    monkeypatch.delenv("RAG_MAX_ZIP_RATIO")
    (isolated_env / ".env").write_text("RAG_MAX_ZIP_RATIO=1000\n")
    assert load_settings().limits.zip_ratio == 1000
    code, out = run_cli("d", "--db", "db3")
    assert code == 0, out


def test_a_small_honest_docx_is_not_a_bomb(isolated_env):
    report = ingest_sources([small_docx(isolated_env / "s.docx")], db=isolated_env / "db", progress=False)
    assert not report.failed and report.pages == 1


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_a_limit_must_be_a_positive_number(isolated_env, monkeypatch, value):
    monkeypatch.setenv("RAG_MAX_PAGE_TEXT_MB", value)
    with pytest.raises(UsageError, match="RAG_MAX_PAGE_TEXT_MB"):
        load_settings()
    monkeypatch.delenv("RAG_MAX_PAGE_TEXT_MB")
    small_docx(isolated_env / "s.docx")
    code, out = run_cli("s.docx", "--max-member-mb", "0")
    assert code == 2 and "--max-member-mb must be positive" in out


# --------------------------------------------------------------------------------------------------- PDF


def test_a_pdf_page_of_endless_text_fails_alone_naming_the_limit(isolated_env):
    """8 MB of text in one flate stream of a few KB (the issue's was 184 MB): refused before MuPDF holds it."""
    src = _folder_with(isolated_env, "bomb.pdf", lambda p: pdf_text_bomb(p, 8))
    code, out = run_cli(str(src), "--db", "database")
    assert code == 1, out
    line = _one_failure(out)
    assert "bomb.pdf: page 1 holds more than 4.0 MB of text" in line, line
    assert "--max-page-text-mb / RAG_MAX_PAGE_TEXT_MB" in line and "Traceback" not in out
    assert [p for p in iter_pages(isolated_env / "database") if "/good/" in p]


def test_text_drawn_through_a_form_counts_once_per_use(isolated_env):
    """A form with 200 KB of text, drawn 10 times: 2 MB of text from a content stream of 80 bytes."""
    form = b"BT /F1 1 Tf 10 10 Td (" + b"B" * 200_000 + b") Tj ET"
    pdf = pdf_with_content(isolated_env / "forms.pdf", b"/Fm0 Do\n" * 10, {"Fm0": form})
    db = isolated_env / "db"
    report = ingest_sources([pdf], db=db, progress=False, workers=1, limits=Limits(page_text_mb=1))
    assert "page 1 holds more than 1.0 MB of text" in report.failed[0][1], report.failed
    report = ingest_sources([pdf], db=db, progress=False, workers=1, limits=Limits(page_text_mb=3))
    assert not report.failed and report.pages == 1


def test_text_in_one_long_hex_string_counts_across_the_reads(isolated_env):
    """3 MB of text written as one hex string (6 MB of digits), longer than one read of the stream: refused."""
    pdf = pdf_with_content(isolated_env / "hex.pdf", [b"BT /F1 1 Tf 10 10 Td <", b"41" * (3 << 20), b"> Tj ET"])
    report = ingest_sources([pdf], db=isolated_env / "db", progress=False, workers=1, limits=Limits(page_text_mb=1))
    assert report.failed and "page 1 holds more than 1.0 MB of text" in report.failed[0][1], report.failed


def test_a_page_of_drawing_is_not_text(isolated_env):
    """3 MB of path operators and one line of text: past 1 MB of content, but not of text."""
    drawing = b"10 10 m 200 300 l 30.5 40.25 l S\n" * 100_000
    pdf = pdf_with_content(isolated_env / "map.pdf", [b"BT /F1 12 Tf 72 700 Td (Harbour map) Tj ET\n", drawing])
    report = ingest_sources([pdf], db=isolated_env / "db", progress=False, workers=1, limits=Limits(page_text_mb=1))
    assert not report.failed and report.pages == 1


def test_strings_are_counted_whatever_hides_them():
    def count(*chunks: bytes) -> int:
        s = _Strings()
        for c in chunks:
            s.feed(c)
        return s.count

    assert count(b"BT (abc) Tj ET") == 5  # with its parentheses
    assert count(b"(a\\)b) Tj") == 6  # an escaped parenthesis does not end the string
    assert count(b"(" + b"A" * 1000 + b"()" + b")") == 1004  # text before a nested pair still counts
    assert count(b"(ab\\", b")cd) Tj") == 8  # an escape cut by the chunk end
    assert count(b"(ab", b"cd)") == 6
    assert count(b"<414243> Tj <</MCID 1>> BDC") == 8  # hex strings count; dictionaries do not
    assert count(b"10 10 m 20 20 l S ) ) <x") == 0
    assert count(b"<41", b"42 43> Tj") == 9  # a hex string cut by the chunk end
    stream = b"/Span <</MCID 3>> BDC BT (a\\)b) Tj <4142> Tj [(x) -20 (y(z))] TJ ET EMC <<<41>> 10 m"
    assert count(stream) == 6 + 6 + 3 + 6 + 4
    assert all(count(stream[:i], stream[i:]) == 25 for i in range(len(stream) + 1))  # wherever it is cut


# ------------------------------------------------------------------------------------ wall time and memory


def test_a_document_past_its_time_is_stopped_and_the_others_go_on(isolated_env):
    """A 3000-page PDF needs far more than one second; its worker is killed at the limit and replaced, and
    the small PDF is ingested."""
    src = isolated_env / "in" / "cat"
    slow_pdf(src / "slow.pdf")
    make_pdf(src / "good.pdf", body_pages(2))
    report = ingest_sources([isolated_env / "in"], db=isolated_env / "db", progress=False, workers=1,
                            limits=Limits(doc_seconds=1))
    (path, reason), = report.failed
    assert path.endswith("slow.pdf"), report.failed
    assert "took longer than 1 s to convert" in reason and "--doc-timeout / RAG_DOC_TIMEOUT" in reason, reason
    assert report.documents == 1 and report.pages == 2
    assert not [p for p in iter_pages(isolated_env / "db") if "/slow/" in p]


def test_a_document_that_needs_more_memory_fails_instead_of_losing_text(isolated_env):
    """10 MB of text on one page, with the text limit raised: MuPDF would drop what it cannot allocate and
    write a page without its text; the conversion fails instead, naming the memory limit."""
    pdf = pdf_text_bomb(isolated_env / "greedy.pdf", 10)
    report = ingest_sources([pdf], db=isolated_env / "db", progress=False, workers=1,
                            limits=Limits(page_text_mb=64, memory_mb=250))
    (path, reason), = report.failed
    assert "--max-doc-memory-mb / RAG_MAX_DOC_MEMORY_MB" in reason, reason
    assert not iter_pages(isolated_env / "db")


# ---------------------------------------------------------------------------------- what ingest leaves behind


def test_page_files_half_written_by_a_killed_ingest_are_removed_by_the_next(isolated_env):
    make_pdf(isolated_env / "src" / "doc.pdf", body_pages(2))
    code, _ = run_cli("src", "--db", "database")
    assert code == 0
    page = isolated_env / "database" / iter_pages(isolated_env / "database")[0]
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process id that no longer runs: the writer killed mid-write
    stale = page.with_name(f".{page.name}.{gone.pid}.tmp")
    stale.write_text("half a page")
    (page.parent / ".notes.txt").write_text("a hidden file of the user's")
    code, out = run_cli("src", "--db", "database")  # nothing changed: the document is skipped
    assert code == 0, out
    assert not stale.exists()
    assert (page.parent / ".notes.txt").exists()  # anything else is left alone
    assert "removed 1 half-written page file(s)" in out


def test_hidden_files_and_folders_skipped_are_named(isolated_env):
    src = isolated_env / "src"
    make_pdf(src / "doc.pdf", body_pages(1))
    make_pdf(src / ".draft.pdf", body_pages(1))
    make_pdf(src / ".git" / "old.pdf", body_pages(1))
    code, out = run_cli("src", "--db", "database")
    assert code == 0, out
    line = next(line for line in out.splitlines() if line.startswith("skipped"))
    assert line.startswith("skipped 2 hidden file(s) and folder(s): ") and "src/.draft.pdf" in line \
        and "src/.git/" in line, out


@pytest.mark.parametrize("value", ["0", "-1"])
def test_workers_must_be_at_least_one(isolated_env, value):
    make_pdf(isolated_env / "doc.pdf", body_pages(1))
    code, out = run_cli("doc.pdf", "--workers", value)
    assert code == 2, out
    assert out.strip() == f"error: --workers must be at least 1, got {value}"
    assert not os.path.exists(isolated_env / "database")


def test_genqa_ingests_its_source_under_the_same_limits(isolated_env, monkeypatch):
    """`rag genqa FILE` ingests the file first: a bomb fails there with the same line, and the limit comes from
    the environment as for every command."""
    from typer.testing import CliRunner

    from ragkit.cli import app

    pdf_text_bomb(isolated_env / "bomb.pdf", 8)
    res = CliRunner().invoke(app, ["genqa", "bomb.pdf", "--provider", "offline"])
    assert res.exit_code == 1, res.output
    assert "page 1 holds more than 4.0 MB of text" in res.stderr and "--max-page-text-mb" in res.stderr
    monkeypatch.setenv("RAG_MAX_PAGE_TEXT_MB", "2")
    res = CliRunner().invoke(app, ["genqa", "bomb.pdf", "--provider", "offline"])
    assert res.exit_code == 1 and "more than 2.0 MB of text" in res.stderr, res.output
