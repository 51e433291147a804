"""Secrets are never shown or stored: the API key in whatever form a server echoes it, the credentials of a base
URL (user:password@, ?api_key=), and a key in a cached model reply. Providers are driven through the real openai
client against a scripted server on 127.0.0.1 (tests/fakeserver.py)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from urllib.parse import quote

import pytest
from fakeserver import TEST_KEY, openai_settings

from ragkit.core.config import Secret, Settings
from ragkit.core.errors import RagError
from ragkit.core.llm import get_provider
from ragkit.core.provenance import endpoint
from ragkit.core.secrets import mask

USER = [{"role": "user", "content": "What does the ice maker do?"}]
TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search pages.",
                                           "parameters": {"type": "object",
                                                          "properties": {"query": {"type": "string"}}}}}]


# -- L1: the key in the forms a proxy echoes it ---------------------------------------------------------------
def test_a_key_echoed_cut_off_in_another_case_or_percent_encoded_is_masked(scripted_server):
    """s56-sec L1: only the exact key was scrubbed, so a proxy's `sk-...-12…`, its upper case or its
    percent-encoded form reached the terminal, the results and serve's clients."""
    echoes = [f"{TEST_KEY[:-1]}…", TEST_KEY.upper(), TEST_KEY.replace("-", "%2D"), quote(TEST_KEY.lower(), safe=""),
              f"{TEST_KEY[:9]}..."]
    scripted_server.enqueue(status=401, body={"error": {"message": "Invalid key " + ", ".join(echoes)}})
    with pytest.raises(RagError) as e:
        get_provider(openai_settings(scripted_server)).chat(USER)
    text = str(e.value)
    assert text.count("***") == len(echoes), text
    assert "secret" not in text.lower() and "%2d" not in text.lower(), text


def test_what_is_not_an_echo_of_the_key_is_left_alone():
    key = "sk-live-0123456789abcdef"
    # a prefix shorter than 8 characters, and a longer one followed by other text (a key-like word), stay
    shown = "keys look like sk-live…, e.g. sk-live-0123 here"
    assert mask(shown, key) == shown
    assert mask(f"cut at the end: {key[:12]}", key) == "cut at the end: ***"
    assert mask(f"{key}\n{key.upper()}", key) == "***\n***"  # mask keeps the lines; scrub makes one
    assert mask("ab", "ab") == "ab"  # too short to be a secret


# -- L2: the response cache ------------------------------------------------------------------------------------
def test_the_response_cache_stores_no_key_and_only_its_owner_reads_it(scripted_server, tmp_path):
    """s56-sec L2: a reply echoing the key was shown as *** everywhere but kept verbatim in RAG_CACHE_DIR, mode
    644."""
    scripted_server.enqueue(content=f"The key is {TEST_KEY}.", tool_calls=[("search", {"query": TEST_KEY.upper()})])
    cache = tmp_path / "cache"
    p = get_provider(openai_settings(scripted_server, cache=True, cache_dir=cache))
    p.chat(USER, tools=TOOLS)
    (entry,) = cache.rglob("*.json")
    text = entry.read_text(encoding="utf-8")
    assert TEST_KEY not in text and TEST_KEY.upper() not in text and text.count("***") == 2, text
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    for folder in (cache, entry.parent):
        assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0, oct(folder.stat().st_mode)
    again = p.chat(USER, tools=TOOLS)
    assert again.cached and again.content == "The key is ***." and len(scripted_server.requests) == 1



def test_a_cache_written_by_an_older_ragkit_is_closed_to_others_at_the_next_reply(scripted_server, tmp_path):
    """A cache an older ragkit wrote (folders 0755, files 0644) is readable by every user of the machine: the first
    reply stored in it closes its own folders (0700), so the old files can no longer be reached by others."""
    cache = tmp_path / "cache"
    old_shard = cache / "ab"
    old_shard.mkdir(parents=True, mode=0o755)
    os.chmod(cache, 0o755)
    os.chmod(old_shard, 0o755)
    (old_shard / ("ab" + "0" * 62 + ".json")).write_text('{"content": "a confidential page"}', encoding="utf-8")
    scripted_server.enqueue(content="Fine.")
    get_provider(openai_settings(scripted_server, cache=True, cache_dir=cache)).chat(USER, tools=TOOLS)
    for folder in (cache, old_shard, *[d for d in cache.iterdir() if d.is_dir()]):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, (folder, oct(folder.stat().st_mode))

