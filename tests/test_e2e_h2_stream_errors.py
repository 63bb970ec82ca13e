"""HTTP/2 stream errors stay on their stream, and HTTP/2 connections are held to ``limits.header_timeout_ms``
(real router and bench mock processes, raw sockets, the ``h2`` package as the client):

- a malformed request (RFC 9113 8.1.1: an uppercase header name, a connection-specific header, NUL, CR or LF in a
  value, an empty :path, a content-length its body does not match) is reset on its own stream (RST_STREAM
  PROTOCOL_ERROR): another request in flight on the connection is answered (h2 raised these as connection
  errors, and hypercorn closed the connection with GOAWAY PROTOCOL_ERROR, in-flight streams unanswered);
- a plain CONNECT (a tunnel) is answered 501 on its stream;
- a connection with no stream open (silent after its preface, idle after an answer, stopped mid-frame) is told
  GOAWAY NO_ERROR and closed at header_timeout_ms (it stayed open past 100 s), and a frame header declaring more
  than the frame size is refused at once (GOAWAY FRAME_SIZE_ERROR; h2 waited for 16 MiB).
"""
from __future__ import annotations

import json
import socket

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest

from vsr_fast.server.h2edge import EdgeH2Connection, _head_stalled

from .procs import config, mock_upstream, router, write_config

