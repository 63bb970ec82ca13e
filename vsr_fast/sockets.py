"""Socket writes sent at once, without a pass of trio's scheduler, when the socket takes them; reads that wait
first when nothing can have come yet.

trio's ``SocketStream.send_all`` gives up the task's turn after every send that succeeds
(``cancel_shielded_checkpoint``): the run loop goes round once (an epoll wait, every other runnable task)
though nothing was waited for. A proxy's writes are small and a socket's buffer nearly always takes them
whole, so the first send is made here at once on the stream's own socket; only what the socket did not
take goes through ``send_all``, with its wait, its checkpoints and its errors in trio's terms.

trio's ``receive_some`` tries a read first, and waits only once it failed; right after a request went out its
answer cannot be there yet, so that read is a syscall and a raised EAGAIN for nothing, under two context managers
(its error translation, its try-at-once). ``receive_some`` here is trio's on the stream's own socket, the same
checkpoints and errors, waiting first when told.
"""
from __future__ import annotations

import errno

import trio


def send_now(stream: trio.abc.SendStream, data: bytes) -> int:
    """How many of ``data``'s bytes a plain TCP stream's socket took at once; 0 when it would block, failed
    (``send_all`` then meets the failure again and raises it as trio does) or is not a plain socket (TLS)."""
    if type(stream) is not trio.SocketStream:
        return 0
    sock = getattr(stream.socket, "_sock", None)     # the stdlib socket under trio's; non-blocking
    if sock is None:
        return 0
    try:
        return sock.send(data)
    except OSError:         # BlockingIOError included
        return 0


# trio's ``_closed_stream_errnos``: a read on a socket closed under it is ClosedResourceError, not BrokenResourceError.
_CLOSED_ERRNOS = frozenset({errno.EBADF, errno.ENOTSOCK})


async def receive_some(stream: trio.abc.ReceiveStream, max_bytes: int, wait_first: bool = False) -> bytes:
    """``stream.receive_some(max_bytes)``, on a plain TCP stream's own socket: a read at once that succeeds gives
    the scheduler its pass after it, as trio's does; ``wait_first``: nothing can have come yet (a request just
    sent), so the wait, itself the checkpoint, comes before any read. Any other stream is its own."""
    sock = getattr(stream.socket, "_sock", None) if type(stream) is trio.SocketStream else None
    if sock is None or max_bytes < 1:
        return await stream.receive_some(max_bytes)
    try:
        if not wait_first or sock.fileno() < 0:     # closed: the read says so, as trio's does
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                data = sock.recv(max_bytes)
            except BlockingIOError:
                pass
            except OSError:         # trio's ``_try_sync``: a read at once, done or failed, then the pass
                await trio.lowlevel.cancel_shielded_checkpoint()
                raise
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return data
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                return sock.recv(max_bytes)
            except BlockingIOError:
                pass
    except OSError as exc:      # trio's ``_translate_socket_errors_to_stream_errors``
        if exc.errno in _CLOSED_ERRNOS:
            raise trio.ClosedResourceError("this socket was already closed") from None
        raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
