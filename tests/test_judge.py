"""Judges: the lexical checklist judge (ja/ko/en), the LLM checklist, rubric and LLM-Accuracy judges through the
real openai client against the scripted server, Contain-Match, and the Evaluation Reason line."""

from __future__ import annotations

import json

import pytest
from fakeserver import TEST_KEY, openai_settings

from ragkit.core.config import Settings
from ragkit.core.errors import RagError
from ragkit.core.llm import OfflineProvider, get_provider
from ragkit.core.models import Source, Usage
from ragkit.evaluate.judges import (
    COVER_THRESHOLD,
    RUBRIC_COLUMNS,
    ChecklistVerdict,
    RubricConfig,
    answer_text_for_judging,
    contain_match,
    evaluation_reason,
    find_hallucinations,
    judge_checklist,
    judge_rubric,
    lexical_checklist,
    llm_accuracy,
    score_rubric,
)
from ragkit.evaluate.metrics import checklist_metrics, reference_metrics

ITEMS = ["Clean the filter every 2 weeks", "Unplug the unit before cleaning", "Use a soft brush"]
ANSWER = ("Clean the filter every 2 weeks (database/ac/manual/care/page_012.md). Unplug it first. "
          "The warranty lasts 12 months.")


def judge(server, **kw):
    return get_provider(openai_settings(server, **kw), role="judge")


def kinds(server) -> list[str | None]:
    return [(r.get("response_format") or {}).get("type") for r in server.requests]


# == lexical judge ===================================================================================
def test_lexical_japanese():
    answer = ("製氷皿は水洗いしてください。週に1回、給水タンクを掃除します。霜取りは自動で行われます。\n"
              "(database/冷蔵庫/r_h54xg_b/操作と機能/page_008.md)")
    items = ["製氷皿を水で洗う", "給水タンクは週1回掃除する", "電源プラグを抜く", "浄水フィルターを交換する"]
    v = lexical_checklist(answer, items)
    assert v.covered == [True, True, False, False] and v.judge == "lexical"
    assert v.evidence[0] == "製氷皿は水洗いしてください。" and v.evidence[2] == ""
    assert v.extra_points == ["霜取りは自動で行われます。"]  # matches no item; the citation is not a point
    assert v.usage == Usage() and v.items == items


def test_lexical_japanese_number_must_match():
    v = lexical_checklist("給水タンクは週に2回掃除します。", ["給水タンクは週1回掃除する"])
    assert v.covered == [False]  # every word is there, but the number differs


def test_lexical_korean():
    answer = "필터는 한 달에 한 번 청소하세요. 전원을 끈 후 물로 씻으십시오.\n출처: database/에어컨/manual/관리/page_012.md"
    items = ["필터를 매달 청소", "전원을 끈다", "전원 코드를 뽑는다", "실외기를 점검한다"]
    v = lexical_checklist(answer, items)
    assert v.covered == [True, True, False, False]
    assert v.extra_points == []  # both sentences belong to items; the 출처 line is not a point


def test_lexical_korean_word_spaces_are_not_joined():
    # "필터를 매달" must not yield the cross-word bigram "를매" (text.normalize joins CJK spaces for Japanese)
    from ragkit.evaluate.judges.lexical import _Bag

    assert set(_Bag.of("필터를 매달 청소").units) == {"c:필터", "c:터를", "c:매달", "c:청소"}
    assert "c:皿を" in _Bag.of("製氷皿 を洗う").units  # Japanese keeps the join (line-wrap artefacts)


def test_lexical_english_with_negatives():
    v = lexical_checklist(ANSWER + "\n\nSources:\n- database/ac/manual/care/page_012.md", ITEMS)
    assert v.covered == [True, False, False]  # "Unplug it first": 1 of the item's 3 content words
    # "Unplug it first." is about item 2 (half its words are the item's), so not an extra point
    assert v.extra_points == ["The warranty lasts 12 months."]
    v = lexical_checklist("Unplug the unit before you start cleaning it.", ITEMS)
    assert v.covered == [False, True, False]


