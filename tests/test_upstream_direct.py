"""A request on a kept-alive upstream connection goes straight to it when httpcore's pool has nothing else to do
(``transport.QuietPool``), over real sockets to the mock backend: the pool's bookkeeping skipped, the connection's
life the same (reused, closed past its keep-alive, idle again after a close a cancellation reached)."""
from __future__ import annotations

import logging
import time
from functools import partial

import httpcore
import pytest
import trio

from vsr_fast.upstream import transport
from vsr_fast.upstream.transport import Origin, new_pool, send

from .procs import Proc

_BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
_TIMEOUTS = {"connect": 5.0, "read": 10.0, "write": 10.0, "pool": 10.0}


@pytest.fixture(scope="module")
def mock():
    with Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as proc:
        yield proc


async def _chat(pool: httpcore.AsyncConnectionPool, origin: Origin) -> bytes:
    response = await send(pool, origin, "/chat/completions", _BODY, [(b"Content-Type", b"application/json")],
                          _TIMEOUTS, "mock")
    try:
        assert response.status == 200
        return b"".join([chunk async for chunk in response.chunks()])
    finally:
        await response.aclose()


def _counted(pool: httpcore.AsyncConnectionPool) -> list[int]:
    """How often the pool's sweep (``_assign_requests_to_connections``) runs, counted on this pool alone."""
    calls = [0]
    sweep = pool._assign_requests_to_connections

    def counting():
        calls[0] += 1
        return sweep()

    pool._assign_requests_to_connections = counting
    return calls


async def test_a_kept_alive_connection_takes_the_next_requests_without_the_pool_s_sweep(mock):
    pool, origin = new_pool(2), Origin(mock.url + "/v1")
    calls = _counted(pool)
    first = await _chat(pool, origin)
    opened = calls[0]           # the first request opens the connection: the pool's own path
    assert opened >= 1 and len(pool.connections) == 1
    for _ in range(5):
        assert b'"choices"' in await _chat(pool, origin)
    assert calls[0] == opened, "each later request went through the pool's sweep"
    assert len(pool.connections) == 1 and pool.connections[0].is_idle() and b'"choices"' in first
    await pool.aclose()


async def test_a_close_reached_by_a_cancellation_leaves_the_connection_idle_for_the_next_request(mock):
    pool, origin = new_pool(1), Origin(mock.url + "/v1")
    await _chat(pool, origin)
    [connection] = pool.connections
    response = await send(pool, origin, "/chat/completions", _BODY, [], _TIMEOUTS, "mock")
    async for _ in response.chunks():
        pass
    with trio.CancelScope() as scope:
        scope.cancel()
        await response.aclose()     # shielded: the connection goes back to idle anyway
    assert connection.is_idle()
    with trio.fail_after(5):        # one connection: an ACTIVE one left behind would hold this forever
        assert b'"choices"' in await _chat(pool, origin)
    assert pool.connections == [connection]
    await pool.aclose()


async def test_a_connection_past_its_keep_alive_is_closed_and_a_new_one_opened(mock):
    pool = transport.QuietPool(max_connections=1, network_backend=transport._BACKEND, keepalive_expiry=0.05)
    origin = Origin(mock.url + "/v1")
    await _chat(pool, origin)
    [old] = pool.connections
    time.sleep(0.1)             # the keep-alive's clock is time.monotonic, not trio's
    assert b'"choices"' in await _chat(pool, origin)
    assert old.is_closed() and len(pool.connections) == 1 and pool.connections[0] is not old
    await pool.aclose()


async def test_an_idle_connection_the_backend_closed_is_not_lent_again(caplog):
    # A backend that answers, keeps the connection, then closes it while idle: the next request is not sent on it
    # (sent there, it would come back unanswered and be sent again: ``transport.send``'s resend, logged).
    async def serve(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}")
        await trio.sleep(0.05)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        pool, origin = new_pool(1), Origin(f"http://127.0.0.1:{port}/v1")
        caplog.set_level(logging.DEBUG, "vsr_fast.upstream")
        for _ in range(3):
            response = await send(pool, origin, "/x", b"{}", [], _TIMEOUTS, "closing")
            assert response.status == 200
            assert [chunk async for chunk in response.chunks()] == [b"{}"]
            await response.aclose()
            [connection] = pool.connections
            await trio.sleep(0.2)           # closed by the backend meanwhile
            assert connection.has_expired()
        await pool.aclose()
        nursery.cancel_scope.cancel()
    assert not [r for r in caplog.records if "sent again" in r.getMessage()]


_TRACED = ["http11.send_request_headers.started", "http11.send_request_headers.complete",
           "http11.send_request_body.started", "http11.send_request_body.complete",
           "http11.receive_response_headers.started", "http11.receive_response_headers.complete",
           "http11.receive_response_body.started", "http11.receive_response_body.complete",
           "http11.response_closed.started", "http11.response_closed.complete"]


async def test_a_request_with_httpcore_s_trace_extension_is_traced_as_httpcore_traces_it(mock):
    # Untraced, the connection's Traces do nothing (transport._trace); a request that asks for them has all of them.
    pool, origin = new_pool(1), Origin(mock.url + "/v1")
    await _chat(pool, origin)           # the connection opened: the rest is the HTTP/1.1 connection's own
    seen: list[str] = []

    async def trace(name: str, info: dict) -> None:
        seen.append(name)
        if name == "http11.receive_response_headers.complete":
            assert info["return_value"][1] == 200       # (http_version, status, reason, headers)

    request = httpcore.Request(b"POST", origin.url("/chat/completions"), content=_BODY,
                               headers=[(b"Host", origin.host_header), (b"Content-Length", b"%d" % len(_BODY))],
                               extensions={"trace": trace, "timeout": _TIMEOUTS})
    response = await pool.handle_async_request(request)
    assert b'"choices"' in b"".join([chunk async for chunk in response.aiter_stream()])
    await response.aclose()
    assert seen == _TRACED
    await pool.aclose()


async def test_httpcore_s_debug_log_still_tells_each_step(mock, caplog):
    pool, origin = new_pool(1), Origin(mock.url + "/v1")
    caplog.set_level(logging.DEBUG, "httpcore.http11")
    await _chat(pool, origin)
    await _chat(pool, origin)
    told = [r.getMessage().split(" ")[0] for r in caplog.records if r.name == "httpcore.http11"]
    assert told == [name.removeprefix("http11.") for name in _TRACED] * 2
    await pool.aclose()
