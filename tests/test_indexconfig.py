"""Which engine a database uses (ragkit/search/indexconfig.py), without a cluster: what `--index` accepts and
refuses, that no refusal shows a password typed into the address, and the database's id kept in its
configuration. The cluster's side (an index owned by one database) is in tests/test_opensearch.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.core.errors import UsageError
from ragkit.search.indexconfig import (
    PREFIX_MAX,
    IndexConfig,
    configure_index,
    index_config,
    parse_index,
    plan_index,
    redact,
)

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"
SECRET = "Hunter2-PW"


@pytest.mark.parametrize("tail", ["/s50#hash", "/s50?x=1", "#s50", "/?", "/Team", "/a b", "/a/b", "/-a"])
def test_a_prefix_with_a_character_an_index_name_cannot_hold_is_refused_not_cut(tail):
    with pytest.raises(UsageError, match="lowercase letters, digits"):
        parse_index(f"opensearch+http://127.0.0.1:9200{tail}")


def test_a_too_long_prefix_is_refused_for_its_length():
    assert parse_index(f"opensearch+http://h:9200/{'a' * PREFIX_MAX}").prefix == "a" * PREFIX_MAX
    with pytest.raises(UsageError, match=f"{PREFIX_MAX + 1} characters long; at most {PREFIX_MAX}"):
        parse_index(f"opensearch+http://h:9200/{'a' * (PREFIX_MAX + 1)}")


@pytest.mark.parametrize("spec", ["OpenSearch+HTTP://LOCALHOST:9200/x", "opensearch+http://localhost:9200/x/",
                                  "OPENSEARCH+http://LocalHost:9200/x"])
def test_scheme_and_host_are_read_in_any_case(spec):
    assert parse_index(spec) == IndexConfig(backend="opensearch", url="http://localhost:9200", prefix="x")
    assert parse_index("OpenSearch+HTTPS://[::1]:9200/x").url == "https://[::1]:9200"
    assert parse_index("Embedded") == IndexConfig()


@pytest.mark.parametrize("spec", [f"http://bob:{SECRET}@127.0.0.1:9200/x",
                                  f"OpenSearch+HTTP://bob:{SECRET}@127.0.0.1:9200/x",
                                  f"opensearch:http://bob:{SECRET}@127.0.0.1:9200/x",
                                  f"opensearch+ftp://bob:{SECRET}@127.0.0.1:9200/x",
                                  f"opensearch+http://bob:{SECRET}@127.0.0.1:notaport/x",
                                  f"opensearch+http://bob:{SECRET}/x@127.0.0.1:9200/x",
                                  f"opensearch+http://bob:{SECRET}#@127.0.0.1:9200/x",
                                  f"bob:{SECRET}@127.0.0.1:9200"])
def test_no_refusal_shows_a_password_typed_into_the_address(spec):
    with pytest.raises(UsageError) as e:
        parse_index(spec)
    assert SECRET not in str(e.value) and "bob" not in str(e.value)


def test_redact_hides_whatever_comes_before_the_last_at():
    assert redact(f"http://bob:{SECRET}@127.0.0.1:9200/x") == "http://***@127.0.0.1:9200/x"
    assert redact("opensearch:http://bob:p@ss@h/x") == "opensearch:http://***@h/x"
    assert redact(f"bob:{SECRET}@h") == "***@h"
    assert redact("opensearch+http://h:9200/x") == "opensearch+http://h:9200/x"


def test_the_cli_never_echoes_the_password_and_stores_nothing(isolated_env):
    for spec in (f"http://bob:{SECRET}@127.0.0.1:9200/x", f"OpenSearch+HTTP://bob:{SECRET}@127.0.0.1:9200/x",
                 f"opensearch:http://bob:{SECRET}@127.0.0.1:9200/x", f"opensearch+ftp://bob:{SECRET}@127.0.0.1:9200/x"):
        out = subprocess.run([sys.executable, "-m", "ragkit.cli", "ingest", str(CORPUS), "--db", "d",
                              "--index", spec], capture_output=True, text=True, timeout=120, env=os.environ)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert SECRET not in out.stdout + out.stderr, out.stderr
        assert not Path("d").exists()


def test_the_database_id_is_made_once_and_kept_when_the_engine_changes(isolated_env):
    db = isolated_env / "db"
    first = configure_index(db, "opensearch+http://h:9200/a")
    assert len(first.database_id) == 16
    assert configure_index(db, "opensearch+http://h:9200/b").database_id == first.database_id
    assert configure_index(db, "embedded").database_id == first.database_id
    assert json.loads((db / ".ragkit" / "index.json").read_text())["database_id"] == first.database_id
    # an earlier ragkit's configuration (no id) gets one, keeping its engine
    (db / ".ragkit" / "index.json").write_text(json.dumps({"backend": "opensearch", "url": "http://h:9200",
                                                          "prefix": "a"}))
    planned = plan_index(db, "opensearch+http://h:9200/c")
    kept = index_config(db)
    assert planned.database_id == kept.database_id != first.database_id and kept.prefix == "a"
    # planning stores nothing of the engine
    assert plan_index(db, "embedded").backend == "embedded" and index_config(db).backend == "opensearch"
    other = isolated_env / "other"
    assert plan_index(other, "opensearch+http://h:9200/a").database_id and not other.exists()


def test_a_copy_is_told_from_a_moved_database_by_the_folder_recorded_with_its_id(isolated_env):
    """The folder the id was given in is recorded; opened elsewhere while it still holds the same id, the database
    is a copy (refused before a cluster write); once that folder is gone it moved, and the new folder is recorded.
    Changing the engine keeps the recorded folder; a new id (renew_id) records its own, with a new prefix."""
    import shutil

    from ragkit.search.indexconfig import check_not_a_copy, copy_of, renew_id

    db = isolated_env / "db"
    cfg = configure_index(db, "opensearch+http://h:9200/a")
    assert index_config(db).root == str(db.resolve()) and copy_of(db) is None
    check_not_a_copy(db)
    shutil.copytree(db, isolated_env / "copy")
    copy = isolated_env / "copy"
    configure_index(copy, "opensearch+http://h:9200/a")  # the engine given again: the recorded folder stays
    assert copy_of(copy) == str(db.resolve())
    with pytest.raises(UsageError, match=f"looks like a copy of {db.resolve()}.*--new-id"):
        check_not_a_copy(copy)
    renewed = renew_id(copy)
    assert renewed.database_id != cfg.database_id and renewed.prefix not in ("", "a")
    assert renewed.root == str(copy.resolve()) and index_config(copy).database_id == cfg.database_id  # not stored
    shutil.rmtree(db)  # the original is gone: the copy is the database, moved
    assert copy_of(copy) is None
    check_not_a_copy(copy)
    assert index_config(copy).root == str(copy.resolve()) and index_config(copy).database_id == cfg.database_id
    # a copy of a database on the embedded engine, about to be bound to a cluster: refused too, with what to run
    configure_index(copy, "embedded")
    shutil.copytree(copy, isolated_env / "copy3")
    with pytest.raises(UsageError, match=r"a cluster index would take them for one database.*--new-id`, then run"):
        check_not_a_copy(isolated_env / "copy3")


def test_a_hand_written_address_with_credentials_is_refused_without_showing_them(isolated_env):
    db = isolated_env / "db"
    (db / ".ragkit").mkdir(parents=True)
    (db / ".ragkit" / "index.json").write_text(json.dumps({"backend": "opensearch", "prefix": "a",
                                                          "url": f"http://bob:{SECRET}@h:9200"}))
    with pytest.raises(UsageError) as e:
        index_config(db)
    assert SECRET not in str(e.value)
