"""Tool calls a backend streams in ways the client's protocol cannot say as they came, over real sockets: a
scripted upstream started here writes each backend format's events by hand, and the official SDKs read what
the router translated.

- two calls whose argument deltas alternate (parallel tool calls from a Chat backend such as vLLM or OpenAI,
  or from a Responses backend) reach a Messages and a Responses client (and a Chat client) each whole, one
  after the other, since neither the Messages nor the Responses client's stream may interleave them;
- a Messages backend's tool_use with no arguments (``input: {}`` and no ``input_json_delta``, or one empty
  ``partial_json``) reaches a Chat and a Responses client as ``"{}"``, streamed and whole, as OpenAI sends it.
"""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

from vsr_fast.protocol.adapters import make_adapters
from vsr_fast.protocol.responses import MemoryResponseStore

from . import hostile_upstream
from .procs import config, router, write_config

TOOLS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}},
         "get_time": {"type": "object", "properties": {"zone": {"type": "string"}}},
         "now": {"type": "object", "properties": {}}}
WEATHER = {"city": "Paris", "units": {"scale": "celsius", "digits": [1, 2]}}
TIME = {"zone": "Europe/Paris"}
# The calls the interleaving backends make, in the order they began: (call id, name, arguments).
PARALLEL = [("call_w", "get_weather", WEATHER), ("call_t", "get_time", TIME)]


def pieces(args: dict, n: int = 4) -> list[str]:
    text = json.dumps(args)
    step = -(-len(text) // n)
    return [text[i:i + step] for i in range(0, len(text), step)]


def chat_chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    doc = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else []}
    if usage is not None:
        doc["usage"] = usage
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def named(kind: str, doc: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **doc})}\n\n".encode()


