"""The replay recorder: keeps each request's events as its Router Replay record."""
from __future__ import annotations

from .replay_record import for_record
from .consumers import Acks
from .records import ReplayRecords
from .source import Entry


class ReplayRecorder:
    """Consumer group ``replay-recorder``: the events of requests router_replay records, as the policy allows."""

    group = "replay-recorder"

    def __init__(self, records: ReplayRecords) -> None:
        self.records = records

    async def handle(self, entries: list[Entry], acks: Acks) -> None:
        kept = [for_record(e.event) for e in entries if e.event is not None and e.event.replay]
        if kept:
            await self.records.add(kept)
        acks.done(*(e.id for e in entries))


__all__ = ["ReplayRecorder"]