def test_lexical_english_numbers_and_inflections():
    v = lexical_checklist("The ice maker produces about 100 cubes per day. Filters are cleaned monthly.",
                          ["Produces 1,000 cubes per day", "The filter must be cleaned monthly",
                           "It produces 100 cubes daily"])
    # 1000 != 100; the last item has 3 of its 4 units ("daily" is not "per day") >= 0.6
    assert v.covered == [False, True, True]
    v = lexical_checklist("It costs ¥1,000 (tax incl.).", ["Price 1000 yen", "costs ¥１０００"])
    assert v.covered == [False, True]  # numbers match across "1,000"/"1000"/full width; "price", "yen" missing


def test_lexical_ignores_offline_notice_citations_and_refusals():
    answer = ("[offline provider: extractive answer, no model] Clean the filter every 2 weeks. [1]\n"
              "I cannot answer this from the documents.")
    assert answer_text_for_judging(answer) == "Clean the filter every 2 weeks."
    assert answer_text_for_judging("Offline answer (no model): Clean it.\nオフライン回答です。") == "Clean it."
    v = lexical_checklist(answer, ["offline extractive provider"])
    assert v.covered == [False]  # the notice's words never cover an item


def test_lexical_empty_answer_and_empty_items():
    v = lexical_checklist("", ITEMS)
    assert v.covered == [False, False, False] and v.extra_points == []
    v = lexical_checklist("Clean the filter.", [])
    assert v.covered == [] and v.extra_points == ["Clean the filter."]  # no item: every point is extra
    assert lexical_checklist("Yes. See page 8.", []).extra_points == []  # too small to be key points
    assert COVER_THRESHOLD == 0.6


def test_offline_provider_uses_lexical_judge():
    v = judge_checklist(OfflineProvider(), "How do I clean it?", ANSWER, ITEMS)
    assert v.judge == "lexical" and v.covered == [True, False, False]


# == LLM checklist judge =============================================================================
def verdict_json(covered=(True, False, True), extra=("The warranty lasts 12 months.",)) -> str:
    ev = {0: "Clean the filter every 2 weeks", 2: "soft brush"}
    return json.dumps({"items": [{"item": i + 1, "covered": c, "evidence": ev.get(i, "") if c else ""}
                                 for i, c in enumerate(covered)],
                       "extra_points": list(extra), "reason": "two of three covered"})


