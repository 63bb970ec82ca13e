"""Reads that wait first when nothing can have come yet (issue 14, fix139), over real sockets.

- The connection server (listen.EdgeServer) hands a request's bytes to h11 and then waits for the next ones: its
  task runs once a kept-alive request, not twice (a pass of its own, then a read that found the socket empty).
- ``sockets.receive_some`` is trio's ``SocketStream.receive_some`` on the stream's own socket: the same bytes,
  errors, cancellation and scheduler passes, whether it reads at once or, told nothing can have come yet, waits
  first; the upstream stream waits first right after it sent a request.
"""
from __future__ import annotations

import socket
import struct

import pytest
import trio
import trio.testing
from hypercorn.config import Config

from vsr_fast.server.listen import Connections, serve_http
from vsr_fast.sockets import receive_some
from vsr_fast.upstream.stream import Stream

from .turns import _StepsEnded


async def _app(scope, receive, send) -> None:
    """A plain ASGI app: ``ok`` to every request, and the lifespan's two answers."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    while (await receive())["more_body"]:
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


class _Steps(trio.abc.Instrument):
    """The steps each task ran, by the name of its function."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name] = self.steps.get(task.name, 0) + 1

    def of(self, suffix: str) -> int:
        return sum(n for name, n in self.steps.items() if name.endswith(suffix))


REQUEST = b"POST /v1/x HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


async def _answer(client: trio.SocketStream) -> bytes:
    got = b""
    while not got.endswith(b"\r\n\r\nok"):
        got += await client.receive_some(4096)
    return got


async def test_the_connection_task_runs_once_a_kept_alive_request():
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    port = listening.getsockname()[1]
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_http, _app, Config(), listening, stop.wait, Connections(None),
                            lambda *_: None)
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await client.send_all(REQUEST)
        assert (await _answer(client)).startswith(b"HTTP/1.1 200")
        steps = _Steps()
        trio.lowlevel.add_instrument(steps)
        for _ in range(10):
            await client.send_all(REQUEST)
            assert (await _answer(client)).startswith(b"HTTP/1.1 200")
        trio.lowlevel.remove_instrument(steps)
        assert steps.of("listen._run") == 10, steps.steps   # woken by the request's bytes, and that is all
        await client.aclose()
        stop.set()


def _pair() -> tuple[trio.SocketStream, socket.socket]:
    ours, theirs = socket.socketpair()
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), theirs


async def _both(scenario) -> list:
    """``scenario(read)`` run with trio's read and with ``receive_some`` at once and waiting first: each outcome
    (the bytes, or the error's type and message) and how many scheduler passes the read took."""
    outcomes = []
    for read in (lambda s, n: s.receive_some(n), receive_some, lambda s, n: receive_some(s, n, wait_first=True)):
        outcomes.append(await scenario(read))
    return outcomes


async def _outcome(read, stream, max_bytes: int = 1024) -> tuple:
    passes = _StepsEnded(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(passes)
    try:
        got = ("bytes", await read(stream, max_bytes))
    except Exception as exc:        # noqa: BLE001 - the error is the outcome compared
        got = (type(exc).__name__, str(exc), type(exc.__cause__).__name__)
    finally:
        trio.lowlevel.remove_instrument(passes)
    return got, passes.ended


@pytest.mark.parametrize("later", [False, True], ids=["already-there", "coming-later"])
async def test_bytes_are_read_with_one_pass_as_trio_reads_them(later):
    async def scenario(read):
        stream, peer = _pair()
        with peer:
            async def arrive() -> None:
                if later:
                    await trio.testing.wait_all_tasks_blocked()     # the read is waiting
                peer.send(b"answer")

            async with trio.open_nursery() as nursery:
                if later:
                    nursery.start_soon(arrive)
                else:
                    await arrive()
                got = await _outcome(read, stream, 3)
            await stream.aclose()
            return got

    assert await _both(scenario) == [(("bytes", b"ans"), 1)] * 3


async def test_a_peer_that_closed_reads_empty_and_one_that_reset_is_broken():
    async def closed(read):
        stream, peer = _pair()
        peer.close()
        got = await _outcome(read, stream)
        await stream.aclose()
        return got

    async def reset(read):
        with socket.create_server(("127.0.0.1", 0)) as server:
            ours = socket.create_connection(server.getsockname())
            theirs, _ = server.accept()
        ours.setblocking(False)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))    # its close: a reset
        theirs.close()      # on loopback the reset has arrived when close returns
        got = await _outcome(read, stream)
        await stream.aclose()
        return got

    assert await _both(closed) == [(("bytes", b""), 1)] * 3
    outcomes = await _both(reset)
    assert outcomes[0][0][0] == "BrokenResourceError" and outcomes[1:] == outcomes[:1] * 2


async def test_a_closed_stream_and_a_cancelled_read_fail_as_trio_s():
    async def closed(read):
        stream, peer = _pair()
        with peer:
            await stream.aclose()
            return await _outcome(read, stream)

    async def cancelled(read):
        stream, peer = _pair()
        with peer:
            peer.send(b"kept")
            with trio.CancelScope() as scope:
                scope.cancel()
                await read(stream, 16)
            rest = await stream.receive_some(16)
            await stream.aclose()
            return scope.cancelled_caught, rest

    outcomes = await _both(closed)
    assert outcomes[0][0][0] == "ClosedResourceError" and outcomes[1:] == outcomes[:1] * 2
    assert await _both(cancelled) == [(True, b"kept")] * 3, "a cancelled read takes no byte"


async def test_a_stream_that_is_not_a_plain_socket_is_read_as_it_reads_itself():
    left, right = trio.testing.memory_stream_pair()
    await left.send_all(b"data")
    assert await receive_some(right, 16, wait_first=True) == b"data"


async def test_the_upstream_read_right_after_its_request_waits_and_gets_the_answer():
    stream, peer = _pair()
    with peer:
        upstream = Stream(stream)
        await upstream.write(b"GET / HTTP/1.1\r\nhost: b\r\n\r\n")
        async with trio.open_nursery() as nursery:
            async def backend() -> None:
                request = await trio.to_thread.run_sync(peer.recv, 1024)
                assert request.startswith(b"GET / ")
                peer.send(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            nursery.start_soon(backend)
            assert await upstream.read(65536, timeout=10) == b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
        peer.send(b"more")
        await trio.testing.wait_all_tasks_blocked()
        assert await upstream.read(65536) == b"more"
        await stream.aclose()

