"""The event stream on Redis: the writer's transport (XADD through a dedup script) and the reader.

redis-py is blocking: the transport runs on the writer thread, the source in
trio worker threads. Redis errors are mapped here, once: the writer sees
``TransportDown``, readers ``StoreUnavailable``.

In Redis Cluster the script's keys must share a slot: name the stream with a
hash tag (``{vsr}:events``), and its marks ``{vsr}:events:mark:...`` follow.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from .redis_client import redis
from .source import Entry, StoreUnavailable, entry
from .writer import Item, TransportDown

# KEYS[1] the stream, KEYS[2..] one mark per delivery space in the batch.
# ARGV[1] maxlen (0: none), ARGV[2] the marks' TTL, ARGV[3] the entries' maximum age in ms (0: none),
# then (mark key number, index, payload) per event.
# One script call appends a whole batch and moves the marks with it, atomically:
# a reply lost on the way back costs a re-send that this same check skips.
_APPEND = """
local maxlen = tonumber(ARGV[1])
local max_age_ms = tonumber(ARGV[3])
local marks = {}
for k = 2, #KEYS do marks[k] = tonumber(redis.call('GET', KEYS[k]) or '0') end
local added = 0
for i = 4, #ARGV, 3 do
  local k = tonumber(ARGV[i])
  local index = tonumber(ARGV[i + 1])
  if index > marks[k] then
    if maxlen > 0 then
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'e', ARGV[i + 2])
    else
      redis.call('XADD', KEYS[1], '*', 'e', ARGV[i + 2])
    end
    marks[k] = index
    added = added + 1
  end
end
for k = 2, #KEYS do redis.call('SET', KEYS[k], marks[k], 'EX', ARGV[2]) end
if max_age_ms > 0 and added > 0 then
  -- Entry ids start with their append time in ms: older ones go, approximately (whole nodes), as MAXLEN ~.
  local now = redis.call('TIME')
  redis.call('XTRIM', KEYS[1], 'MINID', '~', now[1] * 1000 + math.floor(now[2] / 1000) - max_age_ms)
