"""``transport._Exact``'s untraced request (``handle_untraced``), its body read (``_Body``) and its close
(``_ShieldedClose.aclose``) do what httpcore 1.0's HTTP/1.1 connection does: each script of a backend's bytes (and
of its failures) fed to both, the writes, reads, answer, chunks, errors and the connection's state after compared.
The httpcore code they stand in for is pinned by digest in tests/test_headers_wire.py."""
from __future__ import annotations

import logging
import random

import h11
import httpcore
import pytest
import trio
from httpcore._async.http11 import AsyncHTTP11Connection, HTTP11ConnectionByteStream

from vsr_fast.headers.wire import adopt
from vsr_fast.locks import quiet
from vsr_fast.upstream import transport

_ORIGIN = httpcore.Origin(b"http", b"backend", 8000)
_URL = httpcore.URL(scheme=b"http", host=b"backend", port=8000, target=b"/v1/chat/completions")
_TIMEOUTS = {"connect": 1.0, "read": 2.0, "write": 3.0, "pool": 4.0}
_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n"


class _Script(httpcore.AsyncNetworkStream):
    """A backend's side of a connection: each read takes the next item (bytes, or an error raised), b"" after."""

    def __init__(self, reads: list, write_error: Exception | None = None) -> None:
        self.reads, self.write_error = list(reads), write_error
        self.log: list = []
        self.closed = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.log.append(("read", max_bytes, timeout))
        item = self.reads.pop(0) if self.reads else b""
        if isinstance(item, Exception):
            raise item
        return item

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.log.append(("write", bytes(buffer), timeout))
        if self.write_error is not None:
            raise self.write_error

    async def aclose(self) -> None:
        self.log.append(("close",))
        self.closed = True

    def get_extra_info(self, info: str):
        return None


class _Chunks:
    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self):
        for part in self.parts:
            yield part


def _pair(reads: list, write_error: Exception | None = None) -> tuple:
    """httpcore's own connection (h11's own state) and ours (``_Exact``, its lock quiet, its h11 ``headers.wire``'s),
    each on its own copy of the script."""
    theirs = AsyncHTTP11Connection(_ORIGIN, _Script(reads, write_error), keepalive_expiry=5.0)
    ours = AsyncHTTP11Connection(_ORIGIN, _Script(reads, write_error), keepalive_expiry=5.0)
    ours.__class__ = transport._Exact
    assert quiet(ours._state_lock)
    adopt(ours._h11_state)
    ours._h11_state.__class__ = transport._ClientWire     # as _QuietConnection sets it up
    return theirs, ours


def _request(method=b"POST", headers=None, content=b'{"a": 1}', extensions=None) -> httpcore.Request:
    if headers is None:
        headers = [(b"Host", b"backend:8000"), (b"content-type", b"application/json"),
                   (b"Content-Length", b"%d" % len(content if isinstance(content, bytes) else b"ab"))]
    return httpcore.Request(method, _URL, headers=headers, content=content,
                            extensions={"timeout": _TIMEOUTS} if extensions is None else extensions)


def _error(exc: BaseException) -> tuple:
    cause = exc.__cause__
    return type(exc), str(exc), type(cause), str(cause) if cause is not None else None


async def _run(connection: AsyncHTTP11Connection, requests: list, read_body: bool = True, shielded: bool = False):
    """What a client of ``connection`` sees of each request in turn, and the connection's state after."""
    seen = []
    for request in requests:
        try:
            response = await connection.handle_async_request(request)
        except Exception as exc:
            seen.append(("failed", _error(exc)))
            continue
        if shielded:                            # as QuietPool's direct path hands it out
            response.stream.__class__ = transport._ShieldedClose
        ext = dict(response.extensions)
        stream = ext.pop("network_stream")
        upgraded = getattr(stream, "_leading_data", None)
        chunks: list = []
        if read_body:
            try:
                async for chunk in response.aiter_stream():
                    chunks.append(chunk)
            except Exception as exc:
                chunks.append(("failed", _error(exc)))
        await response.aclose()
        seen.append((response.status, response.headers, ext, upgraded, isinstance(response.stream,
                     HTTP11ConnectionByteStream), chunks))
    state = connection._h11_state
    return seen, connection._network_stream.log, (connection._state, connection._request_count,
                                                  connection._expire_at is None, state.our_state, state.their_state,
                                                  connection._network_stream.closed)


