"""What a key may call and what its limits count, end to end: real routers, a real Redis, the official SDKs.

- A request its key may not make (a model or entrypoint outside its lists) is refused 403 before its limits
  are asked: it takes no place in the requests-per-minute window, and once the window is full it is still a
  403, never a 429 that tells the client to retry a call that can never succeed. On Chat and count_tokens.
- ``vsr-fast keys create --config`` and ``POST /api/v1/keys`` refuse model and entrypoint names the
  configuration does not declare, as the file's loader does; a stored key naming one anyway (made before a
  reload removed it) fails closed: the name never reaches the default recipe.
- A key with limits reads them in OpenAI's ``x-ratelimit-*`` headers, on its answers and its 429s; a key
  without limits gets none.
"""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from .procs import mock_upstream, model, redis_prefix, router, write_config
from .test_e2e_auth import ADMIN_KEY, REDIS_URL, _an, _chat, _oa, auth_doc, keys_cli, prefix, sha  # noqa: F401

HI = [{"role": "user", "content": "hi"}]


def _store(prefix: str) -> dict:
    return {"backend": "redis", "url": REDIS_URL, "prefix": prefix, "refresh_ms": 100}


def _stored_key(prefix: str, **fields) -> str:
    """A key written to the store as it was accepted before (no check against today's configuration)."""
    from vsr_fast.auth.keys import KeyFields
    from vsr_fast.auth.store import KeyStore
    from vsr_fast.config.auth import AuthStore
    store = KeyStore(AuthStore(backend="redis", url=REDIS_URL, prefix=prefix))
    try:
        return store.create(KeyFields(**fields))
    finally:
        store.close()


AUTO_KEY, LIMITED_KEY, FREE_KEY, ANTH_KEY = ("vsk-auto-" + "x" * 32, "vsk-limited-" + "l" * 32, "vsk-free-" + "f" * 32,
                                               "vsk-anth-" + "a" * 32)


@pytest.fixture(scope="module")
def declared(mock, tmp_path_factory):
    """(router, its admin listener's URL): the tests below share it, each with keys of its own (a key's limit window
    is its own), a key store under a prefix of the module's own, an admin listener."""
    keys = [*auth_doc(mock.url)["global"]["router"]["auth"]["keys"],
            {"id": "auto", "sha256": sha(AUTO_KEY), "entrypoints": ["vsr/auto"], "limits": {"rpm": 1}},
            {"id": "limited", "sha256": sha(LIMITED_KEY), "limits": {"rpm": 2, "tpm": 100_000}},
            {"id": "free", "sha256": sha(FREE_KEY)},
            {"id": "anth", "sha256": sha(ANTH_KEY), "models": ["m-anthropic"], "limits": {"rpm": 2}}]
    with redis_prefix("key-access") as p:
        doc = auth_doc(mock.url, store=_store(p), keys=keys)
        doc["listeners"] = [{"name": "main", "port": 0}, {"name": "ops", "role": "admin", "port": 0}]
        with router(write_config(doc, str(tmp_path_factory.mktemp("declared")))) as proc:
            yield proc, next(line for line in proc.lines if line.startswith("vsr-fast: admin on")).split()[-1]


def test_refused_requests_take_no_place_in_the_window(mock, tmp_path, prefix):
    path = write_config(auth_doc(mock.url, store=_store(prefix)), str(tmp_path))
    made = keys_cli("create", "--config", path, "eve", "--model", "m", "--rpm", "2", "--json")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)["key"]
    with router(path) as proc:
        c, an = _oa(proc.url, key), _an(proc.url, key)
        for _ in range(2):
            with pytest.raises(openai.PermissionDeniedError) as caught:
                _chat(c, "m-anthropic")
            assert caught.value.body["code"] == "model_not_allowed"
            with pytest.raises(anthropic.PermissionDeniedError):
                an.messages.count_tokens(model="m-anthropic", messages=HI)
        assert [_chat(c, "m").choices[0].message.content for _ in range(2)], "the refusals took no place"
        with pytest.raises(openai.RateLimitError):
            _chat(c, "m")
        # The window is full: a chat request's limits answer before its body is read (a key over its limits holds
        # no body reads), so even a name the key may never use is told to wait; count_tokens, checked against the
        # limits only after its name, is still told no.
        with pytest.raises(openai.RateLimitError):
            _chat(c, "m-anthropic")
        with pytest.raises(anthropic.PermissionDeniedError):
            an.messages.count_tokens(model="m-anthropic", messages=HI)


