"""End to end: the request parameters a LiteLLM user expects carried across protocols (outside trial, LiteLLM user):
structured output to an Anthropic backend as a forced tool, Claude's thinking and top_k from a Chat client and
reasoning effort both ways, and ``n`` above one refused where the backend answers one choice.

The router and the mock upstream run as real processes, the official SDKs are the clients, and what a provider got
is read back from the mock's ``last_request``; each body is also held to the provider rules of ``provider_rules``.
"""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from .procs import config, model, refused_port, router, write_config
from .provider_rules import problems
from .test_e2e_protocols import loss, warnings_of
from .test_e2e_translate_fidelity import chat, messages

BACKENDS = ("openai", "anthropic", "responses")
JSON_TOOL = "json_tool_call"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}}
WEATHER = {"type": "function", "function": {"name": "weather", "description": "the weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
ASK = [{"role": "user", "content": "Where is the Louvre?"}]


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    # Claude reasons; the Chat and Responses models do not (gpt-4o).
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt,
               **({"capabilities": ["reasoning"]} if fmt == "anthropic" else {})} for fmt in BACKENDS]
    # The same backends as models that declare they reason: a Messages client's thinking reaches them as an effort.
    models += [{**model(f"m-{fmt}-r", f"{mock.url}/v1"), "api_format": fmt, "capabilities": ["chat", "reasoning"]}
               for fmt in ("openai", "responses")]
    # A first candidate no one answers (its port closed): the request falls back to the next.
    models.append({**model("m-down", f"http://127.0.0.1:{refused_port()}/v1"), "api_format": "openai"})
    decisions = [{"name": "general", "modelRefs": [{"model": "m-down"}, {"model": "m-anthropic"}]}]
    doc = config(models, decisions)
    doc["recipes"].append({"name": "mixed", "decisions": [
        {"name": "mixed", "modelRefs": [{"model": "m-anthropic"}, {"model": "m-openai"}]}]})
    doc["entrypoints"] = [{"model_names": ["fallback"], "recipe": "default", "default": True},
                          {"model_names": ["mixed"], "recipe": "mixed"}]
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


def last(mock, api_format: str) -> dict:
    """The body the provider got last, checked against the rules providers of ``api_format`` enforce."""
    body = httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]
    assert problems(body, api_format) == [], body
    return body


def requests(mock) -> int:
    return httpx.get(f"{mock.url}/_mock/stats").json()["requests"]


def chat_answer(client, stream: bool, **kw) -> tuple[str, list, str]:
    """(content, tool calls as (name, arguments), finish_reason) of a whole or streamed Chat answer."""
    if not stream:
        choice = client.chat.completions.create(**kw).choices[0]
        calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or ()]
        return choice.message.content or "", calls, choice.finish_reason
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for c in choice.delta.tool_calls or ():
                name, args = calls.get(c.index, ("", ""))
                calls[c.index] = (name + (c.function.name or ""), args + (c.function.arguments or ""))
            finish = choice.finish_reason or finish
    return content, list(calls.values()), finish


