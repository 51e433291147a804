"""Ingest called from Python (not the CLI): one path as sources, a script without a __main__ guard, the shared
index after an ingest in the same process, a database indexed in OpenSearch, the document limits of the
environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.core.errors import RagError
from ragkit.ingest import ingest_sources
from ragkit.search import open_index
from tests.test_ingest import body_pages, make_pdf

REPO = Path(__file__).resolve().parents[1]


def _pdf(path: Path, word: str, n: int = 2) -> Path:
    return make_pdf(path, [[(f"{word} heading {i}", 18), (f"{word} body text on page {i}.", 10)]
                           for i in range(1, n + 1)], font="helv")


def test_one_path_is_one_source_not_its_characters(tmp_path, monkeypatch):
    """A str (or one Path) is one source: its characters were sources ("/" the whole file system)."""
    monkeypatch.chdir(tmp_path)
    make_pdf(tmp_path / "docs" / "a.pdf", body_pages(2))
    rep = ingest_sources("docs", db=tmp_path / "db1", progress=False)
    assert (rep.sources, rep.documents, rep.pages, rep.failed) == (1, 1, 2, [])
    rep = ingest_sources(Path("docs"), db=tmp_path / "db2", progress=False)
    assert (rep.sources, rep.documents, rep.pages, rep.failed) == (1, 1, 2, [])


def test_ingest_sources_is_quiet_by_default_as_the_other_calls(tmp_path, capfd):
    """Like run_batch or open_index: no progress lines unless progress=True (`rag ingest` passes it)."""
    _pdf(tmp_path / "docs" / "a.pdf", "quiet")
    ingest_sources([tmp_path / "docs"], db=tmp_path / "db", workers=1)
    assert capfd.readouterr() == ("", "")
    ingest_sources([tmp_path / "docs"], db=tmp_path / "db", workers=1, force=True, progress=True)
    assert "ingest" in capfd.readouterr().err


def test_a_script_without_main_guard_is_told_to_add_one(tmp_path):
    """A plain script calling ingest at module level: conversion workers import it again. One RagError saying what
    to do, not a traceback per worker and every document failed 'perhaps out of memory'."""
    make_pdf(tmp_path / "docs" / "a.pdf", body_pages(1))
    make_pdf(tmp_path / "docs" / "b.pdf", body_pages(1))
    script = tmp_path / "noguard.py"
    script.write_text("from pathlib import Path\nfrom ragkit.ingest import ingest_sources\n"
                      "rep = ingest_sources([Path('docs')], db=Path('db'), progress=False, workers=2)\n"
                      "print('FAILED', rep.failed, 'PAGES', rep.pages)\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0, done.stdout
    assert 'put the call under `if __name__ == "__main__":`' in done.stderr
    assert "out of memory" not in done.stderr
    assert done.stderr.count("Traceback") == 1, done.stderr  # the script's own, not one per worker
    assert "bootstrapping phase" not in done.stderr


def test_the_same_script_with_the_guard_ingests(tmp_path):
    make_pdf(tmp_path / "docs" / "a.pdf", body_pages(2))
    script = tmp_path / "guarded.py"
    script.write_text("from pathlib import Path\nfrom ragkit.ingest import ingest_sources\n"
                      "if __name__ == '__main__':\n"
                      "    rep = ingest_sources('docs', db=Path('db'), progress=False)\n"
                      "    print('PAGES', rep.pages, 'FAILED', len(rep.failed))\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "PAGES 2 FAILED 0" in done.stdout


def test_open_index_and_a_held_index_see_an_ingest_of_this_process(tmp_path):
    """open_index keeps one instance per database and re-scans only every REFRESH_EVERY seconds; an ingest (or
    prune) in between is seen at once, by the next open_index and by a search on the instance held."""
    src, db = tmp_path / "src", tmp_path / "db"
    _pdf(src / "a" / "alpha.pdf", "alpha")
    ingest_sources([src], db=db, progress=False)
    idx = open_index(db, progress=False)
    assert len(idx.pages()) == 2
    _pdf(src / "b" / "zebra.pdf", "zebra", 3)
    ingest_sources([src], db=db, progress=False)
    assert open_index(db, progress=False) is idx
    assert len(idx.pages()) == 5
    shutil.rmtree(src / "b")
    ingest_sources([src], db=db, progress=False, prune=True)
    _pdf(src / "c" / "quokka.pdf", "quokka", 1)
    ingest_sources([src], db=db, progress=False)
    hits = idx.search("quokka", k=3, mode="keyword")  # the held instance, without open_index
    assert hits and hits[0].path.startswith("c/quokka/")
    assert not [p for p in idx.pages() if p.startswith("b/")]
    assert len(open_index(db, progress=False).pages()) == 3


def test_a_database_indexed_in_opensearch_is_refused(tmp_path, monkeypatch):
    """ingest_sources writes page files only: on a database indexed in a cluster (or with RAG_INDEX set) that would
    leave the cluster out of step, so it says to call ingest_into (what `rag ingest` calls)."""
    make_pdf(tmp_path / "docs" / "a.pdf", body_pages(1))
    db = tmp_path / "db"
    (db / ".ragkit").mkdir(parents=True)
    (db / ".ragkit" / "index.json").write_text(json.dumps(
        {"backend": "opensearch", "url": "http://127.0.0.1:9", "prefix": "p1"}), encoding="utf-8")
    with pytest.raises(RagError, match="ingest_into"):
        ingest_sources([tmp_path / "docs"], db=db, progress=False)
    assert not (db / "docs").exists()
    monkeypatch.setenv("RAG_INDEX", "opensearch+http://127.0.0.1:9/p2")
    with pytest.raises(RagError, match="RAG_INDEX.*ingest_into"):
        ingest_sources([tmp_path / "docs"], db=tmp_path / "db2", progress=False)
    monkeypatch.setenv("RAG_INDEX", "embedded")
    assert ingest_sources([tmp_path / "docs"], db=tmp_path / "db3", progress=False).pages == 1


def test_library_ingest_uses_the_environments_limits(tmp_path, monkeypatch):
    """No limits given: those of RAG_* (and .env), as `rag ingest` and load_settings read them."""
    make_pdf(tmp_path / "docs" / "a.pdf", body_pages(1))
    monkeypatch.setenv("RAG_MAX_PAGE_TEXT_MB", "0.00001")  # 10 bytes: the page holds more
    rep = ingest_sources([tmp_path / "docs"], db=tmp_path / "db", progress=False)
    assert rep.pages == 0 and len(rep.failed) == 1
    assert "RAG_MAX_PAGE_TEXT_MB" in rep.failed[0][1]


@pytest.mark.opensearch
def test_python_ingest_keeps_a_cluster_index_in_step(tmp_path, isolated_env):
    """On a real node: ingest_into (what `rag ingest` calls) syncs the cluster, from one str source too, and
    ingest_sources on that database is refused rather than leave the cluster without the new pages."""
    from ragkit.search import ingest_into
    from tests.opensearch_fixtures import drop_indices, node_url, unique_prefix

    url, prefix = node_url(), unique_prefix()
    _pdf(tmp_path / "src" / "a" / "alpha.pdf", "alpha")
    db = tmp_path / "db"
    try:
        report, synced = ingest_into(str(tmp_path / "src"), db=db, index=f"opensearch+{url}/{prefix}",
                                     progress=False)
        assert report.pages == 2 and synced is not None and synced.added == 2
        _pdf(tmp_path / "src" / "b" / "zebra.pdf", "zebra")
        with pytest.raises(RagError, match="indexed in OpenSearch.*ingest_into"):
            ingest_sources([tmp_path / "src"], db=db, progress=False)
        report, synced = ingest_into([tmp_path / "src"], db=db, progress=False)
        assert report.pages == 2 and synced is not None and synced.added == 2
        ix = open_index(db, progress=False)
        assert ix.count() == 4
        assert [h.path for h in ix.search("zebra", k=1)][0].startswith("b/zebra/")
        ix.close()
    finally:
        drop_indices(url, prefix)
