"""The agent's tools on a small page tree built in a temp dir: schemas from docstrings, confinement, bounds."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from pagetree import write_pages

from ragkit.answer import tools as tools_mod
from ragkit.answer.tools import TOOL_NAMES, Toolbox, _docstring_parts
from ragkit.core.models import SearchHit
from ragkit.core.pagefile import first_heading, parse_page
from ragkit.core.text import join_cjk_breaks, tokenize

SECRET = "OUTSIDE-SECRET-CONTENT-42"

PAGES = {
    "家電/冷蔵庫/操作と機能/page_008.md": (
        "冷蔵庫 取扱説明書", "操作と機能", 8,
        "# 製氷機の使い方\n初めて製氷機を使うときは、24時間ほど待ってく\nださい。\n製氷皿の水は毎日交換します。"),
    "家電/冷蔵庫/お手入れ/page_012.md": (
        "冷蔵庫 取扱説明書", "お手入れ", 12,
        "# お手入れ\n庫内は柔らかい布で拭いてください。\n漂白剤は使わないでください。"),
    "manuals/router/setup/page_003.md": (
        "Router Guide", "Setup", 3,
        "# Resetting the router\nHold the RESET button for 10 seconds until the LED blinks orange.\n"
        "The default Wi-Fi password is printed on the label."),
    "manuals/router/setup/page_004.md": (
        "Router Guide", "Setup", 4,
        "# Firmware update\nOpen the admin page at 192.168.0.1 and choose Update.\nError code E-17 means no network."),
    "manuals/router/safety/page_001.md": (
        "Router Guide", "Safety", 1,
        "# Safety\nDo not place the router near water.\n라우터를 물 근처에 두지 마십시오."),
}


class SimpleIndex:
    """A tiny lexical index with the Index interface (search/pages), for tests that must not depend on the
    real index's ranking. Rebuilt from the files on every call."""

    def __init__(self, db: Path) -> None:
        self.db = Path(db)

    def pages(self, prefix: str | None = None) -> list[str]:
        from ragkit.core.paths import iter_pages

        return iter_pages(self.db, prefix)

    def search(self, query: str, k: int = 10, path: str | None = None) -> list[SearchHit]:
        q = set(tokenize(query, drop_stopwords=True))
        hits = []
        for rel in self.pages(path):
            meta, body = parse_page((self.db / rel).read_text(encoding="utf-8"))
            toks = tokenize(body, drop_stopwords=True)
            score = sum(1 for t in toks if t in q) / (1 + len(toks)) ** 0.5
            if score > 0:
                hits.append(SearchHit(path=rel, page=meta.page, title=first_heading(body), score=round(score, 4),
                                      snippet=" ".join(join_cjk_breaks(body).split())[:120]))
        hits.sort(key=lambda h: (-h.score, h.path))
        return hits[:k]


def make_db(root: Path, pages: dict | None = None) -> Path:
    db = write_pages(root / "database", pages or PAGES)
    (db / ".ragkit").mkdir(exist_ok=True)
    (db / ".ragkit" / "hidden.md").write_text("index cache, not a page", encoding="utf-8")
    return db


def index_for(db: Path):
    """The real index when it exists, else SimpleIndex."""
    try:
        from ragkit.search import open_index

        return open_index(db)
    except (ImportError, NotImplementedError):
        return SimpleIndex(db)


