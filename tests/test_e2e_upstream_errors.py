"""An upstream's error answer as each client API gets it, over real sockets with the official SDKs as clients.

A tiny HTTP server started here answers what the mock cannot (an HTML 400, FastAPI's ``{"detail": ...}``, an
empty 404, errors already in a protocol's shape, a Retry-After on a 400); the bench mock injects 429s with
Retry-After, resets and broken streams. Three promises: an error body already in the client's error shape
passes unchanged and any other is wrapped in it with the upstream's status; the client's 502 names the model
and the cause, never a backend's name, address or exception (the access log keeps those); an upstream's
Retry-After reaches the client with the error it caused.
"""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import anthropic
import httpx
import openai
import pytest

from vsr_fast.upstream.dispatch import BACKEND_FAULT_STATUS

from .hostile_upstream import serving
from .procs import config, mock_upstream, refused_port, router, wait_for_value, write_config

FORMATS = ("openai", "anthropic", "responses")
NATIVE = {"chat": "openai", "messages": "anthropic", "responses": "responses"}
PATH = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
OPENAI_ERROR = json.dumps({"error": {"message": "model bad-oa does not exist", "type": "invalid_request_error",
                                     "param": "model", "code": "model_not_found"}}).encode()
ANTHROPIC_ERROR = json.dumps({"type": "error", "error": {"type": "not_found_error",
                                                         "message": "model: bad-an"}}).encode()
BOOM = json.dumps({"error": {"message": "boom", "type": "server_error", "param": None,
                              "code": "engine_failed"}}).encode()
DOWN = json.dumps({"error": {"message": "down for maintenance", "type": "server_error", "param": None,
                              "code": "maintenance"}}).encode()
SLOW = json.dumps({"error": {"message": "slow down", "type": "rate_limit_error", "param": None,
                              "code": "rate_limit_exceeded"}}).encode()
# A context window overflow in each backend's words, as OpenAI and Anthropic answer it.
TOO_LONG_OA = json.dumps({"error": {"message": "This model's maximum context length is 128000 tokens. However, your "
                                               "messages resulted in 130000 tokens. Please reduce the length of the "
                                               "messages.", "type": "invalid_request_error", "param": "messages",
                                    "code": "context_length_exceeded"}}).encode()
TOO_LONG_AN = json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                     "message": "prompt is too long: 210000 tokens > 200000 maximum"}}
                         ).encode()
# vLLM's overflow: its current shape (its exception's name as the type, the status as the code), and its older one
# with the fields at the top level.
VLLM_SAID = ("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the "
             "messages, 1000 in the completion). Please reduce the length of the messages or completion.")
TOO_LONG_VLLM = json.dumps({"error": {"message": VLLM_SAID, "type": "BadRequestError", "param": None, "code": 400}}
                           ).encode()
TOO_LONG_VLLM_OLD = json.dumps({"object": "error", "message": VLLM_SAID, "type": "BadRequestError", "param": None,
                                "code": 400}).encode()
OVERLOADED = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).encode()
HTML = b"<html><body><h1>400 Bad Request</h1><p>nginx at 10.1.2.3</p></body></html>"
# mode -> (status, content type, body, extra headers)
MODES = {
    "html": (400, "text/html", HTML, ()),
    "detail": (400, "application/json", b'{"detail":"nope"}', ()),
    "empty": (404, None, b"", ()),
    "openai-error": (400, "application/json", OPENAI_ERROR, ()),
    "anthropic-error": (404, "application/json", ANTHROPIC_ERROR, ()),
    "wait": (400, "application/json", OPENAI_ERROR, (("Retry-After", "3"),)),
    "busy": (503, "text/html", HTML, (("Retry-After", "9"),)),
    "boom": (500, "application/json", BOOM, ()),
    "down": (503, "application/json", DOWN, (("Retry-After", "5"),)),
    "slow": (429, "application/json", SLOW, (("Retry-After", "7"),)),
    "toolong-oa": (400, "application/json", TOO_LONG_OA, ()),
    "toolong-an": (400, "application/json", TOO_LONG_AN, ()),
    "toolong-vllm": (400, "application/json", TOO_LONG_VLLM, ()),
    "toolong-vllmold": (400, "application/json", TOO_LONG_VLLM_OLD, ()),
    "overloaded": (529, "application/json", OVERLOADED, ()),
}
LEAKS = ("127.0.0.1", "Error:", "ConnectError", "ReadError", "RemoteProtocolError", "Errno", "be-secret-name")


