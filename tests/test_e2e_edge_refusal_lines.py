"""The access log lines of what the connection layer refuses (trial 27), through a real router on raw sockets.

- A body whose chunked framing breaks after a valid head is one request: one line, status 400, under the
  client's own x-request-id (the id its answer carries), never a second line of 499 nor a disconnect counted.
- Every edge refusal's line says who sent it and what of its head was read (``remote_addr``, ``method``,
  ``uri``, ``user_agent``) and how long it took (``latency_s``), as nginx logs $remote_addr on its 400s and 408s;
  a refusal on a path of no client API has its line too, and is counted in no API's requests.
"""
from __future__ import annotations

import json
import re
import socket

import httpx
import pytest

from .procs import config, router, wait_for_value, write_config

CHAT_HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
             b"User-Agent: probe/1.0\r\n")


@pytest.fixture(scope="module")
def edge(mock, tmp_path_factory):
    """A router logging JSON lines to a file; a slow head is refused after 1 s (header_timeout_ms)."""
    where = tmp_path_factory.mktemp("edge-lines")
    log = where / "access.log"
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, "path": str(log)},
                                "limits": {"header_timeout_ms": 1000}}}
    with router(write_config(doc, str(where))) as proc:
        yield proc, log


def lines(log) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def read_all(s: socket.socket) -> bytes:
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    return got


def exchange(proc, request: bytes) -> tuple[bytes, bytes]:
    """``request`` on a fresh connection, read until the router closes it: the answer's head and body."""
    with socket.create_connection(("127.0.0.1", proc.port), timeout=20) as s:
        s.sendall(request)
        head, _, body = read_all(s).partition(b"\r\n\r\n")
    return head, body


def answer_id(head: bytes) -> str:
    return re.search(rb"\r\nx-request-id: (\S+)", head).group(1).decode()


def series(proc, name: str) -> float:
    found = re.search(r"^" + re.escape(name) + r" (\S+)$", httpx.get(f"{proc.url}/metrics").text, re.M)
    return float(found.group(1)) if found else 0.0


def logged(log, request_id: str, after: int) -> list[dict]:
    """The lines of ``request_id`` written after the first ``after``, once there is one (a request id the router
    made is its alone: a second line under it would be the same request's)."""
    wait_for_value(lambda: [x for x in lines(log)[after:] if x["request_id"] == request_id], request_id)
    return [x for x in lines(log)[after:] if x["request_id"] == request_id]


def settled(proc, log, after: int) -> list[dict]:
    """Every line after the first ``after``, once a probe's own line (a 405) has followed them: the access log
    writes its lines in order, so nothing logged before the probe is still to come."""
    probe = httpx.get(f"{proc.url}/v1/chat/completions", headers={"x-request-id": f"probe-{after}"})
    assert probe.status_code == 405
    wait_for_value(lambda: any(x["request_id"] == f"probe-{after}" for x in lines(log)[after:]), "the probe's line")
    return [x for x in lines(log)[after:] if x["request_id"] != f"probe-{after}"]


CHAT_499 = 'vsr_requests_total{api="chat",recipe="",decision="",model="",status="499"}'
CHAT_400 = 'vsr_requests_total{api="chat",recipe="",decision="",model="",status="400"}'
DISCONNECTS = 'vsr_client_disconnects_total{api="chat"}'


