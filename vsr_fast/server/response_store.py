"""Where ``previous_response_id`` lives when several routers serve one client: Redis.

redis-py blocks, so each call runs in a worker thread behind a limiter; the
request path awaits only its own lookup. The memory store
(``protocol.responses.MemoryResponseStore``) stays the default for one process.
"""
from __future__ import annotations

import msgspec
import trio

from ..events.redis_client import redis
from ..config.stores import ResponsesStore
from ..errors import StoreUnavailable
from ..protocol.responses import MemoryResponseStore, ResponseStore, StoredResponse

# JSON, not msgpack: the conversation is kept as raw JSON (msgspec.Raw) and stays so.
_ENCODE = msgspec.json.Encoder()
_DECODE = msgspec.json.Decoder(StoredResponse)


class RedisResponseStore:
    """One key per response under ``prefix``, with a time to live."""

    def __init__(self, url: str, prefix: str, ttl_seconds: int) -> None:
        self._redis = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=1.0)
        self._prefix = prefix
        self._ttl = ttl_seconds
        self._limiter = trio.CapacityLimiter(8)

    async def get(self, response_id: str) -> StoredResponse | None:
        try:
            data = await trio.to_thread.run_sync(self._redis.get, self._prefix + response_id, limiter=self._limiter)
        except redis.RedisError as exc:
            # Not the client's fault, and not an unknown id: the thread exists, the store is away.
            raise StoreUnavailable(f"the responses store did not answer: {type(exc).__name__}") from exc
        return _DECODE.decode(data) if data else None

    async def put(self, record: StoredResponse) -> None:
        try:
            await trio.to_thread.run_sync(self._set, record, limiter=self._limiter)
        except redis.RedisError:
            return        # not kept: its follow-up gets previous_response_not_found, as after an eviction

    async def delete(self, response_id: str) -> None:
        try:
            await trio.to_thread.run_sync(self._redis.delete, self._prefix + response_id, limiter=self._limiter)
        except redis.RedisError as exc:
            # Not forgotten: the client is told so, rather than that it was.
            raise StoreUnavailable(f"the responses store did not answer: {type(exc).__name__}") from exc

    def _set(self, record: StoredResponse) -> None:
        self._redis.set(self._prefix + record.id, _ENCODE.encode(record), ex=self._ttl)

    def close(self) -> None:
        self._redis.close()


class DeferredStore:
    """Writes leave the request path: ``put`` queues the record (bounded) and a background task stores it.

    A follow-up that names a record still queued reads it from the queue, so a
    client that continues at once never misses its own previous turn. When the
    queue is full, ``put`` writes in line: backpressure, never a lost turn.
    A store shared by several routers (``through``) is written in line always: a follow-up can reach another
    router the moment the answer ends, and that router cannot read this one's queue.
    """

    def __init__(self, inner: ResponseStore, max_pending: int = 1024, through: bool = False) -> None:
        self.inner = inner
        self.through = through
        self._pending: dict[str, StoredResponse] = {}
        self._deleted: set[str] = set()   # queued records deleted before they were stored: not to be stored
        self._send, self._receive = trio.open_memory_channel[StoredResponse](max_pending)

    async def get(self, response_id: str) -> StoredResponse | None:
        record = self._pending.get(response_id)
        return record if record is not None else await self.inner.get(response_id)

    async def put(self, record: StoredResponse) -> None:
        if self.through:
            await self.inner.put(record)
            return
        try:
            self._send.send_nowait(record)
        except trio.WouldBlock:
            await self.inner.put(record)
            return
        self._pending[record.id] = record

    async def delete(self, response_id: str) -> None:
        if self._pending.pop(response_id, None) is not None:
            self._deleted.add(response_id)
        await self.inner.delete(response_id)

    async def run(self) -> None:
        """Store queued records until cancelled; what is left is written on the way out (shielded, bounded)."""
        try:
            async for record in self._receive:
                await self._store(record)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                while True:
                    try:
                        record = self._receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    await self._store(record)

    async def _store(self, record: StoredResponse) -> None:
        if record.id in self._deleted:
            self._deleted.discard(record.id)
            return
        try:
            await self.inner.put(record)
        finally:
            if self._pending.get(record.id) is record:
                del self._pending[record.id]


def response_store(config: ResponsesStore) -> DeferredStore:
    """The store ``global.stores.responses`` names, its writes off the request path."""
    if config.backend_type == "redis":
        return DeferredStore(RedisResponseStore(config.redis_url(), config.prefix, config.ttl_seconds), through=True)
    return DeferredStore(MemoryResponseStore(
        max_entries=config.max_entries, max_entries_per_owner=config.max_entries_per_owner))
