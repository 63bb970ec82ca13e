"""The security battery of who is calling: what a hostile client tries against keys, identity and credentials.

- Identity headers a client forges count on no listener that does not trust them,
  and a client key's identity cannot be overridden by them.
- A key in the query string is never read.
- The key lookup compares SHA-256 digests only (``hmac.compare_digest``): the
  router holds no key, so nothing it compares shares a prefix with one. (The
  timing itself is measured in ``bench/auth_timing.py``, not asserted here.)
- The delegated credential reaches its delegated upstream only, under that
  upstream's header; a smuggled copy (another upstream, another header name,
  CRLF in the value) reaches no one; it never reaches the replay record or the
  journal; without it the client gets 401 before any upstream call.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import socket
from pathlib import Path

import httpx
import openai
import pytest

from bench._procs import Proc
from vsr_fast.auth.keys import Keyring, digest
from vsr_fast.config.auth import ClientKey

from .procs import model, router, wait_until, write_config

KEY = "vsk-bob-" + "b" * 36
CREDENTIAL = "user-credential-7f3a9c"


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# --- keys -------------------------------------------------------------------------------------


def test_the_keyring_keeps_digests_only_and_compares_them_whole():
    key = KEY
    ring = Keyring([ClientKey(id="bob", sha256=digest(key), user="bob")])
    held = pickle.dumps(ring._by_digest)
    assert key.encode() not in held and key[:12].encode() not in held, "no key nor a prefix of one is held"
    assert ring.lookup(key.encode()).user == "bob"
    # Candidates sharing ever longer prefixes with the key are all refused the same way: by their digest.
    for n in (0, 4, 8, len(key) - 1):
        assert ring.lookup((key[:n] + "x" * (len(key) - n)).encode()) is None
    assert ring.lookup(key.encode() + b" ") is None and ring.lookup(b"") is None


def test_a_config_that_holds_a_key_instead_of_its_digest_does_not_load(tmp_path, mock):
    doc = _doc(mock.url)
    doc["global"]["router"]["auth"]["keys"][0]["sha256"] = KEY
    from vsr_fast.errors import ConfigError
    from vsr_fast.routing import load_file

    with pytest.raises(ConfigError) as caught:
        load_file(write_config(doc, str(tmp_path)))
    assert any("global.router.auth.keys[0].sha256" in line for line in caught.value.lines)


def _doc(mock_url: str, **extra) -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [model("m", f"{mock_url}/v1")]},
        "recipes": [{"name": "default",
                     "signals": {"role_bindings": [{"name": "admins", "role": "admin",
                                                    "subjects": [{"kind": "Group", "name": "platform-admins"}]}]},
                     "decisions": [{"name": "admin", "priority": 10, "modelRefs": [{"model": "m"}],
                                    "rules": {"operator": "AND", "conditions": [{"type": "authz", "name": "admins"}]}}],
                     "fallback": {"modelRefs": [{"model": "m"}]}}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "global": {"router": {"auth": {"enabled": True, "keys": [{"id": "bob", "sha256": sha(KEY), "user": "bob"}]},
                              "headers": {"debug": "authenticated", "debug_principals": ["alice"]}}, **extra},
    }


@pytest.fixture(scope="module")
def keyed(mock, tmp_path_factory):
    with router(write_config(_doc(mock.url), str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


BODY = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}


def test_forged_identity_headers_change_nothing(keyed):
    forged = {"x-authz-user-id": "alice", "x-authz-user-groups": "platform-admins", "x-authz-team": "root",
              "x-vsr-debug": "1", "authorization": f"Bearer {KEY}"}
    r = httpx.post(f"{keyed.url}/v1/chat/completions", json=BODY, headers=forged)
    assert r.status_code == 200
    assert r.headers.get("x-vsr-selected-decision") is None, "bob is no platform admin, whatever he claims"
    assert "x-vsr-trace" not in r.headers, "bob is no debug principal, whatever he claims"
    alone = httpx.post(f"{keyed.url}/v1/chat/completions", json=BODY,
                       headers={k: v for k, v in forged.items() if k != "authorization"})
    assert alone.status_code == 401, "identity headers are no credential"


@pytest.mark.parametrize("query", [f"api_key={KEY}", f"key={KEY}", f"access_token={KEY}", f"authorization=Bearer%20{KEY}"])
def test_a_key_in_the_query_string_is_never_read(keyed, query):
    r = httpx.post(f"{keyed.url}/v1/chat/completions?{query}", json=BODY)
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
    assert all(KEY not in line for line in keyed.lines)


@pytest.mark.parametrize("value", [f"Basic {KEY}", KEY, f"Bearer{KEY}", "Bearer", f"bearer  {KEY}x"])
def test_only_a_bearer_token_is_a_key(keyed, value):
    r = httpx.post(f"{keyed.url}/v1/chat/completions", json=BODY, headers={"authorization": value})
    assert r.status_code == 401


def test_a_second_authorization_header_does_not_replace_the_first(keyed):
    """The first Authorization counts: a proxy that appends one cannot be used to swap the key."""
    r = httpx.post(f"{keyed.url}/v1/chat/completions", json=BODY,
                   headers=[("authorization", "Bearer vsk-nope"), ("authorization", f"Bearer {KEY}")])
    assert r.status_code == 401


def test_an_unauthenticated_body_is_never_read_whole(keyed):
    """A 401 comes before the body: a client that declares a huge body gets its answer at once."""
    with socket.create_connection(("127.0.0.1", keyed.port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: 100000000\r\n\r\n{")
        s.settimeout(20)
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 401")


# --- delegated credentials (spec 6.7) ------------------------------------------------------------


@pytest.fixture(scope="module")
def agents():
    a = Proc(["-m", "bench.agent_model", "--host", "127.0.0.1", "--port", "0"], "listening")
    b = Proc(["-m", "bench.agent_model", "--host", "127.0.0.1", "--port", "0"], "listening")
    with a, b:
        yield a, b


def _log(agent: Proc) -> list[dict]:
    return httpx.get(f"{agent.url}/_agent/log").json()


@pytest.fixture(scope="module")
def delegating(agents, tmp_path_factory):
    delegated, static = agents
    events = str(tmp_path_factory.mktemp("events"))
    doc = {
        "version": "v0.5",
        "providers": {"models": [
            {"name": "for-user", "backend_refs": [{"endpoint": f"{delegated.url}/v1",
                                                   "auth": {"credential": "delegated"}}]},
            {"name": "as-router", "backend_refs": [{"endpoint": f"{static.url}/v1",
                                                    "auth": {"api_key": "router-own-key"}}]},
        ]},
        "recipes": [{"name": "default", "decisions": [
            {"name": "all", "priority": 1, "rules": {"operator": "AND", "conditions": []},
             "modelRefs": [{"model": "for-user"}]}]}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "global": {"services": {"authz": {"delegated_credential": {"enabled": True}}},
                   "plugins": [{"type": "router_replay", "configuration": {"capture_request_body": True}}],
                   "stores": {"event_stream": {"backend": "embedded", "path": events}}},
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc, events


def _reset(*agents: Proc) -> None:
    for a in agents:
        httpx.post(f"{a.url}/_agent/reset")


def test_the_delegated_credential_reaches_only_its_upstream(delegating, agents):
    proc, events = delegating
    delegated, static = agents
    _reset(delegated, static)
    c = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="client-own-key", max_retries=0,
                      default_headers={"x-vsr-delegated-credential": CREDENTIAL})
    answer = c.chat.completions.with_raw_response.create(model="vsr/auto", messages=[{"role": "user", "content": "hi"}])
    assert answer.headers["x-vsr-selected-model"] == "for-user"
    seen = _log(delegated)[-1]["headers"]
    assert seen.get("authorization") == f"Bearer {CREDENTIAL}", "under the provider's own header and prefix"
    assert "x-vsr-delegated-credential" not in seen and "client-own-key" not in json.dumps(seen)
    # The same header to a static upstream: its own key goes, the user's credential does not.
    c.chat.completions.create(model="as-router", messages=[{"role": "user", "content": "hi"}])
    static_seen = json.dumps(_log(static))
    assert CREDENTIAL not in static_seen and "Bearer router-own-key" in static_seen
    # Never in the replay record or the journal.
    rid = answer.headers["x-vsr-replay-id"]
    wait_until(lambda: httpx.get(f"{proc.url}/api/v1/replay/{rid}").status_code == 200, "the replay record")
    assert CREDENTIAL not in httpx.get(f"{proc.url}/api/v1/replay/{rid}").text
    journal = b"".join(p.read_bytes() for p in Path(events).rglob("*") if p.is_file())
    assert journal and CREDENTIAL.encode() not in journal
    assert all(CREDENTIAL not in line for line in proc.lines)


def test_without_the_credential_the_client_gets_401_before_any_upstream_call(delegating, agents):
    proc, _ = delegating
    delegated, _ = agents
    _reset(delegated)
    c = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="client-own-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        c.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["code"] == "delegated_credential_missing"
    r = httpx.post(f"{proc.url}/v1/messages", json={"model": "vsr/auto", "max_tokens": 8,
                                                    "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert _log(delegated) == [], "no upstream call was made"


@pytest.mark.parametrize("headers", [
    {"authorization": f"Bearer {CREDENTIAL}"},                   # the client's own key header is not the credential
    {"x-vsr-delegated-credential-x": CREDENTIAL},
    {"x-authz-delegated-credential": CREDENTIAL},
])
def test_a_credential_under_another_name_is_not_delegated(delegating, agents, headers):
    proc, _ = delegating
    delegated, _ = agents
    _reset(delegated)
    r = httpx.post(f"{proc.url}/v1/chat/completions", json=BODY, headers=headers)
    assert r.status_code == 401 and r.json()["error"]["code"] == "delegated_credential_missing"
    assert _log(delegated) == []


def test_crlf_in_the_credential_never_becomes_a_header(delegating, agents):
    proc, _ = delegating
    delegated, _ = agents
    _reset(delegated)
    with socket.create_connection(("127.0.0.1", proc.port)) as s:
        body = json.dumps(BODY).encode()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"x-vsr-delegated-credential: abc\r\n x-evil: 1\r\n"
                  b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        s.settimeout(20)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    # h11 joins an obsolete folded line into the value ("abc x-evil: 1"): no credential has a space.
    assert reply.startswith(b"HTTP/1.1 401") and b"delegated_credential_missing" in reply
    assert _log(delegated) == []


def test_a_delegated_upstream_reachable_only_by_a_shadow_does_not_load(tmp_path, agents):
    from vsr_fast.errors import ConfigError
    from vsr_fast.routing import load_file

    delegated, _ = agents
    doc = {
        "version": "v0.5",
        "providers": {"models": [model("m", f"{delegated.url}/v1"),
                                 {"name": "shadowed", "backend_refs": [{"endpoint": f"{delegated.url}/v1",
                                                                        "auth": {"credential": "delegated"}}]}]},
        "recipes": [{"name": "default", "decisions": [{"name": "all", "modelRefs": [{"model": "m"}]}]}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "global": {"plugins": [{"type": "router_replay", "configuration": {"shadow": {"model": "shadowed"}}},
                               {"type": "response_cache", "configuration": {"scope": "team"}}]},
    }
    with pytest.raises(ConfigError) as caught:
        load_file(write_config(doc, str(tmp_path)))
    text = "\n".join(caught.value.lines)
    assert "upstream 'shadowed' is delegated and global.services.authz.delegated_credential.enabled is false" in text
    assert "global.plugins[0].configuration.shadow.model" in text
    assert "global.plugins[1].configuration.scope" in text
    assert all("\n" not in line for line in caught.value.lines)
    assert os.path.exists(write_config(doc, str(tmp_path)))
