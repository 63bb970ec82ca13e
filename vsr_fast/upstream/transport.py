"""The upstream call on httpcore's connection pool, one layer below httpx's Client.

httpx's ``AsyncClient`` builds a ``Request``, merges and re-parses the URL, wraps
headers in its own model, runs its auth and redirect generators, event hooks and
cookie extraction, and wraps the answer in a ``Response``, on every call: the same
request costs 1.6x the CPU through httpx 0.28 as through its pool (``python -m
bench.upstream_client``), none of which a proxy with a fixed URL per backend and no
redirects needs. httpcore
is the pool httpx itself drives, so connection reuse, HTTP/1.1 parsing, TLS and the
connect / read / write / pool timeouts are the same code as before.
"""
from __future__ import annotations

import logging
import re
import socket
import ssl
import typing
import zlib
from collections.abc import AsyncIterator, Sequence
from itertools import chain
from time import monotonic as _monotonic
from urllib.parse import urlsplit

import h11
import httpcore
import httpx
import trio
from httpcore._async import connection_pool as _pool_module, http11 as _http11_module
from httpcore._async.http11 import (AsyncHTTP11Connection, AsyncHTTP11UpgradeStream, HTTP11ConnectionByteStream,
                                    HTTPConnectionState)
from httpcore._models import ByteStream
from httpcore._synchronization import AsyncShieldCancellation
from httpcore._trace import Trace

from ..errors import UpstreamInvalid
from ..headers.registry import provider_rate_headers
from ..headers.said import CONTENT_LENGTH, TRANSFER_ENCODING, said
from ..headers.wire import adopt as to_wire
from ..headers.wire import WireConnection, valid_headers
from ..locks import FreeLock, quiet
from .lease import Lease
from .stream import Backend, StaleConnection

log = logging.getLogger("vsr_fast.upstream")

# Every failure of the connection or of HTTP itself; what the dispatcher turns into UpstreamError.
TransportError = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError,
                  httpcore.UnsupportedProtocol, httpcore.ProxyError)
Timeout = httpcore.TimeoutException
ConnectError = (httpcore.ConnectError, httpcore.ConnectTimeout)

_NEW, _ACTIVE, _IDLE, _CLOSED = (HTTPConnectionState.NEW, HTTPConnectionState.ACTIVE, HTTPConnectionState.IDLE,
                                 HTTPConnectionState.CLOSED)
_DEFAULT_PORTS = {b"http": 80, b"https": 443}
_TIMEOUT_CAUSES = ((httpcore.ConnectTimeout, "connect_timeout"), (httpcore.ReadTimeout, "read_timeout"),
                   (httpcore.WriteTimeout, "write_timeout"), (httpcore.PoolTimeout, "pool_timeout"))


_CLOSED_WORDS = re.compile(r"disconnected|peer closed connection", re.I)


def cause(exc: BaseException) -> str:
    """Why a transport error happened, in one word (``UpstreamError.cause``): connect_refused, connect_timeout,
    dns_error, tls_error, connect_error, read_timeout, write_timeout, pool_timeout, connection_closed,
    too_large (a head past what the router holds unfinished), protocol_error."""
    for kind, name in _TIMEOUT_CAUSES:
        if isinstance(exc, kind):
            return name
    if isinstance(exc, httpcore.ConnectError):
        # httpcore raises from the socket's OSError; trio's connect raises one that holds each address's error.
        if _chain_has(exc, ConnectionRefusedError):
            return "connect_refused"
        if _chain_has(exc, ssl.SSLError):
            return "tls_error"
        return "dns_error" if _chain_has(exc, socket.gaierror) else "connect_error"
    if isinstance(exc, httpcore.RemoteProtocolError) and _CLOSED_WORDS.search(str(exc)):
        # httpcore's "Server disconnected without sending a response."; h11's "peer closed connection without
        # sending complete message body" (a backend gone mid-answer).
        return "connection_closed"
    if isinstance(exc, (httpcore.ReadError, httpcore.WriteError, httpcore.NetworkError)):
        return "connection_closed"
    if head_too_large(exc):
        return "too_large"
    return "protocol_error"


# What an answer's head (or a chunk line) may hold before its end arrives: httpcore's bound, given to h11.
HEAD_MAX_BYTES = AsyncHTTP11Connection.MAX_INCOMPLETE_EVENT_SIZE


