"""Each user's memories for the ``context`` plugin (spec 5.7): one user's memories are never read for another.

A memory is a turn's text (the user's message and the answer) with its
embedding and when it was written. ``memory`` keeps them in this process;
``redis`` keeps each user's in one list under a key derived from the user, so
every router sharing Redis reads the same memories. The user's name is hashed
into the key: a key listing shows no names.

Every method here blocks (embedding, Redis): the request path calls them in a
worker thread.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict

import msgspec
import numpy as np

from .redis_client import redis
from ..config.stores import MemoryStore as MemoryStoreConfig
from ..embeddings import Embedder


class Memory(msgspec.Struct, frozen=True):
    text: str
    created_ms: int
    vector: bytes


_ENCODE = msgspec.msgpack.Encoder()
_DECODE = msgspec.msgpack.Decoder(Memory)
MAX_USERS_IN_MEMORY = 100_000       # the memory backend forgets the least recently written user past this


class MemoryStore:
    """``add`` after a response; ``recall`` by embedding, or ``newest`` first."""

    def __init__(self, config: MemoryStoreConfig, embedder: Embedder) -> None:
        self.config = config
        self.embedder = embedder
        self._users: OrderedDict[str, list[Memory]] = OrderedDict()      # newest last
        self._lock = threading.Lock()
        self._redis = (redis.Redis.from_url(config.redis_url(), socket_timeout=2.0, socket_connect_timeout=1.0)
                       if config.backend_type == "redis" else None)

    def _key(self, user: str) -> str:
        return f"{self.config.prefix}user:{hashlib.sha256(user.encode()).hexdigest()}"

    def add_sync(self, user: str, text: str) -> None:
        """Write one memory of ``user``; the oldest leave past ``max_memories_per_user``."""
        vector = self.embedder.encode([text])[0]
        memory = Memory(text, time.time_ns() // 1_000_000, vector.astype(np.float32).tobytes())
        limit = self.config.max_memories_per_user
        if self._redis is not None:
            key = self._key(user)
            pipe = self._redis.pipeline(transaction=False)
            pipe.lpush(key, _ENCODE.encode(memory))         # newest first in Redis
            pipe.ltrim(key, 0, limit - 1)
            if self.config.ttl_seconds is not None:
                pipe.expire(key, self.config.ttl_seconds)
            pipe.execute()
            return
        with self._lock:
            kept = self._users.pop(user, [])
            kept.append(memory)
            self._users[user] = kept[-limit:]
            while len(self._users) > MAX_USERS_IN_MEMORY:
                self._users.popitem(last=False)

    def newest_sync(self, user: str, limit: int | None = None) -> list[Memory]:
        """The user's memories, newest first."""
        if self._redis is not None:
            return [_DECODE.decode(b) for b in self._redis.lrange(self._key(user), 0, (limit or 0) - 1)]
        with self._lock:
            kept = list(reversed(self._users.get(user, ())))
        return kept[:limit] if limit is not None else kept

    def recall_sync(self, user: str, query: str, top_k: int | None,
                    min_similarity: float | None) -> list[tuple[float, Memory]]:
        """The user's memories nearest ``query`` (cosine), best first; ties keep the newer first."""
        kept = [m for m in self.newest_sync(user) if len(m.vector) == 4 * self.embedder.dimension]
        if not kept:
            return []
        scores = np.stack([np.frombuffer(m.vector, np.float32) for m in kept]) @ self.embedder.encode([query])[0]
        order = np.argsort(-scores, kind="stable")[: top_k or len(kept)]
        return [(float(scores[i]), kept[i]) for i in order if min_similarity is None or scores[i] >= min_similarity]

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()


__all__ = ["Memory", "MemoryStore"]