# --- 1: structured output to an Anthropic backend, as a forced tool ------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fmt", ["json_schema", "json_object"])
def test_chat_response_format_reaches_claude_as_a_forced_tool_and_returns_as_content(gw, mock, fmt, stream):
    client, tap = chat(gw)
    rf = JSON_SCHEMA if fmt == "json_schema" else {"type": "json_object"}
    content, calls, finish = chat_answer(client, stream, model="m-anthropic", max_tokens=64, messages=ASK,
                                         response_format=rf)
    body = last(mock, "anthropic")
    [tool] = body["tools"]
    assert tool["name"] == JSON_TOOL
    assert tool["input_schema"] == (SCHEMA if fmt == "json_schema" else {"type": "object",
                                                                           "additionalProperties": True})
    assert body["tool_choice"] == {"type": "tool", "name": JSON_TOOL}
    assert json.loads(content) == {"city": "Paris"}
    assert (calls, finish) == ([], "stop")
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_response_format_is_carried_on_fallback_from_an_openai_model(gw, mock, stream):
    client, tap = chat(gw)
    content, calls, finish = chat_answer(client, stream, model="fallback", max_tokens=64, messages=ASK,
                                         response_format=JSON_SCHEMA)
    assert tap.headers["x-vsr-selected-model"] == "m-anthropic"
    assert last(mock, "anthropic")["tool_choice"] == {"type": "tool", "name": JSON_TOOL}
    assert (json.loads(content), calls, finish) == ({"city": "Paris"}, [], "stop")
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_text_format_reaches_claude_and_returns_as_output_text(gw, mock, stream):
    client, tap = chat(gw)
    kw = {"model": "m-anthropic", "input": "Where is the Louvre?", "max_output_tokens": 64,
          "text": {"format": {"type": "json_schema", "name": "place", "schema": SCHEMA, "strict": True}}}
    if stream:
        kinds = []
        with client.responses.stream(**kw) as s:
            for ev in s:
                kinds.append(ev.type)
            resp = s.get_final_response()
        assert "response.output_text.delta" in kinds and "response.function_call_arguments.delta" not in kinds
    else:
        resp = client.responses.create(**kw)
    assert last(mock, "anthropic")["tools"][0]["input_schema"] == SCHEMA
    assert [item.type for item in resp.output] == ["message"]
    assert json.loads(resp.output_text) == {"city": "Paris"}
    assert resp.status == "completed"
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_own_tools_and_response_format_the_json_tool_goes_beside_them(gw, mock, stream):
    """The model must answer with a tool: one of the client's, or the JSON answer; asked for the weather, it
    calls the client's (the mock calls the first tool "any" lets it), which the client gets as a tool call."""
    client, tap = chat(gw)
    content, calls, finish = chat_answer(client, stream, model="m-anthropic", max_tokens=64, messages=ASK,
                                         tools=[WEATHER], response_format=JSON_SCHEMA)
    body = last(mock, "anthropic")
    assert [t["name"] for t in body["tools"]] == ["weather", JSON_TOOL]
    assert body["tool_choice"] == {"type": "any"}
    assert (content, [(n, json.loads(a)) for n, a in calls], finish) == (
        "", [("weather", {"city": "Paris"})], "tool_calls")
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize(("choice", "sent"), [
    ({"type": "function", "function": {"name": "weather"}}, {"type": "tool", "name": "weather"}),
    ("none", {"type": "tool", "name": JSON_TOOL}),
    ("required", {"type": "any"}),
])
def test_a_tool_choice_beside_response_format(gw, mock, choice, sent):
    """Forcing one of its own tools wins (the JSON tool stays declared for a later turn); ``none`` (no tool of the
    client's) leaves the JSON answer to force."""
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=64, messages=ASK, tools=[WEATHER],
                                   tool_choice=choice, response_format=JSON_SCHEMA)
    body = last(mock, "anthropic")
    assert [t["name"] for t in body["tools"]] == ["weather", JSON_TOOL]
    assert body["tool_choice"] == sent
    assert warnings_of(tap.headers) == set()


# --- 2: thinking, top_k and reasoning effort ---------------------------------------------------------------------


@pytest.mark.parametrize("extra", [{"thinking": {"type": "enabled", "budget_tokens": 1024}}, {"top_k": 5}],
                         ids=["thinking", "top_k"])
def test_chat_thinking_or_top_k_reach_claude(gw, mock, extra):
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=2048, messages=ASK, extra_body=extra)
    body = last(mock, "anthropic")
    assert {k: body.get(k) for k in extra} == extra and body["max_tokens"] == 2048
    assert warnings_of(tap.headers) == set()


def test_chat_thinking_with_top_k_keeps_thinking_and_says_top_k_went(gw, mock):
    """Anthropic refuses top_k beside thinking ("Feature compatibility")."""
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=2048, messages=ASK,
                                   extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}, "top_k": 5})
    body = last(mock, "anthropic")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024} and "top_k" not in body
    assert warnings_of(tap.headers) == {loss("dropped", "thinking", "top_k")}


def test_a_wrong_thinking_shape_is_refused_naming_it(gw, mock):
    client, _ = chat(gw)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m-anthropic", max_tokens=2048, messages=ASK,
                                       extra_body={"thinking": {"type": "enabled", "budget_tokens": 10}})
    assert "thinking" in info.value.body["message"], info.value.body


@pytest.mark.parametrize(("effort", "budget"), [("low", 1024), ("medium", 2048), ("high", 4096)])
def test_chat_reasoning_effort_is_claudes_thinking_budget(gw, mock, effort, budget):
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=8192, messages=ASK, reasoning_effort=effort)
    body = last(mock, "anthropic")
    assert (body["thinking"], body["max_tokens"]) == ({"type": "enabled", "budget_tokens": budget}, 8192)
    assert warnings_of(tap.headers) == set()


def test_a_thinking_budget_at_or_above_max_tokens_raises_max_tokens_and_says_so(gw, mock):
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=1000, temperature=0.2, messages=ASK,
                                   reasoning_effort="medium")
    body = last(mock, "anthropic")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048 and "temperature" not in body
    assert warnings_of(tap.headers) == {loss("converted", "thinking", "max_tokens"),
                                        loss("dropped", "thinking", "temperature")}


