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
import numpy as np
import trio

from .redis_client import redis
from ..config.stores import ResponseCacheStore, Stores
from ..embeddings import Embedder, Embedders, vela
from ..errors import EmbeddingFailed
from ..plugins.response_cache import CachedAnswer
from .capture import answer_facts
from .semantic_index import SemanticIndex, differs, projection
from .types import AnswerCompleted

log = logging.getLogger("vsr_fast.response_cache")

_ANSWER = msgspec.msgpack.Encoder()
_ANSWER_DECODER = msgspec.msgpack.Decoder(CachedAnswer)

SKIP_REASONS = ("blocked", "flagged", "over_limit", "incomplete", "truncated", "error", "too_large", "retention_drop",
                "not_accepted")


def skip_reason(ev: AnswerCompleted, max_entry_bytes: int) -> str | None:
    """Why this answer must not be cached, or None when it may be. Order: the decision's retention, the
    router's own refusal (``not_accepted``), then the guard's verdict."""
    if ev.cache is not None and ev.cache.drop:
        return "retention_drop"
    if ev.cache is not None and ev.cache.not_accepted:
        return "not_accepted"
    if ev.guard in ("blocked", "flagged", "over_limit", "incomplete"):
        return ev.guard
    if not ev.complete:     # a stream cut mid-way carries its failure's status (502...): it did not end whole
        return "incomplete"
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


