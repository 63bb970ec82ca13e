"""OpenAI routes the router does not serve (embeddings, completions, audio, moderations, files, batches...) answer
an OpenAI-shaped 404 saying vsr-fast does not route them, not quart's page about spelling; any other path under
/v1/ (a typo) a plain "no such route" listing every route served; LiteLLM's probe paths
(what its users' Kubernetes manifests point at) answer as /ready and /health do."""
from __future__ import annotations

import httpx
import openai
import pytest

from .procs import config, model, router, write_config


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    doc = config([model("m", f"{mock.url}/v1")], [{"name": "general", "modelRefs": [{"model": "m"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-routes")))) as proc:
        yield proc


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/v1/embeddings"), ("POST", "/v1/completions"), ("POST", "/v1/audio/speech"),
    ("POST", "/v1/audio/transcriptions"), ("POST", "/v1/moderations"), ("GET", "/v1/files"),
    ("POST", "/v1/batches"), ("POST", "/v1/fine_tuning/jobs"), ("GET", "/v1/vector_stores"),
    ("POST", "/v1/images/edits"), ("POST", "/v1/images/variations"), ("POST", "/v1/uploads"),
    ("POST", "/v1/assistants"), ("POST", "/v1/threads/runs"), ("GET", "/v1/realtime"),
    # Every client route is also served without /v1: those it does not serve say so the same way.
    ("POST", "/embeddings"), ("POST", "/completions"), ("POST", "/audio/speech"), ("GET", "/files")])
def test_an_openai_route_the_router_does_not_serve_says_so(gw, method, path):
    r = httpx.request(method, f"{gw.url}{path}", json={"model": "m", "input": "x"})
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "not_found", error
    assert f"Invalid URL ({method} {path})" in error["message"], error
    assert "not routed by vsr-fast" in error["message"] and "spelling" not in error["message"], error
    assert "provider itself" in error["message"], error


@pytest.mark.parametrize(("method", "path"), [("POST", "/v1/chat/completion"), ("POST", "/v1/message"),
                                            ("GET", "/v1/nothing/here")])
def test_a_route_of_no_ones_is_a_plain_404_listing_the_served_ones(gw, method, path):
    """A typo is not told to go to the provider: no such route, and what the router serves (all of it)."""
    r = httpx.request(method, f"{gw.url}{path}", json={"model": "m"})
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["code"] == "not_found" and f"Invalid URL ({method} {path})" in error["message"], error
    assert "no such route" in error["message"] and "provider" not in error["message"], error
    for served in ("POST /v1/chat/completions", "POST /v1/messages/count_tokens", "GET /v1/responses/{id}",
                   "POST /v1/responses/input_tokens", "GET /v1/models/{id}"):
        assert served in error["message"], error


def test_the_openai_sdk_reads_the_404(gw):
    sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        sdk.embeddings.create(model="m", input="hello")
    assert "not routed by vsr-fast" in info.value.message


def test_the_azure_sdks_deployment_route_is_told_how_to_reach_the_router(gw):
    sdk = openai.AzureOpenAI(azure_endpoint=gw.url, api_key="x", api_version="2024-06-01", max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        sdk.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    error = info.value.body
    assert error["code"] == "not_found", error
    assert "Invalid URL (POST /openai/deployments/gpt-4o/chat/completions)" in error["message"], error
    assert "not routed by vsr-fast" in error["message"] and "OpenAI client" in error["message"], error


def test_a_path_of_no_api_keeps_the_plain_404(gw):
    error = httpx.get(f"{gw.url}/favicon.ico").json()["error"]
    assert "vsr-fast" not in error["message"], error


@pytest.mark.parametrize(("alias", "path"), [("/health/readiness", "/ready"), ("/health/liveliness", "/health"),
                                             ("/health/liveness", "/health")])
def test_litellms_probe_paths_answer_as_the_routers_own(gw, alias, path):
    got, own = httpx.get(f"{gw.url}{alias}"), httpx.get(f"{gw.url}{path}")
    assert got.status_code == own.status_code == 200
    assert got.json() == own.json()


@pytest.mark.parametrize("path", ["/v1/files/" + "a" * 8000, "/v1/" + "b" * 8000, "/v1/responses/x/" + "c" * 8000])
def test_a_long_path_is_quoted_capped(gw, path):
    """A 12 KB path came back whole in the 404 and its log: quoted as errors.shown quotes a client's value."""
    r = httpx.post(f"{gw.url}{path}", json={"model": "m"})
    assert r.status_code == 404, r.status_code
    message = r.json()["error"]["message"]
    assert path[:60] in message and path[:200] not in message and len(r.content) < 2000, len(r.content)


def test_an_admin_routes_long_id_is_quoted_capped(gw):
    r = httpx.get(f"{gw.url}/api/v1/replay/" + "d" * 8000)
    assert r.status_code == 404, r.status_code
    assert "d" * 64 in r.text and "d" * 65 not in r.text and len(r.content) < 1000, len(r.content)
