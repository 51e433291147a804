"""The Index as its callers use it: open_index, path filters, the CLI."""

from __future__ import annotations

import json

import pytest
from search_fixtures import fresh, top

from ragkit.core.errors import PathEscapeError, RagError
from ragkit.search import open_index


def test_path_filter_and_escape(db):
    idx = fresh(db)
    assert set(top(idx, "削除 接続 洗剤", path="家電/冷蔵庫")) == {
        "家電/冷蔵庫/操作と機能/page_008.md", "家電/冷蔵庫/設置/page_002.md"}
    assert top(idx, "洗剤", path="家電/冷蔵庫") == []
    assert idx.pages("english") == ["english/router/safety/page_006.md", "english/router/setup/page_005.md"]
    assert len(idx.pages()) == 6
    for bad in ("../outside", "/etc", "家電/../../x"):
        with pytest.raises(PathEscapeError):
            idx.search("削除", path=bad)


def test_open_index_is_shared_and_missing_db_is_an_error(db, tmp_path):
    assert open_index(db) is open_index(db)
    with pytest.raises(RagError, match="not found"):
        open_index(tmp_path / "nope")


def test_cli_search_json(db, monkeypatch):
    from typer.testing import CliRunner

    from ragkit.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["search", "削除", "--db", str(db), "--format", "json", "-k", "3"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data[0]["path"].endswith("家電/冷蔵庫/操作と機能/page_008.md")
    assert set(data[0]) == {"path", "page", "title", "score", "snippet", "ranking", "unembedded", "index"}
    assert data[0]["index"] == "embedded"
    assert data[0]["page"] == 8 and data[0]["title"] == "設定の削除"
    assert data[0]["ranking"] in ("keyword", "hybrid", "meaning") and isinstance(data[0]["unembedded"], int)
    res = runner.invoke(app, ["search", "削除", "--db", str(db)])
    assert res.exit_code == 0 and "設定の削除" in res.stdout
    assert "ranked by keywords" in res.stdout  # the mode is printed next to the scores
    res = runner.invoke(app, ["search", "x", "--db", str(db.parent / "missing")])
    assert res.exit_code == 1 and "not found" in res.output and "Traceback" not in res.output
    # a mistyped folder is an error, not an empty result; a real one (also written as a reference) works
    res = runner.invoke(app, ["search", "削除", "--db", str(db), "--path", "家電/冷凍庫"])
    assert res.exit_code == 1 and "'家電/冷凍庫': no such folder" in res.output and "Traceback" not in res.output
    monkeypatch.chdir(db.parent)  # where page references ("database/...") are relative to
    for prefix in ("家電/冷蔵庫", f"{db.name}/家電/冷蔵庫/"):
        res = runner.invoke(app, ["search", "削除", "--db", str(db), "--path", prefix, "--format", "json"])
        assert res.exit_code == 0 and json.loads(res.stdout)[0]["title"] == "設定の削除", res.output
    res = runner.invoke(app, ["search", "削除", "--db", str(db), "-k", "0"])
    assert res.exit_code == 2 and "-k must be at least 1" in res.output
    for blank in ("", "  "):
        res = runner.invoke(app, ["search", blank, "--db", str(db)])
        assert res.exit_code == 2 and "give a QUERY" in res.output


def test_the_first_quiet_open_does_not_silence_a_later_one_asking_for_progress(tmp_path, capfd):
    """The shared index kept the `progress` of the first open in the process: a quiet library call opening it
    first (an evaluator, a scorer) silenced the indexing lines of the command that asked for them."""
    from pagetree import write_pages

    db = write_pages(tmp_path / "db", {"a/d/s/page_001.md": ("d", "s", 1, "Pump one.")})
    idx = open_index(db)
    assert open_index(db, progress=True) is idx
    write_pages(db, {f"a/d/s/page_{i:03d}.md": ("d", "s", i, f"Pump {i} runs daily.") for i in range(2, 203)})
    capfd.readouterr()
    idx.refresh()  # as a search finding the files changed does
    assert "indexing pages" in capfd.readouterr().err
