"""Lifetimes: the event stream, and the consumers it drives, as ``async with`` blocks (STYLE 10).

``open_event_stream`` starts the writer thread and yields the sink (for the
request path) and the source (for consumers); on exit it sends what it can
within the close timeout and keeps the rest on disk for the next start.

``open_event_services`` adds the consumers: the replay recorder, the cache
writer and, given the server's ``send``, the shadow dispatcher, each in its
own consumer group, each a task of the nursery it owns.

Spill directories. Each process takes the first free ``spill-<n>`` slot under
``path`` (an flock marks it taken, and the kernel drops it when the process
dies), so routers on one host never share a journal, and a restarted router
adopts a slot, with any events a previous process left in it. Then it adopts
every other slot no live process holds and that still has events in it (a
restart on fewer workers leaves some): one writer per adopted slot re-sends
its journal in order, each event once (the journal keeps the events' delivery
ids, see ``writer``), and lets the slot go once it is empty. Two processes
starting together cannot both adopt a slot: the one whose flock wins does.
The embedded stream lives in ``path/stream`` and allows one process (a second
one fails at start). Workers have one each (``<port>-w<n>``); a restart on
fewer workers leaves some unread, so worker 0 runs its consumers on those of
workers past the count too (``open_event_services(adopt=...)``), until every
group has acknowledged all of it: each entry at least once, as a consumer
restart gives it (see ``consumers``).
"""
from __future__ import annotations

import fcntl
import functools
import logging
import os
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..config.stores import EventStreamStore, Stores
from ..errors import ConfigError
from ..embeddings import Embedders
from .cache_store import cache_of
from ..plugins.router_replay import DISABLED, ReplayPolicy
from .cache_writer import CacheWriter
from .consumers import ConsumerStats, prometheus_lines, run_consumer
from .embedded import EmbeddedLog
from .recorder import ReplayRecorder
from .records import MemoryRecords, RedisRecords, ReplayRecords
from .redis_stream import RedisSource, RedisTransport
from .shadow import Send, ShadowDispatcher
from .source import StreamSource
from .writer import SPILL_JOURNAL, Borrowed, EventSink, Transport, spill_backlog

log = logging.getLogger("vsr_fast.events")
MAX_SLOTS = 64


@dataclass
class EventStream:
    sink: EventSink
    source: StreamSource
    config: EventStreamStore
    spill_dir: Path


