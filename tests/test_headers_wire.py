"""``headers.wire`` validates the heads the router writes as h11 does, and leans on h11, hypercorn and httpcore
internals: held here to h11's own answers on fuzzed headers, and each internal pinned, so a release that changes
one fails these tests rather than the router's validation."""
from __future__ import annotations

import hashlib
import inspect
import random
import time
from types import SimpleNamespace
from wsgiref.handlers import format_date_time

import h11
import h11._abnf
import h11._connection
import h11._events
import h11._headers
import h11._readers
import h11._state
import httpcore
import hypercorn.config
import hypercorn.protocol.h11
import pytest
from httpcore._async.connection_pool import PoolByteStream
from httpcore._async.http11 import AsyncHTTP11Connection, HTTP11ConnectionByteStream

from vsr_fast.headers import wire
from vsr_fast.headers.wire import WireConnection, valid_headers
from vsr_fast.server import serve
from vsr_fast.upstream import transport


def _outcome(fn, headers):
    try:
        return ("ok", fn(headers)._full_items)
    except Exception as exc:        # the same error, of the same type, with the same words
        return (type(exc), str(exc))


def _same(headers):
    assert _outcome(valid_headers, headers) == _outcome(h11._headers.normalize_and_validate, headers), headers


# Bytes that matter to h11's patterns: separators, every whitespace, NUL, DEL, obs-text, a comma and digits.
_NAME_BYTES = b"abcXYZ-_!#.~09" + b" \t:\x00\x7f\x80\xff,\n"
_VALUE_BYTES = b"aZ09 \t,;=\"\x00\n\r\x0b\x0c\x7f\x80\xff\x01\x1f"
_NAMES = [b"content-length", b"Content-Length", b"transfer-encoding", b"Transfer-Encoding", b"host", b"connection",
          b"x-a", b"X-B"]
_LENGTHS = [b"0", b"12", b" 12", b"12 ", b"12,12", b"12, 12", b"1,2", b"", b"1" * 20, b"1" * 21, b"+1", b"1_0",
            b"\xb2", b"12\n"]


def _fuzzed(rng: random.Random):
    headers = []
    for _ in range(rng.randrange(0, 7)):
        kind = rng.random()
        if kind < 0.4:
            name = rng.choice(_NAMES)
        else:
            name = bytes(rng.choice(_NAME_BYTES) for _ in range(rng.randrange(0, 5))) or b"x"
            if rng.random() < 0.1:
                name = b""
        if name.lower() == b"content-length" and rng.random() < 0.8:
            value = rng.choice(_LENGTHS)
        elif name.lower() == b"transfer-encoding" and rng.random() < 0.8:
            value = rng.choice([b"chunked", b"Chunked", b"gzip", b"chunked, gzip"])
        else:
            value = bytes(rng.choice(_VALUE_BYTES) for _ in range(rng.randrange(0, 6)))
        headers.append((name, value))
    return headers


def test_valid_headers_answers_as_h11_on_fuzzed_heads():
    rng = random.Random(14)
    bad = ok = 0
    for _ in range(30_000):
        headers = _fuzzed(rng)
        _same(headers)
        ok += _outcome(valid_headers, headers)[0] == "ok"
        bad += _outcome(valid_headers, headers)[0] != "ok"
    assert ok > 3_000 and bad > 3_000      # both sides of the line were reached


@pytest.mark.parametrize("headers", [
    [], [(b"host", b"x")], [("host", "x")], [(b"host", "x")], [(bytearray(b"host"), b"x")], [(b"host", memoryview(b"x"))],
    [(b"host", b"x", b"y")], [(b"host",)], [(b"a", b"b"), (b"c", b"d", b"e")], [(1, b"x")], [("h\u00e9", "x")],
    [(b"content-length", b"5"), (b"content-length", b"5")], [(b"content-length", b"5"), (b"Content-Length", b"6")],
    [(b"transfer-encoding", b"chunked"), (b"transfer-encoding", b"chunked")], [(b"a\x00b", b"x")],
    [(b"a", b"x\x00"), (b"b", b"y")], [(b"a", b"x\ny")], [(b"a", b"\n"), (b"b", b"")], [(b"a", b" x")],
    [(b"a", b"x\t")], [(b"a", b"x \t y")], [(b"a", b"\x80\xff\x7f\x01")],
])
def test_valid_headers_answers_as_h11_on_odd_inputs(headers):
    _same(headers)


