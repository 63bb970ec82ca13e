"""Small ASGI helpers shared by the raw handlers: body reading, whole responses, disconnects."""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import trio

from ..errors import BodyFragmented, BodyTimeout, BodyTooLarge, SendTimeout
from ..events import ids

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
HeaderList = list[tuple[bytes, bytes]]


class ClientGone(Exception):
    """The client disconnected before the exchange finished."""


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of a request header (names are lowercase in ASGI)."""
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


def origin_path(target: bytes) -> bytes:
    """The path (and query) of a request target: an absolute-form one's (``http://host:port/p?q``, RFC 9112
    3.2.2, which a server must accept: a proxy's form) after its authority, ``/`` when it has none; an
    origin-form one (``/p?q``) and anything else (``*``) as it is."""
    scheme, sep, rest = target.partition(b"://")
    if not sep or scheme.lower() not in (b"http", b"https"):
        return target
    cut = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
    rest = rest[cut:]
    return rest if rest.startswith(b"/") else b"/" + rest


def to_origin_form(scope: Scope) -> str:
    """Rewrites the ``path`` and ``raw_path`` of a request whose target was absolute-form (hypercorn puts all
    of it in them; its query is split off already) to its path; returns the path."""
    scope["raw_path"] = raw = origin_path(scope["raw_path"])
    scope["path"] = path = unquote(raw.decode("ascii"))
    return path


@dataclass(frozen=True, slots=True)
class BodyPace:
    """How long a request body may take to arrive: ``grace_s`` to start with, plus one second per
    ``min_rate`` bytes received (Apache mod_reqtimeout's ``body=…,MinRate=…``; 0: no extension)."""

    grace_s: float
    min_rate: int


def take_queued(receive: Receive) -> Message | None:
    """The request's messages already there, taken without waiting, as one (hypercorn sends a body, then its
    empty end); None when ``receive`` would wait for the first."""
    queued = getattr(receive, "queued", None)
    first = queued() if queued is not None else None
    if first is None or first["type"] != "http.request" or not first.get("more_body", False):
        return first
    parts = [first.get("body", b"")]
    while (message := queued()) is not None:
        if message["type"] != "http.request":
            return message          # the client left: what it sent no longer matters
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return {"type": "http.request", "body": _joined(parts), "more_body": False}
    return {"type": "http.request", "body": _joined(parts), "more_body": True}


def _joined(parts: list[bytes]) -> bytes:
    parts = [part for part in parts if part]
    return parts[0] if len(parts) == 1 else b"".join(parts)


def is_whole(message: Message | None) -> bool:
    """Whether ``message`` ends the request: nothing after it to wait for."""
    return message is not None and not message.get("more_body", False)


# Each piece of a body (an HTTP/1.1 chunk, an HTTP/2 DATA frame, a read of a sized one) costs ~23 µs of the server's
# CPU to parse and hand over, whatever its size: a body of more than FRAGMENTED_AFTER pieces averaging under
# MIN_PIECE_BYTES is refused (a 64 MiB body in 1-byte chunks would cost minutes). Real clients send chunks of
# kilobytes, and a slow link's reads are segments of over a kilobyte.
FRAGMENTED_AFTER = 4096
MIN_PIECE_BYTES = 64


async def read_body(scope: Scope, receive: Receive, limit: int, pace: BodyPace, first: Message | None = None) -> bytes:
    """The whole request body; BodyTooLarge as soon as it is known to exceed ``limit``, BodyTimeout when it
    falls behind ``pace`` (the caller's own deadline still applies on top). ``first``: its first message, already
    taken (``take_queued``); when that is the whole body nothing waits, and no deadline is set."""
    declared = header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"Request body of {int(declared)} bytes exceeds the limit of {limit} bytes")
    if is_whole(first):
        return _chunk(first, 0, limit)
    chunks: list[bytes] = []
    size = 0
    started = trio.current_time()
    side = CLIENT_SIDE.get()
    with trio.CancelScope(deadline=started + pace.grace_s) as cut:
        reading = BodyRead(limit, cut)
        if side is not None:
            side.reading = reading
        try:
            while True:
                if side is not None and side.body_over():   # the chunk size may have come before this read
                    break
                message, first = first or await receive(), None
                chunk = _chunk(message, size, limit)
                size += len(chunk)
                chunks.append(chunk)
                if len(chunks) > FRAGMENTED_AFTER and size < len(chunks) * MIN_PIECE_BYTES:
                    raise BodyFragmented(f"the request body came in {len(chunks)} pieces of {size // len(chunks)} bytes "
                                         f"on average; past {FRAGMENTED_AFTER} pieces they must average at least "
                                         f"{MIN_PIECE_BYTES} bytes")
                if not message.get("more_body", False):
                    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
                reading.size = size
                if pace.min_rate:
                    cut.deadline = started + pace.grace_s + size / pace.min_rate
        finally:
            if side is not None:
                side.reading = None
    if reading.over:
        raise BodyTooLarge(f"Request body exceeds the limit of {limit} bytes (a chunk declares "
                           f"{reading.over} bytes more than came)")
    raise BodyTimeout(f"the request body arrived too slowly ({size} bytes in {trio.current_time() - started:.1f} s; "
                      f"allowed: {pace.grace_s:g} s plus one second per {pace.min_rate} bytes)")


