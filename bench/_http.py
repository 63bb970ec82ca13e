"""Minimal HTTP/1.1 framing on raw trio sockets, shared by sr-bench and the fake servers.

sr-bench and the mock upstream sit on the measured path of every benchmark, so they skip
h11/httpx and do only the framing they need: heads up to a blank line, Content-Length and
chunked bodies. The server side (``Server``, ``read_request``, ``response_bytes``,
``watched``, ``serve_until_signal``) is the one the mock upstream and the fake System One
both run on.
"""
from __future__ import annotations

import abc

import signal
import socket
import sys
from collections.abc import Awaitable
from http import HTTPStatus

import trio

RECV_SIZE = 65536
MAX_HEAD = 65536
MAX_LINE = 8192


class ProtocolError(Exception):
    """The peer sent something that is not HTTP/1.1 as this module understands it."""


class PeerClosed(ProtocolError):
    """The peer closed the connection in the middle of a message."""


def set_nodelay(sock: trio.socket.SocketType) -> None:
    """Disable Nagle: small writes must leave at once or every latency grows by ~40 ms."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def abort(sock: trio.socket.SocketType) -> None:
    """Close with an RST instead of a FIN, as a crashed or reset peer would."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


async def send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    """Write all of data; a small message goes out in one send() call."""
    sent = await sock.send(data)
    if sent == len(data):
        return
    view = memoryview(data)
    while sent < len(view):
        sent += await sock.send(view[sent:])


def reason(status: int) -> bytes:
    """The standard reason phrase for a status code, or an empty one."""
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