def test_the_pairs_remembered_valid_are_bounded():
    for i in range(wire.SEEN_MAX + 10):
        valid_headers([(b"x-request-id", b"%d" % i)])
    assert 0 < len(wire._SEEN) <= wire.SEEN_MAX
    _same([(b"x-request-id", b"1"), (b"x-request-id", b"1\n")])


def test_valid_headers_takes_any_iterable_once():
    pairs = [(b"Host", b"x"), (b"Content-Length", b"3")]
    assert valid_headers(iter(pairs))._full_items == h11._headers.normalize_and_validate(pairs)._full_items
    assert _outcome(valid_headers, iter([(b"a", b"x\ny")])) == \
        _outcome(h11._headers.normalize_and_validate, [(b"a", b"x\ny")])


def test_the_h11_internals_relied_on_are_as_pinned():
    # valid_headers checks each pair with h11's own two patterns, and the Content-Length bound h11 applies.
    assert h11._headers._field_name_re.pattern == h11._abnf.field_name.encode()
    assert h11._headers._field_value_re.pattern == h11._abnf.field_value.encode()
    assert h11._headers.CONTENT_LENGTH_MAX_DIGITS == 20
    # Events keep a Headers they are given as it is, validated by nobody again.
    headers = valid_headers([(b"Host", b"x")])
    assert h11.Request(method=b"GET", target=b"/", headers=headers).headers is headers
    assert h11.Response(status_code=200, headers=headers).headers is headers
    assert headers.raw_items() == [(b"Host", b"x")] and list(headers) == [(b"host", b"x")]


def _digest(fn) -> str:
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]


# The library methods vsr-fast's overrides copy, as they were copied: a release that changes one changes its
# digest, and the override must be read against the new code (then the digest updated here).
@pytest.mark.parametrize("fn, digest", [
    (h11._connection.Connection._clean_up_response_headers_for_sending, "a190401e4767c641"),
    (h11._connection._body_framing, "bbbb12006a0c9b1d"),
    (h11._connection.Connection._process_event, "34a61e13cd672ae1"),
    (h11._connection.Connection._get_io_object, "95e611adaeb0a870"),
    (h11._headers.normalize_and_validate, "82a8fcccb31d27d4"),
    (h11._headers.set_comma_header, "10c70e68e0fc788a"),
    (hypercorn.protocol.h11.H11Protocol.stream_send, "56a36254a368d71a"),
    (AsyncHTTP11Connection._send_request_headers, "410f68e08db88832"),
    (httpcore.Request.__init__, "aaf95b84d2be79b7"),
    (hypercorn.config.Config.response_headers, "5a637c3d48180e55"),
    # EdgeH11Protocol's copies of hypercorn's (tests/test_edge_head.py holds a plain request's scope to hypercorn's).
    (hypercorn.protocol.h11.H11Protocol._check_protocol, "f95f6b38f43c62aa"),
    (hypercorn.protocol.h11.H11Protocol._create_stream, "a2338a57ab343908"),
    # transport._Exact._receive_event, and what _BuiltResponse replaces and where it is called from.
    (AsyncHTTP11Connection._receive_event, "1edfeb771f851df2"),
    (httpcore.Response.__init__, "17ffba6163d1f431"),
    (AsyncHTTP11Connection.handle_async_request, "e290325d4e334108"),
    (httpcore.AsyncConnectionPool.handle_async_request, "8a3251174ff06224"),
    # QuietPool's direct path: the pool's sweep it skips when it has nothing to do, the close it shields as the
    # pool's stream does, the connection layer it steps past once connected, and what makes a connection ready.
    (httpcore.AsyncConnectionPool._assign_requests_to_connections, "ea1547e78a655633"),
    (PoolByteStream.aclose, "0fb4c238df0cc2be"),
    (HTTP11ConnectionByteStream.aclose, "0a7ae9013296164b"),
    (httpcore.AsyncHTTPConnection.handle_async_request, "b76bc6e38ffd6565"),
    (AsyncHTTP11Connection.has_expired, "288dc074d56392c6"),
    (AsyncHTTP11Connection._response_closed, "f26a0647f3a51321"),
    # _Exact.handle_untraced, _Body and _ShieldedClose.aclose: the steps of a request, its body and its close they
    # copy (tests/test_upstream_exact.py holds them to httpcore's on the same scripts), and the locks they take.
    (AsyncHTTP11Connection._send_request_body, "6155432fb58470a8"),
    (AsyncHTTP11Connection._send_event, "274f231913b0a5a4"),
    (AsyncHTTP11Connection._receive_response_headers, "785f56c304208b87"),
    (AsyncHTTP11Connection._receive_response_body, "2ddbf55dd6725a3c"),
    (httpcore.Response.aclose, "4e6d3da2f2a70876"),
    (httpcore._models.ByteStream.__aiter__, "5e377521925b2ffa"),
    (httpcore._synchronization.AsyncLock.__aenter__, "805885ed3befc138"),
    (httpcore._synchronization.AsyncLock.__aexit__, "9cddecf280799b82"),
    # transport._ClientWire: the transitions it remembers (an end of message, the next cycle's start) and how h11
    # picks a reader and writer after one (tests/test_upstream_exact.py holds it to h11 on random exchanges).
    (h11._connection.Connection.start_next_cycle, "d4bd9b18262fe0b4"),
    (h11._state.ConnectionState.start_next_cycle, "0f778bb3984a1d2e"),
    (h11._connection.Connection._respond_to_state_changes, "b2a6461c234de46b"),
    (h11._state.ConnectionState._fire_event_triggered_transitions, "7b79ffa8d2ecbe9c"),
    # transport._trace: when a Trace traces, and what the HTTP/1.1 connection does with one (handle_async_request,
    # pinned above; the answer's stream).
    (httpcore._trace.Trace.__init__, "45b8cfc9bebbfd36"),
    (httpcore._trace.Trace.__aenter__, "9700f335b707b60f"),
    (httpcore._trace.Trace.__aexit__, "d27b348baa3b0270"),
    (HTTP11ConnectionByteStream.__aiter__, "68a1e5cfd845bd1c"),
    # WireConnection's Data without the state machine: the machine it skips.
    (h11._state.ConnectionState.process_event, "cf17ddff4b02ae70"),
    (h11._state.ConnectionState._fire_state_triggered_transitions, "09f0fcf0cee957e0"),
    # headers.read: the readers it stands in for (their tails copied), and the checks of the events it builds.
    (h11._readers.maybe_read_from_IDLE_client, "b0ae12d92b2c4db9"),
    (h11._readers.maybe_read_from_SEND_RESPONSE_server, "d61524e491047e74"),
    (h11._readers._decode_header_lines, "5ec92fa74cf22741"),
    (h11._readers._obsolete_line_fold, "79ca94b31c01c383"),
    (h11.Request.__init__, "e465e693adb3ceb4"),
    (h11._events._ResponseBase.__init__, "eccce2371512d41e"),
    (h11.InformationalResponse.__post_init__, "2d389343afdb8ce5"),
    (h11.Response.__post_init__, "3443ffd2ca5a75e4"),
    (h11._headers.Headers.__init__, "43da91ab4412501d"),
])
def test_the_copied_library_code_is_unchanged(fn, digest):
    assert _digest(fn) == digest, f"{fn.__qualname__} changed: read its override in vsr-fast against it"