def _chunk(message: Message, size: int, limit: int) -> bytes:
    """A body message's bytes, ``size`` having come before them; ClientGone, or BodyTooLarge past ``limit``."""
    if message["type"] == "http.disconnect":
        raise ClientGone
    chunk = message.get("body", b"")
    if size + len(chunk) > limit:
        raise BodyTooLarge(f"Request body exceeds the limit of {limit} bytes")
    return chunk


# After a 413 the rest of the refused body is read and dropped before the connection
# closes (nginx's lingering close): a socket closed with unread data sends a reset, and a
# client still sending then sees a broken pipe instead of the 413 already written. The
# bounds cap what a client can make us read for nothing; past them the socket closes.
LINGER_MAX_BYTES = 256 << 20
LINGER_MAX_S = 10.0
# An answer to a body that came too slowly: discarding the rest would wait on that client again; it closes.
CLOSING_STATUSES = frozenset({408})
# Set in a request's scope when its body is not to be read at all (its framing is ambiguous): it closes unread.
CLOSE_UNREAD = "vsr.close_unread"


def lingering_close(app):
    """``app`` with a bounded lingering close after any answer given before the body was read whole (a 413, an auth
    refusal, a 404 or 405 decided from the head): the answer is sent whole first (so a client that stopped sending
    reads it at once), then the unread body is discarded, then the response ends and hypercorn recycles the
    connection. An unread body that cannot be discarded (past the bounds, a 100-continue never asked for, a 408)
    closes the connection, and the answer says so (``Connection: close``): hypercorn would close it anyway, and a
    client not told reuses it and fails (trial 10b: the openai SDK's next request, APIConnectionError)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        ended = False
        refused = False
        unasked = False
        body_ended: trio.Event | None = None    # set once the body ended, whoever read its last message
        waiting = _waiting(receive)

        def seen(message: Message) -> Message:
            nonlocal ended
            ended = ended or message["type"] == "http.disconnect" or not message.get("more_body", False)
            if ended and body_ended is not None:
                body_ended.set()
            return message

        async def tracked() -> Message:
            await trio.lowlevel.checkpoint_if_cancelled()       # as trio's receive: a cancelled task stops here
            try:
                return seen(waiting())
            except trio.WouldBlock:
                await ask_for_body()
                return seen(await receive())

        def queued() -> Message | None:
            try:
                return seen(waiting())
            except trio.WouldBlock:
                return None

        tracked.queued = queued     # take_queued's

        async def discard_rest() -> None:
            # The app may still be reading the body too (quart reads it in a task of its own, even for a 405): when
            # that reader takes the last message, the discard's own read would wait for one that never comes.
            nonlocal body_ended
            body_ended = trio.Event()
            if ended:       # taken while the answer's head was being sent
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_when, body_ended, nursery.cancel_scope)
                await discard_body(tracked, _declared(scope))
                nursery.cancel_scope.cancel()

        async def lingering(message: Message) -> None:
            nonlocal refused, unasked
            if message["type"] == "http.response.start" and not ended:
                # Answered before the body was asked for (the client, told no 100, need not send it), or a body
                # that will not be discarded: the connection cannot carry another request; it closes.
                unasked = (waiting_for_continue() or message["status"] in CLOSING_STATUSES
                           or _declared(scope) > LINGER_MAX_BYTES or CLOSE_UNREAD in scope)
                refused = not unasked
                if unasked and scope.get("http_version") in ("1.0", "1.1"):
                    message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            elif refused and not ended and not unasked and is_final(message):
                await send({**message, "more_body": True})
                await discard_rest()
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await app(scope, tracked, lingering)

    return wrapped


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _waiting(receive: Receive) -> Callable[[], Message]:
    """A message already queued for ``receive``, or WouldBlock. hypercorn's receive is a trio memory channel's,
    whose ``receive`` costs a pass of the scheduler even when the message is there (the request and its body
    usually are); any other receive is always awaited."""
    nowait = getattr(getattr(receive, "__self__", None), "receive_nowait", None)
    if nowait is None:
        def nowait() -> Message:
            raise trio.WouldBlock
    return nowait


def _declared(scope: Scope) -> int:
    value = header(scope, b"content-length")
    return int(value) if value is not None and value.isdigit() else LINGER_MAX_BYTES


async def discard_body(receive: Receive, expected: int = LINGER_MAX_BYTES) -> None:
    """Read and drop up to ``expected`` body bytes within the bounds; nothing when it is past them, or when the
    client waits for a ``100 Continue`` before sending it (the refusal then closes the connection)."""
    if expected > LINGER_MAX_BYTES or waiting_for_continue():
        return
    size = 0
    with trio.move_on_after(LINGER_MAX_S):
        while size <= LINGER_MAX_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                return
            size += len(message.get("body", b""))


async def send_whole(send: Send, status: int, headers: HeaderList, body: bytes) -> None:
    """A complete response in two ASGI messages, with its Content-Length; on HTTP/1 its head and body leave in
    one write (``ClientSide.hold_for``)."""
    headers.append((b"content-length", str(len(body)).encode()))
    side = CLIENT_SIDE.get() if body else None      # no body: nothing to join the head to
    if side is not None:
        side.hold_for = trio.lowlevel.current_task()
    try:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    finally:
        if side is not None:
            side.hold_for = None


_REQUEST_ID = b"x-request-id"


def quotable(status: int, headers: HeaderList) -> HeaderList:
    """``headers`` of a refusal (``status`` 400 or more) with an x-request-id, a new one, when it has none: the
    edge's own answers (hypercorn's bare ones, an HTTP/2 tunnel's 501) carry one a user can quote, as the
    router's others do. Any other answer's as they are."""
    if status < 400 or any(name.lower() == _REQUEST_ID for name, _ in headers):
        return headers
    return [*headers, (_REQUEST_ID, ids.request_id().encode())]


class DisconnectWatch:
    """Cancels a scope when the client leaves before its response ended.

    hypercorn-trio keeps accepting send() after the client has gone
    (STACK-NOTES), so without this an abandoned stream would keep the upstream
    generating and billing tokens. On HTTP/1 the connection's server tells the
    watch (``ClientSide``): no task per request waits for ``http.disconnect``.
    On HTTP/2, where one stream can be reset alone, ``run`` waits for it.
    hypercorn also closes a ``Connection: close`` socket from inside the final
    send: ``send`` marks the response finished first and shields that last
    message, so that close is not mistaken for a client leaving; the shield
    ends at the scope's deadline (the request's, past its grace), so a client
    that does not read cannot hold the answer past it.
    """

    __slots__ = ("_send", "_scope", "cut", "finished", "gone", "sent")

    def __init__(self, send: Send, scope: trio.CancelScope) -> None:
        self._send, self._scope = send, scope
        self.finished = False
        self.gone = False
        self.sent = False       # the response has started
        self.cut: SendTimeout | None = None      # why the router closed the connection, when it did

    def client_left(self, why: SendTimeout | None = None) -> None:
        self.cut = self.cut or why
        if not self.finished:
            self.gone = True
            self._scope.cancel()

    async def run(self, receive: Receive) -> None:
        """Wait for this request's ``http.disconnect`` (HTTP/2)."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.client_left(message.get("vsr.cut"))     # the router's reason, when it cut the stream (h2edge)
                return

    async def send(self, message: Message) -> None:
        self.sent = True
        if is_final(message):
            self.finished = True
            with trio.CancelScope(shield=True, deadline=self._scope.deadline):
                await self._send(message)
        else:
            await self._send(message)


