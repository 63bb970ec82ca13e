"""The pure parts of the executors that write their own answer (selection.synthesis): how calls spread over the
candidates, what the next call reads, and the Chat answer they return, read back by the official OpenAI types."""
from __future__ import annotations

import json
from collections import Counter

import openai.types.chat as chat_types
import pytest

from vsr_fast.selection import synthesis as syn

REFS = [("a", 3.0), ("b", 1.0), ("c", 0.0)]


@pytest.mark.parametrize(("n", "strategy", "counts"), [
    (4, "weighted", {"a": 3, "b": 1}),
    (2, "weighted", {"a": 2}),                # shares 1.5 and 0.5: the tie on remainders goes to the first listed
    (5, "equal", {"a": 2, "b": 2, "c": 1}),
    (4, "round_robin", {"a": 2, "b": 1, "c": 1}),
    (3, "first_only", {"a": 3}),
])
def test_distribute_spreads_calls_by_strategy(n, strategy, counts):
    calls = syn.distribute(n, REFS, strategy, seed=42)
    assert len(calls) == n and Counter(calls) == counts
    assert calls == syn.distribute(n, REFS, strategy, seed=42)        # the seed makes it reproducible


def test_weightless_candidates_are_spread_equally():
    assert Counter(syn.distribute(4, [("a", 0.0), ("b", 0.0)], "weighted", 1)) == {"a": 2, "b": 2}


def test_round_robin_keeps_the_modelrefs_order():
    assert syn.distribute(5, REFS, "round_robin", 0) == ["a", "b", "c", "a", "b"]


def test_the_next_round_reads_the_problem_and_compacted_references():
    refs = [syn.Reply("a", "x" * 10), syn.Reply("b", "short")]
    prompt = syn.remom_prompt(None, "What is 2+2?", refs, "last_n_tokens", 1)
    assert "Original Problem:\nWhat is 2+2?" in prompt
    assert "Reference 1 (a):\nxxxx\n" in prompt and "Reference 2 (b):\nshor" not in prompt
    assert "Reference 2 (b):\nhort" in prompt          # the last 4 characters: one token's worth
    custom = syn.remom_prompt("Q={{original}} R={{references}}", "P", refs[1:], "full", 10)
    assert custom == "Q=P R=Reference 1 (b):\nshort"


def test_longest_prefers_the_newest_round_on_ties():
    rounds = [[syn.Reply("a", "four")], [syn.Reply("b", "four"), syn.Reply("c", "  ")]]
    assert syn.longest(rounds).model == "b"


@pytest.mark.parametrize(("text", "parsed"), [
    ('{"consensus": ["x"], "extra": 1}', {"consensus": ["x"]}),
    ('```json\n{"blind_spots": []}\n```', {"blind_spots": []}),
    ('Here it is: {"contradictions": ["y"]} done', {"contradictions": ["y"]}),
    ("not json at all", None),
])
def test_the_judges_analysis_is_read_as_json(text, parsed):
    assert syn.parse_analysis(text) == parsed


def test_a_role_reads_the_outputs_its_access_list_names():
    steps = [syn.Step("plan", None, [syn.Reply("a", "P", agent="plan:0:a")]),
             syn.Step("solve", None, [syn.Reply("a", "S1", agent="solve:0:a"), syn.Reply("b", "S2", agent="solve:1:b")])]
    assert [r.text for _, r in syn.visible(steps, [])] == ["P", "S1", "S2"]
    assert [r.text for _, r in syn.visible(steps, ["plan"])] == ["P"]
    assert [r.text for _, r in syn.visible(steps, ["solve:1:b"])] == ["S2"]
    prompt = syn.step_prompt("Q?", "verify", "Check.", syn.visible(steps, ["plan"]))
    assert "Your instruction: Check." in prompt and "[plan:0:a] (plan):\nP" in prompt and "S1" not in prompt


def test_the_answer_parses_as_a_chat_completion_and_its_stream_as_chunks():
    answer = syn.Answer("a", [("one", "a"), ("two", "b")], input_tokens=7, output_tokens=3,
                        extension={"models": ["a", "b"]})
    whole = chat_types.ChatCompletion.model_validate_json(syn.chat_whole(answer, "ratings"))
    assert [c.message.content for c in whole.choices] == ["one", "two"]
    assert whole.usage.total_tokens == 10 and whole.model_dump()["looper"] == {"algorithm": "ratings",
                                                                                 "models": ["a", "b"]}
    assert [c.model_dump()["model"] for c in whole.choices] == ["a", "b"]
    chunks = [chat_types.ChatCompletionChunk.model_validate(json.loads(line[6:]))
              for line in syn.chat_stream(answer, "ratings").decode().split("\n\n")
              if line.startswith("data: {")]
    texts: dict[int, str] = {}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
    assert texts == {0: "one", 1: "two"}
    assert chunks[-1].usage.completion_tokens == 3
    single = syn.Answer("a", [("only", "a")])
    assert "model" not in json.loads(syn.chat_whole(single, "remom"))["choices"][0]


def test_a_plan_is_read_into_roles_within_the_modelrefs_and_max_steps():
    text = '```json\n{"steps": [{"id": "a1", "models": ["m1"], "prompt": "go"}, {"role": "r2", "models": ["m2"]},' \
           ' {"id": "a3", "models": ["m1"]}], "final": {"model": "m2", "prompt": "merge"}}\n```'
    roles, final = syn.parse_plan(text, ["m1", "m2"], max_steps=2)
    assert [(r.name, r.models, r.prompt) for r in roles] == [("a1", ["m1"], "go"), ("r2", ["m2"], None)]
    assert (final.model, final.prompt) == ("m2", "merge")
    with pytest.raises(ValueError, match="outside the decision's modelRefs"):
        syn.parse_plan('{"steps": [{"id": "x", "models": ["ghost"]}]}', ["m1"], 4)
    with pytest.raises(ValueError, match="not JSON with a list of steps"):
        syn.parse_plan("I would first think about it.", ["m1"], 4)
    with pytest.raises(ValueError, match="step 1 is not a step"):
        syn.parse_plan('{"steps": [{"id": "x", "models": []}]}', ["m1"], 4)
    assert "only these models: m1, m2" in syn.plan_prompt("Q", ["m1", "m2"], 3)
