"""End to end: the router's own System One API on an ``api: systemone`` entrypoint."""
from __future__ import annotations

import httpx
import pytest

from .procs import router, write_config

STATE = {"request": "please reply to carol@example.org, it is urgent"}
QUESTIONS = {"preset:pii": {"type": "span", "criteria": {"EMAIL_ADDRESS": "An email address."}},
             "tone": {"type": "choice", "criteria": {"urgent": "Needs action now", "calm": "Can wait"}}}


@pytest.fixture(scope="module")
def api(mock, fake, tmp_path_factory):
    doc = {
        "version": "v0.5",
        "providers": {"models": [
            {"name": "chat-model", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
            {"name": "local-scripted", "api_format": "systemone", "deployment": "local",
             "description": "Scripted in-process model"},
            {"name": "hosted", "api_format": "systemone", "provider_model_id": "fake-hosted",
             "backend_refs": [{"endpoint": f"{fake.url}/v1/systemone"}]},
        ]},
        "global": {"model_catalog": {"deployments": {
            "local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"}}}},
        "recipes": [
            {"name": "chat", "decisions": [{"name": "all", "modelRefs": [{"model": "chat-model"}]}]},
            {"name": "native",
             "signals": {"keywords": [{"name": "hosted_please", "keywords": ["hosted"]}]},
             "decisions": [
                 {"name": "to_hosted", "priority": 10, "rules": {"operator": "AND", "conditions": [
                     {"type": "keyword", "name": "hosted_please"}]}, "modelRefs": [{"model": "hosted"}, {"model": "local-scripted"}]},
                 {"name": "to_local", "priority": 1, "modelRefs": [{"model": "local-scripted"}]}]},
        ],
        "entrypoints": [{"api": "chat", "model_names": ["auto"], "recipe": "chat", "default": True},
                        {"api": "systemone", "model_names": ["router-s1"], "recipe": "native"}],
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("api")))) as proc:
        yield proc


def post(api, body, path="/v1/systemone"):
    return httpx.post(f"{api.url}{path}", json=body, timeout=20)


@pytest.mark.parametrize("path", ["/v1/systemone", "/v1/decisions"])
def test_standard_request_answered_by_the_routed_native_alias(api, path):
    r = post(api, {"model": "router-s1", "state": STATE, "questions": QUESTIONS}, path)
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-decision"] == "to_local"
    assert r.headers["x-vsr-selected-model"] == "local-scripted"
    answers = r.json()["answers"]
    assert answers["preset:pii"]["spans"][0]["label"] == "EMAIL_ADDRESS"
    assert STATE["request"][answers["preset:pii"]["spans"][0]["start"]:answers["preset:pii"]["spans"][0]["end"]] == "carol@example.org"
    assert answers["tone"]["choice"] == "urgent"


def test_batch_request_keeps_its_entries(api):
    body = {"model": "router-s1", "states": {
        "a": {"state": {"request": "yes, this is fine"}, "questions": {"ok": {"type": "noul"}}},
        "b": {"state": {"request": "no"}, "questions": {"ok": {"type": "noul"}}}}}
    r = post(api, body)
    assert r.status_code == 200, r.text
    states = r.json()["states"]
    assert states["a"]["answers"]["ok"]["noul"] == 0.9 and states["b"]["answers"]["ok"]["noul"] == 0.1


def test_routed_to_the_hosted_alias_and_passed_on_when_it_is_overloaded(api, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    body = {"model": "router-s1", "state": {"request": "hosted please"}, "questions": {"ok": {"type": "noul"}}}
    r = post(api, body)
    assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "hosted"
    assert httpx.get(f"{fake.url}/_fake/calls").json()["calls"][0]["body"]["model"] == "fake-hosted"
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [{"question": "*", "fail": "overloaded"}]})
    r = post(api, body)
    assert r.status_code == 200
    assert r.headers["x-vsr-selected-model"] == "local-scripted"
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [{"question": "ok", "fail": {"kind": "question_failed"}}]})
    r = post(api, body)
    assert r.status_code == 422
    assert r.json()["error"] == {"code": "question_failed", "message": r.json()["error"]["message"],
                                 "type": "systemone_error", "question": "ok", "state": None}
    httpx.post(f"{fake.url}/_fake/reset")


@pytest.mark.parametrize("body, fragment", [
    ({"state": STATE, "questions": QUESTIONS, "states": {"1": {"state": STATE, "questions": QUESTIONS}}}, "not both"),
    ({"states": {}}, "`states` is empty"),
    ({"state": STATE, "questions": QUESTIONS, "temperature": 1}, "unknown field `temperature`"),
    ({"state": STATE, "questions": {"q": {"type": "poll"}}}, "Invalid value 'poll'"),
])
def test_invalid_bodies_are_refused_with_invalid_request(api, body, fragment):
    r = post(api, body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and fragment in err["message"]
    assert post(api, {"model": "router-s1", "state": STATE, "questions": QUESTIONS}).status_code == 200


def test_unknown_model_and_malformed_json(api):
    r = post(api, {"model": "nope", "state": STATE, "questions": QUESTIONS})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = httpx.post(f"{api.url}/v1/systemone", content=b"{oops", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"


def test_models_listing_names_the_native_aliases(api):
    models = {m["name"]: m for m in httpx.get(f"{api.url}/v1/systemone/models").json()["models"]}
    assert set(models) == {"local-scripted", "hosted"}
    assert models["local-scripted"]["question_types"] == ["choice", "noul", "score", "set", "span"]
    chat_ids = [m["id"] for m in httpx.get(f"{api.url}/v1/models").json()["data"]]
    assert "local-scripted" not in chat_ids and "chat-model" in chat_ids


def test_chat_naming_a_native_alias_is_refused(api):
    r = httpx.post(f"{api.url}/v1/chat/completions", json={"model": "hosted", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 400 and "native System One alias" in r.json()["error"]["message"]
