"""End to end: answers and requests crossing protocols as an agent framework routing across providers sends them
(outside trial 11c): interleaved thinking to a Chat client's stream accumulator, structured output to Claude with
thinking on, logprobs between Chat and Responses, Anthropic structured output and allowed_tools to OpenAI formats,
stop sequences past OpenAI's four (all sent), a tool result's images, parallel calls under one index.

A scripted upstream started here answers each request with the whole body or the events a test gives it and keeps
what it got; the router runs as a real process and the official openai and anthropic SDKs are the clients, their
own helpers (stream accumulators, ``parse``) reading the answers.
"""
from __future__ import annotations

import json
import threading

import openai
import pytest
from pydantic import BaseModel

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_protocols import loss, warnings_of
from .test_e2e_translate_fidelity import chat, messages

SCRIPT: dict = {}
BODIES: list[dict] = []
LOCK = threading.Lock()


CUT = object()   # in a script's events: the connection closes there, the stream unfinished


class Scripted(hostile_upstream.Handler):
    """Answers a streamed request with ``SCRIPT["events"]`` (each a dict, Chat's chunk; a (name, dict) pair, a
    named event; a str, raw data; or ``CUT``), any other with ``SCRIPT["whole"]``; keeps every body in ``BODIES``."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        with LOCK:
            BODIES.append(body)
            script = dict(SCRIPT)
        if not body.get("stream"):
            self.whole(200, json.dumps(script["whole"]).encode())
            return
        out = []
        for e in script["events"]:
            if e is CUT:
                self.sse(out, cut=True)
                return
            if isinstance(e, str):
                out.append(f"data: {e}\n\n".encode())
            elif isinstance(e, tuple):
                out.append(f"event: {e[0]}\ndata: {json.dumps({'type': e[0], **e[1]})}\n\n".encode())
            else:
                out.append(f"data: {json.dumps(e)}\n\n".encode())
        self.sse(out)


def script(whole: dict | None = None, events: list | None = None) -> None:
    with LOCK:
        SCRIPT.clear()
        SCRIPT.update(whole=whole, events=events)


def sent() -> dict:
    with LOCK:
        return BODIES[-1]


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Scripted) as url:
        models = [{"name": f"m-{fmt}", "provider_model_id": f"up-{fmt}", "api_format": fmt,
                   "backend_refs": [{"endpoint": f"{url}/v1"}]} for fmt in ("openai", "anthropic", "responses")]
        models[1]["capabilities"] = ["reasoning"]      # Claude thinks
        doc = config(models, [{"name": "only", "modelRefs": [{"model": "m-openai"}]}])
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("crossings")))) as proc:
            yield proc


# --- scripted answers ----------------------------------------------------------------------------------------


def claude(content: list, stop: str = "end_turn", usage: dict | None = None) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "up-anthropic", "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": usage or {"input_tokens": 10, "output_tokens": 5}}


def claude_events(blocks: list[tuple[dict, list[dict]]], stop: str = "end_turn") -> list:
    """Claude's stream of ``blocks``: each its start block and its deltas."""
    start = claude([], None)
    evs: list = [("message_start", {"message": {**start, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    for i, (block, deltas) in enumerate(blocks):
        evs.append(("content_block_start", {"index": i, "content_block": block}))
        evs += [("content_block_delta", {"index": i, "delta": d}) for d in deltas]
        evs.append(("content_block_stop", {"index": i}))
    return evs + [("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 7}}), ("message_stop", {})]


def thinking(text: str, signature: str) -> tuple[dict, list[dict]]:
    return ({"type": "thinking", "thinking": "", "signature": ""},
            [{"type": "thinking_delta", "thinking": text}, {"type": "signature_delta", "signature": signature}])


def text(said: str) -> tuple[dict, list[dict]]:
    return {"type": "text", "text": ""}, [{"type": "text_delta", "text": said}]


def tool_use(call_id: str, name: str, args: str) -> tuple[dict, list[dict]]:
    return ({"type": "tool_use", "id": call_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": args}])


def chat_chunk(delta: dict | None, finish: str | None = None, usage: dict | None = None,
               logprobs: dict | None = None) -> dict:
    doc: dict = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-openai",
                 "choices": [] if delta is None else [{"index": 0, "delta": delta, "logprobs": logprobs,
                                                       "finish_reason": finish}]}
    if usage is not None:
        doc["usage"] = usage
    return doc


F_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


# --- 1: every thinking block of a stream has its index -----------------------------------------------------------


@pytest.mark.parametrize("blocks", [
    [thinking("first", "s1"), tool_use("toolu_A", "f", "{}"), thinking("second", "s2"), text("answer")],
    [({"type": "redacted_thinking", "data": "ENCRYPTED"}, []), thinking("t", "s"), text("answer")],
], ids=["interleaved", "redacted"])
def test_chat_stream_accumulator_assembles_every_thinking_block(gw, blocks):
    script(events=claude_events(blocks))
    client, _ = chat(gw)
    with client.chat.completions.stream(model="m-anthropic", messages=[{"role": "user", "content": "hi"}],
                                        max_tokens=5000, reasoning_effort="low", tools=[F_TOOL]) as s:
        message = s.get_final_completion().choices[0].message
    want = [b if b["type"] == "redacted_thinking" else
            {"type": "thinking", "thinking": ds[0]["thinking"], "signature": ds[1]["signature"]}
            for b, ds in blocks if "thinking" in b["type"]]
    got = [{k: v for k, v in b.items() if k != "index"} for b in message.model_dump()["thinking_blocks"]]
    assert got == want
    assert message.content == "answer"
    # Turn 2: the blocks go back to Claude as they came, their index left behind.
    history = [{"role": "user", "content": "hi"}, message.model_dump(exclude_none=True)]
    script(whole=claude([{"type": "text", "text": "ok"}]))
    client.chat.completions.create(model="m-anthropic", messages=history + [{"role": "user", "content": "go"}],
                                   max_tokens=5000, reasoning_effort="low", tools=[F_TOOL])
    assert [b for b in sent()["messages"][1]["content"] if "thinking" in b["type"]] == want


# --- 2: structured output to Claude with thinking on: the answer's text is the JSON tool's input alone ---------------


class Out(BaseModel):
    a: int


THOUGHT = {"type": "thinking", "thinking": "hm", "signature": "s1"}
PREAMBLE = [THOUGHT, {"type": "text", "text": "Sure."},
            {"type": "tool_use", "id": "toolu_J", "name": "json_tool_call", "input": {"a": 1}}]
PREAMBLE_EVENTS = claude_events([thinking("hm", "s1"), text("Sure."), tool_use("toolu_J", "json_tool_call",
                                                                                  '{"a": 1}')], "tool_use")
PREAMBLE_DROPPED = loss("dropped", "preamble", "content[1]")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_claudes_preamble_to_its_json_answer_is_left_out_for_chat(gw, stream):
    script(whole=claude(PREAMBLE, "tool_use"), events=PREAMBLE_EVENTS)
    client, tap = chat(gw)
    kw = {"model": "m-anthropic", "messages": [{"role": "user", "content": "hi"}], "response_format": Out,
          "reasoning_effort": "low", "max_tokens": 5000}
    if stream:
        with client.chat.completions.stream(**kw) as s:
            c = s.get_final_completion()
    else:
        c = client.chat.completions.parse(**kw)
    assert sent()["tool_choice"]["type"] == "auto"    # thinking on: the JSON tool offered, not forced
    assert json.loads(c.choices[0].message.content) == {"a": 1}
    assert c.choices[0].message.parsed == Out(a=1)
    assert c.choices[0].finish_reason == "stop"
    assert c.choices[0].message.reasoning_content == "hm"
    if not stream:   # a stream's losses go to the access log: its headers went out before them
        assert PREAMBLE_DROPPED in warnings_of(tap.headers)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_claudes_preamble_to_its_json_answer_is_left_out_for_responses(gw, stream):
    script(whole=claude(PREAMBLE, "tool_use"), events=PREAMBLE_EVENTS)
    client, tap = chat(gw)
    kw = {"model": "m-anthropic", "input": "hi", "text_format": Out, "reasoning": {"effort": "low"}}
    if stream:
        with client.responses.stream(**kw) as s:
            r = s.get_final_response()
    else:
        r = client.responses.parse(**kw)
    assert r.output_parsed == Out(a=1)
    message = [o for o in r.output if o.type == "message"]
    assert [len(m.content) for m in message] == [1]
    assert [o.type for o in r.output] == ["reasoning", "message"]
    if not stream:   # a stream's losses go to the access log: its headers went out before them
        assert PREAMBLE_DROPPED in warnings_of(tap.headers)


def test_claudes_text_without_the_json_tool_is_its_answer(gw):
    """No JSON tool call (Claude answered in text): the text is held to the end, then goes out whole."""
    script(events=claude_events([thinking("hm", "s1"), text('{"a": 2}')]))
    client, tap = chat(gw)
    with client.chat.completions.stream(model="m-anthropic", messages=[{"role": "user", "content": "hi"}],
                                        response_format=Out, reasoning_effort="low", max_tokens=5000) as s:
        c = s.get_final_completion()
    assert c.choices[0].message.parsed == Out(a=2)
    assert not any("preamble" in w for w in warnings_of(tap.headers))


def test_claudes_preamble_to_a_client_tool_call_stays(gw):
    """Text before a call of the client's own tool is the answer's text, as without structured output."""
    script(events=claude_events([thinking("hm", "s1"), text("Let me look."), tool_use("toolu_F", "f", "{}")],
                                "tool_use"))
    client, _ = chat(gw)
    fmt = {"type": "json_schema", "json_schema": {"name": "Out", "schema": Out.model_json_schema()}}
    # Not the SDK's parsing stream: it would parse the text beside the call as the structured answer.
    chunks = list(client.chat.completions.create(
        model="m-anthropic", messages=[{"role": "user", "content": "hi"}], response_format=fmt,
        reasoning_effort="low", max_tokens=5000, tools=[F_TOOL], stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Let me look."
    assert [t.function.name for d in deltas for t in d.tool_calls or () if t.function.name] == ["f"]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_claudes_text_before_its_json_answer_and_a_client_tool_call_stays(gw, stream):
    """Text, the JSON tool, then a call of the client's tool: with a call to make the answer is not only the JSON,
    so Claude's words stay, streamed as whole."""
    blocks = [text("Let me look that up."), tool_use("toolu_J", "json_tool_call", '{"a": 1}'),
              tool_use("toolu_F", "f", "{}")]
    whole = claude([{"type": "text", "text": "Let me look that up."},
                    {"type": "tool_use", "id": "toolu_J", "name": "json_tool_call", "input": {"a": 1}},
                    {"type": "tool_use", "id": "toolu_F", "name": "f", "input": {}}], "tool_use")
    script(whole=whole, events=claude_events(blocks, "tool_use"))
    client, tap = chat(gw)
    fmt = {"type": "json_schema", "json_schema": {"name": "Out", "schema": Out.model_json_schema()}}
    kw = {"model": "m-anthropic", "messages": [{"role": "user", "content": "hi"}], "response_format": fmt,
          "reasoning_effort": "low", "max_tokens": 5000, "tools": [F_TOOL]}
    if stream:
        deltas = [c.choices[0].delta for c in client.chat.completions.create(**kw, stream=True) if c.choices]
        content = "".join(d.content or "" for d in deltas)
        calls = [t.function.name for d in deltas for t in d.tool_calls or () if t.function.name]
    else:
        message = client.chat.completions.create(**kw).choices[0].message
        content, calls = message.content, [t.function.name for t in message.tool_calls]
    assert content.startswith("Let me look that up.")
    assert json.loads(content.removeprefix("Let me look that up.")) == {"a": 1}
    assert calls == ["f"]
    assert not any("preamble" in w for w in warnings_of(tap.headers))


def test_claudes_held_text_reaches_the_client_when_the_backend_breaks(gw):
    """Text is held until the answer says what it is; a backend that breaks first still lets it out, then the
    error."""
    events = claude_events([thinking("hm", "s1"), text("Partial words.")])
    script(events=events[:-3] + [CUT])   # the text block's start and delta sent, then the connection closes
    client, _ = chat(gw)
    fmt = {"type": "json_schema", "json_schema": {"name": "Out", "schema": Out.model_json_schema()}}
    said = []
    with pytest.raises(openai.APIError):
        for c in client.chat.completions.create(
                model="m-anthropic", messages=[{"role": "user", "content": "hi"}], response_format=fmt,
                reasoning_effort="low", max_tokens=5000, stream=True):
            said += [c.choices[0].delta.content or ""] if c.choices else []
    assert "".join(said) == "Partial words."


# --- 3: logprobs between Chat and Responses, both ways ----------------------------------------------------------

TOP = [{"token": "hel", "logprob": -0.5, "bytes": [104, 101, 108]}, {"token": "x", "logprob": -2.0, "bytes": [120]}]
LOGPROBS = [{"token": "hel", "logprob": -0.5, "bytes": [104, 101, 108], "top_logprobs": TOP},
            {"token": "lo", "logprob": -0.1, "bytes": [108, 111],
             "top_logprobs": [{"token": "lo", "logprob": -0.1, "bytes": [108, 111]}]}]


def responses_answer(content: list[dict]) -> dict:
    return {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "up-responses",
            "output": [{"type": "message", "id": "m1", "status": "completed", "role": "assistant",
                        "content": content}],
            "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}}


def responses_events(pieces: list[tuple[str, list]]) -> list:
    """A Responses stream of one message whose text comes in ``pieces`` (each its delta and logprobs)."""
    whole = "".join(p for p, _ in pieces)
    done = responses_answer([{"type": "output_text", "text": whole, "annotations": []}])
    ids = {"item_id": "m1", "output_index": 0, "content_index": 0}
    return [("response.created", {"response": {**done, "status": "in_progress", "output": [], "usage": None}}),
            ("response.output_item.added", {"output_index": 0, "item": {**done["output"][0], "content": []}}),
            ("response.content_part.added", {**ids, "part": {"type": "output_text", "text": "", "annotations": []}}),
            *[("response.output_text.delta", {**ids, "delta": p, "logprobs": lp}) for p, lp in pieces],
            ("response.output_text.done", {**ids, "text": whole, "logprobs": []}),
            ("response.content_part.done", {**ids, "part": done["output"][0]["content"][0]}),
            ("response.output_item.done", {"output_index": 0, "item": done["output"][0]}),
            ("response.completed", {"response": done})]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_responses_providers_logprobs_reach_a_chat_client(gw, stream):
    script(whole=responses_answer([{"type": "output_text", "text": "hello", "annotations": [],
                                    "logprobs": LOGPROBS}]),
           events=responses_events([("hel", LOGPROBS[:1]), ("lo", LOGPROBS[1:])]))
    client, tap = chat(gw)
    kw = {"model": "m-responses", "messages": [{"role": "user", "content": "hi"}], "logprobs": True,
          "top_logprobs": 2}
    if stream:
        with client.chat.completions.stream(**kw) as s:
            pieces = [e.chunk.choices[0].logprobs for e in s if e.type == "chunk" and e.chunk.choices]
            c = s.get_final_completion()
        assert [lp.model_dump()["content"] for lp in pieces if lp is not None] == [LOGPROBS[:1], LOGPROBS[1:]]
    else:
        c = client.chat.completions.create(**kw)
    assert sent()["include"] == ["message.output_text.logprobs"] and sent()["top_logprobs"] == 2
    assert c.choices[0].logprobs.model_dump()["content"] == LOGPROBS
    if not stream:
        assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_chat_providers_logprobs_reach_a_responses_client(gw, stream):
    whole = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-openai",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"},
                          "logprobs": {"content": LOGPROBS, "refusal": None}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
    script(whole=whole, events=[
        chat_chunk({"role": "assistant", "content": ""}),
        chat_chunk({"content": "hel"}, logprobs={"content": LOGPROBS[:1]}),
        chat_chunk({"content": "lo"}, logprobs={"content": LOGPROBS[1:]}),
        chat_chunk({}, "stop"), "[DONE]"])
    client, tap = chat(gw)
    kw = {"model": "m-openai", "input": "hi", "top_logprobs": 2, "include": ["message.output_text.logprobs"]}
    if stream:
        with client.responses.stream(**kw) as s:
            deltas = [e.logprobs for e in s if e.type == "response.output_text.delta"]
            r = s.get_final_response()
        assert [[lp.model_dump() for lp in d] for d in deltas] == [LOGPROBS[:1], LOGPROBS[1:]]
    else:
        r = client.responses.create(**kw)
    assert sent()["logprobs"] is True and sent()["top_logprobs"] == 2
    assert [lp.model_dump() for lp in r.output[0].content[0].logprobs] == LOGPROBS
    if not stream:
        assert warnings_of(tap.headers) == set()


# --- 4: a Messages client's structured output reaches an OpenAI-format provider ---------------------------------

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}


@pytest.mark.parametrize("field", ["output_config", "output_format"])
@pytest.mark.parametrize("backend", ["openai", "responses"])
def test_a_messages_clients_structured_output_reaches_an_openai_format_provider(gw, backend, field):
    script(whole=responses_answer([{"type": "output_text", "text": '{"a":1}', "annotations": []}])
           if backend == "responses" else
           {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-openai",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": '{"a":1}'}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    client, tap = messages(gw)
    fmt = {"type": "json_schema", "schema": SCHEMA}
    kw = {"output_config": {"format": fmt}} if field == "output_config" else {"extra_body": {"output_format": fmt}}
    m = client.messages.create(model=f"m-{backend}", max_tokens=30, messages=[{"role": "user", "content": "hi"}],
                               **kw)
    assert json.loads(m.content[0].text) == {"a": 1}
    if backend == "openai":
        assert sent()["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "output", "schema": SCHEMA, "strict": True}}
    else:
        assert sent()["text"]["format"] == {"type": "json_schema", "name": "output", "schema": SCHEMA,
                                            "strict": True}
    assert warnings_of(tap.headers) == set()


def test_messages_parse_reads_an_openai_providers_structured_answer(gw):
    script(whole={"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-openai",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": '{"a":1}'},
                               "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    client, _ = messages(gw)
    m = client.messages.parse(model="m-openai", max_tokens=30, messages=[{"role": "user", "content": "hi"}],
                              output_format=Out)
    assert m.parsed_output == Out(a=1)
    assert sent()["response_format"]["json_schema"]["schema"]["properties"] == {"a": {"title": "A",
                                                                                        "type": "integer"}}


# --- 5: allowed_tools between Chat and Responses; Claude gets the allowed tools alone ----------------------------

TWO_CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
                  for n in ("a", "b")]
TWO_RESPONSES_TOOLS = [{"type": "function", "name": n, "parameters": {"type": "object", "properties": {}},
                        "strict": False} for n in ("a", "b")]
CHAT_ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-openai",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


@pytest.mark.parametrize("mode", ["required", "auto"])
def test_responses_allowed_tools_reach_a_chat_provider(gw, mode):
    script(whole=CHAT_ANSWER)
    client, tap = chat(gw)
    client.responses.create(model="m-openai", input="hi", tools=TWO_RESPONSES_TOOLS, tool_choice={
        "type": "allowed_tools", "mode": mode, "tools": [{"type": "function", "name": "b"}]})
    assert sent()["tool_choice"] == {"type": "allowed_tools", "allowed_tools": {
        "mode": mode, "tools": [{"type": "function", "function": {"name": "b"}}]}}
    assert len(sent()["tools"]) == 2
    assert warnings_of(tap.headers) == set()


def test_chat_allowed_tools_reach_a_responses_provider(gw):
    script(whole=responses_answer([{"type": "output_text", "text": "x", "annotations": []}]))
    client, tap = chat(gw)
    client.chat.completions.create(model="m-responses", messages=[{"role": "user", "content": "hi"}],
                                   tools=TWO_CHAT_TOOLS, tool_choice={"type": "allowed_tools", "allowed_tools": {
                                       "mode": "required", "tools": [{"type": "function", "function": {"name": "b"}}]}})
    assert sent()["tool_choice"] == {"type": "allowed_tools", "mode": "required",
                                     "tools": [{"type": "function", "name": "b"}]}
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("mode, kind", [("required", "any"), ("auto", "auto")])
def test_allowed_tools_to_claude_offer_those_tools_alone(gw, mode, kind):
    script(whole=claude([{"type": "text", "text": "x"}]))
    client, tap = chat(gw)
    client.responses.create(model="m-anthropic", input="hi", tools=TWO_RESPONSES_TOOLS, tool_choice={
        "type": "allowed_tools", "mode": mode, "tools": [{"type": "function", "name": "b"}]})
    assert sent()["tool_choice"] == {"type": kind}
    assert [t["name"] for t in sent()["tools"]] == ["b"]
    assert loss("converted", "allowed_tools", "tool_choice") in warnings_of(tap.headers)


# --- 6: stop sequences past OpenAI's four ----------------------------------------------------------------------


def test_stop_sequences_past_openais_four_all_reach_the_backend(gw):
    """vLLM, SGLang and Ollama honour more than four; OpenAI itself answers a 400 the client sees."""
    script(whole=CHAT_ANSWER)
    client, tap = messages(gw)
    client.messages.create(model="m-openai", max_tokens=30, messages=[{"role": "user", "content": "hi"}],
                           stop_sequences=["a", "b", "c", "d", "e", "f"])
    assert sent()["stop"] == ["a", "b", "c", "d", "e", "f"]
    assert not any("stop_sequences" in w for w in warnings_of(tap.headers)), tap.headers


# --- 7: a Chat tool message's images reach Claude and a Responses provider ----------------------------------------

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
SHOT_HISTORY = [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [
        {"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}]
SHOT = {"type": "function", "function": {"name": "shot", "parameters": {"type": "object", "properties": {}}}}


def test_a_chat_tool_results_image_reaches_claude(gw):
    script(whole=claude([{"type": "text", "text": "ok"}]))
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", messages=SHOT_HISTORY, tools=[SHOT], max_tokens=10)
    [result] = sent()["messages"][-1]["content"]
    assert result["content"] == [{"type": "text", "text": "see"}, {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": PNG}}]
    assert warnings_of(tap.headers) == set()


def test_a_chat_tool_results_image_reaches_a_responses_provider(gw):
    script(whole=responses_answer([{"type": "output_text", "text": "ok", "annotations": []}]))
    client, tap = chat(gw)
    client.chat.completions.create(model="m-responses", messages=SHOT_HISTORY, tools=[SHOT])
    [output] = [i for i in sent()["input"] if i.get("type") == "function_call_output"]
    assert output["output"][0] == {"type": "input_text", "text": "see"}
    assert output["output"][1]["type"] == "input_image"
    assert output["output"][1]["image_url"] == f"data:image/png;base64,{PNG}"
    assert warnings_of(tap.headers) == set()


# --- 8: parallel calls under one index with new ids, split for a Chat client too --------------------------------

ONE_INDEX = [chat_chunk({"role": "assistant", "content": None, "tool_calls": [
                 {"index": 0, "id": "call_1", "type": "function", "function": {"name": "a", "arguments": '{"x":1}'}}]}),
             chat_chunk({"tool_calls": [{"index": 0, "id": "call_2", "type": "function",
                                         "function": {"name": "b", "arguments": '{"y":'}}]}),
             chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "2}"}}]}),
             chat_chunk({}, "tool_calls"), "[DONE]"]


def streamed_calls(gw) -> list:
    """The tool calls of the scripted stream, as the openai SDK's stream accumulator joins them."""
    client, _ = chat(gw)
    with client.chat.completions.stream(model="m-openai", messages=[{"role": "user", "content": "hi"}],
                                        tools=TWO_CHAT_TOOLS) as s:
        return s.get_final_completion().choices[0].message.tool_calls


def test_parallel_calls_under_one_index_are_split_for_a_chat_client(gw):
    script(events=ONE_INDEX)
    calls = streamed_calls(gw)
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_1", "a", '{"x":1}'), ("call_2", "b", '{"y":2}')]


def test_calls_one_id_split_across_chunks_stay_one_call_for_a_chat_client(gw):
    """A server that sends each piece of one call with another id and no name (Poolside's): still one call."""
    script(events=[chat_chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                               "function": {"name": "a", "arguments": '{"x":'}}]}),
                   chat_chunk({"tool_calls": [{"index": 0, "id": "c2", "function": {"arguments": "1}"}}]}),
                   chat_chunk({}, "tool_calls"), "[DONE]"])
    calls = streamed_calls(gw)
    assert [(c.function.name, c.function.arguments) for c in calls] == [("a", '{"x":1}')]


def test_calls_streamed_piecewise_under_one_index_are_split_for_a_chat_client(gw):
    """SGLang's way: a call's id and name, its arguments in pieces without an id, then the next call under index 0;
    the pieces pass undecoded and the next call is still split off. ``"tool_calls": null`` deltas pass as sent."""
    script(events=[chat_chunk({"role": "assistant", "content": "", "tool_calls": None}),
                   chat_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                               "function": {"name": "a", "arguments": '{"x":'}}]}),
                   chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
                   chat_chunk({"tool_calls": [{"index": 0, "id": "call_2", "type": "function",
                                               "function": {"name": "b", "arguments": '{"y":'}}]}),
                   chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "2}"}}]}),
                   chat_chunk({"tool_calls": None}, "tool_calls"), "[DONE]"])
    calls = streamed_calls(gw)
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_1", "a", '{"x":1}'), ("call_2", "b", '{"y":2}')]


