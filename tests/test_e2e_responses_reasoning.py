"""End to end: a Responses backend's reasoning reaches Chat and Messages clients and its chain goes on (real-agent
trial: Claude Code in front of a gpt-5-style backend got no thinking, only a ``translation_loss`` on ``output[0]``,
and turn 2 of its tool loop sent the function_call back without its reasoning item, so the model lost its chain).

A scripted upstream started here plays a gpt-5-style Responses model (``store: false``): a ``reasoning`` item (a
summary and ``encrypted_content``) then a function call, whole and streamed; after the call's output, a reasoning
item and a message. It also plays Claude, to show the encrypted reasoning never reaches Anthropic. The router runs as
a real process and the official openai and anthropic SDKs are the clients.
"""
from __future__ import annotations

import json

import anthropic
import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_protocols import warnings_of
from .test_e2e_stream_tool_calls import named
from .test_e2e_thinking import WEATHER
from .test_e2e_thinking import chat_turn as thinking_chat_turn

ANTHROPIC_WEATHER = {"name": "get_weather", "description": "the weather in a city",
                     "input_schema": WEATHER["function"]["parameters"]}
ASK = [{"role": "user", "content": "weather?"}]
SUMMARY = ["**Weather lookup**\n\nThe user wants the weather; ", "call get_weather for Paris."]
THOUGHT = "".join(SUMMARY)
ENCRYPTED, ENCRYPTED_2 = "gAAAAABo-first-chain==", "gAAAAABo-second-chain=="
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": "get_weather",
        "arguments": '{"city":"Paris"}', "status": "completed"}
PREFIX = "vsr-openai-reasoning:"


def reasoning_item(encrypted: str, text: str = THOUGHT) -> dict:
    return {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": text}],
            "encrypted_content": encrypted}


def answer(output: list[dict]) -> dict:
    return {"id": "resp_s", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5",
            "output": output, "usage": {"input_tokens": 9, "output_tokens": 7, "total_tokens": 16,
                                        "output_tokens_details": {"reasoning_tokens": 5}}}