def _request(conn: h11.Connection, head: bytes) -> None:
    conn.receive_data(head)
    assert isinstance(conn.next_event(), h11.Request)


_HEADS = [b"GET / HTTP/1.1\r\nhost: x\r\n\r\n", b"HEAD / HTTP/1.1\r\nhost: x\r\n\r\n",
          b"GET / HTTP/1.0\r\n\r\n", b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
          b"GET / HTTP/1.1\r\nhost: x\r\nconnection: keep-alive, Upgrade\r\n\r\n"]
_ANSWERS = [[(b"content-type", b"text/plain")], [(b"Content-Length", b"3")],
            [(b"content-length", b"3"), (b"transfer-encoding", b"chunked")],
            [(b"Connection", b"Keep-Alive, foo"), (b"x", b"y")], [(b"transfer-encoding", b"chunked")], []]


@pytest.mark.parametrize("head", _HEADS)
@pytest.mark.parametrize("answer", _ANSWERS)
@pytest.mark.parametrize("status", [200, 204, 304, 404])
def test_wire_connection_writes_what_h11_writes(head, answer, status):
    theirs, ours = h11.Connection(h11.SERVER), h11.Connection(h11.SERVER)
    ours.__class__ = WireConnection
    for conn in (theirs, ours):
        _request(conn, head)
    sent = [conn.send(h11.Response(status_code=status, headers=answer)) for conn in (theirs, ours)]
    assert sent[0] == sent[1]
    assert theirs.our_state is ours.our_state and theirs._cstate.keep_alive == ours._cstate.keep_alive
    body = [_sent(conn, h11.Data(data=b"abc")) for conn in (theirs, ours)]
    end = [_sent(conn, h11.EndOfMessage()) for conn in (theirs, ours)]
    assert body[0] == body[1] and end[0] == end[1]


