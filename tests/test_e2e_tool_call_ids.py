"""Tool calls whose ids, names or order one provider takes and another refuses, over real sockets (outside trial,
cross-protocol findings 1-4): a scripted backend started here answers by hand and keeps what it was sent, and the
official SDKs are the clients.

- parallel calls a Chat backend streams under one ``index`` with different ids (Ollama, Gemini's OpenAI endpoint,
  SGLang) reach a Messages and a Responses client as separate calls;
- a tool call id outside Anthropic's ``^[a-zA-Z0-9_-]+$`` (``functions.get_weather:0``, ``call 2``) reaches an
  Anthropic backend, and a Messages client, made valid, the same way in the call and in its result;
- a Codex namespace tool whose flattened name passes OpenAI's 64 characters goes out shortened and comes back to
  the Responses client under its namespace and name, whole and streamed;
- a user's words between a call and its result leave the result first in Anthropic's user turn.
"""
from __future__ import annotations

import json
import re

import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .provider_rules import problems
from .test_e2e_stream_tool_calls import chat_chunk, messages_sdk, openai_sdk

FORMAT_OF_PATH = {"completions": "openai", "messages": "anthropic", "responses": "responses"}
# The calls of the backend that reuses index 0 for each: (call id, name, arguments).
SAME_INDEX = [("call_A", "get_weather", {"city": "Paris"}), ("call_B", "get_time", {"tz": "CET"})]
# One call whose later chunks each carry another id under index 0 (Poolside, mlx-openai-server): the name first,
# then its arguments in two pieces.
RESENT = [({"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}),
          {"index": 0, "id": "call_2", "type": "function", "function": {"arguments": '{"city": '}},
          {"index": 0, "id": "call_3", "type": "function", "function": {"arguments": '"Paris"}'}}]
DOTTED = "functions.get_weather:0"   # Kimi's and some Chat servers' call ids
VALID_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
NAMESPACE, LONG_TOOL = "mcp__github_enterprise_server_integration", "create_pull_request_review_comment_reply"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
RECEIVED: list[tuple[str, dict]] = []   # (api format, body) of every request the backend got


def chat_stream(calls: list[tuple[str, str, dict]], same_index: bool) -> list[bytes]:
    """Each call whole in one chunk; under index 0 each (``same_index``), else under its own."""
    out = [chat_chunk({"role": "assistant", "content": None})]
    for i, (call_id, name, args) in enumerate(calls):
        out.append(chat_chunk({"tool_calls": [{"index": 0 if same_index else i, "id": call_id, "type": "function",
                                               "function": {"name": name, "arguments": json.dumps(args)}}]}))
    return out + [chat_chunk({}, "tool_calls"), b"data: [DONE]\n\n"]


def chat_whole(calls: list[tuple[str, str, dict]]) -> bytes:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]}
    return json.dumps({"id": "chatcmpl-w", "object": "chat.completion", "created": 1, "model": "scripted",
                       "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}).encode()


MESSAGES_TEXT = {"id": "msg_s", "type": "message", "role": "assistant", "model": "scripted",
                 "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "stop_sequence": None,
                 "usage": {"input_tokens": 3, "output_tokens": 1}}


def first_tool(body: dict) -> str:
    tool = body["tools"][0]
    return tool["function"]["name"] if "function" in tool else tool["name"]


def planned(mode: str, body: dict) -> list[tuple[str, str, dict]]:
    """The calls the backend answers in ``mode``."""
    if mode == "same-index":
        return SAME_INDEX
    if mode == "dotted":
        return [(DOTTED, "get_weather", {"city": "Paris"})]
    return [("call_ns", first_tool(body), {"city": "Paris"})]   # "first-tool": a call of the first tool it got


class Backend(hostile_upstream.Handler):
    """``/<mode>/v1/<path>``: a Messages backend answers text; a Chat backend calls tools as ``mode`` says."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        mode = self.path.strip("/").split("/")[0]
        fmt = FORMAT_OF_PATH[self.path.rsplit("/", 1)[-1]]
        RECEIVED.append((fmt, body))
        if fmt == "anthropic":
            assert not body.get("stream")
            self.whole(200, json.dumps(MESSAGES_TEXT).encode())
            return
        calls = planned(mode, body)
        if not body.get("stream"):
            self.whole(200, chat_whole(calls))
            return
        events = chat_stream(calls, mode == "same-index") if mode != "resent-id" else [
            chat_chunk({"role": "assistant", "content": None}), *(chat_chunk({"tool_calls": [c]}) for c in RESENT),
            chat_chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
        self.sse(events)


MODELS = {"same-index": "openai", "resent-id": "openai", "dotted": "openai", "first-tool": "openai", "text": "anthropic"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Backend) as url:
        models = [{"name": f"{mode}-{fmt}", "api_format": fmt, "backend_refs": [{"endpoint": f"{url}/{mode}/v1"}]}
                  for mode, fmt in MODELS.items()]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": models[0]["name"]}]}])
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("tool-ids")))) as proc:
            yield proc


def last_sent(api_format: str) -> dict:
    """What the backend got last, held to the rules providers of ``api_format`` enforce."""
    fmt, body = RECEIVED[-1]
    assert fmt == api_format
    assert problems(body, api_format) == [], body
    return body


MESSAGES_TOOLS = [{"name": "get_weather", "input_schema": SCHEMA}, {"name": "get_time", "input_schema": SCHEMA}]
RESPONSES_TOOLS = [{"type": "function", "name": t["name"], "parameters": SCHEMA, "strict": False}
                   for t in MESSAGES_TOOLS]


# --- 1: parallel calls under one index ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_calls_sharing_an_index_reach_a_messages_client_as_separate_calls(gw, stream):
    kw = {"model": "same-index-openai", "max_tokens": 64, "tools": MESSAGES_TOOLS,
          "messages": [{"role": "user", "content": "weather and time?"}]}
    if stream:
        with messages_sdk(gw).messages.stream(**kw) as s:
            final = s.get_final_message()
    else:
        final = messages_sdk(gw).messages.create(**kw)
    assert [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"] == SAME_INDEX


def test_calls_sharing_an_index_reach_a_responses_client_as_separate_calls(gw):
    with openai_sdk(gw).responses.stream(model="same-index-openai", input="weather and time?",
                                         tools=RESPONSES_TOOLS) as s:
        events = list(s)
        final = s.get_final_response()
    want = [(i, n, json.dumps(a)) for i, n, a in SAME_INDEX]
    assert [(o.call_id, o.name, o.arguments) for o in final.output if o.type == "function_call"] == want
    done = [(e.item.call_id, e.item.name, e.item.arguments) for e in events
            if e.type == "response.output_item.done" and e.item.type == "function_call"]
    assert done == want


def test_a_call_whose_later_chunks_carry_other_ids_stays_one_call(gw):
    """A new id at a used index with no name is the same call's arguments going on, not a call of its own."""
    with messages_sdk(gw).messages.stream(model="resent-id-openai", max_tokens=64, tools=MESSAGES_TOOLS,
                                          messages=[{"role": "user", "content": "weather?"}]) as s:
        final = s.get_final_message()
    assert [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"] == \
        [("call_1", "get_weather", {"city": "Paris"})]
    with openai_sdk(gw).responses.stream(model="resent-id-openai", input="weather?", tools=RESPONSES_TOOLS) as s:
        response = s.get_final_response()
    assert [(o.call_id, o.name, json.loads(o.arguments)) for o in response.output if o.type == "function_call"] == \
        [("call_1", "get_weather", {"city": "Paris"})]


# --- 2: tool call ids Anthropic refuses -----------------------------------------------------------------------


def test_chat_history_ids_anthropic_refuses_reach_it_valid_and_paired(gw):
    """Two ids that differ only where Anthropic's pattern does not allow a character stay two ids."""
    calls = [{"id": DOTTED, "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
             {"id": "call 2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
             {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]
    openai_sdk(gw).chat.completions.create(model="text-anthropic", tools=[
        {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}], messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": c["id"], "content": c["function"]["arguments"]} for c in calls)])
    body = last_sent("anthropic")
    uses = [b["id"] for b in body["messages"][1]["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in body["messages"][2]["content"] if b["type"] == "tool_result"]
    assert uses == results and len(set(uses)) == 3
    assert uses[2] == "call_2"   # a valid id goes as it came
    assert all(VALID_ID.match(i) for i in uses), uses
    # The same id is made valid the same way in every request: the next turn still pairs with this one.
    openai_sdk(gw).chat.completions.create(model="text-anthropic", tools=[
        {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}], messages=[
        {"role": "user", "content": "weather?"}, {"role": "assistant", "content": None, "tool_calls": calls[:1]},
        {"role": "tool", "tool_call_id": DOTTED, "content": "sunny"}])
    again = last_sent("anthropic")
    assert again["messages"][1]["content"][0]["id"] == uses[0] == again["messages"][2]["content"][0]["tool_use_id"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_chat_backends_dotted_id_reaches_a_messages_client_valid_and_pairs_at_anthropic(gw, stream):
    kw = {"max_tokens": 64, "tools": MESSAGES_TOOLS, "messages": [{"role": "user", "content": "weather?"}]}
    if stream:
        with messages_sdk(gw).messages.stream(model="dotted-openai", **kw) as s:
            final = s.get_final_message()
    else:
        final = messages_sdk(gw).messages.create(model="dotted-openai", **kw)
    (call,) = [b for b in final.content if b.type == "tool_use"]
    assert VALID_ID.match(call.id) and call.name == "get_weather" and call.input == {"city": "Paris"}
    # Claude Code sends it back, to Anthropic this time.
    messages_sdk(gw).messages.create(model="text-anthropic", max_tokens=64, tools=MESSAGES_TOOLS, messages=[
        *kw["messages"], {"role": "assistant", "content": [call.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]}])
    body = last_sent("anthropic")
    assert body["messages"][1]["content"][0]["id"] == call.id == body["messages"][2]["content"][0]["tool_use_id"]


# --- 3: a flattened namespace tool name over 64 characters ------------------------------------------------------


def codex_items(text: str) -> list[dict]:
    namespace = {"type": "namespace", "name": NAMESPACE, "description": "", "tools": [
        {"type": "function", "name": LONG_TOOL, "parameters": SCHEMA, "strict": False}]}
    return [{"type": "additional_tools", "role": "developer", "tools": [namespace]},
            {"role": "user", "content": [{"type": "input_text", "text": text}]}]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_long_namespaced_tool_goes_out_shortened_and_comes_back_by_its_name(gw, stream):
    items = codex_items("reply to the review comment")
    if stream:
        with openai_sdk(gw).responses.stream(model="first-tool-openai", input=items) as s:
            events = list(s)
            response = s.get_final_response()
        added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
        assert [(i.name, i.namespace) for i in added] == [(LONG_TOOL, NAMESPACE)]
    else:
        response = openai_sdk(gw).responses.create(model="first-tool-openai", input=items)
    sent_name = first_tool(last_sent("openai"))
    assert VALID_NAME.match(sent_name), sent_name
    (call,) = [o for o in response.output if o.type == "function_call"]
    assert (call.name, call.namespace, json.loads(call.arguments)) == (LONG_TOOL, NAMESPACE, {"city": "Paris"})
    # The call in the next turn's history goes out under the same short name.
    openai_sdk(gw).responses.create(model="first-tool-openai", input=[
        *items, call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "ok"}])
    body = last_sent("openai")
    assert body["messages"][-2]["tool_calls"][0]["function"]["name"] == sent_name == first_tool(body)


def test_a_long_namespaced_tool_reaches_anthropic_within_its_limit(gw):
    openai_sdk(gw).responses.create(model="text-anthropic", input=codex_items("hi"))
    assert VALID_NAME.match(first_tool(last_sent("anthropic")))


# --- 4: the user's words between a call and its result ----------------------------------------------------------


@pytest.mark.parametrize("backend", ["anthropic", "openai"])
def test_words_between_a_call_and_its_result_leave_the_result_first(gw, backend):
    model = "text-anthropic" if backend == "anthropic" else "first-tool-openai"
    openai_sdk(gw).responses.create(model=model, tools=RESPONSES_TOOLS, input=[
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"role": "user", "content": "also, hurry"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"}])
    body = last_sent(backend)
    if backend == "anthropic":
        assert body["messages"][2] == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "sunny"}]},
            {"type": "text", "text": "also, hurry"}]}
    else:
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "user"]


def test_a_chat_clients_words_before_a_result_follow_it_at_anthropic(gw):
    """The same order from a Chat client: its user turn and tool message share Anthropic's user turn, result first."""
    openai_sdk(gw).chat.completions.create(model="text-anthropic", tools=[
        {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}], messages=[
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "user", "content": "also, hurry"}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}])
    assert [b["type"] for b in last_sent("anthropic")["messages"][2]["content"]] == ["tool_result", "text"]
