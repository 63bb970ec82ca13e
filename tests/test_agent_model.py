"""The scripted agent model (bench/agent_model.py) as a real process, read by the official SDKs.

Its tool round trip in each API, whole and streamed (each streamed event validated by the
SDK's own type), the shapes the real agents use (namespaces and freeform tools in
``additional_tools``), Anthropic's refusal of beta fields without their header, and its log.
"""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from bench.agent_model import DONE, HELLO, STRING_VALUE, example

from .procs import Proc

SCHEMA = {"type": "object", "required": ["city", "days", "unit", "when", "tags"],
          "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 3},
                         "unit": {"enum": ["C", "F"]}, "when": {"type": "object", "required": ["hour"],
                                                                "properties": {"hour": {"type": "number"}}},
                         "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                         "optional": {"type": "string"}}}
ARGS = {"city": STRING_VALUE, "days": 3, "unit": "C", "when": {"hour": 1.0}, "tags": [STRING_VALUE]}
PROMPT = "Use the tool."


@pytest.fixture(scope="module")
def agent():
    with Proc(["-m", "bench.agent_model", "--host", "127.0.0.1", "--port", "0"], "listening") as proc:
        yield proc.url


def log(url: str) -> list[dict]:
    return httpx.get(f"{url}/_agent/log").json()


def test_example_arguments_validate_the_schema():
    assert example(SCHEMA) == ARGS
    assert example({"anyOf": [{"type": "null"}, {"type": "boolean"}]}) is False
    assert example({"type": ["null", "integer"], "minimum": -5}) == -5
    assert example({"const": "x"}) == "x"


def validate_sse(text: str, adapter: TypeAdapter | None) -> list[str]:
    """Every data line of a stream parsed by the SDK's type; the event names, in order."""
    names = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        if lines["data"] == "[DONE]":
            names.append("[DONE]")
            continue
        data = json.loads(lines["data"])
        if adapter is None:
            ChatCompletionChunk.model_validate(data)
        else:
            if data["type"] != "ping":   # Anthropic sends pings; the SDK's event union leaves them out
                adapter.validate_python(data)
            assert lines["event"] == data["type"]
        names.append(lines.get("event", "chunk"))
    return names


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_round_trip(agent, stream):
    sdk = openai.OpenAI(base_url=f"{agent}/v1", api_key="x", max_retries=0)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": SCHEMA}},
             {"type": "function", "function": {"name": "second", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": PROMPT}]
    if stream:
        with sdk.chat.completions.stream(model="m", messages=messages, tools=tools,
                                         stream_options={"include_usage": True}) as s:
            first = s.get_final_completion()
    else:
        first = sdk.chat.completions.create(model="m", messages=messages, tools=tools)
    msg = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and first.usage.prompt_tokens > 0
    [call] = msg.tool_calls
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == ARGS
    messages += [msg.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = sdk.chat.completions.create(model="m", messages=messages, tools=tools)
    assert second.choices[0].message.content == DONE and second.choices[0].finish_reason == "stop"
    raw = httpx.post(f"{agent}/v1/chat/completions", json={"model": "m", "messages": messages[:1], "tools": tools,
                                                           "stream": True, "stream_options": {"include_usage": True}})
    names = validate_sse(raw.text, None)
    assert names[-1] == "[DONE]" and len(names) > 4


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_messages_round_trip(agent, stream):
    sdk = anthropic.Anthropic(base_url=agent, api_key="x", max_retries=0)
    tools = [{"name": "lookup", "input_schema": SCHEMA},
             {"type": "web_search_20250305", "name": "web_search"}]
    messages = [{"role": "user", "content": PROMPT}, {"role": "system", "content": "Mid-conversation."}]
    kw = {"model": "m", "max_tokens": 100, "messages": messages, "tools": tools}
    if stream:
        with sdk.messages.stream(**kw) as s:
            first = s.get_final_message()
    else:
        first = sdk.messages.create(**kw)
    assert first.stop_reason == "tool_use"
    [text, use] = first.content
    assert text.type == "text" and use.name == "lookup" and use.input == ARGS
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}]
    second = sdk.messages.create(**{**kw, "messages": messages})
    assert second.content[0].text == DONE and second.stop_reason == "end_turn"
    raw = httpx.post(f"{agent}/v1/messages", json={**kw, "stream": True})
    names = validate_sse(raw.text, TypeAdapter(RawMessageStreamEvent))
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_round_trip_with_codex_shapes(agent, stream):
    """Tools in an additional_tools item, grouped in a namespace, the first a freeform custom tool."""
    sdk = openai.OpenAI(base_url=f"{agent}/v1", api_key="x", max_retries=0)
    namespace = {"type": "namespace", "name": "functions", "description": "", "tools": [
        {"type": "custom", "name": "exec", "description": "Run code", "format": {"type": "text"}},
        {"type": "function", "name": "wait", "parameters": SCHEMA, "strict": False}]}
    items = [{"type": "additional_tools", "role": "developer", "tools": [namespace]},
             {"role": "user", "content": [{"type": "input_text", "text": PROMPT}]}]
    body = {"model": "m", "input": items, "stream": stream}
    if stream:
        with sdk.responses.stream(model="m", input=items) as s:
            first = s.get_final_response()
    else:
        first = sdk.responses.create(**body)
    message, call = first.output
    assert message.type == "message" and call.type == "custom_tool_call"
    assert (call.name, call.namespace, call.input) == ("exec", "functions", STRING_VALUE)
    items += [call.model_dump(exclude_none=True),
              {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "ok"}]
    second = sdk.responses.create(model="m", input=items)
    assert second.output_text == DONE
    raw = httpx.post(f"{agent}/v1/responses", json={**body, "input": items[:2], "stream": True})
    names = validate_sse(raw.text, TypeAdapter(ResponseStreamEvent))
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert "response.custom_tool_call_input.delta" in names


def test_beta_fields_need_their_header(agent):
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
            "context_management": {"edits": []}, "output_config": {"effort": "low"},
            "thinking": {"type": "adaptive"}}
    refused = httpx.post(f"{agent}/v1/messages", json=body)
    assert refused.status_code == 400
    assert refused.json()["type"] == "error"
    assert refused.json()["error"] == {"type": "invalid_request_error",
                                       "message": "context_management: Extra inputs are not permitted"}
    ok = httpx.post(f"{agent}/v1/messages", json=body,
                    headers={"anthropic-beta": "claude-code-20250219,context-management-2025-06-27"})
    assert ok.status_code == 200 and ok.json()["content"][0]["text"] == HELLO
    entries = log(agent)[-2:]
    assert [e["answer"]["status"] for e in entries] == [400, 200]
    assert entries[1]["headers"]["anthropic-beta"].endswith("context-management-2025-06-27")
    assert entries[1]["body"] == body


def test_tool_choice_without_tools_is_refused_like_the_real_apis(agent):
    chat = httpx.post(f"{agent}/v1/chat/completions",
                      json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "auto"})
    assert chat.status_code == 400 and "'tool_choice' is only allowed when 'tools' are specified" in chat.text
    messages = httpx.post(f"{agent}/v1/messages", json={"model": "m", "max_tokens": 5, "tool_choice": {"type": "auto"},
                                                        "messages": [{"role": "user", "content": "hi"}]})
    assert messages.status_code == 400 and messages.json()["error"]["type"] == "invalid_request_error"