@asynccontextmanager
async def watching(scope: Scope, receive: Receive, send: Send, cut: trio.CancelScope) -> AsyncIterator[DisconnectWatch]:
    """A ``DisconnectWatch`` cancelling ``cut`` when the client leaves, for the body of the block; enter it once the
    request's body is read (over HTTP/2 it reads ``receive`` for the stream's reset). Its ``send`` is the one to
    answer with. An exception the block raises leaves it as it was raised, over HTTP/2 too: the watch's nursery
    would wrap it in an ExceptionGroup, which no ``except ModelNotFound`` of the caller's catches (a 403 or 429
    answered as a 500)."""
    watch = DisconnectWatch(send, cut)
    side = CLIENT_SIDE.get() if scope.get("http_version") != "2" else None
    if side is not None:
        side.watches.add(watch)
        if side.closed:
            watch.client_left()
        try:
            yield watch
        finally:
            side.watches.discard(watch)
    else:
        raised: Exception | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run, receive)
            try:
                yield watch
            except Exception as exc:    # noqa: BLE001 - re-raised below, outside the nursery
                raised = exc
            nursery.cancel_scope.cancel()
        if raised is not None:
            raise raised


class BodyRead:
    """A request body being read (``read_body``): its limit, the bytes read so far, and the scope its server
    cancels once a chunk declares more than the limit leaves (``ClientSide.body_over``); ``over``: those
    bytes."""

    __slots__ = ("cut", "limit", "over", "size")

    def __init__(self, limit: int, cut: trio.CancelScope) -> None:
        self.limit, self.cut, self.size, self.over = limit, cut, 0, 0


