"""Client keys kept in Redis, shared by every router: ``vsr-fast keys create|list|revoke|rotate``.

Layout under the store's prefix: ``keys`` is a hash from a key's SHA-256 to its
record (JSON), ``keys:version`` a counter bumped by every change. A router polls
the counter (``store.refresh_ms``) and reloads the hash when it moved, so a
revocation reaches every router within a refresh, without a restart. redis-py
blocks: the CLI calls this directly, a router only from a worker thread.
"""
from __future__ import annotations

import time

import msgspec

from ..events.redis_client import redis
from ..config.auth import AuthStore
from ..config.auth import Limits
from . import spend
from .keys import KeyFields, StoredKey, digest, new_key

_ENCODE = msgspec.json.Encoder()
_DECODE = msgspec.json.Decoder(StoredKey)


class KeyStore:
    def __init__(self, store: AuthStore, *, socket_timeout: float = 2.0) -> None:
        self._redis = redis.Redis.from_url(store.redis_url(), socket_timeout=socket_timeout,
                                           socket_connect_timeout=min(socket_timeout, 1.0))
        self.prefix = store.prefix
        self.hash = store.prefix + "keys"
        self.version_key = store.prefix + "keys:version"

    def close(self) -> None:
        self._redis.close()

    def version(self) -> int:
        return int(self._redis.get(self.version_key) or 0)

    def load(self) -> tuple[int, list[StoredKey]]:
        """The version and every stored key, read together."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.get(self.version_key)
        pipe.hgetall(self.hash)
        version, rows = pipe.execute()
        return int(version or 0), [_DECODE.decode(v) for v in rows.values()]

    def create(self, fields: KeyFields) -> str:
        """A new key with ``fields``; returns the key, the only time it is ever seen."""
        if any(k.id == fields.id for k in self.load()[1]):
            raise ValueError(f"a key with id {fields.id!r} exists; rotate or revoke it")
        key = new_key()
        record = StoredKey(**msgspec.structs.asdict(fields), sha256=digest(key),
                           created_ms=time.time_ns() // 1_000_000)
        self._write(record)
        return key

    def list(self) -> list[StoredKey]:
        return sorted(self.load()[1], key=lambda k: k.id)

    def usage(self, keys: list[tuple[str, Limits]]) -> list[spend.Usage]:
        """Each key's budget and window use, from the counts the routers' limits share here."""
        return spend.shared(self._redis, self.prefix, keys)

    def revoke(self, key_id: str) -> bool:
        """Remove every key of ``key_id``; True when one existed."""
        gone = [k.sha256 for k in self.load()[1] if k.id == key_id]
        if not gone:
            return False
        pipe = self._redis.pipeline(transaction=True)
        pipe.hdel(self.hash, *gone)
        pipe.incr(self.version_key)
        pipe.execute()
        return True

    def rotate(self, key_id: str) -> str:
        """A new key for ``key_id`` with the same identity and limits; the old one stops working at once."""
        old = [k for k in self.load()[1] if k.id == key_id]
        if not old:
            raise KeyError(key_id)
        key = new_key()
        record = msgspec.structs.replace(old[0], sha256=digest(key), created_ms=time.time_ns() // 1_000_000)
        pipe = self._redis.pipeline(transaction=True)
        pipe.hdel(self.hash, *[k.sha256 for k in old])
        pipe.hset(self.hash, record.sha256, _ENCODE.encode(record))
        pipe.incr(self.version_key)
        pipe.execute()
        return key

    def _write(self, record: StoredKey) -> None:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(self.hash, record.sha256, _ENCODE.encode(record))
        pipe.incr(self.version_key)
        pipe.execute()