def head_too_large(exc: BaseException) -> bool:
    """Whether ``exc`` is h11's refusal of an unfinished head past HEAD_MAX_BYTES ("Receive buffer too long"), which
    h11 marks with 431, its only use of that hint: the answer was too large, not malformed."""
    refused = _in_chain(exc, h11.RemoteProtocolError)
    return refused is not None and refused.error_status_hint == 431


def _chain_has(exc: BaseException | None, kind: type) -> bool:
    return _in_chain(exc, kind) is not None


def _in_chain(exc: BaseException | None, kind: type, depth: int = 0) -> BaseException | None:
    """The first exception of ``kind`` in ``exc``'s causes and groups, or None."""
    if exc is None or depth > 8:
        return None
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for e in exc.exceptions:
            found = _in_chain(e, kind, depth + 1)
            if found is not None:
                return found
    return _in_chain(exc.__cause__ or exc.__context__, kind, depth + 1)


# A hostname or IP mismatch names the backend's address: the client's message stops before it.
_NAMES_ADDRESS = re.compile(r",? *certificate is not valid for .*", re.S)


def tls_reason(exc: BaseException, *, logged: bool = False) -> str:
    """Why a TLS handshake failed, from the ssl error under ``exc``: ``certificate verify failed: self-signed
    certificate``; the address a mismatch names only when ``logged``."""
    error = _in_chain(exc, ssl.SSLError)
    if error is None:
        return "handshake failed"
    if isinstance(error, ssl.SSLCertVerificationError):
        said = error.verify_message or "unknown reason"
        return f"certificate verify failed: {said if logged else _NAMES_ADDRESS.sub('', said)}"
    return error.reason.lower().replace("_", " ") if error.reason else "handshake failed"


class Origin:
    """One backend's scheme, host and port, parsed once, and the URL of each path under its base (with its query)."""

    __slots__ = ("_base", "_query", "_urls", "host_header", "host", "port", "scheme")

    def __init__(self, base: str) -> None:
        parts = urlsplit(base)
        self.scheme = parts.scheme.encode("ascii")
        self.host = (parts.hostname or "").encode("idna")
        self.port = parts.port
        default = _DEFAULT_PORTS.get(self.scheme)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        self.host_header = netloc.encode("idna") if self.port not in (None, default) else self.host
        self._base = parts.path.rstrip("/")
        self._query = f"?{parts.query}" if parts.query else ""     # Azure's api-version, on every path
        self._urls: dict[str, httpcore.URL] = {}

    def url(self, path: str) -> httpcore.URL:
        """The URL of ``path`` under the base, built once per path."""
        url = self._urls.get(path)
        if url is None:
            url = httpcore.URL(scheme=self.scheme, host=self.host, port=self.port,
                               target=(self._base + path + self._query).encode("ascii"))
            self._urls[path] = url
        return url


def ssl_context() -> ssl.SSLContext:
    """The same verification httpx's clients use (certifi's roots): building one costs ~40 ms, so once per pool."""
    return httpx.create_ssl_context()


_BACKEND = Backend()        # stateless: shared by every pool


def new_pool(max_connections: int, context: ssl.SSLContext | None = None) -> httpcore.AsyncConnectionPool:
    """A pool of at most ``max_connections``, every one kept alive for 5 s idle (httpx's default)."""
    return QuietPool(ssl_context=context, max_connections=max_connections, network_backend=_BACKEND,
                     max_keepalive_connections=max_connections, keepalive_expiry=5.0)


