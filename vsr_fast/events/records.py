"""Where Router Replay records are kept: in memory (embedded) or in Redis, with a TTL and a size bound.

A record is stored as the events of its request (what the policy allowed them
to keep) and folded into a ``ReplayRecord`` when read, so the recorder never
reads before it writes and two recorders never race on one record. Each
record also keeps a few summary fields (time, recipe, decision, model,
status, path) that the listing filters on.

Redis layout, under ``prefix``::

    r:<replay id>                 hash: e:<seq>:<kind> -> event (msgpack), s:<field> -> summary; expires

A consumer's event (``shadow_answer``, ``cache_write``: ``LATE``) arrives after its request's own and joins the
record only while it exists (a script that writes only to an existing hash, in the same pipeline): one for a
record evicted by ``max_records`` or expired must never make it again, a fragment under its old time that
would push a newer, whole record out.
    i                             zset of every record id by time; the size bound trims it, oldest first
    i:<field>:<value>             zset per decision, model and recipe, by time: trimmed with ``i`` (age, size,
                                  eviction); stale ids dropped when listed
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

import msgspec
import trio

from .redis_client import redis
from .replay_record import RecordSummary, ReplayRecord, build_record
from .redis_stream import client
from .source import StoreUnavailable
from .types import (AnswerCompleted, CacheHit, CacheWritten, DecisionChosen, ErrorRaised, Event, ShadowAnswered,
                    decode_event, encode_event)

log = logging.getLogger("vsr_fast.events")
SUMMARY = ("ts", "recipe", "decision", "model", "status", "path")
INDEXED = ("decision", "model", "recipe")
# Events a consumer appends after the request's own (the cache writer's, the shadow dispatcher's): they join a
# record that exists, never make one.
LATE = (CacheWritten, ShadowAnswered)
# KEYS[1]: the record; ARGV: field, value pairs. Written only if the record is there (its TTL left as it is).
_JOIN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""


def summary_fields(ev: Event) -> dict[str, Any]:
    """The summary fields an event sets (later events override earlier ones, in order)."""
    out: dict[str, Any] = {}
    if ev.recipe:
        out["recipe"] = ev.recipe
    if isinstance(ev, DecisionChosen):
        if ev.decision:
            out["decision"] = ev.decision
        if ev.model:
            out["model"] = ev.model
    elif isinstance(ev, AnswerCompleted):
        if ev.model:
            out["model"] = ev.model
        out["status"], out["path"] = ev.status, ev.response_path
    elif isinstance(ev, CacheHit):
        if ev.model:
            out["model"] = ev.model
        out["path"] = "cache"
    elif isinstance(ev, ErrorRaised):
        out["status"] = ev.status
    return out


def _matches(s: RecordSummary, decision: str | None, model: str | None, recipe: str | None,
             since_ms: int | None, until_ms: int | None) -> bool:
    return ((decision is None or s.decision == decision) and (model is None or s.model == model)
            and (recipe is None or s.recipe == recipe) and (since_ms is None or s.ts_ms >= since_ms)
            and (until_ms is None or s.ts_ms <= until_ms))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MemoryRecords:
    """One process's records; used from the trio thread only."""

    def __init__(self, *, max_records: int, ttl_seconds: int) -> None:
        self.max_records, self.ttl_ms = max_records, ttl_seconds * 1000
        self._events: OrderedDict[str, list[Event]] = OrderedDict()
        self._summaries: dict[str, RecordSummary] = {}
        self.unreadable = 0     # always: this process wrote every record it holds

    def add(self, events: list[Event]) -> None:
        for ev in events:
            found = self._events.get(ev.replay_id)
            if found is None and isinstance(ev, LATE):
                continue        # its record was evicted or expired: not made again (``LATE``)
            if found is None:
                found = self._events[ev.replay_id] = []
                self._summaries[ev.replay_id] = RecordSummary(id=ev.replay_id, ts_ms=ev.ts_ms, recipe=None,
                                                              decision=None, model=None, status=None,
                                                              response_path=None)
            found.append(ev)
            s = self._summaries[ev.replay_id]
            for name, value in summary_fields(ev).items():
                setattr(s, "response_path" if name == "path" else name, value)
        self._trim()

    def bound(self, *, max_records: int, ttl_seconds: int) -> None:
        """New bounds (a reload): records past them go now."""
        self.max_records, self.ttl_ms = max_records, ttl_seconds * 1000
        self._trim()

    def _trim(self) -> None:
        horizon = _now_ms() - self.ttl_ms
        while self._events:
            oldest = next(iter(self._events))
            if len(self._events) <= self.max_records and self._summaries[oldest].ts_ms >= horizon:
                break
            del self._events[oldest]
            del self._summaries[oldest]

    def get(self, replay_id: str) -> ReplayRecord | None:
        self._trim()
        events = self._events.get(replay_id)
        return build_record(events) if events else None

    def list(self, *, decision: str | None = None, model: str | None = None, recipe: str | None = None,
             since_ms: int | None = None, until_ms: int | None = None, limit: int = 50) -> list[RecordSummary]:
        self._trim()
        out = []
        for rid in reversed(self._events):
            s = self._summaries[rid]
            if _matches(s, decision, model, recipe, since_ms, until_ms):
                out.append(s)
                if len(out) >= limit:
                    break
        return sorted(out, key=lambda s: s.ts_ms, reverse=True)

    def close(self) -> None:
        pass


