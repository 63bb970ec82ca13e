"""The cache writer: stores the answers response_cache may reuse, and says why it skipped the others."""
from __future__ import annotations

import collections
import logging

import trio

from .redis_client import errors as redis_errors
from .cache_store import SKIP_REASONS, ResponseCache, answer_of, calls_tool, skip_reason
from .consumers import Acks
from .source import Entry, StoreUnavailable
from .types import AnswerCompleted, CacheWritten, Event, now_ms
from .writer import EventSink

log = logging.getLogger("vsr_fast.response_cache")


class CacheWriter:
    """Stores the answers that carry a cache intent, unless ``skip_reason`` objects; two ways in, one set of counters.

    - Consumer group ``cache-writer`` (``handle``): the answers the event stream carries.
    - ``submit``, then ``run``: answers handed over in this process, off the request path, by a router with no
      event stream and, with one, for a request whose personal data the stream must not carry
      (``server.recording``: router_replay ``capture_personal_data: false``, or a decision that masks). A bounded
      channel, not durable: past ``depth`` answers in flight the newest is not stored (counted, logged).

    Each outcome is appended to the stream as a ``cache_write`` event (the replay record shows it: a key and a
    verdict, no text) when a sink is given.
    """

    group = "cache-writer"

    def __init__(self, cache: ResponseCache, sink: EventSink | None = None, depth: int = 1024) -> None:
        self.cache = cache
        self.sink = sink
        self.stored = 0
        self.skipped: collections.Counter[str] = collections.Counter()
        self._send, self._receive = trio.open_memory_channel[AnswerCompleted](depth)
        self.dropped = 0

    async def handle(self, entries: list[Entry], acks: Acks) -> None:
        items = []
        similar: list[tuple[str, str, str, int]] = []
        notes: list[Event] = []
        skipped: collections.Counter[str] = collections.Counter()
        for e in entries:
            ev = e.event
            if not isinstance(ev, AnswerCompleted) or ev.cache is None:
                continue
            reason = skip_reason(ev, self.cache.max_entry_bytes)
            if reason is None:
                items.append((ev.cache.key, answer_of(ev), ev.cache.ttl_seconds))
                similar += _similar(ev)
            else:
                skipped[reason] += 1
            notes.append(_note(ev, reason))
        if items:
            try:
                await self.cache.put_many(items, similar)
            except redis_errors() as exc:
                raise StoreUnavailable(f"response cache: {type(exc).__name__}: {exc}") from exc
        self.stored += len(items)
        self.skipped.update(skipped)
        if self.sink is not None:
            for note in notes:
                self.sink.record(note)
        acks.done(*(e.id for e in entries))

    def submit(self, ev: AnswerCompleted) -> None:
        """Hand one answer (``ev.cache`` set) to ``run``; never waits."""
        try:
            self._send.send_nowait(ev)
        except trio.WouldBlock:
            self.dropped += 1
            log.warning("response cache writes are behind; an answer was not stored")

    async def run(self) -> None:
        """Store what ``submit`` hands over, one answer at a time; a Redis that fails loses that answer (logged)."""
        async for ev in self._receive:
            c = ev.cache
            assert c is not None
            reason = skip_reason(ev, self.cache.max_entry_bytes)
            if reason is not None:
                self.skipped[reason] += 1
            else:
                try:
                    await self.cache.put_many([(c.key, answer_of(ev), c.ttl_seconds)], _similar(ev))
                except redis_errors() as exc:
                    log.warning("response cache unavailable, an answer was not stored: %r", exc)
                    continue
                self.stored += 1
            if self.sink is not None:
                self.sink.record(_note(ev, reason))

    def prometheus_lines(self) -> list[str]:
        out = ["# HELP llm_cache_writes_total Answers the cache writer stored.",
               "# TYPE llm_cache_writes_total counter", f"llm_cache_writes_total {self.stored}",
               "# HELP llm_cache_write_skipped_total Answers the cache writer did not store, by reason.",
               "# TYPE llm_cache_write_skipped_total counter"]
        out += [f'llm_cache_write_skipped_total{{reason="{r}"}} {self.skipped[r]}' for r in SKIP_REASONS]
        out += ["# HELP vsr_response_cache_undecodable_total Cache entries skipped unread: a malformed semantic "
                "stream entry (left out of the index), a stored answer (the lookup that met it was a miss).",
                "# TYPE vsr_response_cache_undecodable_total counter",
                f"vsr_response_cache_undecodable_total {self.cache.undecodable}"]
        return out


def _similar(ev: AnswerCompleted) -> list[tuple[str, str, str, int]]:
    """The semantic cache's entry of an answer to store: none without a partition and a text, nor for an answer
    that calls a tool (``calls_tool``: it serves the same request alone)."""
    c = ev.cache
    assert c is not None and ev.body is not None
    if c.partition is None or not c.text or calls_tool(ev.body, ev.streamed, ev.finish_reason):
        return []
    return [(c.partition, c.key, c.text, c.ttl_seconds)]


def _note(ev: AnswerCompleted, reason: str | None) -> CacheWritten:
    assert ev.cache is not None
    return CacheWritten(replay_id=ev.replay_id, request_id=ev.request_id, session_id=ev.session_id,
                        recipe=ev.recipe, config_version=ev.config_version, seq=ev.seq, ts_ms=now_ms(),
                        replay=ev.replay, key=ev.cache.key, stored=reason is None, reason=reason,
                        ttl_seconds=ev.cache.ttl_seconds if reason is None else 0,
                        bytes=ev.body_bytes if reason is None else 0)


__all__ = ["CacheWriter"]
