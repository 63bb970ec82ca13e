"""One long-lived thread that runs blocking Redis calls for the trio loop.

redis-py blocks and redis.asyncio does not run under trio, so the limiter's
calls leave the loop here. A thread of its own, not ``trio.to_thread`` per call:
a request pays a queue put and one wake-up, not a thread hand-off each way.
Calls run in order; ``call`` waits at most ``timeout`` and then gives up on
the answer (the caller decides alone); ``submit`` never waits.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import trio

log = logging.getLogger("vsr_fast.auth")


class _Box:
    __slots__ = ("event", "result", "error")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def set(self, result: Any, error: BaseException | None) -> None:
        self.result, self.error = result, error
        self.event.set()


class CallTimedOut(Exception):
    pass


class Worker:
    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; called from the trio thread that will await its answers."""
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)

    def pending(self) -> int:
        return self._queue.qsize()

    async def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        box = _Box()
        self._queue.put((fn, args, box))
        with trio.move_on_after(timeout):
            await box.event.wait()
        if not box.event.is_set():
            raise CallTimedOut(f"{self._name}: no answer within {timeout * 1000:.0f} ms")
        if box.error is not None:
            raise box.error
        return box.result

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.put((fn, args, None))

    def _loop(self) -> None:
        token = self._token
        assert token is not None
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args, box = item
            try:
                result, error = fn(*args), None
            except Exception as exc:       # handed to the awaiting task, or logged for a submitted call
                result, error = None, exc
                if box is None:
                    log.debug("%s: %r", self._name, exc)
            if box is not None:
                try:
                    token.run_sync_soon(box.set, result, error)
                except trio.RunFinishedError:
                    return
