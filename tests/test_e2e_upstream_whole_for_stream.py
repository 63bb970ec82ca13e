"""A backend that answers a stream request whole (200 application/json, as a server that ignores ``stream``
does): the client asked for events, and gets its protocol's events carrying the whole answer, never a JSON body
its SDK reads as an empty stream. The official SDKs stream against the bench mock with ``--whole-for-stream``,
for every client API and backend api_format."""
from __future__ import annotations

import anthropic
import httpx
import httpx2
import openai
import pytest

from .procs import config, mock_upstream, model, router, write_config

CANNED = "Hello! This is a canned answer from the mock upstream."
FORMATS = ("openai", "anthropic", "responses")
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def whole_mock():
    with mock_upstream("--whole-for-stream") as proc:
        yield proc


@pytest.fixture(scope="module")
def gw(whole_mock, tmp_path_factory):
    models = [{**model(f"m-{fmt}", f"{whole_mock.url}/v1"), "api_format": fmt} for fmt in FORMATS]
    doc = config(models, [{"name": "only", "modelRefs": [{"model": "m-openai"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("whole-for-stream")))) as proc:
        yield proc


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_chat_stream_answered_whole_reaches_the_openai_sdk_as_chunks(gw, fmt):
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0, timeout=20)
    with client.chat.completions.with_streaming_response.create(model=f"m-{fmt}", messages=HI, stream=True) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        chunks = list(r.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == CANNED
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_messages_stream_answered_whole_reaches_the_anthropic_sdk_as_events(gw, fmt):
    client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0, http_client=httpx2.Client(timeout=20))
    with client.messages.stream(model=f"m-{fmt}", max_tokens=32, messages=HI) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == CANNED
    assert final.stop_reason == "end_turn" and final.content[0].text == CANNED


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_responses_stream_answered_whole_reaches_the_openai_sdk_as_events(gw, fmt):
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0, timeout=20)
    events = list(client.responses.create(model=f"m-{fmt}", input="hi", stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == CANNED
    done = [e for e in events if e.type == "response.completed"]
    assert len(done) == 1 and done[0].response.output_text == CANNED
    # The streamed response is the one remembered: a follow-up naming its id continues it.
    follow = client.responses.create(model=f"m-{fmt}", input="and then?", previous_response_id=done[0].response.id)
    assert follow.output_text == CANNED


def test_the_stream_ends_as_its_protocol_ends_one(gw):
    r = httpx.post(f"{gw.url}/v1/chat/completions", json={"model": "m-anthropic", "messages": HI, "stream": True},
                   timeout=20)
    assert r.status_code == 200 and r.headers["x-vsr-response-path"] == "upstream"
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.text.rstrip().endswith("data: [DONE]")