class QuietPool(httpcore.AsyncConnectionPool):
    """httpcore's pool, its connections' locks taken without a scheduler pass when free (``vsr_fast.locks``):
    a lease lends each connection to one request at a time, yet httpcore takes a lock on it three times a request.
    HTTP/1.1 only: its network stream holds a request's writes until the answer is read (``stream.Stream``), which
    HTTP/2's frames would not survive."""

    def __init__(self, *args, **kwargs) -> None:
        if kwargs.get("http2"):
            raise ValueError("QuietPool speaks HTTP/1.1 only (its stream holds writes until the next read)")
        super().__init__(*args, **kwargs)

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        connection = super().create_connection(origin)
        if type(connection) is httpcore.AsyncHTTPConnection:       # not a proxy's
            connection.__class__ = _QuietConnection
            quiet(getattr(connection, "_request_lock", None))
        return connection

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        """httpcore's pool, its bookkeeping skipped when it has none to do: the request goes straight to the first
        idle connection, as the pool would send it, when no request waits and nothing is to be closed.

        A lease (``lease.Shards``) lends a shard's pool at most as many requests as it has connections, so the
        pool never queues; its per-request work is then a request entry, a sweep of every connection (closed,
        expired, idle past the keep-alive limit) both as the request arrives and as its answer closes, and a
        wrapper stream around the answer: ~6 % of a proxied request's CPU for nothing to do. Anything else (a
        connection to close or to open, a request waiting, a connection not httpcore's HTTP/1.1) is httpcore's
        own path, which does that work as before. An idle connection the backend closed is found as the pool finds
        it (``has_expired``: readable while idle) when it is the one chosen; another one waits to be chosen or its
        keep-alive to pass before it is closed."""
        chosen = self._ready(request.url.origin)
        if chosen is None:
            return await super().handle_async_request(request)
        # No scheduler pass between the check above and the connection turning ACTIVE (its state lock is quiet): no
        # other request can be given it meanwhile. Its answer's stream closes shielded, as the pool's does.
        response = await chosen.handle_untraced(request) if _untraced(request) \
            else await chosen.handle_async_request(request)     # _ready compared its origin
        if type(response.stream) is HTTP11ConnectionByteStream:
            response.stream.__class__ = _ShieldedClose
        return response

    def _ready(self, origin: httpcore.Origin) -> AsyncHTTP11Connection | None:
        """The HTTP/1.1 connection the pool would send a request for ``origin`` on, when sending it there is all
        the pool would do; None when the pool has anything else to do (``_assign_requests_to_connections``)."""
        if self._requests:
            return None
        now = _monotonic()
        chosen = None
        for connection in self._connections:
            held = connection.__dict__     # an AsyncHTTPConnection's (a _QuietConnection's too); a proxy's has neither
            inner = held.get("_connection")
            if type(inner) is not _Exact:
                if inner is None and held.get("_connect_failed") is False:
                    continue    # being opened by the request that made it: neither idle nor to be closed
                return None
            state = inner._state
            if state is _IDLE:
                if inner._expire_at is not None and now > inner._expire_at:
                    return None         # past its keep-alive: the pool closes it
                if chosen is None:
                    chosen = inner
            elif state is _CLOSED:
                return None             # the pool removes it
        if chosen is None or chosen._origin != origin or chosen.has_expired():
            return None
        return chosen

    async def sweep(self) -> None:
        """Closes the connections the pool would close at its next request: idle past their keep-alive, or closed
        by the backend while idle (``has_expired``: the socket readable). Without a request to this pool their
        sockets stayed open, in CLOSE-WAIT once the backend had closed its end (``sweep_idle`` calls this)."""
        if self._connections:
            with self._optional_thread_lock:
                closing = self._assign_requests_to_connections()
            await self._close_connections(closing)

    async def _close_connections(self, closing: list[httpcore.AsyncConnectionInterface]) -> None:
        # httpcore shields the closing of every request's list of expired connections, empty nearly always:
        # a cancel scope for nothing, twice a request.
        if closing:
            await super()._close_connections(closing)


class _QuietConnection(httpcore.AsyncHTTPConnection):
    """An httpcore connection until its HTTP/1.1 connection is set, on its first request: that one gets a quiet lock
    as it is set (httpcore builds it inside ``handle_async_request``, with no hook), and the connection is a plain
    httpcore one again (it never sets another, and its many reads of ``_connection`` are plain reads again)."""

    @property
    def _connection(self) -> httpcore.AsyncConnectionInterface | None:
        return self.__dict__["_connection"]

    @_connection.setter
    def _connection(self, connection: httpcore.AsyncConnectionInterface | None) -> None:
        self.__dict__["_connection"] = connection
        if connection is not None:
            quiet(getattr(connection, "_state_lock", None))
            if type(connection) is AsyncHTTP11Connection:
                connection.__class__ = _Exact
                if type(connection._h11_state) is h11.Connection:
                    to_wire(connection._h11_state)
                    if type(connection._h11_state) is WireConnection:
                        connection._h11_state.__class__ = _ClientWire
            self.__class__ = httpcore.AsyncHTTPConnection


_CLIENT, _SERVER, _DONE = h11.CLIENT, h11.SERVER, h11.DONE
_KEPT = object()        # a reader or writer a transition leaves as it was
# What an EndOfMessage leaves, by (role, client state, server state, keep-alive), no switch proposed: both states,
# and the writer and reader h11 then chose (_KEPT where its side's state did not move). Filled from h11's own run.
_END_AFTER: dict[tuple, tuple] = {}
_CYCLE_AFTER: list[tuple] = []      # start_next_cycle's writer and reader, from h11's own first run
_wire_process_event = WireConnection._process_event


