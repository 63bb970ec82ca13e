"""Running a consumer: one trio task per consumer group, reading and acking in worker threads.

A consumer (the replay recorder, the cache writer, the shadow dispatcher)
gets batches of entries and marks each one done on ``Acks`` when its work is
finished, now or later; the runner acknowledges them to the store. On start a
consumer first reads again what it was given and never acknowledged (a
restart after a kill), then new entries. Acknowledged work is never
delivered again; unacknowledged work is, at least once.

redis-py blocks, so every store call runs in a worker thread and the trio
loop never waits on a socket. A call abandoned by cancellation may still
complete in its thread; what it delivered stays unacknowledged and comes
back on the next start.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import trio

from .source import Entry, StoreUnavailable, StreamSource

log = logging.getLogger("vsr_fast.events")
T = TypeVar("T")


class Acks:
    """The entry ids a consumer has finished, waiting to be acknowledged."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[str, None] = {}

    def done(self, *ids: str) -> None:
        for i in ids:
            self._ids[i] = None

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self._ids

    def take(self) -> list[str]:
        ids, self._ids = list(self._ids), {}
        return ids


class Consumer(Protocol):
    group: str

    async def handle(self, entries: list[Entry], acks: Acks) -> None:
        """Process decoded entries; ``acks.done(id)`` each one finished (may be later, from another task)."""
        ...


@dataclass
class ConsumerStats:
    group: str
    delivered: int = 0
    redelivered: int = 0    # unacknowledged entries read again after a restart, or claimed from a dead consumer
    acked: int = 0
    undecodable: int = 0    # acknowledged unread: not an event this version knows, or trimmed
    errors: int = 0         # handler failures (the batch is retried)
    failed: int = 0         # entries given up after ``retries`` failures, acknowledged
    unavailable: int = 0    # store calls that found the store down


async def store_call(fn: Callable[..., T], *args: object, stats: ConsumerStats | None = None) -> T:
    """``fn(*args)`` in a worker thread, retried with backoff while the store is unavailable."""
    backoff = 0.1
    while True:
        try:
            return await trio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=True)
        except StoreUnavailable as exc:
            if stats is not None:
                stats.unavailable += 1
                if stats.unavailable & (stats.unavailable - 1) == 0:
                    log.warning("consumer %s: %s; retrying", stats.group, exc)
            await trio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)


async def run_consumer(source: StreamSource, consumer: Consumer, *, name: str, stats: ConsumerStats | None = None,
                       batch: int = 128, block_ms: int = 500, claim_idle_ms: int = 60_000, retries: int = 3,
                       task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Feed ``consumer`` from its group until cancelled. ``name`` should survive restarts (its pending entries)."""
    group = consumer.group
    st = stats or ConsumerStats(group)
    acks = Acks()
    await store_call(source.ensure_group, group, "0", stats=st)
    await store_call(source.reset_consumer, group, name, stats=st)
    task_status.started()
    after: str | None = "0"                 # first: our own unacknowledged entries
    next_claim = trio.current_time() + claim_idle_ms / 1000
    try:
        while True:
            if after is not None:
                entries = await store_call(source.read, group, name, batch, 0, after, stats=st)
                if not entries:
                    after = None
                    continue
                after = entries[-1].id
                st.redelivered += len(entries)
            elif trio.current_time() >= next_claim:
                next_claim = trio.current_time() + claim_idle_ms / 1000
                entries = await store_call(source.claim, group, name, claim_idle_ms, batch, stats=st)
                st.redelivered += len(entries)
            else:
                entries = await store_call(source.read, group, name, batch, block_ms, None, stats=st)
            if entries:
                st.delivered += len(entries)
                await _process(consumer, entries, acks, st, retries)
            await _flush(source, group, acks, st)
    finally:
        # What was finished is acknowledged if the store answers quickly; otherwise it comes back once more.
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            await _flush(source, group, acks, st)


async def _process(consumer: Consumer, entries: list[Entry], acks: Acks, st: ConsumerStats, retries: int) -> None:
    dead = [e.id for e in entries if e.event is None]
    if dead:
        st.undecodable += len(dead)
        log.warning("consumer %s: %d entries are not events this router reads; acknowledged", consumer.group, len(dead))
        acks.done(*dead)
    live = [e for e in entries if e.event is not None]
    failures = 0
    while live:
        try:
            await consumer.handle(live, acks)
            return
        except StoreUnavailable as exc:        # not the batch's fault: wait for the store
            st.unavailable += 1
            log.warning("consumer %s: %s; retrying the batch", consumer.group, exc)
            await trio.sleep(0.5)
        except Exception:  # a background worker's edge: one bad batch must not stop the group (never Cancelled)
            failures += 1
            st.errors += 1
            log.exception("consumer %s failed on a batch of %d (try %d of %d)",
                          consumer.group, len(live), failures, retries + 1)
            if failures > retries:
                st.failed += len(live)
                acks.done(*(e.id for e in live))
                return
            await trio.sleep(0.1 * failures)
        live = [e for e in live if e.id not in acks]   # what a failed try finished is not done twice


async def _flush(source: StreamSource, group: str, acks: Acks, st: ConsumerStats) -> None:
    ids = acks.take()
    if ids:
        await store_call(source.ack, group, ids, stats=st)
        st.acked += len(ids)


def prometheus_lines(all_stats: list[ConsumerStats]) -> list[str]:
    out: list[str] = []
    for attr, doc in (
        ("delivered", "Entries delivered to the consumer group."),
        ("redelivered", "Unacknowledged entries delivered again (restart or claim)."),
        ("acked", "Entries the consumer group acknowledged."),
        ("undecodable", "Entries acknowledged unread: unknown event schema, or trimmed."),
        ("errors", "Batches the consumer failed on (retried)."),
        ("failed", "Entries given up on after repeated failures."),
        ("unavailable", "Store calls that found the event store unavailable."),
    ):
        name = f"vsr_events_consumer_{attr}_total"
        out += [f"# HELP {name} {doc}", f"# TYPE {name} counter"]
        out += [f'{name}{{group="{s.group}"}} {getattr(s, attr)}' for s in all_stats]
    return out


__all__ = ["Acks", "Consumer", "ConsumerStats", "prometheus_lines", "run_consumer", "store_call"]