# --- 9: Claude's cache writes for a Chat client; ids for calls a backend sent without --------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_claudes_cache_writes_reach_a_chat_client(gw, stream):
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 20}
    events = claude_events([text("ok")])
    events[0][1]["message"]["usage"] = {**usage, "output_tokens": 1}
    script(whole=claude([{"type": "text", "text": "ok"}], usage=usage), events=events)
    client, _ = chat(gw)
    kw = {"model": "m-anthropic", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
    if stream:
        with client.chat.completions.stream(**kw, stream_options={"include_usage": True}) as s:
            u = s.get_final_completion().usage
    else:
        u = client.chat.completions.create(**kw).usage
    assert u.prompt_tokens == 60
    assert u.prompt_tokens_details.cached_tokens == 20
    assert u.prompt_tokens_details.model_dump()["cache_write_tokens"] == 30


def test_calls_a_backend_sent_without_ids_get_ids_unique_across_turns(gw):
    def turn(answer_id: str) -> list[str]:
        script(whole={"id": answer_id, "object": "chat.completion", "created": 1, "model": "up-openai",
                      "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                          "role": "assistant", "content": None, "tool_calls": [
                              {"type": "function", "function": {"name": "a", "arguments": "{}"}}]}}]})
        client, _ = messages(gw)
        m = client.messages.create(model="m-openai", max_tokens=30, messages=[{"role": "user", "content": "hi"}],
                                   tools=[{"name": "a", "input_schema": {"type": "object"}}])
        return [b.id for b in m.content if b.type == "tool_use"]
    first, second = turn("chatcmpl-A"), turn("chatcmpl-B")
    assert len(first) == len(second) == 1 and first != second
