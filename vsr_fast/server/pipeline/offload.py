"""Body-sized work off the trio loop: a big body's steps run in a worker thread.

Decoding, the signals over its texts and tools, the response cache's canonical request and the replay copy
(``record``), the translation or re-encoding for a backend (``upstream``), the shaping plugins and masking
each cost time in proportion to the body (a 2 MB body of 16,000 tools: ~0.4 s of them), and on the loop
every other request of the process waits that long, /health included. Past ``OFF_LOOP_BYTES`` they run in
a worker thread, where the interpreter hands the GIL back to the loop every switch interval (5 ms) between
Python steps. msgspec holds the GIL for a whole decode or encode, so one C call still stalls the loop:
``decode_body``'s bound on a body's items (``MAX_JSON_ITEMS``) caps that. Below the threshold the work
stays in line: a hop costs ~180 µs of wall time here (measured), a 16 KiB body's decode and canonical form
~30 µs, a 256 KiB body's ~2.6 ms.

``LIMITER`` holds the threads to two: a flood of big bodies waits its turn (within each request's deadline)
instead of taking every worker thread, which the Redis and file calls also use.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import trio

from ...offloop import OFF_LOOP_BYTES, OFF_LOOP_LIMITER

if TYPE_CHECKING:
    from ...metrics import Metrics

T = TypeVar("T")

LIMITER = OFF_LOOP_LIMITER


async def off_loop(metrics: Metrics, step: str, size: int, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, a request's ``step`` over ``size`` bytes: in line under ``OFF_LOOP_BYTES``, in a worker
    thread otherwise (counted in ``metrics``' ``vsr_off_loop_steps_total``)."""
    if size < OFF_LOOP_BYTES:
        return fn(*args)
    metrics.off_loop.inc(step)
    return await trio.to_thread.run_sync(fn, *args, limiter=LIMITER)


def signals_runner(metrics: Metrics, size: int) -> Callable[[Callable[[], T]], Awaitable[T]] | None:
    """What runs the routing's canonical form and heuristics for a body of ``size`` bytes (the routing table's
    ``run``): None, in line, under ``OFF_LOOP_BYTES``."""
    if size < OFF_LOOP_BYTES:
        return None
    return lambda heuristics: off_loop(metrics, "signals", size, heuristics)


__all__ = ["LIMITER", "OFF_LOOP_BYTES", "off_loop", "signals_runner"]
