"""A backend's own error event mid-stream, over real sockets: a hostile upstream streams a few events of the
answer, then its protocol's error event (Chat's ``{"error": ...}`` chunk, Messages' ``event: error`` with
``overloaded_error``, Responses' ``error`` event). The client reads it as its protocol's error; the answer is
recorded incomplete with a cause, counted in the access log and ``vsr_upstream_errors_total``, and never
cached: the same request again reaches the backend again."""
from __future__ import annotations

import re
import threading
import uuid

import httpx
import openai
import pytest

from . import hostile_upstream
from .procs import config, replay_record, router, wait_for_value, write_config
from .test_e2e_stream_ends import (ANSWERS, API_FORMAT, FORMAT_OF_PATH, PATHS, access_line,
                                   failed_as_its_protocol_says, midstream_errors)

ERRORS = {
    "chat": b'data: {"error": {"message": "the model is overloaded", "type": "server_error", "code": null}}\n\n',
    "messages": b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                b'"message": "Overloaded"}}\n\n',
    "responses": b'event: error\ndata: {"type": "error", "code": "server_error", "message": "the model failed", '
                 b'"param": null}\n\n',
}
# A Responses backend's error event as the live API sends it: its fields nested under error (``/nested/``).
NESTED = (b'event: error\ndata: {"type": "error", "sequence_number": 4, "error": {"type": "server_error", '
          b'"code": "overloaded", "message": "the engine is currently overloaded", "param": null}}\n\n')
QUESTIONS = {"chat": lambda text: {"messages": [{"role": "user", "content": text}]},
             "messages": lambda text: {"max_tokens": 16, "messages": [{"role": "user", "content": text}]},
             "responses": lambda text: {"input": text}}
CALLS: dict[str, int] = {}
LOCK = threading.Lock()


