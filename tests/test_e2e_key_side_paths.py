"""A key's access list and limits on the side paths, end to end (trial 7b, findings 2, 4 and 6).

Real routers with keys in the configuration and their limits shared in Redis, the official Anthropic SDK for
count_tokens, httpx for the System One API; the providers are real servers that record every call (the mock
upstream, the scripted agent model, the fake System One API), so a refusal is shown to reach none of them.

- The System One API holds a key to its ``models`` and ``entrypoints`` (403 ``model_not_allowed`` in the System
  One API's error shape) and its requests per minute (429 with Retry-After, the calls counted in the window Chat
  counts in); ``GET /v1/systemone/models`` lists only what the key may name.
- ``/v1/messages/count_tokens`` holds it to its ``models`` (Anthropic's 403) and refuses it at its limit (429)
  before any provider is asked; a count is not counted as a request.
- A router_replay shadow copy to a model outside the key's ``models`` is never sent, and counted.
"""
from __future__ import annotations

import hashlib
import re

import anthropic
import httpx
import openai
import pytest

from .procs import REDIS_URL, mock_upstream, model, redis_prefix, router, wait_until, write_config

ADMIN = "vsk-admin-" + "a" * 32
ONLY_A = "vsk-only-a-" + "b" * 32           # models [model-a]
ONLY_AUTO = "vsk-only-auto-" + "c" * 32     # entrypoints [vsr/auto]
S1 = "vsk-s1-" + "d" * 32                   # models [hosted]
S1_ENTRY = "vsk-s1-entry-" + "h" * 32       # entrypoints [router-s1]
ANY = "vsk-any-" + "e" * 32                 # no list, no limit
LIMITED = "vsk-limited-" + "f" * 32         # rpm 2, for the System One API
COUNTER = "vsk-counter-" + "g" * 32         # rpm 2, for count_tokens
S1_ONE = "vsk-s1-one-" + "i" * 32           # entrypoints [router-s1], rpm 1
MSG = [{"role": "user", "content": "hi"}]
STATE = {"request": "please reply, it is urgent"}
QUESTIONS = {"ok": {"type": "noul"}}


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="module")
def secret():
    """The shadow model: a mock upstream of its own, so its calls are its own."""
    with mock_upstream() as proc:
        yield proc


@pytest.fixture(scope="module")
def prefix():
    with redis_prefix("sidepaths") as p:
        yield p


@pytest.fixture(scope="module")
def gw(mock, agent, fake, secret, prefix, tmp_path_factory):
    keys = [{"id": "ops", "sha256": sha(ADMIN), "admin": True},
            {"id": "only-a", "sha256": sha(ONLY_A), "models": ["model-a"]},
            {"id": "only-auto", "sha256": sha(ONLY_AUTO), "entrypoints": ["vsr/auto"]},
            {"id": "s1", "sha256": sha(S1), "models": ["hosted"]},
            {"id": "s1-entry", "sha256": sha(S1_ENTRY), "entrypoints": ["router-s1"]},
            {"id": "any", "sha256": sha(ANY)},
            # The limited keys' lists leave the shadow model out: only ANY's chat makes a shadow copy.
            {"id": "limited", "sha256": sha(LIMITED), "models": ["model-a", "hosted"], "limits": {"rpm": 2}},
            {"id": "counter", "sha256": sha(COUNTER), "models": ["model-a", "model-b"], "limits": {"rpm": 2}},
            {"id": "s1-one", "sha256": sha(S1_ONE), "entrypoints": ["router-s1"], "limits": {"rpm": 1}}]
    doc = {
        "version": "v0.5",
        "providers": {"models": [
            model("model-a", f"{mock.url}/v1"),
            {**model("model-b", f"{agent.url}/v1", upstream_name="agent-model"), "api_format": "anthropic"},
            model("model-secret", f"{secret.url}/v1", upstream_name="mock-secret"),
            {"name": "hosted", "api_format": "systemone", "provider_model_id": "fake-hosted",
             "backend_refs": [{"endpoint": f"{fake.url}/v1/systemone"}]},
        ]},
        "recipes": [
            {"name": "default", "decisions": [{"name": "all", "modelRefs": [{"model": "model-a"}]}]},
            {"name": "anth", "decisions": [{"name": "all", "modelRefs": [{"model": "model-b"}]}]},
            {"name": "native", "decisions": [{"name": "all", "modelRefs": [{"model": "hosted"}]}]},
        ],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True},
                        {"api": "chat", "model_names": ["vsr/anth"], "recipe": "anth"},
                        {"api": "systemone", "model_names": ["router-s1"], "recipe": "native"}],
        "global": {
            "router": {"auth": {"enabled": True, "keys": keys,
                                "store": {"backend": "redis", "url": REDIS_URL, "prefix": prefix}}},
            "plugins": [{"type": "router_replay", "configuration": {
                "shadow": {"model": "model-secret", "sample_rate": 1.0}}}],
        },
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("sidepaths")))) as proc:
        yield proc


