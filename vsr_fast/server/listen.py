"""The listening socket's accept loop, in place of hypercorn's: the same per-connection server
(hypercorn's ``TCPServer``), plus a cap on concurrent connections and a drain that closes the socket itself.

hypercorn's ``worker_serve`` takes no connection limit and hands its accept loop to
``trio.serve_listeners``. This loop counts the connections it runs; past
``max_connections`` a new one is answered at once ``503`` with ``Retry-After: 1`` and
``Connection: close`` (nginx's ``limit_conn`` answers 503 too), written before the request is
read since no protocol is known yet, its bytes then read and dropped for up to a second so
the close does not reset the answer away; each such 503 (the drain's too) has its access log line. A connection whose request head is still unfinished
when the header timeout (hypercorn's idle timer) passes is answered ``408`` in the protocol of
the path its request line names, if it got that far, before the close (hypercorn closes
silently); one that sent nothing is closed silently, as nginx does. An HTTP/2 connection with no stream
open (silent after its preface, idle after its answers, or stopped mid-frame) is held to the same timer and
told GOAWAY NO_ERROR before the close. A request h11 refuses (a bad
chunk, a Content-Length that is no number, a head too large) keeps hypercorn's status and close,
with the error of that path as its body in place of hypercorn's empty one. A client that takes none of an answer
for ``send_timeout_s`` has its connection closed (nginx's ``send_timeout``); a write the request's deadline
cancels keeps what it had left to write, which goes first when the answer's end is written (or the connection
closes, the answer ended with it unwritten). At the shutdown trigger the
loop stops and the listening socket closes at once: a connection arriving during the drain is refused by the
kernel rather than queued, and one the kernel had queued by then is accepted and answered 503 shutting_down
(the close would reset it); those in flight have ``graceful_timeout`` to finish, as in
hypercorn. A kept-alive connection is closed at once only if no byte of a next request has come: one that has is
read and answered (``503 shutting_down``, closing: the app), never dropped unanswered. HTTP/2 is hypercorn's with the defects a hostile client reached worked around (``h2edge``), and
whatever a connection's handling raises closes that connection alone (``vsr_connections_failed_total``).
"""
from __future__ import annotations

import errno
import json
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable
from functools import partial

import h11
import hypercorn.config
import trio
from hypercorn.events import Closed, RawData, Updated
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.statsd import StatsdLogger
from hypercorn.trio.task_group import TaskGroup, _handle
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import repr_socket_addr, wrap_app
from trio._channel import MemoryChannelState, MemoryReceiveChannel, MemorySendChannel

from ..errors import SendTimeout
from ..events import ids
from ..headers.registry import SERVER
from ..locks import acquire
from ..sockets import send_now
from ..upstream.stream import JOIN_MAX_BYTES
from .asgi import CLIENT_SIDE, ClientSide
from .failure_log import FailureLog
from .h11edge import EdgeH11Protocol
from .h2edge import EdgeH2Protocol, EdgeProtocol, H2Counts

log = logging.getLogger("vsr_fast.listen")
# The whole answer to a request refused before any app saw it, from its request target (b"": not known) and
# status: a head unfinished at the header timeout, one h11 refuses; None keeps hypercorn's answer. A third argument,
# when known, says why (``MISSING_HOST``); the keywords say what is known of the request for its access log line
# (``app.edge_refusals``): ``scope`` (its head was read), else ``head`` (the bytes of it that came), ``peer``,
# ``since`` (perf_counter() as its first byte was read).
EdgeAnswer = Callable[..., bytes | None]
# Why h11 refused a head: an HTTP/1.1 request without Host (RFC 9112 3.2: a server MUST answer 400).
MISSING_HOST = "missing_host"

# accept(2) failures that mean "no resources now", not "no socket": wait and go on (as trio's serve_listeners).
_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_BUSY_HEAD = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
         b"x-request-id: %s\r\nserver: " + SERVER.encode() + b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s")
