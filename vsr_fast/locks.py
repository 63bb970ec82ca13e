"""Locks taken without a pass of trio's scheduler when they are free.

trio's ``Lock.acquire`` checkpoints even when the lock is free: the task gives up its turn and the run loop goes
round once (an epoll wait, every other runnable task) for nothing to wait on. hypercorn takes its connection's
send lock for every write, httpcore its connection's locks twice or three times a request; on a proxy's
connections, used by one request at a time, they are free nearly always. Both take them here: at once when free,
in line (FIFO, cancellable) when not. A task already cancelled still stops here
(``checkpoint_if_cancelled``: a flag test, no pass of the scheduler), as at trio's own acquire.
"""
from __future__ import annotations

import trio

try:  # httpcore's own lock type, whose trio lock is swapped for a FreeLock (see quiet)
    from httpcore._synchronization import AsyncLock as _HttpcoreLock
except ImportError:  # pragma: no cover - a layout httpcore no longer has: its locks stay as they are
    _HttpcoreLock = None


async def acquire(lock: trio.Lock) -> None:
    """Take ``lock``: at once when it is free, in line behind its holder and earlier waiters when not; Cancelled,
    before taking it, in a cancelled scope."""
    await trio.lowlevel.checkpoint_if_cancelled()
    if lock.locked():
        await lock.acquire()
    else:
        lock.acquire_nowait()


class FreeLock:
    """A trio lock with ``acquire`` as above: what httpcore's ``AsyncLock`` calls on its trio lock."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = trio.Lock()

    async def acquire(self) -> None:
        await acquire(self._lock)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


def quiet(lock: object) -> bool:
    """Give an httpcore ``AsyncLock`` not used yet a FreeLock; whether it now has one (False: left as it was)."""
    if _HttpcoreLock is None or not isinstance(lock, _HttpcoreLock):
        return False
    if getattr(lock, "_backend", None) == "":       # set up on first use, from the running library
        lock._backend = "trio"
        lock._trio_lock = FreeLock()
    return isinstance(getattr(lock, "_trio_lock", None), FreeLock)