def s1(gw, key: str, name: str) -> httpx.Response:
    return httpx.post(f"{gw.url}/v1/systemone", json={"model": name, "state": STATE, "questions": QUESTIONS},
                      headers={"authorization": f"Bearer {key}"}, timeout=20)


def fake_calls(fake) -> list[dict]:
    return httpx.get(f"{fake.url}/_fake/calls").json()["calls"]


def agent_calls(agent) -> list[dict]:
    return [c for c in httpx.get(f"{agent.url}/_agent/log").json() if c["path"].endswith("/count_tokens")]


def _an(gw, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=key, max_retries=0)


def _oa(gw, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)


# --- the System One API ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "name"), [(ONLY_A, "router-s1"), (ONLY_A, "hosted"), (ONLY_AUTO, "router-s1"),
                                           (ONLY_AUTO, "hosted")])
def test_systemone_refuses_what_the_key_may_not_reach_before_any_call(gw, fake, key, name):
    httpx.post(f"{fake.url}/_fake/reset")
    r = s1(gw, key, name)
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err == {"code": "model_not_allowed", "message": err["message"], "type": "systemone_error",
                   "question": None, "state": None}
    assert r.headers["x-vsr-response-path"] == "error"
    assert fake_calls(fake) == [], "the System One provider was not called"