end
return added
"""

# A mark must outlive any re-send of its space: the longest outage plus a restart.
MARK_TTL_S = 30 * 86_400
FIELD = b"e"
log = logging.getLogger("vsr_fast.events")


def client(url: str, *, socket_timeout: float) -> redis.Redis:
    """A client whose URL query (``?socket_timeout=...``) wins over our defaults."""
    return redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=min(socket_timeout, 2.0),
                                health_check_interval=30)


class RedisTransport:
    """Appends batches to one Redis stream, each event once."""

    def __init__(self, url: str, stream: str, *, maxlen: int | None = None, max_age_s: float | None = None,
                 socket_timeout: float = 5.0) -> None:
        self.stream = stream
        self._maxlen = maxlen or 0
        self._max_age_ms = int(max_age_s * 1000) if max_age_s else 0
        self._redis = client(url, socket_timeout=socket_timeout)
        self._sha: str | None = None
        self._marks: dict[bytes, str] = {}

    def _mark(self, space: bytes) -> str:
        key = self._marks.get(space)
        if key is None:
            key = self._marks[space] = f"{self.stream}:mark:{space.hex()}"
        return key

    def send(self, items: list[Item]) -> int:
        keys = [self.stream]
        numbers: dict[bytes, int] = {}
        args: list[Any] = [self._maxlen, MARK_TTL_S, self._max_age_ms]
        for space, index, payload in items:
            k = numbers.get(space)
            if k is None:
                keys.append(self._mark(space))
                k = numbers[space] = len(keys)      # Lua's 1-based KEYS number
            args += (k, index, payload)
        try:
            if self._sha is None:
                self._sha = self._redis.script_load(_APPEND)
            try:
                return int(self._redis.evalsha(self._sha, len(keys), *keys, *args))
            except redis.exceptions.NoScriptError:          # Redis restarted: its script cache is empty
                self._sha = self._redis.script_load(_APPEND)
                return int(self._redis.evalsha(self._sha, len(keys), *keys, *args))
        except redis.RedisError as exc:
            raise TransportDown(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self._redis.close()


def _entries(rows: Any) -> list[Entry]:
    """XRANGE / XREADGROUP / XAUTOCLAIM rows, in RESP2 or RESP3 shape, as entries."""
    out = []
    for entry_id, fields in rows or ():
        eid = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        out.append(entry(eid, (fields or {}).get(FIELD)))
    return out


def _stream_rows(reply: Any) -> Any:
    if not reply:
        return []
    if isinstance(reply, dict):                    # RESP3
        return next(iter(reply.values()))[0] if reply else []
    return reply[0][1]


class _GroupGone(Exception):
    """The stream or its consumer group no longer exists."""


def _gone(exc: redis.ResponseError) -> bool:
    text = str(exc)
    # NOGROUP: read, claim or ack on a deleted stream or group; UNBLOCKED: the stream deleted under a blocked read.
    return text.startswith("NOGROUP") or (text.startswith("UNBLOCKED") and "no longer exists" in text)


# Replies of a Redis that cannot serve for now (out of memory, a replica, a failover, a running script, a
# failed snapshot, an ACL change) or whose fix is an operator's (another key type under the stream's name):
# the consumers wait and retry. redis-py names some by class and leaves the others' code in the text.
_TRANSIENT_ERRORS = ("OutOfMemoryError", "ReadOnlyError", "ClusterDownError", "TryAgainError", "NoPermissionError")
_TRANSIENT_CODES = {"BUSY", "LOADING", "WRONGTYPE", "MISCONF", "NOREPLICAS", "MASTERDOWN", "READONLY", "OOM"}
REFUSED_LOG_EVERY_S = 60.0


def _transient(exc: redis.ResponseError) -> bool:
    return (isinstance(exc, tuple(getattr(redis.exceptions, name) for name in _TRANSIENT_ERRORS))
            or str(exc).split(" ", 1)[0] in _TRANSIENT_CODES)


def _id_key(entry_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in entry_id.split("-"))


class RedisSource:
    """Consumer groups over a Redis stream."""

    def __init__(self, url: str, stream: str, *, socket_timeout: float = 10.0) -> None:
        self.stream = stream
        self._delivered: dict[str, str] = {}    # group -> the newest entry id read here
        self._refused_logged = -REFUSED_LOG_EVERY_S
        # Reads block server-side for up to block_ms: the socket waits longer than that.
        self._redis = client(url, socket_timeout=socket_timeout)

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(f"event stream {self.stream}: {type(exc).__name__}: {exc}") from exc
        except redis.ResponseError as exc:
            if _gone(exc):
                raise _GroupGone(str(exc)) from exc
            if "BUSYGROUP" in str(exc):
                raise
            if not _transient(exc):
                # Not Redis being away but a command it refused (a bug of ours): still retried, as a background
                # worker must not stop, but shown with Redis's words, not taken for an outage.
                now = time.monotonic()
                if now - self._refused_logged >= REFUSED_LOG_EVERY_S:
                    self._refused_logged = now
                    log.error("event stream %s: Redis refused %s: %s", self.stream,
                              getattr(fn, "__name__", fn), exc)
            raise StoreUnavailable(f"event stream {self.stream}: {exc}") from exc

    def ensure_group(self, group: str, start: str = "0") -> None:
        try:
            self._call(self._redis.xgroup_create, self.stream, group, id=start, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _start_over(self, group: str, exc: _GroupGone) -> None:
        # The stream was deleted (DEL, FLUSHDB, an expired key): what it held is gone, the group starts at the
        # new stream's first entry. Only the group was (XGROUP DESTROY): the stream may hold days of events,
        # already handled (shadow copies paid for, records written): it resumes after the newest one read here,
        # or at the end when this process read none.
        exists = self._call(self._redis.exists, self.stream)
        start = (self._delivered.get(group, "$") if exists else "0")
        log.warning("event stream %s: %s; consumer group %s created again at %s", self.stream, exc, group,
                    start if exists else "the new stream's start")
        self.ensure_group(group, start)

    def _note(self, group: str, entries: list[Entry]) -> list[Entry]:
        if entries:
            newest = entries[-1].id         # XREADGROUP and XAUTOCLAIM answer in id order
            known = self._delivered.get(group)
            if known is None or _id_key(known) < _id_key(newest):
                self._delivered[group] = newest
        return entries

    def reset_consumer(self, group: str, consumer: str) -> None:
        """Nothing to do: Redis keeps each consumer's pending entries; ``read(after="0")`` returns them."""

    def read(self, group: str, consumer: str, count: int, block_ms: int, after: str | None = None) -> list[Entry]:
        try:
            if after is None:
                # BLOCK 0 is "forever" to Redis; 0 here means "do not wait", as on the embedded stream.
                reply = self._call(self._redis.xreadgroup, group, consumer, {self.stream: ">"}, count=count,
                                   block=block_ms or None)
            else:
                reply = self._call(self._redis.xreadgroup, group, consumer, {self.stream: after}, count=count)
        except _GroupGone as exc:
            self._start_over(group, exc)
            return []
        return self._note(group, _entries(_stream_rows(reply)))

    def claim(self, group: str, consumer: str, min_idle_ms: int, count: int) -> list[Entry]:
        try:
            reply = self._call(self._redis.xautoclaim, self.stream, group, consumer, min_idle_ms, "0-0", count=count)
        except _GroupGone as exc:
            self._start_over(group, exc)
            return []
        return self._note(group, _entries(reply[1] if reply else []))

    def ack(self, group: str, ids: list[str]) -> None:
        if ids:
            try:
                self._call(self._redis.xack, self.stream, group, *ids)
            except _GroupGone as exc:           # the entries went with their group: nothing left to acknowledge
                self._start_over(group, exc)

    def range(self, start: str | None, end: str | None, count: int) -> list[Entry]:
        lo = f"({start}" if start else "-"
        return _entries(self._call(self._redis.xrange, self.stream, lo, end or "+", count=count))

    def length(self) -> int:
        return int(self._call(self._redis.xlen, self.stream))

    def last_id(self) -> str | None:
        """The id of the stream's newest entry, or None when it holds none."""
        last = self._call(self._redis.xrevrange, self.stream, "+", "-", count=1)
        return _entries(last)[0].id if last else None

    def exists(self) -> bool:
        """Whether the stream key exists (XLEN answers 0 for a name never written, a typo included)."""
        return bool(self._call(self._redis.exists, self.stream))

    def close(self) -> None:
        self._redis.close()


__all__ = ["MARK_TTL_S", "RedisSource", "RedisTransport", "client"]