@pytest.fixture
def db(tmp_path) -> Path:
    db = make_db(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n{SECRET}\n", encoding="utf-8")
    try:
        os.symlink(outside / "secret.md", db / "manuals" / "router" / "setup" / "leak.md")
        os.symlink(outside, db / "manuals" / "linkdir")
    except OSError:  # pragma: no cover - filesystems without symlinks
        pass
    return db


@pytest.fixture
def box(db) -> Toolbox:
    return Toolbox(db, SimpleIndex(db))


# -- schemas come from the code --------------------------------------------------------------------------
def test_schemas_come_from_signatures_and_docstrings(box):
    schemas = box.schemas()
    json.dumps(schemas)  # plain JSON for the API
    assert [s["function"]["name"] for s in schemas] == list(TOOL_NAMES)
    by_name = {s["function"]["name"]: s["function"] for s in schemas}
    for name, fn in by_name.items():
        description, params = _docstring_parts(getattr(box, name))
        assert fn["description"] == description and len(description) > 40
        props = fn["parameters"]["properties"]
        assert set(props) == set(params)  # every parameter documented, nothing invented
        for p, spec in props.items():
            assert spec["description"] == params[p]
    search = by_name["search"]["parameters"]
    assert search["properties"]["query"]["type"] == "string"
    assert search["properties"]["k"] == {"type": "integer", "description": params_of(box, "search")["k"],
                                         "default": 8}
    assert search["required"] == ["query"]
    assert by_name["grep"]["parameters"]["properties"]["regex"]["type"] == "boolean"
    assert by_name["read_page"]["parameters"]["required"] == ["path"]
    assert by_name["list_dir"]["parameters"]["required"] == []


def params_of(box, name):
    return _docstring_parts(getattr(box, name))[1]


def test_docstring_parser_joins_continuation_lines(box):
    _, params = _docstring_parts(box.read_page)
    assert params["path"].startswith("The page file relative") and "page_008.md" in params["path"]


# -- list_dir --------------------------------------------------------------------------------------------
def test_list_dir_root_and_folders(box):
    out = box.list_dir("")
    assert "家電/  (2 pages)" in out and "manuals/  (3 pages)" in out  # the symlinks out are not counted
    assert ".ragkit" not in out and "linkdir" not in out
    out = box.list_dir("家電/冷蔵庫/操作と機能")
    assert "家電/冷蔵庫/操作と機能/page_008.md  — 製氷機の使い方" in out
    out = box.list_dir("manuals/router/setup/")
    assert "page_003.md  — Resetting the router" in out and "leak.md" not in out and SECRET not in out
    assert box.pages_read == []  # listing is not reading


def test_list_dir_errors_are_explained(box):
    assert box.list_dir("nope").startswith("Error: no folder 'nope'")
    assert "use read_page" in box.list_dir("manuals/router/setup/page_003.md")


def test_list_dir_is_bounded(tmp_path, monkeypatch):
    pages = {f"big/doc/sec/page_{i:03d}.md": ("Doc", "Sec", i, f"# Heading {i}\ntext") for i in range(1, 21)}
    db = make_db(tmp_path, pages)
    monkeypatch.setattr(tools_mod, "MAX_LIST_ENTRIES", 5)
    out = Toolbox(db, SimpleIndex(db)).list_dir("big/doc/sec")
    assert out.count("page_0") == 5 and "15 more entries not shown" in out


# -- search ----------------------------------------------------------------------------------------------
def test_search_ranked_with_snippets_and_folder_filter(box):
    out = box.search("RESET button LED")
    first = out.splitlines()[1]
    assert first.startswith("1. manuals/router/setup/page_003.md (page 3, score ")
    assert "Resetting the router" in first and "Hold the RESET button" in out
    out = box.search("製氷機", path="家電")
    assert "家電/冷蔵庫/操作と機能/page_008.md" in out and "manuals/" not in out
    assert box.search("製氷機", path="manuals").startswith("No pages match")
    assert box.search("  ").startswith("Error: the query is empty")
    assert box.search("x", path="missing/folder").startswith("Error: no folder")


def test_search_k_is_clamped(box, db):
    seen = {}

    class Spy(SimpleIndex):
        def search(self, query, k=10, path=None):
            seen["k"] = k
            return super().search(query, k, path)

    b = Toolbox(db, Spy(db))
    b.call("search", '{"query": "router", "k": 500}')
    assert seen["k"] == tools_mod.MAX_SEARCH_K
    b.call("search", '{"query": "router", "k": "3"}')  # a number sent as a string is accepted
    assert seen["k"] == 3


# -- grep ------------------------------------------------------------------------------------------------
def test_grep_literal_is_normalized_and_cjk_aware(box):
    out = box.grep("ＲＥＳＥＴ ｂｕｔｔｏｎ")  # full-width, upper case
    assert "manuals/router/setup/page_003.md:8: Hold the RESET button" in out
    out = box.grep("待ってください")  # broken across a line end in the page
    assert "家電/冷蔵庫/操作と機能/page_008.md:8:" in out and "待ってください" in out
    assert "물 근처" in box.grep("물 근처")
    assert box.grep("製氷", path="manuals").startswith("No line matches")
    assert "page_003.md:3: document: Router" in box.grep("document: router", path="manuals/router/setup/page_003.md")


def test_grep_regex_and_errors(box):
    out = box.grep(r"E-\d+", regex=True)
    assert "page_004.md" in out and "E-17" in out
    out = box.grep("([unclosed", regex=True)
    assert out.startswith("Error: invalid regular expression") and "regex=false" in out
    assert box.grep("([unclosed").startswith("No line matches")  # literal mode: no regex syntax
    assert box.grep("").startswith("Error: the pattern is empty")
    assert box.grep("x" * 400).startswith("Error: the pattern is too long")


def test_grep_catastrophic_regex_is_bounded(tmp_path, monkeypatch):
    pages = {"a/b/c/page_001.md": ("D", "S", 1, "x" * 3000 + "\n")}
    db = make_db(tmp_path, pages)
    monkeypatch.setattr(tools_mod, "GREP_SECONDS", 0.2)
    out = Toolbox(db, SimpleIndex(db)).grep("(x+x+)+y", regex=True)
    assert "grep stopped after 0.2 s" in out


def test_grep_hits_are_bounded(tmp_path):
    body = "\n".join(f"line {i} needle" for i in range(100))
    db = make_db(tmp_path, {"a/b/c/page_001.md": ("D", "S", 1, body)})
    out = Toolbox(db, SimpleIndex(db)).grep("needle")
    assert out.startswith("100 matching lines")
    assert out.count("page_001.md:") == tools_mod.MAX_GREP_HITS and "60 more matches not shown" in out


# -- read_page -------------------------------------------------------------------------------------------
def test_read_page_shows_front_matter_and_joined_text_and_tracks(box):
    out = box.read_page("家電/冷蔵庫/操作と機能/page_008.md")
    assert "Document: 冷蔵庫 取扱説明書" in out and "Section: 操作と機能" in out and "Page: 8" in out
    assert "24時間ほど待ってください" in out  # CJK line break joined
    box.read_page("manuals/router/setup/page_003.md")
    box.read_page("database/家電/冷蔵庫/操作と機能/page_008.md")  # Reference Document form, read again
    assert box.pages_read == ["家電/冷蔵庫/操作と機能/page_008.md", "manuals/router/setup/page_003.md"]


def test_the_tools_say_the_number_printed_on_a_page(tmp_path):
    db = make_db(tmp_path, {"m/tv/pages_001-010/page_005.md": ("TV", "S", 5, "Remote control.")})
    page = db / "m/tv/pages_001-010/page_005.md"
    page.write_text(page.read_text(encoding="utf-8").replace("page: 5\n", "page: 5\nprinted_page: 3\n"),
                    encoding="utf-8")
    box = Toolbox(db, index_for(db))
    assert "Page: 5 (printed on the page: 3)" in box.read_page("m/tv/pages_001-010/page_005.md")
    assert "(page 5, printed on the page: 3, score" in box.search("remote control")
    assert "m/tv/pages_001-010/page_005.md  — [printed page 3] Remote control." in box.list_dir("m/tv/pages_001-010")


def test_read_page_errors(box):
    assert box.read_page("manuals/router").startswith("Error: 'manuals/router' is a folder")
    assert box.read_page("manuals/router/setup/page_099.md").startswith("Error: no page")
    assert box.read_page("").startswith("Error: give a page path")
    assert box.pages_read == []


def test_read_page_is_bounded(tmp_path):
    db = make_db(tmp_path, {"a/b/c/page_001.md": ("D", "S", 1, "word " * 5000)})
    out = Toolbox(db, SimpleIndex(db)).read_page("a/b/c/page_001.md")
    assert "page text truncated" in out and len(out) < tools_mod.MAX_PAGE_CHARS + 1000


def test_every_result_is_bounded(box, monkeypatch):
    monkeypatch.setattr(tools_mod, "MAX_RESULT_CHARS", 100)
    out = box.call("read_page", '{"path": "manuals/router/setup/page_003.md"}')
    assert "result truncated" in out and len(out) < 200


# -- call(): never raises, always explains ----------------------------------------------------------------
@pytest.mark.parametrize("name,args,expected", [
    ("read_page", '{"path": "a.md"', "are not valid JSON"),
    ("read_page", "[1, 2]", "must be a JSON object"),
    ("read_page", "{}", "needs the parameter 'path'"),
    ("read_page", '{"path": "x.md", "mode": "w"}', "has no parameter(s) 'mode'"),
    ("search", '{"query": 42}', "parameter 'query' of search must be a string"),
    ("search", '{"query": "x", "k": "many"}', "parameter 'k' of search must be a integer"),
    ("grep", '{"pattern": "x", "regex": "yes"}', "parameter 'regex' of grep must be a boolean"),
    ("write_file", '{"path": "/tmp/x"}', "there is no tool 'write_file'"),
    ("__init__", "{}", "there is no tool '__init__'"),
    ("_resolve", '{"path": ""}', "there is no tool '_resolve'"),
])
def test_bad_calls_get_explanations(box, name, args, expected):
    out = box.call(name, args)
    assert out.startswith("Error:") and expected in out


@pytest.mark.parametrize("tool,path", [
    ("read_page", "../outside/secret.md"),
    ("read_page", "manuals/../../outside/secret.md"),
    ("read_page", "ABSOLUTE"),
    ("read_page", "manuals\\router\\setup\\page_003.md"),
    ("read_page", "manuals/router/setup/page_003.md\x00.txt"),
    ("read_page", "manuals/router/setup/leak.md"),
    ("read_page", "manuals/linkdir/secret.md"),
    ("read_page", ".ragkit/hidden.md"),
    ("list_dir", ".."),
    ("list_dir", "manuals/linkdir"),
    ("list_dir", "/"),
    ("search", "../outside"),
    ("grep", "manuals/linkdir"),
    ("grep", "/etc"),
])
def test_path_escapes_are_refused_with_a_message(box, db, tool, path):
    if path == "ABSOLUTE":
        path = str(db.parent / "outside" / "secret.md")
    if "link" in path and not (db / "manuals" / "linkdir").is_symlink():
        pytest.skip("no symlinks on this filesystem")
    key = {"read_page": "path", "list_dir": "path", "search": "path", "grep": "path"}[tool]
    args = {key: path}
    if tool == "search":
        args["query"] = "secret"
    if tool == "grep":
        args["pattern"] = "secret"
    out = box.call(tool, json.dumps(args))
    assert out.startswith("Error:"), out
    assert SECRET not in out and box.pages_read == []


def test_grep_over_everything_skips_symlinks_out(box):
    assert SECRET not in box.grep("OUTSIDE-SECRET") and box.grep("OUTSIDE-SECRET").startswith("No line")


def test_tool_failure_becomes_a_message(db):
    class Broken(SimpleIndex):
        def search(self, query, k=10, path=None):
            raise RuntimeError("index exploded")

    out = Toolbox(db, Broken(db)).call("search", '{"query": "x"}')
    assert out == "Error: search failed: RuntimeError: index exploded"


def test_dict_arguments_and_empty_arguments(box):
    assert "Folder: (database root)" in box.call("list_dir", "")
    assert "Folder: manuals" in box.call("list_dir", {"path": "manuals"})


def test_thread_safe_pages_read(box):
    paths = list(PAGES)

    def work(i):
        for j in range(10):
            box.call("read_page", json.dumps({"path": paths[(i + j) % len(paths)]}))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(box.pages_read) == sorted(paths)
