"""response_cache and the replay record for Messages and Responses clients, end to end.

A real router and the mock upstream as processes, the official ``anthropic`` and ``openai`` SDKs as
clients. A Messages or Responses answer, whole or streamed, from a backend of the client's own format
or from a Chat backend (translated), is complete: its replay record carries the finish reason in the
record's words and the usage in its fields, the cache stores it, and the same request is then served
from the cache in the client's own shape. A body that is valid in two APIs is cached per client API.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import anthropic
import httpx
import openai
import pytest

from .procs import config, model, replay_record, router, wait_for_value, write_config

FORMATS = ("openai", "anthropic", "responses")
NATIVE = {"messages": "anthropic", "responses": "responses"}


@pytest.fixture(scope="module")
def cached(mock, tmp_path_factory):
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in FORMATS]
    decisions = [{"name": f"to-{fmt}", "priority": 10,
                  "plugins": [{"type": "response_cache", "configuration": {"ttl_seconds": 300}}],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": fmt}]},
                  "modelRefs": [{"model": f"m-{fmt}"}]} for fmt in FORMATS]
    signals = {"keywords": [{"name": fmt, "operator": "OR", "keywords": [f"via {fmt}"]} for fmt in FORMATS]}
    doc = config(models, decisions, signals=signals)
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {
        "enabled": True, "capture_request_body": True, "capture_response_body": True}}]}
    with router(write_config(doc, str(tmp_path_factory.mktemp("cache-apis")))) as proc:
        yield proc


@dataclass
class Seen:
    path: str
    replay_id: str
    text: str
    stop: str | None           # in the client's own vocabulary
    usage: tuple[int, int]     # (input, output) tokens


def ask(proc, api: str, text: str, stream: bool) -> Seen:
    """One request through the client API's official SDK; what that client saw."""
    if api == "messages":
        client = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
        raw = client.messages.with_raw_response.create(
            model="vsr/auto", max_tokens=64, messages=[{"role": "user", "content": text}], stream=stream)
        if stream:
            events = list(raw.parse())
            out = "".join(e.delta.text for e in events if e.type == "content_block_delta")
            delta = next(e for e in events if e.type == "message_delta")
            start = next(e for e in events if e.type == "message_start")
            # A Chat backend reports usage last: the input count then comes with message_delta.
            stop, usage = delta.delta.stop_reason, (delta.usage.input_tokens or start.message.usage.input_tokens,
                                                    delta.usage.output_tokens)
        else:
            msg = raw.parse()
            out, stop, usage = msg.content[0].text, msg.stop_reason, (msg.usage.input_tokens, msg.usage.output_tokens)
    elif api == "chat":
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
        extra = {"stream_options": {"include_usage": True}} if stream else {}
        raw = client.chat.completions.with_raw_response.create(
            model="vsr/auto", messages=[{"role": "user", "content": text}], stream=stream, **extra)
        if stream:
            chunks = list(raw.parse())
            out = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            stop = next(c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason)
            last = chunks[-1].usage
            usage = (last.prompt_tokens, last.completion_tokens)
        else:
            done = raw.parse()
            out, stop = done.choices[0].message.content, done.choices[0].finish_reason
            usage = (done.usage.prompt_tokens, done.usage.completion_tokens)
    else:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
        raw = client.responses.with_raw_response.create(model="vsr/auto", input=text, stream=stream)
        if stream:
            final = next(e.response for e in raw.parse() if e.type == "response.completed")
        else:
            final = raw.parse()
        out, stop = final.output_text, final.status
        usage = (final.usage.input_tokens, final.usage.output_tokens)
    assert raw.http_response.status_code == 200
    return Seen(raw.headers["x-vsr-response-path"], raw.headers.get("x-vsr-replay-id", ""), out, stop, usage)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("backend", ["native", "openai"])
@pytest.mark.parametrize("api", ["messages", "responses"])
def test_an_answer_is_recorded_with_its_facts_and_served_from_the_cache(cached, api, backend, stream):
    fmt = NATIVE[api] if backend == "native" else "openai"
    text = f"Tell me about the sea {uuid.uuid4().hex} via {fmt}"
    first = ask(cached, api, text, stream)
    assert first.path == "upstream" and first.text and first.usage[0] > 0 and first.usage[1] > 0

    record = replay_record(cached, first.replay_id, answered=True)
    assert record["decision"] == f"to-{fmt}" and record["complete"] is True
    assert record["finish_reason"] == "stop", record
    assert record["usage"] == {"prompt_tokens": first.usage[0], "completion_tokens": first.usage[1],
                               "total_tokens": sum(first.usage)}, record

    # The cache writer stores the answer off the request path: ask again until it serves it (bounded).
    again = wait_for_value(lambda: (lambda s: s if s.path == "cache" else None)(ask(cached, api, text, stream)),
                           f"a cache hit for the {api} request")
    assert (again.text, again.stop, again.usage) == (first.text, first.stop, first.usage)
    first_record = replay_record(cached, first.replay_id)
    assert first_record["cache"]["stored"] is True, first_record