def test_count_tokens_and_bad_bodies(agent):
    counted = httpx.post(f"{agent}/v1/messages/count_tokens",
                         json={"model": "m", "messages": [{"role": "user", "content": "hello there"}]})
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    bad = httpx.post(f"{agent}/v1/responses", content=b"{not json")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(f"{agent}/v1/nowhere").status_code == 404
    assert httpx.post(f"{agent}/_agent/reset").status_code == 200 and log(agent) == []


def test_a_tool_result_must_answer_a_call(agent):
    """As at the real APIs: a result without its call is refused, in each API's words."""
    chat = httpx.post(f"{agent}/v1/chat/completions", json={"model": "m", "messages": [
        {"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_x", "content": "r"}]})
    assert chat.status_code == 400 and "must be a response to a preceeding message with 'tool_calls'" in chat.text
    messages = httpx.post(f"{agent}/v1/messages", json={"model": "m", "max_tokens": 5, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "r"}]}]})
    assert messages.status_code == 400
    assert messages.json()["error"]["message"].startswith("messages.1.content.0: unexpected `tool_use_id`")
    responses = httpx.post(f"{agent}/v1/responses", json={"model": "m", "input": [
        {"type": "function_call_output", "call_id": "call_x", "output": "r"}]})
    assert responses.status_code == 400 and "call_id call_x" in responses.json()["error"]["message"]
