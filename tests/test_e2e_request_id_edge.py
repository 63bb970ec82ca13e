"""A client's x-request-id is kept only when it is a sane token (printable ASCII, at most 200 bytes); any other is
replaced at the edge by a new id, as Envoy regenerates one it cannot use. Before, a control character in it failed
the request with a 500 after the backend had answered (tokens spent), and a 7,000-byte id was echoed and logged."""
from __future__ import annotations

import re
import socket

import h2.config
import h2.connection
import h2.events
import pytest

from .test_e2e_chat import mock_stats

BODY = b'{"model":"vsr/auto","messages":[{"role":"user","content":"hi"}]}'


def raw_chat(port: int, header: bytes, path: str = "/v1/chat/completions") -> bytes:
    """A chat request with ``header`` (``name: value``, bytes as sent, which httpx would refuse), on a connection
    of its own; the whole raw response."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Connection: close\r\n" + header + b"\r\nContent-Length: " + str(len(BODY)).encode()
                  + b"\r\n\r\n" + BODY)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def _post(port: int, request_id: bytes, path: str = "/v1/chat/completions") -> tuple[int, dict[bytes, bytes]]:
    head = raw_chat(port, b"x-request-id: " + request_id, path).split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in head[1:])}
    return int(head[0].split()[1]), headers


@pytest.mark.parametrize("sent", [b"abc\x01def", b"a\tb", b"x" * 7000, b"caf\xc3\xa9"])
def test_an_unusable_request_id_is_replaced_before_routing(routed, mock, sent):
    status, headers = _post(routed.port, sent)
    assert status == 200, headers
    rid = headers[b"x-request-id"]
    assert re.fullmatch(rb"[0-9a-f]{32}", rid), rid
    assert mock_stats(mock)["last_request"]["headers"]["x-request-id"] == rid.decode()


def test_a_sane_request_id_is_kept_and_forwarded(routed, mock):
    status, headers = _post(routed.port, b"trace-7f3a:span/1.2")
    assert status == 200 and headers[b"x-request-id"] == b"trace-7f3a:span/1.2"
    assert mock_stats(mock)["last_request"]["headers"]["x-request-id"] == "trace-7f3a:span/1.2"


def test_a_refusal_before_routing_replaces_it_too(routed):
    status, headers = _post(routed.port, b"bad\x01id", "/v1/messages/zz")
    assert status == 404
    assert re.fullmatch(rb"[0-9a-f]{32}", headers.get(b"x-request-id", b"none")), headers


# --- the edge's own refusals carry one too ----------------------------------------------------------------------

ID = re.compile(rb"[0-9a-f]{32}")


def raw_answer(port: int, request: bytes) -> tuple[int, dict[bytes, bytes]]:
    """The status and headers of the answer to ``request``, bytes as sent, on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data and (chunk := s.recv(65536)):
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    return int(head[0].split()[1]), {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in head[1:])}


# Refused before any route: on a path no client API serves, where the answers carried no id.
EDGE_HTTP1 = {
    "a method not in capitals": (b"get /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400),
    "an HTTP/2.0 request line": (b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    "a path not canonical": (b"GET /a/../health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400),
    "a WebSocket handshake": (b"GET /health HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              b"Connection: close\r\n\r\n", 400),
    "a head past MAX_HEAD_BYTES": (b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"x-%d: %s\r\n" % (i, b"a" * 200) for i in range(100)) + b"Connection: close\r\n\r\n", 431),
    "a bad chunk (h11's)": (b"POST /nowhere HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
}


@pytest.mark.parametrize("case", EDGE_HTTP1)
def test_an_edge_refusal_over_http1_carries_a_request_id(routed, case):
    request, expected = EDGE_HTTP1[case]
    status, headers = raw_answer(routed.port, request)
    assert status == expected, headers
    assert ID.fullmatch(headers.get(b"x-request-id", b"none")), headers


def test_an_edge_refusal_keeps_the_clients_sane_request_id(routed):
    status, headers = raw_answer(routed.port, b"GET /a/../health HTTP/1.1\r\nHost: x\r\nx-request-id: mine-1\r\n"
                                              b"Connection: close\r\n\r\n")
    assert status == 400 and headers[b"x-request-id"] == b"mine-1", headers


def h2_answer(port: int, head: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """The response headers of one HTTP/2 stream opened with ``head`` (sent as given) and ended at once."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None, validate_outbound_headers=False, normalize_outbound_headers=False))
    conn.initiate_connection()
    conn.send_headers(1, head, end_stream=True)
    events: list = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(conn.data_to_send())
        while not any(isinstance(e, h2.events.ResponseReceived) for e in events):
            data = s.recv(65536)
            assert data, f"the router closed the connection: {events}"
            events += conn.receive_data(data)
            s.sendall(conn.data_to_send())
    return dict(next(e for e in events if isinstance(e, h2.events.ResponseReceived)).headers)


GET = [(b":method", b"GET"), (b":path", b"/health"), (b":scheme", b"http"), (b":authority", b"x")]
EDGE_HTTP2 = {
    "a tunnel (CONNECT)": ([(b":method", b"CONNECT"), (b":authority", b"example.com:443")], b"501"),
    "a head past MAX_HEAD_BYTES": (GET + [(b"x-big", b"a" * 20_000)], b"431"),
    "a WebSocket CONNECT hypercorn refuses": ([(b":method", b"CONNECT"), (b":protocol", b"websocket"),
                                               *GET[1:]], b"400"),
    "a method not in capitals": ([(b":method", b"get"), *GET[1:]], b"400"),
}


@pytest.mark.parametrize("case", EDGE_HTTP2)
def test_an_edge_refusal_over_http2_carries_a_request_id(routed, case):
    head, expected = EDGE_HTTP2[case]
    headers = h2_answer(routed.port, head)
    assert headers[b":status"] == expected, headers
    assert ID.fullmatch(headers.get(b"x-request-id", b"none")), headers