class _Scripted(BaseHTTPRequestHandler):
    """Answers every POST with the mode its path starts with: ``/<mode>/v1/...``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        status, content_type, body, extra = MODES[self.path.strip("/").split("/")[0]]
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        for name, value in extra:
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def scripted():
    with serving(_Scripted) as url:
        yield url


@pytest.fixture(scope="module")
def limited():
    """The bench mock failing every request with 429 and Retry-After: 7."""
    with mock_upstream() as proc:
        httpx.post(f"{proc.url}/_mock/config",
                   json={"fail_rate": 1, "fail_status": 429, "retry_after": "7"}).raise_for_status()
        yield proc


@pytest.fixture(scope="module")
def edge(scripted, limited, mock, tmp_path_factory):
    """``<mode>-<format>``: the scripted server's mode in each api_format; ``limited-<format>``: the 429 mock;
    ``dead``: a refused port behind a backend named be-secret-name; ``broken``: the mock, failing as a test sets it."""
    models = [{"name": f"{mode}-{fmt}", "api_format": fmt, "backend_refs": [{"endpoint": f"{scripted}/{mode}/v1"}]}
              for mode in MODES for fmt in FORMATS]
    models += [{"name": f"limited-{fmt}", "api_format": fmt, "backend_refs": [{"endpoint": f"{limited.url}/v1"}]}
               for fmt in FORMATS]
    models += [{"name": "dead", "backend_refs": [{"endpoint": f"http://127.0.0.1:{refused_port()}/v1",
                                                  "name": "be-secret-name"}]},
               {"name": "broken", "backend_refs": [{"endpoint": f"{mock.url}/v1", "name": "be-secret-name"}]}]
    doc = config(models, [{"name": "only", "modelRefs": [{"model": "boom-openai"}, {"model": "down-openai"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True}, "upstream": {
        # Every test here fails on purpose: no backend is ejected, so vsr/auto tries its models in their order.
        "retries": {"max_retries": 0}, "outlier": {"consecutive_failures": 1000}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("errors")))) as proc:
        yield proc


def sdk_error(edge, api: str, model: str, stream: bool) -> openai.APIStatusError | anthropic.APIStatusError:
    """The SDK's exception for one request of client API ``api`` to ``model``."""
    if api == "messages":
        client = anthropic.Anthropic(base_url=edge.url, api_key="k", max_retries=0)
        call = lambda: client.messages.create(model=model, max_tokens=5, stream=stream,  # noqa: E731
                                              messages=[{"role": "user", "content": "hi"}])
        kind = anthropic.APIStatusError
    else:
        client = openai.OpenAI(base_url=f"{edge.url}/v1", api_key="k", max_retries=0)
        if api == "chat":
            call = lambda: client.chat.completions.create(  # noqa: E731
                model=model, stream=stream, messages=[{"role": "user", "content": "hi"}])
        else:
            call = lambda: client.responses.create(model=model, input="hi", stream=stream)  # noqa: E731
        kind = openai.APIStatusError
    with pytest.raises(kind) as caught:
        out = call()
        if stream:
            list(out)
    return caught.value


def error_of(api: str, exc) -> dict:
    """The error object of the client's protocol, checked for its shape."""
    doc = exc.response.json()
    if api == "messages":
        assert doc["type"] == "error" and set(doc["error"]) == {"type", "message"}, doc
    else:
        assert set(doc) == {"error"} and isinstance(doc["error"]["message"], str), doc
    return doc["error"]


def post(edge, api: str, model: str, stream: bool = False) -> httpx.Response:
    body = ({"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]} if api != "responses"
            else {"model": model, "input": "hi"})
    return httpx.post(f"{edge.url}{PATH[api]}", json={**body, "stream": stream}, timeout=30)


# --- 1. error bodies: the client's shape, passed through or wrapped -----------------------------------------------


def answered_path(status: int) -> str:
    """x-vsr-response-path of a lone backend's error answer: the model's own answer (``upstream``), but a 404 is the
    backend failing (the model missing on that deployment): every attempt failed, its answer relayed (``error``)."""
    return "error" if status in BACKEND_FAULT_STATUS else "upstream"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("mode, said", [
    ("html", "(text/html) with no error object of its API"),
    ("detail", "(application/json) with no error object of its API: nope"),
    ("empty", "with an empty body"),
])
def test_an_error_body_not_in_the_clients_shape_is_wrapped_in_it(edge, api, fmt, stream, mode, said):
    status = MODES[mode][0]
    exc = sdk_error(edge, api, f"{mode}-{fmt}", stream)
    assert exc.status_code == status
    error = error_of(api, exc)
    assert error["message"].startswith(f"the upstream answered HTTP {status}") and said in error["message"], error
    assert "<html>" not in error["message"] and "10.1.2.3" not in error["message"]
    if api == "messages":
        assert error["type"] == ("not_found_error" if status == 404 else "invalid_request_error")
    else:
        assert error["type"] == "invalid_request_error" and exc.message     # the SDK has a message to show
    assert exc.response.headers["content-type"] == "application/json"
    assert exc.response.headers["x-vsr-response-path"] == answered_path(status)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api, mode", [("chat", "openai-error"), ("responses", "openai-error"),
                                       ("messages", "anthropic-error")])
