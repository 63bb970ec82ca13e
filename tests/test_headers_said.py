"""``headers.said`` reads a head's Connection, Transfer-Encoding, Content-Length, Upgrade and Expect as h11's
``get_comma_header`` does, and ``WireConnection``'s state machine (its remembered moves, its ``next_event`` and
``start_next_cycle``) moves as h11's: both held to h11 on fuzzed input, h11's code they stand in for pinned by digest."""
from __future__ import annotations

import hashlib
import inspect
import random
from functools import partial

import h11
import h11._connection
import h11._headers
import h11._readers
import h11._state
import h11._writers
import pytest

from vsr_fast.headers import wire
from vsr_fast.headers.read import read_request, read_response
from vsr_fast.headers.said import Said, body_framing, expects_continue, keep_alive, said
from vsr_fast.headers.wire import WireConnection, _CrlfChunks, valid_headers

_NAMES = [b"connection", b"transfer-encoding", b"content-length", b"upgrade", b"expect"]
_VALUES = [b"close", b"Keep-Alive", b"keep-alive, Upgrade", b" , CLOSE ,", b"chunked", b"Chunked", b"gzip, chunked",
           b"12", b"12, 12", b"0", b"h2c", b"websocket", b"100-continue", b"100-Continue, x", b"", b",", b" a ,b,, "]


def _items(rng: random.Random) -> list[tuple[bytes, bytes, bytes]]:
    items = []
    for _ in range(rng.randrange(0, 8)):
        name = rng.choice(_NAMES + [b"host", b"x-a", b"content-type"])
        items.append((name.title() if rng.random() < 0.5 else name, name, rng.choice(_VALUES)))
    return items


def test_said_reads_each_name_as_get_comma_header():
    rng = random.Random(14)
    for _ in range(5000):
        items = _items(rng)
        theirs = [h11._headers.get_comma_header(h11._headers.Headers(items), name) for name in _NAMES]
        for headers in (h11._headers.Headers(items), Said(items)):
            assert [list(values) for values in said(headers)] == theirs, items
            assert [list(values) for values in said(headers)] == theirs, items      # remembered, for a Said


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:        # h11 asserts what its own checks made sure of (a Transfer-Encoding: chunked)
        return (type(exc), str(exc))


def test_keep_alive_framing_and_100_continue_are_h11s():
    rng = random.Random(15)
    for _ in range(5000):
        items = _items(rng)
        version = rng.choice([b"1.1", b"1.0"])
        for headers in (h11._headers.Headers(items), Said(items)):
            request = object.__new__(h11.Request)
            for name, value in (("headers", headers), ("method", rng.choice([b"GET", b"HEAD", b"CONNECT"])),
                                ("target", b"/"), ("http_version", version)):
                object.__setattr__(request, name, value)
            response = object.__new__(h11.Response)
            for name, value in (("headers", headers), ("status_code", rng.choice([200, 204, 304, 404])),
                                ("reason", b""), ("http_version", version)):
                object.__setattr__(response, name, value)
            for event in (request, response):
                assert keep_alive(event, said(headers)) == h11._connection._keep_alive(event)
                method = rng.choice([b"GET", b"HEAD", b"CONNECT", b"POST"])
                assert _outcome(body_framing, method, event) == _outcome(h11._connection._body_framing, method, event)
            assert expects_continue(request, said(headers)) == h11._headers.has_expect_100_continue(request)


def _digest(fn) -> str:
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]


# What said.py and WireConnection copy or stand in for: a release that changes one fails here, and the copy must be
# read against it (then the digest updated). _body_framing, _process_event, _get_io_object, ConnectionState's
# process_event and _fire_state_triggered_transitions are pinned in test_headers_wire.py.
@pytest.mark.parametrize("fn, digest", [
    (h11._headers.get_comma_header, "6256bb0dd152655b"),
    (h11._headers.has_expect_100_continue, "75de2ad05b2cea54"),
    (h11._connection._keep_alive, "eac4961738765ee6"),
    (h11._connection.Connection.next_event, "7d3288bcc261c49c"),
    (h11._connection.Connection._extract_next_receive_event, "c0fc7051975f7a5b"),
    (h11._connection.Connection.send, "cd6b139277cf57fa"),
    (h11._connection.Connection.send_with_data_passthrough, "e8332d21fb1a2963"),
    (h11._connection.Connection.start_next_cycle, "d4bd9b18262fe0b4"),
    (h11._connection.Connection._respond_to_state_changes, "b2a6461c234de46b"),
    (h11._connection.Connection._server_switch_event, "6b6e8d98dae1c72f"),
    (h11._state.ConnectionState.process_keep_alive_disabled, "bb5cdb9a39015772"),
    (h11._state.ConnectionState.process_client_switch_proposal, "5f4ed49f44ab57b4"),
    (h11._state.ConnectionState._fire_event_triggered_transitions, "7b79ffa8d2ecbe9c"),
    (h11._state.ConnectionState.start_next_cycle, "0f778bb3984a1d2e"),
])
def test_the_h11_code_stood_in_for_is_unchanged(fn, digest):
    assert _digest(fn) == digest, f"{fn.__qualname__} changed: read its stand-in in vsr-fast against it"