def _sent(conn: h11.Connection, event) -> bytes | str:
    try:
        return conn.send(event)
    except h11.LocalProtocolError as exc:
        return str(exc)


def _fields(request: httpcore.Request) -> dict:
    out = dict(vars(request))
    out["stream"] = (type(request.stream), request.stream._content)
    return out


@pytest.mark.parametrize("method, headers, body, extensions", [
    (b"POST", [(b"Host", b"h"), (b"content-type", b"application/json"), (b"Content-Length", b"2")], b"{}",
     {"timeout": {"read": 1.0}}),
    (b"GET", [(b"Host", b"h")], b"", {}),
    (b"POST", [(b"Host", "h"), ("x", b"y")], b"ab", {}),       # not bytes pairs: httpcore's own constructor
])
def test_transport_builds_the_request_httpcore_builds(method, headers, body, extensions):
    url = transport.Origin("http://127.0.0.1:9/v1").url("/chat/completions")
    ours = transport._request(method, url, list(headers), body, extensions)
    theirs = httpcore.Request(method, url, headers=list(headers), content=body if body or method == b"POST" else None,
                              extensions=extensions or None)
    assert type(ours) is httpcore.Request and _fields(ours) == _fields(theirs)


@pytest.mark.parametrize("setting", [{}, {"include_server_header": False}, {"include_date_header": False},
                                     {"alt_svc_headers": ['h3=":443"; ma=86400']}])
def test_the_edge_config_heads_answers_as_hypercorns(setting):
    ours, theirs = serve.EdgeConfig(), hypercorn.config.Config()
    for cfg in (ours, theirs):
        for key, value in setting.items():
            setattr(cfg, key, value)
    for protocol in ("h11", "h2"):
        while True:         # both read in the same second
            second = int(time.time())
            pair = ours.response_headers(protocol), theirs.response_headers(protocol)
            if int(time.time()) == second:
                break
        # The Server header aside: the router's name (headers.registry.SERVER), never hypercorn-h11.
        expected = [(b"server", b"vsr-fast") if name == b"server" else (name, value) for name, value in pair[1]]
        assert pair[0] == expected


def test_the_edge_config_formats_the_date_again_each_second(monkeypatch):
    cfg, now = serve.EdgeConfig(), [1_000_000_000.25]
    monkeypatch.setattr(serve, "time", SimpleNamespace(time=lambda: now[0]))
    for now[0] in (1_000_000_000.25, 1_000_000_000.99, 1_000_000_001.0, 1_000_000_061.5):
        assert cfg.response_headers("h11")[0] == (b"date", format_date_time(now[0]).encode())


