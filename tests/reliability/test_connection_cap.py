"""A cap on concurrent connections per listener (issue 13): past ``limits.max_connections`` a new connection
is answered 503 with Retry-After and closed, without its request being read or served; once a connection
ends, the next is served. Real router, raw sockets."""
from __future__ import annotations

import json
import re

import httpx
import pytest

from ..procs import wait_until
from .conftest import connect, edge_router, read_until_closed

CAP = 4
CHAT = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(scope="module")
def capped(upstream, tmp_path_factory):
    with edge_router(upstream, str(tmp_path_factory.mktemp("cap")), max_connections=CAP) as proc:
        yield proc


def metric(proc, name: str) -> int:
    text = httpx.get(f"{proc.url}/metrics", headers={"connection": "close"}, timeout=30).text
    return int(re.search(rf"^{name} (\d+)$", text, re.M).group(1))


def test_past_the_cap_a_connection_gets_503_and_is_closed_then_one_is_served_again(capped):
    held = [connect(capped) for _ in range(CAP)]
    try:
        # Each of the cap's connections is served a request and kept alive: all CAP are now running.
        for s in held:
            assert health_on(s).startswith(b"HTTP/1.1 200 ")
        extra = connect(capped)
        with extra:
            extra.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(json.dumps(CHAT)), json.dumps(CHAT).encode()))
            answer = read_until_closed(extra)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), answer
        assert b"retry-after: 1" in head.lower() and b"connection: close" in head.lower()
        assert b"\r\nserver: vsr-fast\r\n" in head + b"\r\n", head      # the router's name, as every answer's
        assert re.search(rb"\r\nx-request-id: [0-9a-f]{32}\r\n", head), head     # one a user can quote
        assert json.loads(body)["error"]["code"] == "too_many_connections"
        assert b"chat.completion" not in answer                # refused before its request was read
        assert all(health_on(s).startswith(b"HTTP/1.1 200 ") for s in held)   # those held are still served
    finally:
        for s in held:
            s.close()
    # Freed: served again, and the refusal was counted.
    wait_until(lambda: _served(capped), "a request served once the held connections closed")
    assert metric(capped, "vsr_connections_refused_total") >= 1


def health_on(sock) -> bytes:
    """GET /health on a kept-alive raw connection; the whole answer (Content-Length framed)."""
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: r\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        if not chunk:
            return got
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _served(proc) -> bool:
    try:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json=CHAT, timeout=30)
    except httpx.HTTPError:
        return False
    return r.status_code == 200