# What a reader or writer is, told apart from ours: headers.read's readers stand for h11's head readers (held to
# them in test_headers_read.py), _CrlfChunks for h11's ChunkedReader (its one difference kept out of these bytes).
_SAME = {read_request: h11._readers.maybe_read_from_IDLE_client,
         read_response: h11._readers.maybe_read_from_SEND_RESPONSE_server, _CrlfChunks: h11._readers.ChunkedReader}


def _io(obj) -> tuple:
    if obj is None or inspect.isfunction(obj) or type(obj) is partial:
        return (_SAME.get(obj, obj),)
    return (_SAME.get(type(obj), type(obj)), sorted(vars(obj).items()) if hasattr(obj, "__dict__") else None)


def _state(conn: h11.Connection) -> tuple:
    cstate = conn._cstate
    return (dict(cstate.states), cstate.keep_alive, set(cstate.pending_switch_proposals), conn.their_http_version,
            conn._request_method, conn.client_is_waiting_for_100_continue, conn.they_are_waiting_for_100_continue,
            conn.trailing_data, _io(conn._reader), _io(conn._writer))


def _events(conn: h11.Connection) -> list:
    out = []
    for _ in range(12):
        event = conn.next_event()
        out.append(event)
        if event is h11.NEED_DATA or event is h11.PAUSED or type(event) is h11.ConnectionClosed:
            break
    return out


def _step(conn: h11.Connection, step: tuple):
    kind, arg = step
    try:
        if kind == "receive":
            conn.receive_data(arg)
            return _events(conn)
        if kind == "send":
            return conn.send(arg)
        if kind == "cycle":
            return conn.start_next_cycle()
        return conn.send_failed()
    except Exception as exc:        # the same error, of the same type, words and status hint
        return (type(exc), str(exc), getattr(exc, "error_status_hint", None))


def _head(rng: random.Random, start: bytes) -> bytes:
    lines = [start]
    for _ in range(rng.randrange(0, 4)):
        lines.append(rng.choice([b"connection: close", b"Connection: keep-alive", b"connection: Upgrade",
                                 b"upgrade: h2c", b"expect: 100-continue", b"content-length: 3",
                                 b"transfer-encoding: chunked", b"x-a: b", b"content-length: x"]))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _request_bytes(rng: random.Random) -> bytes:
    line = rng.choice([b"GET / HTTP/1.1", b"POST /v1 HTTP/1.1", b"HEAD / HTTP/1.1", b"CONNECT h:1 HTTP/1.1",
                       b"GET / HTTP/1.0", b"BAD", b"OPTIONS * HTTP/1.1"])
    head = _head(rng, line)
    if rng.random() < 0.8 and line.endswith(b"1.1"):
        head = head.replace(line + b"\r\n", line + b"\r\nhost: h\r\n")
    return head


def _body_bytes(rng: random.Random) -> bytes:
    return rng.choice([b"abc", b"3\r\nabc\r\n", b"0\r\n\r\n", b"ab", b"", b"x" * 5, b"GET / HTTP/1.1\r\nhost: h\r\n\r\n"])


def _answer_bytes(rng: random.Random) -> bytes:
    line = rng.choice([b"HTTP/1.1 200 OK", b"HTTP/1.1 100 Continue", b"HTTP/1.1 101 Switching", b"HTTP/1.0 200 OK",
                       b"HTTP/1.1 204 No Content", b"HTTP/1.1 304 Not Modified", b"HTTP/1.1 404 Nope", b"HTTP/9"])
    return _head(rng, line)


