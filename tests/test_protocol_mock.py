"""The mock upstream's Messages, Responses and Images routes as a real process, read by the
official SDKs; then every client x backend pair of the adapters driven through it."""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from vsr_fast.protocol.adapters import make_adapters
from vsr_fast.protocol.responses import MemoryResponseStore
from vsr_fast.protocol.translate import SSEParser

from .procs import mock_upstream

CONTENT = "Hello! This is a canned answer from the mock upstream."
ARGS = {"city": "Paris"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather by city", "input_schema": SCHEMA}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": False}]
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]


@pytest.fixture(scope="module")
def mock():
    with mock_upstream("--chunks", "6") as proc:
        yield proc


@pytest.fixture
def fresh(mock):
    httpx.post(f"{mock.url}/_mock/reset", json={})
    return mock


def claude(mock) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=mock.url, api_key="x", max_retries=0, timeout=10)


def gpt(mock) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{mock.url}/v1", api_key="x", max_retries=0, timeout=10)


def stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()


# --- the SDKs straight at the mock --------------------------------------------------------------


def test_messages_whole_and_streamed(fresh):
    client = claude(fresh)
    msg = client.messages.create(model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert (msg.content[0].text, msg.stop_reason, msg.model) == (CONTENT, "end_turn", "claude-x")
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens == len(CONTENT) // 4
    raw = list(client.messages.create(model="claude-x", max_tokens=64, stream=True,
                                      messages=[{"role": "user", "content": "hi"}]))
    assert [e.type for e in raw][:2] == ["message_start", "content_block_start"]
    assert [e.type for e in raw][-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert sum(e.type == "content_block_delta" for e in raw) == 4   # --chunks 6: 4 text pieces
    with client.messages.stream(model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as s:
        final = s.get_final_message()
    assert final.content[0].text == CONTENT and final.stop_reason == "end_turn"


def test_messages_tool_call_and_tool_result(fresh):
    client = claude(fresh)
    ask = [{"role": "user", "content": "Weather in Paris? Please use the tool."}]
    msg = client.messages.create(model="c", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=ask)
    assert msg.stop_reason == "tool_use" and msg.content[0].input == ARGS and msg.content[0].name == "get_weather"
    with client.messages.stream(model="c", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=ask) as s:
        deltas = [e.delta.partial_json for e in s if e.type == "content_block_delta"]
        final = s.get_final_message()
    assert len(deltas) >= 2 and final.content[0].input == ARGS
    follow = ask + [{"role": "assistant", "content": [{"type": "tool_use", "id": msg.content[0].id,
                                                       "name": "get_weather", "input": ARGS}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": msg.content[0].id,
                                                  "content": "sunny, 21C"}]}]
    answer = client.messages.create(model="c", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=follow)
    assert answer.content[0].text == "The tool said: sunny, 21C"
    # Without tools, "use the tool" is just text.
    plain = client.messages.create(model="c", max_tokens=64, messages=ask)
    assert plain.content[0].text == CONTENT


def test_responses_whole_streamed_tools_and_images(fresh):
    client = gpt(fresh)
    r = client.responses.create(model="gpt-x", input="hi")
    assert (r.output_text, r.status, r.usage.total_tokens) == (CONTENT, "completed",
                                                               r.usage.input_tokens + r.usage.output_tokens)
    with client.responses.stream(model="gpt-x", input="hi") as s:
        kinds = [e.type for e in s]
        final = s.get_final_response()
    assert final.output_text == CONTENT
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") == 4
    with client.responses.stream(model="gpt-x", input="Please use the tool", tools=RESPONSES_TOOLS) as s:
        arg_deltas = [e.delta for e in s if e.type == "response.function_call_arguments.delta"]
        call = s.get_final_response().output[0]
    assert call.type == "function_call" and json.loads(call.arguments) == ARGS and len(arg_deltas) == 2
    follow = [{"role": "user", "content": "Please use the tool"},
              {"type": "function_call", "call_id": call.call_id, "name": "get_weather", "arguments": call.arguments},
              {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    assert client.responses.create(model="gpt-x", input=follow, tools=RESPONSES_TOOLS).output_text == \
        "The tool said: sunny"
    image = client.responses.create(model="gpt-x", input="draw a cat", tools=[{"type": "image_generation"}])
    assert image.output[0].type == "image_generation_call" and image.output[0].result.startswith("iVBOR")


def test_images_and_chat_tool_calls(fresh):
    client = gpt(fresh)
    b64 = client.images.generate(model="gpt-image-1", prompt="a fox", n=2)
    assert len(b64.data) == 2 and b64.data[0].b64_json.startswith("iVBOR")
    url = client.images.generate(model="dall-e-3", prompt="a fox", response_format="url")
    assert url.data[0].url.startswith("https://")
    ask = [{"role": "user", "content": "use the tool please"}]
    whole = client.chat.completions.create(model="m", messages=ask, tools=CHAT_TOOLS)
    call = whole.choices[0].message.tool_calls[0]
    assert whole.choices[0].finish_reason == "tool_calls" and json.loads(call.function.arguments) == ARGS
    with client.chat.completions.stream(model="m", messages=ask, tools=CHAT_TOOLS) as s:
        final = s.get_final_completion()
    assert json.loads(final.choices[0].message.tool_calls[0].function.arguments) == ARGS
    follow = ask + [{"role": "assistant", "tool_calls": [call.model_dump()]},
                    {"role": "tool", "tool_call_id": call.id, "content": "cloudy"}]
    assert client.chat.completions.create(model="m", messages=follow).choices[0].message.content == \
        "The tool said: cloudy"
    s = stats(fresh)
    assert s["by_api"] == {"chat": 3, "messages": 0, "responses": 0, "images": 2}
    assert s["requests"] == s["completed"] == 5 and s["usage"]["output_tokens"] > 0


def test_injected_failures_keep_each_routes_error_shape(fresh):
    httpx.post(f"{fresh.url}/_mock/config", json={"fail_rate": 1, "fail_status": 529})
    try:
        with pytest.raises(anthropic.APIStatusError) as caught:
            claude(fresh).messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert caught.value.status_code == 529 and caught.value.body["error"]["type"] == "overloaded_error"
        with pytest.raises(openai.APIStatusError) as caught:
            gpt(fresh).responses.create(model="g", input="x")
        assert caught.value.status_code == 529 and "injected" in caught.value.body["message"]
    finally:
        httpx.post(f"{fresh.url}/_mock/config", json={"fail_rate": 0, "fail_status": 500})
    assert stats(fresh)["failures_injected"] == 2


# --- every adapter pair through the mock ---------------------------------------------------------

ADAPTERS = make_adapters(MemoryResponseStore())
CLIENTS = ("chat", "messages", "responses")
BACKENDS = ("openai", "anthropic", "responses")


def ask(api: str, stream: bool) -> dict:
    if api == "chat":
        doc = {"model": "vsr/auto", "messages": [{"role": "user", "content": "Weather? use the tool"}],
               "tools": CHAT_TOOLS}
        if stream:
            doc["stream_options"] = {"include_usage": True}
    elif api == "messages":
        doc = {"model": "vsr/auto", "max_tokens": 256, "tools": ANTHROPIC_TOOLS,
               "messages": [{"role": "user", "content": "Weather? use the tool"}]}
    else:
        doc = {"model": "vsr/auto", "input": "Weather? use the tool", "tools": RESPONSES_TOOLS}
    return {**doc, "stream": stream}


def follow_up(api: str, doc: dict, call_id: str) -> dict:
    """The same conversation with the tool's result appended, in the client's protocol."""
    if api == "chat":
        turn = [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(ARGS)}}]},
                {"role": "tool", "tool_call_id": call_id, "content": "sunny"}]
        return {**doc, "messages": doc["messages"] + turn}
    if api == "messages":
        turn = [{"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "get_weather", "input": ARGS}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "sunny"}]}]
        return {**doc, "messages": doc["messages"] + turn}
    items = [{"role": "user", "content": doc["input"]},
             {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": json.dumps(ARGS)},
             {"type": "function_call_output", "call_id": call_id, "output": "sunny"}]
    return {**doc, "input": items}


def exchange(mock, api: str, backend: str, doc: dict) -> dict:
    """One request through the adapter, the mock as the backend; the answer as the client sees it."""
    adapter = ADAPTERS[api]
    req = adapter.decode(json.dumps(doc).encode())
    out = adapter.upstream(req, backend, f"mock-{backend}")
    with httpx.Client(base_url=f"{mock.url}/v1", timeout=10) as http:
        response = http.post(out.path, content=out.body, headers=dict(out.headers))
    assert response.status_code == 200, response.text
    if not out.stream:
        reply = adapter.whole(req, backend, response.status_code, response.content)
        return json.loads(reply.body)
    assert response.headers["content-type"] == "text/event-stream"
    tr = adapter.stream_translator(req, backend)
    data = response.content
    client_bytes = b"".join(tr.feed(data[i:i + 37]) for i in range(0, len(data), 37)) + tr.close()
    return accumulate(api, client_bytes)


def accumulate(api: str, data: bytes) -> dict:
    """The client's stream folded into the shape of its whole answer (enough for these checks)."""
    parser = SSEParser()
    events = [(n, json.loads(d)) for n, d in parser.feed(data) + parser.close() if d != b"[DONE]"]
    if api == "responses":
        return next(d["response"] for n, d in events if n == "response.completed")
    if api == "messages":
        content: list[dict] = []
        stop = None
        for name, d in events:
            if name == "content_block_start":
                content.append(dict(d["content_block"], _json=""))
            elif name == "content_block_delta":
                block = content[d["index"]]
                if d["delta"]["type"] == "text_delta":
                    block["text"] += d["delta"]["text"]
                else:
                    block["_json"] += d["delta"]["partial_json"]
            elif name == "message_delta":
                stop = d["delta"]["stop_reason"]
        for block in content:
            raw = block.pop("_json")
            if block["type"] == "tool_use" and raw:
                block["input"] = json.loads(raw)
        return {"content": content, "stop_reason": stop}
    text, calls, finish = "", {}, None
    for _, d in events:
        for choice in d["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or ():
                entry = calls.setdefault(tc["index"], {"id": tc.get("id"), "function": {"name": "", "arguments": ""}})
                entry["function"]["name"] += tc.get("function", {}).get("name") or ""
                entry["function"]["arguments"] += tc.get("function", {}).get("arguments") or ""
            finish = choice["finish_reason"] or finish
    message = {"content": text, "tool_calls": list(calls.values()) or None}
    return {"choices": [{"message": message, "finish_reason": finish}]}


def tool_call_of(api: str, answer: dict) -> tuple[str, dict]:
    if api == "chat":
        assert answer["choices"][0]["finish_reason"] == "tool_calls"
        call = answer["choices"][0]["message"]["tool_calls"][0]
        return call["id"], json.loads(call["function"]["arguments"])
    if api == "messages":
        assert answer["stop_reason"] == "tool_use"
        block = answer["content"][-1]
        return block["id"], block["input"]
    call = next(item for item in answer["output"] if item["type"] == "function_call")
    return call["call_id"], json.loads(call["arguments"])


def text_of(api: str, answer: dict) -> str:
    if api == "chat":
        return answer["choices"][0]["message"]["content"]
    if api == "messages":
        return "".join(b["text"] for b in answer["content"] if b["type"] == "text")
    return "".join(p["text"] for item in answer["output"] if item["type"] == "message" for p in item["content"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("api", CLIENTS)
def test_a_tool_round_trip_through_every_pair(mock, api, backend, stream):
    doc = ask(api, stream)
    call_id, args = tool_call_of(api, exchange(mock, api, backend, doc))
    assert args == ARGS and call_id
    answer = exchange(mock, api, backend, follow_up(api, doc, call_id))
    assert text_of(api, answer) == "The tool said: sunny"
    last = stats(mock)["last_request"]
    assert last["body"]["model"] == f"mock-{backend}"
    if backend == "anthropic":
        assert last["headers"]["anthropic-version"] == "2023-06-01"


def test_images_client_through_a_responses_backend_and_responses_through_images(mock):
    images = ADAPTERS["images"]
    req = images.decode(b'{"model":"vsr/auto","prompt":"a fox"}')
    out = images.upstream(req, "responses", "mock-omni")
    with httpx.Client(base_url=f"{mock.url}/v1", timeout=10) as http:
        answer = http.post(out.path, content=out.body)
        reply = images.whole(req, "responses", answer.status_code, answer.content)
        assert openai.types.ImagesResponse.model_validate_json(reply.body).data[0].b64_json.startswith("iVBOR")
        responses = ADAPTERS["responses"]
        req = responses.decode(b'{"model":"vsr/auto","input":"draw a fox","stream":true}')
        out = responses.upstream(req, "images", "mock-painter")
        answer = http.post(out.path, content=out.body)
    tr = responses.stream_translator(req, "images")
    final = accumulate("responses", tr.feed(answer.content) + tr.close())
    assert final["output"][0]["type"] == "image_generation_call" and final["output"][0]["result"].startswith("iVBOR")
