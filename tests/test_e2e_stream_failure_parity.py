"""A failure reads the same whole and streamed, over real sockets, on every client API.

The bench mock upstream fails mid-answer (half a whole body, or two events of a stream and a dropped
connection); the fake System One has the response guard block an answer. A whole request gets the failure's
status line; a stream has sent its 200 already and ends with its protocol's error event. Either way:

- ``vsr_requests_total`` counts the status the client was told (the error event's on a stream), so an
  error-rate alert on ``status=~"5.."`` sees streamed failures too;
- the error's ``type`` is the one the whole answer carries (OpenAI's shape: ``server_error`` for an upstream
  failure, as the official SDKs read it off the exception).

Streams are true (an unguarded decision: events relayed as they come, the error after the first chunk) and
held (a guarded one: nothing leaves before the verdict, the error event alone).
"""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest

from .procs import router, write_config
from .test_e2e_guard import RULES, SAFE, UNSAFE, answer_with, guard_config, request_body, set_rules

APIS = ("chat", "messages", "responses")
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
MODELS = {"chat": "chat-model", "messages": "msg-model", "responses": "resp-model"}
SHORT = {"chat": "chat", "messages": "msg", "responses": "resp"}
SERIES = re.compile(r'^vsr_requests_total\{api="([^"]*)",recipe="[^"]*",decision="([^"]*)",model="[^"]*",'
                    r'status="(\d+)"\} (\S+)$', re.M)


@pytest.fixture(scope="module")
def both(mock, fake, tmp_path_factory):
    """guard_config's guarded entrypoints (guard-chat, guard-msg, guard-resp: held streams) and one unguarded
    entrypoint per API (plain-chat...: true streams) on the same models."""
    doc = guard_config(mock.url, fake.url)
    for api in APIS:
        name = f"plain-{SHORT[api]}"
        doc["recipes"].append({"name": name, "decisions": [
            {"name": name, "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": MODELS[api]}]}]})
        doc["entrypoints"].append({"model_names": [name], "recipe": name})
    doc["global"]["router"]["upstream"] = {"retries": {"max_retries": 0}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("parity")))) as proc:
        yield proc


def entrypoint(api: str, held: bool) -> str:
    return f"{'guard' if held else 'plain'}-{SHORT[api]}"


def decision(api: str, held: bool) -> str:
    return f"guarded-{SHORT[api]}" if held else f"plain-{SHORT[api]}"


def counts(proc, api: str, name: str) -> dict[str, float]:
    """vsr_requests_total of one API and decision, by status."""
    text = httpx.get(f"{proc.url}/metrics", timeout=10).text
    return {status: float(v) for a, d, status, v in SERIES.findall(text) if a == api and d == name}


