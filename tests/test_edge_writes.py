"""How the connection server writes an answer (listen.EdgeServer): a whole answer's head and body in one write,
nothing written for h11's empty end of a sized body, HTTP/2 frames never held; and how it hands a request's
messages to the app (at once while its queue has room). A recording stream stands in for
the socket to count writes; tests/reliability/test_strict_http.py holds the same over a real socket (an answer
cut between head and body by the connection's reader)."""
from __future__ import annotations

import hashlib
import inspect
import math

import pytest
import trio
import trio._channel
import trio.testing
from hypercorn.config import Config
from hypercorn.events import Updated
from hypercorn.trio.task_group import TaskGroup

from vsr_fast.server.asgi import CLIENT_SIDE, ClientSide, send_whole
from vsr_fast.server.listen import EdgeServer, _memory_channel, _spawn_app, put_at_once, serve_http
from vsr_fast.upstream.stream import JOIN_MAX_BYTES

from .turns import without_a_pass


class Writes:
    """A stream that records each send_all."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.active = self.most = 0

    async def send_all(self, data: bytes) -> None:
        self.active += 1
        self.most = max(self.most, self.active)
        await trio.lowlevel.checkpoint()        # another writer runs here: it must be waiting on the lock
        self.writes.append(bytes(data))
        self.active -= 1


def _server() -> tuple[EdgeServer, Writes]:
    server = EdgeServer.__new__(EdgeServer)     # its send path alone: no socket, no hypercorn protocol
    server.client_side = ClientSide()
    server.send_lock = trio.Lock()
    server._held = server._owed = b""
    server.send_timeout_s = 60.0
    server.stream = Writes()
    return server, server.stream


HEAD = b"HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\n"


def _hold(server: EdgeServer) -> None:
    server.client_side.hold_for = trio.lowlevel.current_task()     # as send_whole does


async def test_a_whole_answer_s_head_and_body_leave_in_one_write():
    server, stream = _server()
    _hold(server)
    await server._send_raw(HEAD)
    assert stream.writes == [] and server.client_side.hold_for is None
    await server._send_raw(b"ok")
    await server._send_raw(b"")                 # h11's end of a sized body: nothing to write
    assert stream.writes == [HEAD + b"ok"]


async def test_a_large_body_is_written_after_its_head_not_copied_onto_it():
    server, stream = _server()
    body = b"b" * JOIN_MAX_BYTES
    _hold(server)
    await server._send_raw(HEAD)
    await server._send_raw(body)
    assert stream.writes == [HEAD, body]


async def test_a_held_head_with_no_body_leaves_with_the_end_of_the_answer_or_when_it_is_over():
    server, stream = _server()              # a HEAD request: hypercorn sends no body, only the b"" end
    _hold(server)
    await server._send_raw(HEAD)
    await server._send_raw(b"")
    assert stream.writes == [HEAD]
    server, stream = _server()              # and were the b"" never sent, the end of the answer flushes it
    server.config = Config()
    server._idle, server._stopping = trio.CancelScope(), False
    _hold(server)
    await server._send_raw(HEAD)
    await server.protocol_send(Updated(idle=True))
    assert stream.writes == [HEAD]


async def test_without_the_hint_heads_go_at_once_and_http2_frames_are_never_held():
    server, stream = _server()
    await server._send_raw(HEAD)                # a stream's head: the body may be far off
    assert stream.writes == [HEAD]
    frame = b"\x00\x00\x05\x01\x04\x00\x00\x00\x01hpack"
    _hold(server)
    await server._send_raw(frame)
    assert stream.writes == [HEAD, frame] and server.client_side.hold_for is None


async def test_another_task_s_write_is_never_held_for_the_answer_being_sent():
    server, stream = _server()              # e.g. the reader's 100 Continue while send_whole starts
    _hold(server)
    got: list[bytes] = []

    async def reader() -> None:
        await server._send_raw(b"HTTP/1.1 100 Continue\r\n\r\n")
        got.append(stream.writes[-1])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
    assert got == [b"HTTP/1.1 100 Continue\r\n\r\n"] and server.client_side.hold_for is None


async def test_send_whole_holds_only_its_own_head_and_never_leaves_the_hint_set():
    side = ClientSide()
    seen: list[tuple[str, object]] = []

    async def send(message):
        seen.append((message["type"], side.hold_for))
        if message["type"] == "http.response.start":
            side.hold_for = None            # as the connection server does when it takes the head

    token = CLIENT_SIDE.set(side)
    try:
        await send_whole(send, 200, [], b"{}")
        task = trio.lowlevel.current_task()
        assert seen == [("http.response.start", task), ("http.response.body", None)] and side.hold_for is None
        seen.clear()
        await send_whole(send, 204, [], b"")        # no body: the head is not held
        assert seen == [("http.response.start", None), ("http.response.body", None)]

        async def failing(message):
            raise trio.BrokenResourceError("the client left")

        with pytest.raises(trio.BrokenResourceError):
            await send_whole(failing, 200, [], b"{}")
        assert side.hold_for is None
    finally:
        CLIENT_SIDE.reset(token)


async def test_writes_from_several_streams_wait_in_line_one_at_a_time():
    server, stream = _server()

    async with trio.open_nursery() as nursery:
        for name in (b"a", b"b", b"c"):
            nursery.start_soon(server._send_raw, name)
    assert sorted(stream.writes) == [b"a", b"b", b"c"] and stream.most == 1


async def test_a_request_message_is_queued_without_a_pass_and_waits_when_the_queue_is_full():
    send_channel, receive_channel = trio.open_memory_channel(1)
    put = put_at_once(send_channel.send)
    await without_a_pass(put, {"n": 1})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(put, {"n": 2})       # no room: waits, as hypercorn's own put did
        await trio.testing.wait_all_tasks_blocked()
        assert receive_channel.receive_nowait() == {"n": 1}
    assert receive_channel.receive_nowait() == {"n": 2}
    with trio.CancelScope() as scope:           # a cancelled task stops before queueing, as at trio's send
        scope.cancel()
        await put({"n": 3})
    assert scope.cancelled_caught
    with pytest.raises(trio.WouldBlock):
        receive_channel.receive_nowait()

    async def other(message: dict) -> None:
        return None

    assert put_at_once(other) is other


async def _spawned(spawn) -> tuple:
    """What an app spawned by ``spawn`` is given and sends, and its queue's bound: two messages put, then a third
    put while the queue is full, which waits until the app reads."""
    config = Config()
    config.max_app_queue_size = 2
    seen, sent = [], []

    async def app(scope, receive, send, sync_spawn, call_soon):
        await trio.testing.wait_all_tasks_blocked()
        seen.append((scope, receive.__self__.statistics().max_buffer_size, sync_spawn, call_soon))
        seen.extend([await receive() for _ in range(3)])
        await send({"type": "http.response.start"})

    async def send(message):
        sent.append(message)

    async with TaskGroup() as group:
        put = await spawn(group, app, config, {"type": "http"}, send)
        await put({"n": 1})
        await put({"n": 2})
        await put({"n": 3})
    return seen, sent


async def test_the_app_is_spawned_as_hypercorn_spawns_it():
    assert await _spawned(_spawn_app) == await _spawned(TaskGroup.spawn_app)
    # hypercorn 0.18's, as _spawn_app copies it.
    assert hashlib.sha256(inspect.getsource(TaskGroup.spawn_app).encode()).hexdigest()[:16] == "b4c1131427529801"


def _channels(pair) -> list:
    return [(type(end), vars(end._state) if hasattr(end, "_state") else None, end.statistics()) for end in pair]


@pytest.mark.parametrize("size", [0, 1, 10, math.inf, -1, 1.5, "2"])
def test_the_app_s_channel_is_the_one_trio_opens(size):
    def opened(open_) -> list:
        try:
            return _channels(open_(size))
        except Exception as exc:        # trio's refusal, as trio words it
            return [type(exc), str(exc)]

    assert opened(_memory_channel) == opened(trio.open_memory_channel)
    # trio's, as _memory_channel makes its channels.
    assert hashlib.sha256(inspect.getsource(trio._channel.open_memory_channel.__new__).encode()).hexdigest()[:16] \
        == "b0960a15bc276977"


async def test_a_per_read_timeout_on_hypercorn_s_config_is_refused_not_ignored():
    cfg = Config()
    cfg.read_timeout = 5        # EdgeServer's read loop has no per-read timeout: serve never sets one
    with pytest.raises(ValueError, match="read_timeout"):
        await serve_http(None, cfg, None, None, None, None)