def chat_interleaved() -> list[bytes]:
    """Both calls begin (id, name, empty arguments), then their argument pieces alternate, some two to a chunk."""
    out = [chat_chunk({"role": "assistant", "content": None})]
    for i, (call_id, name, _) in enumerate(PARALLEL):
        out.append(chat_chunk({"tool_calls": [{"index": i, "id": call_id, "type": "function",
                                               "function": {"name": name, "arguments": ""}}]}))
    w, t = pieces(WEATHER), pieces(TIME)
    out.append(chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": w[0]}},
                                          {"index": 1, "function": {"arguments": t[0]}}]}))
    for k in range(1, max(len(w), len(t))):
        for i, parts in ((0, w), (1, t)):
            if k < len(parts):
                out.append(chat_chunk({"tool_calls": [{"index": i, "function": {"arguments": parts[k]}}]}))
    out += [chat_chunk({}, "tool_calls"),
            chat_chunk({}, usage={"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}),
            b"data: [DONE]\n\n"]
    return out


_RESPONSE = {"id": "resp_s", "object": "response", "created_at": 1, "model": "scripted", "output": [],
             "status": "in_progress"}


def responses_interleaved() -> list[bytes]:
    items = [{"type": "function_call", "id": f"fc_{i}", "call_id": call_id, "name": name,
              "arguments": json.dumps(args), "status": "completed"} for i, (call_id, name, args) in enumerate(PARALLEL)]
    out = [named("response.created", {"response": _RESPONSE})]
    for i, item in enumerate(items):
        out.append(named("response.output_item.added", {"output_index": i, "item": {
            **item, "arguments": "", "status": "in_progress"}}))
    w, t = pieces(WEATHER), pieces(TIME)
    for k in range(max(len(w), len(t))):
        for i, parts in ((0, w), (1, t)):
            if k < len(parts):
                out.append(named("response.function_call_arguments.delta",
                                 {"item_id": f"fc_{i}", "output_index": i, "delta": parts[k]}))
    for i, item in enumerate(items):
        out.append(named("response.function_call_arguments.done",
                         {"item_id": item["id"], "output_index": i, "arguments": item["arguments"]}))
        out.append(named("response.output_item.done", {"output_index": i, "item": item}))
    out.append(named("response.completed", {"response": {
        **_RESPONSE, "status": "completed", "output": items,
        "usage": {"input_tokens": 9, "output_tokens": 7, "total_tokens": 16}}}))
    return out


def messages_no_arguments(empty_delta: bool) -> list[bytes]:
    block = {"type": "tool_use", "id": "toolu_n", "name": "now", "input": {}}
    out = [named("message_start", {"message": {
               "id": "msg_s", "type": "message", "role": "assistant", "model": "scripted", "content": [],
               "stop_reason": None, "usage": {"input_tokens": 9, "output_tokens": 0}}}),
           named("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
           named("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Checking."}}),
           named("content_block_stop", {"index": 0}),
           named("content_block_start", {"index": 1, "content_block": block})]
    if empty_delta:
        out.append(named("content_block_delta", {"index": 1, "delta": {"type": "input_json_delta",
                                                                        "partial_json": ""}}))
    out += [named("content_block_stop", {"index": 1}),
            named("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
            named("message_stop", {})]
    return out


MESSAGES_WHOLE = {"id": "msg_s", "type": "message", "role": "assistant", "model": "scripted",
                  "content": [{"type": "text", "text": "Checking."},
                              {"type": "tool_use", "id": "toolu_n", "name": "now", "input": {}}],
                  "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 7}}
STREAMS = {"interleaved-chat": chat_interleaved(), "interleaved-responses": responses_interleaved(),
           "noargs-messages": messages_no_arguments(False), "emptydelta-messages": messages_no_arguments(True)}
FORMAT_OF_PATH = {"completions": "chat", "messages": "messages", "responses": "responses"}
API_FORMAT = {"chat": "openai", "messages": "anthropic", "responses": "responses"}


class Scripted(hostile_upstream.Handler):
    """``/<mode>/v1/<the format's path>``: the events of ``<mode>-<format>`` in chunks, or the whole answer."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        mode = self.path.strip("/").split("/")[0]
        fmt = FORMAT_OF_PATH[self.path.rsplit("/", 1)[-1]]
        if not body.get("stream"):
            assert fmt == "messages"
            self.whole(200, json.dumps(MESSAGES_WHOLE).encode())
            return
        self.sse(STREAMS[f"{mode}-{fmt}"])


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Scripted) as url:
        models = [{"name": name, "api_format": API_FORMAT[name.rsplit("-", 1)[1]],
                   "backend_refs": [{"endpoint": f"{url}/{name.rsplit('-', 1)[0]}/v1"}]} for name in STREAMS]
        doc = config(models, [{"name": "only", "modelRefs": [{"model": models[0]["name"]}]}])
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("stream-tools")))) as proc:
            yield proc


def messages_sdk(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)


def openai_sdk(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)


def messages_calls(gw, model: str) -> tuple[list[tuple[str, str, dict]], list]:
    """The tool_use blocks of the final message the SDK's stream helper accumulated, and the raw events."""
    tools = [{"name": name, "input_schema": schema} for name, schema in TOOLS.items()]
    events = []
    with messages_sdk(gw).messages.stream(model=model, max_tokens=64, tools=tools,
                                          messages=[{"role": "user", "content": "weather and time?"}]) as s:
        for ev in s:
            events.append(ev)
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    return [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"], events


def responses_calls(gw, model: str) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]], list]:
    """The function calls of the SDK's final response, those of the items' done events, and the raw events."""
    tools = [{"type": "function", "name": name, "parameters": schema, "strict": False}
             for name, schema in TOOLS.items()]
    events = []
    with openai_sdk(gw).responses.stream(model=model, input="weather and time?", tools=tools) as s:
        for ev in s:
            events.append(ev)
        final = s.get_final_response()
    done = [(e.item.call_id, e.item.name, e.item.arguments) for e in events
            if e.type == "response.output_item.done" and e.item.type == "function_call"]
    return [(o.call_id, o.name, o.arguments) for o in final.output if o.type == "function_call"], done, events


def chat_calls(gw, model: str, stream: bool) -> list[tuple[str, str, str]]:
    tools = [{"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in TOOLS.items()]
    kw = {"model": model, "tools": tools, "messages": [{"role": "user", "content": "weather and time?"}]}
    client = openai_sdk(gw)
    if stream:
        with client.chat.completions.stream(**kw) as s:
            for _ in s:
                pass
            completion = s.get_final_completion()
    else:
        completion = client.chat.completions.create(**kw)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    return [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls]


def one_block_at_a_time(events: list) -> None:
    """Messages' rule: a block's start, deltas and stop come before the next block starts."""
    open_index = None
    for ev in events:
        if ev.type == "content_block_start":
            assert open_index is None, f"block {ev.index} started inside block {open_index}"
            open_index = ev.index
        elif ev.type in ("content_block_delta", "content_block_stop"):
            assert ev.index == open_index, f"{ev.type} for block {ev.index} while {open_index} is open"
            if ev.type == "content_block_stop":
                open_index = None


@pytest.mark.parametrize("backend", ["chat", "responses"])
def test_interleaved_parallel_calls_reach_a_messages_client_whole(gw, backend):
    calls, events = messages_calls(gw, f"interleaved-{backend}")
    assert calls == PARALLEL
    one_block_at_a_time(events)


def test_interleaved_parallel_calls_from_a_chat_backend_reach_a_responses_client_whole(gw):
    final, done, events = responses_calls(gw, "interleaved-chat")
    want = [(call_id, name, json.dumps(args)) for call_id, name, args in PARALLEL]
    assert final == want and done == want
    # Each item's deltas add up to its arguments, and one item is done before the next is added.
    added = [e.output_index for e in events if e.type == "response.output_item.added"]
    finished = [e.output_index for e in events if e.type == "response.output_item.done"]
    assert added == finished == [0, 1]
    order = [(e.type, e.output_index) for e in events if e.type.startswith("response.output_item.")]
    assert order == [("response.output_item.added", 0), ("response.output_item.done", 0),
                     ("response.output_item.added", 1), ("response.output_item.done", 1)]
    for n, (_, _, arguments) in enumerate(want):
        assert "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta"
                       and e.output_index == n) == arguments


def test_interleaved_parallel_calls_from_a_responses_backend_reach_a_chat_client_whole(gw):
    assert [(i, n, json.loads(a)) for i, n, a in chat_calls(gw, "interleaved-responses", True)] == PARALLEL


@pytest.mark.parametrize(("mode", "stream"), [("noargs", True), ("emptydelta", True), ("noargs", False)],
                         ids=["streamed", "streamed-empty-delta", "whole"])
def test_a_messages_call_without_arguments_reaches_a_chat_client_as_an_empty_object(gw, mode, stream):
    assert chat_calls(gw, f"{mode}-messages", stream) == [("toolu_n", "now", "{}")]


@pytest.mark.parametrize("mode", ["noargs", "emptydelta"])
def test_a_messages_call_without_arguments_reaches_a_responses_client_as_an_empty_object(gw, mode):
    final, done, events = responses_calls(gw, f"{mode}-messages")
    assert final == done == [("toolu_n", "now", "{}")]
    args_done = [e.arguments for e in events if e.type == "response.function_call_arguments.done"]
    assert args_done == ["{}"]
    assert "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta") == "{}"


def test_a_whole_messages_call_without_arguments_reaches_a_responses_client_as_an_empty_object(gw):
    tools = [{"type": "function", "name": "now", "parameters": TOOLS["now"], "strict": False}]
    response = openai_sdk(gw).responses.create(model="noargs-messages", input="time?", tools=tools)
    assert [(o.call_id, o.name, o.arguments) for o in response.output if o.type == "function_call"] == \
        [("toolu_n", "now", "{}")]


# --- when the bytes leave: the translator alone, fed one backend event at a time ------------------------------


def chat_sequential() -> list[bytes]:
    """Each call whole before the next begins: what most backends send."""
    out = [chat_chunk({"role": "assistant", "content": None})]
    for i, (call_id, name, args) in enumerate(PARALLEL):
        out.append(chat_chunk({"tool_calls": [{"index": i, "id": call_id, "type": "function",
                                               "function": {"name": name, "arguments": ""}}]}))
        out += [chat_chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in pieces(args)]
    return out + [chat_chunk({}, "tool_calls"), b"data: [DONE]\n\n"]


def fed_one_by_one(api: str, backend: str, stream: list[bytes]) -> list[bytes]:
    """What the translator gives the client for each backend event, then at the end."""
    adapter = make_adapters(MemoryResponseStore())[api]
    body = {"messages": {"model": "m", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "x"}]},
            "responses": {"model": "m", "stream": True, "input": "x"}}[api]
    tr = adapter.stream_translator(adapter.decode(json.dumps(body).encode()), backend)
    return [tr.feed(event) for event in stream] + [tr.close()]


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_calls_one_after_another_still_stream_live(api):
    """Lining calls up holds none back when they come one after another: the second starts as it begins."""
    stream = chat_sequential()
    out = fed_one_by_one(api, "openai", stream)
    second = next(i for i, e in enumerate(stream) if b'"call_t"' in e)
    assert b'"call_t"' in out[second]
    assert all(out[k] for k in range(second, len(stream) - 2))   # and each of its pieces as it comes


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_the_waiting_call_goes_out_once_the_open_one_is_whole(api):
    """Side by side: the second call follows as soon as the first one's arguments are a whole object, not at the
    end of the answer."""
    stream = chat_interleaved()
    out = fed_one_by_one(api, "openai", stream)
    last = {"index": 0, "function": {"arguments": pieces(WEATHER)[-1]}}
    first_done = next(i for i, e in enumerate(stream) if e.startswith(b"data: {")
                      and last in json.loads(e[6:])["choices"][0]["delta"].get("tool_calls", []))
    assert first_done < len(stream) - 4   # the second call's last piece comes after it
    assert b'"call_t"' in out[first_done]
    assert not any(b'"call_t"' in chunk for chunk in out[:first_done])