_ANSWERED = [b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc",
             b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
             b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nconnection: close\r\n\r\nabc",
             b"HTTP/1.1 100 Continue\r\nconnection: close\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
             b"HTTP/1.0 200 OK\r\n\r\nabc", b"HTTP/1.1 204 No Content\r\n\r\n",
             b"HTTP/1.1 101 Switching\r\nupgrade: x\r\nconnection: upgrade\r\n\r\nraw",
             b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nabc", b"HTTP/1.1 2000 OK\r\n\r\n"]


def _events(conn: h11.Connection, data: bytes) -> list:
    out = []
    conn.receive_data(data)
    conn.receive_data(b"")
    for _ in range(8):
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            out.append(("error", str(exc)))
            break
        out.append(event)
        if event in (h11.NEED_DATA, h11.PAUSED) or type(event) is h11.ConnectionClosed:
            break
    return out + [conn.states, conn.their_http_version, conn._cstate.keep_alive]


@pytest.mark.parametrize("answer", _ANSWERED)
@pytest.mark.parametrize("method, headers", [
    (b"POST", [(b"host", b"h"), (b"content-length", b"2")]), (b"GET", [(b"host", b"h"), (b"connection", b"close")]),
    (b"HEAD", [(b"host", b"h")]), (b"GET", [(b"host", b"h"), (b"upgrade", b"x"), (b"connection", b"upgrade")]),
    (b"POST", [(b"host", b"h"), (b"expect", b"100-continue"), (b"transfer-encoding", b"chunked")])])
def test_wire_connection_reads_answers_as_h11(answer, method, headers):
    theirs, ours = h11.Connection(h11.CLIENT), h11.Connection(h11.CLIENT)
    ours.__class__ = WireConnection
    for conn in (theirs, ours):
        conn.send(h11.Request(method=method, target=b"/", headers=headers))
        if method == b"POST":
            conn.send(h11.Data(data=b"ab"))
            conn.send(h11.EndOfMessage())
    assert _events(theirs, answer) == _events(ours, answer)


def _cycle(conn: h11.Connection, data: list[bytes]) -> list:
    """Each event read from ``data`` fed piece by piece, with the connection's states and 100-continue flags."""
    out = []
    for piece in data:
        conn.receive_data(piece)
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                return out + [("error", str(exc))]
            out.append((event, conn.states, conn.they_are_waiting_for_100_continue))
            if event in (h11.NEED_DATA, h11.PAUSED) or type(event) is h11.ConnectionClosed:
                break
    return out


@pytest.mark.parametrize("data", [
    [b"POST / HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\n\r\nab", b"c", b"de"],
    [b"POST / HTTP/1.1\r\nhost: h\r\nexpect: 100-continue\r\ncontent-length: 3\r\n\r\n", b"abc"],
    [b"POST / HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n", b"1\r\nc\r\n0\r\n\r\n"],
    [b"POST / HTTP/1.1\r\nhost: h\r\ncontent-length: 4\r\n\r\nab", b""],       # the client left mid-body
    [b"POST / HTTP/1.0\r\ncontent-length: 2\r\n\r\nabGET / HTTP/1.1\r\n\r\n"],
])
def test_wire_connection_reads_request_bodies_as_h11(data):
    theirs, ours = h11.Connection(h11.SERVER), h11.Connection(h11.SERVER)
    ours.__class__ = WireConnection
    assert _cycle(theirs, data) == _cycle(ours, data)


@pytest.mark.parametrize("steps", [
    [h11.Data(data=b"x")],                                                       # no request yet
    [h11.Request(method=b"POST", target=b"/", headers=[(b"host", b"h"), (b"content-length", b"1")]),
     h11.Data(data=b"a"), h11.EndOfMessage(), h11.Data(data=b"late")],            # body after its end
    [h11.Request(method=b"POST", target=b"/", headers=[(b"host", b"h"), (b"expect", b"100-continue"),
                                                        (b"transfer-encoding", b"chunked")]),
     h11.Data(data=b"ab"), h11.Data(data=b""), h11.EndOfMessage()],
    [h11.Request(method=b"POST", target=b"/", headers=[(b"host", b"h"), (b"content-length", b"1")]),
     h11.Data(data=b"ab")],                                                       # more than its length
])
def test_wire_connection_sends_request_bodies_as_h11(steps):
    theirs, ours = h11.Connection(h11.CLIENT), h11.Connection(h11.CLIENT)
    ours.__class__ = WireConnection
    for event in steps:
        assert _sent(theirs, event) == _sent(ours, event)
        assert theirs.states == ours.states
        assert theirs.client_is_waiting_for_100_continue == ours.client_is_waiting_for_100_continue


class _Chunks:
    def __aiter__(self):
        return self


@pytest.mark.parametrize("headers, content", [
    ([(b"content-type", b"application/json"), (b"Content-Length", b"3")], _Chunks()),
    ([], _Chunks()),
    ({b"a": b"b"}, _Chunks()),                     # a mapping, bytes or no content: httpcore's own constructor
    ([(b"a", b"b")], b"abc"),
    ([("a", "b")], None),
])
def test_the_response_httpcore_builds_for_an_answer_is_the_same(headers, content):
    extensions = {"http_version": b"HTTP/1.1"}
    ours = transport._BuiltResponse(200, headers=headers, content=content, extensions=extensions)
    theirs = httpcore.Response(200, headers=headers, content=content, extensions=extensions)
    fields = [dict(vars(r)) for r in (ours, theirs)]
    for f in fields:
        if type(f["stream"]) is httpcore._models.ByteStream:
            f["stream"] = f["stream"]._content
    assert fields[0] == fields[1] and isinstance(ours, httpcore.Response)
    assert ours.headers is not headers, "a list of its own, as httpcore's"


def test_the_response_is_replaced_where_httpcore_s_answers_are_built_and_nowhere_else():
    from httpcore._async import connection_pool, http11
    assert http11.Response is connection_pool.Response is transport._BuiltResponse
    assert httpcore.Response is not transport._BuiltResponse and httpcore._models.Response is httpcore.Response
