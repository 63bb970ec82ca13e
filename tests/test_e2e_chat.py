"""End to end: the router and the mock upstream as real processes, the official openai SDK as client."""
from __future__ import annotations

import json
import socket
import time

import httpx
import openai
import pytest

from .procs import config, model, router, write_config

CHAT = [{"role": "user", "content": "Say hello"}]
PUBLIC = ("x-vsr-schema-version", "x-vsr-config-version", "x-vsr-response-path")


def sdk(proc) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key="client-key", max_retries=0, timeout=10)


def mock_stats(mock) -> dict:
    return httpx.get(f"{mock.url}/_mock/stats").json()


def assert_still_serves(proc) -> None:
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]


def test_sdk_create_routes_with_public_headers(routed):
    raw = sdk(routed).chat.completions.with_raw_response.create(model="vsr/auto", messages=CHAT)
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "mock-general"          # the upstream saw the provider's model id
    h = raw.headers
    assert h["x-vsr-schema-version"] == "3"
    assert len(h["x-vsr-config-version"]) == 16
    assert h["x-vsr-response-path"] == "upstream"
    assert h["x-vsr-selected-recipe"] == "default"
    assert h["x-vsr-selected-decision"] == "general"
    assert h["x-vsr-selected-model"] == "general-model"


def test_sdk_stream_relays_every_chunk_with_headers(routed):
    raw = sdk(routed).chat.completions.with_raw_response.create(
        model="vsr/auto", messages=CHAT, stream=True, stream_options={"include_usage": True}
    )
    assert raw.headers["x-vsr-selected-decision"] == "general"
    assert raw.headers["content-type"].startswith("text/event-stream")
    chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    whole = sdk(routed).chat.completions.create(model="vsr/auto", messages=CHAT)
    assert text == whole.choices[0].message.content
    assert any(c.choices and c.choices[0].finish_reason == "stop" for c in chunks)
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


def test_model_named_directly_skips_the_recipe(routed):
    raw = sdk(routed).chat.completions.with_raw_response.create(model="fast-model", messages=CHAT)
    assert raw.parse().model == "mock-fast"
    assert raw.headers["x-vsr-selected-model"] == "fast-model"
    assert "x-vsr-selected-recipe" not in raw.headers
    assert "x-vsr-selected-decision" not in raw.headers


def test_sdk_sees_bad_request_with_param(routed):
    with pytest.raises(openai.BadRequestError) as info:
        sdk(routed).chat.completions.create(model="vsr/auto", messages=[{"role": "wizard", "content": "x"}])
    body = info.value.body
    assert body["param"] == "messages[0].role"
    assert info.value.response.headers["x-vsr-response-path"] == "error"