def test_an_error_already_in_the_clients_shape_passes_unchanged(edge, api, mode, stream):
    status, _, body, _ = MODES[mode]
    r = post(edge, api, f"{mode}-{NATIVE[api]}", stream)
    if api == "messages":   # the request's id joins it, as Anthropic's own errors carry one; the rest as it came
        body = body[:-1] + b',"request_id":"%s"}' % r.headers["request-id"].encode()
    assert (r.status_code, r.content) == (status, body)
    assert r.headers["x-vsr-response-path"] == answered_path(status)


@pytest.mark.parametrize("api, mode", [("chat", "anthropic-error"), ("responses", "anthropic-error"),
                                       ("messages", "openai-error")])
def test_the_other_protocols_error_shape_is_read_and_wrapped(edge, api, mode):
    """Same API on both sides, but the backend answered the other protocol's error object: its message is kept."""
    exc = sdk_error(edge, api, f"{mode}-{NATIVE[api]}", False)
    assert exc.status_code == MODES[mode][0]
    error = error_of(api, exc)
    assert error["message"] == ("model: bad-an" if mode == "anthropic-error" else "model bad-oa does not exist")


# --- 2. a 502 names the model and the cause, not the backend ------------------------------------------------------


def access_lines(edge, model: str) -> list[dict]:
    lines = (json.loads(x) for x in edge.lines if x.startswith("{"))
    return [line for line in lines if line.get("model") == model]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_refused_connection_is_named_without_the_backends_address(edge, api, stream):
    before = len(access_lines(edge, "dead"))
    exc = sdk_error(edge, api, "dead", stream)
    assert exc.status_code == 502
    message = error_of(api, exc)["message"]
    assert "dead" in message and "connect_refused" in message and "connection was refused" in message, message
    assert not [x for x in LEAKS if x in message], message
    if api == "chat":
        assert exc.body["code"] == "upstream_failed"
    logged = wait_for_value(lambda: access_lines(edge, "dead")[before:], "the access log's line")[0]
    # The access log keeps what the client is not told.
    assert logged["cause"] == "connect_refused" and "ConnectError" in logged["message"]
    assert "be-secret-name" in logged["message"]


def test_a_reset_and_a_stream_broken_midway_are_named_without_the_exception(edge, mock):
    httpx.post(f"{mock.url}/_mock/config", json={"fail_rate": 1, "fail_mode": "reset"}).raise_for_status()
    exc = sdk_error(edge, "chat", "broken", False)
    assert exc.status_code == 502
    message = error_of("chat", exc)["message"]
    assert "broken: connection_closed" in message and not [x for x in LEAKS if x in message], message

    httpx.post(f"{mock.url}/_mock/config", json={"fail_rate": 1, "fail_mode": "midstream"}).raise_for_status()
    r = post(edge, "chat", "broken", stream=True)
    assert r.status_code == 200
    tail = r.text.rsplit("data: ", 1)[-1]
    error = json.loads(tail)["error"]
    assert error["message"].startswith("the answer of broken failed mid-stream: "), error
    assert not [x for x in LEAKS if x in error["message"]], error


# --- 3. an upstream's Retry-After reaches the client ---------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api, fmt", [("chat", "openai"), ("chat", "anthropic"), ("messages", "anthropic"),
                                      ("messages", "openai"), ("responses", "responses")])
def test_a_429s_retry_after_reaches_the_client(edge, api, fmt, stream):
    exc = sdk_error(edge, api, f"limited-{fmt}", stream)
    assert exc.status_code == 429
    assert exc.response.headers["retry-after"] == "7"
    assert error_of(api, exc)["message"] == "injected failure (status 429)"     # the backend's own


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_retry_after_goes_with_a_relayed_or_wrapped_error(edge, api):
    # A 400 passed through (chat) or read and wrapped (messages), and so is a 503 every attempt answered.
    r = post(edge, api, "wait-openai")
    assert r.status_code == 400 and r.headers["retry-after"] == "3"
    r = post(edge, api, "busy-openai")     # a 503 every attempt answered: its status
    assert r.status_code == 503 and r.headers["retry-after"] == "9"



# --- 4. every attempt failed with an error answer: the last one reaches the client, as nginx and Envoy pass it ------