class _ClientWire(WireConnection):
    """The h11 connection of an upstream connection (``headers.wire``'s): the end of a message, sent or received,
    and the next cycle's start, take the states, writer and reader h11 gave the same transition before, instead of
    running its state machine again (a dozen calls each, three times a request). A transition's outcome depends only
    on the key it is remembered by: the states, keep-alive and no switch proposed (with one, h11 runs it); the
    reader or writer of a state other than SEND_BODY is one shared object (its body's framing is only read from a
    head); h11's errors come from h11, never remembered. ``tests/test_upstream_exact.py`` holds it to h11."""

    def _process_event(self, role, event) -> None:
        cstate = self._cstate
        kind = type(event)
        if kind is h11.Data:
            if cstate.states[role] is h11.SEND_BODY:
                # headers.wire's own shortcut for a body's Data, here too: no frame more for each chunk of a stream.
                if role is _CLIENT:
                    self.client_is_waiting_for_100_continue = False
                return
        elif kind is h11.EndOfMessage and not cstate.pending_switch_proposals:
            states = cstate.states
            key = (role, states[_CLIENT], states[_SERVER], cstate.keep_alive)
            after = _END_AFTER.get(key)
            if after is not None:
                states[_CLIENT], states[_SERVER] = after[0], after[1]
                if after[2] is not _KEPT:
                    self._writer = after[2]
                if after[3] is not _KEPT:
                    self._reader = after[3]
                if role is _CLIENT:
                    self.client_is_waiting_for_100_continue = False
                return
            ours, theirs = self.our_state, self.their_state
            _wire_process_event(self, role, event)      # h11's own transition, or its error: remembered if neither
            after = (states[_CLIENT], states[_SERVER], self._writer if self.our_state != ours else _KEPT,
                     self._reader if self.their_state != theirs else _KEPT)
            if h11.SEND_BODY not in after[:2] and not cstate.pending_switch_proposals:
                _END_AFTER[key] = after
            return
        _wire_process_event(self, role, event)

    def start_next_cycle(self) -> None:
        cstate = self._cstate
        states = cstate.states
        if not _CYCLE_AFTER or states[_CLIENT] is not _DONE or states[_SERVER] is not _DONE or len(states) != 2 \
                or not cstate.keep_alive or cstate.pending_switch_proposals or self.client_is_waiting_for_100_continue:
            super().start_next_cycle()
            if not _CYCLE_AFTER:
                _CYCLE_AFTER.append((self._writer, self._reader))
            return
        cstate.states = {_CLIENT: h11.IDLE, _SERVER: h11.IDLE}
        self._request_method = None
        self._writer, self._reader = _CYCLE_AFTER[0]


