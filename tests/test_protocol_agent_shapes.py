"""What coding agents send, translated both ways: Codex's tools (``additional_tools`` items,
``namespace`` tools, freeform ``custom`` tools) and Claude Code's system messages in ``messages``.

Requests go out as function tools and system turns each backend carries; answers come back
as the client's own kinds of call (``custom_tool_call`` with ``input``, a ``function_call``
with its ``namespace``), whole and streamed, checked against the official SDKs' types and
stream helpers. Usage counters reach a Messages client as integers.
"""
from __future__ import annotations

import itertools
import json

import anthropic
import httpx
import httpx2
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from vsr_fast.protocol.adapters import make_adapters
from vsr_fast.protocol.responses import MemoryResponseStore
from vsr_fast.protocol.translate import SSEParser

ADAPTERS = make_adapters(MemoryResponseStore())
RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)
ANTHROPIC_EVENT = TypeAdapter(anthropic.types.RawMessageStreamEvent)
GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": "start: SOURCE\nSOURCE: /[\\s\\S]+/"}
SEND = {"type": "object", "properties": {"target": {"type": "string"}, "message": {"type": "string"}},
        "required": ["target", "message"], "additionalProperties": False}
SCRIPT = 'text("hello from exec")'

CODEX = {
    "model": "gpt-x", "stream": True, "store": False, "parallel_tool_calls": False, "tool_choice": "auto",
    "reasoning": {"effort": "low", "context": "all_turns"}, "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "k", "text": {"verbosity": "low"}, "client_metadata": {"thread_id": "t"},
    "input": [
        {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": [
            {"type": "namespace", "name": "functions", "description": "", "tools": [
                {"type": "custom", "name": "exec", "description": "Run JavaScript", "format": GRAMMAR},
                {"type": "custom", "name": "note", "description": "Free text", "format": {"type": "text"}}]},
            {"type": "namespace", "name": "collaboration", "description": "", "tools": [
                {"type": "function", "name": "send_message", "description": "Message an agent", "strict": False,
                 "parameters": SEND}]},
            {"type": "web_search"}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run it once."}]},
        {"type": "custom_tool_call", "id": "ctc_1", "status": "completed", "call_id": "call_1", "name": "exec",
         "namespace": "functions", "input": SCRIPT},
        {"type": "custom_tool_call_output", "call_id": "call_1",
         "output": [{"type": "input_text", "text": "hello from exec"}]},
    ],
}

CLAUDE_CODE = {
    "model": "claude-x", "max_tokens": 2048, "stream": True,
    "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
    "thinking": {"type": "adaptive"}, "output_config": {"effort": "low"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "messages": [
        {"role": "system", "content": "Tools may change mid-conversation."},
        {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                           "input": {"command": "ls"}}]},
        {"role": "system", "content": [{"type": "text", "text": "<system-reminder>be brief</system-reminder>"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]},
    ],
    "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}],
}


def decode(api: str, doc: dict):
    return ADAPTERS[api].decode(json.dumps(doc).encode())


def fields(losses) -> list[tuple[str, str]]:
    return [(loss.action, loss.field) for loss in losses]


# --- Codex: requests -------------------------------------------------------------------------------


def test_codex_tools_are_function_tools_on_every_other_backend():
    req = decode("responses", CODEX)
    canonical = ADAPTERS["responses"].canonical(req)
    assert canonical.tool_count == 4   # every tool declared, web_search (which runs at OpenAI only) included
    chat = ADAPTERS["responses"].upstream(req, "openai", "up")
    body = json.loads(chat.body)
    tools = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert list(tools) == ["functions__exec", "functions__note", "collaboration__send_message"]
    assert tools["functions__exec"]["parameters"] == {
        "type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"],
        "additionalProperties": False}
    # The grammar still tells the model the input's shape; nothing enforces it: converted.
    assert tools["functions__exec"]["description"].startswith("Run JavaScript\n\nThe input follows this lark grammar")
    assert GRAMMAR["definition"] in tools["functions__exec"]["description"]
    assert tools["functions__note"]["description"] == "Free text"
    assert tools["collaboration__send_message"]["parameters"] == SEND
    # The history's custom call and its output, as a function call and a tool result.
    call = body["messages"][2]
    assert call["tool_calls"] == [{"id": "call_1", "type": "function", "function": {
        "name": "functions__exec", "arguments": json.dumps({"input": SCRIPT}, separators=(",", ":"))}}]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "hello from exec"}
    assert body["messages"][0] == {"role": "system", "content": "You are Codex."}
    lost = fields(chat.losses)
    assert ("converted", "input[0].tools[0].tools[0].format") in lost
    assert ("dropped", "input[0].tools[2]") in lost   # web_search
    assert not any(f.startswith("input[0].tools[1]") or f == "input[0]" for _, f in lost)

    anthropic_body = json.loads(ADAPTERS["responses"].upstream(req, "anthropic", "up").body)
    assert [t["name"] for t in anthropic_body["tools"]] == list(tools)
    assert anthropic_body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "functions__exec", "input": {"input": SCRIPT}}]