class ErrorMidStream(hostile_upstream.Handler):
    """``/v1/<the format's path>``: the answer's events up to its first text, then the format's error event, then a
    clean end of the chunked body (Chat: ``data: [DONE]`` after the error, as some servers send)."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        fmt = FORMAT_OF_PATH[self.path.rsplit("/", 1)[-1]]
        with LOCK:
            key = f"{self.path.split('/')[1]}-{fmt}:{re.search(rb'case-([0-9a-f]{8})', body).group(1).decode()}"
            CALLS[key] = CALLS.get(key, 0) + 1
        events, end, _ = ANSWERS[fmt]
        hello = next(i for i, event in enumerate(events) if b'"Hello ' in event) + 1
        if self.path.startswith("/ok/"):        # the control: the whole answer and its terminator
            pieces = [*events, end]
        else:
            error = NESTED if self.path.startswith("/nested/") else ERRORS[fmt]
            pieces = [*events[:hello], error] + ([b"data: [DONE]\n\n"] if fmt == "chat" else [])
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def erring(tmp_path_factory):
    with hostile_upstream.serving(ErrorMidStream) as url:
        models = [{"name": f"{mode}-{fmt}", "api_format": API_FORMAT[fmt],
                   "backend_refs": [{"endpoint": f"{url}/{mode}/v1"}]} for fmt in ANSWERS for mode in ("err", "ok")]
        models.append({"name": "nested-responses", "api_format": "responses",
                       "backend_refs": [{"endpoint": f"{url}/nested/v1"}]})
        doc = config(models, [{"name": "only", "modelRefs": [{"model": models[0]["name"]}]}])
        directory = tmp_path_factory.mktemp("stream-error-events")
        doc["global"] = {"router": {"access_log": {"enabled": True}, "upstream": {"retries": {"max_retries": 0}}},
                         "plugins": [{"type": "router_replay"},
                                     {"type": "response_cache", "configuration": {"ttl_seconds": 300}}],
                         "stores": {"event_stream": {"backend": "embedded", "path": str(directory / "events")}}}
        with router(write_config(doc, str(directory))) as proc:
            yield proc


# How the client's protocol carries an error event: each stream must hold exactly one.
ERROR_EVENT = {"chat": b'data: {"error"', "messages": b"event: error\n", "responses": b"event: error\n"}


@pytest.mark.parametrize(("api", "fmt"), [("chat", "chat"), ("messages", "messages"), ("responses", "responses"),
                                          ("chat", "messages")])
def test_an_answer_ended_by_the_backends_error_event_is_incomplete_and_never_cached(erring, api, fmt):
    case = uuid.uuid4().hex[:8]
    rid = f"err-{api}-{fmt}-{case}"
    # The case keys the backend's count of the requests that reached it.
    request = {"model": f"err-{fmt}", "stream": True, **QUESTIONS[api](f"hi case-{case}")}
    first = httpx.post(f"{erring.url}{PATHS[api]}", json=request, headers={"x-request-id": rid}, timeout=60)
    assert first.status_code == 200 and first.headers["x-vsr-response-path"] == "upstream"
    # The client read the backend's error event, in its own protocol, once: as it came, or (Responses) restated
    # as the router's own failures end a stream (the last test here).
    assert first.content.count(ERROR_EVENT[api]) == 1, first.content[-400:]
    if api == fmt != "responses":
        assert ERRORS[fmt] in first.content
    line = access_line(erring, rid)
    assert (line["cause"], line["error"]) == ("midstream_upstream_error", "upstream_failed"), line
    assert midstream_errors(erring, f"err-{fmt}").get("midstream_upstream_error", 0) >= 1
    record = replay_record(erring, first.headers["x-vsr-replay-id"], answered=True)
    # Incomplete: the cache is not even offered the answer.
    assert record["complete"] is False and not (record.get("cache") or {}).get("stored"), record
    assert record["errors"] and record["errors"][0]["code"] == "upstream_failed", record
    second = httpx.post(f"{erring.url}{PATHS[api]}", json=request, timeout=60)
    assert second.headers["x-vsr-response-path"] == "upstream"
    assert CALLS[f"err-{fmt}:{case}"] == 2


@pytest.mark.parametrize("fmt", list(ANSWERS))
def test_the_control_a_whole_stream_is_cached(erring, fmt):
    """The same setup with an answer that ends whole: stored, and served from the cache the second time."""
    case = uuid.uuid4().hex[:8]
    request = {"model": f"ok-{fmt}", "stream": True, **QUESTIONS[fmt](f"hi case-{case}")}
    first = httpx.post(f"{erring.url}{PATHS[fmt]}", json=request, timeout=60)
    record = wait_for_value(lambda: (lambda r: r if (r.get("cache") or {}).get("stored") else None)(
        replay_record(erring, first.headers["x-vsr-replay-id"])), "the answer stored in the cache")
    assert record["complete"] is True
    second = httpx.post(f"{erring.url}{PATHS[fmt]}", json=request, timeout=60)
    assert second.headers["x-vsr-response-path"] == "cache" and CALLS[f"ok-{fmt}:{case}"] == 1


@pytest.mark.parametrize(("mode", "message", "code"), [("err", "the model failed", "server_error"),
                                                      ("nested", "the engine is currently overloaded", "overloaded")])
def test_a_responses_backends_lone_error_event_reaches_the_sdk_as_the_routers_own_failures_do(erring, mode, message,
                                                                                             code):
    """A Responses backend that ends its stream with an ``error`` event and no ``response.failed``: the client
    reads what the router's own failures send (``response.failed`` ending the response the backend opened, then
    the error event with its fields flat and nested), so the openai SDK raises its APIError with the backend's
    message and code. Relayed as it came, a flat event was yielded as an event and the stream ended with no
    exception, and ``responses.stream()`` saw no ``response.failed``."""
    client = openai.OpenAI(base_url=f"{erring.url}/v1", api_key="k", max_retries=0)
    got: list = []
    with pytest.raises(openai.APIError) as caught:
        for event in client.responses.create(model=f"{mode}-responses", input=f"hi case-{uuid.uuid4().hex[:8]}",
                                             stream=True):
            got.append(event)
    exc = caught.value
    assert (exc.message, exc.code) == (message, code)
    failed_as_its_protocol_says("responses", got, exc)
    # The response the client was sent is the one that failed, under the router's id (not the backend's).
    assert got[0].response.id != "resp_h" and got[0].response.id.startswith("resp_")
    assert [e.delta for e in got if e.type == "response.output_text.delta"] == ["Hello "]
    seen: list = []
    with pytest.raises(openai.APIError) as caught:
        with client.responses.stream(model=f"{mode}-responses", input=f"hi case-{uuid.uuid4().hex[:8]}") as s:
            for event in s:
                seen.append(event.type)
            s.get_final_response()
    assert (caught.value.message, caught.value.code) == (message, code)
    assert seen[-1] == "response.failed"
    raw = httpx.post(f"{erring.url}/v1/responses", json={"model": f"{mode}-responses", "stream": True,
                                                         "input": f"hi case-{uuid.uuid4().hex[:8]}"}, timeout=60)
    assert raw.content.count(b"event: response.failed\n") == 1 and raw.content.count(b"event: error\n") == 1
