"""Origins (issue 13): a browser's request (it carries ``Origin``) from an origin not in
``global.router.cors.allow_origins`` is refused 403 in its route's protocol and never reaches a model; an
allowed origin is served with the CORS headers a page needs, its preflight answered; requests with no
``Origin`` (SDKs, agents) are never affected. Real router, the official SDKs where a route has one."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from .conftest import edge_router

ALLOWED = "https://app.example.com"
CHAT = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(scope="module")
def edge(upstream, tmp_path_factory):
    with edge_router(upstream, str(tmp_path_factory.mktemp("origin")),
                     cors={"allow_origins": [ALLOWED, "null"]}) as proc:
        yield proc


def requests_seen(upstream) -> int:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["requests"]


def test_an_unlisted_origin_is_refused_in_each_protocol_and_reaches_no_model(edge, upstream):
    before = requests_seen(upstream)
    evil = {"Origin": "https://evil.example"}
    chat = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0, default_headers=evil)
    with pytest.raises(openai.PermissionDeniedError) as caught:
        chat.chat.completions.create(**CHAT)
    assert caught.value.body["code"] == "origin_not_allowed"
    assert "https://evil.example" in caught.value.body["message"]
    claude = anthropic.Anthropic(base_url=edge.url, api_key="k", max_retries=0, default_headers=evil)
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        claude.messages.create(max_tokens=16, **CHAT)
    assert caught.value.body["error"]["type"] == "permission_error"
    r = httpx.post(f"{edge.url}/v1/systemone", headers=evil,
                   json={"model": "vsr/decide", "state": {"request": "hello"}})
    assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
    r = httpx.get(f"{edge.url}/v1/models", headers=evil)
    assert r.status_code == 403
    assert "access-control-allow-origin" not in r.headers
    assert requests_seen(upstream) == before


def test_an_unlisted_origins_preflight_is_refused(edge):
    r = httpx.options(f"{edge.url}/v1/chat/completions",
                      headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers


def test_an_allowed_origin_is_served_with_cors_headers_and_its_preflight_answered(edge):
    pre = httpx.options(f"{edge.url}/v1/chat/completions",
                        headers={"Origin": ALLOWED, "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": "content-type, authorization"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert pre.headers["access-control-allow-headers"] == "content-type, authorization"
    r = httpx.post(f"{edge.url}/v1/chat/completions", json=CHAT, headers={"Origin": ALLOWED})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == ALLOWED and r.headers["vary"] == "origin"
    sandboxed = httpx.post(f"{edge.url}/v1/chat/completions", json=CHAT, headers={"Origin": "null"})
    assert sandboxed.status_code == 200


def test_a_request_without_origin_is_never_refused(edge):
    client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0)
    assert client.chat.completions.create(**CHAT).choices[0].message.content


def test_with_no_origins_configured_every_browser_origin_is_refused(upstream, tmp_path):
    with edge_router(upstream, str(tmp_path)) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json=CHAT, headers={"Origin": ALLOWED})
        assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
        assert httpx.post(f"{proc.url}/v1/chat/completions", json=CHAT).status_code == 200


def test_a_stored_responses_preflight_allows_delete(edge):
    # A browser client deletes its stored response (DELETE /v1/responses/{id}): its preflight must name DELETE,
    # and only there (a chat path has no DELETE to allow).
    pre = httpx.options(f"{edge.url}/v1/responses/resp_1",
                        headers={"Origin": ALLOWED, "Access-Control-Request-Method": "DELETE"})
    assert pre.status_code == 204
    assert "DELETE" in [m.strip() for m in pre.headers["access-control-allow-methods"].split(",")]
    chat = httpx.options(f"{edge.url}/v1/chat/completions",
                         headers={"Origin": ALLOWED, "Access-Control-Request-Method": "DELETE"})
    assert "DELETE" not in chat.headers["access-control-allow-methods"]