def added(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


def ask(proc, api: str, held: bool, stream: bool, question: str) -> httpx.Response:
    body = request_body(api, question, stream=stream)
    body["model"] = entrypoint(api, held)
    return httpx.post(f"{proc.url}{PATHS[api]}", json=body, timeout=60)


def error_event(api: str, resp: httpx.Response) -> dict:
    """The error of the stream's last event (its ``error`` object; Messages' whole event)."""
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    data = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
    last = json.loads(data[-1])
    return last if api == "messages" else last["error"]


# --- vsr_requests_total -------------------------------------------------------------------------------


def counted_alike(proc, api: str, held: bool, status: int) -> httpx.Response:
    """A whole request, then the same streamed: the whole one answers ``status``, the stream a 200 that ends with
    its error event, and each adds one to the decision's ``status`` series (none to 200's). Returns the stream."""
    name = decision(api, held)
    before = counts(proc, api, name)
    whole = ask(proc, api, held, False, f"whole {held}")
    assert whole.status_code == status, whole.text
    mid = counts(proc, api, name)
    assert added(before, mid) == {str(status): 1}
    streamed = ask(proc, api, held, True, f"streamed {held}")
    error_event(api, streamed)      # a 200 whose last event is the error
    # The stream's 200 status line is not what the operator counts: the failure it ended with is.
    assert added(mid, counts(proc, api, name)) == {str(status): 1}
    return streamed


@pytest.mark.parametrize("held", [False, True], ids=["true-stream", "held"])
@pytest.mark.parametrize("api", APIS)
def test_a_stream_that_fails_mid_answer_is_counted_as_the_whole_failure_is(mock, both, api, held):
    answer_with(mock, SAFE + " and more words to split", chunks=6, fail_rate=1.0, fail_mode="midstream")
    try:
        assert b"mid-stream" in counted_alike(both, api, held, 502).content
    finally:
        answer_with(mock, SAFE)


@pytest.mark.parametrize("api", APIS)
def test_a_stream_the_guard_blocks_is_counted_as_the_whole_answers_403(mock, fake, both, api):
    set_rules(fake, RULES)
    answer_with(mock, UNSAFE)
    try:
        assert counted_alike(both, api, True, 403).headers["x-vsr-response-path"] == "blocked"
    finally:
        answer_with(mock, SAFE)


def test_a_whole_stream_is_still_counted_200(mock, fake, both):
    """The control: a stream that ends whole keeps its 200, held or not."""
    set_rules(fake, RULES)
    answer_with(mock, SAFE)
    for held in (False, True):
        name = decision("chat", held)
        before = counts(both, "chat", name)
        resp = ask(both, "chat", held, True, f"whole stream {held}")
        assert resp.status_code == 200 and b"[DONE]" in resp.content
        assert added(before, counts(both, "chat", name)) == {"200": 1}
# --- the error's type, whole and streamed ----------------------------------------------------------------


def sdk_error(proc, api: str, held: bool, stream: bool, question: str) -> Exception:
    """The exception the API's official SDK raises on the request."""
    model = entrypoint(api, held)
    with pytest.raises((openai.APIError, anthropic.APIError)) as caught:
        if api == "chat":
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
            got = client.chat.completions.create(model=model, stream=stream,
                                                 messages=[{"role": "user", "content": question}])
            if stream:
                list(got)
        elif api == "responses":
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
            got = client.responses.create(model=model, input=question, stream=stream)
            if stream:
                list(got)
        else:
            client = anthropic.Anthropic(base_url=proc.url, api_key="x", max_retries=0)
            got = client.messages.create(model=model, max_tokens=100, stream=stream,
                                         messages=[{"role": "user", "content": question}])
            if stream:
                list(got)
    return caught.value


def error_type(api: str, exc: Exception) -> str:
    if api == "messages":
        return exc.body["error"]["type"]
    return exc.type


@pytest.mark.parametrize("api", APIS)
def test_an_upstream_failure_has_one_error_type_whole_and_streamed(mock, both, api):
    """The same mid-answer failure whole (a 502), in a true stream (an error event after the first chunk) and in
    a held one (the error event alone): one type, the whole answer's, read off the SDK's exception and the raw
    event. OpenAI's shape types a 502 ``server_error``, Anthropic's ``api_error``: the code says what failed."""
    answer_with(mock, SAFE + " and more words to split", chunks=6, fail_rate=1.0, fail_mode="midstream")
    try:
        whole = sdk_error(both, api, False, False, "type whole")
        true_stream = sdk_error(both, api, False, True, "type true stream")
        held = sdk_error(both, api, True, True, "type held")
        expected = "api_error" if api == "messages" else "server_error"
        assert [error_type(api, e) for e in (whole, true_stream, held)] == [expected] * 3
        if api != "messages":
            assert whole.code == true_stream.code == held.code == "upstream_failed"
        for is_held in (False, True):
            event = error_event(api, ask(both, api, is_held, True, f"raw type {is_held}"))
            assert (event["error"]["type"] if api == "messages" else event["type"]) == expected, event
    finally:
        answer_with(mock, SAFE)
