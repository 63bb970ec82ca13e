"""An agent's turn routed to an executor that writes its own answer (ratings, remom, fusion, workflows): every call
leaves the client's tools out, so the tool exchange in the history must reach each model as text, which no
provider refuses (tests/provider_rules.py), keeping the tool's name, arguments and result; and the client hears
that its tools and tool_choice were dropped (x-vsr-warnings), as it does of any field not carried.

A real router, the bench mock upstream (one per model: an OpenAI-format one and an Anthropic-format one, so each
keeps the last body it received) and the official openai and anthropic SDKs as clients.
"""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, router, write_config
from .provider_rules import problems

ANSWER = {"oa": "Alpha answer.", "an": "Beta answer."}
FORMAT = {"oa": "openai", "an": "anthropic"}
ALGORITHMS = {
    "RATINGS": {"type": "ratings"},
    # Round 1: oa and an; the synthesis (its turn the executor's own prompt): an.
    "REMOM": {"type": "remom", "remom": {"breadth_schedule": [2], "model_distribution": "round_robin",
                                         "synthesis_model": "an"}},
    # The panel oa and an; the judge an (its analysis, then its synthesis).
    "FUSION": {"type": "fusion", "fusion": {"model": "an", "analysis_models": ["oa", "an"]}},
    # The draft role: oa and an; the final merge: oa.
    "WORKFLOW": {"type": "workflows", "workflows": {"roles": [{"name": "draft", "models": ["oa", "an"]}],
                                                    "final": {"model": "oa", "prompt": "Merge the drafts."}}},
}
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
FUNCTION = {"type": "function", "function": {"name": WEATHER["name"], "description": WEATHER["description"],
                                             "parameters": WEATHER["input_schema"]}}
RESULT = "sunny 20C"


@pytest.fixture(scope="module")
def mocks():
    with mock_upstream("--content", ANSWER["oa"]) as oa, mock_upstream("--content", ANSWER["an"]) as an:
        yield {"oa": oa, "an": an}


@pytest.fixture(scope="module")
def proc(mocks, tmp_path_factory):
    models = [{**model(n, f"{mocks[n].url}/v1"), "api_format": FORMAT[n]} for n in mocks]
    decisions = [{"name": kw.lower(), "priority": 10, "modelRefs": [{"model": "oa"}, {"model": "an"}],
                  "algorithm": alg, "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": kw}]}}
                 for kw, alg in ALGORITHMS.items()]
    doc = config(models, decisions, signals={"keywords": [{"name": kw, "operator": "OR", "keywords": [kw]}
                                                          for kw in ALGORITHMS]})
    doc["global"] = {"stores": {"event_stream": {"backend": "none"}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("executor-tools")))) as p:
        yield p


def question(keyword: str) -> str:
    return f"{keyword}: what is the weather where I am?"      # names no city: Paris is the call's argument only


def ask_chat(url: str, keyword: str) -> tuple[int, httpx.Headers, list[str]]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", tools=[FUNCTION], tool_choice="auto", messages=[
            {"role": "user", "content": question(keyword)},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": RESULT}])
    return raw.status_code, raw.headers, [c.message.content for c in raw.parse().choices]


def ask_messages(url: str, keyword: str) -> tuple[int, httpx.Headers, list[str]]:
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=30)
    raw = client.messages.with_raw_response.create(
        model="vsr/auto", max_tokens=64, tools=[WEATHER], tool_choice={"type": "auto"}, messages=[
            {"role": "user", "content": question(keyword)},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": RESULT}]}])
    return raw.status_code, raw.headers, [b.text for b in raw.parse().content]


def ask_responses(url: str, keyword: str) -> tuple[int, httpx.Headers, list[str]]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    raw = client.responses.with_raw_response.create(
        model="vsr/auto", tool_choice="auto",
        tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER["input_schema"]}],
        input=[{"role": "user", "content": question(keyword)},
               {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                "arguments": '{"city": "Paris"}'},
               {"type": "function_call_output", "call_id": "call_1", "output": RESULT}])
    return raw.status_code, raw.headers, [raw.parse().output_text]


CLIENTS = {"chat": ask_chat, "messages": ask_messages, "responses": ask_responses}


def received(mock) -> dict:
    """The body of the last request the mock provider received."""
    return httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]


def texts(value) -> str:
    """Every string in a body's messages, joined: what the model reads."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(texts(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(texts(v) for v in value)
    return ""


@pytest.mark.parametrize("client", ["chat", "messages"])
@pytest.mark.parametrize("keyword", list(ALGORITHMS))
def test_every_executor_call_carries_the_tool_exchange_as_text_no_provider_refuses(proc, mocks, keyword, client):
    for m in mocks.values():
        httpx.post(f"{m.url}/_mock/reset").raise_for_status()
    status, headers, answers = CLIENTS[client](proc.url, keyword)
    assert status == 200 and headers["x-vsr-selected-decision"] == keyword.lower()
    for name, mock in mocks.items():
        body = received(mock)
        assert "tools" not in body
        assert problems(body, FORMAT[name]) == [], (name, body["messages"])
        read = texts(body["messages"])
        # The call (tool, arguments) and its result still reach the model, in the turns that held them.
        assert "get_weather" in read and "Paris" in read and RESULT in read, (name, body["messages"])
        assert body["messages"][-1]["role"] == "user"
    # Each model answered the turn, not a tool result (the mock quotes a tool result it is given).
    assert all(a in ANSWER.values() for a in answers), answers


@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_client_is_told_its_tools_and_tool_choice_were_dropped(proc, mocks, client):
    status, headers, answers = CLIENTS[client](proc.url, "RATINGS")
    assert status == 200
    warnings = headers.get("x-vsr-warnings", "")
    for field in ("tools", "tool_choice"):
        assert f'translation_loss;action="dropped";reason="unsupported";field="{field}"' in warnings, warnings
    # The exchange went as text: the call and the result, each named by the client's own field.
    tool_paths = {"chat": ("messages[1].tool_calls[0]", "messages[2]"),
                  "messages": ("messages[1].content[0]", "messages[2].content[0]"),
                  "responses": ("input[1]", "input[2]")}[client]
    for path in tool_paths:
        assert f'translation_loss;action="converted";reason="unsupported";field="{path}"' in warnings, warnings


def test_a_responses_agent_turn_reaches_every_rated_model_as_text(proc, mocks):
    for m in mocks.values():
        httpx.post(f"{m.url}/_mock/reset").raise_for_status()
    status, _, answers = ask_responses(proc.url, "RATINGS")
    assert status == 200 and answers == [ANSWER["oa"]]
    for name, mock in mocks.items():
        body = received(mock)
        assert problems(body, FORMAT[name]) == [], (name, body["messages"])
        read = texts(body["messages"])
        assert "get_weather" in read and "Paris" in read and RESULT in read
