"""``headers.read`` reads request and answer heads as h11's own readers do: held to them on fuzzed heads (the same
event field by field, or the same error with the same words and status hint, and the same bytes left in the
buffer), each head read twice so the second read takes the remembered lines; and installed on every
``WireConnection`` from its first head on."""
from __future__ import annotations

import random

import h11
import h11._events
import h11._readers
import h11._receivebuffer
import pytest

from vsr_fast.headers import read
from vsr_fast.headers.read import read_request, read_response
from vsr_fast.headers.wire import adopt


def _outcome(reader, data: bytes):
    buf = h11._receivebuffer.ReceiveBuffer()
    buf += data
    try:
        event = reader(buf)
    except Exception as exc:        # the same error, of the same type, with the same words and hint
        return (type(exc), str(exc), getattr(exc, "error_status_hint", None), bytes(buf))
    if event is None:
        return (None, bytes(buf))
    fields = {name: getattr(event, name) for name in event.__slots__ if name != "headers"}
    items = event.headers._full_items
    return (type(event), fields, [tuple(map(type, fields.values()))], items,
            [tuple(map(type, item)) for item in items], bytes(buf))


_REQUEST_LINES = [b"POST /v1/chat/completions HTTP/1.1", b"GET / HTTP/1.0", b"get /x?a=b HTTP/1.1",
                  b"POST / HTTP/2.0", b"POST  / HTTP/1.1", b"POST / HTTP/1.1 ", b"POST /\x7f HTTP/1.1",
                  b"PO(ST / HTTP/1.1", b"POST / http/1.1", b"POST /\xff HTTP/1.1", b"", b" GET / HTTP/1.1",
                  b"\x16\x03\x01", b"PRI * HTTP/2.0"]
_STATUS_LINES = [b"HTTP/1.1 200 OK", b"HTTP/1.1 200", b"HTTP/1.0 404 Not Found", b"HTTP/1.1 100 Continue",
                 b"HTTP/1.1 099 Low", b"HTTP/1.1 999 x\xff", b"HTTP/1.1 20 OK", b"HTTP/1.1 200 O\x00K",
                 b"HTTP/1.1 200 \t", b"HTTP/1.1 101 Switching", b"HTTP/2 200 OK", b"", b"HTTP/1.1 200  OK"]
_NAMES = [b"Host", b"host", b"HOST", b"Content-Length", b"content-length", b"Transfer-Encoding", b"Connection",
          b"Authorization", b"User-Agent", b"x-a", b"X-B", b"a b", b"a:b", b"", b"\xff", b"x\x00"]
_VALUES = [b"x", b"127.0.0.1:8080", b"", b" x ", b"\tx\t", b"a  b", b"12", b"12, 12", b"1,2", b" 12", b"+1",
           b"1" * 20, b"1" * 21, b"chunked", b"Chunked", b"gzip", b"x\x00y", b"\x80\xff", b"x\x7fy", b"a\rb",
           b"Bearer sk-123", b"keep-alive", b"\xb2"]


def _head(rng: random.Random, starts: list[bytes]) -> bytes:
    plain = rng.random() < 0.5      # half the heads mostly what clients send, the rest anything
    lines = [rng.choice(starts[:3] if plain else starts)]
    if plain:
        lines.append(b"Host: x")
    for _ in range(rng.randrange(0, 7)):
        kind = rng.random() + (0.1 if plain else 0)
        if kind < 0.05:
            lines.append(b" folded" if rng.random() < 0.5 else b"\tfolded")
        elif kind < 0.08:
            lines.append(b"no colon")
        else:
            lines.append(rng.choice(_NAMES[6:12] if plain else _NAMES) + b":" + rng.choice([b"", b" ", b"\t"])
                         + rng.choice(_VALUES[:2] if plain else _VALUES))
    ending = rng.choice([b"\r\n", b"\r\n", b"\n"])
    tail = rng.choice([b"", b"body", b"GET / HTTP/1.1\r\n"])
    return ending.join(lines) + ending + ending + tail


