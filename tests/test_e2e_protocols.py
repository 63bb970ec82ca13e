"""End to end across protocols: the router and the mock upstream as real processes, the official
``anthropic`` and ``openai`` SDKs as clients of the Messages, Responses and Chat Completions APIs.

The matrix: every client API x every backend ``api_format`` (openai, anthropic, responses) x
whole and streamed x {plain text, tool call round trip, image input, system prompt}. Each case
checks what the client sees (text, tool call, stop reason in its own vocabulary, usage, the
router's headers) and what the backend received, read back from the mock's ``last_request``
(system prompt, image, tool definition and tool result, each in the backend's own form).

Then: malformed bodies get each API's own error shape and the router keeps serving; an upstream
failure reaches Messages and Chat clients in their own error shapes; and the Images API with the
decisions' output contract (spec 5.8).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import anthropic
import httpx
import httpx2   # what both SDKs are built on: their http_client must be one of its Clients
import openai
import pytest

from bench.mock_upstream import PNG_B64

from .procs import config, mock_upstream, model, router, write_config

BACKENDS = ("openai", "anthropic", "responses")
ROUTE_OF = {"openai": "chat", "anthropic": "messages", "responses": "responses"}   # the mock's by_api keys
NATIVE = {"messages": "anthropic", "responses": "responses", "chat": "openai"}
CASES = ("plain", "tool", "image", "system")
ID_PREFIX = {"messages": "msg_", "responses": "resp_", "chat": "chatcmpl-"}

SYSTEM = "You are terse: answer in one line."
PLAIN = "Say hello"
IMAGE_PROMPT = "What is in this image?"
TOOL_PROMPT = "Please use the tool to look up the weather."
RESULT = "sunny, 21C"
FINAL = f"The tool said: {RESULT}"
ARGS = {"city": "Paris"}
DATA_URL = f"data:image/png;base64,{PNG_B64}"
TOOL_NAME = "get_weather"
TOOL_DESC = "The current weather in a city"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CANNED = "Hello! This is a canned answer from the mock upstream."


def loss(action: str, reason: str, field_: str) -> str:
    return f'translation_loss;action="{action}";reason="{reason}";field="{field_}"'


# --- processes --------------------------------------------------------------------------------------


def three_models(mock) -> list[dict]:
    return [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in BACKENDS]


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    """One router over three provider models on the one mock, one per backend api_format."""
    doc = config(three_models(mock), [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


def reset(mock) -> None:
    httpx.post(f"{mock.url}/_mock/reset", json={}).raise_for_status()


def stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()


class HeaderTap:
    """An HTTP client for an SDK that keeps the headers of the last response it got."""

    def __init__(self) -> None:
        self.headers = None
        self.http = httpx2.Client(timeout=10, event_hooks={"response": [self._keep]})

    def _keep(self, response) -> None:
        self.headers = response.headers


# --- what a client saw ----------------------------------------------------------------------------------


@dataclass
class Seen:
    text: str
    calls: list[tuple[str, str, dict]]   # (call id, tool name, parsed arguments)
    stop: str                            # in the client's own vocabulary
    model: str                           # the model the answer names
    usage: tuple[int, int] | None        # (input, output) tokens
    headers: object                      # the response's headers (an httpx2.Headers)
    events: list[str] = field(default_factory=list)   # streamed: event types, in order
    id: str = ""


class MessagesClient:
    """Anthropic Messages, via ``anthropic.Anthropic``."""

    api = "messages"
    stop_text, stop_tool = "end_turn", "tool_use"

    def __init__(self, url: str) -> None:
        self.tap = HeaderTap()
        self.sdk = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, http_client=self.tap.http)

    def first(self, case: str) -> dict:
        kw: dict = {"max_tokens": 256}
        if case == "plain":
            kw["messages"] = [{"role": "user", "content": PLAIN}]
            kw["extra_body"] = {"top_k": 5}   # no other protocol carries top_k (the SDK has no argument for it)
        elif case == "system":
            kw["system"] = SYSTEM
            kw["messages"] = [{"role": "user", "content": PLAIN}]
        elif case == "image":
            kw["messages"] = [{"role": "user", "content": [
                {"type": "text", "text": IMAGE_PROMPT},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}]}]
        else:
            kw["messages"] = [{"role": "user", "content": TOOL_PROMPT}]
            kw["tools"] = [{"name": TOOL_NAME, "description": TOOL_DESC, "input_schema": SCHEMA}]
        return kw

    def follow(self, kw: dict, seen: Seen) -> dict:
        call_id, name, args = seen.calls[0]
        return {**kw, "messages": [
            *kw["messages"],
            {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": RESULT}]}]}

    def call(self, model_name: str, kw: dict, stream: bool) -> Seen:
        events: list[str] = []
        if stream:
            streamed, open_block, started = "", None, []
            with self.sdk.messages.stream(model=model_name, **kw) as s:
                for ev in s:
                    events.append(ev.type)
                    if ev.type == "text":
                        streamed += ev.text
                    elif ev.type == "content_block_start":
                        assert open_block is None, "a block started while another was open"
                        open_block = ev.index
                        started.append(ev.index)
                    elif ev.type == "content_block_delta":
                        assert ev.index == open_block, (ev.index, open_block)
                    elif ev.type == "content_block_stop":
                        assert ev.index == open_block, (ev.index, open_block)
                        open_block = None
                msg = s.get_final_message()
            assert events[0] == "message_start" and events[-1] == "message_stop", events
            assert events[-2] == "message_delta", events
            assert open_block is None and started == list(range(len(msg.content))), (started, msg.content)
            assert streamed == "".join(b.text for b in msg.content if b.type == "text")
        else:
            msg = self.sdk.messages.create(model=model_name, **kw)
        assert msg.type == "message" and msg.role == "assistant"
        return Seen(
            text="".join(b.text for b in msg.content if b.type == "text"),
            calls=[(b.id, b.name, b.input) for b in msg.content if b.type == "tool_use"],
            stop=msg.stop_reason, model=msg.model, usage=(msg.usage.input_tokens, msg.usage.output_tokens),
            headers=self.tap.headers, events=events, id=msg.id)


class ResponsesClient:
    """OpenAI Responses, via ``openai.OpenAI().responses``."""

    api = "responses"
    stop_text = stop_tool = "completed"

    def __init__(self, url: str) -> None:
        self.tap = HeaderTap()
        self.sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, http_client=self.tap.http)

    def first(self, case: str) -> dict:
        kw: dict = {"max_output_tokens": 256}
        if case == "plain":
            del kw["max_output_tokens"]   # Messages requires it: "defaulted" when translated there
            kw["input"] = PLAIN
            kw["truncation"] = "auto"     # no other protocol carries truncation
        elif case == "system":
            kw["instructions"] = SYSTEM
            kw["input"] = PLAIN
        elif case == "image":
            kw["input"] = [{"role": "user", "content": [
                {"type": "input_text", "text": IMAGE_PROMPT},
                {"type": "input_image", "image_url": DATA_URL, "detail": "high"}]}]   # Messages has no detail
        else:
            kw["input"] = [{"role": "user", "content": TOOL_PROMPT}]
            kw["tools"] = [{"type": "function", "name": TOOL_NAME, "description": TOOL_DESC,
                            "parameters": SCHEMA, "strict": False}]
        return kw

    def follow(self, kw: dict, seen: Seen) -> dict:
        call_id, name, args = seen.calls[0]
        return {**kw, "input": [
            *kw["input"],
            {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)},
            {"type": "function_call_output", "call_id": call_id, "output": RESULT}]}

    def call(self, model_name: str, kw: dict, stream: bool) -> Seen:
        events: list[str] = []
        if stream:
            streamed, args_streamed, numbers, ids, added, done = "", "", [], set(), {}, {}
            with self.sdk.responses.stream(model=model_name, **kw) as s:
                for ev in s:
                    events.append(ev.type)
                    numbers.append(ev.sequence_number)
                    if ev.type == "response.output_text.delta":
                        streamed += ev.delta
                    elif ev.type == "response.function_call_arguments.delta":
                        args_streamed += ev.delta
                    elif ev.type in ("response.created", "response.in_progress", "response.completed"):
                        ids.add(ev.response.id)
                    elif ev.type == "response.output_item.added":
                        added[ev.output_index] = ev.item.id
                    elif ev.type == "response.output_item.done":
                        done[ev.output_index] = ev.item.id
                resp = s.get_final_response()
            assert events[:2] == ["response.created", "response.in_progress"], events
            assert events[-1] == "response.completed", events
            assert numbers == list(range(len(numbers))), numbers
            assert ids == {resp.id}, ids
            assert added == done == {i: item.id for i, item in enumerate(resp.output)}, (added, done)
            assert streamed == resp.output_text
            calls = [i for i in resp.output if i.type == "function_call"]
            assert args_streamed == "".join(c.arguments for c in calls)
        else:
            resp = self.sdk.responses.create(model=model_name, **kw)
        assert resp.object == "response"
        return Seen(
            text=resp.output_text,
            calls=[(i.call_id, i.name, json.loads(i.arguments)) for i in resp.output if i.type == "function_call"],
            stop=resp.status, model=resp.model, id=resp.id,
            usage=(resp.usage.input_tokens, resp.usage.output_tokens) if resp.usage else None,
            headers=self.tap.headers, events=events)


class ChatClient:
    """OpenAI Chat Completions, via ``openai.OpenAI().chat.completions``."""

    api = "chat"
    stop_text, stop_tool = "stop", "tool_calls"

    def __init__(self, url: str) -> None:
        self.tap = HeaderTap()
        self.sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, http_client=self.tap.http)

    def first(self, case: str) -> dict:
        kw: dict = {"max_tokens": 256}
        if case == "plain":
            del kw["max_tokens"]          # Messages requires it: "defaulted" when translated there
            kw["messages"] = [{"role": "user", "content": PLAIN}]
            kw["seed"] = 7                # no other protocol carries seed
        elif case == "system":
            kw["messages"] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PLAIN}]
        elif case == "image":
            kw["messages"] = [{"role": "user", "content": [
                {"type": "text", "text": IMAGE_PROMPT},
                {"type": "image_url", "image_url": {"url": DATA_URL, "detail": "high"}}]}]   # Messages has no detail
        else:
            kw["messages"] = [{"role": "user", "content": TOOL_PROMPT}]
            kw["tools"] = [{"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESC,
                                                             "parameters": SCHEMA}}]
        return kw

    def follow(self, kw: dict, seen: Seen) -> dict:
        call_id, name, args = seen.calls[0]
        return {**kw, "messages": [
            *kw["messages"],
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": call_id, "content": RESULT}]}

    def call(self, model_name: str, kw: dict, stream: bool) -> Seen:
        if not stream:
            c = self.sdk.chat.completions.create(model=model_name, **kw)
            assert c.object == "chat.completion" and len(c.choices) == 1
            m = c.choices[0].message
            return Seen(
                text=m.content or "",
                calls=[(t.id, t.function.name, json.loads(t.function.arguments)) for t in m.tool_calls or ()],
                stop=c.choices[0].finish_reason, model=c.model,
                usage=(c.usage.prompt_tokens, c.usage.completion_tokens) if c.usage else None,
                headers=self.tap.headers, id=c.id)
        text, calls, finish, usage, events, ids, models = "", {}, None, None, [], set(), set()
        for chunk in self.sdk.chat.completions.create(model=model_name, stream=True,
                                                      stream_options={"include_usage": True}, **kw):
            assert chunk.object == "chat.completion.chunk"
            ids.add(chunk.id)
            models.add(chunk.model)
            if not events:
                assert chunk.choices[0].delta.role == "assistant", chunk
            events.append("usage" if not chunk.choices else "chunk")
            if chunk.usage is not None:
                usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for tc in choice.delta.tool_calls or ():
                    if tc.index not in calls:   # a call's first chunk names it
                        assert tc.id and tc.type == "function" and tc.function.name, tc
                    entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    if tc.id:
                        entry["id"] = tc.id
                    if tc.function and tc.function.name:
                        entry["name"] += tc.function.name
                    if tc.function and tc.function.arguments:
                        entry["arguments"] += tc.function.arguments
                if choice.finish_reason is not None:
                    assert finish is None, "a second finish_reason"
                    finish = choice.finish_reason
        assert events[-1] == "usage", events   # include_usage: the usage chunk comes last
        assert len(ids) == 1 and len(models) == 1, (ids, models)
        return Seen(text=text, calls=[(c["id"], c["name"], json.loads(c["arguments"])) for c in calls.values()],
                    stop=finish, model=models.pop(), usage=usage, headers=self.tap.headers, events=events,
                    id=ids.pop())


CLIENTS = {"messages": MessagesClient, "responses": ResponsesClient, "chat": ChatClient}


# --- what the backend got -----------------------------------------------------------------------------------


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or () if isinstance(b, dict))


def check_backend_common(backend: str, last: dict, mock_stats: dict, calls: int, stream: bool,
                         client_api: str = "") -> dict:
    body = last["body"]
    assert isinstance(body, dict), body
    assert mock_stats["by_api"] == {**{k: 0 for k in ("chat", "messages", "responses", "images")},
                                    ROUTE_OF[backend]: calls}
    assert body["model"] == f"m-{backend}"
    assert bool(body.get("stream", False)) == stream
    if backend == "anthropic" and client_api == "messages":
        # The client's own body goes unchanged, and with it the version it was written for.
        assert last["headers"].get("anthropic-version") == anthropic.Anthropic(api_key="x").default_headers[
            "anthropic-version"]
    elif backend == "anthropic":
        assert last["headers"].get("anthropic-version") == "2023-06-01"
    assert "x-api-key" not in last["headers"] and "authorization" not in last["headers"]
    return body


def user_turns(backend: str, body: dict) -> list:
    """The backend's user turns' contents, in its own form."""
    if backend == "responses":
        items = body["input"]
        if isinstance(items, str):
            return [items]
        return [i["content"] for i in items if i.get("type", "message") == "message" and i.get("role") == "user"]
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def check_system(backend: str, body: dict) -> None:
    if backend == "openai":
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    elif backend == "anthropic":
        assert body["system"] in (SYSTEM, [{"type": "text", "text": SYSTEM}])
        assert [m["role"] for m in body["messages"]] == ["user"]
    else:
        assert body["instructions"] == SYSTEM
        items = [body["input"]] if isinstance(body["input"], str) else body["input"]
        assert not [i for i in items if isinstance(i, dict) and i.get("role") in ("system", "developer")]
    assert text_of(user_turns(backend, body)[-1]) == PLAIN


def check_no_system(backend: str, body: dict) -> None:
    if backend == "openai":
        assert body["messages"][0]["role"] == "user"
    elif backend == "anthropic":
        assert "system" not in body
    else:
        assert body.get("instructions") is None


def check_image(client: str, backend: str, body: dict) -> None:
    (content,) = user_turns(backend, body)
    assert isinstance(content, list), content
    detail = {"messages": None, "chat": "high", "responses": "high"}[client]
    if backend == "openai":
        images = [p for p in content if p["type"] == "image_url"]
        assert len(images) == 1 and images[0]["image_url"]["url"] == DATA_URL
        assert images[0]["image_url"].get("detail") == detail
        assert {"type": "text", "text": IMAGE_PROMPT} in content
    elif backend == "anthropic":
        assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}} in content
        assert {"type": "text", "text": IMAGE_PROMPT} in content
    else:
        images = [p for p in content if p["type"] == "input_image"]
        assert len(images) == 1 and images[0]["image_url"] == DATA_URL
        assert images[0].get("detail") in ((detail,) if detail else (None, "auto"))
        assert {"type": "input_text", "text": IMAGE_PROMPT} in content


def check_tool_def(backend: str, body: dict) -> None:
    (tool,) = body["tools"]
    if backend == "openai":
        assert tool["type"] == "function"
        f = tool["function"]
        assert (f["name"], f["description"], f["parameters"]) == (TOOL_NAME, TOOL_DESC, SCHEMA)
    elif backend == "anthropic":
        assert (tool["name"], tool["description"], tool["input_schema"]) == (TOOL_NAME, TOOL_DESC, SCHEMA)
        assert tool.get("type") in (None, "custom")
    else:
        assert (tool["type"], tool["name"], tool["description"], tool["parameters"]) == (
            "function", TOOL_NAME, TOOL_DESC, SCHEMA)
    assert text_of(user_turns(backend, body)[0]) == TOOL_PROMPT


def check_tool_result(backend: str, body: dict, call_id: str) -> None:
    """The assistant's tool call and the tool's result, sent back in the backend's own form."""
    if backend == "openai":
        *_, assistant, result = body["messages"]
        assert assistant["role"] == "assistant"
        (tc,) = assistant["tool_calls"]
        assert (tc["id"], tc["type"], tc["function"]["name"]) == (call_id, "function", TOOL_NAME)
        assert json.loads(tc["function"]["arguments"]) == ARGS
        assert result == {"role": "tool", "tool_call_id": call_id, "content": RESULT}
    elif backend == "anthropic":
        *_, assistant, user = body["messages"]
        assert assistant["role"] == "assistant"
        assert {"type": "tool_use", "id": call_id, "name": TOOL_NAME, "input": ARGS} in assistant["content"]
        assert user["role"] == "user"
        (block,) = [b for b in user["content"] if b["type"] == "tool_result"]
        assert block["tool_use_id"] == call_id and text_of(block["content"]) == RESULT
        assert not block.get("is_error")
    else:
        *_, call, output = body["input"]
        assert (call["type"], call["call_id"], call["name"]) == ("function_call", call_id, TOOL_NAME)
        assert json.loads(call["arguments"]) == ARGS
        assert (output["type"], output["call_id"], text_of(output["output"])) == (
            "function_call_output", call_id, RESULT)


