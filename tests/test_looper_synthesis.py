"""The pure parts of the executors that write their own answer (selection.synthesis): how calls spread over the
candidates, what the next call reads, and the Chat answer they return, read back by the official OpenAI types."""
from __future__ import annotations

import json
from collections import Counter

import openai.types.chat as chat_types
import pytest

from vsr_fast.selection import synthesis as syn

from .provider_rules import problems

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


# --- an executor's request: no tools, the tool exchange as text -------------------------------------------


def asked(body: dict, api: str, prompt: str | None = None) -> dict:
    out = json.loads(syn.with_prompt(syn.plain_body(json.dumps(body).encode()), api, prompt))
    assert problems(out, {"chat": "openai", "messages": "anthropic"}.get(api, api)) == []
    return out


def test_a_messages_turn_answering_tools_beside_the_users_words_keeps_both_under_a_prompt():
    body = {"model": "m", "max_tokens": 9, "stream": True, "tools": [{"name": "t"}], "messages": [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                          {"type": "tool_use", "id": "tu1", "name": "t", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "is_error": True,
                                      "cache_control": {"type": "ephemeral"},
                                      "content": [{"type": "text", "text": "boom"},
                                                  {"type": "image", "source": {"type": "url", "url": "u"}}]},
                                     {"type": "text", "text": "and now?"}]}]}
    out = asked(body, "messages", "PROMPT")
    assert "stream" not in out and "tools" not in out
    assert out["messages"][0]["content"] == "Q"        # the user's own last turn is the one replaced
    assert out["messages"][1]["content"][0]["type"] == "thinking"
    assert out["messages"][1]["content"][1] == {"type": "text",
                                                "text": 'Called tool t (call tu1) with arguments: {"a":1}'}
    assert out["messages"][2]["content"] == [
        {"type": "text", "text": "Error from tool t (call tu1):\nboom", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "source": {"type": "url", "url": "u"}}, {"type": "text", "text": "PROMPT"}]
    only_results = {**body, "messages": [*body["messages"][:2], {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu1", "content": "fine"}]}]}
    out = asked(only_results, "messages", "PROMPT")
    # A turn of tool results only is not the user's: the user's stays, and the prompt comes last, after them.
    assert out["messages"][0]["content"] == "Q"
    assert out["messages"][2]["content"] == [{"type": "text", "text": "Result of tool t (call tu1):\nfine"},
                                             {"type": "text", "text": "PROMPT"}]


def test_chat_legacy_functions_and_tool_results_become_user_turns_of_text():
    body = {"model": "m", "functions": [{"name": "f"}], "function_call": "auto", "parallel_tool_calls": False,
            "messages": [{"role": "user", "content": "Q"},
                         {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}],
                          "tool_calls": [
                              {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}},
                              {"id": "c2", "type": "function", "function": {"name": "u", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "one"}]},
                         {"role": "tool", "tool_call_id": "c2", "content": "two"},
                         {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
                         {"role": "function", "name": "f", "content": "three"}]}
    out = asked(body, "chat")
    assert set(out) == {"model", "messages"}
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user", "user", "assistant", "user"]
    assert out["messages"][1]["content"][-1]["text"] == ("Called tool t (call c1) with arguments: {}\n\n"
                                                         "Called tool u (call c2) with arguments: {}")
    assert [m["content"] for m in out["messages"][2:4]] == ["Result of tool t (call c1):\none",
                                                            "Result of tool u (call c2):\ntwo"]
    assert out["messages"][5]["content"] == "Result of tool f (call -):\nthree"


def test_a_responses_call_takes_its_reasoning_item_and_declared_tools_go():
    body = {"model": "m", "input": [
        {"role": "user", "content": "Q"},
        {"type": "additional_tools", "tools": [{"type": "custom", "name": "apply_patch"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "namespace": "functions",
         "input": "*** x"},
        {"type": "custom_tool_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "ok"}, {"type": "input_image", "image_url": "u"}]}]}
    out = asked(body, "responses", "PROMPT")
    assert out["input"] == [        # the prompt after the conversation's last turn, the tool's output
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "Called tool functions__apply_patch (call c1) with arguments: *** x"},
        {"role": "user", "content": [
            {"type": "input_text", "text": "Result of tool functions__apply_patch (call c1):\nok"},
            {"type": "input_image", "image_url": "u"}]},
        {"role": "user", "content": "PROMPT"}]