def test_a_backends_5xx_in_the_clients_shape_passes_as_it_is(edge):
    r = post(edge, "chat", "boom-openai")
    assert (r.status_code, r.content) == (500, BOOM)
    assert r.headers["x-vsr-response-path"] == "error"      # the router gave up on the request


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_backends_5xx_keeps_its_status_and_message_in_another_shape(edge, api):
    exc = sdk_error(edge, api, "boom-openai", False)
    assert exc.status_code == 500
    error = error_of(api, exc)
    assert error["message"] == "boom", error
    if api == "responses":
        assert error["code"] == "engine_failed"
    else:
        assert error["type"] == "api_error"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_backends_429_keeps_its_message_code_and_retry_after(edge, stream):
    exc = sdk_error(edge, "chat", "slow-openai", stream)
    assert exc.status_code == 429 and exc.response.headers["retry-after"] == "7"
    assert (exc.body["message"], exc.body["code"]) == ("slow down", "rate_limit_exceeded"), exc.body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_when_every_attempt_answered_an_error_the_last_reaches_the_client_naming_the_attempts(edge, api, stream):
    # Logged under the model whose answer was relayed (down-openai's 503), beside its backend.
    before = len(access_lines(edge, "down-openai"))
    exc = sdk_error(edge, api, "vsr/auto", stream)
    # The backend's 503 keeps its status; Anthropic's clients read it as the overloaded_error it is.
    assert exc.status_code == 503
    if api == "messages":
        assert error_of(api, exc)["type"] == "overloaded_error"
    assert exc.response.headers["retry-after"] == "5"
    assert exc.response.headers["x-vsr-response-path"] == "error"
    error = error_of(api, exc)
    assert error["message"].startswith("down for maintenance (every upstream attempt failed: "), error
    assert "boom-openai: HTTP 500" in error["message"] and "down-openai: HTTP 503" in error["message"], error
    if api != "messages":
        assert error["code"] == "maintenance"
    logged = wait_for_value(lambda: access_lines(edge, "down-openai")[before:], "the access log's line")[0]
    assert logged["status"] == exc.status_code and logged["cause"] == "status_5xx", logged
    assert logged["message"].startswith("every upstream attempt failed"), logged


# --- a context window overflow, in each client's words (LiteLLM's ContextWindowExceededError) ---------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_claudes_prompt_too_long_is_context_length_exceeded_for_openai_clients(edge, api, stream):
    exc = sdk_error(edge, api, "toolong-an-anthropic", stream)
    error = error_of(api, exc)
    assert exc.status_code == 400
    assert (error["code"], error["type"]) == ("context_length_exceeded", "invalid_request_error"), error
    assert error["message"] == "prompt is too long: 210000 tokens > 200000 maximum"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fmt", ["openai", "responses"])
def test_openais_context_length_exceeded_is_prompt_too_long_for_claude_code(edge, fmt, stream):
    exc = sdk_error(edge, "messages", f"toolong-oa-{fmt}", stream)
    assert exc.status_code == 400
    assert error_of("messages", exc) == {"type": "invalid_request_error",
                                         "message": "prompt is too long: 130000 tokens > 128000 maximum"}


@pytest.mark.parametrize("mode", ["toolong-vllm", "toolong-vllmold"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_vllms_context_overflow_is_context_length_exceeded_for_openai_clients(edge, api, mode):
    # Read by its words, as OpenAI's own is: vLLM codes it 400 (or, in its older shape, not at all).
    error = error_of(api, sdk_error(edge, api, f"{mode}-openai", False))
    assert (error["code"], error["type"], error["message"]) == \
        ("context_length_exceeded", "invalid_request_error", VLLM_SAID), error


@pytest.mark.parametrize("mode", ["toolong-vllm", "toolong-vllmold"])
def test_vllms_context_overflow_is_prompt_too_long_for_claude_code(edge, mode):
    exc = sdk_error(edge, "messages", f"{mode}-openai", False)
    assert exc.status_code == 400
    assert error_of("messages", exc) == {"type": "invalid_request_error",
                                         "message": "prompt is too long: 9000 tokens > 8192 maximum"}


def test_a_relayed_400_keeps_its_code_and_names_the_responses_field_for_a_responses_client(edge):
    # The Chat backend named its own field (messages); the Responses client sent input.
    error = error_of("responses", sdk_error(edge, "responses", "toolong-oa-openai", False))
    assert (error["param"], error["code"]) == ("input", "context_length_exceeded"), error


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_anthropic_529_keeps_its_status_for_openai_clients(edge, api):
    exc = sdk_error(edge, api, "overloaded-anthropic", False)
    assert exc.status_code == 529
    assert error_of(api, exc)["message"] == "Overloaded"

