"""The access log's lines and the request counters for requests that end early (an outside SRE's trial): a client
that leaves mid-body, or while its whole answer is awaited; a method refused. One line each, with the fields the
docs promise, and no status counted that was never sent."""
from __future__ import annotations

import json
import re
import socket
import time

import httpx
import pytest

from .procs import config, mock_upstream, model, router, wait_until, write_config

PROMPT = "tell me about the weather in Paris this weekend, please, in some detail"


@pytest.fixture(scope="module")
def trickle():
    """A stream of 200 chunks, one each 100 ms, with no usage: its client leaves while it runs."""
    with mock_upstream("--chunks", "200", "--chunk-interval-ms", "100") as proc:
        yield proc


@pytest.fixture(scope="module")
def logged(mock, silent, trickle, tmp_path_factory):
    """A router in front of ``mock`` (vsr/auto), ``silent`` (the model ``slow``: a whole request's client leaves
    while it waits) and ``trickle`` (the model ``streamed``), its access log in a file."""
    directory = tmp_path_factory.mktemp("access")
    doc = config([model("m", f"{mock.url}/v1"), {**model("slow", f"{silent.url}/v1"),
                                                "backend_refs": [{"endpoint": f"{silent.url}/v1", "name": "held-1"}]},
                  model("streamed", f"{trickle.url}/v1")],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    log_path = directory / "access.log"
    doc["global"] = {"router": {"access_log": {"enabled": True, "format": "json", "path": str(log_path)}},
                     "stores": {"event_stream": {"backend": "none"}}}
    with router(write_config(doc, str(directory))) as proc:
        proc.log_path = log_path
        yield proc


def lines(proc) -> list[dict]:
    if not proc.log_path.exists():
        return []
    return [json.loads(line) for line in proc.log_path.read_text().splitlines() if line.strip()]


def fenced(proc) -> list[dict]:
    """Every line so far, once a request sent now (its x-request-id a fence) has been logged after them."""
    fence = f"fence-{time.monotonic_ns()}"
    assert httpx.post(f"{proc.url}/v1/chat/completions", headers={"x-request-id": fence}, timeout=30,
                      json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}).status_code == 200
    wait_until(lambda: any(line["request_id"] == fence for line in lines(proc)), "the fence's line")
    return lines(proc)


def counter(proc, name: str, **labels: str) -> float:
    """The sum of a counter's series whose labels include ``labels``."""
    total = 0.0
    for line in httpx.get(f"{proc.url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_client_that_leaves_mid_body_is_logged_once_as_499_and_no_400_is_counted(logged):
    before = len(fenced(logged))
    requests_400 = counter(logged, "vsr_requests_total", status="400")
    refusals_400 = counter(logged, "vsr_http_refusals_total", status="400")
    with socket.create_connection(("127.0.0.1", logged.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                     b"x-request-id: left-mid-body\r\nContent-Length: 100\r\n\r\n{\"model\":")
    after = fenced(logged)[before:-1]       # the fence's own line left out
    assert [(line["request_id"], line["status"]) for line in after] == [("left-mid-body", 499)], after
    assert after[0]["path"] != "upstream", after[0]      # no upstream was tried
    assert counter(logged, "vsr_requests_total", status="400") == requests_400
    assert counter(logged, "vsr_http_refusals_total", status="400") == refusals_400


def test_a_request_id_the_router_made_reaches_the_provider(logged, mock):
    # docs/config.md (AccessLogConfig): the answer and the provider's request carry the request's id, the one
    # the router made when the client sent none too.
    r = httpx.post(f"{logged.url}/v1/chat/completions", timeout=30,
                   json={"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    made = r.headers["x-request-id"]
    assert httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["headers"].get("x-request-id") == made
    wait_until(lambda: any(line["request_id"] == made for line in lines(logged)), "its access-log line")


def test_a_whole_request_its_client_left_logs_the_backend_tried_and_a_405_its_latency(logged, silent):
    # docs: backend is the one that answered, else the last one tried; every line has its latency.
    before = httpx.get(f"{silent.url}/_mock/stats").json()["requests"]
    body = json.dumps({"model": "slow", "messages": [{"role": "user", "content": PROMPT}]}).encode()
    with socket.create_connection(("127.0.0.1", logged.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                     b"x-request-id: left-waiting\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: httpx.get(f"{silent.url}/_mock/stats").json()["requests"] > before, "the upstream holds it")
    assert httpx.get(f"{logged.url}/v1/chat/completions", headers={"x-request-id": "not-allowed"},
                     timeout=30).status_code == 405
    by_id = {line["request_id"]: line for line in fenced(logged)}
    left = by_id["left-waiting"]
    assert (left["status"], left.get("attempts"), left.get("backend")) == (499, 1, "held-1"), left
    assert isinstance(by_id["not-allowed"].get("latency_s"), float), by_id["not-allowed"]


def test_a_stream_its_client_left_estimates_a_short_prompt_as_at_least_one_token(logged):
    # vsr_tokens_estimated_total's help: four bytes a token of the request's text. "hi" is text: a token, not 0.
    body = json.dumps({"model": "streamed", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    with socket.create_connection(("127.0.0.1", logged.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                     b"x-request-id: left-streaming\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        got = b""
        while got.count(b"data:") < 2:
            chunk = sock.recv(65536)
            assert chunk, got
            got += chunk
    line = next(line for line in fenced(logged) if line["request_id"] == "left-streaming")
    assert (line["status"], line.get("usage_estimated"), line.get("input_tokens")) == (499, True, 1), line