@pytest.mark.parametrize("continued", [False, True], ids=["in-one-write", "after-100-continue"])
def test_a_chunk_size_that_is_no_number_is_one_400_line_under_the_clients_id(edge, continued):
    proc, log = edge
    before, gone, left, refused = len(lines(log)), series(proc, CHAT_499), series(proc, DISCONNECTS), \
        series(proc, CHAT_400)
    head = CHAT_HEAD + b"x-request-id: mine-123\r\nTransfer-Encoding: chunked\r\n"
    with socket.create_connection(("127.0.0.1", proc.port), timeout=20) as s:
        if continued:
            # The 100 goes once the app reads the body: the bad chunk then breaks a read in progress.
            s.sendall(head + b"Expect: 100-continue\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 100 ")
            s.sendall(b"zz\r\n")
        else:
            s.sendall(head + b"\r\nzz\r\n")
        answer, _, body = read_all(s).partition(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert json.loads(body)["error"]["code"] == "malformed_request"
    assert answer_id(answer) == "mine-123"
    [line] = settled(proc, log, before)
    assert (line["request_id"], line["status"], line["error"], line["api"]) == ("mine-123", 400, "malformed_request",
                                                                               "chat")
    assert (line["remote_addr"], line["method"], line["user_agent"]) == ("127.0.0.1", "POST", "probe/1.0"), line
    assert line["latency_s"] >= 0
    # A client that never left: no 499, no disconnect; the 400 is counted once.
    assert (series(proc, CHAT_499), series(proc, DISCONNECTS)) == (gone, left)
    assert series(proc, CHAT_400) == refused + 1


def test_without_a_client_id_the_line_carries_the_id_its_400_did(edge):
    proc, log = edge
    before = len(lines(log))
    answer, _ = exchange(proc, CHAT_HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\nzz\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    [line] = settled(proc, log, before)
    assert (line["request_id"], line["status"]) == (answer_id(answer), 400), line


def test_a_head_h11_refuses_is_logged_with_the_client_and_what_of_its_head_was_read(edge):
    proc, log = edge
    before = len(lines(log))
    answer, _ = exchange(proc, CHAT_HEAD + b"Content-Length: abc\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    [line] = logged(log, answer_id(answer), before)
    assert (line["status"], line["error"], line["api"]) == (400, "malformed_request", "chat")
    assert (line["remote_addr"], line["method"], line["uri"], line["user_agent"]) == \
        ("127.0.0.1", "POST", "/v1/chat/completions", "probe/1.0"), line
    assert line["latency_s"] >= 0


def test_a_head_unfinished_at_the_header_timeout_is_logged_with_the_client(edge):
    proc, log = edge
    before = len(lines(log))
    with socket.create_connection(("127.0.0.1", proc.port), timeout=20) as s:
        s.sendall(CHAT_HEAD)        # and no more: the header timeout answers it
        answer = read_all(s)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    [line] = logged(log, answer_id(answer), before)
    assert (line["status"], line["error"], line["api"]) == (408, "header_timeout", "chat")
    assert (line["remote_addr"], line["method"], line["uri"], line["user_agent"]) == \
        ("127.0.0.1", "POST", "/v1/chat/completions", "probe/1.0"), line
    assert line["latency_s"] > 0


def test_a_refusal_on_a_path_of_no_client_api_is_logged_and_counted_in_no_api(edge):
    proc, log = edge
    before = len(lines(log))
    earlier = httpx.get(f"{proc.url}/metrics").text
    answer, _ = exchange(proc, b"GET /health HTTP/1.1\r\nHost: r\r\nUser-Agent: lb/2\r\nno colon here\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    [line] = logged(log, answer_id(answer), before)
    assert (line["status"], line["error"], line.get("api")) == (400, "malformed_request", None), line
    assert (line["remote_addr"], line["method"], line["uri"]) == ("127.0.0.1", "GET", "/health"), line
    assert line["latency_s"] >= 0
    # A request of no client API: counted as a refusal of the edge's, in no API's requests.
    later = httpx.get(f"{proc.url}/metrics").text
    assert len(re.findall(r"^vsr_requests_total\{", later, re.M)) == len(re.findall(r"^vsr_requests_total\{",
                                                                                    earlier, re.M))
    assert re.search(r'^vsr_http_refusals_total\{status="400"\} ', later, re.M)


def test_a_body_that_breaks_on_a_path_of_no_client_api_is_one_line_and_no_disconnect(edge):
    proc, log = edge
    before = len(lines(log))
    left = series(proc, 'vsr_client_disconnects_total{api="count_tokens"}')
    head = (b"POST /v1/messages/count_tokens HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
            b"x-request-id: count-1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n")
    with socket.create_connection(("127.0.0.1", proc.port), timeout=20) as s:
        s.sendall(head)
        assert s.recv(65536).startswith(b"HTTP/1.1 100 ")
        s.sendall(b"zz\r\n")
        answer = read_all(s)
    assert answer.startswith(b"HTTP/1.1 400 ") and answer_id(answer) == "count-1", answer
    [line] = settled(proc, log, before)
    assert (line["request_id"], line["status"], line["error"], line["method"], line["uri"]) == \
        ("count-1", 400, "malformed_request", "POST", "/v1/messages/count_tokens"), line
    assert series(proc, 'vsr_client_disconnects_total{api="count_tokens"}') == left


@pytest.mark.parametrize("request_, status, error", [
    # quart's route at /health takes GET only; /metrics reads a JSON body only; a method is spelled in capitals.
    (b"POST /health HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\n", 405, "method_not_allowed"),
    (b"POST /metrics HTTP/1.1\r\nHost: r\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n", 415,
     "unsupported_media_type"),
    (b"get /health HTTP/1.1\r\nHost: r\r\n", 400, "invalid_method"),
])
def test_the_apps_own_refusal_on_a_path_of_no_client_api_is_one_line_as_the_edges_are(edge, request_, status, error):
    proc, log = edge
    before = len(lines(log))
    rid = f"own-{status}"
    body = b"hi" if b"Content-Length: 2" in request_ else b""
    head, _ = exchange(proc, request_ + b"User-Agent: lb/3\r\nx-request-id: " + rid.encode() +
                       b"\r\nConnection: close\r\n\r\n" + body)
    assert head.startswith(b"HTTP/1.1 %d " % status) and answer_id(head) == rid, head
    assert status != 405 or b"\r\nallow: GET, HEAD, OPTIONS\r\n" in head, head     # as quart's own 405 named them
    [line] = settled(proc, log, before)
    assert (line["request_id"], line["status"], line["error"], line.get("api")) == (rid, status, error, None), line
    assert (line["remote_addr"], line["method"], line["uri"], line["user_agent"]) == \
        ("127.0.0.1", request_.split(b" ")[0].decode(), request_.split(b" ")[1].decode(), "lb/3"), line
    assert line["latency_s"] >= 0