class _Exact(AsyncHTTP11Connection):
    """An HTTP/1.1 connection kept for the next request only if its answer ended where its framing said: bytes
    past it (a second answer nobody asked for, a stray CRLF) would be read as the next request's answer, another
    user's. Closed instead, as nginx does ("upstream sent more data than specified"); bytes that arrive once it
    idles make its socket readable, and httpcore's pool closes a readable idle connection before lending it.
    Its request heads are validated by ``headers.wire``: h11's checks, without h11's cost."""

    async def _response_closed(self) -> None:
        state = self._h11_state
        if state.their_state is h11.DONE:
            extra = state.trailing_data[0]
            if extra:
                log.warning("upstream %s sent %d bytes past the end of its answer; its connection is closed, "
                            "not reused", self._origin, len(extra))
                await self.aclose()
                return
        await super()._response_closed()

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if not _untraced(request):
            return await super().handle_async_request(request)
        if not self.can_handle_request(request.url.origin):
            raise RuntimeError(f"Attempted to send request to {request.url.origin} on connection to {self._origin}")
        return await self.handle_untraced(request)

    async def handle_untraced(self, request: httpcore.Request) -> httpcore.Response:
        """httpcore 1.0's ``handle_async_request`` for a request nothing traces (``_untraced``), its origin already
        this connection's: the same steps, events, writes and errors, in one frame. httpcore's goes through six
        do-nothing Traces, a helper coroutine per step and per event, and an async generator for a body it has
        whole; each is a frame, and each of trio's async generators a hook and a weak reference."""
        lock = self._state_lock
        if _free(lock):
            # ``async with`` on a free quiet lock is this check and no scheduler pass; nothing awaits inside it.
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._state is not _NEW and self._state is not _IDLE:
                raise httpcore.ConnectionNotAvailable()
            self._request_count += 1
            self._state = _ACTIVE
            self._expire_at = None
        else:
            async with lock:
                if self._state in (_NEW, _IDLE):
                    self._request_count += 1
                    self._state = _ACTIVE
                    self._expire_at = None
                else:
                    raise httpcore.ConnectionNotAvailable()
        try:
            timeouts = request.extensions.get("timeout", {})
            timeout = timeouts.get("write", None)
            h11_state, network = self._h11_state, self._network_stream
            try:
                event = _request_event(request.method, request.url.target, request.headers)   # _send_request_headers
                sent = h11_state.send(event)
                if sent is not None:
                    await network.write(sent, timeout=timeout)
                body = request.stream                                                         # _send_request_body
                if type(body) is ByteStream:
                    sent = h11_state.send(h11.Data(data=body._content))     # the one chunk its __aiter__ yields
                    if sent is not None:
                        await network.write(sent, timeout=timeout)
                else:
                    assert isinstance(body, typing.AsyncIterable)
                    async for chunk in body:
                        sent = h11_state.send(h11.Data(data=chunk))
                        if sent is not None:
                            await network.write(sent, timeout=timeout)
                sent = h11_state.send(_END)
                if sent is not None:
                    await network.write(sent, timeout=timeout)
            except httpcore.WriteError:
                pass    # httpcore's reading: the server may have answered before it closed
            timeout = timeouts.get("read", None)                                             # _receive_response_headers
            while True:
                event = await self._receive_event(timeout)
                if isinstance(event, h11.Response):
                    break
                if isinstance(event, h11.InformationalResponse) and event.status_code == 101:
                    break
            status = event.status_code
            network_stream = self._network_stream
            if status == 101 or (request.method == b"CONNECT" and 200 <= status < 300):
                network_stream = AsyncHTTP11UpgradeStream(network_stream, h11_state.trailing_data[0])
            return _BuiltResponse(status, headers=event.headers.raw_items(),
                                  content=HTTP11ConnectionByteStream(self, request),
                                  extensions={"http_version": b"HTTP/" + event.http_version,
                                              "reason_phrase": event.reason, "network_stream": network_stream})
        except BaseException as exc:
            with AsyncShieldCancellation():
                await self._response_closed()
            raise exc

    async def _send_request_headers(self, request: httpcore.Request) -> None:
        # httpcore 1.0's, the head validated by headers.wire (what h11's constructor checks, at a fraction of its
        # cost), and h11's error mapped as ``map_exceptions`` maps it, without its generator (``_receive_event``).
        timeout = request.extensions.get("timeout", {}).get("write", None)
        await self._send_event(_request_event(request.method, request.url.target, request.headers), timeout=timeout)

    async def _receive_event(self, timeout: float | None = None) -> h11.Event | type[h11.PAUSED]:
        # httpcore 1.0's, with h11's error mapped by a try instead of ``map_exceptions``: that context manager is a
        # generator (contextlib: four Python calls and a generator frame), entered four times a proxied request.
        # The same exception (type, message, cause), raised from the same place.
        while True:
            try:
                event = self._h11_state.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpcore.RemoteProtocolError(exc) from exc
            if event is h11.NEED_DATA:
                data = await self._network_stream.read(self.READ_NUM_BYTES, timeout=timeout)
                # httpcore's message for a server gone before any answer (not h11's less telling one).
                if data == b"" and self._h11_state.their_state == h11.SEND_RESPONSE:
                    raise httpcore.RemoteProtocolError("Server disconnected without sending a response.")
                self._h11_state.receive_data(data)
            else:
                if type(event) is h11.Response:
                    _one_framing(event)
                return event


def _one_framing(event: h11.Response) -> None:
    """Refuse an answer whose head says where its body ends twice, Content-Length beside Transfer-Encoding: h11 lets
    chunked win, but a proxy before the backend may have read the length, so where this answer ends and the next
    begins is not known (RFC 9112 6.3: "ought to be handled as an error"; nginx's "upstream sent ... at the same
    time"). Raised while the answer's body is unread: the request closes the connection, never pooled again. The
    one place ``_Exact`` departs from httpcore (``tests/test_upstream_exact.py``)."""
    head = said(event.headers)       # read once per head already (``headers.wire``): a lookup here
    if head[TRANSFER_ENCODING] and head[CONTENT_LENGTH]:
        raise httpcore.RemoteProtocolError("upstream sent both Content-Length and Transfer-Encoding: chunked")


