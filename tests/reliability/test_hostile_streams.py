"""Broken event streams from a backend (issue 13): before the first well-formed event the router can still
fall back, so a stream that is not SSE, holds no event or starts with a bad one is a 502 in the client's
protocol (or the next backend's answer) with no byte of it sent; after that, a bad event or a stream cut
mid-event ends the client's stream with its protocol's error event, and nothing of the bad event is relayed."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from ..procs import config, router, write_config

BROKEN_FROM_THE_START = ["sse-html", "sse-not-json", "sse-empty", "sse-no-field"]
BROKEN_LATER = ["sse-broken-later", "sse-truncated"]
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def edge(hostile, tmp_path_factory):
    def ref(mode: str) -> dict:
        return {"endpoint": f"{hostile.url}/{mode}/v1"}
    modes = ["sse-ok", *BROKEN_FROM_THE_START, *BROKEN_LATER]
    models = [{"name": f"m-{mode}", "backend_refs": [ref(mode)]} for mode in modes]
    models += [{"name": f"claude-{mode}", "api_format": "anthropic", "backend_refs": [ref(mode)]} for mode in modes]
    models.append({"name": "m-fallback", "backend_refs": [ref(mode) for mode in [*BROKEN_FROM_THE_START, "sse-ok"]]})
    doc = config(models, [{"name": "only", "modelRefs": [{"model": "m-sse-ok"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("streams")))) as proc:
        yield proc


def stream(edge, model: str) -> tuple[httpx.Response, bytes]:
    with httpx.stream("POST", f"{edge.url}/v1/chat/completions", timeout=60,
                      json={"model": model, "messages": MESSAGES, "stream": True}) as r:
        return r, r.read()


def test_a_well_formed_stream_passes_unchanged(edge):
    r, body = stream(edge, "m-sse-ok")
    assert r.status_code == 200
    assert body.count(b'"delta":{"content":"x"}') == 3 and body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("mode", BROKEN_FROM_THE_START)
def test_a_stream_broken_from_the_start_is_a_502_before_any_byte(edge, mode):
    r, body = stream(edge, f"m-{mode}")
    assert r.status_code == 502, body[:300]
    assert r.headers["content-type"].startswith("application/json")   # an error answer, not a stream
    assert r.json()["error"]["code"] == "upstream_invalid_answer"
    assert r.headers["x-vsr-response-path"] == "error"
    assert b"Bad Gateway" not in body and b"not json" not in body


@pytest.mark.parametrize("mode", BROKEN_FROM_THE_START)
def test_a_stream_broken_from_the_start_reaches_an_anthropic_client_as_its_502(edge, mode):
    client = anthropic.Anthropic(base_url=edge.url, api_key="client-key", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(model=f"claude-{mode}", max_tokens=16, messages=MESSAGES) as s:
            s.until_done()
    assert caught.value.status_code == 502
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "api_error"


def test_broken_streams_fall_back_to_the_next_backend(edge):
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="client-key", max_retries=0)
    chunks = list(client.chat.completions.create(model="m-fallback", messages=MESSAGES, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "xxx"
    metrics = httpx.get(f"{edge.url}/metrics").text
    assert 'cause="invalid_answer"' in metrics


@pytest.mark.parametrize("mode", BROKEN_LATER)
def test_a_stream_broken_later_ends_with_the_chat_error_event(edge, mode):
    r, body = stream(edge, f"m-{mode}")
    assert r.status_code == 200
    events = [e for e in body.split(b"\n\n") if e]
    assert len(events) == 3, body
    assert all(e.startswith(b'data: {"id":"c"') for e in events[:2])     # the good events, unchanged
    assert b"failed mid-stream" in events[2] and b"upstream_invalid_answer" in events[2]
    assert b"not json" not in body and b"[DONE]" not in body


@pytest.mark.parametrize("mode", BROKEN_LATER)
def test_a_stream_broken_later_ends_with_anthropics_error_event(edge, mode):
    client = anthropic.Anthropic(base_url=edge.url, api_key="client-key", max_retries=0)
    kinds = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(model=f"claude-{mode}", max_tokens=16, messages=MESSAGES) as s:
            for event in s:
                kinds.append(event.type)
    assert kinds[0] == "message_start" and "message_stop" not in kinds
    assert "failed mid-stream" in str(caught.value)


@pytest.mark.parametrize("mode", BROKEN_LATER)
def test_a_translated_stream_broken_later_ends_with_the_clients_error_event(edge, mode):
    """A Messages backend's broken stream, translated for a Chat client: OpenAI's SDK raises on the event."""
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="client-key", max_retries=0)
    got = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in client.chat.completions.create(model=f"claude-{mode}", messages=MESSAGES, stream=True):
            got.append(chunk)
    assert "failed mid-stream" in str(caught.value)
    assert r_ok(edge)


def r_ok(edge) -> bool:
    r, body = stream(edge, "m-sse-ok")
    return r.status_code == 200 and body.endswith(b"data: [DONE]\n\n")
