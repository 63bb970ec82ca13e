"""Who is calling, end to end: real routers, a real Redis, the official SDKs.

- A missing, wrong or revoked key gets each client API's own 401 (OpenAI's
  ``authentication_error`` on Chat, Responses, Images and the model list;
  Anthropic's on Messages and count_tokens); a revocation made with the CLI
  reaches a running router without a restart.
- A key limited to one entrypoint gets 403 elsewhere; a key limited to models
  only reaches those.
- Requests and tokens per minute are one window for two routers sharing Redis;
  with Redis away (from the start, or stopping mid-run and coming back) each
  router holds the limit by itself and keeps the last keys it read.
- Admin routes are not served on the serving listener when an admin listener
  exists, and need an admin key when keys are on and none does.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import anthropic
import httpx
import openai
import pytest
import redis
import yaml

from .procs import (ROOT, Proc, cli, cli_process, free_port, model, redis_prefix, refused_port, router, wait_until,
                    write_config)
from .test_events_fixtures import own_redis  # noqa: F401

REDIS_URL = "redis://127.0.0.1:6379/0"
KEY = "vsk-declared-" + "k" * 32
ADMIN_KEY = "vsk-admin-" + "a" * 32
OTHER_KEY = "vsk-other-" + "o" * 32
MODELS_KEY = "vsk-models-" + "m" * 32


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def auth_doc(mock_url: str, *, keys: list[dict] | None = None, store: dict | None = None, **router_extra) -> dict:
    """Two entrypoints on one recipe, an OpenAI and an Anthropic model, client keys on."""
    auth: dict = {"enabled": True, "keys": keys if keys is not None else [
        {"id": "declared", "sha256": sha(KEY)},
        {"id": "ops", "sha256": sha(ADMIN_KEY), "admin": True},
        {"id": "auto-only", "sha256": sha(OTHER_KEY), "entrypoints": ["vsr/auto"]},
    ]}
    if store is not None:
        auth["store"] = store
    return {
        "version": "v0.5",
        "providers": {"models": [model("m", f"{mock_url}/v1", upstream_name="mock-m"),
                                 {**model("m-anthropic", f"{mock_url}/v1"), "api_format": "anthropic"}]},
        "recipes": [{"name": "default", "decisions": [
            {"name": "all", "priority": 1, "rules": {"operator": "AND", "conditions": []},
             "modelRefs": [{"model": "m"}]}]}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True},
                        {"api": "chat", "model_names": ["vsr/other"], "recipe": "default"}],
        "global": {"router": {"auth": auth, **router_extra}},
    }


def keys_cli(*args: str) -> subprocess.CompletedProcess:
    """``vsr-fast keys``: its main() in this process (test_a_revoked_stored_key_stops_on_a_running_router runs the
    command itself once)."""
    return cli("keys", *args)


@pytest.fixture
def prefix():
    """A Redis prefix of this test's own, removed afterwards."""
    with redis_prefix("auth") as p:
        yield p


@pytest.fixture(scope="module")
def keyed(mock, tmp_path_factory):
    """The declared keys, one more limited to a model, replays capturing request bodies."""
    doc = auth_doc(mock.url, keys=[*auth_doc(mock.url)["global"]["router"]["auth"]["keys"],
                                   {"id": "anth", "sha256": sha(MODELS_KEY), "models": ["m-anthropic"]}])
    doc["global"]["plugins"] = [{"type": "router_replay", "configuration": {"capture_request_body": True}}]
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


@pytest.fixture(scope="module")
def listening(mock, tmp_path_factory):
    """(router, its admin listener's URL, its key store's Redis prefix): a serving listener on a port of the file's
    (the command line names none), an admin listener, stored keys under a prefix of the module's own."""
    port = free_port()
    with redis_prefix("auth-listening") as prefix:
        doc = auth_doc(mock.url, store={"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100})
        doc["listeners"] = [{"name": "main", "address": "127.0.0.1", "port": port},
                            {"name": "ops", "role": "admin", "port": 0}]
        path = write_config(doc, str(tmp_path_factory.mktemp("cfg-listening")))
        with Proc(["-m", "vsr_fast", "serve", "--config", path], "vsr-fast: serving on",
                  env={"VSR_STATE_DIR": tempfile.mkdtemp(prefix="vsr-state-")}) as proc:
            assert proc.port == port
            admin = next(line for line in proc.lines if line.startswith("vsr-fast: admin on")).split()[-1]
            yield proc, admin, prefix


def no_stored_keys(prefix: str) -> None:
    """The store under ``prefix`` emptied (a test's keys start from none), its limit windows too."""
    r = redis.Redis.from_url(REDIS_URL)
    for k in r.scan_iter(match=prefix + "*"):
        r.delete(k)
    r.close()


def _oa(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key or "unused", max_retries=0)


def _an(url: str, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=key or "unused", max_retries=0)


def _chat(c: openai.OpenAI, name: str = "vsr/auto"):
    return c.chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}])