_SCRIPTS = [
    [_OK + b'{"ok": true}'],                                                       # head and body in one read
    [_OK[:10], _OK[10:], b'{"ok"', b": true}"],                                   # in pieces
    [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"],
    [b"HTTP/1.1 100 Continue\r\n\r\n" + _OK + b'{"ok": true}'],                  # an informational answer first
    [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nleading"],
    [b"HTTP/1.1 503 Busy\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno"],   # the connection not kept
    [b"HTTP/1.0 200 OK\r\n\r\nuntil close", b""],
    [b""],                                                                          # gone before answering
    [b"NOT HTTP\r\n\r\n"],
    [_OK + b'{"ok"', b""],                                                         # cut short
    [httpcore.ReadTimeout("no answer")],
    [_OK, httpcore.ReadError("reset")],
    [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab"],
]


@pytest.mark.parametrize("script", _SCRIPTS)
@pytest.mark.parametrize("shielded", [False, True])
async def test_a_request_is_sent_and_answered_as_httpcore_does(script, shielded):
    theirs, ours = _pair(script)
    assert await _run(ours, [_request()], shielded=shielded) == await _run(theirs, [_request()], shielded=shielded)


@pytest.mark.parametrize("shielded", [False, True])
async def test_a_kept_alive_connection_takes_the_next_request_as_httpcore_does(shielded):
    answers = [_OK + b'{"ok": true}', b"HTTP/1.1 204 No Content\r\n\r\n", _OK, b'{"ok": true}']
    theirs, ours = _pair(answers)
    requests = [_request(), _request(method=b"GET", headers=[(b"Host", b"b")], content=b""), _request()]
    ours_seen = await _run(ours, list(requests), shielded=shielded)
    assert ours_seen == await _run(theirs, list(requests), shielded=shielded)
    assert ours_seen[2][:3] == (httpcore._async.http11.HTTPConnectionState.IDLE, 3, False)


@pytest.mark.parametrize("request_", [
    _request(headers=[(b"content-type", b"x")]),                                # no Host
    _request(headers=[(b"Host", b"a"), (b"host", b"b")]),                        # two
    _request(headers=[(b"Host", b"a"), (b"x", b"a\nb")]),
    _request(headers=[(b"Host", b"a"), (b"bad name", b"v")]),
    _request(method=b"PO ST"),
    _request(headers=[(b"Host", b"a"), (b"Transfer-Encoding", b"chunked")], content=_Chunks([b"ab", b"cd"])),
    _request(headers=[(b"Host", b"a"), (b"Content-Length", b"4")], content=_Chunks([b"ab", b"cd"])),
    _request(headers=[(b"Host", b"a"), (b"Content-Length", b"9")], content=b"short"),
    _request(method=b"CONNECT", headers=[(b"Host", b"a")], content=b""),
    _request(headers=[(b"Host", b"a"), (b"Expect", b"100-continue"), (b"Content-Length", b"2")], content=b"ab"),
])
async def test_an_odd_request_fails_or_goes_as_httpcore_s(request_):
    for _ in range(2):      # cold, then with its start line remembered
        theirs, ours = _pair([_OK + b'{"ok": true}'])
        assert await _run(ours, [request_]) == await _run(theirs, [request_])


async def test_a_write_error_is_left_for_the_answer_as_httpcore_leaves_it():
    theirs, ours = _pair([_OK + b'{"ok": true}'], write_error=httpcore.WriteError("broken pipe"))
    seen = await _run(ours, [_request()])
    assert seen == await _run(theirs, [_request()]) and seen[0][0][0] == 200


@pytest.mark.parametrize("read_body", [False, True])
async def test_an_answer_closed_unread_or_read_closes_as_httpcore_s(read_body):
    theirs, ours = _pair([_OK, b'{"ok": true}'])
    assert await _run(ours, [_request()], read_body) == await _run(theirs, [_request()], read_body)


async def test_a_busy_connection_refuses_as_httpcore_s():
    theirs, ours = _pair([_OK + b'{"ok": true}'])
    for connection in (theirs, ours):
        connection._state = httpcore._async.http11.HTTPConnectionState.ACTIVE
    assert await _run(ours, [_request()]) == await _run(theirs, [_request()])


async def test_a_cancelled_request_and_a_cancelled_close_as_httpcore_s():
    outcomes = []
    for connection in _pair([_OK + b'{"ok": true}', _OK + b'{"ok": true}']):
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await connection.handle_async_request(_request())
            except trio.Cancelled:
                pass
        response = await connection.handle_async_request(_request())
        response.stream.__class__ = transport._ShieldedClose
        body = b"".join([chunk async for chunk in response.aiter_stream()])
        with trio.CancelScope() as scope:
            scope.cancel()
            await response.aclose()         # shielded: no Cancelled, the connection idle
        outcomes.append((body, connection._state, connection._network_stream.log))
    assert outcomes[0] == outcomes[1] and outcomes[1][1] is httpcore._async.http11.HTTPConnectionState.IDLE


async def test_the_untraced_path_is_taken_and_a_traced_request_is_httpcore_s(caplog):
    theirs, ours = _pair([_OK + b'{"ok": true}'] * 3)
    response = await ours.handle_async_request(_request())
    response.stream.__class__ = transport._ShieldedClose
    assert type(response) is transport._BuiltResponse and type(aiter(response.stream)) is transport._Body
    await response.aclose()     # unread: the connection closed, as httpcore closes it
    assert ours._state is httpcore._async.http11.HTTPConnectionState.CLOSED
    theirs, ours = _pair([_OK + b'{"ok": true}'] * 3)
    seen: list = []

    async def trace(name, info):
        seen.append(name)

    traced = _request(extensions={"timeout": _TIMEOUTS, "trace": trace})
    assert await _run(ours, [traced], shielded=True) == await _run(theirs, [traced], shielded=True)
    assert seen.count("http11.receive_response_body.started") == 2 and \
        seen.count("http11.response_closed.complete") == 2, seen
    with caplog.at_level(logging.DEBUG, logger="httpcore.http11"):
        assert not transport._untraced(_request())
    assert transport._untraced(_request())


async def test_a_stream_answer_s_failure_closes_the_connection_as_httpcore_s():
    # The body broken mid-way: the answer closes (and with it the connection) before the error reaches the caller.
    script = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", b"zz\r\n"]
    theirs, ours = _pair(script)
    seen = await _run(ours, [_request()], shielded=True)
    assert seen == await _run(theirs, [_request()], shielded=True)
    assert seen[2][0] is httpcore._async.http11.HTTPConnectionState.CLOSED and seen[2][5]


_BOTH = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"


@pytest.mark.parametrize("traced", [False, True])
async def test_an_answer_framed_twice_is_refused_and_its_connection_closed_where_httpcore_takes_it(traced):
    # The one departure from httpcore (``transport._one_framing``), on either path: h11 lets chunked win.
    theirs, ours = _pair([_BOTH, _OK + b'{"ok": true}'])

    async def trace(name, info):
        pass

    request = _request(extensions={"timeout": _TIMEOUTS, "trace": trace}) if traced else _request()
    seen, _, after = await _run(theirs, [request])
    assert seen[0][0] == 200 and seen[0][5] == [b"hello"] and after[0] is httpcore._async.http11.HTTPConnectionState.IDLE
    seen, log, after = await _run(ours, [request, _request()])
    refused = (httpcore.RemoteProtocolError, "upstream sent both Content-Length and Transfer-Encoding: chunked",
               type(None), None)
    assert seen[0] == ("failed", refused)
    assert after[0] is httpcore._async.http11.HTTPConnectionState.CLOSED and after[5] and ("close",) in log
    assert seen[1][0] == "failed"        # never reused: a closed connection takes no next request
    assert transport.cause(httpcore.RemoteProtocolError(refused[1])) == "protocol_error"


async def test_a_head_past_what_h11_holds_is_too_large_not_malformed():
    huge = [b"HTTP/1.1 200 OK\r\n" + b"x-filler: " + b"f" * 65_536 + b"\r\n"] * 3
    theirs, ours = _pair(huge)
    seen = (await _run(ours, [_request()]))[0]
    assert seen == (await _run(theirs, [_request()]))[0]
    assert seen[0][1][:2] == (httpcore.RemoteProtocolError, "Receive buffer too long")
    with pytest.raises(httpcore.RemoteProtocolError) as caught:
        await _pair(huge)[1].handle_async_request(_request())
    assert transport.cause(caught.value) == "too_large"
    assert transport.cause(httpcore.RemoteProtocolError("illegal status line")) == "protocol_error"


def test_the_request_event_is_h11_s():
    for headers in ([(b"Host", b"a"), (b"x", b"y")], [(b"host", b"a")]):
        for _ in range(2):
            ours = transport._request_event(b"POST", b"/v1/x", headers)
            theirs = h11.Request(method=b"POST", target=b"/v1/x", headers=headers)
            assert type(ours) is h11.Request and ours == theirs
            assert ours.headers._full_items == theirs.headers._full_items


# The client's side of random exchanges, for _ClientWire against headers.wire's connection (itself held to h11).
_REQUEST_HEADS = [[(b"Host", b"a")], [(b"Host", b"a"), (b"Content-Length", b"3")],
                  [(b"Host", b"a"), (b"Transfer-Encoding", b"chunked")],
                  [(b"Host", b"a"), (b"Connection", b"close"), (b"Content-Length", b"3")],
                  [(b"Host", b"a"), (b"Expect", b"100-continue"), (b"Content-Length", b"3")],
                  [(b"Host", b"a"), (b"Upgrade", b"x"), (b"Connection", b"upgrade")], []]
_ANSWER_BYTES = [b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", b"HTTP/1.1 100 Continue\r\n\r\n",
                 b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", b"HTTP/1.0 200 OK\r\n\r\nuntil close",
                 b"HTTP/1.1 204 No Content\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",
                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                 b"HTTP/1.1 400 Bad\r\nContent-Length: 0\r\n\r\n", b"abc", b"", b"garbage\r\n\r\n"]


def _op(rng: random.Random) -> tuple:
    kind = rng.random()
    if kind < 0.25:
        return ("request", rng.choice([b"GET", b"POST", b"HEAD", b"CONNECT"]), rng.randrange(len(_REQUEST_HEADS)))
    if kind < 0.4:
        return ("data", rng.choice([b"", b"a", b"abc"]))
    if kind < 0.55:
        return ("end",)
    if kind < 0.8:
        answer = rng.choice(_ANSWER_BYTES)
        cut = rng.randrange(len(answer) + 1)
        return ("receive", answer[:cut]) if rng.random() < 0.3 else ("receive", answer)
    if kind < 0.95:
        return ("next",)
    return ("cycle",)


def _plan(rng: random.Random) -> list[tuple]:
    """One to three exchanges, mostly well formed (a request, its body, its end, an answer read, the next cycle),
    with random steps dropped, repeated or put in between."""
    ops: list[tuple] = []
    for _ in range(rng.randrange(1, 4)):
        head = rng.choice([1, 1, 1, 2, 3, 4, 0])
        ops.append(("request", rng.choice([b"POST", b"POST", b"GET", b"HEAD"]), head))
        if head in (1, 3, 4):
            ops.append(("data", b"abc"))
        elif head == 2:
            ops += [("data", b"ab"), ("data", b"c")]
        ops.append(("end",))
        answer = rng.choice(_ANSWER_BYTES[:8])
        cut = rng.randrange(len(answer) + 1)
        ops += [("receive", answer[:cut]), ("receive", answer[cut:])] + [("next",)] * rng.randrange(2, 6)
        ops.append(("cycle",))
    for _ in range(rng.randrange(0, 3)):
        at = rng.randrange(len(ops) + 1)
        if rng.random() < 0.5:
            ops.insert(at, _op(rng))
        elif ops:
            del ops[min(at, len(ops) - 1)]
    return ops


def _io(obj) -> object:
    """A reader or writer as compared: a shared one by identity, a body's by its type and state."""
    if obj is None or not hasattr(obj, "__dict__") or type(obj).__name__ in ("function", "partial"):
        return obj
    return type(obj), sorted(vars(obj).items())


def _apply(conn: h11.Connection, op: tuple):
    try:
        if op[0] == "request":
            return conn.send(h11.Request(method=op[1], target=b"/", headers=_REQUEST_HEADS[op[2]]))
        if op[0] == "data":
            return conn.send(h11.Data(data=op[1]))
        if op[0] == "end":
            return conn.send(h11.EndOfMessage())
        if op[0] == "receive":
            return conn.receive_data(op[1])
        if op[0] == "next":
            return repr(conn.next_event())
        return conn.start_next_cycle()
    except (h11.ProtocolError, AssertionError, RuntimeError, AttributeError) as exc:     # h11 raises all four
        return type(exc), str(exc)


def _state(conn: h11.Connection) -> tuple:
    return (dict(conn._cstate.states), conn._cstate.keep_alive, set(conn._cstate.pending_switch_proposals),
            conn.their_http_version, conn._request_method, conn.client_is_waiting_for_100_continue,
            _io(conn._writer), _io(conn._reader))


def test_the_client_connection_moves_as_headers_wire_s_on_random_exchanges():
    rng = random.Random(126)
    ended = cycled = 0
    for _ in range(3_000):
        theirs, ours = h11.Connection(h11.CLIENT), h11.Connection(h11.CLIENT)
        adopt(theirs)
        adopt(ours)
        ours.__class__ = transport._ClientWire
        for op in _plan(rng):
            outcome = _apply(ours, op)
            assert outcome == _apply(theirs, op), op
            assert _state(ours) == _state(theirs), op
            ended += op[0] == "end" and type(outcome) is not tuple
            cycled += op[0] == "cycle" and outcome is None
    assert transport._END_AFTER and transport._CYCLE_AFTER and ended > 100 and cycled > 10
