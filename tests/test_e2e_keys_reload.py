"""Client keys as a client sees them across a reload, a key store away at start, and keys limited by model:
real routers, a real Redis, the official SDKs.

- A key removed from the file is refused from the first request after ``POST /admin/reload`` (or SIGHUP);
  a changed key's limits apply at once; the stored keys keep working; the answer names no auth field as
  waiting for a restart.
- A key matching no declared key while the key store has not answered since start is 503
  ``key_store_unavailable`` (it may be a stored key), never 401.
"""
from __future__ import annotations

import json
import os
import signal

import httpx
import anthropic
import openai
import pytest
import yaml

from .procs import router, wait_until, write_config
from .test_e2e_auth import ADMIN_KEY, KEY, OTHER_KEY, REDIS_URL, _an, _chat, _oa, auth_doc, keys_cli, prefix, sha  # noqa: F401
from .test_events_fixtures import own_redis  # noqa: F401

BODY = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}


def _rewrite(path: str, doc: dict) -> None:
    with open(path + ".new", "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(path + ".new", path)


def _status(url: str, key: str) -> int:
    return httpx.post(f"{url}/v1/chat/completions", json=BODY, headers={"authorization": f"Bearer {key}"},
                      timeout=30).status_code


def test_a_reload_applies_the_files_keys(mock, tmp_path, prefix):
    made = keys_cli("create", "--redis", REDIS_URL, "--prefix", prefix, "stored", "--json")
    assert made.returncode == 0, made.stderr
    stored = json.loads(made.stdout)["key"]
    store = {"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100}
    doc = auth_doc(mock.url, store=store)
    path = write_config(doc, str(tmp_path))
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    with router(path) as proc:
        assert [_status(proc.url, k) for k in (KEY, OTHER_KEY, stored)] == [200, 200, 200]
        # Revoke "declared" by removing it; give "auto-only" a limit of one request a minute.
        doc["global"]["router"]["auth"]["keys"] = [
            {"id": "ops", "sha256": sha(ADMIN_KEY), "admin": True},
            {"id": "auto-only", "sha256": sha(OTHER_KEY), "entrypoints": ["vsr/auto"], "limits": {"rpm": 1}}]
        _rewrite(path, doc)
        r = httpx.post(f"{proc.url}/admin/reload", headers=admin, timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "reloaded", r.text
        assert r.json()["restart_required"] == [], "the file's keys take effect with the reload"

        with pytest.raises(openai.AuthenticationError) as caught:
            _chat(_oa(proc.url, KEY))
        assert caught.value.body["code"] == "invalid_api_key"
        assert caught.value.response.headers["x-vsr-config-version"] in r.json()["message"], "the new generation"
        assert [_status(proc.url, OTHER_KEY), _status(proc.url, OTHER_KEY)] == [200, 429], "its new limit applies"
        assert _status(proc.url, stored) == 200, "the stored keys are the store's, untouched by the reload"

        # SIGHUP reloads the same way: the removed key comes back when the file declares it again.
        doc["global"]["router"]["auth"]["keys"].append({"id": "declared", "sha256": sha(KEY)})
        _rewrite(path, doc)
        proc.popen.send_signal(signal.SIGHUP)
        wait_until(lambda: _status(proc.url, KEY) == 200, "the key declared again to be accepted after SIGHUP")


def test_changing_the_key_store_still_waits_for_a_restart(mock, tmp_path, prefix):
    store = {"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100}
    doc = auth_doc(mock.url, store=store)
    path = write_config(doc, str(tmp_path))
    with router(path) as proc:
        doc["global"]["router"]["auth"]["store"] = {**store, "prefix": prefix + "other:"}
        _rewrite(path, doc)
        r = httpx.post(f"{proc.url}/admin/reload", headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
        assert r.status_code == 200 and r.json()["restart_required"] == ["global.router.auth.store.prefix"], r.text


def test_a_stored_key_while_the_key_store_never_answered(mock, tmp_path, own_redis):
    """Redis is away from the start: a key matching no declared key may be a stored one, so it is told to come
    back (503 key_store_unavailable, Retry-After), never that it is invalid; once the store answers, the stored
    key works and an unknown key is 401 again."""
    prefix = "vsr-test-away-at-start:"
    made = keys_cli("create", "--redis", own_redis.url, "--prefix", prefix, "stored", "--json")
    assert made.returncode == 0, made.stderr
    stored = json.loads(made.stdout)["key"]
    own_redis.shutdown_saving()
    store = {"backend": "redis", "url": own_redis.url, "prefix": prefix, "refresh_ms": 100}
    with router(write_config(auth_doc(mock.url, store=store), str(tmp_path))) as proc:
        assert _status(proc.url, KEY) == 200, "declared keys are served"
        with pytest.raises(openai.InternalServerError) as caught:
            _chat(_oa(proc.url, stored))
        err = caught.value
        assert err.status_code == 503 and err.body["code"] == "key_store_unavailable", err.body
        assert int(err.response.headers["retry-after"]) >= 1
        with pytest.raises(anthropic.APIStatusError) as an:
            _an(proc.url, stored).messages.create(model="vsr/auto", max_tokens=8,
                                                  messages=[{"role": "user", "content": "hi"}])
        # Anthropic's shape of a 503 (the protocol's mapping): 529 overloaded_error, which its SDK retries.
        assert an.value.status_code == 529 and an.value.body["error"]["type"] == "overloaded_error", an.value.body
        assert "key store" in an.value.body["error"]["message"] and an.value.response.headers["retry-after"]

        own_redis.start()
        wait_until(lambda: _status(proc.url, stored) == 200, "the stored key once the store answers")
        assert _status(proc.url, "vsk-unknown") == 401


def test_a_stored_key_may_not_take_a_declared_id(mock, tmp_path, prefix):
    """``keys create --config`` refuses an id the file declares; a stored key made before the file declared its
    id is not accepted, and the router says so at start."""
    store = {"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100}
    made = keys_cli("create", "--redis", REDIS_URL, "--prefix", prefix, "declared", "--json")
    assert made.returncode == 0, made.stderr
    early = json.loads(made.stdout)["key"]
    path = write_config(auth_doc(mock.url, store=store), str(tmp_path))
    refused = keys_cli("create", "--config", path, "ops")
    assert refused.returncode == 1 and refused.stdout == "", refused
    assert refused.stderr.count("\n") == 1 and "'ops' is declared in " + path in refused.stderr, refused.stderr
    assert keys_cli("create", "--config", path, "fresh").returncode == 0
    with router(path) as proc:
        assert _status(proc.url, KEY) == 200 and _status(proc.url, early) == 401
        assert any("declared key are not accepted" in line and "declared" in line.rsplit(":", 1)[-1]
                   for line in proc.lines), proc.lines
