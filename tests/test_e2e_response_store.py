"""previous_response_id across routers: the Responses conversations in a shared Redis store."""
from __future__ import annotations

import uuid

import httpx
import openai
import pytest
import redis

from .procs import router, write_config


@pytest.fixture(scope="module")
def prefix():
    name = f"vsr-test:{uuid.uuid4().hex}:responses:"
    yield name
    r = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    for key in r.scan_iter(f"{name}*"):
        r.delete(key)


def _shared(mock, prefix) -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "api_format": "openai", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"stores": {"responses": {"backend_type": "redis", "prefix": prefix},
                              "event_stream": {"backend": "none"}}},
    }


@pytest.fixture(scope="module")
def pair(mock, prefix, tmp_path_factory):
    """Two routers on one Redis responses store; each test's responses are its own (new ids)."""
    path = write_config(_shared(mock, prefix), str(tmp_path_factory.mktemp("shared")))
    with router(path) as a, router(path) as b:
        yield a, b


def test_a_follow_up_on_another_router_finds_the_conversation(mock, pair):
    # The follow-up goes the moment the answer has come: the record is stored before the answer is sent (it
    # was once written after, and router b answered previous_response_not_found in a make test loop).
    a, b = pair
    first = openai.OpenAI(base_url=f"{a.url}/v1", api_key="x", max_retries=0).responses.create(
        model="auto", input="Remember the word heliotrope.")
    follow = openai.OpenAI(base_url=f"{b.url}/v1", api_key="x", max_retries=0).responses.create(
        model="auto", input="Which word?", previous_response_id=first.id)
    assert follow.status == "completed" and follow.output_text
    seen = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]["messages"]
            if m["role"] == "user"]
    assert seen == ["Remember the word heliotrope.", "Which word?"], "router b sent the whole conversation"
    with pytest.raises(openai.BadRequestError) as info:
        openai.OpenAI(base_url=f"{b.url}/v1", api_key="x", max_retries=0).responses.create(
            model="auto", input="x", previous_response_id="resp_unknown")
    assert info.value.body["code"] == "previous_response_not_found"


def test_a_streamed_answer_s_follow_up_on_another_router_finds_it_at_once(mock, pair):
    a, b = pair
    for _ in range(5):
        with openai.OpenAI(base_url=f"{a.url}/v1", api_key="x", max_retries=0).responses.create(
                model="auto", input="Remember the word heliotrope.", stream=True) as events:
            done = [e for e in events if e.type == "response.completed"]
        assert done, "the stream completed"
        follow = openai.OpenAI(base_url=f"{b.url}/v1", api_key="x", max_retries=0).responses.create(
            model="auto", input="Which word?", previous_response_id=done[0].response.id)
        assert follow.status == "completed"


def test_a_response_deleted_on_one_router_is_gone_on_another(mock, pair):
    a, b = pair
    first = openai.OpenAI(base_url=f"{a.url}/v1", api_key="x", max_retries=0).responses.create(
        model="auto", input="Remember the word heliotrope.")
    on_b = openai.OpenAI(base_url=f"{b.url}/v1", api_key="x", max_retries=0)
    assert on_b.responses.retrieve(first.id).output_text == first.output_text
    openai.OpenAI(base_url=f"{a.url}/v1", api_key="x", max_retries=0).responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        on_b.responses.retrieve(first.id)
    with pytest.raises(openai.BadRequestError) as info:
        on_b.responses.create(model="auto", input="Which word?", previous_response_id=first.id)
    assert info.value.body["code"] == "previous_response_not_found"