# -- H3: credentials in the base URL ---------------------------------------------------------------------------
def test_base_url_credentials_never_show_in_a_provider_error(scripted_server):
    """s56-sec H3(b): `?api_key=` was printed in every provider error; a password the server echoed as well."""
    port = scripted_server.port
    query = openai_settings(scripted_server, api_base=f"http://127.0.0.1:{port}/v1?api_key=QUERY-canary#frag")
    with pytest.raises(RagError) as e:  # the openai client cannot use such a URL (it got 404): said at once
        get_provider(query).chat(USER)
    assert "QUERY-canary" not in str(e.value) and "frag" not in str(e.value) and "query string" in str(e.value)
    assert f"at http://127.0.0.1:{port}/v1)" in str(e.value) and not scripted_server.requests, e.value
    scripted_server.enqueue(status=401, body={"error": {"message": "user alice with PASSWD-canary refused"}})
    userinfo = openai_settings(scripted_server, api_base=f"http://alice:PASSWD-canary@127.0.0.1:{port}/v1")
    with pytest.raises(RagError) as e:
        get_provider(userinfo).chat(USER)
    assert "PASSWD-canary" not in str(e.value) and f"at http://127.0.0.1:{port}/v1)" in str(e.value), e.value


def test_endpoint_keeps_scheme_host_port_and_path_only():
    assert endpoint("http://alice:PW@Host.example:8080/v1?api_key=Q#f") == "http://Host.example:8080/v1"
    assert endpoint("https://api.example.com/v1") == "https://api.example.com/v1"  # as typed: cache keys stay
    assert endpoint(None) == "" and endpoint("http://[bad/v1") == "(an unreadable URL)"


def test_a_malformed_base_url_is_named_at_once_without_its_secrets():
    """s56-sec L5: `htp://bad url/v1` was tried 3 times and reported as `connection failed`."""
    settings = Settings(provider="openai", api_key=Secret(TEST_KEY), cache=False, retry_base_delay=0.01,
                        retry_max_delay=0.05, timeout=5,
                        api_base="htp://alice:PASSWD-canary@bad host/v1?api_key=QUERY-canary")
    p = get_provider(settings)
    with pytest.raises(RagError) as e:
        p.chat(USER)
    text = str(e.value)
    assert "malformed" in text and "'htp'" in text and "'bad host' holds a space" in text, text
    assert "attempts" not in text and not p.waits
    assert "PASSWD" not in text and "QUERY" not in text and TEST_KEY not in text and "\n" not in text


def test_a_base_url_password_is_not_stored_with_a_checkpoint_nor_shown_by_the_next_run(isolated_env, monkeypatch,
                                                                                          capsys):
    """s56-sec H3(a): `http://alice:PASSWD@host/v1` was stored in results/.checkpoints/*.settings.json and
    printed in the next run's "not resuming" note."""
    from test_batch import ROUTER, make_db, offline, write_input
    from test_batch_resume import ctrl_c_after_rows

    from ragkit.evaluate import batch as B

    monkeypatch.setenv("RAG_EMBED", "0")
    db = make_db(isolated_env)
    inp = write_input(isolated_env / "q.csv", [["Question", "Reference Document"]] +
                      [[f"Question {i}: how do I reset the router?", ROUTER] for i in range(3)])
    secret_url = "http://alice:PASSWD-canary@127.0.0.1:9/v1?api_key=QUERY-canary"
    first = replace(offline(db, isolated_env, workers=1), api_base=secret_url)
    uninterrupted = ctrl_c_after_rows(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        B.run_batch(inp, first, progress=False)
    uninterrupted()
    results = isolated_env / "results"
    (record,) = results.rglob("*.settings.json")
    stored = "".join(p.read_text(encoding="utf-8", errors="replace") for p in results.rglob("*") if p.is_file())
    assert "PASSWD" not in stored and "QUERY" not in stored and '"http://127.0.0.1:9/v1"' in stored
    # a record written by an earlier ragkit holds the whole URL: the note still shows it without its secrets
    record.write_text(record.read_text(encoding="utf-8").replace('"http://127.0.0.1:9/v1"', f'"{secret_url}"'),
                      encoding="utf-8")
    capsys.readouterr()
    B.run_batch(inp, replace(first, api_base="http://127.0.0.1:8/v1"), progress=True)
    err = capsys.readouterr().err
    assert "not resuming the unfinished run" in err and "api_base http://127.0.0.1:9/v1 -> http://127.0.0.1:8/v1" in err
    assert "PASSWD" not in err and "QUERY" not in err