def _nothing_due() -> int:
    return 0


class ClientSide:
    """One connection's client side, as its server reads it: the watches of the requests on it, told at once
    when the client closes or resets an HTTP/1 connection, which task's next response head is to be held
    for its body, and the ``100 Continue`` withheld until the app asks for the body (``listen.EdgeServer``)."""

    __slots__ = ("closed", "due", "hold_for", "method", "reading", "watches", "withheld", "write")

    def __init__(self) -> None:
        self.closed = False
        # The body bytes the connection's parser still expects of the chunk it is reading, and the body being
        # read: a chunk whose size alone passes the limit is refused at once (nginx: "client intended to send
        # too large chunked body"), not waited for until the body's pace runs out.
        self.due: Callable[[], int] = _nothing_due
        self.reading: BodyRead | None = None
        # hypercorn writes a 100 Continue as soon as it has read a head with Expect: 100-continue; the server
        # keeps it here, and sends it (``write``) only when the app waits for the body (``ask_for_body``). An
        # answer given first drops it: a refusal that needs no body (401, 403, 404, 405, 413, 415, 429) is the
        # client's first and only status line, as nginx and Envoy answer.
        self.withheld = b""
        self.write: Callable[[bytes], Awaitable[None]] | None = None
        # Set by send_whole to its task: that task's next head is held for its body, which follows at once, so
        # both leave in one write (one syscall and one scheduler pass fewer) with no turn between them for the
        # connection's reader (which closes the connection on a protocol error, cutting an answer after its head).
        self.hold_for: trio.lowlevel.Task | None = None
        self.watches: set[DisconnectWatch] = set()
        # The method of the HTTP/1 request being read, as its request line spells it (``h11edge.EdgeH11Protocol``):
        # hypercorn's scope has it upper-cased. One request at a time: h11 reads the next head only once this
        # one's answer has ended.
        self.method = b""

    def body_over(self) -> bool:
        """Whether the body being read will pass its limit by what its current chunk declares; if so its read
        is cut (from the connection's task, after each read, or the reading task's own)."""
        reading = self.reading
        if reading is None:
            return False
        due = self.due()
        if reading.size + due <= reading.limit:
            return False
        reading.over = due
        reading.cut.cancel()
        return True

    def left(self, why: SendTimeout | None = None) -> None:
        """The client closed or reset the connection, or the router closed it ``why``."""
        self.closed = True
        for watch in tuple(self.watches):
            watch.client_left(why)


# The connection the current task serves: set by the connection server in its own task, and so inherited by the
# request tasks hypercorn spawns from it.
CLIENT_SIDE: ContextVar[ClientSide | None] = ContextVar("vsr_client_side", default=None)


# An HTTP/2 stream's :method as sent: set by ``h2edge`` around the spawn of the stream's app task, which keeps a
# copy (a connection's streams are concurrent: ``ClientSide.method`` is HTTP/1's one request at a time).
STREAM_METHOD: ContextVar[bytes] = ContextVar("vsr_stream_method", default=b"")


def sent_method() -> bytes:
    """The current request's method as its client spelled it (hypercorn upper-cases the scope's): HTTP/1's
    request line, HTTP/2's :method; b"" when not known (a test's app)."""
    spelled = STREAM_METHOD.get()
    if spelled:
        return spelled
    side = CLIENT_SIDE.get()
    return side.method if side is not None else b""


def waiting_for_continue() -> bool:
    """Whether the current request's client waits for a ``100 Continue`` it has not been sent."""
    side = CLIENT_SIDE.get()
    return side is not None and bool(side.withheld)


async def ask_for_body() -> None:
    """Send the withheld ``100 Continue``, if any: the app is about to wait for the body."""
    side = CLIENT_SIDE.get()
    if side is not None and side.withheld and side.write is not None:
        head, side.withheld = side.withheld, b""
        await side.write(head)


def is_final(message: Message) -> bool:
    """Whether ``message`` ends the response."""
    return message["type"] == "http.response.body" and not message.get("more_body", False)


def shield_final(send: Send) -> Send:
    """``send`` with the response's last message shielded from cancellation."""

    async def shielded(message: Message) -> None:
        if is_final(message):
            with trio.CancelScope(shield=True):
                await send(message)
        else:
            await send(message)

    return shielded
