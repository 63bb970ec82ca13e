"""Whether a backend may have billed a request it never finished answering: an attempt cut after its bytes left
for the backend (the client left or the deadline passed while it read or answered, its connection broke or timed
out, its 2xx answer broke off) with no error status back. The provider bills its prompt. A connection refused, a
TLS or connect error, or an error status (a provider bills no 4xx or 5xx) is not such an attempt.

The request's meter (``BILLING``, set by the pipeline for its task and the tasks it starts) is told of each; the
socket tells the attempt when its request leaves (``SENDING``, set by the dispatcher around one attempt).
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class Meter(Protocol):
    def cut(self) -> None:
        """An attempt was cut after its request reached a backend: its prompt may be billed."""


class Sending:
    """One attempt: whether its request's bytes left for the backend."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


BILLING: ContextVar[Meter | None] = ContextVar("vsr_upstream_billing", default=None)
SENDING: ContextVar[Sending | None] = ContextVar("vsr_upstream_sending", default=None)


def cut() -> None:
    """Tell the request's meter, if it has one, that an attempt was cut after its request reached a backend."""
    meter = BILLING.get()
    if meter is not None:
        meter.cut()