def chunk(data: bytes) -> bytes:
    """Frame data as one chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def parse_head(head: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """Split a message head into its first line and lower-cased headers (repeats joined by ', ')."""
    lines = head.split(b"\r\n")
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise ProtocolError(f"malformed header line {line[:80]!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = headers[name] + b", " + value if name in headers else value
    return lines[0], headers


def is_chunked(headers: dict[bytes, bytes]) -> bool:
    """Whether the body uses chunked transfer encoding."""
    te = headers.get(b"transfer-encoding")
    return te is not None and b"chunked" in te.lower()


def content_length(headers: dict[bytes, bytes]) -> int:
    """The declared Content-Length, 0 when absent."""
    value = headers.get(b"content-length")
    if value is None:
        return 0
    try:
        length = int(value)
    except ValueError:
        raise ProtocolError(f"bad Content-Length {value!r}") from None
    if length < 0:
        raise ProtocolError(f"bad Content-Length {value!r}")
    return length


class Reader:
    """A receive buffer over one socket, read message by message."""

    __slots__ = ("sock", "buf")

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.buf = bytearray()

    async def fill(self) -> bool:
        """Receive more bytes into the buffer; False on end of stream."""
        data = await self.sock.recv(RECV_SIZE)
        if not data:
            return False
        self.buf += data
        return True

    async def read_head(self) -> bytes | None:
        """The next head without its blank line, or None if the peer closed between messages."""
        start = 0
        while True:
            end = self.buf.find(b"\r\n\r\n", start)
            if end >= 0:
                head = bytes(self.buf[:end])
                del self.buf[: end + 4]
                return head
            if len(self.buf) > MAX_HEAD:
                raise ProtocolError("head too large")
            start = max(0, len(self.buf) - 3)
            if not await self.fill():
                if self.buf:
                    raise PeerClosed("connection closed inside a head")
                return None

    async def read_exact(self, n: int) -> bytes:
        """Exactly n bytes."""
        while len(self.buf) < n:
            if not await self.fill():
                raise PeerClosed("connection closed inside a body")
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    async def read_line(self) -> bytes:
        """One CRLF-terminated line without its CRLF."""
        start = 0
        while True:
            end = self.buf.find(b"\r\n", start)
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[: end + 2]
                return line
            if len(self.buf) > MAX_LINE:
                raise ProtocolError("line too long")
            start = max(0, len(self.buf) - 1)
            if not await self.fill():
                raise PeerClosed("connection closed inside a chunked body")

    async def read_chunked(self) -> bytes:
        """A whole chunked body, decoded; trailers are read and dropped."""
        parts = []
        while True:
            size_line = await self.read_line()
            try:
                size = int(size_line.split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_line[:40]!r}") from None
            if size == 0:
                while await self.read_line():
                    pass
                return b"".join(parts)
            data = await self.read_exact(size + 2)
            parts.append(data[:-2])

    async def read_body(self, headers: dict[bytes, bytes]) -> bytes:
        """The body a request or a length-delimited response carries."""
        if is_chunked(headers):
            return await self.read_chunked()
        length = content_length(headers)
        return await self.read_exact(length) if length else b""


# --- a tiny server side, shared by the fakes: whole requests in, whole responses out ------------

JSON_TYPE = b"application/json"


class Request:
    """One parsed HTTP/1.1 request, body read in full; header names lower-cased."""

    __slots__ = ("method", "path", "headers", "body", "keep_alive")

    def __init__(self, method: bytes, path: bytes, headers: dict[bytes, bytes], body: bytes, keep_alive: bool) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


async def read_request(sock: trio.socket.SocketType, reader: Reader) -> Request | None:
    """The next request on a server connection, or None when the client closed it cleanly.

    Answers ``Expect: 100-continue`` itself; the query string is dropped from the path.
    """
    head = await reader.read_head()
    if head is None:
        return None
    line, headers = parse_head(head)
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise ProtocolError(f"bad request line {line[:80]!r}")
    method, target, version = parts
    if headers.get(b"expect", b"").lower() == b"100-continue":
        await send_all(sock, b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await reader.read_body(headers)
    connection = headers.get(b"connection", b"").lower()
    keep_alive = b"close" not in connection if version == b"HTTP/1.1" else b"keep-alive" in connection
    return Request(method, target.split(b"?", 1)[0], headers, body, keep_alive)


def response_bytes(
    status: int, body: bytes, keep_alive: bool, content_type: bytes = JSON_TYPE, extra_headers: bytes = b""
) -> bytes:
    """A whole length-delimited response, head and body, ready for a single send().

    extra_headers is inserted verbatim: complete ``Name: value\\r\\n`` lines.
    """
    close = b"" if keep_alive else b"Connection: close\r\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n%s" % (
        status, reason(status), content_type, len(body), extra_headers, close, body
    )


async def watch_peer(reader: Reader, scope: trio.CancelScope) -> None:
    """Cancel scope once the client closes or resets the connection; pipelined bytes are kept.

    Writes into the kernel buffer keep succeeding for a while after the peer left, so a
    server that must notice a departed client waits for its EOF in a sibling task.
    """
    try:
        while await reader.fill():
            pass
    except OSError:
        pass
    scope.cancel()


async def watched(reader: Reader, work: Awaitable[object]) -> bool:
    """Await work while watching for the client leaving; False if it left before work finished.

    A failed write (OSError) counts as the client leaving too. The write failing alone is
    not reliable: writes into the kernel buffer keep succeeding for a while after the peer
    closed, so a sibling task (``watch_peer``) waits for its EOF and cancels the work.
    """
    finished = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_peer, reader, nursery.cancel_scope)
        try:
            await work
            finished = True
        except OSError:
            pass
        nursery.cancel_scope.cancel()
    return finished


class Server(abc.ABC):
    """A keep-alive HTTP/1.1 server: one trio task per connection, requests answered in order.

    Subclasses answer requests in ``dispatch`` and word the 400 for a malformed one in
    ``bad_request``. Every socket gets TCP_NODELAY, so each single send() leaves at once.
    """

    async def serve(self, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; reports the bound port through task_status."""
        family = trio.socket.AF_INET6 if ":" in host else trio.socket.AF_INET
        listener = trio.socket.socket(family, trio.socket.SOCK_STREAM)
        with listener:
            listener.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
            await listener.bind((host, port))
            listener.listen(1024)
            task_status.started(listener.getsockname()[1])
            async with trio.open_nursery() as nursery:
                while True:
                    try:
                        sock, _ = await listener.accept()
                    except OSError:
                        # Out of descriptors or an aborted handshake: back off, keep serving.
                        await trio.sleep(0.01)
                        continue
                    nursery.start_soon(self.connection, sock)

    async def connection(self, sock: trio.socket.SocketType) -> None:
        """Serve one keep-alive connection until either side closes it."""
        set_nodelay(sock)
        reader = Reader(sock)
        try:
            while True:
                try:
                    request = await read_request(sock, reader)
                except PeerClosed:
                    return
                except ProtocolError as exc:
                    await send_all(sock, response_bytes(400, self.bad_request(str(exc)), False))
                    return
                if request is None or not await self.dispatch(sock, reader, request):
                    return
        except OSError:
            return  # the client reset the connection; nothing left to answer
        finally:
            sock.close()

    @abc.abstractmethod
    async def dispatch(self, sock: trio.socket.SocketType, reader: Reader, req: Request) -> bool:
        """Answer one request; returns whether the connection stays open."""

    @abc.abstractmethod
    def bad_request(self, message: str) -> bytes:
        """The JSON body of the 400 answered to a request this module cannot parse."""


async def serve_until_signal(server: Server, name: str, host: str, port: int) -> None:
    """Run server until SIGTERM or SIGINT, once bound printing ``NAME: listening on http://HOST:PORT`` to stderr."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(server.serve, host, port)
            shown = f"[{host}]" if ":" in host else host
            print(f"{name}: listening on http://{shown}:{bound}", file=sys.stderr, flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break