@pytest.mark.parametrize("theirs, ours, starts", [
    (h11._readers.maybe_read_from_IDLE_client, read_request, _REQUEST_LINES),
    (h11._readers.maybe_read_from_SEND_RESPONSE_server, read_response, _STATUS_LINES),
])
def test_heads_are_read_as_h11_reads_them(theirs, ours, starts):
    rng = random.Random(115)
    ok = bad = 0
    for _ in range(20_000):
        data = _head(rng, starts)
        expected = _outcome(theirs, data)
        assert _outcome(ours, data) == expected, data
        assert _outcome(ours, data) == expected, data      # again, its lines remembered
        ok += expected[0] in (h11.Request, h11.Response, h11.InformationalResponse)
        bad += expected[0] not in (h11.Request, h11.Response, h11.InformationalResponse)
    assert ok > 2_000 and bad > 2_000       # both sides of the line were reached


@pytest.mark.parametrize("data", [
    b"", b"\r\n", b"\n", b"POST / HTTP/1.1\r\nhost: x\r\n", b"\x16\x03\x01\x00", b"POST / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nhost: a\r\nHost: b\r\n\r\n", b"GET / HTTP/1.1\r\nhost: a\r\n folded\r\n\r\n",
    b"GET / HTTP/1.1\r\n folded\r\nhost: a\r\n\r\n", b"GET / HTTP/1.1\r\nhost: a\r\ncontent-length: 1\r\n"
    b"content-length: 1\r\n\r\n", b"GET / HTTP/1.1\r\nhost: a\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n",
    b"GET / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: gzip\r\n\r\n", b"GET / HTTP/1.0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
])
def test_odd_request_heads_are_read_as_h11_reads_them(data):
    for _ in range(2):
        assert _outcome(read_request, data) == _outcome(h11._readers.maybe_read_from_IDLE_client, data)


def test_credentials_are_never_remembered_and_the_lines_are_bounded():
    secret = b"authorization: Bearer sk-live-115"
    read_request_bytes = b"GET / HTTP/1.1\r\nhost: a\r\n" + secret + b"\r\nx-api-key: k115\r\n\r\n"
    assert _outcome(read_request, read_request_bytes)[0] is h11.Request
    assert secret not in read._FIELDS and b"x-api-key: k115" not in read._FIELDS
    assert b"host: a" in read._FIELDS
    long = b"x-long: " + b"a" * read.LINE_BYTES_MAX
    assert _outcome(read_request, b"GET / HTTP/1.1\r\nhost: a\r\n" + long + b"\r\n\r\n")[0] is h11.Request
    assert long not in read._FIELDS
    for i in range(read.LINES_MAX + 10):
        read_request_bytes = b"GET / HTTP/1.1\r\nhost: a\r\nx-request-id: %d\r\n\r\n" % i
        assert _outcome(read_request, read_request_bytes)[0] is h11.Request
    assert 0 < len(read._FIELDS) <= read.LINES_MAX


@pytest.mark.parametrize("role, reader", [(h11.SERVER, read_request), (h11.CLIENT, read_response)])
def test_a_wire_connection_reads_its_first_head_and_the_next_with_these_readers(role, reader):
    conn = h11.Connection(role)
    adopt(conn)
    assert conn._reader is reader
    if role is h11.SERVER:
        conn.receive_data(b"POST / HTTP/1.1\r\nhost: h\r\ncontent-length: 2\r\n\r\nab")
        assert type(conn.next_event()) is h11.Request
        assert conn._reader is not reader       # the body's
        assert type(conn.next_event()) is h11.Data and type(conn.next_event()) is h11.EndOfMessage
        conn.send(h11.Response(status_code=200, headers=[(b"content-length", b"0")]))
        conn.send(h11.EndOfMessage())
        conn.start_next_cycle()
    else:
        conn.send(h11.Request(method=b"GET", target=b"/", headers=[(b"host", b"h")]))
        conn.send(h11.EndOfMessage())
    assert conn._reader is reader


def test_the_h11_code_the_readers_stand_in_for_is_as_pinned():
    assert h11._readers.READERS[h11.CLIENT, h11.IDLE] is h11._readers.maybe_read_from_IDLE_client
    assert h11._readers.READERS[h11.SERVER, h11.IDLE] is h11._readers.maybe_read_from_SEND_RESPONSE_server
    assert h11._readers.READERS[h11.SERVER, h11.SEND_RESPONSE] is h11._readers.maybe_read_from_SEND_RESPONSE_server
    assert h11._events.Request.__slots__ == ("method", "headers", "target", "http_version")
    assert h11._events._ResponseBase.__slots__ == ("headers", "http_version", "reason", "status_code")