@pytest.mark.parametrize("first_stream", [False, True], ids=["whole-then-streamed", "streamed-then-whole"])
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_one_entry_serves_the_request_whole_and_streamed(cached, api, first_stream):
    """Trial 28: the cache split its entries by ``stream``; LiteLLM serves one cached answer to both forms. The
    other form is told from the stored one in the client's protocol: what the SDK reads is the same answer."""
    text = f"Tell me about the tides {uuid.uuid4().hex} via openai"
    first = ask(cached, api, text, first_stream)
    assert first.path == "upstream"
    wait_for_value(lambda: replay_record(cached, first.replay_id).get("cache", {}).get("stored"), "stored")
    other = ask(cached, api, text, not first_stream)
    assert other.path == "cache"
    assert (other.text, other.stop, other.usage) == (first.text, first.stop, first.usage)
    record = replay_record(cached, other.replay_id, answered=True)
    assert record["response_path"] == "cache" and record["streamed"] is (not first_stream), record


def test_a_chat_stream_served_again_has_a_usage_chunk_exactly_when_its_client_asks(cached):
    """A stored Chat stream ends with a usage chunk (``choices: []``) if its client asked for one; a client that
    did not may read ``choices[0]`` of every chunk, and one that did reads its usage there."""
    text = f"Count the waves {uuid.uuid4().hex} via openai"

    def streamed(usage: bool) -> httpx.Response:
        body = {"model": "vsr/auto", "stream": True, "messages": [{"role": "user", "content": text}],
                **({"stream_options": {"include_usage": True}} if usage else {})}
        r = httpx.post(f"{cached.url}/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return r

    first = streamed(True)
    assert first.headers["x-vsr-response-path"] == "upstream" and b'"choices":[]' in first.content
    wait_for_value(lambda: streamed(True).headers["x-vsr-response-path"] == "cache", "the stream cached")
    plain = streamed(False)
    assert plain.headers["x-vsr-response-path"] == "cache"
    chunks = [json.loads(line[6:]) for line in plain.text.splitlines() if line.startswith("data: {")]
    assert chunks and all(c["choices"] for c in chunks), "no usage chunk the client did not ask for"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


def test_a_messages_answer_is_never_served_to_a_chat_client_of_the_same_body(cached):
    body = {"model": "vsr/auto", "max_tokens": 64,
            "messages": [{"role": "user", "content": f"Both APIs read me {uuid.uuid4().hex} via openai"}]}

    def post(path: str) -> httpx.Response:
        r = httpx.post(f"{cached.url}{path}", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return r

    wait_for_value(lambda: post("/v1/messages").headers["x-vsr-response-path"] == "cache",
                   "the Messages answer cached")
    chat = post("/v1/chat/completions")
    assert chat.headers["x-vsr-response-path"] == "upstream"
    assert chat.json()["choices"][0]["message"]["content"]
    hit = wait_for_value(lambda: (lambda r: r if r.headers["x-vsr-response-path"] == "cache" else None)(
        post("/v1/chat/completions")), "the Chat answer cached")
    assert "choices" in hit.json() and hit.json().get("type") != "message"


def metric(proc, line_start: str) -> float:
    text = httpx.get(f"{proc.url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start))


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_cache_hit_is_not_written_again_nor_counted_as_a_skip(cached, api):
    text = f"Serve me twice {uuid.uuid4().hex} via openai"
    skipped = metric(cached, "llm_cache_write_skipped_total")
    ask(cached, api, text, False)
    hit = wait_for_value(lambda: (lambda s: s if s.path == "cache" else None)(ask(cached, api, text, False)),
                         f"a cache hit for the {api} request")
    # The cache writer reads answers in order: once a later answer is stored, it has seen the hit's.
    after = ask(cached, api, f"Something else {uuid.uuid4().hex} via openai", False)
    wait_for_value(lambda: (replay_record(cached, after.replay_id).get("cache") or {}).get("stored"),
                   "the later answer stored")
    record = replay_record(cached, hit.replay_id)
    assert record["response_path"] == "cache" and record["cache"]["hit"] is True, record
    assert record["cache"].get("reason") is None and record["cache"].get("stored") is None, record
    assert metric(cached, "llm_cache_write_skipped_total") == skipped


def test_an_unguarded_stream_cut_mid_way_is_counted_as_an_incomplete_skip(cached, mock):
    before = metric(cached, 'llm_cache_write_skipped_total{reason="incomplete"}')
    httpx.post(f"{mock.url}/_mock/config", json={"content": "A long answer cut in the middle of its words",
                                                 "chunks": 6, "fail_rate": 1.0, "fail_mode": "midstream"})
    try:
        body = {"model": "vsr/auto", "stream": True,
                "messages": [{"role": "user", "content": f"Cut me {uuid.uuid4().hex} via openai"}]}
        with httpx.stream("POST", f"{cached.url}/v1/chat/completions", json=body, timeout=30) as r:
            r.read()
        assert r.status_code == 200 and b"mid-stream" in r.content
    finally:
        httpx.post(f"{mock.url}/_mock/config", json={"fail_rate": 0.0})
    wait_for_value(lambda: metric(cached, 'llm_cache_write_skipped_total{reason="incomplete"}') > before or None,
                   "the cut stream counted as an incomplete skip")
