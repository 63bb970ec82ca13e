"""The upstream socket as httpcore sees it: a request's writes leave together when its answer is first read.

httpcore sends a request's head and its body in two writes, two syscalls and two scheduler passes, each
write and each read under two generator-based context managers (its exception map and ``trio.fail_after``).
Here the writes are held and sent in one send (``sockets.send_now``) just before the first read of the
answer (httpcore always reads next), and each timeout is a cancel scope with a deadline. What httpcore sees
is the same: its timeouts and errors, and a write that fails is not raised, as httpcore itself drops a request's write
error to read an answer the server may have sent before it closed.
"""
from __future__ import annotations

import math
import ssl

import httpcore
import trio
from httpcore._backends.trio import TrioBackend, TrioStream

from ..sockets import receive_some, send_now
from .billing import SENDING

# Held writes up to this size are joined into one send; a larger body is sent as it came, with no copy.
JOIN_MAX_BYTES = 64 << 10


class StaleConnection(httpcore.ReadError):
    """A reused connection closed or reset with nothing of the request's answer read: the backend dropped it
    while idle (its keep-alive timeout) as the request was sent, so the request is safe to send again."""


def _deadline(timeout: float | None) -> float:
    return math.inf if timeout is None else trio.current_time() + timeout


class Stream(TrioStream):
    """httpcore's trio stream, writing on the first read after them."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        super().__init__(stream)
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._write_timeout: float | None = None
        self._sent = 0              # requests sent on this connection
        self._answered = False      # a byte of the last one's answer arrived

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._held.append(buffer)
            self._held_bytes += len(buffer)
            self._write_timeout = timeout

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        sent = bool(self._held)
        if sent:
            await self._flush()
        with trio.CancelScope(deadline=_deadline(timeout)):
            try:
                # Just sent, its answer is not there yet: waited for before any read (sockets.receive_some).
                data = await receive_some(self._stream, max_bytes, wait_first=sent)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                if self._sent > 1 and not self._answered:
                    raise StaleConnection(exc) from exc
                raise httpcore.ReadError(exc) from exc
            if data:
                self._answered = True
            elif self._sent > 1 and not self._answered:
                raise StaleConnection("closed before answering")
            return data
        raise httpcore.ReadTimeout(f"no answer bytes within {timeout} s")

    async def _flush(self) -> None:
        self._sent += 1
        self._answered = False
        held, self._held = self._held, []
        size, self._held_bytes = self._held_bytes, 0
        parts = [b"".join(held)] if len(held) > 1 and size <= JOIN_MAX_BYTES else held
        await trio.lowlevel.checkpoint_if_cancelled()      # a request already cancelled is not sent
        sending = SENDING.get()
        if sending is not None:
            sending.sent = True     # from here the backend may read it, and bill it
        sent = send_now(self._stream, parts[0]) if len(parts) == 1 else 0
        if sent == size:
            return      # taken whole at once: no deadline needed, no scheduler pass
        if sent:
            parts = [memoryview(parts[0])[sent:]]       # what the socket took is never sent again
        with trio.CancelScope(deadline=_deadline(self._write_timeout)):
            try:
                for part in parts:
                    await self._stream.send_all(part)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass        # read what the server answered before it closed, or fail there
            return
        raise httpcore.WriteTimeout(f"the request was not sent within {self._write_timeout} s")

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        tls = await super().start_tls(ssl_context, server_hostname, timeout)
        return Stream(tls._stream)


class Backend(TrioBackend):
    """httpcore's trio backend, whose TCP streams are ``Stream``s."""

    async def connect_tcp(self, *args, **kwargs) -> httpcore.AsyncNetworkStream:
        stream = await super().connect_tcp(*args, **kwargs)
        return Stream(stream._stream)