# The 503s the listener answers before reading any request: (code, message, type) of their error body.
_BUSY = ("too_many_connections", "this listener already holds its %d connections; retry shortly", "server_error")
_STOPPING = ("shutting_down", "the router is stopping and takes no new connection; retry on another instance",
             "api_error")
# Each such 503's access log line: (request id, the peer's address, code, message).
RefusedConnection = Callable[[str, str | None, str, str], None]
LINGER_S = 1.0
# The first digit of an error status: a head with another one is never a refusal of the edge's.
_ERROR_CLASSES = (b"4", b"5")


# Refused connections still being answered; past this many, one more is closed with no answer (a flood of
# them must not hold a descriptor each for LINGER_S).
MAX_LINGERING = 256


class Connections:
    """How many connections a listener runs, and how many it refused."""

    __slots__ = ("active", "cap", "failed", "h2", "lingering", "refused")

    def __init__(self, cap: int | None) -> None:
        self.cap, self.active, self.refused, self.lingering = cap, 0, 0, 0
        self.failed = 0         # connections whose handling raised: closed alone, the listener serving on
        self.h2 = H2Counts()

    def full(self) -> bool:
        return self.cap is not None and self.active >= self.cap

    def prometheus_lines(self) -> list[str]:
        return ["# HELP vsr_connections_active Client connections open on the serving listener.",
                "# TYPE vsr_connections_active gauge", f"vsr_connections_active {self.active}",
                "# HELP vsr_connections_refused_total Client connections closed at once: the listener's "
                "limits.max_connections were open.",
                "# TYPE vsr_connections_refused_total counter", f"vsr_connections_refused_total {self.refused}",
                "# HELP vsr_connections_failed_total Client connections closed because their handling raised "
                "(logged, at most once a minute).",
                "# TYPE vsr_connections_failed_total counter", f"vsr_connections_failed_total {self.failed}",
                *self.h2.prometheus_lines()]