def test_an_entrypoint_refusal_takes_no_place_either(declared):
    proc, _ = declared
    c = _oa(proc.url, AUTO_KEY)
    for _ in range(3):
        with pytest.raises(openai.PermissionDeniedError):
            _chat(c, "vsr/other")
    assert _chat(c, "vsr/auto").choices[0].message.content
    with pytest.raises(openai.RateLimitError):
        _chat(c, "vsr/auto")
    with pytest.raises(openai.RateLimitError):      # a full window answers before the body (and name) is read
        _chat(c, "vsr/other")


def test_the_cli_refuses_undeclared_names(mock, tmp_path, prefix):
    path = write_config(auth_doc(mock.url, store=_store(prefix)), str(tmp_path))
    bad = keys_cli("create", "--config", path, "lee", "--entrypoint", "vsr/other", "--model", "m",
                   "--model", "ghost-model", "--entrypoint", "nope")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "models[1]: unknown_model: 'ghost-model'" in bad.stderr, bad.stderr
    assert "entrypoints[1]: unknown_entrypoint: 'nope'" in bad.stderr, bad.stderr
    listed = keys_cli("list", "--config", path, "--json")
    assert json.loads(listed.stdout) == [], "nothing was stored"
    good = keys_cli("create", "--config", path, "lee", "--entrypoint", "vsr/other", "--model", "m")
    assert good.returncode == 0, good.stderr