_END = h11.EndOfMessage()     # an event is immutable, and h11 keeps none it sends: one serves every request
# (method, target) pairs h11's Request took (its method and target patterns): checked once each; bounded.
_STARTS: set[tuple[bytes, bytes]] = set()
_STARTS_MAX = 4096


def _request_event(method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]]) -> h11.Request:
    """``h11.Request(method=method, target=target, headers=headers)``, the headers validated by ``headers.wire``
    (h11's checks, at a fraction of their cost) and the start line's patterns matched once per (method, target);
    h11's errors as httpcore's ``map_exceptions`` maps them. Anything else (no Host or two, a pair not seen
    valid) is h11's constructor, which raises its own error."""
    try:
        fields = valid_headers(headers)
        start = (method, target)
        if start in _STARTS and [item[1] for item in fields._full_items].count(b"host") == 1:
            event = object.__new__(h11.Request)
            setattr_ = object.__setattr__
            setattr_(event, "headers", fields)
            setattr_(event, "method", method)
            setattr_(event, "target", target)
            setattr_(event, "http_version", b"1.1")
            return event
        event = h11.Request(method=method, target=target, headers=fields)
        if type(method) is bytes and type(target) is bytes:
            if len(_STARTS) >= _STARTS_MAX:
                _STARTS.clear()
            _STARTS.add(start)
        return event
    except h11.LocalProtocolError as exc:
        raise httpcore.LocalProtocolError(exc) from exc


_HTTP11_LOG = _http11_module.logger


def _untraced(request: httpcore.Request) -> bool:
    """Whether httpcore's HTTP/1.1 connection would trace nothing of ``request`` (``_trace``'s test): no ``trace``
    extension, its logger not at DEBUG."""
    return request.extensions.get("trace") is None and not _HTTP11_LOG.isEnabledFor(logging.DEBUG)


def _free(lock: object) -> bool:
    """Whether httpcore's AsyncLock ``lock`` is a quiet one (``locks.quiet``) that nobody holds: taking it is then
    a cancellation check and no scheduler pass, giving it back nothing at all."""
    inner = getattr(lock, "_trio_lock", None)
    return type(inner) is FreeLock and not inner._lock.locked()


class _ShieldedClose(HTTP11ConnectionByteStream):
    """An answer's stream from an HTTP/1.1 connection, its closing shielded from cancellation as httpcore's pool
    shields it (``PoolByteStream``): a request cancelled as its answer closes still leaves its connection idle or
    closed, never ACTIVE for good. Untraced, its body is read and its close made with fewer frames (``_Body``,
    ``aclose``), to the same end."""

    def __aiter__(self) -> AsyncIterator[bytes]:
        if type(self._connection) is _Exact and _untraced(self._request):
            return _Body(self)
        return super().__aiter__()

    async def aclose(self) -> None:
        if self._closed:
            return
        connection = self._connection
        state = connection._h11_state
        if type(connection) is _Exact and state.our_state is h11.DONE and state.their_state is h11.DONE \
                and not state.trailing_data[0] and _free(connection._state_lock) and _untraced(self._request):
            # httpcore's close of an answer read to its end (``_Exact._response_closed``): nothing in it awaits
            # (a free quiet lock, no socket to close), so there is nothing to shield and no cancel scope is made.
            self._closed = True
            connection._state = _IDLE
            state.start_next_cycle()
            if connection._keepalive_expiry is not None:
                connection._expire_at = _monotonic() + connection._keepalive_expiry
            return
        with trio.CancelScope(shield=True):
            await super().aclose()


class _Body:
    """``HTTP11ConnectionByteStream.__aiter__`` over ``_receive_response_body`` for an untraced answer of an
    ``_Exact`` connection: the same chunks and the same close on a failure, from one object instead of two async
    generators (each a frame per chunk, and for trio a first-iteration hook and a weak reference)."""

    __slots__ = ("_done", "_stream", "_timeout")

    def __init__(self, stream: _ShieldedClose) -> None:
        self._stream = stream
        self._timeout = stream._request.extensions.get("timeout", {}).get("read", None)
        self._done = False

    def __aiter__(self) -> "_Body":
        return self

    async def __anext__(self) -> bytes:
        if self._done:
            raise StopAsyncIteration
        stream = self._stream
        try:
            while True:
                event = await stream._connection._receive_event(timeout=self._timeout)
                if isinstance(event, h11.Data):
                    return bytes(event.data)
                if isinstance(event, h11.EndOfMessage) or event is h11.PAUSED:
                    self._done = True
                    raise StopAsyncIteration
        except StopAsyncIteration:
            raise
        except BaseException as exc:
            # httpcore's: the answer (and maybe its connection) closed before the failure goes on.
            self._done = True
            with AsyncShieldCancellation():
                await stream.aclose()
            raise exc


