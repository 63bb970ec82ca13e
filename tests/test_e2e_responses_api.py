"""End to end: the Responses objects the router stores, as OpenAI serves them (outside trial, LiteLLM user):
``previous_response_id`` on the answer that continues one, ``GET /v1/responses/{id}``,
``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items`` and ``POST /v1/responses/{id}/cancel``, each
owner-checked as ``previous_response_id`` is; ``background: true``, which the router does not run, refused.

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
DAVE = "vsk-dave-" + "e" * 32       # two requests a minute too: the side routes' window
PAGE = "https://app.example"        # the web page the router lets call it


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in ("openai", "responses")]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
    doc["global"] = {"router": {"auth": {"enabled": True, "keys": [
                                    {"id": "alice", "sha256": sha(ALICE)}, {"id": "bob", "sha256": sha(BOB)},
                                    {"id": "carol", "sha256": sha(CAROL), "limits": {"rpm": 2}},
                                    {"id": "dave", "sha256": sha(DAVE), "limits": {"rpm": 2}}]},
                                "access_log": {"enabled": True}, "cors": {"allow_origins": [PAGE]}},
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

    wanted = {("carol", "GET", 200), ("carol", "DELETE", 429), ("alice", "DELETE", 200)}

    def lines():
        found = [json.loads(x) for x in gw.lines if x.startswith("{") and '"path": "stored"' in x.replace('":"', '": "')]
        return found if wanted <= {(x["key_id"], x["method"], x["status"]) for x in found} else None

    logged = wait_for_value(lines, "the stored-response routes' access log lines")
    assert all(x["api"] == "responses" and x["request_id"] for x in logged)


# --- 6: input items, cancel, background ------------------------------------------------------------------------


def items_json(gw, response_id: str, key: str = ALICE, **params) -> httpx.Response:
    return httpx.get(f"{gw.url}/v1/responses/{response_id}/input_items", params=params,
                     headers={"authorization": f"Bearer {key}"}, timeout=20)


def test_the_input_items_of_a_response_are_listed_in_openais_shape(gw):
    made, _ = create(gw, False)
    page = client(gw).responses.input_items.list(made.id)
    assert [(i.type, i.role, [c.text for c in i.content]) for i in page.data] == [
        ("message", "user", ["Remember the word heliotrope."])]
    body = items_json(gw, made.id).json()
    assert body["object"] == "list" and body["has_more"] is False
    [item] = body["data"]
    assert item["id"] and body["first_id"] == body["last_id"] == item["id"]
    assert item["content"] == [{"type": "input_text", "text": "Remember the word heliotrope."}]
    assert items_json(gw, made.id).json() == body        # the same ids at every read: a cursor can name one


@pytest.mark.parametrize("backend", ["m-responses", "m-openai"])
def test_a_continued_responses_input_items_are_all_it_was_answered_from(gw, backend):
    """OpenAI lists the items used to generate the response: what ``previous_response_id`` carried (the earlier
    input and output) and the new input, newest first unless ``order=asc``."""
    first, _ = create(gw, False, model=backend)
    follow, _ = create(gw, False, model=backend, input="Which word?", previous_response_id=first.id)
    listed = list(client(gw).responses.input_items.list(follow.id, order="asc"))
    assert [(i.type, i.role) for i in listed] == [("message", "user"), ("message", "assistant"), ("message", "user")]
    assert listed[1].id == first.output[0].id and listed[1].content[0].text == first.output_text
    assert listed[2].content[0].text == "Which word?"
    newest_first = client(gw).responses.input_items.list(follow.id).data
    assert [i.id for i in newest_first] == [i.id for i in reversed(listed)]
    assert len({i.id for i in listed}) == 3


def test_input_items_are_paged_by_limit_and_after(gw):
    first, _ = create(gw, False)
    second, _ = create(gw, False, input="Which word?", previous_response_id=first.id)
    third, _ = create(gw, False, input="Spell it.", previous_response_id=second.id)
    whole = items_json(gw, third.id, order="asc", limit=100).json()["data"]
    assert len(whole) == 5
    page = items_json(gw, third.id, order="asc", limit=2).json()
    assert (page["has_more"], page["first_id"], page["last_id"]) == (True, whole[0]["id"], whole[1]["id"])
    after = items_json(gw, third.id, order="asc", limit=2, after=page["last_id"]).json()
    assert [i["id"] for i in after["data"]] == [whole[2]["id"], whole[3]["id"]] and after["has_more"] is True
    # The SDK follows the cursor itself, a page at a time, to the end.
    walked = list(client(gw).responses.input_items.list(third.id, order="asc", limit=2))
    assert [i.id for i in walked] == [i["id"] for i in whole]
    assert [i.id for i in client(gw).responses.input_items.list(third.id, limit=1)] == [i["id"] for i in whole[::-1]]
    # include asks for fields that are always there: accepted, the same items.
    included = client(gw).responses.input_items.list(third.id, order="asc", include=["message.input_image.image_url"])
    assert [i.id for i in included] == [i["id"] for i in whole]


@pytest.mark.parametrize(("params", "param"), [
    ({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"limit": "many"}, "limit"),
    ({"order": "newest"}, "order"), ({"include[]": "everything"}, "include"), ({"after": "msg_nowhere"}, "after"),
])
def test_a_bad_input_items_parameter_is_a_400_naming_it(gw, params, param):
    made, _ = create(gw, False)
    refused = items_json(gw, made.id, **params)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param), error
    with pytest.raises(openai.BadRequestError):
        client(gw).responses.input_items.list(made.id, **{"include" if k == "include[]" else k: v
                                                          for k, v in params.items()})


def test_another_owners_input_items_and_cancel_are_not_found(gw):
    made, _ = create(gw, False)
    bob, alice = client(gw, BOB).responses, client(gw).responses
    for call, response_id in ((bob.input_items.list, made.id), (bob.cancel, made.id),
                              (alice.input_items.list, "resp_unknown"), (alice.cancel, "resp_unknown")):
        with pytest.raises(openai.NotFoundError) as info:
            call(response_id)
        assert info.value.body["message"] == f"Response with id '{response_id}' not found."
    assert httpx.get(f"{gw.url}/v1/responses/{made.id}/input_items").status_code == 401


def test_a_response_not_made_in_background_is_not_cancelled_or_streamed_again(gw):
    """OpenAI cancels only a response created with ``background: true``; the router runs none, so every response
    it stored was answered in line and its cancel is OpenAI's refusal of a synchronous one."""
    made, _ = create(gw, False)
    with pytest.raises(openai.BadRequestError) as info:
        client(gw).responses.cancel(made.id)
    assert info.value.body["message"] == "Cannot cancel a synchronous response."
    assert info.value.body["type"] == "invalid_request_error"
    assert client(gw).responses.retrieve(made.id).status == "completed"
    with pytest.raises(openai.BadRequestError) as info:      # nor streamed again: that too is background mode's
        client(gw).responses.retrieve(made.id, stream=True)
    assert info.value.body["param"] == "stream"
    assert client(gw).responses.retrieve(made.id, stream=False).id == made.id