def _openai_calls(c: openai.OpenAI, omit: bool = False):
    """Every OpenAI-shaped client API; ``omit`` sends no Authorization header at all."""
    h = {"extra_headers": {"Authorization": openai.Omit()}} if omit else {}
    msgs = [{"role": "user", "content": "hi"}]
    return {
        "chat": lambda: c.chat.completions.create(model="vsr/auto", messages=msgs, **h),
        "chat-stream": lambda: list(c.chat.completions.create(model="vsr/auto", stream=True, messages=msgs, **h)),
        "responses": lambda: c.responses.create(model="vsr/auto", input="hi", **h),
        "images": lambda: c.images.generate(model="vsr/auto", prompt="a cat", **h),
        "models": lambda: c.models.list(**h),
        "model": lambda: c.models.retrieve("vsr/auto", **h),
    }


def _anthropic_calls(c: anthropic.Anthropic, omit: bool = False):
    h = {"extra_headers": {"x-api-key": anthropic.Omit()}} if omit else {}
    msgs = [{"role": "user", "content": "hi"}]
    return {
        "messages": lambda: c.messages.create(model="vsr/auto", max_tokens=16, messages=msgs, **h),
        "count_tokens": lambda: c.messages.count_tokens(model="vsr/auto", messages=msgs, **h),
        "models": lambda: c.models.list(**h),
        "model": lambda: c.models.retrieve("vsr/auto", **h),
    }


def assert_openai_401(call, code: str) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        call()
    err = caught.value
    assert err.status_code == 401
    assert err.body["type"] == "authentication_error" and err.body["code"] == code, err.body
    assert err.response.headers["x-vsr-response-path"] == "error"


def assert_anthropic_401(call) -> None:
    with pytest.raises(anthropic.AuthenticationError) as caught:
        call()
    err = caught.value
    assert err.status_code == 401
    assert err.body.pop("request_id") == err.request_id == err.response.headers["x-request-id"]
    assert err.body == {"type": "error", "error": {"type": "authentication_error", "message": err.body["error"]["message"]}}


@pytest.mark.parametrize("key,code", [("", "missing_api_key"), ("vsk-wrong", "invalid_api_key"),
                                      (KEY[:-1] + "X", "invalid_api_key")])
def test_missing_or_wrong_key_gets_each_protocols_401(keyed, key, code):
    for name, call in _openai_calls(_oa(keyed.url, key), omit=not key).items():
        assert_openai_401(call, code)
    for name, call in _anthropic_calls(_an(keyed.url, key), omit=not key).items():
        assert_anthropic_401(call)


def test_the_right_key_reaches_every_client_api(keyed):
    c = _oa(keyed.url, KEY)
    assert _chat(c).choices[0].message.content
    assert c.responses.create(model="vsr/auto", input="hi").output_text
    assert [m.id for m in c.models.list()] and c.models.retrieve("vsr/auto").id == "vsr/auto"
    a = _an(keyed.url, KEY)                  # x-api-key, as Anthropic's SDK sends it
    assert a.messages.create(model="vsr/auto", max_tokens=16, messages=[{"role": "user", "content": "hi"}]).content
    assert [m.id for m in a.models.list()] and a.models.retrieve("vsr/auto").type == "model"
    bearer = anthropic.Anthropic(base_url=keyed.url, auth_token=KEY, max_retries=0)     # Authorization: Bearer
    assert bearer.messages.count_tokens(model="vsr/auto", messages=[{"role": "user", "content": "hi"}]).input_tokens