class _BuiltResponse(httpcore.Response):
    """``httpcore.Response`` as httpcore's async HTTP/1.1 connection and pool build one for every answer: the same
    object, without ``enforce_headers``' check of the headers (``isinstance`` on ``typing.Mapping`` and
    ``typing.Sequence``, through abc, then a call per name and value: ~2/3 of the ~5 us each of the two Responses
    a request costs). What those two call sites pass is already what it would make: h11's ``raw_items()``, a list of
    bytes pairs, and the connection's Response's own ``headers``; anything else takes httpcore's constructor."""

    def __init__(self, status: int, *, headers=None, content=None, extensions=None) -> None:
        if type(headers) is not list or content is None or isinstance(content, bytes):
            super().__init__(status, headers=headers, content=content, extensions=extensions)
            return
        self.status = status
        self.headers = list(headers)        # a copy, as enforce_headers makes
        self.stream = content
        self.extensions = {} if extensions is None else extensions
        self._stream_consumed = False


# Only the names those two modules call (not ``httpcore.Response`` itself, which a caller may build from anything).
_http11_module.Response = _pool_module.Response = _BuiltResponse


class _Untraced:
    """What an httpcore ``Trace`` is when nothing listens (no ``trace`` extension on the request, its logger not at
    DEBUG): its ``async with`` does nothing, and what it is told (``return_value``) is dropped. httpcore's own
    builds its state and names first, six times a proxied request, to find out it has nothing to do."""

    __slots__ = ()
    return_value = property(lambda self: None, lambda self, value: None)

    async def __aenter__(self) -> "_Untraced":
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


_UNTRACED = _Untraced()


def _trace(name: str, logger: logging.Logger, request: httpcore.Request | None = None,
           kwargs: dict | None = None) -> Trace | _Untraced:
    """httpcore's ``Trace(name, logger, request, kwargs)`` when it would trace (``Trace.should_trace``'s test, made
    at the same moment), else the one that does nothing."""
    if (request is None or request.extensions.get("trace") is None) and not logger.isEnabledFor(logging.DEBUG):
        return _UNTRACED
    return Trace(name, logger, request, kwargs)


# The name httpcore's HTTP/1.1 connection calls (a request and its answer: six Traces), not ``httpcore._trace``'s.
_http11_module.Trace = _trace


class Response:
    """An answer whose status and headers have arrived; its body is read through ``chunks`` or ``read``."""

    __slots__ = ("_lease", "_raw", "label", "status")

    def __init__(self, raw: httpcore.Response, label: str, lease: Lease | None = None) -> None:
        self._raw = raw
        self._lease = lease
        self.label = label
        self.status: int = raw.status

    def rate_headers(self) -> list[tuple[bytes, bytes]]:
        """The backend's own rate-limit headers, as the client receives them (``headers.registry``)."""
        return provider_rate_headers(self._raw.headers)

    def header(self, name: bytes, default: str = "") -> str:
        """The first value of header ``name`` (lowercase); the few the router reads are looked up, not all decoded."""
        for key, value in self._raw.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return default

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives. The router asks for ``identity``; a backend that compresses anyway with
        gzip or deflate is decoded, as httpx did; any other coding, or a broken one, is UpstreamInvalid."""
        coding = self.header(b"content-encoding", "identity").strip().lower()
        if coding in ("identity", ""):
            return aiter(self._raw.stream)
        if coding in ("gzip", "x-gzip", "deflate"):
            return _inflated(aiter(self._raw.stream), self.label)
        raise UpstreamInvalid.at(self.label, f"answered in content-encoding {coding!r}, not the identity asked for")

    async def aclose(self) -> None:
        """Close the answer, and give its connection's lease back (once, even if closing fails)."""
        try:
            raw = self._raw
            if type(raw) is _BuiltResponse and type(raw.stream) is _ShieldedClose:
                # httpcore's Response.aclose for this stream, without its isinstance on typing's AsyncIterable.
                await raw.stream.aclose()
            else:
                await raw.aclose()
        finally:
            if self._lease is not None:
                lease, self._lease = self._lease, None
                lease.release()