def calls_tool(body: bytes, streamed: bool, finish_reason: str | None = None) -> bool:
    """Whether an answer (whole, or its SSE) ends calling a tool. Such an answer is served again only to the
    same request (the exact cache), never to a similar one: a tool call is a command the client runs, and a
    request of near words may ask for another (delete for show, another file), which the similarity and the
    ``same_request`` judge do not reliably tell apart (``plugins.response_cache``)."""
    return (finish_reason or answer_facts(body, streamed).finish_reason) == "tool_calls"


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

    def __init__(self, store: ResponseCacheStore, embedder: Embedder | None = None) -> None:
        self.store = store
        self.max_entry_bytes = store.max_entry_bytes
        self._memory: OrderedDict[str, tuple[float, bytes]] | None = None
        self._redis: redis.Redis | None = None
        # The semantic cache: the store's embedding deployment (started on first use: a config without semantic
        # mode never starts it) and the local index; with Redis, the index follows every router's writes.
        self.embedder = embedder if embedder is not None else vela()
        self._index: SemanticIndex | None = None
        self._stream_id = b"0"
        self._stream = f"{store.prefix}semantic"
        if store.backend_type == "memory":
            self._memory = OrderedDict()
        else:
            self._redis = redis.Redis.from_url(store.redis_url(), socket_timeout=2.0, socket_connect_timeout=1.0)
            # The request path's own client: its wait is a request's added latency, so it is the store's bound.
            wait = store.lookup_timeout_ms / 1000
            self.lookup_client = redis.Redis.from_url(store.redis_url(), socket_timeout=wait, socket_connect_timeout=wait)
        self.breaker = Breaker()
        self.undecodable = 0    # entries skipped unread: a semantic stream entry, a stored answer

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
            if self.breaker.skips():
                return None
            try:
                data = self.lookup_client.get(self._key(key))
            except redis.RedisError as exc:
                if self.breaker.failed():
                    log.warning("response cache unavailable, serving misses without asking for %d s: %r",
                                Breaker.COOL_DOWN_S, exc)
                else:
                    log.warning("response cache unavailable, serving a miss: %r", exc)
                return None
            self.breaker.answered()
        if data is None:
            return None
        try:
            return _ANSWER_DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._unreadable(f"answer {key}", exc)
            return None

    def _unreadable(self, what: str, exc: Exception) -> None:
        # Not this router's writing (another version, an operator's XADD/SET): a miss, never the request's error.
        self.undecodable += 1
        if self.undecodable & (self.undecodable - 1) == 0:
            log.warning("response cache: skipped an unreadable %s: %r (%d so far)", what, exc, self.undecodable)

    def put_many_sync(self, items: list[tuple[str, CachedAnswer, int]],
                      similar: list[tuple[str, str, str, int]] = ()) -> None:
        """Store ``(key, answer, ttl_seconds)`` items, and the ``(partition, key, text, ttl_seconds)`` of those
        the semantic cache may find; raises ``redis.RedisError`` when Redis fails."""
        vectors = None
        if similar:
            try:
                vectors = self.embed([text for _, _, text, _ in similar])
            except EmbeddingFailed as exc:     # the answers still serve the same request; only recall misses them
                log.warning("semantic cache: not indexing %d answers: %s", len(similar), exc.message)
        if self._memory is not None:
            for key, answer, ttl in items:
                self._memory[key] = (time.monotonic() + ttl, _ANSWER.encode(answer))
                self._memory.move_to_end(key)
            while len(self._memory) > self.store.max_entries:
                self._memory.popitem(last=False)
            for (partition, key, text, ttl), vector in zip(similar, vectors if vectors is not None else ()):
                self.index.add(partition, key, text, vector, ttl)
            return
        assert self._redis is not None
        pipe = self._redis.pipeline(transaction=False)
        for key, answer, ttl in items:
            pipe.set(self._key(key), _ANSWER.encode(answer), ex=ttl)
        for (partition, key, text, ttl), vector in zip(similar, vectors if vectors is not None else ()):
            # Every router's index follows this stream; the answer itself stays under its exact key.
            pipe.xadd(self._stream, {"p": partition, "k": key, "t": text, "ttl": ttl,
                                     "v": vector.astype(np.float32).tobytes()},
                      maxlen=self.store.max_entries, approximate=True)
        pipe.execute()

    # --- the semantic cache ----------------------------------------------------------------------

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.encode(texts)

    @property
    def index(self) -> SemanticIndex:
        if self._index is None:
            dim = self.embedder.dimension
            self._index = SemanticIndex(dim, self.store.max_entries, axes=projection(dim))
        return self._index

    def follow_sync(self) -> None:
        """Redis: add to the local index what every router wrote since the last read."""
        while True:
            got = self.lookup_client.xread({self._stream: self._stream_id}, count=10_000)
            if not got:
                return
            entries = got[0][1]
            for entry_id, fields in entries:
                self._stream_id = entry_id
                try:
                    vector = np.frombuffer(fields[b"v"], np.float32)
                    entry = (fields[b"p"].decode(), fields[b"k"].decode(), fields[b"t"].decode(), vector,
                             int(fields[b"ttl"]))
                except (KeyError, ValueError) as exc:   # UnicodeDecodeError is a ValueError
                    self._unreadable(f"semantic stream entry {entry_id!r}", exc)
                    continue
                # Another embedding model's vector (the model changed): not comparable, skipped uncounted, as
                # after a change every older entry is one.
                if len(vector) == self.index.dim:
                    self.index.add(*entry)
            if len(entries) < 10_000:
                return

    def recall_sync(self, partition: str, text: str, top_k: int,
                    min_similarity: float | None) -> list[tuple[float, str, str]]:
        """The partition's nearest cached requests ``(cosine, key, text)``, best first, without those the
        polarity check drops; Redis first catches up with the stream (a Redis that fails: logged, the local
        index as it is)."""
        if self._redis is not None and not self.breaker.skips():
            try:
                self.follow_sync()
            except redis.RedisError as exc:
                self.breaker.failed()
                log.warning("semantic cache stream unavailable, recalling from the local index: %r", exc)
            else:
                self.breaker.answered()
        try:
            vector = self.embed([text])[0]
        except EmbeddingFailed as exc:
            log.warning("semantic cache: recall failed, serving a miss: %s", exc.message)
            return []
        return [hit for hit in self.index.search(partition, vector, top_k, min_similarity)
                if not differs(text, hit[2])]

    async def recall(self, partition: str, text: str, top_k: int,
                     min_similarity: float | None) -> list[tuple[float, str, str]]:
        """The request path's recall: in line for memory once a local embedding is loaded, else in a thread."""
        if self._redis is None and self.embedder.inline:
            return self.recall_sync(partition, text, top_k, min_similarity)
        return await trio.to_thread.run_sync(self.recall_sync, partition, text, top_k, min_similarity)

    async def lookup(self, key: str) -> CachedAnswer | None:
        """The request path's lookup: in line for memory, in a worker thread for Redis."""
        if self._memory is not None:
            return self.get_sync(key)
        return await trio.to_thread.run_sync(self.get_sync, key)

    async def put_many(self, items: list[tuple[str, CachedAnswer, int]],
                       similar: list[tuple[str, str, str, int]] = ()) -> None:
        if self._memory is not None and (not similar or self.embedder.inline):
            self.put_many_sync(items, similar)
        else:
            await trio.to_thread.run_sync(self.put_many_sync, items, similar)

    def close(self) -> None:
        """Close the Redis connection; the embedder is the catalog's to close (several stores share it)."""
        if self._redis is not None:
            self._redis.close()
            self.lookup_client.close()


class Breaker:
    """Stop asking a Redis that keeps failing: after ``FAILURES`` lookups in a row fail, every lookup is a miss
    without a call for ``COOL_DOWN_S``, then one asks again. Worker threads share it: a lost update costs at most
    one extra call."""

    FAILURES, COOL_DOWN_S = 3, 5

    def __init__(self) -> None:
        self.failures_in_a_row = 0
        self.open_until = 0.0
        self.skipped = 0

    def skips(self) -> bool:
        if self.open_until and time.monotonic() < self.open_until:
            self.skipped += 1
            return True
        return False

    def failed(self) -> bool:
        """Count a failure; True when it opens the breaker."""
        self.failures_in_a_row += 1
        if self.failures_in_a_row >= self.FAILURES:
            self.open_until = time.monotonic() + self.COOL_DOWN_S
            return True
        return False

    def answered(self) -> None:
        self.failures_in_a_row, self.open_until = 0, 0.0


def cache_of(stores: Stores, embedders: Embedders | None) -> ResponseCache:
    """The response cache of ``global.stores``, embedding with the deployment its store names (else the
    catalog's default; without a catalog, vela-embedding)."""
    store = stores.response_cache
    return ResponseCache(store, embedders.for_store(store.embedding) if embedders is not None else None)