def test_x_api_key_counts_on_messages_only(keyed):
    """Anthropic's key header is a Messages header: on Chat only Authorization counts."""
    r = httpx.post(f"{keyed.url}/v1/chat/completions", headers={"x-api-key": KEY},
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"


def test_a_key_limited_to_one_entrypoint(keyed):
    c = _oa(keyed.url, OTHER_KEY)
    assert _chat(c, "vsr/auto").choices[0].message.content
    with pytest.raises(openai.PermissionDeniedError) as caught:
        _chat(c, "vsr/other")
    assert caught.value.body["code"] == "model_not_allowed" and caught.value.body["param"] == "model"
    with pytest.raises(openai.PermissionDeniedError):
        _chat(c, "m")                        # a provider model named directly is not one of its entrypoints
    with pytest.raises(anthropic.PermissionDeniedError) as an:
        _an(keyed.url, OTHER_KEY).messages.create(model="vsr/other", max_tokens=16,
                                                  messages=[{"role": "user", "content": "hi"}])
    assert an.value.body["error"]["type"] == "permission_error"
    assert _chat(_oa(keyed.url, KEY), "vsr/other").choices[0].message.content, "an unrestricted key reaches both"


def test_a_key_limited_to_models_reaches_only_them(keyed):
    c = _oa(keyed.url, MODELS_KEY)
    r = c.chat.completions.with_raw_response.create(model="m-anthropic", messages=[{"role": "user", "content": "hi"}])
    assert r.headers["x-vsr-selected-model"] == "m-anthropic"
    with pytest.raises(openai.PermissionDeniedError):
        _chat(c, "m")


def test_a_revoked_stored_key_stops_on_a_running_router(listening):
    proc, _admin, prefix = listening
    no_stored_keys(prefix)
    made = cli_process("keys", "create", "--redis", REDIS_URL, "--prefix", prefix, "ci-bot", "--team", "platform",
                       "--json")      # the command a user runs; its main() in this process below
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)["key"]
    assert key.startswith("vsk-")
    stored = redis.Redis.from_url(REDIS_URL).hgetall(prefix + "keys")
    assert list(stored) == [sha(key).encode()] and key.encode() not in b"".join(stored.values()), \
        "Redis keeps the key's SHA-256, never the key"
    wait_until(lambda: httpx.get(f"{proc.url}/v1/models", headers={"authorization": f"Bearer {key}"}
                                 ).status_code == 200, "the running router to read the new key")
    c = _oa(proc.url, key)
    assert _chat(c).choices[0].message.content
    listed = keys_cli("list", "--redis", REDIS_URL, "--prefix", prefix, "--json")
    assert [row["id"] for row in json.loads(listed.stdout)] == ["ci-bot"] and key not in listed.stdout
    assert keys_cli("revoke", "--redis", REDIS_URL, "--prefix", prefix, "ci-bot").returncode == 0

    def refused() -> bool:
        try:
            _chat(c)
        except openai.AuthenticationError:
            return True
        return False

    wait_until(refused, "the revoked key to be refused")
    assert_anthropic_401(_anthropic_calls(_an(proc.url, key))["messages"])
    # A key made while the router runs works without a restart, and rotation retires its old key.
    second = json.loads(keys_cli("create", "--redis", REDIS_URL, "--prefix", prefix, "second", "--json").stdout)["key"]
    wait_until(lambda: httpx.get(f"{proc.url}/v1/models", headers={"authorization": f"Bearer {second}"}
                                 ).status_code == 200, "the new key to be accepted")
    rotated = json.loads(keys_cli("rotate", "--redis", REDIS_URL, "--prefix", prefix, "second", "--json").stdout)["key"]
    wait_until(lambda: httpx.get(f"{proc.url}/v1/models", headers={"authorization": f"Bearer {second}"}
                                 ).status_code == 401, "the rotated-out key to be refused")
    assert httpx.get(f"{proc.url}/v1/models", headers={"authorization": f"Bearer {rotated}"}).status_code == 200
    assert all(key not in line and rotated not in line for line in proc.lines), "a key reached the log"


# Metered keys, each its own window: (id, key, limits).
METERED = {name: (f"metered-{name}", f"vsk-metered-{name}-" + "q" * 32, limits)
           for name, limits in (("24", {"rpm": 24}), ("150", {"rpm": 150}), ("tpm", {"tpm": 100}))}


@pytest.fixture(scope="module")
def limitedboth(mock, tmp_path_factory):
    """(router a, router b, the prefix): two routers of one file sharing a Redis store, the METERED keys."""
    with redis_prefix("auth-limits") as prefix:
        store = {"backend": "redis", "url": REDIS_URL, "prefix": prefix}
        doc = auth_doc(mock.url, keys=[{"id": id_, "sha256": sha(key), "limits": limits}
                                       for id_, key, limits in METERED.values()], store=store)
        path = write_config(doc, str(tmp_path_factory.mktemp("cfg-limits")))
        with router(path) as a, router(path) as b:
            yield a, b, prefix