# What one chunk of a compressed body inflates to at most before the reader sees it and counts it: zeros compress
# ~1000:1, so a read of 64 KiB unbounded would be 64 MiB at once, and a bomb's whole read past any size limit.
INFLATE_MAX_BYTES = 256 << 10


async def _inflated(chunks: AsyncIterator[bytes], label: str) -> AsyncIterator[bytes]:
    inflate = zlib.decompressobj(wbits=47)   # 32 + 15: a gzip or a zlib header, found from the first bytes
    try:
        async for chunk in chunks:
            while chunk:
                out = inflate.decompress(chunk, INFLATE_MAX_BYTES)
                chunk = inflate.unconsumed_tail
                if out:
                    yield out
        tail = inflate.flush()
    except zlib.error as exc:
        raise UpstreamInvalid.at(label, f"answered a broken compressed body: {exc}") from None
    if tail:
        yield tail


async def send(pool: httpcore.AsyncConnectionPool, origin: Origin, path: str, body: bytes,
               headers: Sequence[tuple[bytes, bytes]], timeouts: dict[str, float], label: str,
               lease: Lease | None = None) -> Response:
    """POST ``body`` to ``path`` under ``origin`` (backend ``label``); returns once the status and headers are in,
    holding ``lease`` until it is closed."""
    request = _request(b"POST", origin.url(path),
                       [(b"Host", origin.host_header), *headers, (b"Content-Length", b"%d" % len(body))],
                       body, {"timeout": timeouts})
    try:    # ``_handled``'s first try, in this frame (one fewer to resume at each pass of the wait for the answer)
        return Response(await pool.handle_async_request(request), label, lease)
    except StaleConnection as exc:
        log.debug("upstream %s closed a kept-alive connection before answering (%s); sent again", label, exc)
    return Response(await _resent(pool, request), label, lease)


_BYTES = frozenset({bytes})


def _request(method: bytes, url: httpcore.URL, headers: list[tuple[bytes, bytes]], body: bytes,
             extensions: dict) -> httpcore.Request:
    """``httpcore.Request(method, url, headers=headers, content=body, extensions=extensions)``: the same object,
    built without httpcore's check of each argument's type when they are what httpcore would make of them
    (bytes, a URL, bytes pairs): its ``isinstance`` on typing's generics costs more than the request itself."""
    if not _BYTES.issuperset(map(type, chain.from_iterable(headers))):    # in C: no Python frame per header
        return httpcore.Request(method, url, headers=headers, content=body, extensions=extensions)
    request = object.__new__(httpcore.Request)
    request.method, request.url, request.headers = method, url, headers
    request.stream, request.extensions = ByteStream(body), extensions
    return request


async def _handled(pool: httpcore.AsyncConnectionPool, request: httpcore.Request, label: str) -> httpcore.Response:
    """``request``'s answer from ``pool``. A kept-alive connection the backend closed as the request went out (its
    idle timeout) fails with nothing answered: sent again once, neither an attempt nor the backend's failure.
    Once only: a backend whose worker read the request and died on it closes the connection the same way, and
    a resend on each of the pool's idle connections would send it (and kill a worker) as many times."""
    try:
        return await pool.handle_async_request(request)
    except StaleConnection as exc:
        log.debug("upstream %s closed a kept-alive connection before answering (%s); sent again", label, exc)
    return await _resent(pool, request)


async def _resent(pool: httpcore.AsyncConnectionPool, request: httpcore.Request) -> httpcore.Response:
    """``_handled``'s second and last try."""
    try:
        return await pool.handle_async_request(request)
    except StaleConnection as exc:      # dropped again: the backend's failure, as any closed connection is
        raise httpcore.ReadError(str(exc)) from exc


async def probe(pool: httpcore.AsyncConnectionPool, origin: Origin, path: str,
                headers: Sequence[tuple[bytes, bytes]], limit: int = 65_536) -> int:
    """``GET path`` under ``origin``: its status, with at most ``limit`` bytes of its body read (a health check)."""
    request = _request(b"GET", origin.url(path), [(b"Host", origin.host_header), *headers], b"", {})
    response = await _handled(pool, request, origin.host_header.decode("ascii", "replace"))
    try:
        seen = 0
        async for chunk in response.aiter_stream():
            seen += len(chunk)
            if seen > limit:
                break
    finally:
        await response.aclose()
    return response.status
