"""End to end, a real router subprocess, keys in Redis, the mock upstream and the openai SDK: the response cache's
``scope`` never shares answers between keys that do not share the scope's attribute.

A key without the scope's attribute (no tenant under ``scope: tenant``, no team under ``scope: team``) is a
principal of its own, its key: not one partition with every other such key (a security trial found u1's answer
served to u2, exactly and through the semantic cache, and to the admin key).
"""
from __future__ import annotations

import hashlib
import uuid

import httpx
import openai
import pytest

from .procs import REDIS_URL, mock_upstream, model, redis_prefix, router, wait_until, write_config

ADMIN = "vsk-admin-" + "a" * 32
# Stored keys: u1 and u3 share a team, u2 has another; t1 and t2 share a tenant; a1 and a2 share a user.
STORED = {"u1": {"team": "platform"}, "u2": {"team": "marketing"}, "u3": {"team": "platform"},
          "t1": {"tenant": "acme"}, "t2": {"tenant": "acme"}, "a1": {"user": "alice"}, "a2": {"user": "alice"}}


@pytest.fixture(scope="module")
def up():
    """The mock upstream, echoing the last user turn."""
    with mock_upstream() as proc:
        httpx.post(f"{proc.url}/_mock/config", json={"echo": True}).raise_for_status()
        yield proc


@pytest.fixture(scope="module", params=["tenant", "team", "user"])
def gw(request, up, tmp_path_factory):
    """(router, its keys by id) for one scope; the keys made through ``POST /api/v1/keys``."""
    scope = request.param
    with redis_prefix(f"cache-scope-{scope}") as prefix:
        doc = {
            "version": "v0.5",
            "providers": {"models": [model("m", f"{up.url}/v1")]},
            "recipes": [{"name": "r", "decisions": [{
                "name": "d", "modelRefs": [{"model": "m"}],
                "plugins": [{"type": "response_cache", "configuration": {
                    "enabled": True, "mode": "exact_then_semantic", "ttl_seconds": 600, "scope": scope}}]}]}],
            "global": {"router": {"auth": {
                "enabled": True, "keys": [{"id": "ops", "sha256": hashlib.sha256(ADMIN.encode()).hexdigest(),
                                           "admin": True}],
                "store": {"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100}}},
                "stores": {"event_stream": {"backend": "none"}, "response_cache": {"backend_type": "memory"}}},
        }
        with router(write_config(doc, str(tmp_path_factory.mktemp(f"scope-{scope}")))) as proc:
            keys = {"ops": ADMIN}
            for kid, fields in STORED.items():
                made = httpx.post(f"{proc.url}/api/v1/keys", json={"id": kid, **fields},
                                  headers={"authorization": f"Bearer {ADMIN}"})
                assert made.status_code == 201, made.text
                keys[kid] = made.json()["key"]
            for key in keys.values():
                wait_until(lambda: httpx.get(f"{proc.url}/v1/models",
                                             headers={"authorization": f"Bearer {key}"}).status_code == 200,
                           "the stored key to be accepted")
            yield scope, proc, keys


def path(proc, key: str, text: str) -> str:
    raw = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=key, max_retries=0, timeout=20) \
        .chat.completions.with_raw_response.create(model="auto", messages=[{"role": "user", "content": text}])
    raw.parse()
    return raw.headers["x-vsr-response-path"]


def writes(proc) -> float:
    text = httpx.get(f"{proc.url}/metrics", headers={"authorization": f"Bearer {ADMIN}"}).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("llm_cache_writes_total"))


def shared(proc, keys: dict, first: str, others: list[str], suffix: str) -> dict[str, bool]:
    """Whether each of ``others``, asking once what ``first`` asked plus ``suffix`` ('?': through the semantic
    cache), is served ``first``'s cached answer; ``first``'s own repeat must hit, or the check proves nothing."""
    text = f"What is the secret plan of {first} {uuid.uuid4().hex[:8]}"
    before = writes(proc)
    assert path(proc, keys[first], text) == "upstream"
    wait_until(lambda: writes(proc) > before, f"{first}'s answer stored")
    assert path(proc, keys[first], text + suffix) == "cache"
    return {other: path(proc, keys[other], text + suffix) == "cache" for other in others}


# What each scope shares: only keys with the same value of the scope's attribute.
EXPECTED = {
    "tenant": {"t1": {"t2": True, "u1": False, "ops": False},
               "u1": {"u2": False, "u3": False, "ops": False, "t1": False},
               "ops": {"u1": False, "u2": False}},
    "team": {"u1": {"u3": True, "u2": False, "ops": False, "t1": False},
             "t1": {"t2": False, "ops": False},
             "ops": {"t1": False}},
    "user": {"a1": {"a2": True, "u1": False, "ops": False},
             "u1": {"u3": False, "u2": False}},
}


def test_keys_without_the_scopes_attribute_never_share_answers(gw):
    scope, proc, keys = gw
    for first, others in EXPECTED[scope].items():
        for suffix in ("", "?"):
            assert shared(proc, keys, first, list(others), suffix) == others, (scope, first, suffix)


def test_a_caller_known_only_by_a_wider_identity_is_not_cached(up, tmp_path):
    """Behind a trusted authenticator, ``scope: team``: a caller with a team shares its team's answers; one that
    names only its tenant is not served another's answer (that would be wider than the scope) nor cached."""
    doc = {
        "version": "v0.5",
        "listeners": [{"name": "main", "identity": {"trust_headers": True}}],
        "providers": {"models": [model("m", f"{up.url}/v1")]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"plugins": [{"type": "response_cache", "configuration": {"ttl_seconds": 600, "scope": "team"}}],
                   "stores": {"event_stream": {"backend": "none"}, "response_cache": {"backend_type": "memory"}}},
    }

    def ask(proc, text: str, **headers) -> str:
        raw = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0, timeout=20,
                            default_headers=headers).chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": text}])
        raw.parse()
        return raw.headers["x-vsr-response-path"]

    with router(write_config(doc, str(tmp_path))) as proc:
        text = f"The roadmap {uuid.uuid4().hex[:8]}"
        assert ask(proc, text, **{"x-authz-team": "red"}) == "upstream"
        wait_until(lambda: writes(proc) >= 1, "the team's answer stored")
        assert ask(proc, text, **{"x-authz-team": "red"}) == "cache"
        assert ask(proc, text, **{"x-authz-tenant": "acme"}) == "upstream"
        assert ask(proc, text, **{"x-authz-tenant": "acme"}) == "upstream"
        assert writes(proc) == 1
