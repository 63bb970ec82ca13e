"""A backend's connections, lent per pool shard: a request takes one before it is sent and gives it back when its
answer is closed, so httpcore's pools never hold a queue.

httpcore's pool matches its waiting requests against its connections (polling each idle one) whenever a request
arrives or an answer closes: at concurrency 64 in front of a backend of 2 x 8 connections that was ~200
connection checks and ~16 poll() calls a request (bench/RESULTS.md, issue 14). Waiting here is one deque entry
and one event; the shard with the most connections free serves next, so long streams on one shard do not hold
back the others.
"""
from __future__ import annotations

from collections import deque
from typing import Protocol

import httpcore
import trio


class _Waiter:
    __slots__ = ("event", "gone", "shard")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.shard = -1         # the shard handed over, once one is
        self.gone = False       # stopped waiting (timeout, cancel): skipped by give_back


class Shards:
    """How many connections of each shard are free, and who waits for one, first come first served."""

    __slots__ = ("_free", "_queue")

    def __init__(self, shards: int, connections: int) -> None:
        self._free = [connections] * shards
        self._queue: deque[_Waiter] = deque()

    def take(self) -> int:
        """The shard with the most connections free, one of them taken; -1 when none is free or others wait."""
        queue = self._queue
        while queue and queue[0].gone:
            queue.popleft()
        free = self._free
        most = max(free)            # two passes in C: cheaper than one in Python over 32 shards
        if most == 0 or queue:
            return -1
        best = free.index(most)
        free[best] -= 1
        return best

    async def wait(self, timeout_s: float) -> int:
        """A shard whose connection was given back to this waiter; httpcore.PoolTimeout after ``timeout_s``."""
        waiter = _Waiter()
        self._queue.append(waiter)
        try:
            with trio.move_on_after(timeout_s):
                await waiter.event.wait()
        except BaseException:
            self._leave(waiter)
            raise
        if waiter.shard < 0:
            self._leave(waiter)
            raise httpcore.PoolTimeout(f"no connection was free within {timeout_s:g} s")
        return waiter.shard

    def give_back(self, shard: int) -> None:
        """One connection of ``shard`` is free again: to the first waiter still waiting, else to the shard."""
        queue = self._queue
        while queue:
            waiter = queue.popleft()
            if not waiter.gone:
                waiter.shard = shard
                waiter.event.set()
                return
        self._free[shard] += 1

    def _leave(self, waiter: _Waiter) -> None:
        waiter.gone = True
        if waiter.shard >= 0:       # handed a connection in the same instant it stopped waiting: pass it on
            shard, waiter.shard = waiter.shard, -1
            self.give_back(shard)

    def free(self) -> list[int]:
        return list(self._free)


class Holder(Protocol):
    def returned(self, shard: int) -> None: ...


class Lease:
    """One request's connection of one shard, from before its send until its answer is closed; released once."""

    __slots__ = ("_holder", "shard")

    def __init__(self, holder: Holder, shard: int) -> None:
        self._holder: Holder | None = holder
        self.shard = shard

    def release(self) -> None:
        holder, self._holder = self._holder, None
        if holder is not None:
            holder.returned(self.shard)
