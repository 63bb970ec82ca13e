"""A delegated System One deployment (spec 6.7), end to end: the router, the fake System One API and a model.

- Each System One call made for a request carries that request's credential, under the deployment's own
  header and prefix; the model's upstream (not delegated, no key) never sees it, nor do the replay record,
  the event journal or the router's log.
- Answers obtained with one user's credential are never reused: two users asking the same question are asked
  about separately, and so is the same user asking again.
- A request without a credential is refused with 401 ``delegated_credential_missing`` before any call, and
  a call made outside any request is never sent without one.
"""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import msgspec
import openai
import pytest

from vsr_fast.config.catalog import Deployment
from vsr_fast.protocol import systemone as wire
from vsr_fast.protocol.credential import DELEGATED
from vsr_fast.systemone.deployments import CallFailed, Remote

from .procs import router, wait_until, write_config
from .test_e2e_systemone import calls, set_rules

ALICE = "cred-alice-" + "a" * 24
BOB = "cred-bob-" + "b" * 24
RULES = [{"question": "systemone:needs_tools", "answer": {"noul": 0.9}}]


@pytest.fixture(scope="module")
def delegating(fake, agent, tmp_path_factory):
    events = str(tmp_path_factory.mktemp("events"))
    doc = {
        "version": "v0.5",
        "providers": {"models": [{"name": "tools-model", "backend_refs": [{"endpoint": f"{agent.url}/v1"}]},
                                 {"name": "plain-model", "backend_refs": [{"endpoint": f"{agent.url}/v1"}]}]},
        "recipes": [{"name": "default",
                     "signals": {"systemone": [{"name": "needs_tools", "predicate": {"gte": 0.7},
                                                "question": {"type": "noul", "instructions": "Does this need a tool?"}}]},
                     "decisions": [{"name": "tools", "priority": 10, "rules": {"operator": "AND", "conditions": [
                         {"type": "systemone", "name": "needs_tools"}]}, "modelRefs": [{"model": "tools-model"}]}],
                     "fallback": {"modelRefs": [{"model": "plain-model"}]}}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "global": {
            "model_catalog": {
                "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone",
                                       "model": "fake", "timeout_ms": 5000,
                                       "auth": {"credential": "delegated", "header": "X-User-Token",
                                                "prefix": "Token"}}},
                "system": {"decision_model": {"deployment": "s1"}}},
            "services": {"authz": {"delegated_credential": {"enabled": True}}},
            "plugins": [{"type": "router_replay", "configuration": {"capture_request_body": True}}],
            "stores": {"event_stream": {"backend": "embedded", "path": events}},
        },
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc, events


def _client(proc, credential: str | None) -> openai.OpenAI:
    headers = {"x-vsr-delegated-credential": credential} if credential else {}
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0, default_headers=headers)


def _ask(proc, credential: str | None, text: str):
    return _client(proc, credential).chat.completions.with_raw_response.create(
        model="vsr/auto", messages=[{"role": "user", "content": text}])


def _agent_log(agent) -> list[dict]:
    return httpx.get(f"{agent.url}/_agent/log").json()


def test_each_call_carries_its_own_requests_credential_and_nothing_is_reused(delegating, fake, agent):
    proc, events = delegating
    set_rules(fake, RULES)
    httpx.post(f"{agent.url}/_agent/reset")
    question = "Which tool lists my calendar for tomorrow?"
    replies = [_ask(proc, ALICE, question), _ask(proc, BOB, question), _ask(proc, ALICE, question)]
    assert [r.headers["x-vsr-selected-decision"] for r in replies] == ["tools"] * 3, "routed on the fake's answers"
    seen = calls(fake)
    assert len(seen) == 3, "one System One call per request: no answer came from another user's (or a cache)"
    assert [c["headers"].get("x-user-token") for c in seen] == [f"Token {ALICE}", f"Token {BOB}", f"Token {ALICE}"]
    assert all(c["body"]["state"]["request"] == question for c in seen)
    for c in seen:
        assert "x-vsr-delegated-credential" not in c["headers"] and "authorization" not in c["headers"]
    metrics = httpx.get(f"{proc.url}/metrics").text
    assert 'vsr_systemone_answers_reused_total{deployment="s1"}' not in metrics
    assert 'vsr_systemone_calls_total{deployment="s1",outcome="ok"} 3' in metrics

    upstream = json.dumps(_agent_log(agent))
    assert len(_agent_log(agent)) == 3
    assert ALICE not in upstream and BOB not in upstream, "the model's upstream is not delegated: it never sees it"
    for r in replies:
        rid = r.headers["x-vsr-replay-id"]
        wait_until(lambda: httpx.get(f"{proc.url}/api/v1/replay/{rid}").status_code == 200, "the replay record")
        record = httpx.get(f"{proc.url}/api/v1/replay/{rid}").text
        assert question in record and ALICE not in record and BOB not in record
    journal = b"".join(p.read_bytes() for p in Path(events).rglob("*") if p.is_file())
    assert journal and ALICE.encode() not in journal and BOB.encode() not in journal
    assert all(ALICE not in line and BOB not in line for line in proc.lines)


@pytest.mark.parametrize("credential", [None, "two words"])
def test_without_a_credential_the_client_gets_401_before_any_call(delegating, fake, agent, credential):
    proc, _ = delegating
    set_rules(fake, RULES)
    httpx.post(f"{agent.url}/_agent/reset")
    with pytest.raises(openai.AuthenticationError) as caught:
        _ask(proc, credential, "Which tool lists my calendar?")
    assert caught.value.body["code"] == "delegated_credential_missing", caught.value.body
    assert calls(fake) == [] and _agent_log(agent) == [], "neither System One nor the model was called"


async def test_a_call_outside_any_request_is_never_sent_keyless(fake):
    """A delegated deployment asked with no request's credential on the context (a start-time check, a
    background task) fails the call without sending it; one inside a request's context carries its own."""
    remote = Remote("s1", msgspec.convert({"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone",
                                           "auth": {"credential": "delegated"}}, Deployment))
    body = wire.StandardRequest(state=wire.State(request="hi"), questions={"q": wire.NoulQuestion()})
    set_rules(fake, [])
    try:
        with pytest.raises(CallFailed) as info:
            await remote.call(body)
        assert info.value.code == "delegated_credential_missing" and calls(fake) == []
        token = DELEGATED.set(ALICE)
        try:
            await remote.call(body)
        finally:
            DELEGATED.reset(token)
        assert [c["headers"].get("authorization") for c in calls(fake)] == [f"Bearer {ALICE}"]
    finally:
        await remote.aclose()