@pytest.mark.parametrize(
    "body, code, param",
    [
        (b'{"model": "vsr/auto", "messages": [', "invalid_json", None),
        (b'{"model": "vsr/auto", "messages": [{"role": "user", "content": 42}]}', "invalid_type", "messages[0].content"),
        (b'{"model": "vsr/auto", "messages": "hello"}', "invalid_type", "messages"),
        (b'{"model": "vsr/auto"}', "invalid_value", "messages"),
        (b'{"model": 7, "messages": []}', "invalid_type", "model"),
        (b'{"model": "vsr/auto", "stream": "yes", "messages": []}', "invalid_type", "stream"),
        (b'{"model": "vsr/auto", "messages": [{"role": "user", "content": "\xff\xfe"}]}', "invalid_utf8",
         "messages[0].content"),
        (b'{"model": "vsr/auto", "messages": [{"role": "user", "content": [{"type": "hologram"}]}]}',
         "invalid_value", "messages[0].content[0].type"),
        (b"[]", "invalid_type", None),
        (b"", "invalid_json", None),
    ],
)
def test_bad_bodies_get_openai_errors_and_router_keeps_serving(routed, body, code, param):
    r = httpx.post(f"{routed.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["code"] == code
    assert err["param"] == param
    assert err["message"]
    for name in PUBLIC:
        assert name in r.headers
    assert r.headers["x-vsr-response-path"] == "error"
    assert_still_serves(routed)


def answer_413(port: int, raw: bytes) -> None:
    """Send ``raw`` and nothing more, then read the answer: a 413 request_too_large."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        answer = b""
        while b"request_too_large" not in answer:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"code":"request_too_large"' in answer


def test_oversized_body_is_413_without_reading_it_all(routed):
    # Only the head is sent: the router answers from the declared length, before any body byte.
    answer_413(routed.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n" % (65 * 1024 * 1024))
    assert_still_serves(routed)


SMALL_LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def small_body_router(mock, tmp_path_factory):
    """A router that takes request bodies of at most 64 KiB."""
    doc = config([model("general-model", f"{mock.url}/v1")], [{"name": "general", "modelRefs": [{"model": "general-model"}]}])
    doc["global"] = {"router": {"limits": {"max_body_bytes": SMALL_LIMIT}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("small")))) as proc:
        yield proc


def test_oversized_chunked_body_is_413(small_body_router):
    # One chunk whose last byte crosses the limit, and nothing after it: the router has read
    # every byte sent when it answers, so it closes cleanly (no RST) and the 413 always arrives.
    size = SMALL_LIMIT + 1
    answer_413(small_body_router.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                       b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       b"%x\r\n" % size + b"x" * size)
    assert_still_serves(small_body_router)
    at_limit = {"model": "vsr/auto", "messages": [{"role": "user", "content": ""}]}
    padding = SMALL_LIMIT - len(json.dumps(at_limit))
    at_limit["messages"][0]["content"] = "y" * padding
    r = httpx.post(f"{small_body_router.url}/v1/chat/completions", content=json.dumps(at_limit).encode(),
                   headers={"content-type": "application/json"})
    assert r.status_code == 200, "a body of exactly the limit is taken"


def test_get_on_chat_route_is_405(routed):
    r = httpx.get(f"{routed.url}/v1/chat/completions")
    assert r.status_code == 405
    assert r.json()["error"]["code"] == "method_not_allowed"


def test_client_vsr_headers_and_credentials_never_reach_upstream(mock, routed):
    r = httpx.post(
        f"{routed.url}/v1/chat/completions",
        json={"model": "vsr/auto", "messages": CHAT},
        headers={"x-vsr-selected-model": "evil", "x-vsr-debug": "1", "authorization": "Bearer client-secret",
                 "x-request-id": "req-123", "cookie": "a=b"},
    )
    assert r.status_code == 200
    seen = mock_stats(mock)["last_request"]["headers"]
    assert not [k for k in seen if k.startswith("x-vsr-")]
    assert "authorization" not in seen and "cookie" not in seen
    assert seen["x-request-id"] == "req-123"
    assert r.headers["x-vsr-selected-model"] == "general-model"


def test_backend_auth_from_env_reaches_upstream(mock, tmp_path):
    doc = config([model("m", f"{mock.url}/v1", auth={"api_key_env": "VSR_TEST_KEY"})],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    with router(write_config(doc, str(tmp_path)), env={"VSR_TEST_KEY": "sk-backend"}) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT},
                       headers={"authorization": "Bearer client"})
        assert r.status_code == 200
        assert mock_stats(mock)["last_request"]["headers"]["authorization"] == "Bearer sk-backend"


def test_models_health_ready_metrics(routed):
    ids = [m.id for m in sdk(routed).models.list()]
    assert ids == ["vsr/auto", "general-model", "fast-model"]
    assert httpx.get(f"{routed.url}/health").json() == {"status": "ok"}
    ready = httpx.get(f"{routed.url}/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    httpx.post(f"{routed.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
    text = httpx.get(f"{routed.url}/metrics").text
    assert 'vsr_requests_total{api="chat",recipe="default",decision="general",model="general-model",status="200"}' in text
    assert "vsr_request_duration_seconds_bucket" in text
    assert 'vsr_upstream_attempts_total{model="general-model"' in text


def _closed_after_response(port: int, request: bytes) -> tuple[bytes, bool]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        data = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                return data, True
            data += chunk
        return data, False


@pytest.mark.parametrize("route", ["chat", "health"])
def test_connection_close_is_honoured(routed, route):
    if route == "chat":
        body = json.dumps({"model": "vsr/auto", "messages": CHAT}).encode()
        req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    else:
        req = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    data, closed = _closed_after_response(routed.port, req)
    assert data.startswith(b"HTTP/1.1 200")
    assert closed, "the router kept a Connection: close connection open"


@pytest.mark.parametrize("head", [
    b"GET /health HTTP/1.0\r\n\r\n",                                    # HTTP/1.0 closes unless kept alive
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n",   # header values are case-insensitive
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close, TE\r\nTE: trailers\r\n\r\n",
    b"GET /nowhere HTTP/1.0\r\n\r\n",                                   # a 404 closes too
])
def test_every_closing_request_of_the_get_routes_is_closed(routed, head):
    data, closed = _closed_after_response(routed.port, head)
    assert data.startswith((b"HTTP/1.1 200", b"HTTP/1.1 404")), data[:80]
    assert closed, "the router kept a closing connection open (it would count against max_connections)"


def test_no_recipe_unknown_model_is_404(mock, tmp_path):
    doc = {"version": "v0.5", "providers": {"models": [model("only", f"{mock.url}/v1")]}}
    with router(write_config(doc, str(tmp_path))) as proc:
        with pytest.raises(openai.NotFoundError) as info:
            sdk(proc).chat.completions.create(model="gpt-nothing", messages=CHAT)
        assert info.value.body["code"] == "model_not_found"
        assert sdk(proc).chat.completions.create(model="only", messages=CHAT).choices


def test_a_model_ref_s_lora_name_is_the_model_its_backend_is_asked_for(mock, tmp_path):
    doc = config([model("base", f"{mock.url}/v1", upstream_name="mock-base")],
                 [{"name": "sql", "modelRefs": [{"model": "base", "lora_name": "sql-adapter"}]}])
    with router(write_config(doc, str(tmp_path))) as proc:
        routed_to_adapter = sdk(proc).chat.completions.with_raw_response.create(model="vsr/auto", messages=CHAT)
        assert mock_stats(mock)["last_request"]["body"]["model"] == "sql-adapter"
        assert routed_to_adapter.headers["x-vsr-selected-model"] == "base", "the model keeps its own name"
        assert routed_to_adapter.parse().choices[0].message.content
        # Named directly, the model has no decision and so no adapter: its provider_model_id.
        sdk(proc).chat.completions.create(model="base", messages=CHAT)
        assert mock_stats(mock)["last_request"]["body"]["model"] == "mock-base"
