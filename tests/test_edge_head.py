"""``server.h11edge.EdgeH11Protocol`` hands the app a plain request's headers read from h11's stored items, where
hypercorn's ``H11Protocol`` walks h11's ``Headers`` as a Sequence: held here to hypercorn's own protocol, fed the same
bytes in process (the scope the app gets, what it is sent, the stream built, HTTP/2's preface). The upgrades
EdgeH11Protocol never takes are tested at the edge (tests/test_e2e_edge_upgrades.py)."""
from __future__ import annotations

import hypercorn.config
import pytest
import trio
from hypercorn.events import RawData
from hypercorn.protocol.events import Body, EndBody, Response, StreamClosed
from hypercorn.protocol.h11 import H11Protocol, H11WSConnection, H2CProtocolRequiredError, H2ProtocolAssumedError
from hypercorn.trio.worker_context import WorkerContext

from vsr_fast.server.h11edge import EdgeH11Protocol


class _Apps:
    """A task group that records the scope of each app it is asked to start, and what the app is sent."""

    def __init__(self) -> None:
        self.scopes: list[dict] = []
        self.received: list[dict] = []

    async def spawn_app(self, app, config, scope, send):
        self.scopes.append(scope)

        async def put(message):
            self.received.append(message)
        return put


async def _fed(edge: bool, raw: bytes, pass_raw: bool = False) -> tuple:
    config = hypercorn.config.Config()
    config.h11_pass_raw_headers = pass_raw
    apps, sent = _Apps(), []

    async def send(event):
        sent.append(event)
    protocol = H11Protocol(None, config, WorkerContext(None), apps, {}, False, ("127.0.0.1", 5), ("127.0.0.1", 80),
                           send)
    if edge:
        protocol.__class__ = EdgeH11Protocol
        protocol.adopt()
    raised = None
    try:
        with trio.move_on_after(5) as waited:      # a test that cannot hang: h11 pausing would be a difference
            await protocol.handle(RawData(data=raw))
        if waited.cancelled_caught:
            raised = "paused"
    except (H2CProtocolRequiredError, H2ProtocolAssumedError) as exc:
        raised = (type(exc), exc.args[0] if exc.args else None)
    for scope in apps.scopes:
        scope.pop("state", None)
    return (apps.scopes, apps.received, [type(e).__name__ for e in sent], type(protocol.stream).__name__,
            protocol.keep_alive_requests, raised, isinstance(protocol.connection, H11WSConnection))


_BODY = b'{"model": "m"}'
_REQUESTS = [
    b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
    b"X-Request-Id: R1\r\nContent-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY),
    b"GET /health HTTP/1.1\r\nhost: a\r\nconnection: keep-alive\r\nUser-Agent: \xe9t\xe9\r\n\r\n",
    b"get /health HTTP/1.0\r\n\r\n",
    b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nCookie: a=b\r\nCookie: c=d\r\n"
    b"Authorization: Bearer x\r\nX-Empty:\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
]


@pytest.mark.parametrize("raw", _REQUESTS)
@pytest.mark.parametrize("pass_raw", [False, True])
async def test_the_edge_protocol_starts_the_app_as_hypercorn_does(raw, pass_raw):
    ours, theirs = await _fed(True, raw, pass_raw), await _fed(False, raw, pass_raw)
    assert ours == theirs
    assert theirs[0] or theirs[5], "each case reaches the app, or HTTP/2's preface"


async def test_the_edge_protocol_reads_a_second_request_on_the_connection_as_hypercorn_does():
    two = _REQUESTS[0] + _REQUESTS[1]
    ours, theirs = await _fed(True, two), await _fed(False, two)
    assert ours == theirs and len(theirs[0]) == 1, "the second waits until the first is answered, in both"


async def _answered(edge: bool, raw: bytes, events: list) -> list:
    """What the protocol writes for ``events`` sent to it as its stream's, once ``raw`` is read."""
    config = hypercorn.config.Config()
    config.include_date_header = False      # both in the same second or not: not what is compared
    sent = []

    async def send(event):
        sent.append(event.data if isinstance(event, RawData) else type(event).__name__)
    protocol = H11Protocol(None, config, WorkerContext(None), _Apps(), {}, False, ("127.0.0.1", 5),
                           ("127.0.0.1", 80), send)
    if edge:
        protocol.__class__ = EdgeH11Protocol
        protocol.adopt()
    await protocol.handle(RawData(data=raw))
    for event in events:
        try:
            await protocol.stream_send(event)
        except Exception as exc:        # the same refusal (a body past its length, after its end)
            sent.append((type(exc), str(exc)))
    return sent + [protocol.connection.states]


@pytest.mark.parametrize("raw", [_REQUESTS[0], _REQUESTS[2]])
@pytest.mark.parametrize("events", [
    [Response(stream_id=1, headers=[(b"content-length", b"3")], status_code=200), Body(stream_id=1, data=b"abc"),
     EndBody(stream_id=1), StreamClosed(stream_id=1)],
    [Response(stream_id=1, headers=[], status_code=200), Body(stream_id=1, data=b"ab"), Body(stream_id=1, data=b""),
     Body(stream_id=1, data=b"c"), EndBody(stream_id=1), StreamClosed(stream_id=1)],
    [Response(stream_id=1, headers=[(b"content-length", b"1")], status_code=200), Body(stream_id=1, data=b"ab")],
    [Response(stream_id=1, headers=[(b"content-length", b"0")], status_code=204), EndBody(stream_id=1),
     Body(stream_id=1, data=b"x")],
])
async def test_the_edge_protocol_writes_an_answer_s_body_as_hypercorn_does(raw, events):
    assert await _answered(True, raw, events) == await _answered(False, raw, events)