FIRST = answer([reasoning_item(ENCRYPTED), CALL])
DONE = answer([reasoning_item(ENCRYPTED_2, "Done."),
               {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Sunny in Paris.", "annotations": []}]}])


# A summary of two parts, the first sent only whole (its .done event), the second half in a delta.
PARTS = ["**Plan**\n\nLook the city up.", "**Then**\n\nAnswer briefly."]
TWO_PARTS = answer([{**reasoning_item(ENCRYPTED), "summary": [{"type": "summary_text", "text": t} for t in PARTS]},
                    CALL])
PIECES = {THOUGHT: SUMMARY, PARTS[0]: [], PARTS[1]: [PARTS[1][:5]]}   # a summary part's deltas


def responses_stream(doc: dict) -> list[bytes]:
    """``doc`` streamed as OpenAI streams it: the reasoning summary in deltas, ``encrypted_content`` only on the
    item's ``output_item.done``."""
    pending = {**doc, "status": "in_progress", "output": []}
    out = [named("response.created", {"response": pending}), named("response.in_progress", {"response": pending})]
    for n, item in enumerate(doc["output"]):
        ids = {"item_id": item["id"], "output_index": n}
        if item["type"] == "reasoning":
            out.append(named("response.output_item.added", {"output_index": n, "item": {
                "type": "reasoning", "id": item["id"], "summary": []}}))
            part = {"type": "summary_text", "text": ""}
            for k, text in enumerate(p["text"] for p in item["summary"]):
                at = {**ids, "summary_index": k}
                out.append(named("response.reasoning_summary_part.added", {**at, "part": part}))
                out += [named("response.reasoning_summary_text.delta", {**at, "delta": p})
                        for p in PIECES.get(text, [text])]
                out += [named("response.reasoning_summary_text.done", {**at, "text": text}),
                        named("response.reasoning_summary_part.done", {**at, "part": {**part, "text": text}})]
        elif item["type"] == "function_call":
            pending = {**item, "arguments": "", "status": "in_progress"}
            out.append(named("response.output_item.added", {"output_index": n, "item": pending}))
            out += [named("response.function_call_arguments.delta", {**ids, "delta": item["arguments"][:8]}),
                    named("response.function_call_arguments.delta", {**ids, "delta": item["arguments"][8:]}),
                    named("response.function_call_arguments.done", {**ids, "arguments": item["arguments"]})]
        else:
            text = item["content"][0]["text"]
            out.append(named("response.output_item.added", {"output_index": n,
                                                            "item": {**item, "content": [], "status": "in_progress"}}))
            part = {"type": "output_text", "text": "", "annotations": []}
            out += [named("response.content_part.added", {**ids, "content_index": 0, "part": part}),
                    named("response.output_text.delta", {**ids, "content_index": 0, "delta": text}),
                    named("response.output_text.done", {**ids, "content_index": 0, "text": text}),
                    named("response.content_part.done", {**ids, "content_index": 0, "part": {**part, "text": text}})]
        out.append(named("response.output_item.done", {"output_index": n, "item": item}))
    return out + [named("response.completed", {"response": doc})]


class Scripted(hostile_upstream.Handler):
    """``/gpt/v1/responses`` answers as a reasoning model; ``/claude/v1/messages`` as Claude (text); every body is
    kept in ``BODIES``."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        BODIES.keep(body)
        if self.path.startswith("/claude"):
            doc = {"id": "msg_s", "type": "message", "role": "assistant", "model": "claude",
                   "content": [{"type": "text", "text": "Sunny in Paris."}], "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 7}}
            self.whole(200, json.dumps(doc).encode())
            return
        items = body["input"] if isinstance(body["input"], list) else []
        doc = DONE if any(i.get("type") == "function_call_output" for i in items) else FIRST
        doc = TWO_PARTS if self.path.startswith("/parts") else doc
        if body.get("stream"):
            self.sse(responses_stream(doc))
        else:
            self.whole(200, json.dumps(doc).encode())


BODIES = hostile_upstream.Bodies()
sent = BODIES.last


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Scripted) as url:
        models = [{"name": "g5", "api_format": "responses", "capabilities": ["reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/gpt/v1"}]},
                  {"name": "g5-parts", "api_format": "responses", "capabilities": ["reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/parts/v1"}]},
                  {"name": "g4", "api_format": "responses", "backend_refs": [{"endpoint": f"{url}/gpt/v1"}]},
                  {"name": "an", "api_format": "anthropic", "capabilities": ["reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/claude/v1"}]}]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": "g5"}]}])
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("responses-reasoning")))) as proc:
            yield proc


def assert_chain_sent(body: dict) -> None:
    """The second backend request: the reasoning item, its encrypted_content unchanged, right before the call."""
    kinds = [i.get("type") for i in body["input"]]
    assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"], kinds
    reasoning = body["input"][-3]
    assert reasoning["encrypted_content"] == ENCRYPTED
    assert reasoning["summary"] == [{"type": "summary_text", "text": THOUGHT}]
    assert body["input"][-2]["call_id"] == "call_A"
    assert body["include"] == ["reasoning.encrypted_content"] and body["store"] is False


def messages_turn(gw, stream: bool, messages: list, model: str = "g5") -> tuple[anthropic.types.Message, dict]:
    client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
    kw = {"model": model, "max_tokens": 2048, "messages": messages, "tools": [ANTHROPIC_WEATHER],
          "thinking": {"type": "enabled", "budget_tokens": 1024}}
    if not stream:
        raw = client.messages.with_raw_response.create(**kw)
        return raw.parse(), dict(raw.headers)
    with client.messages.stream(**kw) as s:
        kinds = [ev.type for ev in s]
        final = s.get_final_message()
        headers = dict(s.response.headers)
    assert "thinking" in kinds and "signature" in kinds
    return final, headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_messages_client_gets_the_reasoning_as_thinking_and_sends_the_chain_back(gw, stream):
    final, headers = messages_turn(gw, stream, ASK)
    first = sent()
    assert first["include"] == ["reasoning.encrypted_content"] and first["store"] is False
    thinking, call = final.content
    assert (thinking.type, thinking.thinking) == ("thinking", THOUGHT)
    assert thinking.signature == PREFIX + ENCRYPTED
    assert (call.type, call.name, call.input) == ("tool_use", "get_weather", {"city": "Paris"})
    assert warnings_of(headers) == set()
    # Turn 2, as Claude Code sends it: the assistant turn as it came back, then the tool's result.
    history = [*ASK, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]}]
    second, headers = messages_turn(gw, stream, history)
    assert_chain_sent(sent())
    assert [b.type for b in second.content] == ["thinking", "text"]
    assert second.content[0].signature == PREFIX + ENCRYPTED_2 and second.content[1].text == "Sunny in Paris."
    assert warnings_of(headers) == set()


def chat_turn(gw, stream: bool, messages: list) -> tuple[dict, dict]:
    """The assistant message of a whole or streamed Chat answer to g5 (LiteLLM's extra fields included, a streamed
    thinking block's index left out, as it is no part of the block), and the headers."""
    message, headers = thinking_chat_turn(gw, stream, messages, model="g5", reasoning_effort="low")
    message["thinking_blocks"] = [{k: v for k, v in b.items() if k != "index"} for b in message["thinking_blocks"]]
    return message, headers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_client_gets_reasoning_content_and_thinking_blocks_carry_the_chain(gw, stream):
    message, headers = chat_turn(gw, stream, ASK)
    assert sent()["include"] == ["reasoning.encrypted_content"]
    assert message["reasoning_content"] == THOUGHT
    assert message["thinking_blocks"] == [{"type": "thinking", "thinking": THOUGHT, "signature": PREFIX + ENCRYPTED}]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    assert warnings_of(headers) == set()
    assistant = {k: message[k] for k in ("role", "content", "tool_calls", "reasoning_content", "thinking_blocks")}
    history = [*ASK, assistant, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "sunny"}]
    second, headers = chat_turn(gw, stream, history)
    assert_chain_sent(sent())
    assert second["content"] == "Sunny in Paris." and second["reasoning_content"] == "Done."
    assert warnings_of(headers) == set()


def test_chat_client_with_reasoning_content_alone_does_not_continue_the_chain(gw):
    """Only ``thinking_blocks`` carry the encrypted reasoning: ``reasoning_content`` alone has none to send back."""
    call = {"id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": THOUGHT},
               {"role": "tool", "tool_call_id": "call_A", "content": "sunny"}]
    message, headers = chat_turn(gw, False, history)
    assert message["content"] == "Sunny in Paris."
    assert [i.get("type") for i in sent()["input"]][-2:] == ["function_call", "function_call_output"]
    assert 'translation_loss;action="dropped";reason="unsupported";field="messages[1].reasoning_content"' in \
        warnings_of(headers)


def test_a_model_that_does_not_reason_is_not_asked_for_encrypted_reasoning(gw):
    messages_turn(gw, False, ASK, model="g4")
    assert "include" not in sent()


def test_the_encrypted_reasoning_never_reaches_anthropic(gw):
    """A history with the Responses model's reasoning sent on to Claude: the block is dropped (Anthropic would
    refuse a signature it did not make), as unsigned thinking is."""
    client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
    thinking = {"type": "thinking", "thinking": THOUGHT, "signature": PREFIX + ENCRYPTED}
    call = {"type": "tool_use", "id": "call_A", "name": "get_weather", "input": {"city": "Paris"}}
    history = [*ASK, {"role": "assistant", "content": [thinking, call]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_A", "content": "sunny"}]}]
    raw = client.messages.with_raw_response.create(model="an", max_tokens=2048, messages=history,
                                                   tools=[ANTHROPIC_WEATHER])
    assert raw.parse().content[0].text == "Sunny in Paris."
    assert [b["type"] for b in sent()["messages"][1]["content"]] == ["tool_use"]
    assert 'translation_loss;action="dropped";reason="unsigned";field="messages[1].content[0]"' in \
        warnings_of(raw.headers)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_summary_of_parts_is_one_thinking_block_whole_or_streamed(gw, stream):
    """The parts a blank line apart, whole or streamed, a part sent only in its .done event included."""
    final, _ = messages_turn(gw, stream, ASK, model="g5-parts")
    assert final.content[0].thinking == "\n\n".join(PARTS)
    assert final.content[0].signature == PREFIX + ENCRYPTED
    message, _ = thinking_chat_turn(gw, stream, ASK, model="g5-parts")
    assert message["reasoning_content"] == "\n\n".join(PARTS)
