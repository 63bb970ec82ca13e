"""End to end: a refusal written as plain text, as the outside trial saw it ("I'm sorry, but I can't help with
that request. It would be against my guidelines.", with no refusal field), over real routers, mock upstreams
and the official SDKs.

escalate's ``accept: {refusal: false}`` rejects it and asks the next candidate; a response_guard rule on the
``refusal`` signal blocks it, whole and streamed, on every client API, though the decision model (the embedded
one, as in the trial: no model catalog) scores the refusal question zero-shot and let it through."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, router, write_config
from .test_e2e_guard import APIS, answer_with, guard_config, raw_stream, streamed, whole

REFUSAL = "I'm sorry, but I can't help with that request. It would be against my guidelines."
CANNED = "Hello! This is a canned answer from the mock upstream."
ORDINARY = "Sorry for the confusion, here is the fixed code: def add(a, b): return a + b"


@pytest.fixture(scope="module")
def escalating(tmp_path_factory):
    """(router, refuser, helper): escalate with refusal: false, from a model whose backend refuses in text."""
    alg = {"type": "escalate", "escalate": {"accept": {"refusal": False}}}
    with mock_upstream("--content", REFUSAL) as refuser, mock_upstream() as helper:
        models = [model("small", f"{refuser.url}/v1", upstream_name="up-small"),
                  model("large", f"{helper.url}/v1", upstream_name="up-large")]
        doc = config(models, [{"name": "main", "modelRefs": [{"model": "small"}, {"model": "large"}],
                               "algorithm": alg}])
        doc["global"] = {"router": {"headers": {"debug": "any"}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("escalate")))) as proc:
            yield proc, refuser, helper


@pytest.mark.parametrize("stream", [False, True])
def test_escalate_refusal_false_asks_the_next_model_after_a_text_refusal(escalating, stream):
    proc, refuser, helper = escalating
    for up in (refuser, helper):
        httpx.post(f"{up.url}/_mock/reset").raise_for_status()
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0)
    question = [{"role": "user", "content": "how do I bake bread?"}]
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model="vsr/auto", messages=question, stream=True,
                extra_headers={"x-vsr-debug": "1"}) as resp:
            headers = resp.headers
            text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
    else:
        raw = client.chat.completions.with_raw_response.create(
            model="vsr/auto", messages=question, extra_headers={"x-vsr-debug": "1"})
        headers, text = raw.headers, raw.parse().choices[0].message.content
    assert text == CANNED
    assert headers["x-vsr-selected-model"] == "large"
    assert ('looper=("small: refusal text (i can\'t help), rejected" "large: no refusal, accepted")'
            in headers["x-vsr-trace"])
    for up in (refuser, helper):
        assert httpx.get(f"{up.url}/_mock/stats").json()["requests"] == 1


@pytest.fixture(scope="module")
def embedded(mock, tmp_path_factory):
    """The trial's guard: ``refusal: [{name: refused}]`` (uncalibrated, 0.5) and a block rule on it, asked of
    the embedded decision model."""
    doc = guard_config(mock.url, "http://127.0.0.1:9", guard={
        "rules": [{"when": {"type": "refusal", "name": "refused"}, "action": "block"}]})
    del doc["global"]["model_catalog"]
    for recipe in doc["recipes"]:
        recipe["signals"] = {"refusal": [{"name": "refused"}]}
    with router(write_config(doc, str(tmp_path_factory.mktemp("refusal")))) as proc:
        yield proc


@pytest.mark.parametrize("api", APIS)
def test_a_text_refusal_is_blocked_whole(mock, embedded, api):
    answer_with(mock, REFUSAL)
    error = {"chat": openai.PermissionDeniedError, "responses": openai.PermissionDeniedError,
             "messages": anthropic.PermissionDeniedError}[api]
    with pytest.raises(error) as caught:
        whole(embedded, api, f"how do I bake bread? ({api}, whole)")
    response = caught.value.response
    assert response.status_code == 403 and response.headers["x-vsr-response-path"] == "blocked"
    assert "guidelines" not in response.text
    assert "response_guard=blocked" in response.headers["x-vsr-trace"]


@pytest.mark.parametrize("api", APIS)
def test_a_text_refusal_is_blocked_streamed(mock, embedded, api):
    answer_with(mock, REFUSAL)
    resp = raw_stream(embedded, api)
    assert resp.status_code == 200 and resp.headers["x-vsr-response-path"] == "blocked"
    assert b"guidelines" not in resp.content
    assert "response_guard=blocked;buffered" in resp.headers["x-vsr-trace"]
    with pytest.raises(Exception, match="withheld by the response guard"):
        streamed(embedded, api, f"how do I bake bread? ({api}, streamed)")


@pytest.mark.parametrize("api", APIS)
def test_an_ordinary_answer_with_sorry_passes(mock, embedded, api):
    answer_with(mock, ORDINARY)
    for read, how in ((whole, "whole"), (streamed, "streamed")):
        text, headers = read(embedded, api, f"fix my add function ({api}, {how})")
        assert text == ORDINARY
        assert "response_guard=passed" in headers["x-vsr-trace"]
