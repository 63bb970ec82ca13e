"""The response cache's store and what it may keep: exact answers in memory or Redis (spec 5.7 ``response_cache``).

The request path looks answers up (``ResponseCache.lookup``); the cache writer
(``vsr_fast.events.cache_writer``) stores an answer later, off the request path,
when ``skip_reason`` finds nothing against it.
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict

import msgspec
import redis
import trio

from ..config.stores import ResponseCacheStore
from ..plugins.response_cache import CachedAnswer
from .capture import answer_facts
from .types import AnswerCompleted

log = logging.getLogger("vsr_fast.response_cache")

_ANSWER = msgspec.msgpack.Encoder()
_ANSWER_DECODER = msgspec.msgpack.Decoder(CachedAnswer)

SKIP_REASONS = ("blocked", "flagged", "over_limit", "incomplete", "truncated", "error", "too_large")


def skip_reason(ev: AnswerCompleted, max_entry_bytes: int) -> str | None:
    """Why this answer must not be cached, or None when it may be. Order: the guard's verdict first."""
    if ev.guard in ("blocked", "flagged", "over_limit", "incomplete"):
        return ev.guard
    if ev.status != 200:
        return "error"
    if ev.body_bytes > max_entry_bytes:
        return "too_large"
    if not ev.complete or ev.body is None or ev.body_truncated:
        return "incomplete"
    facts = answer_facts(ev.body, ev.streamed)
    if facts.error:
        return "error"
    if ev.streamed and not facts.complete:
        return "incomplete"
    reason = ev.finish_reason or facts.finish_reason
    if reason is None:
        return "incomplete"
    if reason == "length":
        return "truncated"
    return None


def answer_of(ev: AnswerCompleted) -> CachedAnswer:
    """The stored form of an answer ``skip_reason`` let through."""
    assert ev.body is not None
    return CachedAnswer(status=ev.status, content_type=ev.content_type or "application/json", body=ev.body,
                        streamed=ev.streamed, model=ev.model, guard=ev.guard, stored_ms=time.time_ns() // 1_000_000)


# --- the stores ----------------------------------------------------------------------


class ResponseCache:
    """Exact answers in memory or in Redis. ``lookup`` serves the request path; ``put_many`` the writer.

    Memory: one process's dict, bounded by ``max_entries`` (least recently
    stored leave first), used only from the trio thread. Redis: one key per
    answer with its TTL, shared by every router.
    """

    def __init__(self, store: ResponseCacheStore) -> None:
        self.store = store
        self.max_entry_bytes = store.max_entry_bytes
        self._memory: OrderedDict[str, tuple[float, bytes]] | None = None
        self._redis: redis.Redis | None = None
        if store.backend_type == "memory":
            self._memory = OrderedDict()
        else:
            self._redis = redis.Redis.from_url(store.url, socket_timeout=2.0, socket_connect_timeout=1.0)

    def _key(self, key: str) -> str:
        return f"{self.store.prefix}{key}"

    def get_sync(self, key: str) -> CachedAnswer | None:
        """The stored answer, or None; a Redis that does not answer is a miss (logged)."""
        if self._memory is not None:
            item = self._memory.get(key)
            if item is None:
                return None
            if item[0] < time.monotonic():
                del self._memory[key]
                return None
            data: bytes | None = item[1]
        else:
            assert self._redis is not None
            try:
                data = self._redis.get(self._key(key))
            except redis.RedisError as exc:
                log.warning("response cache unavailable, serving a miss: %r", exc)
                return None
        return None if data is None else _ANSWER_DECODER.decode(data)

    def put_many_sync(self, items: list[tuple[str, CachedAnswer, int]]) -> None:
        """Store ``(key, answer, ttl_seconds)`` items; raises ``redis.RedisError`` when Redis fails."""
        if self._memory is not None:
            for key, answer, ttl in items:
                self._memory[key] = (time.monotonic() + ttl, _ANSWER.encode(answer))
                self._memory.move_to_end(key)
            while len(self._memory) > self.store.max_entries:
                self._memory.popitem(last=False)
            return
        assert self._redis is not None
        pipe = self._redis.pipeline(transaction=False)
        for key, answer, ttl in items:
            pipe.set(self._key(key), _ANSWER.encode(answer), ex=ttl)
        pipe.execute()

    async def lookup(self, key: str) -> CachedAnswer | None:
        """The request path's lookup: in line for memory, in a worker thread for Redis."""
        if self._memory is not None:
            return self.get_sync(key)
        return await trio.to_thread.run_sync(self.get_sync, key)

    async def put_many(self, items: list[tuple[str, CachedAnswer, int]]) -> None:
        if self._memory is not None:
            self.put_many_sync(items)
        else:
            await trio.to_thread.run_sync(self.put_many_sync, items)

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()