def test_systemone_answers_a_key_that_reaches_its_model(gw, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    for key, name in ((S1, "router-s1"), (S1, "hosted"), (S1_ENTRY, "router-s1")):
        r = s1(gw, key, name)
        assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "hosted", r.text
    assert [c["body"]["model"] for c in fake_calls(fake)] == ["fake-hosted"] * 3
    r = s1(gw, S1_ENTRY, "hosted")
    assert r.status_code == 403 and r.json()["error"]["code"] == "model_not_allowed"
    assert len(fake_calls(fake)) == 3


def test_systemone_counts_in_the_keys_requests_per_minute(gw, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    assert [s1(gw, LIMITED, "router-s1").status_code for _ in range(2)] == [200, 200]
    r = s1(gw, LIMITED, "router-s1")
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "rate_limit_exceeded" and r.json()["error"]["type"] == "systemone_error"
    assert int(r.headers["retry-after"]) >= 1 and r.headers["x-vsr-response-path"] == "rate_limited"
    assert len(fake_calls(fake)) == 2, "the refused call reached no provider"
    # The same window as Chat's: the two System One calls spent it.
    with pytest.raises(openai.RateLimitError):
        _oa(gw, LIMITED).chat.completions.create(model="vsr/auto", messages=MSG)


def test_systemone_refusals_for_the_key_take_no_place_in_its_window(gw, fake):
    """A name the key may not call is a 403 before its limits are asked: it counts nothing, and a full window
    does not turn it into a 429."""
    assert [s1(gw, S1_ONE, "hosted").status_code for _ in range(3)] == [403] * 3
    ok = s1(gw, S1_ONE, "router-s1")
    assert ok.status_code == 200 and ok.headers["x-ratelimit-remaining-requests"] == "0", ok.headers
    limited = s1(gw, S1_ONE, "router-s1")
    assert limited.status_code == 429 and limited.headers["x-ratelimit-limit-requests"] == "1", limited.headers
    r = s1(gw, S1_ONE, "hosted")
    assert r.status_code == 403 and "retry-after" not in r.headers, r.text


def test_systemone_models_lists_what_the_key_may_name(gw):
    def listed(key: str) -> set[str]:
        r = httpx.get(f"{gw.url}/v1/systemone/models", headers={"authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
        return {m["name"] for m in r.json()["models"]}

    assert listed(ANY) == {"router-s1", "hosted"}
    assert listed(S1) == {"router-s1", "hosted"}
    assert listed(S1_ENTRY) == {"router-s1"}, "a key listing entrypoints names no alias directly"
    assert listed(ONLY_A) == set(), "its recipe reaches only hosted, outside the key's models"
    assert listed(ONLY_AUTO) == set(), "neither is one of its entrypoints"


# --- count_tokens --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["model-b", "vsr/anth"])
def test_count_tokens_refuses_a_model_outside_the_keys_list_before_the_provider(gw, agent, name):
    httpx.post(f"{agent.url}/_agent/reset")
    client = _an(gw, ONLY_A)
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        client.messages.create(model=name, max_tokens=8, messages=MSG)
    with pytest.raises(anthropic.PermissionDeniedError) as counted:
        client.messages.count_tokens(model=name, messages=MSG)
    assert counted.value.body.pop("request_id") == counted.value.request_id
    assert caught.value.body.pop("request_id") == caught.value.request_id
    assert counted.value.body == caught.value.body == {
        "type": "error", "error": {"type": "permission_error", "message": counted.value.body["error"]["message"]}}
    assert agent_calls(agent) == [], "the Anthropic provider was not asked to count"
    assert _an(gw, ANY).messages.count_tokens(model=name, messages=MSG).input_tokens > 0
    assert len(agent_calls(agent)) == 1


def test_count_tokens_at_the_keys_limit_is_refused_and_a_count_is_not_a_request(gw, agent):
    httpx.post(f"{agent.url}/_agent/reset")
    client = _an(gw, COUNTER)
    # Counts are authorised, not counted: three of them leave both places of rpm 2 to the requests.
    assert all(client.messages.count_tokens(model="model-b", messages=MSG).input_tokens > 0 for _ in range(3))
    assert len(agent_calls(agent)) == 3
    for _ in range(2):
        _oa(gw, COUNTER).chat.completions.create(model="vsr/auto", messages=MSG)
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.count_tokens(model="model-b", messages=MSG)
    err = caught.value
    assert err.body.pop("request_id") == err.request_id
    assert err.body == {"type": "error", "error": {"type": "rate_limit_error", "message": err.body["error"]["message"]}}
    assert int(err.response.headers["retry-after"]) >= 1
    assert err.response.headers["x-vsr-response-path"] == "rate_limited"
    assert len(agent_calls(agent)) == 3, "the refused count reached no provider"


# --- the router_replay shadow ------------------------------------------------------------------------------------


def _shadow_counts(gw) -> dict[str, int]:
    text = httpx.get(f"{gw.url}/metrics", headers={"authorization": f"Bearer {ADMIN}"}).text
    return {m.group(1): int(float(m.group(2)))
            for m in re.finditer(r'^vsr_shadow_requests_total\{outcome="(\w+)"\} (\S+)$', text, re.M)}


def test_a_shadow_copy_never_goes_to_a_model_outside_the_keys_list(gw, secret):
    httpx.post(f"{secret.url}/_mock/reset")
    before = _shadow_counts(gw)
    kept = _oa(gw, ONLY_A).chat.completions.create(
        model="vsr/auto", messages=[{"role": "user", "content": "only-a's private prompt"}])
    assert kept.choices[0].message.content
    _oa(gw, ANY).chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "any's prompt"}])
    wait_until(lambda: _shadow_counts(gw)["answered"] > before.get("answered", 0), "the allowed copy answered")
    after = _shadow_counts(gw)
    assert after["skipped_not_allowed"] == before.get("skipped_not_allowed", 0) + 1
    assert after["answered"] == before["answered"] + 1
    seen = httpx.get(f"{secret.url}/_mock/stats").json()
    assert seen["requests"] == 1, "only the unrestricted key's copy reached the shadow model"
    assert seen["last_request"]["body"]["messages"] == [{"role": "user", "content": "any's prompt"}]