def _fields(rng: random.Random, sized: bool = True) -> list:
    fields = []
    for _ in range(rng.randrange(0, 3)):
        fields.append(rng.choice([(b"connection", b"close"), (b"Connection", b"keep-alive, upgrade"),
                                  (b"upgrade", b"h2c"), (b"expect", b"100-continue"), (b"x-a", b"b"),
                                  (b"transfer-encoding", b"chunked"), (b"content-length", b"3")]))
    if sized and rng.random() < 0.5:
        fields.append((b"content-length", b"3"))
    return fields


def _headers(rng: random.Random, fields: list):
    return valid_headers(fields) if rng.random() < 0.5 else fields      # a Said, or h11's to build


def _sent_event(rng: random.Random, role) -> object:
    while True:
        try:
            return _event(rng, role)
        except h11.LocalProtocolError:      # a head h11 will not build (two Transfer-Encodings): draw again
            pass


def _event(rng: random.Random, role) -> object:
    pick = rng.random()
    if pick < 0.3:
        if role is h11.CLIENT:
            fields = [(b"host", b"h")] + _fields(rng)
            return h11.Request(method=rng.choice([b"GET", b"POST", b"HEAD", b"CONNECT"]), target=b"/",
                               headers=_headers(rng, fields))
        return h11.Response(status_code=rng.choice([200, 204, 304, 404]), headers=_headers(rng, _fields(rng)))
    if pick < 0.4:
        return h11.InformationalResponse(status_code=rng.choice([100, 101, 103]), headers=[])
    if pick < 0.75:
        return h11.Data(data=rng.choice([b"abc", b"a", b""]))
    if pick < 0.95:
        return h11.EndOfMessage()
    return h11.ConnectionClosed()


def _script(rng: random.Random, role) -> list[tuple]:
    steps = []
    for _ in range(rng.randrange(1, 14)):
        pick = rng.random()
        if pick < 0.35:
            data = rng.choice([_request_bytes, _body_bytes] if role is h11.SERVER else [_answer_bytes, _body_bytes])(rng)
            if rng.random() < 0.3:
                data += _body_bytes(rng)
            if rng.random() < 0.05:
                data = b""      # the peer closed
            steps.append(("receive", data))
        elif pick < 0.85:
            steps.append(("send", _sent_event(rng, role)))
        elif pick < 0.97:
            steps.append(("cycle", None))
        else:
            steps.append(("failed", None))
    return steps


@pytest.mark.parametrize("role", [h11.SERVER, h11.CLIENT])
@pytest.mark.parametrize("remembered", [False, True], ids=["cold", "remembered"])
def test_wire_connection_moves_as_h11_on_fuzzed_exchanges(role, remembered, monkeypatch):
    monkeypatch.setattr(wire, "_MOVES", {})
    rng = random.Random(f"{role}")
    scripts = [_script(rng, role) for _ in range(3000)]
    for script in scripts if remembered else ():        # every move seen once: the second run takes them remembered
        conn = h11.Connection(role)
        conn.__class__ = WireConnection
        for step in script:
            _step(conn, step)
    for script in scripts:
        theirs, ours = h11.Connection(role), h11.Connection(role)
        wire.adopt(ours)
        for step in script:
            assert _step(ours, step) == _step(theirs, step), script
            assert _state(ours) == _state(theirs), script
    assert wire._MOVES      # the moves were remembered (a few dozen), not all h11's


@pytest.mark.parametrize("head, answer", [
    (b"CONNECT h:1 HTTP/1.1\r\nhost: h\r\n\r\n", h11.Response(status_code=200, headers=[])),
    (b"GET / HTTP/1.1\r\nhost: h\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n",
     h11.InformationalResponse(status_code=101, headers=[(b"upgrade", b"h2c")]))])
def test_a_switch_of_protocol_is_h11s_each_time(head, answer, monkeypatch):
    # A CONNECT, an Upgrade and the answer that takes it move through h11's own state machine: not remembered.
    monkeypatch.setattr(wire, "_MOVES", {})
    conn = h11.Connection(h11.SERVER)
    wire.adopt(conn)
    conn.receive_data(head)
    assert type(conn.next_event()) is h11.Request and type(conn.next_event()) is h11.EndOfMessage
    conn.send(answer)
    assert conn.states == {h11.CLIENT: h11.SWITCHED_PROTOCOL, h11.SERVER: h11.SWITCHED_PROTOCOL}
    assert wire._MOVES == {}
