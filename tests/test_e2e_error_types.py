"""An error's ``type`` is the one the client's API gives its status, whatever the backend's protocol.

One table per client API: OpenAI's (Chat, Responses) as api.openai.com answers (a 401 authentication_error, a 403
permission_error, a 429 rate_limit_error, another 4xx invalid_request_error, a 5xx server_error) and Anthropic's
errors page (404 not_found_error, 429 rate_limit_error, 500 api_error, 503 and 529 overloaded_error...). The
matrix: backend api_format x status x client API, whole and streamed, over the official SDKs; then a stream a
backend breaks mid-answer, whose error event the router writes. A backend of the client's own protocol is not in
the matrix: its error body passes as it came.
"""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, router, write_config

BACKENDS = ("openai", "anthropic", "responses")
NATIVE = {"chat": "openai", "responses": "responses", "messages": "anthropic"}
STATUSES = (400, 401, 403, 404, 413, 429, 500, 503, 504, 529)
OPENAI = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
ANTHROPIC = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
             404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
             503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error"}
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}


def openai_type(status: int) -> str:
    return OPENAI.get(status) or ("invalid_request_error" if status < 500 else "server_error")


def expected(client_api: str, status: int) -> str:
    return ANTHROPIC[status] if client_api == "messages" else openai_type(status)


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """A router over one mock, a model per backend api_format; one attempt per request."""
    with mock_upstream("--fail-rate", "1") as bad:
        doc = config([{**model(f"m-{fmt}", f"{bad.url}/v1"), "api_format": fmt} for fmt in BACKENDS],
                     [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-types")))) as proc:
            yield proc, bad


def fail_with(mock, **knobs) -> None:
    httpx.post(f"{mock.url}/_mock/config", json={"fail_rate": 1, **knobs}).raise_for_status()


def call(url: str, client_api: str, backend: str, stream: bool) -> tuple[int, dict]:
    """The client's SDK call; the status and the error object it raised with."""
    m = f"m-{backend}"
    if client_api == "messages":
        sdk = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        kw = {"model": m, "max_tokens": 64, "messages": [{"role": "user", "content": "hello"}]}
        with pytest.raises(anthropic.APIStatusError) as info:
            if stream:
                with sdk.messages.stream(**kw) as s:
                    s.get_final_message()
            else:
                sdk.messages.create(**kw)
        assert info.value.body["type"] == "error", info.value.body
        return info.value.status_code, info.value.body["error"]
    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        if client_api == "chat":
            list(sdk.chat.completions.create(model=m, messages=[{"role": "user", "content": "hello"}], stream=stream))
        else:
            out = sdk.responses.create(model=m, input="hello", stream=stream)
            if stream:
                list(out)
    return info.value.status_code, info.value.body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize(("client_api", "backend"), [(c, b) for c in NATIVE for b in BACKENDS if b != NATIVE[c]])
def test_a_backends_error_has_the_type_the_clients_api_gives_its_status(failing, client_api, backend, status,
                                                                        stream):
    proc, bad = failing
    fail_with(bad, fail_status=status)
    got, error = call(proc.url, client_api, backend, stream)
    assert got == status
    assert error["type"] == expected(client_api, status), error
    assert error["message"] == f"injected failure (status {status})", error
    if client_api != "messages" and backend == "anthropic":
        assert error["code"], error   # Anthropic's own type, as the code: overloaded, rate_limited, api_error...


def sse_events(body: str) -> list[tuple[str | None, dict]]:
    out = []
    for block in body.split("\n\n"):
        name = next((line[7:] for line in block.splitlines() if line.startswith("event: ")), None)
        data = next((line[6:] for line in block.splitlines() if line.startswith("data: ")), None)
        if data and data != "[DONE]":
            out.append((name, json.loads(data)))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("client_api", list(NATIVE))
def test_a_stream_broken_mid_answer_ends_with_the_type_of_its_status(failing, client_api, backend):
    """Two events, then the backend's connection drops: the router's own 502 ends the stream, typed as the
    client's API types a 502 (OpenAI's server_error, Anthropic's api_error)."""
    proc, bad = failing
    fail_with(bad, fail_mode="midstream")
    body = {"model": f"m-{backend}", "stream": True}
    if client_api == "responses":
        body["input"] = "hello"
    else:
        body["messages"] = [{"role": "user", "content": "hello"}]
        body["max_tokens"] = 64
    try:
        r = httpx.post(f"{proc.url}{PATHS[client_api]}", json=body, timeout=20)
    finally:
        fail_with(bad, fail_rate=0)
    assert r.status_code == 200, r.text
    name, last = sse_events(r.text)[-1]
    error = last["error"]
    want = "api_error" if client_api == "messages" else "server_error"
    assert error["type"] == want, (name, last)
    if client_api != "messages":
        assert error["code"] == "upstream_failed", last
