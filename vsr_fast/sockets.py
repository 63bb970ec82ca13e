"""Socket writes sent at once, without a pass of trio's scheduler, when the socket takes them.

trio's ``SocketStream.send_all`` gives up the task's turn after every send that succeeds
(``cancel_shielded_checkpoint``): the run loop goes round once (an epoll wait, every other runnable task)
though nothing was waited for. A proxy's writes are small and a socket's buffer nearly always takes them
whole, so the first send is made here at once on the stream's own socket; only what the socket did not
take goes through ``send_all``, with its wait, its checkpoints and its errors in trio's terms.
"""
from __future__ import annotations

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