class EdgeServer(TCPServer):
    """hypercorn's connection server, answering a request head the header timeout cut, with one idle timer per
    connection whose deadline moves: hypercorn stops its idle task when a request starts and starts a new one
    when the answer ends (a lock, a task started and one cancelled, per request)."""

    def __init__(self, edge_answer: EdgeAnswer, send_timeout_s: float, h2_counts: H2Counts, *args) -> None:
        super().__init__(*args)
        self.edge_answer = edge_answer
        self.send_timeout_s = send_timeout_s
        self.h2_counts = h2_counts
        # What a cancelled write had left to write: the bytes h11 counts as sent, so they go before any other.
        self._owed = b""
        self._read = b""        # the last bytes read: where a head h11 refused started, if it came in one read
        self._since: float | None = None    # perf_counter() as the first byte of the request being read came
        self.client_side = ClientSide()
        self.client_side.write = self._write
        self.client_side.due = self._chunk_due
        self._idle = trio.CancelScope()     # its deadline: the idle timeout while idle, none while answering
        self._held = b""        # a whole answer's head, sent with its body (asgi.ClientSide.hold_head)
        self._stopping = False
        self._closed = False
        self._reading = trio.CancelScope()     # the read loop's: cancelled when the server closes the connection

    async def run(self) -> None:
        CLIENT_SIDE.set(self.client_side)     # in this connection's task: its request tasks inherit it
        self._idle.deadline = trio.current_time() + self.config.keep_alive_timeout
        await super().run()

    async def protocol_send(self, event) -> None:
        if isinstance(event, RawData):
            data = event.data
            if data.startswith(b"HTTP/1."):
                if data[9:13] == b"100 ":     # h11's 100 Continue, written as the head is read: kept for the body
                    self.client_side.withheld = data
                    return
                self.client_side.withheld = b""      # an answer came first: the body was never asked for
            # Every answer's head passes here: its status is read first (an error's), the h11 state only then.
            if data[9:10] in _ERROR_CLASSES and data.startswith(b"HTTP/1.") and (conn := self._h11()) is not None \
                    and conn.their_state is h11.ERROR:
                if self.client_side.closed:
                    # The client closed mid-request (h11 refuses the end of a body or head cut short): no one to
                    # answer, and no refusal to count or log (its request, if it was read, logs its own 499).
                    return
                data = self._refusal(data)
            await self._send_raw(data)
            return
        if isinstance(event, Updated):
            if not event.idle:
                self._idle.deadline = math.inf
            else:       # stopping: an idle connection closes at once
                self._idle.deadline = -math.inf if self._stopping else \
                    trio.current_time() + self.config.keep_alive_timeout
                self._since = None      # the next request's first byte is still to come
                if self._held:      # the answer has ended: a head still held (no end of body came) goes now
                    await self._send_raw(b"")
                if self._owed:      # it ended with bytes its client never took: no other answer can follow them
                    await self._cut(None)
            return
        await super().protocol_send(event)
        if isinstance(event, Closed):
            # Closed after an answer (the drain's, a Connection: close): a request pipelined behind it left h11
            # paused, its reader waiting for an answer that never starts, which held the connection (and the
            # process's drain) until the graceful timeout.
            self._reading.cancel()

    async def _send_raw(self, data: bytes) -> None:
        # hypercorn's RawData send, without two scheduler passes: its lock taken at once when free
        # (vsr_fast.locks), and no send at all of the b"" h11 makes of a sized body's end (trio's send_all answers
        # it with a checkpoint alone). The socket send itself still checkpoints.
        side = self.client_side
        if side.hold_for is not None:
            task, side.hold_for = side.hold_for, None
            # Only the head of the answer send_whole is sending: another task's write (a 100 Continue, hypercorn's
            # own error answer) goes as it is. HTTP/2's frames never start so.
            if task is trio.lowlevel.current_task() and data.startswith(b"HTTP/1."):
                self._held = data
                return
        if self._held:
            held, self._held = self._held, b""
            if len(held) + len(data) <= JOIN_MAX_BYTES:
                data = held + data
            else:
                await self._write(held)     # a large body is not copied to join it
        if data:
            await self._write(data)

    async def _write(self, data: bytes) -> None:
        lock = self.send_lock
        await acquire(lock)     # in line only behind another stream of an HTTP/2 connection
        try:
            if self._owed:
                data, self._owed = self._owed + data, b""
            sent = send_now(self.stream, data)      # nearly always all of it: no shield, no scheduler pass
            if sent < len(data):
                await self._write_rest(memoryview(data)[sent:])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await self.protocol.handle(Closed())
        finally:
            lock.release()

    async def _write_rest(self, rest: memoryview) -> None:
        """What the socket did not take at once, as the client reads it. Cancelled (the request's deadline), the
        write keeps what it had left (``_owed``) rather than break the byte stream mid-chunk, and raises; no
        progress for ``send_timeout_s`` closes the connection."""
        raw = self._raw_socket()
        if raw is None:     # not a plain socket's (a test's): trio's send_all, whose partial progress is not known
            with trio.CancelScope(shield=True, deadline=trio.current_time() + self.send_timeout_s) as shield:
                await self.stream.send_all(rest)
            if shield.cancelled_caught:
                await self._cut(self._too_slow())
            return
        while rest:
            with trio.CancelScope(deadline=trio.current_time() + self.send_timeout_s) as idle:
                try:
                    await trio.lowlevel.wait_writable(raw)
                except trio.Cancelled:
                    self._owed = bytes(rest)        # dropped if it is the idle scope's own (``_cut``)
                    raise
            if idle.cancelled_caught:
                await self._cut(self._too_slow())
                return
            try:
                rest = rest[raw.send(rest):]
            except BlockingIOError:
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(exc) from exc

    def _too_slow(self) -> SendTimeout:
        return SendTimeout(f"the client took none of the answer for {self.send_timeout_s:g} s (send_timeout_ms); "
                           "its connection was closed")

    async def _cut(self, why: SendTimeout | None) -> None:
        """Close a connection whose client does not read: its requests learn why first (the reader, which sees
        the close later, would tell them only that the client left)."""
        self._owed = b""
        self.client_side.left(why)
        self._reading.cancel()
        await trio.aclose_forcefully(self.stream)
        await self.protocol.handle(Closed())

    async def _read_data(self) -> None:
        # The first hook after hypercorn's run() has made the connection's protocol, an HTTP/1.1 one on a plain
        # socket: its switch to HTTP/2 makes vsr_fast's HTTP/2 protocol (h2edge) rather than hypercorn's.
        self.protocol.__class__ = EdgeProtocol
        if type(self.protocol.protocol) is H11Protocol:
            self.protocol.protocol.__class__ = EdgeH11Protocol
            self.protocol.protocol.adopt()
        self.protocol.send_timeout_s, self.protocol.counts = self.send_timeout_s, self.h2_counts
        # It has made the connection's task group too, which spawns each request's app (``_spawn_app``).
        group = getattr(self, "_task_group", None)
        if group is not None and type(group) is TaskGroup:
            group.spawn_app = partial(_spawn_app, group)
        # hypercorn reads until the client closes or resets the connection (or the server closed it after a
        # final answer): then every request still answering on it has lost its client.
        with self._reading:
            await self._read_until_closed()
        if self._reading.cancelled_caught:      # the server closed the connection (_initiate_server_close, _cut)
            await self.protocol.handle(Closed())
        self.client_side.left()
        self._closed = True         # nothing left for the idle timer to time out
        self._idle.cancel()

    async def _read_until_closed(self) -> None:
        # hypercorn's read loop without its per-read timeout, which serve leaves unset (the idle timer bounds a
        # request's head, the body's pace its body): its ``fail_after(inf)`` costs a generator context and a
        # cancel scope a read.
        # On a plain socket the bytes read go to h11 with no scheduler pass between (trio's receive_some takes one
        # after its read): the drain's idle close (_request_came) finds a request's bytes in the socket or in h11,
        # never in neither. The pass is taken once they are handed over, in the wait for the next bytes: a request
        # read whole leaves nothing behind it (its answer comes first), so a read right away would find the socket
        # empty (a recv, its EAGAIN raised and caught, then the wait), and a pass of its own would resume this task
        # once more a request, beside the app task its request started.
        raw = self._raw_socket()
        waited = False
        while True:
            try:
                if raw is None:
                    data = await self.stream.receive_some(MAX_RECV)
                else:
                    data = await _receive(raw, waited)
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                break
            self._read = data
            if self._since is None:
                self._since = time.perf_counter()
            if not data:
                self.client_side.closed = True
            await self.protocol.handle(RawData(data))
            if not data:
                break
            if self.client_side.reading is not None:
                self.client_side.body_over()     # a chunk size read may alone pass the limit: no data follows it
            if raw is not None:
                waited = raw.fileno() >= 0
                if waited:
                    try:
                        await trio.lowlevel.wait_readable(raw)
                    except (trio.ClosedResourceError, OSError):
                        break
                else:       # closed under the loop: a pass, then the read says so (or the cancel is delivered)
                    await trio.lowlevel.cancel_shielded_checkpoint()
        await self.protocol.handle(Closed())

    def _raw_socket(self) -> socket.socket | None:
        """The connection's socket, when it is a plain one (not a test's stream)."""
        raw = getattr(self.stream, "socket", None)
        return getattr(raw, "_sock", None) if type(self.stream) is trio.SocketStream else None

    def _refusal(self, head: bytes) -> bytes:
        """In place of hypercorn's answer to a request h11 refused (``head``: its status, ``content-length: 0``
        and the close; the one answer it writes while h11 has the client in ERROR), the same status with a body
        in the protocol of the path the request named, when that is known."""
        stream = getattr(self.protocol.protocol, "stream", None)
        scope = getattr(stream, "scope", None)
        status, why = int(head[9:12]), None
        if scope is not None:      # refused in its body: the head was read
            return self.edge_answer(scope["raw_path"], status, scope=scope, since=self._since) or head
        # Refused in its head: h11 holds it still (431) or took it from the last read.
        held = self._h11().trailing_data[0]
        request = held if _request_target(held) else self._read
        target = _request_target(request)
        if status == 400 and _without_host(request):
            why = MISSING_HOST
        return self.edge_answer(target, status, why, head=request, peer=self.protocol.client,
                                since=self._since) or head

    async def _idle_timeout(self) -> None:
        # Started once, by hypercorn, when the connection opens (protocol_send takes its later restarts).
        with self._idle:
            await self.context.terminated.wait()
            self._stopping = True       # idle when the server stops: closed at once, as hypercorn does
            if self._idle.deadline == math.inf or self._request_came():
                # Answering (closed once its answer has gone: protocol_send), or a request's bytes have come: it
                # is read and answered (503 shutting_down, closing), a head left unfinished at its header timeout.
                await trio.sleep_forever()
        if self._closed:
            return
        with trio.CancelScope(shield=True):
            if head := self._unfinished_head():
                with trio.move_on_after(LINGER_S):
                    try:
                        await self.stream.send_all(self.edge_answer(
                            _request_target(head, whole=False), 408, head=head, peer=self.protocol.client,
                            since=self._since))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
            if isinstance(h2 := getattr(self.protocol, "protocol", None), EdgeH2Protocol):
                with trio.move_on_after(LINGER_S):
                    await h2.goaway()
            await self._initiate_server_close()

    async def _initiate_server_close(self) -> None:
        self._reading.cancel()      # a reader h11 paused (a request read, its answer not begun) waits no more
        await super()._initiate_server_close()

    def _request_came(self) -> bool:
        """Whether an idle HTTP/1 connection has a request's bytes: held by h11, or still unread in the socket."""
        if self._h11() is None:
            return False
        if self._unfinished_head():
            return True
        raw = self._raw_socket()
        if raw is None:
            return False
        try:
            return bool(raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:         # nothing there (EAGAIN), or the connection is gone
            return False

    def _chunk_due(self) -> int:
        """The bytes h11 still expects of the chunk it is reading (its chunk size, less what came); 0 when it
        reads no chunked body. h11 keeps the count in its chunked reader alone, which it does not make public:
        read by name, so an h11 that renames it leaves the limit to the bytes that come (tests hold it)."""
        conn = self._h11()
        return getattr(getattr(conn, "_reader", None), "_bytes_in_chunk", 0) if conn is not None else 0

    def _unfinished_head(self) -> bytes:
        """The bytes of a request head h11 holds unparsed while it waits for the rest; b"" otherwise."""
        conn = self._h11()
        if conn is None or conn.their_state is not h11.IDLE:
            return b""
        return conn.trailing_data[0]

    def _h11(self) -> h11.Connection | None:
        """The connection's h11 state machine; None before it has one, or on HTTP/2 or a WebSocket."""
        conn = getattr(getattr(getattr(self, "protocol", None), "protocol", None), "connection", None)
        return conn if isinstance(conn, h11.Connection) else None


async def _receive(raw: socket.socket, waited: bool = False) -> bytes:
    """Up to MAX_RECV bytes of ``raw`` (b"": the client closed), waiting for them; no scheduler pass after the
    read (``waited``: the caller has just waited for them, a checkpoint). ClosedResourceError once the server closed
    it, OSError when the connection broke."""
    if not waited:
        await trio.lowlevel.checkpoint_if_cancelled()
    while True:
        try:
            return raw.recv(MAX_RECV)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(raw)


def _request_target(head: bytes, whole: bool = True) -> bytes:
    """The target of the request line ``head`` starts with; b"" when it does not start with one (``whole``: a
    whole line, its version included; else as far as it got)."""
    line = head.split(b"\n", 1)[0].rstrip(b"\r").split(b" ")
    if whole and (len(line) != 3 or not line[2].startswith(b"HTTP/")):
        return b""
    return line[1] if len(line) > 1 else b""


def _without_host(head: bytes) -> bool:
    """Whether ``head`` is a whole HTTP/1.1 request head with no Host header (h11 refuses it; read only then)."""
    lines = head.split(b"\n")
    if not lines[0].rstrip(b"\r").endswith(b" HTTP/1.1"):
        return False
    for line in lines[1:]:
        line = line.rstrip(b"\r")
        if not line:            # the head's end: none of its lines was a Host
            return True
        if line[:5].lower() == b"host:":
            return False
    return False                # not whole: not known


async def _spawn_app(group: TaskGroup, app, config: hypercorn.config.Config, scope: dict, send):
    """hypercorn 0.18's ``TaskGroup.spawn_app`` (pinned by digest), its memory channel opened without typing's
    subscripts (``open_memory_channel[ASGIReceiveEvent]``, and those trio's makes: ``_memory_channel``) and its
    send queuing at once (``put_at_once``): the app gets its messages from the connection's task through it, whose
    send costs a scheduler pass even with room in the queue (three a request)."""
    app_send_channel, app_receive_channel = _memory_channel(config.max_app_queue_size)
    group._nursery.start_soon(_handle, app, config, scope, app_receive_channel.receive, send,
                              trio.to_thread.run_sync, trio.from_thread.run)
    return put_at_once(app_send_channel.send)


def _memory_channel(size: int) -> tuple[MemorySendChannel, MemoryReceiveChannel]:
    """``trio.open_memory_channel(size)`` (pinned by digest), its two channels made without the generic subscripts
    it makes them with (``MemorySendChannel[T]``: typing's alias built and its attribute looked up, each a few
    thousand instructions): the same channels. A size trio would refuse is trio's to refuse."""
    if type(size) is not int or size < 0:
        return trio.open_memory_channel(size)
    state = MemoryChannelState(size)
    return MemorySendChannel._create(state), MemoryReceiveChannel._create(state)


def put_at_once(put: Callable[[dict], Awaitable[None]]) -> Callable[[dict], Awaitable[None]]:
    """A memory channel's ``send`` that queues at once while there is room (no scheduler pass) and waits, as
    before, when the queue is full; any other ``put`` is returned as it is."""
    put_nowait = getattr(getattr(put, "__self__", None), "send_nowait", None)
    if put_nowait is None:
        return put

    async def queued(message: dict) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()       # as trio's send: a cancelled task stops here
        try:
            put_nowait(message)
        except trio.WouldBlock:
            await put(message)

    return queued


async def serve_http(app, cfg: hypercorn.config.Config, sock: socket.socket, shutdown: Callable[[], Awaitable[None]],
                     connections: Connections, edge_answer: EdgeAnswer, send_timeout_s: float = 60.0,
                     refused: RefusedConnection | None = None, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``app`` on the listening ``sock`` until ``shutdown`` returns, then drain (hypercorn's
    ``worker_serve`` for one plain-HTTP socket, with this module's accept loop); ``send_timeout_s``: the
    ``limits.send_timeout_ms`` of its connections; ``refused``: told of each connection answered 503 unread."""
    if cfg.read_timeout is not None:
        raise ValueError("hypercorn's read_timeout is not read here (EdgeServer._read_until_closed): leave it unset")
    cfg.set_statsd_logger_class(StatsdLogger)
    # Said, not guessed: hypercorn guesses ASGI only from a coroutine function, and the apps served here are plain
    # functions that return the app's coroutine (reload.Generations.app: no frame of its own per request).
    app = wrap_app(app, cfg.wsgi_max_body_size, "asgi")
    lifespan_state: dict = {}
    lifespan = Lifespan(app, cfg, lifespan_state)
    context = WorkerContext(None)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as server_nursery:
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
            handler = partial(EdgeServer, edge_answer, send_timeout_s, connections.h2, app, cfg, context,
                          ConnectionState(lifespan_state.copy()))
            task_status.started([f"http://{repr_socket_addr(sock.family, sock.getsockname())}"])
            async with trio.open_nursery() as accepting:
                async def stop() -> None:
                    await shutdown()
                    accepting.cancel_scope.cancel()
                accepting.start_soon(stop)
                accepting.start_soon(_accept, listener, handler, server_nursery, connections, refused)
            _answer_queued(sock, server_nursery, connections, refused)
            await listener.aclose()         # refused from now on; the connections in flight drain
            await context.terminated.set()
            server_nursery.cancel_scope.deadline = trio.current_time() + cfg.graceful_timeout
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()


async def _accept(listener: trio.SocketListener, handler, nursery: trio.Nursery, connections: Connections,
                  refused: RefusedConnection | None) -> None:
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _RESOURCES:
                raise
            log.error("accept failed (%s); retrying in 100 ms", errno.errorcode.get(exc.errno, exc.errno))
            await trio.sleep(0.1)
            continue
        if connections.full():
            connections.refused += 1
            if connections.lingering >= MAX_LINGERING:
                await trio.aclose_forcefully(stream)
            else:
                connections.lingering += 1
                nursery.start_soon(_refuse, stream, connections, refused)
        else:
            connections.active += 1
            nursery.start_soon(_run, stream, handler, connections)


async def _run(stream: trio.SocketStream, handler, connections: Connections) -> None:
    try:
        await handler(stream)
    except* Exception as group:
        # A defect reached by one client's bytes (hypercorn's HTTP/2 raised KeyError on a frame for a stream it had
        # closed) ends that connection alone: raised on, it would end the listener's nursery and the router.
        connections.failed += 1
        _failure_log.report(group)
    finally:
        connections.active -= 1
        await trio.aclose_forcefully(stream)


_failure_log = FailureLog(log, "a client connection's handling raised; that connection was closed, the listener "
                          "serves on")


def _answer_queued(sock: socket.socket, nursery: trio.Nursery, connections: Connections,
                   refused: RefusedConnection | None) -> None:
    """Accept every connection the kernel has queued on the listening ``sock`` (not blocking) and answer each 503
    shutting_down: the socket's close would reset them, their requests maybe sent already. Called right before that
    close, with no checkpoint between: nothing is queued after it."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:         # none left (EAGAIN), or none to be had now: the close refuses the rest
            return
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(conn))
        if connections.lingering >= MAX_LINGERING:
            conn.close()
            continue
        connections.lingering += 1
        nursery.start_soon(_refuse, stream, connections, refused, _STOPPING)


async def _refuse(stream: trio.SocketStream, connections: Connections, refused: RefusedConnection | None,
                  why: tuple[str, str, str] | None = None) -> None:
    """503 on a connection past the cap (or for ``why``), with a request id a user can quote and an access log
    line (``refused``), then a lingering close."""
    code, message, kind = why or (_BUSY[0], _BUSY[1] % (connections.cap or 0), _BUSY[2])
    rid = ids.request_id()
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()
    if refused is not None:
        refused(rid, _peer(stream), code, message)
    try:
        with trio.move_on_after(LINGER_S):
            await stream.send_all(_BUSY_HEAD % (rid.encode(), len(body), body))
            await stream.send_eof()
            while await stream.receive_some(65536):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        connections.lingering -= 1
        await trio.aclose_forcefully(stream)


def _peer(stream: trio.SocketStream) -> str | None:
    """The address of the client at the other end of ``stream``; None once it is gone."""
    try:
        return stream.socket.getpeername()[0]
    except OSError:
        return None


__all__ = ["Connections", "serve_http"]
