"""Rate limits and budgets per key, team and tenant, shared by every router through Redis.

One Lua script admits a request against every limit that applies to it, all
or nothing: requests per minute (a sliding log), tokens per minute (per-second
buckets over the last 60 s), requests in flight (leases that expire, so a router
that dies frees its slots) and the period's budget. Tokens are added when the
answer ends, from its usage. A router also keeps the same windows locally; when
Redis does not answer within ``store_timeout_ms`` (or is marked away after a
failure, for a second) the local windows decide alone, so a router never lets
more than a limit through by itself.
"""
from __future__ import annotations

import itertools
import logging
import math
import os
import time
from collections import deque
from dataclasses import dataclass

import redis

from ..config.auth import AuthStore, Limits, RateLimits
from ..errors import RateLimited
from ..protocol.canonical import Identity
from .worker import CallTimedOut, Worker

log = logging.getLogger("vsr_fast.auth")

WINDOW_MS = 60_000
_PERIOD_MS = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000, "month": 30 * 86_400_000}
_DOWN_FOR_S = 1.0

# KEYS per scope: rpm log, tpm buckets, in-flight leases, budget counter.
# ARGV: now_ms, request id, lease_ms, then per scope: rpm, tpm, concurrent, budget (0: none).
# Returns {-1} when admitted (and records the request everywhere), else {scope index, limit name, retry ms}.
_ADMIT = """
local now = tonumber(ARGV[1])
local rid = ARGV[2]
local lease = tonumber(ARGV[3])
local n = #KEYS / 4
local since = now - 60000
for i = 0, n - 1 do
  local a = 4 + i * 4
  local rpm, tpm, conc, bud = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  if rpm > 0 then
    local k = KEYS[i * 4 + 1]
    redis.call('ZREMRANGEBYSCORE', k, '-inf', since)
    if redis.call('ZCARD', k) >= rpm then
      local oldest = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
      return {i, 'rpm', tonumber(oldest[2]) + 60000 - now}
    end
  end
  if tpm > 0 then
    local k = KEYS[i * 4 + 2]
    local rows = redis.call('HGETALL', k)
    local sum, first, floor = 0, nil, math.floor(since / 1000)
    for j = 1, #rows, 2 do
      local s = tonumber(rows[j])
      if s <= floor then redis.call('HDEL', k, rows[j]) else
        sum = sum + tonumber(rows[j + 1])
        if first == nil or s < first then first = s end
      end
    end
    if sum >= tpm then return {i, 'tpm', (first + 1) * 1000 + 60000 - now} end
  end
  if conc > 0 then
    local k = KEYS[i * 4 + 3]
    redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
    if redis.call('ZCARD', k) >= conc then return {i, 'concurrent', 1000} end
  end
  if bud > 0 then
    local k = KEYS[i * 4 + 4]
    if tonumber(redis.call('GET', k) or '0') >= bud then return {i, 'budget', redis.call('PTTL', k)} end
  end
end
for i = 0, n - 1 do
  local a = 4 + i * 4
  if tonumber(ARGV[a]) > 0 then
    redis.call('ZADD', KEYS[i * 4 + 1], now, rid)
    redis.call('PEXPIRE', KEYS[i * 4 + 1], 61000)
  end
  if tonumber(ARGV[a + 2]) > 0 then
    redis.call('ZADD', KEYS[i * 4 + 3], now + lease, rid)
    redis.call('PEXPIRE', KEYS[i * 4 + 3], lease + 1000)
  end
end
return {-1}
"""

# KEYS per scope as above; ARGV: now_ms, request id, tokens, then per scope: tpm flag, concurrent flag,
# budget period ms (0: none).
_DONE = """
local now = tonumber(ARGV[1])
local tokens = tonumber(ARGV[3])
local n = #KEYS / 4
for i = 0, n - 1 do
  local a = 4 + i * 3
  if tonumber(ARGV[a]) > 0 and tokens > 0 then
    local k = KEYS[i * 4 + 2]
    redis.call('HINCRBY', k, math.floor(now / 1000), tokens)
    redis.call('PEXPIRE', k, 61000)
  end
  if tonumber(ARGV[a + 1]) > 0 then redis.call('ZREM', KEYS[i * 4 + 3], ARGV[2]) end
  local period = tonumber(ARGV[a + 2])
  if period > 0 and tokens > 0 then
    local k = KEYS[i * 4 + 4]
    redis.call('INCRBY', k, tokens)
    if redis.call('PTTL', k) < 0 then redis.call('PEXPIRE', k, period - (now % period)) end
  end
end
return 1
"""


