"""End to end: the model's reasoning across protocols (outside trial: an agent's tool loop broke on turn 2 against
Claude with thinking on, its thinking blocks dropped both ways).

A scripted upstream started here plays Claude (a signed thinking block then a tool call, whole and streamed, and
Anthropic's check that with thinking on the last assistant turn of a tool loop starts with its signed thinking
block, answering 400 as Anthropic does) and an OpenAI-format reasoning model (``reasoning_content``, DeepSeek's and
vLLM's). The router runs as a real process and the official openai and anthropic SDKs are the clients.
"""
from __future__ import annotations

import base64
import json
import threading
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_protocols import warnings_of
from .test_e2e_stream_tool_calls import chat_chunk, named

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "the weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
ASK = [{"role": "user", "content": "weather?"}]
THOUGHT, SIGNATURE = "The user wants the weather; call get_weather.", "sig-abc=="
CLAUDE_CONTENT = [{"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
                  {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Paris"}}]
CLAUDE = {"id": "msg_s", "type": "message", "role": "assistant", "model": "claude", "content": CLAUDE_CONTENT,
          "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 7}}
CLAUDE_DONE = {**CLAUDE, "content": [{"type": "text", "text": "Sunny in Paris."}], "stop_reason": "end_turn"}
REASONING = "Paris is in France; answer briefly."
DEEPSEEK = {"id": "chatcmpl-d", "object": "chat.completion", "created": 1, "model": "deepseek",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "Sunny.", "reasoning_content": REASONING}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}


def claude_stream(answer: dict) -> list[bytes]:
    out = [named("message_start", {"message": {**answer, "content": [], "stop_reason": None,
                                               "usage": {"input_tokens": 9, "output_tokens": 1}}})]
    for i, b in enumerate(answer["content"]):
        if b["type"] == "thinking":
            out += [named("content_block_start", {"index": i, "content_block": {"type": "thinking", "thinking": "",
                                                                                 "signature": ""}}),
                    named("content_block_delta", {"index": i, "delta": {"type": "thinking_delta",
                                                                        "thinking": b["thinking"][:10]}}),
                    named("content_block_delta", {"index": i, "delta": {"type": "thinking_delta",
                                                                        "thinking": b["thinking"][10:]}}),
                    named("content_block_delta", {"index": i, "delta": {"type": "signature_delta",
                                                                        "signature": b["signature"]}})]
        elif b["type"] == "tool_use":
            out += [named("content_block_start", {"index": i, "content_block": {**b, "input": {}}}),
                    named("content_block_delta", {"index": i, "delta": {"type": "input_json_delta",
                                                                        "partial_json": json.dumps(b["input"])}})]
        else:
            out += [named("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}),
                    named("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": b["text"]}})]
        out.append(named("content_block_stop", {"index": i}))
    return out + [named("message_delta", {"delta": {"stop_reason": answer["stop_reason"]},
                                          "usage": {"output_tokens": 7}}), named("message_stop", {})]


def deepseek_stream() -> list[bytes]:
    return [chat_chunk({"role": "assistant", "content": None}),
            chat_chunk({"reasoning_content": REASONING[:8]}), chat_chunk({"reasoning_content": REASONING[8:]}),
            chat_chunk({"content": "Sunny."}), chat_chunk({}, "stop"),
            chat_chunk({}, usage={"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}), b"data: [DONE]\n\n"]


def anthropic_refusal(body: dict) -> str | None:
    """What the real Messages API refuses of a body's thinking (its words), or None."""
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    for m in body["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else ():
            if b["type"] == "thinking" and not b.get("signature"):
                return "messages.content.thinking.signature: Field required"
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    if thinking and assistants:
        content = assistants[-1]["content"]
        if any(b["type"] == "tool_use" for b in content) and content[0]["type"] not in ("thinking",
                                                                                       "redacted_thinking"):
            return ("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. "
                    "When `thinking` is enabled, a final `assistant` message must start with a thinking block")
    return None


class Scripted(hostile_upstream.Handler):
    """``/claude/v1/messages`` answers as Claude (thinking then a tool call; after a tool result, text),
    ``/deepseek/v1/chat/completions`` as a reasoning model; every body is kept in ``BODIES``."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        with LOCK:
            BODIES.append(body)
        if self.path.startswith("/claude"):
            refused = anthropic_refusal(body)
            if refused is not None:
                error = {"type": "error", "error": {"type": "invalid_request_error", "message": refused}}
                self.whole(400, json.dumps(error).encode())
                return
            last = body["messages"][-1]["content"]
            done = isinstance(last, list) and any(b["type"] == "tool_result" for b in last)
            answer = CLAUDE_DONE if done else CLAUDE
            events = claude_stream(answer)
        else:
            answer, events = DEEPSEEK, deepseek_stream()
        if not body.get("stream"):
            self.whole(200, json.dumps(answer).encode())
            return
        self.sse(events)


BODIES: list[dict] = []
LOCK = threading.Lock()


def sent() -> dict:
    """The body the scripted upstream got last."""
    with LOCK:
        return BODIES[-1]


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Scripted) as url:
        models = [{"name": "an", "api_format": "anthropic", "capabilities": ["reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/claude/v1"}]},
                  {"name": "ds", "api_format": "openai", "capabilities": ["chat", "reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/deepseek/v1"}]}]
        # vsr/auto: a decision whose generation tier turns Claude's thinking on, as the quickstart's deep tier does.
        tier = {"type": "request_params", "configuration": {"generation": {
            "thinking": True, "thinking_budget": 1024, "max_tokens": 4000}}}
        doc = config(models, [{"name": "only", "modelRefs": [{"model": "an"}], "plugins": [tier]}])
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("thinking")))) as proc:
            yield proc


def openai_sdk(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)


def anthropic_sdk(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)


def chat_turn(gw, stream: bool, messages: list, **kw) -> tuple[dict, dict]:
    """The assistant message of a whole or streamed Chat answer (as a dict, LiteLLM's extra fields included),
    and the response headers."""
    client = openai_sdk(gw)
    args = {"model": "an", "messages": messages, "tools": [WEATHER], "max_tokens": 2048, **kw}
    if not stream:
        raw = client.chat.completions.with_raw_response.create(**args)
        return raw.parse().choices[0].message.model_dump(), dict(raw.headers)
    message: dict = {"role": "assistant", "content": None, "reasoning_content": "", "thinking_blocks": [],
                     "tool_calls": []}
    raw = client.chat.completions.with_raw_response.create(stream=True, **args)
    for chunk in raw.parse():
        for choice in chunk.choices:
            d = choice.delta.model_dump()
            message["reasoning_content"] += d.get("reasoning_content") or ""
            message["thinking_blocks"] += d.get("thinking_blocks") or []
            if d.get("content"):
                message["content"] = (message["content"] or "") + d["content"]
            for c in d.get("tool_calls") or ():
                if c["index"] == len(message["tool_calls"]):
                    message["tool_calls"].append({"id": c["id"], "type": "function",
                                                  "function": {"name": c["function"]["name"], "arguments": ""}})
                message["tool_calls"][c["index"]]["function"]["arguments"] += c["function"]["arguments"] or ""
    return message, dict(raw.headers)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_client_gets_claudes_thinking_and_its_tool_loop_goes_on(gw, stream):
    message, headers = chat_turn(gw, stream, ASK, reasoning_effort="low")
    assert sent()["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert message["reasoning_content"] == THOUGHT
    # A streamed block comes indexed, as the openai SDK's accumulator needs it (and goes back with its index).
    assert message["thinking_blocks"] == [{"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE,
                                           **({"index": 0} if stream else {})}]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    assert not any("content[0]" in w for w in warnings_of(headers))
    # Turn 2: the assistant message as returned, and the tool's result.
    assistant = {k: message[k] for k in ("role", "content", "tool_calls", "reasoning_content", "thinking_blocks")}
    history = [*ASK, assistant, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "sunny"}]
    second, headers = chat_turn(gw, stream, history, reasoning_effort="low")
    assert second["content"] == "Sunny in Paris."
    body = sent()
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["messages"][1]["content"][0] == CLAUDE_CONTENT[0]
    assert warnings_of(headers) == set()


def test_a_tool_loop_without_its_thinking_block_goes_without_thinking(gw):
    call = {"id": "toolu_A", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "toolu_A", "content": "sunny"}]
    second, headers = chat_turn(gw, False, history, reasoning_effort="low")
    assert second["content"] == "Sunny in Paris."
    assert "thinking" not in sent()
    assert 'translation_loss;action="dropped";reason="no_thinking_block";field="reasoning_effort"' in \
        headers["x-vsr-warnings"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_responses_client_gets_a_reasoning_item_it_sends_back(gw, stream):
    client = openai_sdk(gw)
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"],
              "strict": False}]
    kw = {"model": "an", "input": "weather?", "tools": tools, "reasoning": {"effort": "low"}, "max_output_tokens": 2048,
          "include": ["reasoning.encrypted_content"], "store": False}
    if stream:
        with client.responses.stream(**kw) as s:
            kinds = [ev.type for ev in s]
            resp = s.get_final_response()
        assert "response.reasoning_summary_text.delta" in kinds
    else:
        resp = client.responses.create(**kw)
    reasoning, call = resp.output
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == THOUGHT
    assert reasoning.encrypted_content.startswith("vsr-thinking:")
    assert call.type == "function_call" and call.name == "get_weather"
    history = [{"role": "user", "content": "weather?"}, reasoning.model_dump(exclude_none=True),
               call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    raw = client.responses.with_raw_response.create(**{**kw, "input": history})
    assert raw.parse().output_text == "Sunny in Paris."
    body = sent()
    assert body["thinking"]["type"] == "enabled"
    assert body["messages"][1]["content"] == CLAUDE_CONTENT
    assert warnings_of(raw.headers) == set()


def test_codex_tool_result_reaches_claude_without_thinking(gw):
    """Codex's turn 2 (reasoning.effort low, its call without reasoning) to Claude: thinking left off."""
    fixture = json.loads((Path(__file__).parent / "fixtures/clients/codex.tool_result.json").read_text())
    body = {**fixture["body"], "model": "an", "stream": False}
    r = httpx.post(f"{gw.url}/v1/responses", json=body, headers=fixture["headers"], timeout=30)
    assert r.status_code == 200, r.text
    assert "thinking" not in sent()
    assert 'reason="no_thinking_block";field="reasoning_effort"' in r.headers["x-vsr-warnings"]


def test_a_sealed_reasoning_item_is_the_router_s_own():
    from vsr_fast.protocol.translate._ir import Thinking
    from vsr_fast.protocol.translate._thinking import seal, unseal
    t = Thinking(THOUGHT, SIGNATURE, path="input[1].encrypted_content")
    assert unseal(seal(t), t.path) == t
    assert seal(Thinking("unsigned")) is None
    assert unseal("gAAAAB-openai-own", "x") is None
    assert unseal("vsr-thinking:" + base64.b64encode(b"not json").decode(), "x") is None


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_reasoning_content_reaches_a_messages_client_as_unsigned_thinking(gw, stream):
    client = anthropic_sdk(gw)
    kw = {"model": "ds", "max_tokens": 256, "messages": ASK,
          "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}}
    if stream:
        with client.messages.stream(**{k: v for k, v in kw.items() if k != "output_config"},
                                    extra_body={"output_config": kw["output_config"]}) as s:
            kinds = [ev.type for ev in s]
            final = s.get_final_message()
        assert "thinking" in kinds
    else:
        final = client.messages.create(**{k: v for k, v in kw.items() if k != "output_config"},
                                       extra_body={"output_config": kw["output_config"]})
    thinking, text = final.content
    assert (thinking.type, thinking.thinking, thinking.signature) == ("thinking", REASONING, "")
    assert text.text == "Sunny."
    assert sent()["reasoning_effort"] == "medium"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_reasoning_content_reaches_a_responses_client_as_a_reasoning_item(gw, stream):
    client = openai_sdk(gw)
    if stream:
        with client.responses.stream(model="ds", input="weather?") as s:
            for _ in s:
                pass
            resp = s.get_final_response()
    else:
        resp = client.responses.create(model="ds", input="weather?")
    reasoning, message = resp.output
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == REASONING
    assert reasoning.encrypted_content is None
    assert resp.output_text == "Sunny."


def test_unsigned_thinking_sent_back_to_claude_is_dropped(gw):
    client = openai_sdk(gw)
    call = {"id": "toolu_A", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": REASONING},
               {"role": "tool", "tool_call_id": "toolu_A", "content": "sunny"}]
    raw = client.chat.completions.with_raw_response.create(model="an", messages=history, tools=[WEATHER],
                                                           max_tokens=256)
    assert raw.parse().choices[0].message.content == "Sunny in Paris."
    assert [b["type"] for b in sent()["messages"][1]["content"]] == ["tool_use"]
    assert 'reason="unsigned";field="messages[1].reasoning_content"' in raw.headers["x-vsr-warnings"]


@pytest.mark.parametrize("with_block", [True, False], ids=["block", "no-block"])
def test_a_thinking_tier_leaves_thinking_off_for_a_tool_loop_without_its_block(gw, with_block):
    """The router's own thinking (a decision's generation tier), not only the client's, must not be turned on for a
    tool loop whose thinking block the client dropped."""
    call = {"id": "toolu_A", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    if with_block:
        assistant["thinking_blocks"] = [CLAUDE_CONTENT[0]]
    history = [*ASK, assistant, {"role": "tool", "tool_call_id": "toolu_A", "content": "sunny"}]
    answer = openai_sdk(gw).chat.completions.create(model="vsr/auto", messages=history, tools=[WEATHER])
    assert answer.choices[0].message.content == "Sunny in Paris."
    body = sent()
    assert ("thinking" in body) is with_block
    assert body["messages"][1]["content"][0]["type"] == ("thinking" if with_block else "tool_use")


def test_the_guards_note_goes_after_the_leading_thinking():
    """A note the response guard adds to an answer without text goes after Claude's thinking, which must lead."""
    from vsr_fast.protocol.translate._guarded import noted_answer, noted_events
    from vsr_fast.protocol.translate._ir import Answer, BlockStart, Text, Thinking, ToolCall, answer_events
    answer = Answer("m", "claude", [Thinking(THOUGHT, SIGNATURE), ToolCall("toolu_A", "get_weather", "{}")])
    events = noted_events(answer_events(answer), "NOTE")
    assert [(e.kind, e.index) for e in events if isinstance(e, BlockStart)] == [("thinking", 0), ("text", 2),
                                                                                 ("tool", 1)]
    assert [type(p) for p in noted_answer(answer, "NOTE").parts] == [Thinking, Text, ToolCall]
