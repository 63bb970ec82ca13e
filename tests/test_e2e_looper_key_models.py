"""A key's ``models`` and the executors' own model settings (review finding 2), end to end: a real router with keys
in its configuration, one mock upstream per model counting its calls, the official SDKs as clients.

The key trims a decision's candidates; fusion.model, analysis_models, remom.synthesis_model, the workflow's roles,
planner and final model come from the configuration. A model the executor needs that the key cannot reach is a
403 ``model_not_allowed`` in the client's protocol before any model is called; a panel or role member it cannot
reach is left out, never called, and named in ``x-vsr-warnings``; a panel or role left with none is the 403.
"""
from __future__ import annotations

import hashlib

import anthropic
import httpx
import openai
import pytest

from .procs import model, router, write_config

ASK = [{"role": "user", "content": "Say hello"}]
TEXT = {"a": "Alpha answer.", "b": "Beta answer.", "c": "Gamma answer."}
KEYS = {"ab": ["a", "b"], "ac": ["a", "c"], "bc": ["b", "c"], "all": None}
RECIPES = {
    # judge b, panel a and c
    "fusion": {"type": "fusion", "fusion": {"model": "b", "analysis_models": ["a", "c"]}},
    "remom": {"type": "remom", "remom": {"breadth_schedule": [2], "model_distribution": "round_robin",
                                         "synthesis_model": "b"}},
    "static": {"type": "workflows", "workflows": {
        "roles": [{"name": "draft", "models": ["a", "c"]}, {"name": "review", "models": ["b"]}],
        "final": {"model": "a"}}},
    "unnamed": {"type": "workflows", "workflows": {     # no final model: the last role's first it reaches
        "roles": [{"name": "draft", "models": ["c", "a"]}]}},
    "dynamic": {"type": "workflows", "workflows": {"mode": "dynamic", "planner": {"model": "b"}}},
}


def secret(name: str) -> str:
    return f"vsk-{name}-" + "x" * 32


@pytest.fixture(scope="module")
def mocks():
    from .procs import mock_upstream
    with mock_upstream("--content", TEXT["a"]) as a, mock_upstream("--content", TEXT["b"]) as b, \
            mock_upstream("--content", TEXT["c"]) as c:
        yield {"a": a, "b": b, "c": c}


@pytest.fixture(scope="module")
def gw(mocks, tmp_path_factory):
    keys = [{"id": name, "sha256": hashlib.sha256(secret(name).encode()).hexdigest(),
             **({"models": models} if models is not None else {})} for name, models in KEYS.items()]
    doc = {
        "version": "v0.5",
        "providers": {"models": [model(n, f"{m.url}/v1") for n, m in mocks.items()]},
        "recipes": [{"name": name, "decisions": [{"name": "main", "modelRefs": [{"model": n} for n in "abc"],
                                                  "algorithm": alg}]} for name, alg in RECIPES.items()],
        "entrypoints": [{"api": "chat", "model_names": [name], "recipe": name, "default": name == "fusion"}
                        for name in RECIPES],
        "global": {"router": {"auth": {"enabled": True, "keys": keys}, "headers": {"debug": "any"}}},
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("keymodels")))) as proc:
        yield proc


def counts(mocks) -> dict[str, int]:
    return {n: httpx.get(f"{m.url}/_mock/stats").json()["requests"] for n, m in mocks.items()}


def called(mocks, before: dict[str, int]) -> dict[str, int]:
    return {n: c - before[n] for n, c in counts(mocks).items()}


def chat(gw, key: str, name: str, stream: bool = False):
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=secret(key), max_retries=0, timeout=20)
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model=name, messages=ASK, stream=True, extra_headers={"x-vsr-debug": "1"}) as resp:
            text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
            return resp.headers, text
    raw = client.chat.completions.with_raw_response.create(model=name, messages=ASK,
                                                            extra_headers={"x-vsr-debug": "1"})
    return raw.headers, raw.parse().choices[0].message.content


@pytest.mark.parametrize(("name", "key"), [("fusion", "ac"), ("remom", "ac"), ("static", "bc"), ("static", "ac"),
                                           ("dynamic", "ac")])
@pytest.mark.parametrize("stream", [False, True])
def test_a_needed_model_the_key_cannot_reach_is_a_403_before_any_call(gw, mocks, name, key, stream):
    # fusion's judge, remom's synthesis, the workflow's final model (bc), its review role (ac), its planner.
    before = counts(mocks)
    with pytest.raises(openai.PermissionDeniedError) as info:
        chat(gw, key, name, stream)
    assert info.value.status_code == 403
    assert info.value.body["code"] == "model_not_allowed", info.value.body
    assert called(mocks, before) == {"a": 0, "b": 0, "c": 0}


def test_the_messages_api_gets_its_own_403(gw, mocks):
    before = counts(mocks)
    client = anthropic.Anthropic(base_url=gw.url, api_key=secret("ac"), max_retries=0, timeout=20)
    with pytest.raises(anthropic.PermissionDeniedError) as info:
        client.messages.create(model="fusion", max_tokens=64, messages=ASK)
    assert info.value.body["type"] == "error" and info.value.body["error"]["type"] == "permission_error"
    assert called(mocks, before) == {"a": 0, "b": 0, "c": 0}


@pytest.mark.parametrize("stream", [False, True])
def test_a_panel_member_the_key_cannot_reach_is_skipped_and_named(gw, mocks, stream):
    before = counts(mocks)
    headers, text = chat(gw, "ab", "fusion", stream)
    assert text == TEXT["b"]                            # the judge wrote the answer
    # The panel is a alone; c never called; b analysed, then wrote the final answer.
    assert called(mocks, before) == {"a": 1, "b": 2, "c": 0}
    assert 'model_not_allowed;model="c"' in headers["x-vsr-warnings"]
    assert '"c: not allowed for this key, skipped"' in headers["x-vsr-trace"]


def test_a_role_member_the_key_cannot_reach_is_skipped_and_named(gw, mocks):
    before = counts(mocks)
    headers, text = chat(gw, "ab", "static")
    assert text == TEXT["a"]                            # the final model
    assert called(mocks, before) == {"a": 2, "b": 1, "c": 0}
    assert 'model_not_allowed;model="c"' in headers["x-vsr-warnings"]
    # Without a final model, the last role's first model the key reaches merges.
    before = counts(mocks)
    headers, text = chat(gw, "ab", "unnamed")
    assert text == TEXT["a"] and called(mocks, before) == {"a": 2, "b": 0, "c": 0}


def test_a_key_reaching_every_model_runs_them_all(gw, mocks):
    before = counts(mocks)
    headers, text = chat(gw, "all", "fusion")
    assert text == TEXT["b"] and called(mocks, before) == {"a": 1, "b": 2, "c": 1}
    assert "model_not_allowed" not in headers.get("x-vsr-warnings", "")