@pytest.mark.parametrize("limit", [24, 150])
def test_requests_per_minute_are_one_window_across_two_routers(limitedboth, limit):
    """Never past the limit; under it by at most the places each router leased and did not spend (a lease is
    one place under 50 a minute, limit/50 above: 3 of 150 here). Twice the limit is sent, few enough to end
    well within the minute on a loaded box (a longer run would rightly see the window slide)."""
    a, b, prefix = limitedboth
    metered, key, _ = METERED[str(limit)]
    lease = max(1, limit // 50)
    body = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"authorization": f"Bearer {key}"}

    def one(i: int) -> httpx.Response:
        return httpx.post(f"{(a, b)[i % 2].url}/v1/chat/completions", json=body, headers=headers, timeout=30)

    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(one, range(2 * limit)))
    live = redis.Redis.from_url(REDIS_URL).zcard(f"{prefix}limit:key:{metered}:rpm")
    ok = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code == 429]
    assert not any("deciding locally" in line for line in a.lines + b.lines), a.lines + b.lines
    assert len(ok) <= live <= limit, "the shared log holds every admission, and leased places, never past it"
    assert limit - 2 * (lease - 1) <= len(ok) <= limit, [r.status_code for r in answers]
    assert len(ok) + len(refused) == 2 * limit
    r = refused[0]
    assert r.headers["x-vsr-response-path"] == "rate_limited"
    assert 1 <= int(r.headers["retry-after"]) <= 60
    assert r.json()["error"]["type"] == "rate_limit_error" and r.json()["error"]["code"] == "rate_limit_exceeded"
    with pytest.raises(anthropic.RateLimitError) as caught:
        _an(b.url, key).messages.create(model="vsr/auto", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert caught.value.body["error"]["type"] == "rate_limit_error"
    assert caught.value.response.headers["x-vsr-response-path"] == "rate_limited"


def test_tokens_per_minute_count_streamed_usage_across_two_routers(limitedboth):
    """The mock answers 30 tokens a request; with a 100-token window the fifth request is refused."""
    a, b, prefix = limitedboth
    metered, key, _ = METERED["tpm"]
    tpm_key = f"{prefix}limit:key:{metered}:tpm"
    r = redis.Redis.from_url(REDIS_URL)
    charged = 0
    for i, proc in enumerate((a, b, a, b)):
        c = _oa(proc.url, key)
        if i % 2:
            chunks = list(c.chat.completions.create(model="vsr/auto", stream=True,
                                                    stream_options={"include_usage": True},
                                                    messages=[{"role": "user", "content": "hi"}]))
            tokens = next(ch.usage.total_tokens for ch in chunks if ch.usage)
        else:
            tokens = _chat(c).usage.total_tokens
        charged += tokens
        wait_until(lambda: sum(int(v) for v in r.hvals(tpm_key)) == charged, "the tokens to reach Redis")
    assert charged >= 100
    with pytest.raises(openai.RateLimitError) as caught:
        _chat(_oa(b.url, key))
    assert "tokens per minute" in caught.value.body["message"]
    # The Messages API is refused by the same window. b's view holds every token (it synced when it
    # charged the last answer); a's may be up to one sync interval old (the documented overshoot), so a
    # refuses once its view catches up, never later than its next sync.
    with pytest.raises(anthropic.RateLimitError):
        _an(b.url, key).messages.create(model="vsr/auto", max_tokens=8, messages=[{"role": "user", "content": "x"}])

    def a_refuses() -> bool:
        try:
            _an(a.url, key).messages.create(model="vsr/auto", max_tokens=8,
                                            messages=[{"role": "user", "content": "x"}])
        except anthropic.RateLimitError:
            return True
        return False
    wait_until(a_refuses, "router a to see the shared token window")
    assert not any("deciding locally" in line for line in a.lines + b.lines), a.lines + b.lines
    r.close()


def test_with_redis_away_each_router_holds_the_limit_alone(mock, tmp_path):
    dead = f"redis://127.0.0.1:{refused_port()}/0"     # nothing listens here
    store = {"backend": "redis", "url": dead, "prefix": "vsr-test-dead:"}
    doc = auth_doc(mock.url, keys=[{"id": "metered", "sha256": sha(KEY), "limits": {"rpm": 5}}], store=store)
    with router(write_config(doc, str(tmp_path))) as proc:
        c = _oa(proc.url, KEY)
        codes = []
        for _ in range(8):
            try:
                _chat(c)
                codes.append(200)
            except openai.RateLimitError:
                codes.append(429)
        assert codes == [200] * 5 + [429] * 3, "declared keys still work, and the local window holds the limit"
        assert any("deciding locally" in line for line in proc.lines)


def test_admin_routes_are_not_served_on_the_serving_listener(listening):
    proc, admin, _prefix = listening
    assert admin.startswith("http://127.0.0.1:") and admin != proc.url
    auth = {"authorization": f"Bearer {ADMIN_KEY}"}
    preview = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}
    for method, path in (("GET", "/metrics"), ("GET", "/api/v1/replay"), ("GET", "/api/v1/replay/abc"),
                         ("POST", "/api/v1/routing/preview"), ("POST", "/api/v1/diagnostics/classify/intent")):
        served = httpx.request(method, proc.url + path, headers=auth, json=preview if method == "POST" else None)
        missing = httpx.get(proc.url + "/no/such/route")
        assert served.status_code == 404 and served.json() == missing.json(), (path, served.text)
    assert httpx.get(admin + "/metrics").status_code == 200
    assert httpx.get(admin + "/api/v1/replay").status_code == 200
    assert httpx.post(admin + "/api/v1/routing/preview", json=preview).status_code == 200
    assert httpx.post(admin + "/v1/chat/completions", json=preview, headers=auth).status_code == 404, \
        "the admin listener serves no client API"
    assert httpx.get(admin + "/health").status_code == 200 and httpx.get(proc.url + "/health").status_code == 200


