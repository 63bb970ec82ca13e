"""Slow clients (issue 13): headers that never end, bodies that trickle or never end. Each socket is closed at
the configured timeout with 408 in the client's protocol (an idle one that sent nothing: silently), and the
router keeps serving."""
from __future__ import annotations

import json
import select
import time

import httpx
import pytest

from .conftest import connect, edge_router, read_until_closed

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
MIN_RATE = 1024
CHAT = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hello"}]}
ROUTES = {
    "chat": ("/v1/chat/completions", CHAT),
    "messages": ("/v1/messages", {**CHAT, "max_tokens": 16}),
    "responses": ("/v1/responses", {"model": "vsr/auto", "input": "hello"}),
    "preview": ("/api/v1/routing/preview", CHAT),
    "systemone": ("/v1/systemone", {"model": "vsr/decide", "state": {"request": "hello"}}),
}


@pytest.fixture(scope="module")
def edge(upstream, tmp_path_factory):
    with edge_router(upstream, str(tmp_path_factory.mktemp("edge")), header_timeout_ms=int(HEADER_TIMEOUT_S * 1000),
                     body_timeout_ms=int(BODY_TIMEOUT_S * 1000), min_body_bytes_per_s=MIN_RATE) as proc:
        yield proc


def still_serving(proc) -> None:
    r = httpx.post(f"{proc.url}/v1/chat/completions", json=CHAT, timeout=30)
    assert r.status_code == 200, r.text


def head(path: str, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: router", "Content-Type: application/json", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def status_and_body(answer: bytes) -> tuple[int, dict]:
    top, _, body = answer.partition(b"\r\n\r\n")
    return int(top.split(b" ", 2)[1]), json.loads(body)


def trickle_until_closed(socks, unit: bytes, bound_s: float = 30.0) -> dict:
    """Send ``unit`` on every socket each 50 ms (a slow client's pace) until the router closes each one;
    returns what each received and how long after its first byte it closed."""
    opened = {s: time.monotonic() for s in socks}
    got: dict = {s: b"" for s in socks}
    closed_after: dict = {}
    deadline = time.monotonic() + bound_s
    while len(closed_after) < len(socks):
        assert time.monotonic() < deadline, f"{len(socks) - len(closed_after)} sockets still held after {bound_s} s"
        open_socks = [s for s in socks if s not in closed_after]
        readable, _, _ = select.select(open_socks, [], [], 0.05)
        for s in readable:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if chunk:
                got[s] += chunk
            else:
                closed_after[s] = time.monotonic() - opened[s]
        for s in open_socks:
            if s not in closed_after:
                try:
                    s.sendall(unit)
                except (BrokenPipeError, ConnectionResetError):
                    pass     # closed on the router's side; the next select sees it
    return {s: (got[s], closed_after[s]) for s in socks}


def slow_clients(proc, count: int, first: bytes, unit: bytes) -> list[tuple[bytes, float]]:
    """``count`` sockets that each send ``first``, then ``unit`` after ``unit`` until the router closes them."""
    socks = [connect(proc) for _ in range(count)]
    try:
        for s in socks:
            s.sendall(first)
        return list(trickle_until_closed(socks, unit).values())
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_slowloris_headers_get_408_in_the_paths_protocol_at_the_header_timeout(edge, path):
    for got, after in slow_clients(edge, 10, f"POST {path} HTTP/1.1\r\nHost: router\r\n".encode(),
                                   b"X-Pad: 1\r\n"):
        # hypercorn closes such a socket silently; the router's own connection server answers first, in the
        # protocol of the path the request line named.
        status, body = status_and_body(got)
        assert status == 408, got
        assert b"connection: close" in got.lower()
        assert after >= HEADER_TIMEOUT_S / 2, after        # held, not refused at once (clocks: see below)
        if path == "/v1/messages":
            assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        else:
            assert body["error"]["code"] == "header_timeout"
    still_serving(edge)


def test_a_request_line_that_never_ends_gets_408_at_the_header_timeout(edge):
    got, after = slow_clients(edge, 1, b"POST /v1/chat/comp", b"l")[0]
    assert status_and_body(got)[0] == 408 and after >= HEADER_TIMEOUT_S / 2


def test_an_idle_connection_that_never_sends_is_closed_at_the_header_timeout(edge):
    s = connect(edge)
    started = time.monotonic()
    with s:
        got = read_until_closed(s)
    closed_after = time.monotonic() - started
    assert got == b"", got
    # Held, not closed at once. The router's timer starts at its accept, which may come before this
    # side's clock read: compared with the whole timeout the check failed by 1.4 ms under load.
    assert closed_after >= HEADER_TIMEOUT_S / 2, closed_after


@pytest.mark.parametrize("api", sorted(ROUTES))
def test_a_trickling_body_gets_408_in_the_clients_protocol_and_the_socket_closes(edge, api):
    path, _ = ROUTES[api]
    for got, after in slow_clients(edge, 10, head(path, "Content-Length: 100000") + b"{", b" "):
        status, body = status_and_body(got)
        assert status == 408, got
        assert after >= BODY_TIMEOUT_S / 2            # held, not refused at once (clocks: see above)
        assert "too slowly" in json.dumps(body)
        if api == "messages":
            assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        elif api == "systemone":
            assert body["error"]["code"] == "body_timeout"
        else:
            assert body["error"]["code"] == "body_timeout"
    still_serving(edge)


def test_a_chunked_body_that_never_ends_gets_408_and_the_socket_closes(edge):
    s = connect(edge)
    with s:
        s.sendall(head("/v1/chat/completions", "Transfer-Encoding: chunked") + b"4\r\n{\"mo\r\n")
        status, body = status_and_body(read_until_closed(s))
    assert status == 408 and body["error"]["code"] == "body_timeout"
    still_serving(edge)


def test_a_slow_body_that_keeps_the_minimum_rate_is_served(edge):
    """Past the first allowance, each KiB received earns a second: a body sent over more than
    ``body_timeout_ms`` at better than the minimum rate is read whole."""
    body = json.dumps(CHAT).encode().ljust(6 * 1024)
    pieces = [body[i:i + 2048] for i in range(0, len(body), 2048)]
    s = connect(edge)
    with s:
        s.sendall(head("/v1/chat/completions", f"Content-Length: {len(body)}", "Connection: close"))
        started = time.monotonic()
        for i, piece in enumerate(pieces):
            if i:
                time.sleep(1.2)   # the client's pace under test: 2 KiB each 1.2 s, longer than the allowance
            s.sendall(piece)
        sent_over = time.monotonic() - started
        status, answer = status_and_body(read_until_closed(s))
    assert sent_over > BODY_TIMEOUT_S
    assert status == 200, answer
    assert answer["object"] == "chat.completion"


def test_an_answer_longer_than_the_header_timeout_is_whole_and_the_idle_connection_then_closes(edge, upstream):
    # The header timeout is the idle timer of a kept-alive connection: off while an answer is being made
    # (here the model takes 2.5 times as long), on again once it has gone.
    httpx.post(f"{upstream.url}/_mock/config", json={"latency_ms": HEADER_TIMEOUT_S * 2500}).raise_for_status()
    try:
        body = json.dumps(CHAT).encode()
        s = connect(edge)
        with s:
            s.sendall(head("/v1/chat/completions", f"Content-Length: {len(body)}") + body)
            got = read_until_closed(s)
    finally:
        httpx.post(f"{upstream.url}/_mock/config", json={"latency_ms": 0}).raise_for_status()
    status, answer = status_and_body(got)
    assert status == 200 and answer["object"] == "chat.completion", got
    still_serving(edge)