class RedisRecords:
    """Records in Redis, shared by every router; blocking (call from a worker thread)."""

    def __init__(self, url: str, prefix: str, *, max_records: int, ttl_seconds: int) -> None:
        self.prefix, self.max_records, self.ttl_s = prefix, max_records, ttl_seconds
        self._redis = client(url, socket_timeout=5.0)
        self._join = self._redis.register_script(_JOIN)
        self.unreadable = 0     # stored fields skipped unread (an event, a summary's number)

    def _rec(self, replay_id: str) -> str:
        return f"{self.prefix}r:{replay_id}"

    def _index(self, field: str | None = None, value: str | None = None) -> str:
        return f"{self.prefix}i" if field is None else f"{self.prefix}i:{field}:{value}"

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(f"replay records: {type(exc).__name__}: {exc}") from exc

    def add(self, events: list[Event]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        touched: set[str] = set()
        for ev in events:
            key = self._rec(ev.replay_id)
            fields: dict[str, Any] = {f"e:{ev.seq:010d}:{ev.__struct_config__.tag}": encode_event(ev)}
            if isinstance(ev, LATE):
                # Its summary fields (the recipe) are the record's already, and it indexes nothing.
                (name, value), = fields.items()
                self._join(keys=[key], args=[name, value], client=pipe)
                continue
            summary = summary_fields(ev)
            fields.update({f"s:{k}": str(v) for k, v in summary.items()})
            pipe.hsetnx(key, "s:ts", ev.ts_ms)
            pipe.hset(key, mapping=fields)
            pipe.expire(key, self.ttl_s)
            pipe.zadd(self._index(), {ev.replay_id: ev.ts_ms}, nx=True)
            for name in INDEXED:
                if name in summary:
                    index = self._index(name, summary[name])
                    touched.add(index)
                    pipe.zadd(index, {ev.replay_id: ev.ts_ms}, nx=True)
                    pipe.expire(index, self.ttl_s)
        horizon = _now_ms() - self.ttl_s * 1000
        pipe.zremrangebyscore(self._index(), "-inf", horizon)
        # A field's index holds a subset of the records: the same age and size bounds hold it too, even under
        # traffic that keeps pushing its expiry out (a record whose model changed stays in the first model's).
        for index in touched:
            pipe.zremrangebyscore(index, "-inf", horizon)
            pipe.zremrangebyrank(index, 0, -(self.max_records + 1))
        pipe.zcard(self._index())
        count = self._call(pipe.execute)[-1]
        if count > self.max_records:
            evicted = self._call(self._redis.zpopmin, self._index(), count - self.max_records)
            if evicted:
                self._evict([rid.decode() for rid, _ in evicted])

    def bound(self, *, max_records: int, ttl_seconds: int) -> None:
        """New bounds (a reload): the records past the size bound go now; past the age bound, each read leaves
        out (``get``, ``list``) what the keys' own expiry, set under the old bound, has not dropped yet."""
        self.max_records, self.ttl_s = max_records, ttl_seconds
        count = self._call(self._redis.zcard, self._index())
        if count > max_records:
            evicted = self._call(self._redis.zpopmin, self._index(), count - max_records)
            if evicted:
                self._evict([rid.decode() for rid, _ in evicted])

    def _horizon(self) -> int:
        return _now_ms() - self.ttl_s * 1000

    def _evict(self, ids: list[str]) -> None:
        """Delete the records ``ids`` and take them out of their fields' indexes."""
        pipe = self._redis.pipeline(transaction=False)
        for rid in ids:
            pipe.hmget(self._rec(rid), *(f"s:{name}" for name in INDEXED))
        summaries = self._call(pipe.execute)
        pipe = self._redis.pipeline(transaction=False)
        for rid, values in zip(ids, summaries):
            for name, value in zip(INDEXED, values):
                if value is not None:
                    pipe.zrem(self._index(name, value.decode(errors="replace")), rid)
        pipe.delete(*(self._rec(rid) for rid in ids))
        self._call(pipe.execute)

    def get(self, replay_id: str) -> ReplayRecord | None:
        fields = self._call(self._redis.hgetall, self._rec(replay_id))
        ts = _number(fields.get(b"s:ts", b"").decode(errors="replace"))
        if ts is not None and ts < self._horizon():
            return None         # older than ttl_seconds (lowered by a reload since it was written)
        events, bad = [], 0
        for k, v in fields.items():
            if k.startswith(b"e:"):
                try:
                    events.append(decode_event(v))
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    bad += 1
                    self._unreadable(f"event {k!r} of record {replay_id}", exc)
        record = build_record(events) if events else None
        if bad:
            record = record or ReplayRecord(id=replay_id)
            record.unreadable_events = bad
        return record

    def _unreadable(self, what: str, exc: Exception) -> None:
        # Another version's field, an operator's HSET: the record is served without it, never a 500.
        self.unreadable += 1
        if self.unreadable & (self.unreadable - 1) == 0:
            log.warning("replay records: skipped an unreadable %s: %r (%d so far)", what, exc, self.unreadable)

    def list(self, *, decision: str | None = None, model: str | None = None, recipe: str | None = None,
             since_ms: int | None = None, until_ms: int | None = None, limit: int = 50) -> list[RecordSummary]:
        field, value = next(((f, v) for f, v in (("decision", decision), ("model", model), ("recipe", recipe))
                             if v is not None), (None, None))
        index = self._index(field, value)
        hi = "+inf" if until_ms is None else until_ms
        lo = max(self._horizon(), since_ms or 0)      # nothing past ttl_seconds, whenever it was lowered
        out: list[RecordSummary] = []
        offset, page = 0, max(2 * limit, 100)
        while len(out) < limit:
            ids = self._call(self._redis.zrevrangebyscore, index, hi, lo, start=offset, num=page)
            if not ids:
                break
            offset += len(ids)
            pipe = self._redis.pipeline(transaction=False)
            for rid in ids:
                pipe.hmget(self._rec(rid.decode()), *(f"s:{k}" for k in SUMMARY))
            stale = []
            for rid, values in zip(ids, self._call(pipe.execute)):
                if values[0] is None:
                    stale.append(rid)
                    continue
                s, clean = _summary(rid.decode(), values)
                if not clean:
                    self._unreadable(f"summary of record {rid!r}", ValueError(f"not numbers: {values[0]!r}, "
                                                                              f"{values[4]!r}"))
                if _matches(s, decision, model, recipe, since_ms, until_ms):
                    out.append(s)
                    if len(out) >= limit:
                        break
            if stale:
                self._call(self._redis.zrem, index, *stale)
                offset -= len(stale)
        return out

    def close(self) -> None:
        self._redis.close()


def _number(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _summary(rid: str, values: list[bytes | None]) -> tuple[RecordSummary, bool]:
    """The listing's line, and whether its numbers read (one that does not is left out: time 0, no status)."""
    ts, recipe, decision, model, status, path = (v.decode(errors="replace") if v is not None else None
                                                 for v in values)
    ts_ms, code = _number(ts), _number(status)
    clean = (not ts or ts_ms is not None) and (not status or code is not None)
    return RecordSummary(id=rid, ts_ms=ts_ms or 0, recipe=recipe, decision=decision, model=model, status=code,
                         response_path=path), clean


class ReplayRecords:
    """The recorder's store and the API's reader: ``get_record`` and ``list_records`` for the server."""

    def __init__(self, backend: MemoryRecords | RedisRecords) -> None:
        self.backend = backend
        self._threaded = isinstance(backend, RedisRecords)

    @property
    def shared(self) -> bool:
        """Whether every process reads the same records (Redis), not its own (memory)."""
        return self._threaded

    async def _run(self, fn, *args, **kwargs):
        if not self._threaded:
            return fn(*args, **kwargs)
        return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs), abandon_on_cancel=True)

    async def add(self, events: list[Event]) -> None:
        await self._run(self.backend.add, events)

    async def bound(self, *, max_records: int, ttl_seconds: int) -> None:
        """The global router_replay's ``max_records`` and ``ttl_seconds`` after a reload, in effect at once."""
        await self._run(self.backend.bound, max_records=max_records, ttl_seconds=ttl_seconds)

    async def get_record(self, replay_id: str) -> ReplayRecord | None:
        """``GET /api/v1/replay/{id}``: the record, or None (unknown, expired or evicted)."""
        return await self._run(self.backend.get, replay_id)

    async def list_records(self, *, decision: str | None = None, model: str | None = None, recipe: str | None = None,
                           since_ms: int | None = None, until_ms: int | None = None,
                           limit: int = 50) -> list[RecordSummary]:
        """``GET /api/v1/replay?decision=&model=&recipe=&since_ms=&until_ms=&limit=``: newest first."""
        return await self._run(self.backend.list, decision=decision, model=model, recipe=recipe,
                               since_ms=since_ms, until_ms=until_ms, limit=max(1, min(limit, 1000)))

    def close(self) -> None:
        self.backend.close()


__all__ = ["MemoryRecords", "RedisRecords", "ReplayRecords", "summary_fields"]