# --- x-vsr-warnings --------------------------------------------------------------------------------------------


def expected_warnings(client: str, backend: str, case: str) -> set[str]:
    """What each cross-protocol pair cannot carry of what the client sent (or must default)."""
    if NATIVE[client] == backend or case not in ("plain", "image"):
        return set()
    if case == "image":   # the image's detail, where the client's request has it
        where = {"chat": "messages[0].content[1].image_url.detail", "responses": "input[0].content[1].detail"}
        return {loss("dropped", "unsupported", where[client])} if backend == "anthropic" and client in where else set()
    dropped = {"messages": "top_k", "responses": "truncation", "chat": "seed"}[client]
    out = {loss("dropped", "unsupported", dropped)}
    if backend == "anthropic":
        out.add(loss("defaulted", "required", "max_tokens"))
    return out


def warnings_of(headers) -> set[str]:
    value = headers.get("x-vsr-warnings")
    return set() if value is None else {m.strip() for m in value.split(", ")}


def check_headers(seen: Seen, client: str, backend: str, case: str, stream: bool) -> None:
    h = seen.headers
    assert h["x-vsr-selected-model"] == f"m-{backend}"
    assert h["x-vsr-response-path"] == "upstream"
    assert h["x-vsr-schema-version"] == "3"
    assert "x-vsr-selected-recipe" not in h    # a provider model named directly skips the recipe
    assert h["content-type"].startswith("text/event-stream" if stream else "application/json")
    assert warnings_of(h) == expected_warnings(client, backend, case)