@dataclass(frozen=True, slots=True)
class Scope:
    kind: str            # key, team, tenant
    name: str
    limits: Limits


class _Local:
    """One scope's windows in this router alone."""

    __slots__ = ("requests", "tokens", "in_flight", "spent", "period")

    def __init__(self) -> None:
        self.requests: deque[float] = deque()
        self.tokens: deque[tuple[float, int]] = deque()
        self.in_flight = 0
        self.spent = 0
        self.period = -1

    def refusal(self, limits: Limits, now: float) -> tuple[str, float] | None:
        since = now - WINDOW_MS / 1000
        if limits.rpm is not None:
            while self.requests and self.requests[0] <= since:
                self.requests.popleft()
            if len(self.requests) >= limits.rpm:
                return "rpm", self.requests[0] + 60 - now
        if limits.tpm is not None:
            while self.tokens and self.tokens[0][0] <= since:
                self.tokens.popleft()
            if sum(t for _, t in self.tokens) >= limits.tpm:
                return "tpm", self.tokens[0][0] + 60 - now
        if limits.concurrent is not None and self.in_flight >= limits.concurrent:
            return "concurrent", 1.0
        if limits.budget is not None:
            period_ms = _PERIOD_MS[limits.budget.period]
            index = int(now * 1000) // period_ms
            if index != self.period:
                self.period, self.spent = index, 0
            if self.spent >= limits.budget.tokens:
                return "budget", ((index + 1) * period_ms - now * 1000) / 1000
        return None


class Ticket:
    """One admitted request: what ``done`` releases and charges."""

    __slots__ = ("scopes", "rid", "shared", "meters")

    def __init__(self, scopes: tuple[Scope, ...], rid: str, shared: bool) -> None:
        self.scopes, self.rid, self.shared = scopes, rid, shared
        self.meters = any(s.limits.tpm is not None or s.limits.budget is not None for s in scopes)