def test_the_http_api_refuses_undeclared_names(declared):
    _, admin = declared
    r = httpx.post(f"{admin}/api/v1/keys", json={"id": "jack", "models": ["m", "nonexistent-model"]})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "unknown_model" and err["param"] == "models[1]", err
    r = httpx.post(f"{admin}/api/v1/keys", json={"id": "jack", "entrypoints": ["nope"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_entrypoint", r.text
    assert r.json()["error"]["param"] == "entrypoints[0]"
    assert [k for k in httpx.get(f"{admin}/api/v1/keys").json()["keys"] if k["source"] == "store"] == []
    # A body's fault has the path to its field and its kind, as the client APIs answer (trial 9d).
    for body, code, param in (
            (b'{"id": "k5", "limits": {"rpm": "10"}}', "invalid_type", "limits.rpm"),
            (b'{"id": "k7", "bogus": 1}', "unknown_parameter", "bogus"),
            (b'{}', "invalid_value", "id"),
            (b'{"id": "k\xff"}'.decode("unicode_escape").encode("latin-1"), "invalid_utf8", "id"),
            (b'{"id": "wide", "groups": [' + b",".join([b'"g"'] * 200_001) + b"]}", "invalid_value", "groups"),
            # Ids the routes that revoke and rotate could never address.
            (b'{"id": "team/bot"}', "invalid_value", "id"),
            (b'{"id": ".."}', "invalid_value", "id")):
        r = httpx.post(f"{admin}/api/v1/keys", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, (body[:40], r.text)
        err = r.json()["error"]
        assert (err["code"], err["param"]) == (code, param), (body[:40], err)
    assert [k for k in httpx.get(f"{admin}/api/v1/keys").json()["keys"] if k["source"] == "store"] == []
    assert httpx.post(f"{admin}/api/v1/keys", json={"id": "jack", "models": ["m"]}).status_code == 201


def test_a_stored_key_naming_what_no_longer_exists_fails_closed(mock, tmp_path, prefix):
    """Keys stored before a reload removed a model and an entrypoint: the names lead nowhere, least of all to
    the default recipe."""
    lee = _stored_key(prefix, id="lee", entrypoints=["vsr/other"], models=["m-anthropic", "gone-model"])
    jack = _stored_key(prefix, id="jack", entrypoints=["gone-entrypoint"], models=["m"])
    with router(write_config(auth_doc(mock.url, store=_store(prefix)), str(tmp_path))) as proc:
        for key, name in ((lee, "gone-model"), (jack, "gone-entrypoint"), (lee, "anything-else")):
            with pytest.raises(openai.PermissionDeniedError) as caught:
                _chat(_oa(proc.url, key), name)
            assert caught.value.body["code"] == "model_not_allowed", (name, caught.value.body)
        r = _oa(proc.url, lee).chat.completions.with_raw_response.create(model="m-anthropic", messages=HI)
        assert r.headers["x-vsr-selected-model"] == "m-anthropic"
        assert _chat(_oa(proc.url, jack), "m").choices[0].message.content


RESET = r"^(\d+s|\d+m\d+s)$"


def test_a_key_with_limits_reads_them_in_openais_headers(declared):
    import re
    proc, _ = declared
    limited, free = LIMITED_KEY, FREE_KEY
    c = _oa(proc.url, limited).chat.completions
    seen = []
    for _ in range(2):
        r = c.with_raw_response.create(model="vsr/auto", messages=HI)
        seen.append(r.headers["x-ratelimit-remaining-requests"])
        assert r.headers["x-ratelimit-limit-requests"] == "2"
        assert re.match(RESET, r.headers["x-ratelimit-reset-requests"]), r.headers
        assert r.headers["x-ratelimit-limit-tokens"] == "100000"
        assert 0 < int(r.headers["x-ratelimit-remaining-tokens"]) <= 100_000
        assert re.match(RESET, r.headers["x-ratelimit-reset-tokens"]), r.headers
    assert seen == ["1", "0"]
    with pytest.raises(openai.RateLimitError) as caught:
        c.create(model="vsr/auto", messages=HI)
    h = caught.value.response.headers
    assert h["x-ratelimit-limit-requests"] == "2" and h["x-ratelimit-remaining-requests"] == "0", h
    assert re.match(RESET, h["x-ratelimit-reset-requests"]) and h["x-ratelimit-reset-requests"] != "0s", h
    counted = httpx.post(f"{proc.url}/v1/messages/count_tokens", headers={"x-api-key": limited},
                         json={"model": "vsr/auto", "messages": HI}, timeout=30)
    assert counted.status_code == 429 and counted.headers["x-ratelimit-remaining-requests"] == "0"
    r = _oa(proc.url, free).chat.completions.with_raw_response.create(model="vsr/auto", messages=HI)
    assert not [k for k in r.headers if k.startswith("x-ratelimit-")], "a key without limits gets none"


def test_a_backends_own_rate_limit_headers_reach_the_client_renamed(tmp_path):
    """A backend's x-ratelimit-* and anthropic-ratelimit-* arrive under x-vsr-provider-*, on whole answers,
    streams and its error answers; no other backend header is copied, and the caller's own are not them."""
    flags = ["--header", "x-ratelimit-remaining-requests: 499", "--header", "X-RateLimit-Reset-Tokens: 6m0s",
             "--header", "anthropic-ratelimit-tokens-remaining: 7", "--header", "x-authz-user-id: someone",
             "--header", "set-cookie: session=secret",
             # ratelimit-looking names that are no provider's, and a documented one carrying a secret: not copied.
             "--header", "x-ratelimit-org-secret: 1000", "--header", "anthropic-ratelimit-requests-limit: sk live key"]
    with mock_upstream(*flags) as backend:
        doc = {"version": "v0.5", "providers": {"models": [model("m", f"{backend.url}/v1")]},
               "recipes": [{"name": "default", "decisions": [{"name": "all", "modelRefs": [{"model": "m"}]}]}]}
        with router(write_config(doc, str(tmp_path))) as proc:
            c = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0).chat.completions
            whole = c.with_raw_response.create(model="m", messages=HI).headers
            with c.with_streaming_response.create(model="m", messages=HI, stream=True) as streamed:
                stream = streamed.headers
                streamed.read()
            httpx.post(f"{backend.url}/_mock/config", json={"fail_first": 1, "fail_status": 400})
            with pytest.raises(openai.BadRequestError) as caught:
                c.create(model="m", messages=HI)
            for h in (whole, stream, caught.value.response.headers):
                assert h["x-vsr-provider-ratelimit-remaining-requests"] == "499", h
                assert h["x-vsr-provider-ratelimit-reset-tokens"] == "6m0s"
                assert h["x-vsr-provider-anthropic-ratelimit-tokens-remaining"] == "7"
                assert "x-ratelimit-remaining-requests" not in h, "the caller's own are not the backend's"
                assert "set-cookie" not in h and "x-authz-user-id" not in h
                assert not [k for k in h if "authz" in k or "cookie" in k], h
                assert "x-vsr-provider-ratelimit-org-secret" not in h
                assert "x-vsr-provider-anthropic-ratelimit-requests-limit" not in h


def test_a_refusal_after_routing_keeps_its_place_and_a_full_window_holds_no_body_read(declared):
    """The name a key may send is free to refuse; a route its models cannot serve is refused only after its signals
    ran, so it keeps its place (it cost the router something). A key over its window is refused before its body is
    read: an invalid body gets the 429, not a 400 that says it was parsed."""
    proc, _ = declared
    key = ANTH_KEY
    c = _oa(proc.url, key)
    for _ in range(2):       # vsr/auto routes to m, which the key may not reach: 403 after routing
        with pytest.raises(openai.PermissionDeniedError):
            _chat(c, "vsr/auto")
    with pytest.raises(openai.RateLimitError):
        _chat(c, "m-anthropic")
    bad = httpx.post(f"{proc.url}/v1/chat/completions", content=b"{not json",
                     headers={"authorization": f"Bearer {key}", "content-type": "application/json"})
    assert bad.status_code == 429, bad.text