@pytest.mark.parametrize("backend", ["m-responses", "m-openai"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_background_request_is_refused_naming_the_parameter(gw, backend, stream):
    """No backend is asked to run it: the router could not give the client the response it would poll for."""
    with pytest.raises(openai.BadRequestError) as info:
        create(gw, stream, model=backend, background=True)
    assert info.value.body["param"] == "background", info.value.body
    assert "background" in info.value.body["message"]
    assert create(gw, False, model=backend, background=False)[0].status == "completed"


def test_side_routes_the_router_does_not_serve_answer_openai_shaped_json(gw):
    auth = {"authorization": f"Bearer {ALICE}"}
    compact = httpx.post(f"{gw.url}/v1/responses/compact", headers=auth,
                         json={"model": "m-responses", "input": "Remember the word heliotrope."})
    assert compact.status_code == 404 and compact.headers["content-type"].startswith("application/json")
    assert compact.json()["error"]["type"] == "invalid_request_error", compact.text
    with pytest.raises(openai.NotFoundError):
        client(gw).responses.compact(model="m-responses", input="Remember the word heliotrope.")


def test_side_routes_take_their_place_in_the_limits_and_are_logged(gw):
    made, _ = create(gw, False, key=DAVE)                   # the window's first place
    listed = items_json(gw, made.id, key=DAVE)
    assert listed.status_code == 200 and listed.headers["x-ratelimit-remaining-requests"] == "0", listed.headers
    over = httpx.post(f"{gw.url}/v1/responses/{made.id}/cancel", headers={"authorization": f"Bearer {DAVE}"})
    assert over.status_code == 429 and over.headers["retry-after"], over.text

    def lines():
        found = [json.loads(x) for x in gw.lines if x.startswith("{") and '"dave"' in x and '"stored"' in x]
        return found if len(found) >= 2 else None

    logged = wait_for_value(lines, "the side routes' access log lines")
    assert {(x["method"], x["route"], x["status"]) for x in logged} >= {
        ("GET", "input_items", 200), ("POST", "cancel", 429)}, logged


def test_input_tokens_are_counted_by_the_router_as_an_estimate(gw):
    """The SDK's ``responses.input_tokens.count``: the router's estimate (its embedded tokenizer) of the
    conversation the request would send, the one ``previous_response_id`` carries included."""
    counts = client(gw).responses.input_tokens.with_raw_response.count(model="m-responses", input="Which word?")
    assert counts.headers["x-vsr-token-count"] == "estimate"
    short = counts.parse()
    assert (short.object, short.input_tokens > 0) == ("response.input_tokens", True)
    longer = client(gw).responses.input_tokens.count(model="m-responses", input="Which word? " * 20)
    assert longer.input_tokens > short.input_tokens
    made, _ = create(gw, False)
    carried = client(gw).responses.input_tokens.count(model="m-responses", input="Which word?",
                                                     previous_response_id=made.id)
    assert carried.input_tokens > short.input_tokens
    with pytest.raises(openai.BadRequestError) as info:       # another owner's id: unknown, as on create
        client(gw, BOB).responses.input_tokens.count(input="Which word?", previous_response_id=made.id)
    assert (info.value.body["code"], info.value.body["param"]) == ("previous_response_not_found",
                                                                   "previous_response_id")


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "Hi", "stream": True}, "stream"), ({"input": "Hi", "conversation": "conv_1"}, "conversation"),
    ({"input": 3}, "input"), ({"model": "m-responses"}, "input"),
])
def test_a_bad_input_tokens_request_is_a_400_naming_the_field(gw, body, param):
    refused = httpx.post(f"{gw.url}/v1/responses/input_tokens", json=body, headers={"authorization": f"Bearer {ALICE}"})
    assert refused.status_code == 400, refused.text
    assert (refused.json()["error"]["type"], refused.json()["error"]["param"]) == ("invalid_request_error", param)
    assert httpx.post(f"{gw.url}/v1/responses/input_tokens", json={"input": "Hi"}).status_code == 401


@pytest.mark.parametrize(("tail", "methods"), [
    ("resp_1", {"GET", "DELETE"}), ("resp_1/input_items", {"GET"}), ("resp_1/cancel", {"POST"}),
    ("input_tokens", {"POST"}), ("compact", {"POST"}),
])
def test_a_browsers_preflight_is_told_each_routes_methods(gw, tail, methods):
    asked = httpx.options(f"{gw.url}/v1/responses/{tail}", headers={
        "origin": PAGE, "access-control-request-method": next(iter(methods))})
    assert asked.status_code == 204
    assert set(asked.headers["access-control-allow-methods"].split(", ")) == methods
