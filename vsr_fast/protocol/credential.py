"""The requesting user's delegated credential (spec 6.7), for the System One calls made for their request.

The edge validates it and sets it on the request task's context before
routing; trio copies a task's context into the tasks it starts, so every
System One call made for that request (signals, tools, guard, masking) reads
it there, and no call made for another request or on the router's own behalf
(a start-time check, a background task) can. Only a delegated deployment's
runner reads it, to send it under that deployment's header; nothing else
sees it, so it never reaches a log, trace, replay record or cache key.
"""
from __future__ import annotations

from contextvars import ContextVar

DELEGATED: ContextVar[str | None] = ContextVar("vsr_delegated_credential", default=None)
