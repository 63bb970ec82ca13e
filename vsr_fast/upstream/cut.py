"""Attempts a cancellation cut: the request's deadline, an executor's budget, a client that left, a panel that
had its quorum. Such an attempt raised no error of its own (trio's Cancelled unwinds past every caller), yet it
was started, may have been billed, and the record must say so: every started attempt gets its
``upstream_attempt`` event, with ``deadline`` (a deadline passed) or ``cancelled`` (anything else) as its outcome.

The dispatcher records the cut attempt on the call's list and, as Cancelled leaves the call, puts the call's
attempts on the request's ``LEFT`` list (set by the pipeline for its task and the tasks it starts, as
``billing.BILLING`` is); whoever caught the cancellation (the pipeline's deadline, the Looper's budget) ``taken``
them and records them with the rest.
"""
from __future__ import annotations

from contextvars import ContextVar

import trio

DEADLINE, CANCELLED = "deadline", "cancelled"
CAUSES = frozenset({DEADLINE, CANCELLED})       # not a backend's failure: no error counted, no health moved

LEFT: ContextVar[list | None] = ContextVar("vsr_upstream_left", default=None)


def cause(deadline: float) -> str:
    """Why the running attempt is being cancelled: the ``deadline`` it ran under (read before the cancellation:
    inside a cancelled scope trio reads -inf) passed, or something else did it."""
    return DEADLINE if trio.current_time() >= deadline else CANCELLED


def of(cause: str | None) -> bool:
    """Whether an attempt's ``cause`` is a cancellation's (a stream's cut after its first event too)."""
    return cause in CAUSES


def left(attempts: list) -> None:
    """A call's attempts, which a cancellation kept from reaching its caller, for the request to record."""
    sink = LEFT.get()
    if sink is not None and attempts:
        sink.extend(a for a in attempts if not any(a is b for b in sink))


def taken() -> list:
    """The attempts left since the last call, removed from the request's list."""
    sink = LEFT.get()
    if not sink:
        return []
    out = list(sink)
    sink.clear()
    return out
