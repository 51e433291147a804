"""Fixtures of the search tests: keyword-only by default, and a small mixed ja/ko/en page tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_fixtures import write_page


@pytest.fixture(autouse=True)
def keyword_only(monkeypatch):
    """Most tests here are about keyword ranking; the dense part has its own tests."""
    monkeypatch.setenv("RAG_EMBED", "0")


@pytest.fixture
def db(tmp_path) -> Path:
    d = tmp_path / "database"
    write_page(d, "家電/冷蔵庫/操作と機能/page_008.md",
               "# 設定の削除\n登録したデータを削\n除するには、メニューを開いてください。", page=8)
    write_page(d, "家電/冷蔵庫/設置/page_002.md", "# 設置\n電源コードを接続してから、扉を閉めます。", page=2)
    write_page(d, "家電/洗濯機/使い方/page_003.md", "# 洗濯\n洗剤を入れて、スタートを押します。", page=3)
    write_page(d, "한국어/설명서/사용법/page_004.md", "# 파일 관리\n파일을 삭제하려면 버튼을 누르세요.", page=4)
    write_page(d, "english/router/setup/page_005.md",
               "# Connecting the router\nPlug the ethernet cable into the WAN port and restart the router.",
               page=5)
    write_page(d, "english/router/safety/page_006.md", "# Safety\nKeep the device away from water.", page=6)
    return d
