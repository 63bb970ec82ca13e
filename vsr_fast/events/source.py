"""Reading the event stream: entries, consumer groups, and the one error a reader expects.

Both backends (``redis_stream.RedisSource``, ``embedded.EmbeddedLog``) answer
this protocol. Every method blocks: the trio side runs them in worker threads.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

import msgspec

from ..errors import StoreUnavailable
from .types import Event, decode_event


class Entry(NamedTuple):
    """One stream entry. ``event`` is None for an entry that could not be decoded, or was trimmed."""

    id: str
    event: Event | None
    payload: bytes | None


def entry(entry_id: str, payload: bytes | None) -> Entry:
    if payload is None:
        return Entry(entry_id, None, None)
    try:
        return Entry(entry_id, decode_event(payload), payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Entry(entry_id, None, payload)


class StreamSource(Protocol):
    def ensure_group(self, group: str, start: str = "0") -> None:
        """Create the consumer group if it does not exist: from the stream's start (``"0"``) or its end (``"$"``)."""
        ...

    def reset_consumer(self, group: str, consumer: str) -> None:
        """A consumer (re)starts: deliver its unacknowledged entries again."""
        ...

    def read(self, group: str, consumer: str, count: int, block_ms: int, after: str | None = None) -> list[Entry]:
        """New entries for the group (``after`` None), or the consumer's own unacknowledged ones after ``after``."""
        ...

    def claim(self, group: str, consumer: str, min_idle_ms: int, count: int) -> list[Entry]:
        """Entries other consumers of the group took and left unacknowledged for ``min_idle_ms``."""
        ...

    def ack(self, group: str, ids: list[str]) -> None:
        ...

    def range(self, start: str | None, end: str | None, count: int) -> list[Entry]:
        """Entries after ``start`` (exclusive; None: the first) up to ``end`` (inclusive; None: the last)."""
        ...

    def length(self) -> int:
        ...

    def close(self) -> None:
        ...


__all__ = ["Entry", "StoreUnavailable", "StreamSource", "entry"]
