"""An HTTP/1.1 ``Upgrade`` is not taken, and HTTP/2 refuses a method not spelled in capitals as HTTP/1 does (real
router and bench mock processes, raw sockets, the ``h2`` package as the HTTP/2 client):

- ``Upgrade: h2c`` (RFC 9113 3.1 deprecates it; nginx and Envoy ignore it by default) was answered ``101`` and
  the connection switched to HTTP/2, whatever else the request held: an HTTP/1.0 request, no or a broken
  ``HTTP2-Settings``, a method in lowercase (which the HTTP/2 side then served: fix83's check is HTTP/1's). An
  HTTP/1 client saw 101, binary frames, then the connection close. It is answered over HTTP/1.1, as if the header
  were not there (RFC 9110 7.8: a server may ignore it), and the connection stays usable;
- a WebSocket handshake hypercorn found broken (no key, HTTP/1.0, a request pipelined behind it) got a bare
  ``400`` with no body, then the connection was held open after ``connection: close``; every one is now answered
  in the path's own error shape, as a well-formed handshake was, and the connection serves the next request;
- an HTTP/2 ``:method`` of lowercase letters (``post``) was upper-cased by hypercorn and served; over HTTP/1 it
  is ``400 invalid_method`` (fix83): HTTP/2 answers the same, on its stream.
"""
from __future__ import annotations

import json
import socket

import h2.config
import h2.connection
import h2.events
import pytest

from .procs import config, router, write_config

BODY = json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "Say hello"}]}).encode()
H2C = b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n"
WS = (b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"limits": {"header_timeout_ms": 3000}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("upgrades")))) as proc:
        yield proc


def answers(port: int, request: bytes, count: int) -> list[tuple[bytes, bytes]]:
    """The first ``count`` HTTP/1.1 answers (head, body) the router writes on one connection; fails on anything
    else (a 101, HTTP/2 frames, the connection closed or silent first)."""
    out: list[tuple[bytes, bytes]] = []
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        while len(out) < count:
            while b"\r\n\r\n" not in data:
                more = s.recv(65536)
                assert more, f"the connection closed after {out}: {data!r}"
                data += more
            head, _, data = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 ") and not head.startswith(b"HTTP/1.1 101"), head
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(data) < length:
                more = s.recv(65536)
                assert more, f"the connection closed mid-answer: {head!r}"
                data += more
            out.append((head, data[:length]))
            data = data[length:]
    return out


def status(head: bytes) -> int:
    return int(head.split(b" ", 2)[1])


HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize("request_", [
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + H2C + b"\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",        # no settings
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
    b"HTTP2-Settings: !!\r\n\r\n",
], ids=["settings", "no settings", "broken settings"])
def test_an_h2c_upgrade_is_answered_over_http1_and_the_connection_lives(gw, request_):
    (head, body), (head2, _) = answers(gw.port, request_ + HEALTH, 2)
    assert status(head) == 200 and b"upgrade" not in head.lower(), head
    assert {m["id"] for m in json.loads(body)["data"]} >= {"vsr/auto", "m"}
    assert status(head2) == 200, head2


def test_an_h2c_upgrade_in_an_http10_request_is_answered_over_http1(gw):
    (head, body), = answers(gw.port, b"GET /v1/models HTTP/1.0\r\nHost: x\r\n" + H2C + b"\r\n", 1)
    assert status(head) == 200 and json.loads(body)["data"], (head, body)


def test_an_h2c_upgrade_on_a_post_without_a_body_is_the_routes_400_over_http1(gw):
    (head, body), = answers(gw.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + H2C +
                            b"Content-Type: application/json\r\n\r\n", 1)
    assert status(head) == 400, head
    assert json.loads(body)["error"]["type"] == "invalid_request_error"


def test_an_h2c_upgrade_with_a_lowercase_method_is_still_refused(gw):
    """The upgrade switched before the HTTP/1 method check, and HTTP/2's side served ``get`` as GET."""
    (head, body), = answers(gw.port, b"get /v1/models HTTP/1.1\r\nHost: x\r\n" + H2C + b"\r\n", 1)
    assert status(head) == 400 and json.loads(body)["error"]["code"] == "invalid_method", (head, body)


def _chat_post(upgrade: bytes) -> bytes:
    """A whole Chat request carrying the ``upgrade`` headers."""
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + upgrade +
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))