def _lock_slot(path: Path) -> int | None:
    """The lock fd of slot ``path`` if no other process holds it (nor this one, through another fd), else None."""
    fd = os.open(path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _take_slot(base: Path, prefix: str) -> tuple[Path, int]:
    """The first ``<prefix>-<n>`` directory under ``base`` no other process holds, and its lock fd."""
    for n in range(MAX_SLOTS):
        path = base / f"{prefix}-{n}"
        path.mkdir(parents=True, exist_ok=True)
        fd = _lock_slot(path)
        if fd is not None:
            return path, fd
    raise ConfigError([f"global.stores.event_stream.path: {base}: every one of {MAX_SLOTS} spill slots is taken"])


def _orphaned_slots(base: Path, prefix: str) -> list[tuple[Path, int]]:
    """The ``<prefix>-<n>`` slots under ``base`` no live process holds, with events left in their journal, locked."""
    out = []
    for n in range(MAX_SLOTS):
        path = base / f"{prefix}-{n}"
        if not (path / SPILL_JOURNAL).is_file():
            continue
        fd = _lock_slot(path)
        if fd is None:
            continue
        if spill_backlog(path):
            out.append((path, fd))
        else:
            os.close(fd)
    return out


async def _drain_adopted(sink: EventSink, path: Path, fd: int) -> None:
    """Let ``sink`` re-send the journal of an adopted slot, then give the slot up; on cancel keep what is left."""
    try:
        while not sink.drained():
            await trio.sleep(0.05)
        log.info("event stream: adopted spill slot %s re-sent", path)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(sink.close)
            os.close(fd)


def _lock_embedded(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError([(f"global.stores.event_stream.path: {directory} is another router's embedded stream; "
                            "the embedded backend serves one process (use backend: redis for several)")]) from None
    return fd


@asynccontextmanager
async def open_event_stream(config: EventStreamStore, *, close_timeout_s: float = 5.0) -> AsyncIterator[EventStream]:
    """The event stream ``config`` describes, its writer thread running."""
    base = Path(config.path)
    locks: list[int] = []
    if config.backend == "redis":
        def new_transport() -> Transport:
            return RedisTransport(config.redis_url(), config.stream, maxlen=config.maxlen, max_age_s=config.max_age_s)
        transport = new_transport()
        source: StreamSource = RedisSource(config.redis_url(), config.stream)
        slots = base / config.stream.replace("/", "_").replace(":", "_")
    else:
        locks.append(_lock_embedded(base / "stream"))
        embedded = EmbeddedLog(base / "stream", maxlen=config.maxlen, max_age_s=config.max_age_s)
        transport, source = embedded, embedded  # type: ignore[assignment]
        slots = base

        def new_transport() -> Transport:
            # Thread-safe: one more writer thread is fine. Borrowed: the adopted slot's sink, let go once it
            # re-sent the slot, must not close the log this router keeps writing and reading.
            return Borrowed(embedded)
    spill, fd = _take_slot(slots, "spill")
    locks.append(fd)
    sink = EventSink(transport, spill, queue=config.queue, batch=config.batch,
                     spill_max_bytes=config.spill_max_bytes, close_timeout_s=close_timeout_s).start()
    try:
        async with trio.open_nursery() as nursery:
            for path, slot_fd in _orphaned_slots(slots, "spill"):
                adopted = EventSink(new_transport(), path, queue=config.queue, batch=config.batch,
                                    spill_max_bytes=config.spill_max_bytes, close_timeout_s=close_timeout_s,
                                    adopted=True)
                log.warning("event stream: adopted spill slot %s, left by a process no longer running: "
                            "%d event(s) to re-send", path, adopted.backlog_events())
                nursery.start_soon(_drain_adopted, adopted.start(), path, slot_fd)
            yield EventStream(sink, source, config, spill)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(sink.close)
            source.close()
            for lock in locks:
                os.close(lock)


@dataclass
class EventServices:
    """What the server holds while it runs: the sink, the records, the cache and the consumers' counters."""

    stream: EventStream
    records: ReplayRecords
    cache: ResponseCache
    cache_writer: CacheWriter
    shadow: ShadowDispatcher | None = None
    consumer_stats: list[ConsumerStats] = field(default_factory=list)

    @property
    def sink(self) -> EventSink:
        return self.stream.sink

    def prometheus_lines(self) -> list[str]:
        """Every events series, for /metrics."""
        lines = self.sink.prometheus_lines() + prometheus_lines(self.consumer_stats)
        lines += self.cache_writer.prometheus_lines()
        lines += ["# HELP vsr_replay_unreadable_total Stored replay fields skipped unread (an event, a summary's "
                  "number), at each read that met one.", "# TYPE vsr_replay_unreadable_total counter",
                  f"vsr_replay_unreadable_total {self.records.backend.unreadable}"]
        if self.shadow is not None:
            lines += self.shadow.prometheus_lines()
        return lines


def open_records(config: EventStreamStore, policy: ReplayPolicy) -> ReplayRecords:
    """Records beside the stream: in Redis under ``<stream>:replay:``, or in memory for the embedded stream."""
    if config.backend == "redis":
        return ReplayRecords(RedisRecords(config.redis_url(), f"{config.stream}:replay:", max_records=policy.max_records,
                                          ttl_seconds=policy.ttl_seconds))
    return ReplayRecords(MemoryRecords(max_records=policy.max_records, ttl_seconds=policy.ttl_seconds))


@asynccontextmanager
async def open_event_services(stores: Stores, *, replay: ReplayPolicy = DISABLED, send_shadow: Send | None = None,
                              consumer_name: str | None = None, close_timeout_s: float = 5.0,
                              record: bool = True, cache_writes: bool = True,
                              embedders: Embedders | None = None,
                              adopt: Sequence[Path] = ()) -> AsyncIterator[EventServices]:
    """The event stream and its consumers for a running router.

    ``replay``: the global router_replay policy (its ``max_records`` and
    ``ttl_seconds`` bound the record store). ``send_shadow``: the server's
    upstream call for shadow copies; without it no copy is sent.
    ``consumer_name``: this process's name in each group, stable across
    restarts if possible (host and worker index); by default host and pid, and
    a dead process's unacknowledged entries are claimed after a minute.
    ``record`` / ``cache_writes``: run the replay recorder / cache writer; a
    configuration with no router_replay / response_cache entry needs neither,
    and each consumer reads every event (measured: ~1 ms of CPU a request).
    ``embedders``: the catalog's embedding deployments; the semantic cache embeds with its store's.
    ``adopt``: embedded event directories of workers no longer run (a restart on fewer): the consumers read
    each one's stream too, until every group has finished it (``_drain_embedded``).
    """
    name = consumer_name or f"{socket.gethostname()}-{os.getpid()}"
    async with open_event_stream(stores.event_stream, close_timeout_s=close_timeout_s) as stream:
        records = open_records(stores.event_stream, replay)
        cache = cache_of(stores, embedders)
        try:
            async with trio.open_nursery() as nursery:
                services = EventServices(stream, records, cache, CacheWriter(cache, stream.sink))
                consumers: list = ([ReplayRecorder(records)] if record else []) + \
                    ([services.cache_writer] if cache_writes else [])
                if cache_writes:
                    # The answers of requests whose personal data the stream must not carry (``CacheWriter``).
                    nursery.start_soon(services.cache_writer.run)
                if send_shadow is not None:
                    services.shadow = ShadowDispatcher(send_shadow, stream.sink, nursery)
                    consumers.append(services.shadow)
                for consumer in consumers:
                    stats = ConsumerStats(consumer.group)
                    services.consumer_stats.append(stats)
                    # Not awaited: a store that is down at start must not hold the router's start.
                    nursery.start_soon(_run, stream.source, consumer, name, stats)
                for directory in adopt:
                    nursery.start_soon(_drain_embedded, directory, stores.event_stream, consumers, name,
                                       close_timeout_s)
                yield services
                nursery.cancel_scope.cancel()
        finally:
            records.close()
            cache.close()


async def _run(source: StreamSource, consumer, name: str, stats: ConsumerStats) -> None:
    await run_consumer(source, consumer, name=name, stats=stats)


async def _drain_embedded(directory: Path, config: EventStreamStore, consumers: list, name: str,
                          close_timeout_s: float) -> None:
    """Run ``consumers`` on the embedded stream in ``directory``, left by a worker no longer run, until each group
    has acknowledged all of it (its spilled events first appended to it), then let it go. Skipped when a live
    process holds it; on cancel, what is left waits for the next start."""
    if not (directory / "stream").is_dir():
        return
    try:
        fd = _lock_embedded(directory / "stream")
    except ConfigError:
        return
    try:
        # Opening reads the frames after the saved marks, and a corrupt stretch is scanned: off the loop.
        orphan = await trio.to_thread.run_sync(functools.partial(
            EmbeddedLog, directory / "stream", maxlen=config.maxlen, max_age_s=config.max_age_s))
    except OSError as exc:      # an unreadable leftover must not stop the router that found it
        os.close(fd)
        log.error("event stream: cannot read %s, a worker's embedded stream no longer run: %r", directory, exc)
        return
    try:
        groups = [c.group for c in consumers]
        for group in groups:
            orphan.ensure_group(group, "0")
        slots = _orphaned_slots(directory, "spill")
        unread = await trio.to_thread.run_sync(lambda: max((orphan.unread(g) for g in groups), default=0))
        if not unread and not slots:
            return
        log.warning("event stream: adopted %s, a worker's embedded stream no longer run: %d unread event(s)%s",
                    directory, unread, f", {len(slots)} spill slot(s)" if slots else "")
        async with trio.open_nursery() as nursery:
            for path, slot_fd in slots:
                sink = EventSink(Borrowed(orphan), path, queue=config.queue, batch=config.batch,
                                 spill_max_bytes=config.spill_max_bytes, close_timeout_s=close_timeout_s,
                                 adopted=True)
                nursery.start_soon(_drain_adopted, sink.start(), path, slot_fd)
            for consumer in consumers:
                nursery.start_soon(_run, orphan, consumer, name, ConsumerStats(consumer.group))
            def pending() -> bool:
                # Files to stat and read, and the log's lock its writers hold while they append: off the loop.
                return any(spill_backlog(path) for path, _ in slots) or not orphan.caught_up(groups)

            while await trio.to_thread.run_sync(pending):
                await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        log.info("event stream: %s read by every consumer group", directory)
    finally:
        orphan.close()
        os.close(fd)


__all__ = ["EventServices", "EventStream", "open_event_services", "open_event_stream", "open_records"]
