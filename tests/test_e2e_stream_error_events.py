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
import pytest

from . import hostile_upstream
from .procs import config, replay_record, router, wait_for_value, write_config
from .test_e2e_stream_ends import ANSWERS, API_FORMAT, FORMAT_OF_PATH, PATHS, access_line, midstream_errors

ERRORS = {
    "chat": b'data: {"error": {"message": "the model is overloaded", "type": "server_error", "code": null}}\n\n',
    "messages": b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                b'"message": "Overloaded"}}\n\n',
    "responses": b'event: error\ndata: {"type": "error", "code": "server_error", "message": "the model failed", '
                 b'"param": null}\n\n',
}
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
            pieces = [*events[:hello], ERRORS[fmt]] + ([b"data: [DONE]\n\n"] if fmt == "chat" else [])
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
    # The client read the backend's error event, in its own protocol, once: nothing of the router's added to it.
    assert first.content.count(ERROR_EVENT[api]) == 1, first.content[-400:]
    if api == fmt:
        assert ERRORS[fmt] in first.content
    line = access_line(erring, rid)
    assert (line["cause"], line["error"]) == ("midstream_upstream_error", "upstream_failed"), line
    assert midstream_errors(erring, f"err-{fmt}").get("midstream_upstream_error", 0) >= 1
    record = replay_record(erring, first.headers["x-vsr-replay-id"])
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
