"""End to end: the Responses objects the router stores, as OpenAI serves them (outside trial, LiteLLM user):
``previous_response_id`` on the answer that continues one, ``GET /v1/responses/{id}`` and
``DELETE /v1/responses/{id}``, each owner-checked as ``previous_response_id`` is.

A real router with keys, the mock upstream as every backend, the openai SDK as the client.
"""
from __future__ import annotations

import hashlib
import json

import httpx
import openai
import pytest

from .procs import config, model, router, wait_for_value, write_config

ALICE = "vsk-alice-" + "b" * 32
BOB = "vsk-bob-" + "c" * 32
CAROL = "vsk-carol-" + "d" * 32     # two requests a minute


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in ("openai", "responses")]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
    doc["global"] = {"router": {"auth": {"enabled": True, "keys": [
                                    {"id": "alice", "sha256": sha(ALICE)}, {"id": "bob", "sha256": sha(BOB)},
                                    {"id": "carol", "sha256": sha(CAROL), "limits": {"rpm": 2}}]},
                                "access_log": {"enabled": True}},
                     "stores": {"responses": {"backend_type": "memory"}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("respapi")))) as proc:
        yield proc


def client(gw, key: str = ALICE) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=20)


def create(gw, stream: bool, key: str = ALICE, **kw):
    """(the final response, the response objects of every event that carries one)."""
    kw = {"model": "m-responses", "input": "Remember the word heliotrope.", **kw}
    if not stream:
        final = client(gw, key).responses.create(**kw)
        return final, [final]
    events = list(client(gw, key).responses.create(stream=True, **kw))
    carried = [e.response for e in events if hasattr(e, "response")]
    return next(e.response for e in events if e.type == "response.completed"), carried


# --- 4: previous_response_id on the answer ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["m-responses", "m-openai"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_answer_to_a_continued_response_names_the_previous_one(gw, backend, stream):
    first, _ = create(gw, False, model=backend)
    follow, carried = create(gw, stream, model=backend, input="Which word?", previous_response_id=first.id)
    assert follow.status == "completed"
    assert [r.previous_response_id for r in carried] == [first.id] * len(carried), carried
    assert client(gw).responses.retrieve(follow.id).previous_response_id == first.id


# --- 5: retrieve and delete ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_stored_response_is_retrieved_by_its_owner(gw, stream):
    made, _ = create(gw, stream)
    got = client(gw).responses.retrieve(made.id)
    assert (got.id, got.object, got.status, got.output_text, got.model) == (
        made.id, "response", "completed", made.output_text, made.model)
    assert got.output_text


def test_another_owners_response_is_not_found_to_read_or_delete(gw):
    made, _ = create(gw, False)
    for call in (client(gw, BOB).responses.retrieve, client(gw, BOB).responses.delete):
        with pytest.raises(openai.NotFoundError) as info:
            call(made.id)
        assert info.value.body["message"] == f"Response with id '{made.id}' not found."
    assert client(gw).responses.retrieve(made.id).id == made.id


def test_a_deleted_response_is_gone_and_cannot_be_continued(gw):
    made, _ = create(gw, False)
    raw = client(gw).responses.with_raw_response.delete(made.id)
    assert raw.http_response.status_code == 200
    assert raw.http_response.json() == {"id": made.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client(gw).responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        client(gw).responses.delete(made.id)
    with pytest.raises(openai.BadRequestError) as info:
        create(gw, False, input="Which word?", previous_response_id=made.id)
    assert info.value.body["code"] == "previous_response_not_found"


def test_a_response_not_stored_is_not_found(gw):
    made, _ = create(gw, False, store=False)
    with pytest.raises(openai.NotFoundError):
        client(gw).responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        client(gw).responses.retrieve("resp_unknown")


def test_the_routes_need_a_key_and_serve_get_and_delete_only(gw):
    made, _ = create(gw, False)
    url = f"{gw.url}/v1/responses/{made.id}"
    assert httpx.get(url).status_code == 401
    assert httpx.delete(url).status_code == 401
    refused = httpx.post(url, headers={"authorization": f"Bearer {ALICE}"}, json={})
    assert refused.status_code == 405 and refused.json()["error"]["type"] == "invalid_request_error"
    assert set(refused.headers["allow"].split(", ")) >= {"GET", "DELETE"}
    assert httpx.get(url + "/", headers={"authorization": f"Bearer {ALICE}"}).status_code == 400   # not canonical
    assert client(gw).responses.retrieve(made.id).id == made.id


def test_reads_and_deletes_take_their_place_in_the_limits_and_are_logged(gw):
    """A stored response's GET and DELETE count in the caller's window as the POST that made it (a key cannot read
    past its limits), and each leaves an access-log line: who deleted what is on record."""
    made, _ = create(gw, False, key=CAROL)                  # the window's first place
    url = f"{gw.url}/v1/responses/{made.id}"
    auth = {"authorization": f"Bearer {CAROL}"}
    read = httpx.get(url, headers=auth)
    assert read.status_code == 200 and read.headers["x-ratelimit-remaining-requests"] == "0", read.headers
    over = httpx.delete(url, headers=auth)
    assert over.status_code == 429 and over.headers["retry-after"], over.text

    gone, _ = create(gw, False)
    client(gw).responses.delete(gone.id)        # the SDK's call; it returns nothing, and raises on an error

    def lines():
        found = [json.loads(x) for x in gw.lines if x.startswith("{") and '"path": "stored"' in x.replace('":"', '": "')]
        return found if len(found) >= 3 else None

    logged = wait_for_value(lines, "the stored-response routes' access log lines")
    by_method = {(x["key_id"], x["method"], x["status"]) for x in logged}
    assert {("carol", "GET", 200), ("carol", "DELETE", 429), ("alice", "DELETE", 200)} <= by_method, logged
    assert all(x["api"] == "responses" and x["request_id"] for x in logged)