def test_admin_routes_need_an_admin_key_without_an_admin_listener(keyed):
    assert httpx.get(f"{keyed.url}/metrics").status_code == 401
    refused = httpx.get(f"{keyed.url}/api/v1/replay", headers={"authorization": f"Bearer {KEY}"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only"
    classify = httpx.post(f"{keyed.url}/api/v1/diagnostics/classify/intent", json={"text": "hi"},
                          headers={"authorization": f"Bearer {KEY}"})
    assert classify.status_code == 403 and classify.json()["error"]["code"] == "admin_only"
    metrics = httpx.get(f"{keyed.url}/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert metrics.status_code == 200
    assert 'vsr_auth_failures_total{api="admin",code="missing_api_key"}' in metrics.text


def test_listener_address_and_port_are_honoured(listening):
    proc, _admin, _prefix = listening
    doc = yaml.safe_load(open(proc.args[proc.args.index("--config") + 1]))
    assert doc["listeners"][0] == {"name": "main", "address": "127.0.0.1", "port": proc.port}
    assert "--port" not in proc.args and "--host" not in proc.args, "the file's listener, not the command line's"
    assert httpx.get(f"http://127.0.0.1:{proc.port}/health").status_code == 200


def test_session_headers_name_the_session(keyed):
    proc = keyed
    auth = {"authorization": f"Bearer {ADMIN_KEY}"}
    ids = {}
    for name in ("x-vsr-session-id", "x-session-id", "x-claude-code-session-id"):
        r = httpx.post(f"{proc.url}/v1/chat/completions", headers={**auth, name: f"s-{name}"},
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
        ids[name] = r.headers["x-vsr-replay-id"]

    def record(rid: str):
        got = httpx.get(f"{proc.url}/api/v1/replay/{rid}", headers=auth)
        return got.json() if got.status_code == 200 else None

    for name, rid in ids.items():
        wait_until(lambda: record(rid) is not None, f"the replay record of {name}")
        assert record(rid)["session_id"] == f"s-{name}"
        assert KEY not in json.dumps(record(rid)) and ADMIN_KEY not in json.dumps(record(rid))


def test_keys_are_managed_on_the_admin_listener(listening):
    proc, admin, prefix = listening
    no_stored_keys(prefix)
    assert httpx.post(f"{proc.url}/api/v1/keys", json={"id": "x"},
                      headers={"authorization": f"Bearer {ADMIN_KEY}"}).status_code == 404
    made = httpx.post(f"{admin}/api/v1/keys", json={"id": "web", "team": "web", "limits": {"rpm": 5}})
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    assert httpx.post(f"{admin}/api/v1/keys", json={"id": "web"}).status_code == 409
    assert httpx.post(f"{admin}/api/v1/keys", json={"id": "w", "nope": 1}).status_code == 400
    declared = "declared"                         # auth_doc's first key
    clash = httpx.post(f"{admin}/api/v1/keys", json={"id": declared})
    assert clash.status_code == 409 and "declared in the configuration" in clash.text, clash.text
    # A declared key is changed in the file: revoking or rotating it over HTTP says so, not "no key".
    assert httpx.get(f"{admin}/api/v1/keys/{declared}").json()["source"] == "config"
    for refused in (httpx.delete(f"{admin}/api/v1/keys/{declared}"),
                    httpx.post(f"{admin}/api/v1/keys/{declared}/rotate")):
        assert refused.status_code == 409 and "declared in the configuration" in refused.text, refused.text
    listed = [k for k in httpx.get(f"{admin}/api/v1/keys").json()["keys"] if k["source"] == "store"]
    assert [k["id"] for k in listed] == ["web"] and listed[0]["limits"]["rpm"] == 5 and key not in str(listed)
    ok = lambda: httpx.get(f"{proc.url}/v1/models", headers={"authorization": f"Bearer {key}"}).status_code
    wait_until(lambda: ok() == 200, "the new key to be accepted")
    assert httpx.delete(f"{admin}/api/v1/keys/web").status_code == 200
    assert httpx.delete(f"{admin}/api/v1/keys/web").status_code == 404
    wait_until(lambda: ok() == 401, "the revoked key to be refused")


@pytest.fixture(scope="module")
def slow_refresh(mock, tmp_path_factory):
    """(router, its admin URL, the prefix): as ``listening``, its stored keys polled only once a second (the most
    ``refresh_ms`` allows), so what the poll would pick up later is told apart from what the admin route does."""
    with redis_prefix("auth-slow-refresh") as prefix:
        doc = auth_doc(mock.url, store={"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 1000})
        doc["listeners"] = [{"name": "main", "address": "127.0.0.1", "port": 0},
                            {"name": "ops", "role": "admin", "port": 0}]
        path = write_config(doc, str(tmp_path_factory.mktemp("cfg-slow-refresh")))
        with Proc(["-m", "vsr_fast", "serve", "--config", path], "vsr-fast: serving on",
                  env={"VSR_STATE_DIR": tempfile.mkdtemp(prefix="vsr-state-")}) as proc:
            admin = next(line for line in proc.lines if line.startswith("vsr-fast: admin on")).split()[-1]
            yield proc, admin, prefix


def test_keys_changed_over_http_apply_on_this_router_from_the_answer_on(slow_refresh):
    """The README's key table: a rotated-out key stops at once. On the router that answered the admin route the
    change applies before the answer is sent (not at its next poll); other routers see it within refresh_ms."""
    proc, admin, prefix = slow_refresh
    no_stored_keys(prefix)
    status = lambda key: httpx.get(f"{proc.url}/v1/models", headers={"authorization": f"Bearer {key}"}).status_code
    chat = lambda key: httpx.post(f"{proc.url}/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                                  json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
    for round_ in range(3):
        made = httpx.post(f"{admin}/api/v1/keys", json={"id": f"tenant-{round_}", "tenant": "t"})
        assert made.status_code == 201, made.text
        old = made.json()["key"]
        assert status(old) == 200, "a key made over HTTP is accepted from the answer on"
        rotated = httpx.post(f"{admin}/api/v1/keys/tenant-{round_}/rotate")
        assert rotated.status_code == 200, rotated.text
        assert chat(old).status_code == 401, "the rotated-out key is refused from the rotate's answer on"
        new = rotated.json()["key"]
        assert chat(new).status_code == 200, "and its new key accepted"
        assert httpx.delete(f"{admin}/api/v1/keys/tenant-{round_}").status_code == 200
        assert status(new) == 401, "a key revoked over HTTP is refused from the answer on"


PROBE_KEY = "vsk-probe-" + "p" * 32


def test_redis_going_away_mid_run_and_coming_back(mock, tmp_path, own_redis):
    """Two routers share a Redis of our own, which stops mid-run (``SHUTDOWN SAVE``) and starts again.

    Away: each router keeps accepting the stored key it read last, refuses unknown keys, and admits at most
    the limit by itself, counting what it admitted while Redis answered. Back: the windows are shared again
    (a fresh key's limit holds across both routers), a revocation reaches both, and the key spent while Redis
    was away stays refused, although the restored log lacks those admissions."""
    prefix = "vsr-test-midrun:"
    made = keys_cli("create", "--redis", own_redis.url, "--prefix", prefix, "stored", "--rpm", "6", "--json")
    assert made.returncode == 0, made.stderr
    stored = json.loads(made.stdout)["key"]
    store = {"backend": "redis", "url": own_redis.url, "prefix": prefix, "refresh_ms": 100}
    doc = auth_doc(mock.url, store=store, keys=[
        {"id": "later", "sha256": sha(KEY), "limits": {"rpm": 6}},
        {"id": "probe", "sha256": sha(PROBE_KEY), "limits": {"rpm": 100_000}}])
    a, b = both = (router(write_config(doc, str(tmp_path))), router(write_config(doc, str(tmp_path))))
    body = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}

    def send(proc, key: str) -> int:
        return httpx.post(f"{proc.url}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"},
                          timeout=30).status_code

    def log_count(proc, text: str) -> int:
        return sum(text in line for line in proc.lines)

    with a, b:
        assert [send(a, stored), send(a, stored)] == [200, 200]
        r = redis.Redis.from_url(own_redis.url)
        assert r.zcard(f"{prefix}limit:key:stored:rpm") == 2, "the shared log counts them while Redis answers"
        r.close()

        own_redis.shutdown_saving()
        codes_a = [send(a, stored) for _ in range(8)]
        codes_b = [send(b, stored) for _ in range(8)]
        assert codes_a == [200] * 4 + [429] * 4, "a router that admitted 2 of 6 before admits 4 more alone"
        assert codes_b == [200] * 6 + [429] * 2, "the other router admits the limit alone, never more"
        assert send(a, "vsk-unknown") == 401 and send(b, "vsk-unknown") == 401
        for proc in both:
            assert log_count(proc, "deciding locally") >= 1
            wait_until(lambda: log_count(proc, "keeping the last keys read") == 1, "the key store's outage logged")

        own_redis.start()
        for proc in both:     # a probe key's requests until each router's limiter has used Redis again
            wait_until(lambda: send(proc, PROBE_KEY) == 200 and log_count(proc, "answers again") >= 1,
                       "the limiter to reach Redis again")
        later = [send((a, b)[i % 2], KEY) for i in range(12)]
        assert later.count(200) == 6 and later.count(429) == 6, "one shared window again, not one per router"
        r = redis.Redis.from_url(own_redis.url)
        assert r.zcard(f"{prefix}limit:key:later:rpm") == 6
        assert r.zcard(f"{prefix}limit:key:stored:rpm") == 2, "the restored log never saw the local admissions"
        r.close()
        assert [send(a, stored), send(b, stored)] == [429, 429], "each router still counts what it admitted alone"

        assert keys_cli("revoke", "--redis", own_redis.url, "--prefix", prefix, "stored").returncode == 0
        for proc in both:
            wait_until(lambda: send(proc, stored) == 401, "the revocation to reach a router after the outage")
        assert all(stored not in line for line in a.lines + b.lines)


def _outside_address() -> str | None:
    """This host's address on a network (not loopback), if it has one."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 9))   # no packet is sent: only the route is looked up
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_without_keys_or_an_admin_listener_the_operators_routes_answer_this_host_only():
    """Bound to every address with nothing guarding them, reload, replay bodies and the context stores' writes
    answer only a caller on this host; scrapes and probes answer anyone."""
    outside = _outside_address()
    if outside is None:
        pytest.skip("this machine has no address but loopback")
    with router(str(ROOT / "config" / "quickstart.yaml"), "--host", "0.0.0.0") as proc:
        port = proc.url.rsplit(":", 1)[1]
        remote, local = f"http://{outside}:{port}", f"http://127.0.0.1:{port}"
        for method, path in [("POST", "/admin/reload"), ("GET", "/api/v1/replay"),
                             ("POST", "/api/v1/routing/preview")]:
            refused = httpx.request(method, remote + path, json={})
            assert refused.status_code == 403, (path, refused.text)
            assert refused.json()["error"]["code"] == "admin_only" and "role: admin" in refused.text
            assert httpx.request(method, local + path, json={"model": "vsr/auto", "messages": [
                {"role": "user", "content": "hi"}]}).status_code != 403, path
        assert httpx.get(remote + "/metrics").status_code == 200
        assert httpx.get(remote + "/ready").status_code == 200
