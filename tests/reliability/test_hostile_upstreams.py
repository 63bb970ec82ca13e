"""Upstream answers are not trusted (issue 13): each hostile answer of tests/hostile_upstream.py reaches the
client as described (502 in its protocol, a fallback, a cut stream, an error body without the router's key)
and the router keeps serving."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from ..procs import config, router, write_config

SECRET = "sk-router-own-backend-key-0123456789"
UNTRUSTED = ["invalid-json", "wrong-shape", "status999", "redirect", "huge"]
CHAT = {"messages": [{"role": "user", "content": "hello"}]}


def backend(hostile, mode: str, **extra) -> dict:
    return {"endpoint": f"{hostile.url}/{mode}/v1", "auth": {"api_key": SECRET}, **extra}


@pytest.fixture(scope="module")
def edge(hostile, tmp_path_factory):
    modes = [*UNTRUSTED, "ok", "echo-key", "long-error"]
    models = [{"name": f"m-{mode}", "backend_refs": [backend(hostile, mode)]} for mode in modes]
    models += [
        {"name": "m-fallback", "backend_refs": [backend(hostile, "status999"), backend(hostile, "redirect"),
                                                backend(hostile, "ok")]},
        {"name": "m-bad-choice", "backend_refs": [backend(hostile, "bad-choice")]},
        {"name": "m-bad-choice-then-ok", "backend_refs": [backend(hostile, "bad-choice"), backend(hostile, "ok")]},
        {"name": "m-huge-sse", "backend_refs": [backend(hostile, "huge-sse", max_response_bytes=1 << 20)]},
        {"name": "claude-echo-key", "api_format": "anthropic", "backend_refs": [backend(hostile, "echo-key")]},
    ]
    doc = config(models, [{"name": "only", "modelRefs": [{"model": "m-ok"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("hostile")))) as proc:
        yield proc


def chat(edge, model: str, **extra) -> httpx.Response:
    return httpx.post(f"{edge.url}/v1/chat/completions", json={"model": model, **CHAT, **extra}, timeout=60)


@pytest.mark.parametrize("mode", UNTRUSTED)
@pytest.mark.parametrize("stream", [False, True])
def test_an_untrusted_answer_becomes_a_502_in_the_clients_protocol(edge, mode, stream):
    r = chat(edge, f"m-{mode}", stream=stream)
    assert r.status_code == 502, r.text[:500]
    error = r.json()["error"]
    expected = "upstream_answer_too_large" if mode == "huge" else "upstream_invalid_answer"
    assert error["code"] == expected, error
    assert r.headers["x-vsr-response-path"] == "error"
    assert chat(edge, "m-ok").status_code == 200


def test_an_anthropic_client_gets_the_502_in_anthropics_shape(edge):
    client = anthropic.Anthropic(base_url=edge.url, api_key="client-key", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(model="m-status999", max_tokens=16, messages=CHAT["messages"])
    assert caught.value.status_code == 502
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    # The model and what its backend answered; the backend's own name stays in the log.
    assert "m-status999: HTTP 999 invalid_answer" in body["error"]["message"]
    assert "m-status999[0]" not in body["error"]["message"]


def test_untrusted_answers_fall_back_to_the_next_backend(edge):
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="client-key", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="m-fallback", messages=CHAT["messages"])
    assert raw.parse().choices[0].message.content == "fine"
    assert raw.headers["x-vsr-selected-model"] == "m-fallback"
    metrics = httpx.get(f"{edge.url}/metrics").text
    assert 'cause="invalid_answer"' in metrics


def test_a_stream_request_answered_whole_with_no_readable_answer_falls_back(edge):
    # Answered whole to a stream request, a body must read as an answer to be written as events: one that does
    # not is the backend's invalid answer, and the next backend is asked (which answers whole too).
    r = chat(edge, "m-bad-choice", stream=True)
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_invalid_answer", r.text
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="client-key", max_retries=0)
    chunks = list(client.chat.completions.create(model="m-bad-choice-then-ok", messages=CHAT["messages"],
                                                 stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "fine"


def test_a_stream_past_max_response_bytes_is_cut_with_the_protocols_error_event(edge):
    size = 0
    with httpx.stream("POST", f"{edge.url}/v1/chat/completions", timeout=60,
                      json={"model": "m-huge-sse", **CHAT, "stream": True}) as r:
        assert r.status_code == 200
        tail = b""
        for chunk in r.iter_bytes():
            size += len(chunk)
            tail = (tail + chunk)[-2000:]
    assert size <= (1 << 20) + 65536, size        # the limit, plus at most the chunk that crossed it
    assert b"failed mid-stream" in tail and b"[DONE]" not in tail
    assert chat(edge, "m-ok").status_code == 200


def test_an_upstream_401_echoing_the_routers_key_reaches_an_openai_client_without_it(edge):
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="client-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        client.chat.completions.create(model="m-echo-key", messages=CHAT["messages"])
    text = caught.value.response.text
    assert SECRET not in text
    assert "Incorrect API key provided: [redacted]." in text


def test_an_upstream_401_echoing_the_routers_key_reaches_an_anthropic_client_without_it(edge):
    client = anthropic.Anthropic(base_url=edge.url, api_key="client-key", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client.messages.create(model="claude-echo-key", max_tokens=16, messages=CHAT["messages"])
    text = caught.value.response.text
    assert SECRET not in text
    assert "[redacted]" in text


def test_a_long_upstream_error_body_is_replaced_by_a_short_one(edge):
    r = chat(edge, "m-long-error")
    assert r.status_code == 400
    assert len(r.content) < 1024 and SECRET.encode() not in r.content
    assert "not relayed" in r.json()["error"]["message"]