# --- the matrix ------------------------------------------------------------------------------------------------

_CLIENTS: dict[tuple[str, str], object] = {}


def client_for(api: str, proc) -> MessagesClient | ResponsesClient | ChatClient:
    key = (api, proc.url)
    if key not in _CLIENTS:
        _CLIENTS[key] = CLIENTS[api](proc.url)
    return _CLIENTS[key]   # type: ignore[return-value]


def check_usage(seen: Seen, reported: tuple[int, int]) -> None:
    """Usage > 0 and exactly what the backend reported (the mock sums what it reports)."""
    assert seen.usage is not None
    assert seen.usage[0] > 0 and seen.usage[1] > 0, seen.usage
    assert seen.usage == reported, (seen.usage, reported)


def counted(s: dict) -> tuple[int, int]:
    return s["usage"]["input_tokens"], s["usage"]["output_tokens"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("client_api", list(CLIENTS))
def test_matrix(gw, mock, client_api, backend, stream, case):
    client = client_for(client_api, gw)
    model_name = f"m-{backend}"
    reset(mock)
    kw = client.first(case)
    seen = client.call(model_name, kw, stream)
    check_headers(seen, client_api, backend, case, stream)
    assert seen.model == model_name   # the mock answers with the model it was asked for
    # The answer's id is of the client's protocol (a Chat backend's chatcmpl-... was a Messages answer's id).
    assert seen.id.startswith(ID_PREFIX[client_api]), seen.id
    s = stats(mock)
    check_usage(seen, counted(s))
    body = check_backend_common(backend, s["last_request"], s, 1, stream, client_api)

    if case != "tool":
        assert seen.text == CANNED
        assert seen.calls == []
        assert seen.stop == client.stop_text
        if case == "system":
            check_system(backend, body)
        else:
            check_no_system(backend, body)
        if case == "image":
            check_image(client_api, backend, body)
        if case == "plain":
            assert text_of(user_turns(backend, body)[-1]) == PLAIN
        return

    # The tool round trip: a tool call first ...
    check_tool_def(backend, body)
    assert seen.text == ""
    assert [(name, args) for _, name, args in seen.calls] == [(TOOL_NAME, ARGS)]
    call_id = seen.calls[0][0]
    assert call_id
    assert seen.stop == client.stop_tool
    # ... then the result sent back in the client's protocol, and the final text.
    final = client.call(model_name, client.follow(kw, seen), stream)
    check_headers(final, client_api, backend, case, stream)
    first = counted(s)
    s = stats(mock)
    check_usage(final, (counted(s)[0] - first[0], counted(s)[1] - first[1]))
    assert final.text == FINAL
    assert final.calls == []
    assert final.stop == client.stop_text
    body = check_backend_common(backend, s["last_request"], s, 2, stream, client_api)
    check_tool_def(backend, body)
    check_tool_result(backend, body, call_id)


def test_responses_stream_tool_call_events_in_order(gw, mock):
    """A Responses client's streamed tool call from each backend: item added, argument deltas, done."""
    client = client_for("responses", gw)
    for backend in BACKENDS:
        seen = client.call(f"m-{backend}", client.first("tool"), True)
        kinds = [e for e in seen.events if e.startswith("response.function_call_arguments") or "output_item" in e]
        assert kinds[0] == "response.output_item.added" and kinds[-1] == "response.output_item.done", (backend, kinds)
        assert "response.function_call_arguments.done" in kinds, (backend, kinds)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_responses_round_trip_with_previous_response_id(gw, mock, backend, stream):
    """The router keeps the conversation: the follow-up names the first answer and sends only the tool's
    result, and every backend gets the whole conversation in its own form."""
    client = client_for("responses", gw)
    reset(mock)
    kw = client.first("tool")
    seen = client.call(f"m-{backend}", kw, stream)
    call_id = seen.calls[0][0]
    assert seen.headers["x-vsr-selected-model"] == f"m-{backend}"
    final = client.call(f"m-{backend}", {
        "previous_response_id": seen.id, "tools": kw["tools"],
        "input": [{"type": "function_call_output", "call_id": call_id, "output": RESULT}]}, stream)
    assert final.text == FINAL and final.stop == "completed"
    s = stats(mock)
    body = check_backend_common(backend, s["last_request"], s, 2, stream)
    check_tool_def(backend, body)
    check_tool_result(backend, body, call_id)
    assert text_of(user_turns(backend, body)[0]) == TOOL_PROMPT


# --- malformed bodies ---------------------------------------------------------------------------------------------

OPENAI_BAD = {
    "/v1/chat/completions": [
        (b'{"model": "m-openai", "messages": [', "invalid_json", None),
        (b'{"model": "m-openai", "messages": [{"role": "user", "content": 42}]}', "invalid_type", "messages[0].content"),
    ],
    "/v1/responses": [
        (b'{"model": "m-responses", "input": [', "invalid_json", None),
        (b'{"model": "m-responses", "input": 42}', "invalid_type", "input"),
        (b'{"model": "m-responses", "input": [{"role": "user", "content": [{"type": "hologram"}]}]}',
         "invalid_value", "input[0].content[0].type"),
        (b'{"model": "m-responses", "input": "hi", "max_output_tokens": 0}', "invalid_value", "max_output_tokens"),
    ],
    "/v1/images/generations": [
        (b'{"prompt": ', "invalid_json", None),
        (b'{"model": "vsr/auto"}', "invalid_value", "prompt"),
        (b'{"prompt": "a cat", "n": 99}', "invalid_value", "n"),
        (b'{"prompt": "a cat", "stream": true}', "invalid_request", "stream"),
    ],
}
OPENAI_BAD_CASES = [(path, *case) for path, cases in OPENAI_BAD.items() for case in cases]

MESSAGES_BAD = [
    (b'{"model": "m-anthropic", "max_tokens": 10, "messages": [', None),
    (b'{"model": "m-anthropic", "messages": [{"role": "user", "content": "hi"}]}', "max_tokens"),
    (b'{"model": "m-anthropic", "max_tokens": 10, "messages": [{"role": "wizard", "content": "hi"}]}',
     "messages.0.role"),
    # A block of a type the router does not read goes to Anthropic to judge; a malformed one it reads does not.
    (b'{"model": "m-anthropic", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "text"}]}]}',
     "messages.0.content.0.text"),
    (b'{"model": "m-anthropic", "max_tokens": 10, "messages": []}', "messages"),
    (b'{"model": "m-anthropic", "max_tokens": 0, "messages": []}', "max_tokens"),
]


def still_serves(gw, mock) -> None:
    """Every API still answers after a bad request."""
    for path, body in (("/v1/chat/completions", {"model": "m-openai", "messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/messages", {"model": "m-anthropic", "max_tokens": 8,
                                         "messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/responses", {"model": "m-responses", "input": "hi"})):
        r = httpx.post(f"{gw.url}{path}", json=body, timeout=10)
        assert r.status_code == 200, (path, r.text)


@pytest.mark.parametrize("path, body, code, param", OPENAI_BAD_CASES)
def test_bad_body_openai_shapes(gw, mock, path, body, code, param):
    reset(mock)
    r = httpx.post(f"{gw.url}{path}", content=body, headers={"content-type": "application/json"}, timeout=10)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(r.json()) == {"error"}
    assert err["type"] == "invalid_request_error"
    assert err["code"] == code
    assert err["param"] == param
    assert err["message"]
    assert r.headers["x-vsr-response-path"] == "error"
    assert stats(mock)["requests"] == 0   # refused before any model was called
    still_serves(gw, mock)


@pytest.mark.parametrize("body, path", MESSAGES_BAD)
def test_bad_body_anthropic_shape(gw, mock, body, path):
    reset(mock)
    r = httpx.post(f"{gw.url}/v1/messages", content=body,
                   headers={"content-type": "application/json", "anthropic-version": "2023-06-01"}, timeout=10)
    assert r.status_code == 400, r.text
    doc = r.json()
    assert doc["type"] == "error" and set(doc) == {"type", "error", "request_id"}
    assert doc["request_id"] == r.headers["request-id"] == r.headers["x-request-id"]
    assert doc["error"]["type"] == "invalid_request_error"
    assert doc["error"]["message"]
    if path is not None:
        # Anthropic has no param field: its message starts with the field's dotted path.
        assert doc["error"]["message"].startswith(f"{path}: "), doc
    assert r.headers["x-vsr-response-path"] == "error"
    assert stats(mock)["requests"] == 0
    still_serves(gw, mock)


def test_bad_body_through_the_sdks(gw):
    """The SDKs raise their own BadRequestError, with the body in their own shape."""
    with pytest.raises(anthropic.BadRequestError) as info:
        client_for("messages", gw).sdk.messages.create(
            model="m-anthropic", max_tokens=10, messages=[{"role": "wizard", "content": "hi"}])
    assert info.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as oinfo:
        # Cross-protocol, so the router reads the item (a same-protocol pair forwards the bytes as they are).
        client_for("responses", gw).sdk.responses.create(model="m-openai", input=[{"type": "message"}])
    assert oinfo.value.body["param"] == "input[0].role"


def test_an_unknown_field_in_a_message_is_refused_as_anthropic_refuses_it(gw, mock):
    """Anthropic answers an extra input in a message 400 naming it; the router forwarded it. A request that
    names betas (Claude Code: a system turn's per-turn ``output_config``) may carry the fields they add: its
    anthropic backend judges them."""
    reset(mock)
    sdk = client_for("messages", gw).sdk
    with pytest.raises(anthropic.BadRequestError) as info:
        sdk.messages.create(model="m-anthropic", max_tokens=10,
                            messages=[{"role": "user", "content": "hi", "extra": 1}])   # type: ignore[typeddict-unknown-key]
    assert info.value.body["error"] == {"type": "invalid_request_error",
                                        "message": "messages.0.extra: Extra inputs are not permitted"}
    with pytest.raises(anthropic.BadRequestError) as info:
        sdk.messages.create(model="m-openai", max_tokens=10, messages=[
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes", "name": "bot"},
            {"role": "user", "content": "go on"}])   # type: ignore[typeddict-unknown-key]
    assert info.value.body["error"]["message"] == "messages.1.name: Extra inputs are not permitted"
    assert stats(mock)["requests"] == 0
    beta = sdk.messages.create(model="m-anthropic", max_tokens=10, messages=[
        {"role": "user", "content": "hi"}, {"role": "system", "content": "be brief", "output_config": {"effort": "low"}}],
        extra_headers={"anthropic-beta": "per-turn-control-2026-07-01"})   # type: ignore[typeddict-unknown-key]
    assert beta.content[0].text == CANNED
    assert stats(mock)["last_request"]["body"]["messages"][1]["output_config"] == {"effort": "low"}


# --- upstream failures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """A router whose three models all sit on a mock that answers every request 503."""
    with mock_upstream("--fail-rate", "1", "--fail-status", "503") as bad:
        doc = config(three_models(bad), [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
        # One attempt per request (no retry of the 503): these tests read the error's shape.
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-fail")))) as proc:
            yield proc, bad


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_upstream_failure_reaches_messages_client_in_anthropic_shape(failing, backend, stream):
    proc, bad = failing
    before = stats(bad)["failures_injected"]
    client = MessagesClient(proc.url)
    kw = client.first("system")
    with pytest.raises(anthropic.APIStatusError) as info:
        if stream:
            with client.sdk.messages.stream(model=f"m-{backend}", **kw) as s:
                s.get_final_message()
        else:
            client.sdk.messages.create(model=f"m-{backend}", **kw)
    exc = info.value
    # The one attempt's 503, as nginx and Envoy pass the last upstream answer on: an Anthropic backend's error
    # passes as it came; another's is read and written in Anthropic's shape, where a 503 is overloaded_error (its
    # status kept: the router's own 503s are Anthropic's 529).
    kind = "api_error" if backend == "anthropic" else "overloaded_error"
    assert exc.status_code == 503
    assert exc.body.pop("request_id") == exc.request_id
    assert exc.body == {"type": "error", "error": {"type": kind, "message": "injected failure (status 503)"}}
    assert exc.response.headers["x-vsr-response-path"] == "error"
    assert exc.response.headers["x-vsr-selected-model"] == f"m-{backend}"
    assert stats(bad)["failures_injected"] == before + 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_upstream_failure_reaches_chat_client_in_openai_shape(failing, backend, stream):
    proc, bad = failing
    client = ChatClient(proc.url)
    with pytest.raises(openai.APIStatusError) as info:
        kw = client.first("system")
        if stream:
            list(client.sdk.chat.completions.create(model=f"m-{backend}", stream=True, **kw))
        else:
            client.sdk.chat.completions.create(model=f"m-{backend}", **kw)
    exc = info.value
    assert exc.status_code == 503       # the one attempt's, with its message
    err = exc.body
    assert err["message"] == "injected failure (status 503)", err
    assert err["type"] == "server_error", err   # OpenAI's type of a 5xx, whatever the backend's protocol
    assert exc.response.headers["x-vsr-response-path"] == "error"


@pytest.mark.parametrize("status", [400, 429])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("client_api", ["messages", "chat"])
def test_upstream_error_status_in_client_shape(failing, client_api, backend, status):
    """A backend's 400 (answered, not retried) and a 429 on every attempt, each in the client's own shape."""
    proc, bad = failing
    httpx.post(f"{bad.url}/_mock/config", json={"fail_status": status}).raise_for_status()
    try:
        client = CLIENTS[client_api](proc.url)
        kw = client.first("system")
        raises = {("messages", 400): anthropic.BadRequestError, ("messages", 429): anthropic.RateLimitError,
                  ("chat", 400): openai.BadRequestError, ("chat", 429): openai.RateLimitError}[client_api, status]
        with pytest.raises(raises) as info:
            if client_api == "messages":
                client.sdk.messages.create(model=f"m-{backend}", **kw)
            else:
                client.sdk.chat.completions.create(model=f"m-{backend}", **kw)
    finally:
        httpx.post(f"{bad.url}/_mock/config", json={"fail_status": 503}).raise_for_status()
    exc = info.value
    assert exc.status_code == status
    if client_api == "messages":
        kind = {400: "invalid_request_error", 429: "rate_limit_error"}[status]
        assert exc.body["type"] == "error" and exc.body["error"]["type"] == kind, exc.body
        message = exc.body["error"]["message"]
    else:
        assert set(exc.body) >= {"message", "type", "code"}, exc.body   # the SDK hands over the error object
        # OpenAI's type of the status; an openai-format backend's own body passes as it came (the mock's says
        # invalid_request_error for any 4xx).
        kind = {400: "invalid_request_error", 429: "rate_limit_error"}[status] if backend != "openai" else \
            "invalid_request_error"
        assert exc.body["type"] == kind, exc.body
        message = exc.body["message"]
    # A 400 is the backend's own answer, relayed; so is a 429 on every attempt, the last one's.
    assert message == f"injected failure (status {status})", message


# --- the Images API and the output contract (spec 5.8) --------------------------------------------------------


@pytest.fixture(scope="module")
def imaging(mock, tmp_path_factory):
    """``vsr/image`` enters a recipe whose one decision outputs an image (an images model),
    ``vsr/image-r`` one whose image model speaks Responses; ``vsr/text`` a recipe with only a text decision."""
    doc = {
        "version": "v0.5",
        "providers": {"models": [
            {**model("m-images", f"{mock.url}/v1", upstream_name="mock-image"), "api_format": "images",
             "capabilities": ["image_generation"]},
            {**model("m-img-responses", f"{mock.url}/v1", upstream_name="mock-gpt-image"),
             "api_format": "responses", "capabilities": ["image_generation"]},
            {**model("m-openai", f"{mock.url}/v1"), "api_format": "openai"},
        ]},
        "recipes": [
            {"name": "pictures", "decisions": [{"name": "draw", "output": {"kind": "image"},
                                                "modelRefs": [{"model": "m-images"}]}]},
            {"name": "pictures-r", "decisions": [{"name": "draw-r", "output": {"kind": "image"},
                                                  "modelRefs": [{"model": "m-img-responses"}]}]},
            {"name": "words", "decisions": [{"name": "talk", "modelRefs": [{"model": "m-openai"}]}]},
        ],
        "entrypoints": [
            {"api": "chat", "model_names": ["vsr/image"], "recipe": "pictures"},
            {"api": "chat", "model_names": ["vsr/image-r"], "recipe": "pictures-r"},
            {"api": "chat", "model_names": ["vsr/text"], "recipe": "words", "default": True},
        ],
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-img")))) as proc:
        yield proc


def test_images_api_serves_an_image_decision(imaging, mock):
    reset(mock)
    tap = HeaderTap()
    sdk = openai.OpenAI(base_url=f"{imaging.url}/v1", api_key="x", max_retries=0, http_client=tap.http)
    result = sdk.images.generate(model="vsr/image", prompt="a red square", response_format="b64_json")
    assert [d.b64_json for d in result.data] == [PNG_B64]
    assert result.usage is not None and result.usage.input_tokens > 0
    h = tap.headers
    assert (h["x-vsr-selected-recipe"], h["x-vsr-selected-decision"], h["x-vsr-selected-model"]) == (
        "pictures", "draw", "m-images")
    assert h["x-vsr-response-path"] == "image_generation"
    s = stats(mock)
    assert s["by_api"]["images"] == 1 and s["requests"] == 1
    body = s["last_request"]["body"]
    assert body["model"] == "mock-image" and body["prompt"] == "a red square"


@pytest.mark.parametrize("name", ["vsr/text", "something-unknown"], ids=["text-entrypoint", "default-recipe"])
def test_images_api_without_an_image_decision_is_refused(imaging, mock, name):
    reset(mock)
    r = httpx.post(f"{imaging.url}/v1/images/generations", json={"model": name, "prompt": "a red square"},
                   timeout=10)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "image_route_required"
    assert err["type"] == "invalid_request_error"
    assert r.headers["x-vsr-response-path"] == "error"
    assert r.headers.get("x-vsr-selected-recipe") == "words"
    assert stats(mock)["requests"] == 0   # no model was called


def test_chat_client_on_an_image_decision_is_refused(imaging, mock):
    reset(mock)
    sdk = openai.OpenAI(base_url=f"{imaging.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model="vsr/image", messages=[{"role": "user", "content": "draw a red square"}])
    assert info.value.body["code"] == "unsupported_capability"
    assert info.value.response.headers["x-vsr-selected-decision"] == "draw"
    assert stats(mock)["requests"] == 0


def test_messages_client_on_an_image_decision_is_refused(imaging, mock):
    reset(mock)
    sdk = anthropic.Anthropic(base_url=imaging.url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as info:
        sdk.messages.create(model="vsr/image", max_tokens=16,
                            messages=[{"role": "user", "content": "draw a red square"}])
    assert info.value.body["type"] == "error"
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "unsupported_capability" in info.value.body["error"]["message"]
    assert stats(mock)["requests"] == 0


def test_responses_client_on_an_image_decision(imaging, mock):
    """A Responses client may reach an image decision: the images model answers, as an image_generation_call;
    ``tool_choice: none`` on an image-only decision is refused before any model is called."""
    tap = HeaderTap()
    sdk = openai.OpenAI(base_url=f"{imaging.url}/v1", api_key="x", max_retries=0, http_client=tap.http)
    reset(mock)
    resp = sdk.responses.create(model="vsr/image", input="draw a red square")
    # The router added and forced the image_generation tool, which the Images API is: nothing was lost.
    assert "x-vsr-warnings" not in tap.headers, tap.headers["x-vsr-warnings"]
    assert tap.headers["x-vsr-response-path"] == "image_generation"
    (item,) = resp.output
    assert item.type == "image_generation_call" and item.result == PNG_B64
    s = stats(mock)
    assert s["by_api"]["images"] == 1 and s["last_request"]["body"]["prompt"] == "draw a red square"
    reset(mock)
    with pytest.raises(openai.BadRequestError) as info:
        sdk.responses.create(model="vsr/image", input="draw a red square", tool_choice="none")
    assert info.value.body["code"] == "image_generation_forbidden"
    assert info.value.body["param"] == "tool_choice"
    assert stats(mock)["requests"] == 0


def test_images_api_on_a_responses_image_model(imaging, mock):
    """An Images client whose image decision's model speaks Responses: the request becomes a forced
    image_generation tool call, and the image_generation_call comes back as b64_json."""
    reset(mock)
    tap = HeaderTap()
    sdk = openai.OpenAI(base_url=f"{imaging.url}/v1", api_key="x", max_retries=0, http_client=tap.http)
    result = sdk.images.generate(model="vsr/image-r", prompt="a red square", size="1024x1024")
    assert [d.b64_json for d in result.data] == [PNG_B64]
    assert tap.headers["x-vsr-selected-model"] == "m-img-responses"
    s = stats(mock)
    assert s["by_api"]["responses"] == 1 and s["requests"] == 1
    body = s["last_request"]["body"]
    assert body["model"] == "mock-gpt-image" and body["input"] == "a red square"
    assert body["tools"] == [{"type": "image_generation", "size": "1024x1024"}]
    assert body["tool_choice"] == {"type": "image_generation"}




@pytest.mark.parametrize("name, route", [
    pytest.param("vsr/image", "images", id="images-model"),
    pytest.param("vsr/image-r", "responses", id="responses-model"),
])
def test_responses_client_streams_an_image_decision(imaging, mock, name, route):
    """Streamed: an images model's whole answer becomes the Responses image events; a Responses image model
    gets the image_generation tool added and forced (spec 5.8)."""
    reset(mock)
    tap = HeaderTap()
    sdk = openai.OpenAI(base_url=f"{imaging.url}/v1", api_key="x", max_retries=0, http_client=tap.http)
    with sdk.responses.stream(model=name, input="draw a red square") as s:
        kinds = [ev.type for ev in s]
        resp = s.get_final_response()
    assert tap.headers["content-type"].startswith("text/event-stream")
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert "response.output_item.done" in kinds
    assert [(i.type, i.result) for i in resp.output] == [("image_generation_call", PNG_B64)]
    assert "x-vsr-warnings" not in tap.headers   # the client sent nothing the image model could not carry
    st = stats(mock)
    assert st["by_api"][route] == 1 and st["requests"] == 1
    if route == "responses":
        body = st["last_request"]["body"]
        assert body["tools"] == [{"type": "image_generation"}]
        assert body["tool_choice"] == {"type": "image_generation"}