class Limiter:
    """Admits requests against their scopes' limits; a no-op (``active`` False) when none are configured."""

    def __init__(self, config: RateLimits, store: AuthStore, *, keys_have_limits: bool, lease_s: float,
                 metrics=None) -> None:
        self.config = config
        self.active = keys_have_limits or bool(config.teams) or bool(config.tenants)
        self.metrics = metrics
        self._teams = {name: Scope("team", name, lim) for name, lim in config.teams.items() if not lim.empty()}
        self._tenants = {name: Scope("tenant", name, lim) for name, lim in config.tenants.items() if not lim.empty()}
        self._key_scopes: dict[str, Scope] = {}
        self._local: dict[tuple[str, str], _Local] = {}
        self._timeout = config.store_timeout_ms / 1000
        self._lease_ms = int(lease_s * 1000) + 5_000
        self._prefix = store.prefix + "limit:"
        self._ids = itertools.count()
        self._rid_base = f"{os.getpid()}.{time.time_ns() % 10**9}."
        self._redis: redis.Redis | None = None
        self._worker: Worker | None = None
        self._down_until = 0.0
        self._sha: dict[str, str] = {}
        if self.active and store.backend == "redis":
            self._redis = redis.Redis.from_url(store.url, socket_timeout=1.0, socket_connect_timeout=0.5)
            self._worker = Worker("vsr-limits")

    def start(self) -> None:
        if self._worker is not None:
            self._worker.start()
            self._worker.submit(self._warm)

    def _warm(self) -> None:
        """Connect and load the scripts before the first request needs them."""
        assert self._redis is not None
        self._sha["admit"] = self._redis.script_load(_ADMIT)
        self._sha["done"] = self._redis.script_load(_DONE)

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.stop()

    def scopes(self, identity: Identity) -> tuple[Scope, ...]:
        out = []
        if identity.limits is not None and identity.key_id is not None:
            s = self._key_scopes.get(identity.key_id)
            if s is None or s.limits is not identity.limits:
                s = self._key_scopes[identity.key_id] = Scope("key", identity.key_id, identity.limits)
            out.append(s)
        if identity.team is not None and identity.team in self._teams:
            out.append(self._teams[identity.team])
        if identity.tenant is not None and identity.tenant in self._tenants:
            out.append(self._tenants[identity.tenant])
        return tuple(out)

    async def admit(self, identity: Identity, api: str) -> Ticket | None:
        """A ticket for an admitted request (None when no limit applies); RateLimited otherwise."""
        scopes = self.scopes(identity)
        if not scopes:
            return None
        now = time.time()
        rid = self._rid_base + str(next(self._ids))
        refusal = None
        shared = False
        if self._worker is not None and now >= self._down_until:
            try:
                refusal = await self._worker.call(self._admit_shared, scopes, rid, int(now * 1000),
                                                  timeout=self._timeout)
                shared = True
            except (redis.RedisError, CallTimedOut, OSError) as exc:
                self._mark_down(exc)
        if not shared:
            refusal = self._admit_local(scopes, now)
        if refusal is not None:
            scope, limit, retry_s = refusal
            if self.metrics is not None:
                self.metrics.rate_limited.inc(api, scope.kind, limit)
            raise RateLimited(f"{scope.kind} {scope.name!r} is over its {_WORDS[limit]}; retry after "
                              f"{math.ceil(retry_s)} s", retry_after_s=math.ceil(retry_s))
        self._record_local(scopes, now)
        return Ticket(scopes, rid, shared)

    def done(self, ticket: Ticket, tokens: int) -> None:
        """Release the request's slot and charge its tokens; never waits."""
        now = time.time()
        for s in ticket.scopes:
            local = self._local_of(s)
            if s.limits.concurrent is not None:
                local.in_flight = max(0, local.in_flight - 1)
            if tokens > 0:
                if s.limits.tpm is not None:
                    local.tokens.append((now, tokens))
                if s.limits.budget is not None:
                    local.spent += tokens
        if self._worker is not None and (ticket.shared or tokens > 0) and now >= self._down_until:
            self._worker.submit(self._done_shared, ticket.scopes, ticket.rid, int(now * 1000), tokens)

    # --- local -----------------------------------------------------------------------

    def _local_of(self, s: Scope) -> _Local:
        local = self._local.get((s.kind, s.name))
        if local is None:
            local = self._local[(s.kind, s.name)] = _Local()
        return local

    def _admit_local(self, scopes: tuple[Scope, ...], now: float):
        for s in scopes:
            refused = self._local_of(s).refusal(s.limits, now)
            if refused is not None:
                return s, refused[0], refused[1]
        return None

    def _record_local(self, scopes: tuple[Scope, ...], now: float) -> None:
        # Kept whether Redis decided or not: when it goes away, this router's own recent traffic still counts.
        for s in scopes:
            local = self._local_of(s)
            if s.limits.rpm is not None:
                local.requests.append(now)
            if s.limits.concurrent is not None:
                local.in_flight += 1

    def _mark_down(self, exc: BaseException) -> None:
        if time.time() >= self._down_until:
            log.warning("rate limits: the shared store did not answer (%s); deciding locally for %.0f s",
                        type(exc).__name__, _DOWN_FOR_S)
        self._down_until = time.time() + _DOWN_FOR_S

    # --- shared (worker thread) ------------------------------------------------------------

    def _keys(self, scopes: tuple[Scope, ...], now_ms: int) -> list[str]:
        keys = []
        for s in scopes:
            base = f"{self._prefix}{s.kind}:{s.name}:"
            period = s.limits.budget.period if s.limits.budget is not None else None
            budget = f"{base}budget:{now_ms // _PERIOD_MS[period]}" if period else f"{base}budget"
            keys += (base + "rpm", base + "tpm", base + "inflight", budget)
        return keys

    def _eval(self, name: str, script: str, keys: list[str], args: list) -> object:
        assert self._redis is not None
        sha = self._sha.get(name)
        if sha is None:
            sha = self._sha[name] = self._redis.script_load(script)
        try:
            return self._redis.evalsha(sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:        # Redis restarted: its script cache is empty
            self._sha[name] = self._redis.script_load(script)
            return self._redis.evalsha(self._sha[name], len(keys), *keys, *args)

    def _admit_shared(self, scopes: tuple[Scope, ...], rid: str, now_ms: int):
        args: list = [now_ms, rid, self._lease_ms]
        for s in scopes:
            lim = s.limits
            args += (lim.rpm or 0, lim.tpm or 0, lim.concurrent or 0, lim.budget.tokens if lim.budget else 0)
        reply = self._eval("admit", _ADMIT, self._keys(scopes, now_ms), args)
        index = int(reply[0])
        if index < 0:
            return None
        limit = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
        return scopes[index], limit, max(int(reply[2]), 1) / 1000

    def _done_shared(self, scopes: tuple[Scope, ...], rid: str, now_ms: int, tokens: int) -> None:
        args: list = [now_ms, rid, tokens]
        for s in scopes:
            lim = s.limits
            args += (1 if lim.tpm else 0, 1 if lim.concurrent else 0,
                     _PERIOD_MS[lim.budget.period] if lim.budget else 0)
        self._eval("done", _DONE, self._keys(scopes, now_ms), args)


_WORDS = {"rpm": "requests per minute", "tpm": "tokens per minute", "concurrent": "requests in flight",
          "budget": "budget for the period"}
