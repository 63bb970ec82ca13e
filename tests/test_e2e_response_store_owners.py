"""End to end, real router subprocesses and the openai SDK: one owner's stored Responses never cost another's.

The memory store's bounds are fair: an owner's traffic evicts its own oldest responses (``max_entries_per_owner``),
and the global bound takes from the largest owner first, so a tenant flooding ``POST /v1/responses`` cannot make
another tenant's stored response unknown. A ``responses`` backend's own ids are not the router's: every answer is
stored and sent under an id the router assigned, so a backend that repeats an id cannot make one owner's answer
replace another's, in memory or in Redis, whole or streamed.
"""
from __future__ import annotations

import hashlib

import httpx
import openai
import pytest

from .procs import mock_upstream, router, write_config
from .test_e2e_response_store import prefix  # noqa: F401  (a key prefix of its own, emptied after)

A, B = "sk-owner-a", "sk-owner-b"


def keyed_doc(up, store: dict, api_format: str = "openai") -> dict:
    keys = [{"id": "a", "sha256": hashlib.sha256(A.encode()).hexdigest(), "tenant": "tenA"},
            {"id": "b", "sha256": hashlib.sha256(B.encode()).hexdigest(), "tenant": "tenB"}]
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "api_format": api_format,
                                  "backend_refs": [{"endpoint": f"{up.url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"router": {"auth": {"enabled": True, "keys": keys}},
                   "stores": {"responses": store, "event_stream": {"backend": "none"}}},
    }


def client(proc, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key=key, max_retries=0, timeout=20)


def stored(proc, key: str, response_id: str) -> bool:
    """Whether ``GET /v1/responses/{id}`` finds it for this caller (a 404 otherwise)."""
    try:
        client(proc, key).responses.retrieve(response_id)
    except openai.NotFoundError:
        return False
    return True


def continues(proc, key: str, response_id: str) -> bool:
    """Whether a follow-up naming it is served (a 400 previous_response_not_found otherwise)."""
    try:
        client(proc, key).responses.create(model="auto", input="And then?", previous_response_id=response_id)
    except openai.BadRequestError as exc:
        assert exc.body["code"] == "previous_response_not_found"
        return False
    return True


@pytest.fixture(scope="module")
def up():
    with mock_upstream() as proc:
        yield proc


def test_one_tenants_flood_does_not_evict_anothers_stored_response(up, tmp_path):
    with router(write_config(keyed_doc(up, {"backend_type": "memory", "max_entries": 6}), str(tmp_path))) as proc:
        a = client(proc, A).responses.create(model="auto", input="Tenant A's thread.")
        b_ids = [client(proc, B).responses.create(model="auto", input=f"B's request {i}").id for i in range(10)]
        # Ten of B's against a bound of six: the evicted ones are B's own, its oldest first.
        assert stored(proc, A, a.id) and continues(proc, A, a.id)
        assert not stored(proc, B, b_ids[0]) and not continues(proc, B, b_ids[0])
        assert stored(proc, B, b_ids[-1])


def test_an_owner_keeps_at_most_its_own_share(up, tmp_path):
    store = {"backend_type": "memory", "max_entries": 100, "max_entries_per_owner": 3}
    with router(write_config(keyed_doc(up, store), str(tmp_path))) as proc:
        a = client(proc, A).responses.create(model="auto", input="Tenant A's thread.")
        b_ids = [client(proc, B).responses.create(model="auto", input=f"B's request {i}").id for i in range(5)]
        assert [stored(proc, B, i) for i in b_ids] == [False, False, True, True, True]
        assert stored(proc, A, a.id)


def create(proc, key: str, text: str, stream: bool, **extra):
    """(the final response, the response ids every event carried) of one request."""
    made = client(proc, key).responses.create(model="auto", input=text, stream=stream, **extra)
    if not stream:
        return made, {made.id}
    events = list(made)
    ids = {e.response.id for e in events if hasattr(e, "response")}
    return next(e.response for e in events if e.type == "response.completed"), ids


@pytest.fixture(scope="module", params=["memory", "redis"])
def repeating(request, prefix, tmp_path_factory):
    """(router, upstream): a backend answering every request with one response id, before each store; the
    whole and streamed cases ask one router (each case's responses are its own new ids)."""
    with mock_upstream() as up:
        httpx.post(f"{up.url}/_mock/config", json={"echo": True, "response_id": "resp_up1"}).raise_for_status()
        store = {"backend_type": request.param, "prefix": prefix}
        with router(write_config(keyed_doc(up, store, "responses"), str(tmp_path_factory.mktemp("repeat")))) as proc:
            yield proc, up


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_backend_that_repeats_its_ids_never_overwrites_another_owners_response(repeating, stream):
    proc, up = repeating
    b, b_ids = create(proc, B, "B's secret is WALRUS-7.", stream)
    a, a_ids = create(proc, A, "A's secret is HERON-3.", stream)
    # The router's own ids, the same in every event of a stream.
    assert b_ids == {b.id} and a_ids == {a.id} and a.id != b.id
    assert "resp_up1" not in (a.id, b.id) and a.id.startswith("resp_") and b.id.startswith("resp_")
    got = client(proc, B).responses.retrieve(b.id)
    assert got.id == b.id and "WALRUS" in got.output_text
    assert client(proc, A).responses.retrieve(a.id).output_text == a.output_text
    assert not stored(proc, A, b.id) and not stored(proc, B, a.id)
    follow, _ = create(proc, B, "What is my secret?", stream, previous_response_id=b.id)
    sent = httpx.get(f"{up.url}/_mock/stats").json()["last_request"]["body"]
    assert "WALRUS" in str(sent) and "HERON" not in str(sent)
    assert follow.previous_response_id == b.id and follow.id not in (a.id, b.id, "resp_up1")