def test_an_h2c_upgrade_with_a_chat_body_is_answered(gw):
    (head, body), = answers(gw.port, _chat_post(H2C), 1)
    assert status(head) == 200 and json.loads(body)["choices"][0]["message"]["content"], body


@pytest.mark.parametrize(("request_", "expected"), [
    (b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + WS + b"\r\n", 405),
    (b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 405),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 400),
    (b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n"
     b"Sec-WebSocket-Version: 8\r\n\r\n", 404),
], ids=["handshake", "no key", "no key, served GET", "bad version"])
def test_a_websocket_upgrade_is_refused_in_the_paths_shape_and_the_connection_serves_on(gw, request_, expected):
    (head, body), (head2, _) = answers(gw.port, request_ + HEALTH, 2)
    assert status(head) == expected and b"upgrade" not in head.lower(), head
    assert json.loads(body)["error"]["code"], body
    assert status(head2) == 200, head2


def test_a_websocket_upgrade_over_http10_is_refused_in_the_paths_shape(gw):
    (head, body), = answers(gw.port, b"GET /v1/chat/completions HTTP/1.0\r\nHost: x\r\n" + WS + b"\r\n", 1)
    assert status(head) == 405 and json.loads(body)["error"]["code"] == "method_not_allowed", (head, body)


def test_a_websocket_upgrade_on_a_chat_post_is_answered(gw):
    (head, body), = answers(gw.port, _chat_post(WS), 1)
    assert status(head) == 200 and json.loads(body)["choices"], body


# --- HTTP/2: a method not spelled in capitals ---------------------------------------------------------------------

def h2_exchange(port: int, streams: dict[int, tuple[list, bytes | None]]) -> dict[int, tuple[int | None, bytes, bool]]:
    """Each stream's (status, body, reset) once all have ended; the connection closing first fails the test."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None, validate_outbound_headers=False, normalize_outbound_headers=False))
    conn.initiate_connection()
    for stream_id, (head, body) in streams.items():
        conn.send_headers(stream_id, head, end_stream=body is None)
        if body is not None:
            conn.send_data(stream_id, body, end_stream=True)
    out = {sid: [None, b"", False] for sid in streams}
    done: set[int] = set()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(conn.data_to_send())
        while done != set(streams):
            data = s.recv(65536)
            assert data, f"the router closed the connection: {out}"
            for event in conn.receive_data(data):
                sid = getattr(event, "stream_id", None)
                if isinstance(event, h2.events.ResponseReceived):
                    out[sid][0] = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.DataReceived):
                    out[sid][1] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, sid)
                elif isinstance(event, h2.events.StreamReset):
                    out[sid][2] = True
                    done.add(sid)
                elif isinstance(event, h2.events.StreamEnded):
                    done.add(sid)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    raise AssertionError(f"GOAWAY {event.error_code}: {out}")
            s.sendall(conn.data_to_send())
    return {sid: tuple(v) for sid, v in out.items()}


def h2_head(method: bytes, path: bytes) -> list[tuple[bytes, bytes]]:
    return [(b":method", method), (b":path", path), (b":scheme", b"http"), (b":authority", b"x"),
            (b"content-type", b"application/json")]


@pytest.mark.parametrize(("method", "path", "body", "shape"), [
    (b"post", b"/v1/chat/completions", BODY, "openai"),
    (b"Post", b"/v1/messages", BODY, "anthropic"),
    (b"get", b"/v1/models", None, "openai"),
    (b"gET", b"/health", None, "openai"),
])
def test_an_http2_method_not_in_capitals_is_a_400_on_its_stream(gw, method, path, body, shape):
    """As HTTP/1's request line (fix83): ``post`` is a token RFC 9113 8.3.1 carries as sent, not POST. The stream
    beside it on the connection is served."""
    got = h2_exchange(gw.port, {1: (h2_head(method, path), body), 3: (h2_head(b"POST", b"/v1/chat/completions"), BODY)})
    code, answer, reset = got[1]
    assert code == 400 and not reset, got
    doc = json.loads(answer)
    error = doc["error"]
    if shape == "anthropic":
        assert doc["type"] == "error" and error["type"] == "invalid_request_error", doc
    else:
        assert error["code"] == "invalid_method", doc
    assert method.decode() in error["message"], doc
    assert got[3][0] == 200 and json.loads(got[3][1])["choices"], got[3]
