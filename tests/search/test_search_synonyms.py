"""Synonyms and abbreviations: the built-in table, the user's DB/synonyms.txt, one-way rules."""

from __future__ import annotations

from collections import Counter

from search_fixtures import fresh, top, write_page

from ragkit.search import synonyms as S


def test_builtin_groups_expand_both_ways_and_rules_one_way(tmp_path):
    syn = S.Synonyms(tmp_path)
    q: Counter = Counter({"capex": 1.0})
    syn.expand("What was capex in 2020?", q)
    assert q["purchas"] == S.SYN_WEIGHT or q["purchase"] == S.SYN_WEIGHT  # the page's words, stemmed
    q = Counter({"current": 1.0, "ratio": 1.0})
    syn.expand("current ratio of Nike", q)
    assert q["liabiliti"] or q["liability"] or q["liabilities"]
    q = Counter({"current": 1.0, "asset": 1.0})
    syn.expand("current assets of Nike", q)
    assert "ratio" not in q  # one-way: a line item does not mean its ratios
    q = Counter({"貸借": 1.0, "借対": 1.0, "対照": 1.0, "照表": 1.0})
    syn.expand("貸借対照表はどこ", q)
    assert q["balance"] == S.SYN_WEIGHT and q["sheet"] == S.SYN_WEIGHT  # Japanese question, English filing


def test_a_user_file_in_the_database_adds_entries_and_is_reread(tmp_path):
    db = tmp_path / "database"
    write_page(db, "m/router/s/page_001.md", "# Lamp codes\nThe status lamp blinks amber when offline.")
    write_page(db, "m/router/s/page_002.md", "# Cables\nUse the supplied cable.")
    idx = fresh(db)
    assert top(idx, "what does the LED mean") == []
    (db / S.USER_FILE).write_text("# ours\nled | status lamp\n", encoding="utf-8")
    assert top(idx, "what does the LED mean", k=1) == ["m/router/s/page_001.md"]
    (db / S.USER_FILE).write_text("", encoding="utf-8")
    assert top(idx, "what does the LED mean") == []
    assert "synonyms.txt" not in " ".join(idx.pages())  # never a page
