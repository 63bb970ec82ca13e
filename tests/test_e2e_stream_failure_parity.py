"""A failure reads the same whole and streamed, over real sockets, on every client API.

The bench mock upstream fails mid-answer (half a whole body, or two events of a stream and a dropped
connection); the fake System One has the response guard block an answer. A whole request gets the failure's
status line; a stream has sent its 200 already and ends with its protocol's error event. Either way:

- ``vsr_requests_total`` counts the status the client was told (the error event's on a stream), so an
  error-rate alert on ``status=~"5.."`` sees streamed failures too;
- the error's ``type`` is the one the whole answer carries (OpenAI's shape: ``upstream_error`` for an upstream
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
