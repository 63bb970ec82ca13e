"""A Responses answer served from the response cache is the receiver's to continue (review finding 6), end to end:
a real router with keys in its configuration, the mock upstream counting its calls, the openai SDK.

The cache's principal (scope team here) is broader than the owner of stored Responses (the key, without a
tenant): a teammate's request is served the first caller's answer. It gets a response id of its own, stored
under its own owner, so its ``previous_response_id`` continues the cached conversation; the first caller's id
stays the first caller's.
"""
from __future__ import annotations

import hashlib
import json
import uuid

import httpx
import openai
import pytest

from .procs import mock_upstream, model, replay_record, router, wait_for_value, write_config

ADMIN = "vsk-admin-" + "a" * 32
ALICE = "vsk-alice-" + "b" * 32     # team red, no tenant: owner key:alice
BOB = "vsk-bob-" + "c" * 32         # team red, no tenant: owner key:bob


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def up():
    with mock_upstream() as proc:
        yield proc


@pytest.fixture(scope="module")
def gw(up, tmp_path_factory):
    keys = [{"id": "ops", "sha256": sha(ADMIN), "admin": True},
            {"id": "alice", "sha256": sha(ALICE), "team": "red"},
            {"id": "bob", "sha256": sha(BOB), "team": "red"}]
    doc = {
        "version": "v0.5",
        "providers": {"models": [model("m", f"{up.url}/v1")]},
        "recipes": [{"name": "r", "decisions": [{
            "name": "d", "modelRefs": [{"model": "m"}],
            "plugins": [{"type": "response_cache", "configuration": {"ttl_seconds": 300, "scope": "team"}}]}]}],
        "global": {"router": {"auth": {"enabled": True, "keys": keys}},
                   "stores": {"responses": {"backend_type": "memory"}},
                   "plugins": [{"type": "router_replay", "configuration": {"enabled": True}}]},
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("cacheowner")))) as proc:
        yield proc


def client(gw, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=20)


def requests(up) -> int:
    return httpx.get(f"{up.url}/_mock/stats").json()["requests"]


def sent(up) -> str:
    return json.dumps(httpx.get(f"{up.url}/_mock/stats").json()["last_request"]["body"])


def create(gw, key: str, text: str, stream: bool, **extra):
    """(the answer's response-path header, the response ids every event carried, the final response)."""
    raw = client(gw, key).responses.with_raw_response.create(model="auto", input=text, stream=stream, **extra)
    if not stream:
        final = raw.parse()
        return raw.headers, {final.id}, final
    events = list(raw.parse())
    ids = {e.response.id for e in events if hasattr(e, "response")}
    return raw.headers, ids, next(e.response for e in events if e.type == "response.completed")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_cached_responses_answer_is_continued_by_its_receiver(gw, up, stream):
    secret = f"My locker code is {uuid.uuid4().hex[:8]}."
    headers, _, first = create(gw, ALICE, secret, stream)
    assert headers["x-vsr-response-path"] == "upstream"
    # The cache writer stores it off the request path: its record says when (asking until a hit would store
    # Bob's own answer on a miss).
    admin = {"authorization": f"Bearer {ADMIN}"}
    wait_for_value(lambda: (replay_record(gw, headers["x-vsr-replay-id"], admin).get("cache") or {}).get("stored"),
                   "Alice's answer in the cache")

    before = requests(up)
    headers, ids, hit = create(gw, BOB, secret, stream)
    assert headers["x-vsr-response-path"] == "cache" and requests(up) == before
    assert hit.output_text == first.output_text
    # An id of its own, the same in every event of the stream.
    assert ids == {hit.id} and hit.id != first.id and hit.id.startswith("resp_")

    # Bob continues the answer he was given: the cached conversation reaches the model.
    _, _, follow = create(gw, BOB, "What is my locker code?", stream, previous_response_id=hit.id)
    assert follow.status == "completed" and requests(up) == before + 1 and secret in sent(up)
    # Alice's id is still hers alone, and Bob's is his.
    create(gw, ALICE, "And again?", stream, previous_response_id=first.id)
    assert secret in sent(up)
    with pytest.raises(openai.BadRequestError) as info:
        create(gw, ALICE, "Whose?", stream, previous_response_id=hit.id)
    assert info.value.body["code"] == "previous_response_not_found"
