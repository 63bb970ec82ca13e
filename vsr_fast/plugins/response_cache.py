"""``response_cache``, exact mode: reuse an answer the guard released for the same request (spec 5.7).

The request path computes the key and looks it up (``ResponseCache.lookup``);
on a miss it puts the key in the answer's event, and the cache writer
(``vsr_fast.events.cache_writer``) stores the answer later, off the request
path, if ``skip_reason`` finds nothing against it.

The key covers the canonical request, the recipe and decision, the decision's
guard configuration, the whole ``revision`` block and the scope's principal:
changing a guard or a revision starts the decision's cache fresh.

What is never stored (``llm_cache_write_skipped_total{reason}``): an answer
the guard ``blocked``; one it ``flagged`` only in x-vsr-warnings (a hit
carries no guard headers, so the flag would be lost); a held answer
``over_limit``; an ``incomplete`` one (no finish reason, a stream that did not
end, a guard that could not read it whole); a ``truncated`` one (finish reason
``length``); an ``error`` answer; one ``too_large`` for the store.
"""
from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
import redis
import trio
from msgspec import UNSET, Meta, Struct, UnsetType

from ..config.schema_base import Block
from ..config.stores import ResponseCacheStore
if TYPE_CHECKING:
    from ..events.types import AnswerCompleted

TYPE = "response_cache"
log = logging.getLogger("vsr_fast.response_cache")


class CacheRevision(Block):
    """``response_cache.revision``: bump ``policy_revision`` after changing a signal the guard reads."""

    policy_revision: str | None = None


class ResponseCacheConfig(Block):
    """``{type: response_cache, configuration: ...}`` at one layer (fields override field by field)."""

    enabled: bool | UnsetType = UNSET
    # exact only: semantic recall needs an embedding deployment this router does not run yet.
    mode: Literal["exact"] | UnsetType = UNSET
    ttl_seconds: Annotated[int, Meta(ge=1, le=30 * 86_400)] | UnsetType = UNSET
    revision: CacheRevision | UnsetType = UNSET
    # user: one caller's answers serve only that caller (required with delegated upstreams, spec 6.7).
    scope: Literal["user", "team", "tenant", "global"] | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class CachePolicy:
    enabled: bool = True
    mode: str = "exact"
    ttl_seconds: int = 1800
    revision: CacheRevision | None = None
    scope: str = "user"


DISABLED = CachePolicy(enabled=False)


def resolve(*layers: ResponseCacheConfig | None) -> CachePolicy:
    """The policy of a request, ``layers`` lowest first; no layer at all means no cache."""
    present = [layer for layer in layers if layer is not None]
    if not present:
        return DISABLED
    values: dict[str, Any] = {}
    for layer in present:
        for f in msgspec.structs.fields(ResponseCacheConfig):
            value = getattr(layer, f.name)
            if value is not UNSET:
                values[f.name] = value
    return CachePolicy(**values)


# --- the key -----------------------------------------------------------------------

_ANY = msgspec.json.Decoder()
_SORTED = msgspec.json.Encoder(order="sorted")
_KEY_PARTS = msgspec.msgpack.Encoder(order="sorted")
KEY_VERSION = "v1"
# Fields that never change the answer: ``user`` is the client's end-user tag (scope covers users).
_NOT_IN_KEY = ("user",)


def canonical_request(raw: bytes) -> bytes:
    """The request body with its keys sorted and ``user`` left out: one spelling per request."""
    doc = _ANY.decode(raw)
    if isinstance(doc, dict):
        for name in _NOT_IN_KEY:
            doc.pop(name, None)
    return _SORTED.encode(doc)


def principal(scope: str, *, user: str | None, team: str | None = None, tenant: str | None = None) -> str:
    """Whose answers a key is for. Anonymous callers are one principal: the router cannot tell them apart."""
    if scope == "global":
        return ""
    value = {"user": user, "team": team, "tenant": tenant}[scope]
    return f"{scope}:{value or 'anonymous'}"


def cache_key(raw_request: bytes, *, recipe: str | None, decision: str | None, guard: object,
              policy: CachePolicy, principal: str) -> str:
    """The exact-mode key: sha256 over the canonical request and everything that may change the answer.

    ``guard`` is the decision's response_guard configuration (any msgspec-encodable
    value; None without a guard).
    """
    parts = [KEY_VERSION, canonical_request(raw_request), recipe, decision, guard, policy.revision, principal]
    return hashlib.sha256(_KEY_PARTS.encode(parts)).hexdigest()


# --- what is stored ----------------------------------------------------------------


class CachedAnswer(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An answer as the client received it; served with x-vsr-response-path: cache."""

    status: int
    content_type: str
    body: bytes
    streamed: bool
    model: str | None = None
    decision: str | None = None
    guard: str = "none"
    stored_ms: int = 0


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
    # Imported here: the events package imports this module (a cycle at import time otherwise).
    from ..events.capture import answer_facts

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


__all__ = [
    "CachePolicy", "CacheRevision", "CachedAnswer", "DISABLED", "KEY_VERSION", "ResponseCache",
    "ResponseCacheConfig", "SKIP_REASONS", "TYPE", "answer_of", "cache_key", "canonical_request", "principal",
    "resolve", "skip_reason",
]