def test_a_codex_body_goes_unchanged_to_a_responses_backend_with_its_headers():
    raw = json.dumps(CODEX).encode()
    req = ADAPTERS["responses"].decode(raw, [(b"x-openai-internal-codex-responses-lite", b"true"),
                                             (b"openai-beta", b"responses=experimental"),
                                             (b"anthropic-beta", b"x"), (b"authorization", b"Bearer k")])
    out = ADAPTERS["responses"].upstream(req, "responses", "gpt-x", reasoning="reasoning_effort")
    assert out.body == raw and out.losses == ()
    # gpt-4o and its like refuse a reasoning effort: a model that does not declare reasoning goes without.
    out = ADAPTERS["responses"].upstream(req, "responses", "gpt-4o")
    assert json.loads(out.body) == {k: v for k, v in {**CODEX, "model": "gpt-4o"}.items() if k != "reasoning"}
    assert {(x.field, x.reason) for x in out.losses} == {(f"reasoning.{k}", "model_does_not_reason")
                                                         for k in CODEX["reasoning"]}
    assert dict(out.headers) == {"x-openai-internal-codex-responses-lite": b"true",
                                 "openai-beta": b"responses=experimental"}
    assert ADAPTERS["responses"].upstream(req, "openai", "up").headers == ()
    assert dict(ADAPTERS["responses"].upstream(req, "anthropic", "up").headers) == {"anthropic-version": "2023-06-01"}


def test_additional_tools_after_turns_are_moved_to_the_front():
    doc = {"model": "m", "input": [{"role": "user", "content": "hi"},
                                   {"type": "additional_tools", "tools": [{"type": "custom", "name": "go"}]}]}
    out = ADAPTERS["responses"].upstream(decode("responses", doc), "openai", "up")
    assert [t["function"]["name"] for t in json.loads(out.body)["tools"]] == ["go"]
    assert fields(out.losses) == [("moved", "input[1]")]


def test_tool_choice_names_a_custom_or_namespaced_tool():
    doc = {**CODEX, "tool_choice": {"type": "custom", "name": "exec"}}
    body = json.loads(ADAPTERS["responses"].upstream(decode("responses", doc), "openai", "up").body)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "functions__exec"}}
    doc = {**CODEX, "tool_choice": {"type": "function", "name": "send_message", "namespace": "collaboration"}}
    body = json.loads(ADAPTERS["responses"].upstream(decode("responses", doc), "anthropic", "up").body)
    assert body["tool_choice"] == {"type": "tool", "name": "collaboration__send_message",
                                   "disable_parallel_tool_use": True}


# --- Codex: answers ------------------------------------------------------------------------------------

CALLS = [("call_9", "functions__exec", json.dumps({"input": SCRIPT})),
         ("call_10", "collaboration__send_message", json.dumps({"target": "a", "message": "hi"}))]


def chat_answer() -> bytes:
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-x",
                       "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                           "role": "assistant", "content": "Running.",
                           "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                          for i, n, a in CALLS]}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()


def anthropic_answer() -> bytes:
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                       "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5},
                       "content": [{"type": "text", "text": "Running."}] + [
                           {"type": "tool_use", "id": i, "name": n, "input": json.loads(a)} for i, n, a in CALLS]}
                      ).encode()


def check_calls(output) -> None:
    """The client's own kinds of call, named as it declared them."""
    calls = [o for o in output if o.type in ("custom_tool_call", "function_call")]
    assert [(c.type, c.call_id, c.name, c.namespace) for c in calls] == [
        ("custom_tool_call", "call_9", "exec", "functions"),
        ("function_call", "call_10", "send_message", "collaboration")]
    assert calls[0].input == SCRIPT
    assert json.loads(calls[1].arguments) == {"target": "a", "message": "hi"}


