"""End to end: the router's own System One API on an ``api: systemone`` entrypoint."""
from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import yaml

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
            {"name": "deployed", "api_format": "systemone", "deployment": "remote"},
        ]},
        "global": {"model_catalog": {"deployments": {
            "local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"},
            "remote": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake-deployed"}}}},
        "recipes": [
            {"name": "chat", "decisions": [{"name": "all", "modelRefs": [{"model": "chat-model"}]}]},
            {"name": "native",
             "signals": {"keywords": [{"name": "hosted_please", "keywords": ["hosted"]},
                                      {"name": "deployed_please", "keywords": ["deployed"]}]},
             "decisions": [
                 {"name": "to_deployed", "priority": 20, "rules": {"operator": "AND", "conditions": [
                     {"type": "keyword", "name": "deployed_please"}]}, "modelRefs": [{"model": "deployed"}]},
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
    ({"model": "router-s1", "states": {}}, "`states` is empty"),
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
    assert set(models) == {"router-s1", "local-scripted", "hosted", "deployed"}
    assert models["local-scripted"]["question_types"] == ["choice", "noul", "score", "set", "span"]
    chat_ids = [m["id"] for m in httpx.get(f"{api.url}/v1/models").json()["data"]]
    assert "local-scripted" not in chat_ids and "chat-model" in chat_ids


def test_every_listed_name_can_be_posted_as_the_model(api):
    """The form: a listed name is what a client passes as ``model``. The entrypoint's name is routed by its recipe;
    a native alias named directly answers itself (as a Chat client may name a provider model)."""
    listed = {m["name"]: m for m in httpx.get(f"{api.url}/v1/systemone/models").json()["models"]}
    assert "router-s1" in listed and "routed by recipe native" in listed["router-s1"]["description"]
    assert listed["router-s1"]["question_types"] == listed["local-scripted"]["question_types"]
    r = post(api, {"model": "local-scripted", "state": STATE, "questions": QUESTIONS})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "local-scripted"
    assert "x-vsr-selected-decision" not in r.headers and "x-vsr-selected-recipe" not in r.headers
    assert r.json()["answers"]["tone"]["choice"] == "urgent"
    routed = post(api, {"model": "router-s1", "state": STATE, "questions": QUESTIONS})
    assert routed.json()["answers"] == r.json()["answers"]


def test_chat_naming_a_native_alias_is_refused(api):
    r = httpx.post(f"{api.url}/v1/chat/completions", json={"model": "hosted", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 400 and "native System One alias" in r.json()["error"]["message"]


# --- the standard form (the public OpenAPI description, archived from shared/spec) ---------------------------

FORM = yaml.safe_load((Path(__file__).parent / "fixtures/systemone/standard-form.openapi.yml").read_text())
SCHEMAS = FORM["components"]["schemas"]
MODEL = "router-s1"     # the form's own example, jev-latest, is a hosted product's model; ours is the entrypoint's


def examples(schema: str, prop: str) -> list:
    return SCHEMAS[schema]["properties"][prop]["examples"]


def form_bodies() -> list[tuple[str, dict]]:
    """Every request example of the form in a body: each state with the questions example, then each question
    type's instructions examples with its criteria examples (about the first state example)."""
    state = examples("SystemOneRequest", "state")[0]
    bodies = [(f"state{i}", {"model": MODEL, "state": s, "questions": q})
              for i, s in enumerate(examples("SystemOneRequest", "state"))
              for q in examples("SystemOneRequest", "questions")]
    for schema in ("NoulQuestion", "ChoiceQuestion", "ScoreQuestion"):
        kind = SCHEMAS[schema]["properties"]["type"]["const"]
        for i, instructions in enumerate(examples(schema, "instructions")):
            for j, criteria in enumerate(examples(schema, "criteria")):
                question = {"type": kind, "instructions": instructions, "criteria": criteria}
                bodies.append((f"{kind}{i}.{j}", {"model": MODEL, "state": state, "questions": {"q": question}}))
    return bodies


def hosted_body(fake) -> dict:
    """The body the hosted alias (the fake) received for the one request just routed to it."""
    (call,) = httpx.get(f"{fake.url}/_fake/calls").json()["calls"]
    return call["body"]


@pytest.mark.parametrize("name, body", form_bodies(), ids=[n for n, _ in form_bodies()])
def test_every_request_example_of_the_form_is_answered_in_its_shape(api, name, body):
    r = post(api, body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(SCHEMAS["SystemOneResponse"]["required"]) <= set(out)
    assert set(SCHEMAS["Usage"]["required"]) <= set(out["usage"])
    assert set(out["answers"]) == set(body["questions"])
    for qname, question in body["questions"].items():
        answer = out["answers"][qname]
        assert answer["type"] == question["type"]
        assert set(SCHEMAS[f"{question['type'].capitalize()}Answer"]["required"]) <= set(answer), answer


def test_a_string_state_is_the_request_text(api):
    body = {"model": MODEL, "state": "I was charged twice. Please help.",
            "questions": {"topic": {"type": "choice", "criteria": {"charged": "A billing problem",
                                                                   "shipping": "A delivery problem"}}}}
    r = post(api, body)
    assert r.status_code == 200, r.text
    assert r.json()["answers"]["topic"]["choice"] == "charged"


def test_a_free_form_object_state_is_read_as_its_json(api):
    body = {"model": MODEL, "state": {"message": "Please help.", "subject": "Duplicate charge"},
            "questions": {"topic": {"type": "choice", "criteria": {"duplicate": "x", "shipping": "y"}}}}
    r = post(api, body)
    assert r.status_code == 200, r.text
    assert r.json()["answers"]["topic"]["choice"] == "duplicate"
    # Span offsets index the rendering: compact JSON, keys in the order sent.
    state = {"reply_to": "write to carol@example.org"}
    r = post(api, {"model": MODEL, "state": state, "questions": {"preset:pii": QUESTIONS["preset:pii"]}})
    assert r.status_code == 200, r.text
    (span,) = r.json()["answers"]["preset:pii"]["spans"]
    assert '{"reply_to":"write to carol@example.org"}'[span["start"]:span["end"]] == "carol@example.org"


@pytest.mark.parametrize("state, request_text", [
    ("hosted please", "hosted please"),
    (["hosted", "please"], '["hosted","please"]'),
    ({"subject": "hosted please"}, '{"subject":"hosted please"}'),
    # Not a v0.5 state (a part it does not have), so free-form: the whole object is the text.
    ({"request": "hosted please", "priority": 1}, '{"request":"hosted please","priority":1}'),
])
def test_a_state_of_any_form_routes_on_its_text_and_reaches_a_hosted_alias_as_the_request(api, fake, state,
                                                                                           request_text):
    httpx.post(f"{fake.url}/_fake/reset")
    r = post(api, {"model": MODEL, "state": state, "questions": {"ok": {"type": "noul"}}})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "hosted"
    assert hosted_body(fake)["state"] == {"request": request_text}


def test_a_deployment_is_asked_for_its_own_model_not_the_entrypoints_name(api, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    r = post(api, {"model": MODEL, "state": "deployed please", "questions": {"ok": {"type": "noul"}}})
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "deployed"
    assert hosted_body(fake)["model"] == "fake-deployed"


def test_object_instructions_and_descriptionless_choices_reach_the_model_as_text(api, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    questions = {"ad": {"type": "noul", "instructions": {"task": "Identify unsolicited advertising."}},
                 "tone": {"type": "choice", "criteria": {"angry": None, "calm": ["neutral", "polite"]}}}
    r = post(api, {"model": MODEL, "state": "hosted please", "questions": questions})
    assert r.status_code == 200, r.text
    sent = hosted_body(fake)["questions"]
    assert sent["ad"]["instructions"] == '{"task":"Identify unsolicited advertising."}'
    assert sent["tone"]["criteria"] == {"angry": "", "calm": '["neutral","polite"]'}
    # A choice without a description is read by its name alone.
    r = post(api, {"model": MODEL, "state": "I am so angry", "questions": {"tone": questions["tone"]}})
    assert r.status_code == 200, r.text
    assert r.json()["answers"]["tone"]["choice"] == "angry"


@pytest.mark.parametrize("body, fragment", [
    ({"state": STATE, "questions": QUESTIONS}, "missing required field `model`"),
    ({"states": {"a": {"state": STATE, "questions": QUESTIONS}}}, "missing required field `model`"),
    ({"model": MODEL, "state": STATE, "questions": {}}, "at `$.questions`"),
    ({"model": MODEL, "states": {"a": {"state": STATE, "questions": {}}}}, "at `$.states.a.questions`"),
    ({"model": MODEL, "state": 5, "questions": QUESTIONS}, "at `$.state`"),
    ({"model": MODEL, "state": STATE, "questions": {"q": {"type": "noul", "instructions": 5}}},
     "at `$.questions.q.instructions`"),
    ({"model": MODEL, "state": STATE, "questions": {"q": {"type": "score", "criteria": []}}},
     "at `$.questions.q.criteria`"),
])
def test_what_the_form_refuses_is_an_invalid_request_naming_the_field(api, body, fragment):
    r = post(api, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and fragment in err["message"], err


def test_a_refusal_names_the_entry_the_question_and_the_option(api):
    question = {"type": "choice", "criteria": {"calm": None, "angry": 5}}
    r = post(api, {"model": MODEL, "states": {"a": {"state": STATE, "questions": {"tone": question}}}})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["message"].endswith("- at `$.states.a.questions.tone.criteria.angry`"), err
    assert (err["code"], err["state"], err["question"]) == ("invalid_request", "a", "tone")


def test_models_listing_items_are_the_forms_model_metadata(api):
    items = httpx.get(f"{api.url}/v1/systemone/models").json()["models"]
    assert items
    for item in items:
        for name in SCHEMAS["ModelMetadata"]["required"]:
            assert isinstance(item.get(name), str), (name, item)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", item["release_date"]), item