def test_llm_checklist_good_verdict(scripted_server):
    scripted_server.enqueue(content=verdict_json(), usage={"prompt_tokens": 500, "completion_tokens": 80})
    v = judge_checklist(judge(scripted_server), "How do I clean the filter?", ANSWER, ITEMS)
    assert isinstance(v, ChecklistVerdict) and v.judge == "llm"
    assert v.covered == [True, False, True] and v.n_covered == 2
    assert v.evidence == ["Clean the filter every 2 weeks", "", "soft brush"]
    assert v.extra_points == ["The warranty lasts 12 months."] and v.missed == [ITEMS[1]]
    assert (v.usage.input_tokens, v.usage.output_tokens, v.usage.calls) == (500, 80, 1)
    body = scripted_server.requests[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "checklist_verdict"
    prompt = json.dumps(body["messages"], ensure_ascii=False)
    assert "1. Clean the filter every 2 weeks" in prompt and "3. Use a soft brush" in prompt and ANSWER[:40] in prompt
    m = checklist_metrics(answerable=True, refused=False, n_items=3, covered=v.n_covered, extra=v.n_extra)
    assert (m["TP"], m["FN"], m["FP"]) == (2, 1, 1)


def test_llm_checklist_invalid_json_then_valid_is_retried(scripted_server):
    scripted_server.enqueue(content="Sure, here is my verdict: covered, not covered, covered")
    scripted_server.enqueue(content=verdict_json())
    v = judge_checklist(judge(scripted_server), "q", ANSWER, ITEMS)
    assert v.covered == [True, False, True] and v.usage.calls == 2
    assert len(scripted_server.requests) == 2
    assert "not usable" in scripted_server.requests[1]["messages"][-1]["content"]


def test_llm_checklist_incomplete_verdict_is_retried_with_the_problem(scripted_server):
    partial = json.dumps({"items": [{"item": 1, "covered": True, "evidence": "x"},
                                    {"item": 2, "covered": False, "evidence": ""}], "extra_points": []})
    scripted_server.enqueue(content=partial)
    scripted_server.enqueue(content=verdict_json(extra=()))
    v = judge_checklist(judge(scripted_server), "q", ANSWER, ITEMS)
    assert v.covered == [True, False, True] and v.extra_points == []
    assert "item(s) 3 not graded" in scripted_server.requests[1]["messages"][-1]["content"]


def test_llm_checklist_unnumbered_items_and_string_booleans(scripted_server):
    scripted_server.enqueue(content=json.dumps({"items": [{"covered": "true", "evidence": "a"},
                                                          {"covered": "no", "evidence": ""},
                                                          {"covered": False, "evidence": "ignored"}],
                                                "extra_points": ["  p  ", "p", ""]}))
    v = judge_checklist(judge(scripted_server), "q", ANSWER, ITEMS)
    assert v.covered == [True, False, False] and v.evidence == ["a", "", ""] and v.extra_points == ["p"]


def test_llm_checklist_invalid_three_times_raises_without_key(scripted_server):
    for _ in range(3):
        scripted_server.enqueue(content="{not json")
    with pytest.raises(RagError) as exc:
        judge_checklist(judge(scripted_server), "q", ANSWER, ITEMS)
    assert len(scripted_server.requests) == 3 and "after 3 attempts" in str(exc.value)
    assert TEST_KEY not in str(exc.value)


def test_llm_checklist_on_server_rejecting_json_schema(scripted_server):
    scripted_server.reject_json_schema = True  # llama.cpp's server: HTTP 500 for json_schema
    scripted_server.enqueue(content=verdict_json())
    v = judge_checklist(judge(scripted_server), "q", ANSWER, ITEMS)
    assert v.covered == [True, False, True]
    assert kinds(scripted_server) == ["json_schema", "json_object"]
    # the schema moved into the prompt, since json_object cannot carry it
    assert "extra_points" in json.dumps(scripted_server.requests[1]["messages"])


def test_llm_checklist_no_call_without_items_or_answer(scripted_server):
    p = judge(scripted_server)
    assert judge_checklist(p, "q", ANSWER, []).covered == []
    assert judge_checklist(p, "q", "  ", ITEMS).covered == [False, False, False]
    assert scripted_server.requests == []


# == rubric (seed 002) ===============================================================================
SOURCES = [Source(path="database/ac/manual/care/page_012.md", page=12, title="Care",
                  excerpt="Clean the filter every 2 weeks. Service: 03-1234-5678."),
           {"path": "database/ac/manual/care/page_013.md", "page": 13, "excerpt": "Use a soft brush."}]


def rubric_json(acc=0.9, comp=0.8, cit=0.7, ctx=0.8, **extra) -> str:
    return json.dumps({"accuracy": acc, "completeness": comp, "citations": cit, "context_relevance": ctx,
                       "reasoning": {"accuracy": "matches the sources"}, "issues": ["no brush advice"],
                       "strengths": ["cites page 12"], **extra})


def rubric(server, answer=ANSWER, **kw):
    return judge_rubric(judge(server), question="How do I clean the filter?", expected="Every 2 weeks.",
                        answer=answer, sources=SOURCES, required_info=ITEMS, **kw)


def test_rubric_scores_weights_and_pass_at_thresholds(scripted_server):
    scripted_server.enqueue(content=rubric_json())
    v = rubric(scripted_server)
    # 0.35*0.9 + 0.25*0.8 + 0.20*0.7 + 0.20*0.8 = 0.815; citations exactly at its 0.70 threshold passes
    assert v.overall == pytest.approx(0.815) and v.passed is True
    assert v.metric_status == {"accuracy": True, "completeness": True, "citations": True,
                               "context_relevance": True}
    assert v.issues == ["no brush advice"] and v.strengths == ["cites page 12"] and v.hallucinations == []
    assert v.reasoning["accuracy"] == "matches the sources" and v.usage.calls == 1
    prompt = scripted_server.requests[0]["messages"][0]["content"]
    assert "- Use a soft brush" in prompt and "database/ac/manual/care/page_012.md (page 12)" in prompt
    assert "Every 2 weeks." in prompt and "03-1234-5678" in prompt
    assert set(v.columns()) == set(RUBRIC_COLUMNS) and v.columns()["Judge Passed"] is True


def test_rubric_fails_below_a_metric_threshold_even_with_high_overall(scripted_server):
    scripted_server.enqueue(content=rubric_json(acc=1.0, comp=1.0, cit=1.0, ctx=0.7))
    v = rubric(scripted_server)
    assert v.overall == pytest.approx(0.94) and v.passed is False
    assert v.metric_status["context_relevance"] is False


def test_rubric_out_of_range_score_is_retried(scripted_server):
    scripted_server.enqueue(content=rubric_json(acc=9))  # a 0-10 scale
    scripted_server.enqueue(content=rubric_json(acc=0.95, comp="high"))  # not a number
    scripted_server.enqueue(content=rubric_json(acc=0.95))
    v = rubric(scripted_server)
    assert v.accuracy == 0.95 and v.usage.calls == 3
    assert "outside 0.0-1.0" in scripted_server.requests[1]["messages"][-1]["content"]
    assert "completeness" in scripted_server.requests[2]["messages"][-1]["content"]


def test_rubric_out_of_range_three_times_raises(scripted_server):
    for _ in range(3):
        scripted_server.enqueue(content=rubric_json(ctx=-0.5))
    with pytest.raises(RagError, match="context_relevance"):
        rubric(scripted_server)


def test_rubric_invented_phone_number_forces_accuracy_zero(scripted_server):
    scripted_server.enqueue(content=rubric_json(acc=0.95, comp=0.9, cit=0.9, ctx=0.9))
    v = rubric(scripted_server, answer=ANSWER + " Call 02-555-0199 for help.")
    assert v.accuracy == 0.0 and v.judge_accuracy_raw == 0.95 and v.passed is False
    assert v.hallucinations == ["phone number not in the sources: 02-555-0199"]
    assert v.issues[0].startswith("hallucination (phone number")
    assert v.overall == pytest.approx(0.25 * 0.9 + 0.2 * 0.9 + 0.2 * 0.9)


def test_rubric_phone_number_from_the_sources_is_not_a_hallucination(scripted_server):
    scripted_server.enqueue(content=rubric_json(acc=0.95))
    v = rubric(scripted_server, answer=ANSWER + " Service: 03 1234 5678.")
    assert v.hallucinations == [] and v.accuracy == 0.95


def test_rubric_user_patterns_from_env_and_file(scripted_server, monkeypatch, tmp_path):
    monkeypatch.setenv("RAG_HALLUCINATION_PATTERNS", r"Globex\s+University" + "\n# a comment\n" + r"(?i)\bcall us\b")
    scripted_server.enqueue(content=rubric_json(acc=0.9))
    v = rubric(scripted_server, answer=ANSWER + " As Globex University rules say, call us.")
    assert v.accuracy == 0.0 and len(v.hallucinations) == 2
    assert v.hallucinations[0] == r"pattern Globex\s+University: Globex University"

    rules = tmp_path / "rules.txt"
    rules.write_text("soft\\s+brush\nwarranty\n", encoding="utf-8")
    monkeypatch.setenv("RAG_HALLUCINATION_PATTERNS", str(rules))
    scripted_server.enqueue(content=rubric_json(acc=0.9))
    v = rubric(scripted_server, answer="Use a soft brush. The warranty lasts 12 months.")
    # "soft brush" is in the sources (a fact); "warranty" is not
    assert v.hallucinations == ["pattern warranty: warranty"] and v.accuracy == 0.0


def test_rubric_bad_user_pattern_is_one_clear_line(monkeypatch, tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("ok\n(unclosed\n", encoding="utf-8")
    with pytest.raises(RagError, match=r"rules.txt: line 2: invalid regular expression '\(unclosed'"):
        RubricConfig.from_env({"RAG_HALLUCINATION_PATTERNS": str(rules)})


def test_rubric_on_server_rejecting_json_schema(scripted_server):
    scripted_server.reject_json_schema = True
    scripted_server.enqueue(content="```json\n" + rubric_json() + "\n```")
    v = rubric(scripted_server)
    assert v.overall == pytest.approx(0.815) and kinds(scripted_server) == ["json_schema", "json_object"]


def test_rubric_offline_is_not_judged(scripted_server):
    assert judge_rubric(OfflineProvider(), question="q", expected="e", answer="a", sources=[],
                        required_info=[]) is None


def test_rubric_config_weights_thresholds_and_validation():
    scores = {"accuracy": 0.5, "completeness": 1.0, "citations": 1.0, "context_relevance": 1.0}
    overall, passed, status = score_rubric(scores, RubricConfig(weights={"accuracy": 2.0, "completeness": 2.0}))
    assert overall == pytest.approx(0.75) and not passed and not status["accuracy"]
    cfg = RubricConfig(thresholds={"accuracy": 0.5}, pass_overall=0.5)
    assert score_rubric(scores, cfg)[1] is True
    with pytest.raises(RagError, match="unknown metric"):
        RubricConfig(weights={"fluency": 1.0})
    with pytest.raises(RagError, match="threshold for accuracy"):
        RubricConfig(thresholds={"accuracy": 1.5})


def test_find_hallucinations_defaults():
    rules = RubricConfig().rules
    assert find_hallucinations("Call 02-XXXX-XXXX.", "", rules) == ["placeholder phone number: 02-XXXX-XXXX"]
    assert find_hallucinations("電話: 0120-123-456", "", rules) == ["phone number not in the sources: 0120-123-456"]
    assert find_hallucinations("電話: 0120-123-456", "フリーダイヤル 0120 123 456", rules) == []
    # dates, versions, prices and page numbers are not phone numbers
    assert find_hallucinations("On 2024-01-15, v1.2.3 cost $1,234.56 (pages 12-15).", "", rules) == []


# == key hygiene =====================================================================================
def test_api_key_never_in_verdicts(scripted_server):
    scripted_server.enqueue(content=verdict_json())
    scripted_server.enqueue(content=rubric_json())
    scripted_server.enqueue(content=json.dumps({"correct": True, "reason": "same"}))
    p = judge(scripted_server)
    cv = judge_checklist(p, "q", ANSWER, ITEMS)
    rv = rubric(scripted_server)
    ok, usage = llm_accuracy(p, question="q", ground_truth="every 2 weeks", answer=ANSWER)
    reason = evaluation_reason(answerable=True, checklist=cv, rubric=rv, llm_correct=ok)
    for blob in (repr(cv), repr(rv), repr(p), reason, json.dumps(cv.__dict__, default=str)):
        assert TEST_KEY not in blob
    assert all(TEST_KEY not in json.dumps(r) for r in scripted_server.requests)  # bodies carry no key


# == seed 004 ========================================================================================
def test_llm_accuracy(scripted_server):
    scripted_server.enqueue(content=json.dumps({"correct": True, "reason": "2,100 million = $2.1B"}),
                            usage={"prompt_tokens": 100, "completion_tokens": 10})
    scripted_server.enqueue(content="{}")  # missing key: retried
    scripted_server.enqueue(content=json.dumps({"correct": False}))
    p = judge(scripted_server)
    ok, usage = llm_accuracy(p, question="Capex?", ground_truth="$2.1B", answer="2,100 million dollars")
    assert ok is True and (usage.input_tokens, usage.output_tokens, usage.calls) == (100, 10, 1)
    assert "$2.1B" in scripted_server.requests[0]["messages"][1]["content"]
    ok, usage = llm_accuracy(p, question="Capex?", ground_truth="$2.1B", answer="$3B")
    assert ok is False and usage.calls == 2


def test_llm_accuracy_without_model_or_ground_truth(scripted_server):
    assert llm_accuracy(OfflineProvider(), question="q", ground_truth="g", answer="a") == (None, Usage())
    p = judge(scripted_server)
    assert llm_accuracy(p, question="q", ground_truth=" ", answer="a") == (None, Usage())
    assert llm_accuracy(p, question="q", ground_truth="g", answer="") == (False, Usage())
    assert scripted_server.requests == []


@pytest.mark.parametrize("answer,truth,expected", [
    ("The capex was $1,577 million in FY2018.", "1577 million", True),
    ("価格は２，５００円です。", "2500円", True),
    ("Growth was 25%.", "2.5%", False),
    ("Growth was 2.5 %.", "2.5%", True),
    ("Headquartered in Tokyo, Japan.", "tokyo-japan", True),
    ("製氷皿を\n水洗いします", "製氷皿を水洗い", True),
    ("Oranges and apples.", "- apples\n- oranges", True),
    ("Oranges only.", "apples; oranges", False),
    ("Net income rose.", "net income fell", False),
    ("anything", "", False),
    ("필터는 한 달에 한 번 청소", "한 달에 한 번", True),
])
def test_contain_match(answer, truth, expected):
    assert contain_match(answer, truth) is expected


# == Evaluation Reason ===============================================================================
def test_evaluation_reason_branches():
    cv = ChecklistVerdict(covered=[True, False, True], evidence=["a", "", "c"], extra_points=["x"], reason="",
                          judge="llm", items=ITEMS)
    ref = reference_metrics("a.md|b.md", ["b.md", "c.md", "d.md"], ["a.md", "b.md", "c.md", "d.md", "e.md"])
    line = evaluation_reason(answerable=True, checklist=cv, ref=ref, contain=False)
    assert line == ("checklist 2/3 covered (missed: Unplug the unit before cleaning), 1 extra point; "
                    "refs 1/1 found, 2 extra; ground truth not contained")
    assert evaluation_reason(answerable=False, refused=True) == "correctly refused: the documents cannot answer this"
    assert evaluation_reason(answerable=False, refused=False, ref=reference_metrics("", ["a.md"], ["a.md"])) == (
        "answered although the documents cannot answer this; refs: none required, 1 extra")
    assert evaluation_reason(answerable=True, refused=True, items=ITEMS) == (
        "refused an answerable question (checklist 0/3)")
    lex = lexical_checklist("Clean the filter every 2 weeks.", ITEMS)
    assert evaluation_reason(answerable=True, checklist=lex).endswith("[lexical judge]")
    assert evaluation_reason(answerable=None, notes=["rubric not judged (offline)"]) == "rubric not judged (offline)"
    assert evaluation_reason(error="openai: HTTP 500\nboom") == "error: openai: HTTP 500 boom"
    long = evaluation_reason(answerable=True, checklist=ChecklistVerdict(
        covered=[False] * 5, evidence=[""] * 5, extra_points=[], reason="", items=["word " * 30] * 5))
    assert "…" in long and "\n" not in long and len(long) <= 400


def test_evaluation_reason_with_rubric(scripted_server):
    scripted_server.enqueue(content=rubric_json(acc=0.95, cit=0.5))
    v = rubric(scripted_server)
    # 0.35*0.95 + 0.25*0.8 + 0.2*0.5 + 0.2*0.8 = 0.7925
    assert evaluation_reason(rubric=v) == "judge 0.79 fail (low: citations 0.50)"


def test_settings_unused_by_offline_judges():
    # the offline judges need no settings, keys or network
    assert judge_checklist(OfflineProvider(Settings()), "q", "", ITEMS).covered == [False] * 3


def test_hallucination_patterns_read_from_dotenv(isolated_env):
    (isolated_env / ".env").write_text('RAG_HALLUCINATION_PATTERNS="Initech"\n', encoding="utf-8")
    cfg = RubricConfig.from_env()
    assert [r.name for r in cfg.rules][-1] == "pattern Initech"
    assert find_hallucinations("Initech says so.", "", cfg.rules) == ["pattern Initech: Initech"]


# == a degenerate rubric reply (report s52 H3) =========================================================
# What qwen2.5-coder-1.5b sent back for two correct, cited answers: the prompt's output example, word for word.
ECHOED_EXAMPLE = json.dumps({"accuracy": 0.0, "completeness": 0.0, "citations": 0.0, "context_relevance": 0.0,
                             "reasoning": {"accuracy": "...", "completeness": "...", "citations": "...",
                                           "context_relevance": "..."},
                             "issues": ["specific problems found"], "strengths": ["specific strengths"]})


def test_rubric_reply_repeating_the_example_is_a_judge_error_not_a_zero(scripted_server):
    from ragkit.evaluate.judges.rubric import _EXAMPLE_TEXTS, COPIED_EXAMPLE

    for _ in range(3):
        scripted_server.enqueue(content=ECHOED_EXAMPLE)
    with pytest.raises(RagError) as e:
        rubric(scripted_server)
    assert COPIED_EXAMPLE in str(e.value) and "\n" not in str(e.value)
    assert len(scripted_server.requests) == 3  # asked again, told why, like an invalid reply
    assert COPIED_EXAMPLE in scripted_server.requests[1]["messages"][-1]["content"]
    # the prompt's own descriptions copied into an otherwise numeric reply are no verdict either
    for _ in range(3):
        scripted_server.enqueue(content=rubric_json(acc=0.9, issues=[_EXAMPLE_TEXTS["issue"]]))
    with pytest.raises(RagError, match="repeated the prompt's example"):
        rubric(scripted_server)


def test_rubric_zeros_are_a_verdict_with_or_without_a_problem_named(scripted_server):
    """Zeros are what a refusal of an answerable question earns (tests/test_trust.py's harsh judge): a verdict,
    asked once, not an error, whether or not the judge names a problem; only a copied example is no verdict."""
    scripted_server.enqueue(content=rubric_json(acc=0, comp=0, cit=0, ctx=0, issues=[]))
    v = rubric(scripted_server)
    assert v.overall == 0.0 and not v.passed and v.usage.calls == 1
    scripted_server.enqueue(content=rubric_json(acc=0, comp=0, cit=0, ctx=0, issues=["the answer is about a TV"]))
    v = rubric(scripted_server)
    assert v.overall == 0.0 and v.issues == ["the answer is about a TV"]


def test_rubric_prompt_example_has_no_literal_values_to_copy(scripted_server):
    scripted_server.enqueue(content=rubric_json())
    rubric(scripted_server)
    prompt = scripted_server.requests[0]["messages"][0]["content"]
    example = prompt[prompt.index("## Output"):]
    assert "specific problems found" not in example and "0.0," not in example and '"..."' not in example
    assert '"accuracy": <score>' in example and "never copy" in example