def test_thinking_with_response_format_asks_for_the_tool_without_forcing_it(gw, mock):
    """Anthropic refuses a forced tool with thinking on: the JSON tool is offered with tool_choice auto and an
    instruction to answer with it."""
    client, tap = chat(gw)
    content, _, finish = chat_answer(client, False, model="m-anthropic", max_tokens=4096, messages=ASK,
                                     reasoning_effort="low", response_format=JSON_SCHEMA)
    body = last(mock, "anthropic")
    assert body["thinking"]["type"] == "enabled" and body["tool_choice"] == {"type": "auto"}
    assert JSON_TOOL in json.dumps(body["system"])
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize(("backend", "effort"), [("openai", "low"), ("openai", "medium"), ("responses", "high")])
def test_messages_thinking_is_reasoning_effort_for_an_openai_backend(gw, mock, backend, effort):
    budget = {"low": 1024, "medium": 3000, "high": 8000}[effort]
    client, tap = messages(gw)
    client.messages.create(model=f"m-{backend}-r", max_tokens=16000, messages=ASK,
                           thinking={"type": "enabled", "budget_tokens": budget})
    body = last(mock, backend)
    assert (body.get("reasoning_effort") if backend == "openai" else body["reasoning"]["effort"]) == effort
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("backend", ["openai", "responses"])
def test_messages_thinking_to_a_model_that_does_not_say_it_reasons_is_dropped_and_listed(gw, mock, backend):
    """gpt-4o and its like answer 400 to reasoning_effort: Claude Code's thinking routed to one must still work."""
    client, tap = messages(gw)
    client.messages.create(model=f"m-{backend}", max_tokens=16000, messages=ASK,
                           thinking={"type": "enabled", "budget_tokens": 2048})
    body = last(mock, backend)
    assert "reasoning_effort" not in body and "reasoning" not in body, body
    assert warnings_of(tap.headers) == {loss("dropped", "model_does_not_reason", "thinking")}


def test_responses_reasoning_effort_is_claudes_thinking(gw, mock):
    client, tap = chat(gw)
    client.responses.create(model="m-anthropic", input="hi", max_output_tokens=8192, reasoning={"effort": "high"})
    assert last(mock, "anthropic")["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert warnings_of(tap.headers) == set()


# --- 3: n above one ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["anthropic", "responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_n_above_one_to_a_one_choice_backend_is_refused_before_any_call(gw, mock, backend, stream):
    client, _ = chat(gw)
    before = requests(mock)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=f"m-{backend}", max_tokens=64, messages=ASK, n=2, stream=stream)
    err = info.value.body
    assert err["param"] == "n" and f"m-{backend}" in err["message"], err
    assert requests(mock) == before


def test_n_above_one_goes_to_the_candidate_that_carries_it(gw, mock):
    client, tap = chat(gw)
    answer = client.chat.completions.create(model="mixed", max_completion_tokens=64, messages=ASK, n=2)
    assert tap.headers["x-vsr-selected-model"] == "m-openai"
    assert last(mock, "openai")["n"] == 2
    assert len(answer.choices) >= 1


# --- tool_choice without its tools, to an Anthropic backend (outside trial) ------------------------------------------


@pytest.mark.parametrize(("kw", "field"), [
    ({"parallel_tool_calls": False}, "parallel_tool_calls"),
    ({"tool_choice": "none"}, "tool_choice"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"tools": [], "tool_choice": "required"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "weather"}}}, "tool_choice"),
])
def test_a_chat_tool_choice_without_tools_is_not_sent_to_claude_and_is_listed(gw, mock, kw, field):
    """Anthropic refuses it ("tool_choice may only be specified while providing tools"), as OpenAI does."""
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=64, messages=ASK, **kw)
    body = last(mock, "anthropic")
    assert "tool_choice" not in body and "tools" not in body, body
    assert warnings_of(tap.headers) == {loss("dropped", "unsupported", field)}


@pytest.mark.parametrize("choice", ["none", "required"])
def test_a_responses_tool_choice_without_tools_is_not_sent_to_claude_and_is_listed(gw, mock, choice):
    client, tap = chat(gw)
    client.responses.create(model="m-anthropic", input="Where is the Louvre?", max_output_tokens=64,
                            tool_choice=choice)
    assert "tool_choice" not in last(mock, "anthropic")
    assert warnings_of(tap.headers) == {loss("dropped", "unsupported", "tool_choice")}


def test_a_tool_choice_none_beside_tools_reaches_claude_as_none(gw, mock):
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=64, messages=ASK, tools=[WEATHER],
                                   tool_choice="none", parallel_tool_calls=False)
    body = last(mock, "anthropic")
    assert body["tool_choice"] == {"type": "none"} and [t["name"] for t in body["tools"]] == ["weather"]
    assert warnings_of(tap.headers) == set()