@pytest.mark.parametrize(("backend", "answer"), [("openai", chat_answer), ("anthropic", anthropic_answer)])
def test_whole_answers_call_the_clients_own_tools(backend, answer):
    req = decode("responses", {**CODEX, "stream": False})
    reply = ADAPTERS["responses"].whole(req, backend, 200, answer())
    parsed = Response.model_validate_json(reply.body)
    assert parsed.output_text == "Running."
    check_calls(parsed.output)
    assert reply.losses == ()


def test_a_custom_call_without_an_input_string_keeps_what_the_model_sent():
    req = decode("responses", {**CODEX, "stream": False})
    bad = json.loads(chat_answer())
    bad["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_9", "type": "function", "function": {"name": "functions__exec", "arguments": '{"script": 1}'}}]
    reply = ADAPTERS["responses"].whole(req, "openai", 200, json.dumps(bad).encode())
    call = Response.model_validate_json(reply.body).output[-1]
    assert (call.type, call.input) == ("custom_tool_call", '{"script": 1}')
    assert fields(reply.losses) == [("converted", "choices[0].message.tool_calls[0]")]


def chat_stream() -> bytes:
    head = {"id": "chatcmpl-01", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-x"}

    def chunk(delta: dict | None, finish: str | None = None, usage: dict | None = None) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return b"data: " + json.dumps({**head, "choices": choices, "usage": usage}).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": "Running."})]
    for n, (call_id, name, args) in enumerate(CALLS):
        out.append(chunk({"tool_calls": [{"index": n, "id": call_id, "type": "function",
                                          "function": {"name": name, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": n, "function": {"arguments": args[i:i + 7]}}]})
                for i in range(0, len(args), 7)]
    out.append(chunk({}, "tool_calls"))
    out.append(chunk(None, usage={"prompt_tokens": 472, "completion_tokens": 89, "total_tokens": 561}))
    return b"".join(out) + b"data: [DONE]\n\n"


def events(data: bytes) -> list[tuple[str | None, bytes]]:
    parser = SSEParser()
    return parser.feed(data) + parser.close()


def test_a_streamed_answer_calls_the_clients_own_tools():
    req = decode("responses", CODEX)
    counter = itertools.count()
    tr = ADAPTERS["responses"].stream_translator(req, "openai", new_id=lambda p: f"{p}{next(counter)}")
    data = b"".join(tr.feed(bytes([b])) for b in chat_stream()) + tr.close()
    parsed = [RESPONSES_EVENT.validate_json(d) for _, d in events(data)]
    kinds = [p.type for p in parsed]
    assert "response.custom_tool_call_input.delta" in kinds and "response.custom_tool_call_input.done" in kinds
    done = next(p for p in parsed if p.type == "response.custom_tool_call_input.done")
    assert done.input == SCRIPT
    assert tr.losses == []
    # The SDK's own stream helper accumulates the answer from these events.
    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=data))
    client = openai.OpenAI(api_key="x", base_url="http://t", http_client=httpx.Client(transport=transport),
                           max_retries=0)
    with client.responses.stream(model="gpt-x", input="x") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Running."
    check_calls(final.output)
    assert (final.usage.input_tokens, final.usage.output_tokens) == (472, 89)


async def test_a_custom_call_continues_through_the_response_store():
    """The stored answer holds the client's kind of call; the follow-up translates it back to a function call."""
    adapter = make_adapters(MemoryResponseStore())["responses"]
    first = adapter.decode(json.dumps({**CODEX, "stream": False, "store": True}).encode())
    reply = adapter.whole(first, "openai", 200, chat_answer())
    await adapter.remember(first, reply.body)
    answer_id = json.loads(reply.body)["id"]
    follow = adapter.decode(json.dumps({"model": "gpt-x", "previous_response_id": answer_id, "input": [
        {"type": "custom_tool_call_output", "call_id": "call_9", "output": "done"}]}).encode())
    follow = await adapter.prepare(follow)
    body = json.loads(adapter.upstream(follow, "openai", "up").body)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert [c["function"]["name"] for c in body["messages"][4]["tool_calls"]] == [n for _, n, _ in CALLS]
    assert body["messages"][5] == {"role": "tool", "tool_call_id": "call_9", "content": "done"}


# --- Claude Code: system messages, usage ------------------------------------------------------------


def test_system_messages_in_messages_join_the_prompt_or_stay_in_place():
    req = decode("messages", CLAUDE_CODE)
    canonical = ADAPTERS["messages"].canonical(req)
    assert [m.role for m in canonical.messages] == ["system", "user", "assistant", "system", "tool"]
    assert canonical.messages[0].content == "You are Claude Code.\n\nTools may change mid-conversation."
    chat = ADAPTERS["messages"].upstream(req, "openai", "up")
    body = json.loads(chat.body)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "system", "tool"]
    assert body["messages"][3]["content"] == "<system-reminder>be brief</system-reminder>"
    responses = ADAPTERS["messages"].upstream(req, "responses", "up")
    items = json.loads(responses.body)["input"]
    assert [(i["type"], i.get("role")) for i in items] == [
        ("message", "user"), ("function_call", None), ("message", "system"), ("function_call_output", None)]
    assert json.loads(responses.body)["instructions"] == "You are Claude Code.\n\nTools may change mid-conversation."
    # Carried in place: no loss for them; the beta fields only an Anthropic backend reads are reported
    # (output_config's effort goes with the adaptive thinking it sets: dropped with it for a model that does not reason).
    for out in (chat, responses):
        assert {f for _, f in fields(out.losses)} == {"thinking", "context_management"}


def test_claude_code_body_and_betas_go_unchanged_to_an_anthropic_backend():
    raw = json.dumps(CLAUDE_CODE).encode()
    betas = b"claude-code-20250219,context-management-2025-06-27,mid-conversation-system-2026-04-07"
    req = ADAPTERS["messages"].decode(raw, [(b"anthropic-beta", betas), (b"anthropic-version", b"2023-06-01"),
                                            (b"openai-beta", b"x"), (b"x-api-key", b"sk")])
    out = ADAPTERS["messages"].upstream(req, "anthropic", "claude-x", reasoning="reasoning_effort")
    assert out.body == raw
    # To a Claude that does not declare it reasons, its thinking and effort are dropped, and listed.
    out = ADAPTERS["messages"].upstream(req, "anthropic", "claude-x")
    assert {(x.field, x.reason) for x in out.losses} == {("thinking", "model_does_not_reason"),
                                                          ("output_config.effort", "model_does_not_reason")}
    body = json.loads(out.body)
    assert "thinking" not in body and "output_config" not in body
    assert dict(out.headers) == {"anthropic-beta": betas, "anthropic-version": b"2023-06-01"}
    assert ADAPTERS["messages"].upstream(req, "openai", "up").headers == ()


def test_a_chat_client_mid_conversation_system_turn_moves_into_an_anthropic_system_prompt():
    doc = {"model": "m", "messages": [{"role": "system", "content": "A."}, {"role": "user", "content": "hi"},
                                      {"role": "system", "content": "B."}, {"role": "user", "content": "again"}]}
    out = ADAPTERS["chat"].upstream(decode("chat", doc), "anthropic", "up")
    body = json.loads(out.body)
    assert body["system"] == [{"type": "text", "text": "A."}, {"type": "text", "text": "B."}]
    assert [m["role"] for m in body["messages"]] == ["user"]   # the two user turns share one
    assert ("moved", "messages[2]") in fields(out.losses)   # its position is what is lost


def test_usage_counters_are_integers_in_a_translated_messages_stream_and_answer():
    req = decode("messages", {**CLAUDE_CODE, "messages": CLAUDE_CODE["messages"][:2], "tools": []})
    tr = ADAPTERS["messages"].stream_translator(req, "openai")
    data = tr.feed(chat_stream()) + tr.close()
    evs = {name: json.loads(d) for name, d in events(data) if name in ("message_start", "message_delta")}
    for name in evs:
        ANTHROPIC_EVENT.validate_python(evs[name])
    start = evs["message_start"]["message"]["usage"]
    assert start == {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 0}   # a Chat backend reports usage last
    assert evs["message_delta"]["usage"] == {"input_tokens": 472, "output_tokens": 89,
                                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    transport = httpx2.MockTransport(lambda request: httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=data))
    client = anthropic.Anthropic(api_key="x", base_url="http://t", max_retries=0,
                                 http_client=httpx2.Client(transport=transport))
    with client.messages.stream(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
        final = s.get_final_message()
    assert (final.usage.input_tokens, final.usage.output_tokens) == (472, 89)
    assert final.usage.cache_read_input_tokens == 0 and final.usage.cache_creation_input_tokens == 0
    whole = ADAPTERS["messages"].whole(decode("messages", {**CLAUDE_CODE, "stream": False}), "openai", 200,
                                       chat_answer())
    usage = json.loads(whole.body)["usage"]
    assert usage == {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 0}
