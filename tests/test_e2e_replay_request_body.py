"""The replay record keeps the request's body as received (README, router_replay), end to end.

A real router and the mock upstream as processes, the official ``openai`` SDK as the Chat client:
the fields routing does not read (logit_bias, seed) stay in the record's request_body, nothing the
client did not send is added, and request_body_bytes counts the bytes the client sent. A body past
``max_body_bytes`` is still cut (request_truncated), as before.
"""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from .procs import config, model, replay_record, router, write_config


@pytest.fixture(scope="module")
def recorded(mock, tmp_path_factory):
    doc = config([model("m", f"{mock.url}/v1")], [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {
        "enabled": True, "capture_request_body": True, "max_body_bytes": 4096}}]}
    with router(write_config(doc, str(tmp_path_factory.mktemp("replay-body")))) as proc:
        yield proc


def test_the_record_keeps_the_chat_body_as_the_sdk_sent_it(recorded):
    sent: list[bytes] = []
    http = openai.DefaultHttpxClient(event_hooks={"request": [lambda req: sent.append(req.read())]})
    client = openai.OpenAI(base_url=f"{recorded.url}/v1", api_key="k", max_retries=0, http_client=http)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": "Tell me about the sea"}],
        logit_bias={"1234": -100}, seed=7, top_p=0.5)
    assert raw.http_response.status_code == 200
    record = replay_record(recorded, raw.headers["x-vsr-replay-id"])
    body = json.loads(record["request_body"])
    assert body == json.loads(sent[-1]), record["request_body"]
    assert body["logit_bias"] == {"1234": -100} and body["seed"] == 7 and "stream" not in body
    assert record["request_body"].encode() == sent[-1]
    assert record["request_body_bytes"] == len(sent[-1]) and record["request_truncated"] is False


def test_a_body_past_the_limit_is_still_cut(recorded):
    text = "sea " * 3000
    r = httpx.post(f"{recorded.url}/v1/chat/completions", timeout=30,
                   json={"model": "vsr/auto", "seed": 7, "messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200
    record = replay_record(recorded, r.headers["x-vsr-replay-id"])
    assert record["request_truncated"] is True and len(record["request_body"].encode()) <= 4096
    assert json.loads(record["request_body"])["messages"][0]["content"].startswith("sea sea")