# Long enough for the malformed stream to be read while the first request waits on the backend.
LATENCY_MS = 1500
BODY = json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "Say hello"}]}).encode()
HEAD = [(b":method", b"POST"), (b":path", b"/v1/chat/completions"), (b":scheme", b"http"), (b":authority", b"x"),
        (b"content-type", b"application/json")]


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    with mock_upstream("--latency-ms", str(LATENCY_MS)) as mock:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        doc["global"] = {"router": {"limits": {"header_timeout_ms": 1000},
                                    "upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("h2streams")))) as proc:
            yield proc


def client() -> h2.connection.H2Connection:
    """A client that sends what it is given, malformed or not."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None, validate_outbound_headers=False, normalize_outbound_headers=False))
    conn.initiate_connection()
    return conn


def read_until(sock, conn, until) -> list:
    """Events read until ``until(events)`` holds; the router closing the connection first fails the test."""
    events: list = []
    while not until(events):
        data = sock.recv(65536)
        assert data, f"the router closed the connection: {events}"
        events += conn.receive_data(data)
        sock.sendall(conn.data_to_send())
    return events


def ended(stream_id: int):
    return lambda events: any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset, h2.events.ConnectionTerminated))
                              and getattr(e, "stream_id", stream_id) == stream_id for e in events)


MALFORMED = {
    "uppercase name": (HEAD + [(b"X-Upper", b"1")], BODY),
    "transfer-encoding": (HEAD + [(b"transfer-encoding", b"chunked")], BODY),
    "connection": (HEAD + [(b"connection", b"keep-alive")], BODY),
    "NUL in a value": (HEAD + [(b"x-a", b"a\x00b")], BODY),
    "CR LF in a value": (HEAD + [(b"x-a", b"a\r\nb: c")], BODY),
    "empty :path": ([(n, b"" if n == b":path" else v) for n, v in HEAD], BODY),
    "CONNECT with a :path": ([(b":method", b"CONNECT")] + HEAD[1:], None),
    "content-length over the body": (HEAD + [(b"content-length", b"500")], BODY),
    "content-length under the body": (HEAD + [(b"content-length", b"5")], BODY),
    "content-length not a number": (HEAD + [(b"content-length", b"x")], BODY),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_request_resets_its_stream_and_the_request_in_flight_is_answered(edge, case):
    head, body = MALFORMED[case]
    conn = client()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        conn.send_headers(1, HEAD + [(b"content-length", b"%d" % len(BODY))])
        conn.send_data(1, BODY, end_stream=True)
        s.sendall(conn.data_to_send())
        conn.send_headers(3, head, end_stream=body is None)
        if body is not None:
            conn.send_data(3, body, end_stream=True)
        s.sendall(conn.data_to_send())
        events = read_until(s, conn, ended(3))
        assert not any(isinstance(e, h2.events.ConnectionTerminated) for e in events), events
        assert [(e.stream_id, e.error_code) for e in events if isinstance(e, h2.events.StreamReset)] == \
            [(3, h2.errors.ErrorCodes.PROTOCOL_ERROR)]
        events += read_until(s, conn, ended(1))
    assert status(events, 1) == b"200"
    assert not any(isinstance(e, h2.events.ConnectionTerminated) for e in events), events


def test_a_plain_connect_is_answered_501_on_its_stream_and_the_request_in_flight_is_answered(edge):
    # hypercorn took it for a WebSocket and failed on its missing :path, which ended the connection.
    conn = client()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        conn.send_headers(1, HEAD + [(b"content-length", b"%d" % len(BODY))])
        conn.send_data(1, BODY, end_stream=True)
        conn.send_headers(3, [(b":method", b"CONNECT"), (b":authority", b"example.com:443")])
        s.sendall(conn.data_to_send())
        events = read_until(s, conn, lambda ev: ended(1)(ev) and ended(3)(ev))
    assert status(events, 3) == b"501"
    assert status(events, 1) == b"200"


def status(events, stream_id: int) -> bytes:
    return dict(next(e for e in events if isinstance(e, h2.events.ResponseReceived)
                     and e.stream_id == stream_id).headers)[b":status"]


def closed_with(sock, conn) -> list:
    """Events read until the router closes the connection (a bound of 20 s: the socket's timeout)."""
    events: list = []
    while data := sock.recv(65536):
        events += conn.receive_data(data)
    return events


def goaway(events) -> list:
    return [e.error_code for e in events if isinstance(e, h2.events.ConnectionTerminated)]


def test_an_http2_connection_silent_after_its_preface_is_closed_at_the_header_timeout(edge):
    # It stayed open (past 100 s) while an idle HTTP/1 connection closed at header_timeout_ms.
    conn = client()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        s.sendall(conn.data_to_send())
        assert goaway(closed_with(s, conn)) == [h2.errors.ErrorCodes.NO_ERROR]


def test_an_http2_connection_idle_after_its_answers_is_closed_at_the_header_timeout(edge):
    conn = client()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        conn.send_headers(1, [(b":method", b"GET"), (b":path", b"/health"), (b":scheme", b"http"),
                              (b":authority", b"x")], end_stream=True)
        s.sendall(conn.data_to_send())
        events = read_until(s, conn, ended(1))
        events += closed_with(s, conn)
    assert status(events, 1) == b"200"
    assert goaway(events) == [h2.errors.ErrorCodes.NO_ERROR]


def test_an_http2_headers_frame_left_unfinished_is_closed_at_the_header_timeout(edge):
    conn = client()
    conn.send_headers(1, HEAD, end_stream=True)
    frame = conn.data_to_send()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        s.sendall(frame[:-5])      # the preface, SETTINGS and a HEADERS frame short of its last bytes
        assert goaway(closed_with(s, conn)) == [h2.errors.ErrorCodes.NO_ERROR]


def test_a_frame_header_declaring_more_than_the_frame_size_is_refused_at_once(edge):
    # h2 waited for the whole frame (16 MiB for a header of 0xff bytes) before it checked its length.
    conn = client()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        s.sendall(conn.data_to_send() + b"\xff" * 100)
        events = closed_with(s, conn)
    assert goaway(events) == [h2.errors.ErrorCodes.FRAME_SIZE_ERROR]


def test_a_headers_frame_left_unfinished_beside_a_stream_in_flight_ends_the_connection_at_the_header_timeout(edge):
    # With a stream open the connection is not idle, but the unfinished head is held to the same bound; a frame
    # cut short leaves nothing to reset (its stream does not exist yet): GOAWAY PROTOCOL_ERROR.
    conn = client()
    conn.send_headers(1, [(b":method", b"POST")] + HEAD[1:])      # stream 1 waits for a body that never comes
    opening = conn.data_to_send()
    conn.send_headers(3, HEAD, end_stream=True)
    head = conn.data_to_send()
    with socket.create_connection(("127.0.0.1", edge.port), timeout=20) as s:
        s.sendall(opening + head[:-5])
        events = closed_with(s, conn)
    assert goaway(events) == [h2.errors.ErrorCodes.PROTOCOL_ERROR]


def test_a_head_finished_while_the_read_loop_was_held_up_is_not_a_stalled_head():
    # The timer counts from the read that left a head unfinished; a read loop held up in handle() past
    # header_timeout_ms (a stream's queue full) may have read the rest since. The connection ends only when no
    # frame has come whole since the timer started and a head is still unfinished.
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    EdgeH2Connection.adopt(server)
    buffer = server.incoming_buffer
    conn = client()
    conn.send_headers(1, HEAD, end_stream=True)
    first = conn.data_to_send()
    conn.send_headers(3, HEAD, end_stream=True)
    second = conn.data_to_send()
    server.receive_data(first[:-5])
    seen = buffer.frames
    assert _head_stalled(buffer, seen)                 # the client silent since: the connection ends
    server.receive_data(first[-5:] + second[:-5])      # the rest came, and a later head is cut short
    assert not _head_stalled(buffer, seen)             # not the same head: the timer starts again
    assert _head_stalled(buffer, buffer.frames)
    server.receive_data(second[-5:])
    assert not _head_stalled(buffer, buffer.frames)    # no head unfinished
