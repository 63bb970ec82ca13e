"""sockets.send_now over real connected sockets: a write the socket takes whole leaves at once with no scheduler
pass; what it does not take (a full buffer, a closed or shut-down socket, a TLS stream) is left to send_all, which
sends it or raises in trio's terms."""
from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from vsr_fast.server.listen import EdgeServer
from vsr_fast.errors import SendTimeout
from vsr_fast.server.asgi import ClientSide, DisconnectWatch
from vsr_fast.sockets import send_now
from vsr_fast.upstream.stream import Stream

from .turns import without_a_pass


def _pair() -> tuple[trio.SocketStream, socket.socket]:
    ours, theirs = socket.socketpair()
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), theirs


async def test_a_small_write_is_taken_whole_and_arrives():
    stream, peer = _pair()
    with peer:
        assert send_now(stream, b"hello") == 5
        assert peer.recv(16) == b"hello"
        await stream.aclose()


async def test_a_full_buffer_takes_part_and_send_all_sends_the_rest():
    stream, peer = _pair()
    with peer:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        data = bytes(range(256)) * 8192         # 2 MiB: more than the two buffers hold
        sent = send_now(stream, data)
        assert 0 < sent < len(data)
        assert send_now(stream, data[sent:]) == 0, "a full buffer takes nothing more, and does not wait"
        got = bytearray(peer.recv(1 << 20))

        async def drain() -> None:
            while len(got) < len(data):
                got.extend(await trio.to_thread.run_sync(peer.recv, 1 << 20))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            await stream.send_all(memoryview(data)[sent:])
        assert bytes(got) == data
        await stream.aclose()


async def test_a_peer_that_left_is_left_to_send_all_which_raises_broken():
    stream, peer = _pair()
    peer.close()
    assert send_now(stream, b"x" * 100) in (0, 100)     # the first send after a close may still be taken
    assert send_now(stream, b"x" * 100) == 0
    with pytest.raises(trio.BrokenResourceError):
        await stream.send_all(b"x" * 100)
    await stream.aclose()


async def test_a_closed_or_shut_down_stream_takes_nothing_and_send_all_says_closed():
    stream, peer = _pair()
    with peer:
        await stream.send_eof()
        assert send_now(stream, b"late") == 0
        with pytest.raises(trio.ClosedResourceError):
            await stream.send_all(b"late")
        await stream.aclose()
        assert send_now(stream, b"later") == 0
        assert peer.recv(16) == b"", "nothing reached the peer after its end"


async def test_a_stream_that_is_not_a_plain_socket_is_left_to_send_all():
    left, right = trio.testing.memory_stream_pair()
    assert send_now(left, b"data") == 0
    await left.send_all(b"data")
    assert await right.receive_some() == b"data"


def _edge(stream: trio.SocketStream, send_timeout_s: float = 60.0) -> EdgeServer:
    server = EdgeServer.__new__(EdgeServer)     # its write alone, over a real socket
    server.client_side, server.send_lock, server.stream = ClientSide(), trio.Lock(), stream
    server._held = server._owed = b""
    server.send_timeout_s = send_timeout_s
    server._reading = trio.CancelScope()     # the read loop's, which a cut cancels
    return server


class _Closed:
    """hypercorn's protocol, as far as the write path tells it the connection closed."""

    def __init__(self) -> None:
        self.events: list = []

    async def handle(self, event) -> None:
        self.events.append(event)


async def test_the_connection_server_s_write_gives_no_pass_when_the_socket_takes_it():
    stream, peer = _pair()
    with peer:
        server = _edge(stream)
        await without_a_pass(server._write, b"HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\nok")
        assert peer.recv(64).endswith(b"\r\n\r\nok")
        await stream.aclose()


async def test_an_upstream_request_s_writes_give_no_pass_when_the_socket_takes_them():
    stream, peer = _pair()
    with peer:
        upstream = Stream(stream)
        await upstream.write(b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n")
        await upstream.write(b"{}")
        await without_a_pass(upstream._flush)
        assert peer.recv(64) == b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}"
        await stream.aclose()


async def test_a_cancelled_upstream_request_is_not_sent():
    stream, peer = _pair()
    with peer:
        upstream = Stream(stream)
        await upstream.write(b"GET / HTTP/1.1\r\n\r\n")
        with trio.CancelScope() as scope:
            scope.cancel()
            await upstream._flush()
        assert scope.cancelled_caught
        peer.setblocking(False)
        with pytest.raises(BlockingIOError):
            peer.recv(64)
        await stream.aclose()


async def test_an_upstream_request_the_socket_takes_in_part_arrives_once_and_whole():
    stream, peer = _pair()
    with peer:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        upstream = Stream(stream)
        head, body = b"POST / HTTP/1.1\r\ncontent-length: 60000\r\n\r\n", bytes(range(250)) * 240
        await upstream.write(head)
        await upstream.write(body)          # joined (under 64 KiB), more than the socket takes at once
        got = bytearray()

        async def drain() -> None:
            while len(got) < len(head) + len(body):
                got.extend(await trio.to_thread.run_sync(peer.recv, 1 << 20))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            await upstream._flush()
        assert bytes(got) == head + body, "what the first send took is not sent again"
        await stream.aclose()


def _full(stream: trio.SocketStream, peer: socket.socket) -> bytes:
    """A payload more than the two buffers of a pair with small ones hold."""
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return bytes(range(256)) * 4096        # 1 MiB


def _read_all(peer: socket.socket, size: int) -> bytes:
    got = bytearray()
    peer.settimeout(10)
    while len(got) < size:
        got += peer.recv(1 << 20)
    return bytes(got)


async def test_a_write_cancelled_while_its_client_does_not_read_keeps_the_rest_and_sends_it_first():
    stream, peer = _pair()
    with peer:
        server = _edge(stream)
        data = _full(stream, peer)
        with trio.move_on_after(0.05):      # the request's deadline, while nothing is read
            await server._write(data)
        assert 0 < len(server._owed) < len(data), "what was not written is kept, not lost nor written twice"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server._write, b"<the end>")
            got = await trio.to_thread.run_sync(_read_all, peer, len(data) + 9)
        assert got == data + b"<the end>" and server._owed == b""
        await stream.aclose()


async def test_a_client_that_reads_nothing_for_the_send_timeout_is_closed_and_its_requests_told_why():
    stream, peer = _pair()
    with peer:
        server = _edge(stream, send_timeout_s=0.05)
        server.protocol = _Closed()
        answering = trio.CancelScope()
        watch = DisconnectWatch(server._write, answering)
        server.client_side.watches.add(watch)
        await server._write(_full(stream, peer))
        assert isinstance(watch.cut, SendTimeout) and "0.05 s" in watch.cut.message
        assert watch.gone and answering.cancel_called, "the request answering on it stops"
        assert [type(event).__name__ for event in server.protocol.events] == ["Closed"]
        assert server._owed == b""
        with pytest.raises(trio.ClosedResourceError):
            await stream.send_all(b"x")


async def test_an_answer_that_ends_with_bytes_owed_closes_its_connection():
    from hypercorn.events import Updated
    stream, peer = _pair()
    with peer:
        server = _edge(stream)
        server.protocol = _Closed()
        server._idle, server._stopping, server.config = trio.CancelScope(), False, type("C", (), {
            "keep_alive_timeout": 5})()
        with trio.move_on_after(0.05):
            await server._write(_full(stream, peer))
        assert server._owed
        await server.protocol_send(Updated(idle=True))
        assert server._owed == b"" and [type(event).__name__ for event in server.protocol.events] == ["Closed"]
