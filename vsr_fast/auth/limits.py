"""Rate limits and budgets per key, team and tenant, shared by every router through Redis.

A request must not pay a Redis round trip (a worker-thread hand-off and
redis-py's encoding cost ~300 µs of CPU), so each router holds small leases:

- requests per minute: the router reserves ``k`` places in the shared sliding
  log at once (one atomic Lua call that never grants past the limit) and spends
  them locally; places left unused for a second are given back. Nothing is ever
  admitted that the shared log did not grant, so the limit holds across routers.
  Once fewer than ``4k`` places are left the log grants one at a time, so near
  the limit no router holds places it leased ahead while another is refused.
- requests in flight: the same with expiring leases (renewed while held, so a
  router that dies frees its places); a finished request's place is given back
  to the shared set at once (without waiting), as LiteLLM's parallel-request
  limit frees it, so the next request may take it on any router.
- tokens per minute and budgets: reserved at admission, settled from the answer's
  usage. A request reserves an estimate of its tokens (its body's size at four
  bytes a token, or what its scope's recent requests used, whichever is more)
  before anything awaits, and gives it back when it ends, its usage charged in
  its place. Every ``_SYNC_S`` the router adds its new tokens to the shared
  per-second buckets and reads the window's total back in one call; a request is
  admitted while that total plus what this router charged since and reserved for
  its requests in flight is under the limit. So a limit is passed by at most the
  last admitted request's reservation plus what admitted requests use beyond
  their reservations, and, across routers, one sync interval's tokens (as any
  after-the-fact count). A view older than ``_SYNC_S`` is refreshed before deciding.
  A budget's period is a hash of each router's share, which the router sets to
  what it charged this period (never lowering it): a Redis restarted without its
  data gets back, at the next sync, what every router still running charged.

``k`` is 1 under 50 requests (or places) a minute and grows to 64 with the
limit, so a small limit is exact and a large one costs one call per ``k``.
When Redis does not answer (one call, which every request waiting for the same
lease shares, given up after ``store_timeout_ms``) the router marks it away and
no request asks it again until a probe in the background finds it answering
(``_PROBE_S`` apart): meanwhile each router decides with its own windows alone,
which never let more than a limit through by themselves. Those windows are read
on every request, Redis up or not, so a Redis that comes back without what was
admitted meanwhile does not let a router past its limit again within the window.
"""
from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from dataclasses import dataclass

import trio

from ..events.redis_client import redis
from ..config.auth import AuthStore, Limits, RateLimits
from ..errors import RateLimited, shown
from ..headers import registry as h
from ..protocol.canonical import Identity
from . import periods
from .worker import CallTimedOut, Worker

log = logging.getLogger("vsr_fast.auth")

WINDOW_S = 60.0
_PROBE_S = 1.0             # how often a router asks a store marked away whether it answers again
_SYNC_S = 0.1              # how stale a router's view of the shared token counts may get
_IDLE_S = 1.0              # leased places unused this long go back
_LEASE_TTL_S = 30.0        # an in-flight lease not renewed for this long frees itself (a dead router's)

# KEYS[1] the sliding log. ARGV: now_ms, k, limit, member prefix, first member number.
# Grants up to k places (members scored now), one when fewer than 4k are left (see the module's docstring);
# returns {granted, retry_ms, places taken, ms until the oldest frees} (the last two for x-ratelimit-*).
_LEASE_RPM = """
local now, k, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
local room = limit - redis.call('ZCARD', KEYS[1])
local g = math.min(k, room)
if room < 4 * k then g = math.min(1, room) end
if g <= 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local retry = tonumber(oldest[2]) + 60000 - now
  return {0, retry, limit, retry}
end
local first = tonumber(ARGV[5])
for i = 0, g - 1 do redis.call('ZADD', KEYS[1], now, ARGV[4] .. (first + i)) end
redis.call('PEXPIRE', KEYS[1], 61000)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {g, 0, redis.call('ZCARD', KEYS[1]), tonumber(oldest[2]) + 60000 - now}
"""

# KEYS[1] the in-flight leases. ARGV: now_ms, k, limit, ttl_ms, member prefix, first member number.
# Grants up to k places, one when fewer than 4k are left.
_LEASE_CONC = """
local now, k, limit, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local room = limit - redis.call('ZCARD', KEYS[1])
local g = math.min(k, room)
if room < 4 * k then g = math.min(1, room) end
if g <= 0 then return 0 end
local first = tonumber(ARGV[6])
for i = 0, g - 1 do redis.call('ZADD', KEYS[1], now + ttl, ARGV[5] .. (first + i)) end
redis.call('PEXPIRE', KEYS[1], ttl + 1000)
return g
"""

# KEYS[1] a sorted set. ARGV: score (0: remove), the set's ttl_ms, members...: renews (XX) or removes places
# this router holds.
_PLACES = """
local score = tonumber(ARGV[1])
for i = 3, #ARGV do
  if score > 0 then redis.call('ZADD', KEYS[1], 'XX', score, ARGV[i]) else redis.call('ZREM', KEYS[1], ARGV[i]) end
end
if score > 0 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2])) end
return 1
"""

# KEYS[1] per-second token buckets, KEYS[2] the period's budget: each router's share (a hash field). ARGV: now_ms,
# tokens, budget ttl_ms, this router's name, what it charged the budget this period (its share: 0 without one).
# Adds this router's new tokens; sets its share, never lowering it, so a Redis that lost the hash (restarted
# without its data) gets back what every router still running charged. Returns {window total, earliest bucket
# second, budget used, budget ttl_ms}.
_TOKENS = """
local now, tokens, ttl, own = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
if tokens > 0 then
  redis.call('HINCRBY', KEYS[1], math.floor(now / 1000), tokens)
  redis.call('PEXPIRE', KEYS[1], 61000)
end
if own > tonumber(redis.call('HGET', KEYS[2], ARGV[4]) or '0') then
  redis.call('HSET', KEYS[2], ARGV[4], own)
  if redis.call('PTTL', KEYS[2]) < 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
local used = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do used = used + tonumber(v) end
local rows = redis.call('HGETALL', KEYS[1])
local sum, first, floor = 0, -1, math.floor((now - 60000) / 1000)
for j = 1, #rows, 2 do
  local s = tonumber(rows[j])
  if s <= floor then redis.call('HDEL', KEYS[1], rows[j]) else
    sum = sum + tonumber(rows[j + 1])
    if first < 0 or s < first then first = s end
  end
end
return {sum, first, used, redis.call('PTTL', KEYS[2])}
"""


@dataclass(frozen=True, slots=True)
class Scope:
    kind: str            # key, team, tenant
    name: str
    limits: Limits


class _Window:
    """A sliding 60 s count with its running total, so reading it never walks the window."""

    __slots__ = ("entries", "total")

    def __init__(self) -> None:
        self.entries: deque[tuple[float, int]] = deque()
        self.total = 0

    def add(self, now: float, n: int) -> None:
        self.entries.append((now, n))
        self.total += n

    def take_back(self, at: float, n: int) -> None:
        """Remove an entry ``add`` made at ``at`` (equal entries are interchangeable); none once it expired."""
        try:
            self.entries.remove((at, n))
        except ValueError:
            return
        self.total -= n

    def trim(self, now: float) -> None:
        since = now - WINDOW_S
        entries = self.entries
        while entries and entries[0][0] <= since:
            self.total -= entries.popleft()[1]

    def retry_s(self, now: float) -> float:
        return self.entries[0][0] + WINDOW_S - now if self.entries else 1.0


class _Local:
    """One scope's windows in this router alone: what decides when Redis is away."""

    __slots__ = ("requests", "tokens", "in_flight", "spent", "period", "reserved", "typical")

    def __init__(self) -> None:
        self.requests = _Window()
        self.tokens = _Window()
        self.in_flight = 0
        self.spent = 0
        self.period = -1
        self.reserved = 0           # tokens reserved by this router's requests in flight (settled by ``done``)
        self.typical = 0            # what this scope's recent requests used: a reservation's floor

    def refusal(self, limits: Limits, now: float) -> tuple[str, float] | None:
        if limits.rpm is not None:
            self.requests.trim(now)
            if self.requests.total >= limits.rpm:
                return "rpm", self.requests.retry_s(now)
        if limits.tpm is not None:
            self.tokens.trim(now)
            if self.tokens.total + self.reserved >= limits.tpm:
                return "tpm", _token_retry_s(self.tokens.total, limits.tpm, self.tokens.retry_s(now))
        if limits.concurrent is not None and self.in_flight >= limits.concurrent:
            return "concurrent", 1.0
        if limits.budget is not None:
            spent = self.spent_in(limits, now)
            if spent + self.reserved >= limits.budget.tokens:
                return "budget", _token_retry_s(spent, limits.budget.tokens, _period_left_s(limits, now))
        return None

    def spent_in(self, limits: Limits, now: float) -> int:
        """The tokens this router charged in the budget's current period."""
        assert limits.budget is not None
        index = periods.current(limits.budget.period, now)[0]
        if index != self.period:
            self.period, self.spent = index, 0
        return self.spent

    def settle(self, reserved: int, tokens: int) -> None:
        """A request's reservation given back; its usage, when it reported any, is what the next reserve."""
        self.reserved = max(0, self.reserved - reserved)
        if tokens > 0:
            self.typical = tokens if not self.typical else (3 * self.typical + tokens + 3) // 4


def budget_suffix(period: str, now: float) -> str:
    """The name, under a scope's keys, of the counter of its budget's current period."""
    return f"spent:{periods.current(period, now)[0]}"


def _period_left_s(limits: Limits, now: float) -> float:
    assert limits.budget is not None
    return periods.current(limits.budget.period, now)[1] - now


def _token_retry_s(used: int, limit: int, reset_s: float) -> float:
    """When to retry a request refused by a token limit: at its reset when the tokens are spent; in a second
    when only reservations of requests in flight fill it (they settle as those end)."""
    return reset_s if used >= limit else 1.0


class _Shared:
    """One scope's leases and view of the shared counts."""

    __slots__ = ("rpm_free", "rpm_since", "rpm_taken", "rpm_frees_at", "conc_free", "conc_held", "conc_since", "leasing", "tokens_new",
                 "tokens_seen", "tokens_first", "spent_seen", "budget_ttl_s", "synced", "syncing", "renewed",
                 "refused_until", "refused_retry_s", "lease_error")

    def __init__(self) -> None:
        self.rpm_free: list[str] = []          # places granted in the shared log, not yet spent
        self.rpm_since = 0.0
        self.rpm_taken = 0                     # places the shared log held at the last lease (this router's free ones in)
        self.rpm_frees_at = 0.0                # when the log's oldest place then frees
        self.conc_free: list[str] = []         # in-flight places this router holds and no request uses
        self.conc_held: set[str] = set()       # every in-flight place this router holds
        self.conc_since = 0.0
        self.leasing: trio.Event | None = None
        self.lease_error: BaseException | None = None   # how the last lease call ended, for those that waited
        self.tokens_new = 0                    # charged here, not yet added to the shared buckets
        self.tokens_seen = 0                   # the window's total at the last sync
        self.tokens_first = -1
        self.spent_seen = 0
        self.budget_ttl_s = 0.0
        self.synced = -1.0
        self.syncing: trio.Event | None = None
        self.renewed = time.time()
        self.refused_until = 0.0
        self.refused_retry_s = 1.0


# What a request took in one scope's shared leases: its rpm place and its in-flight place (None where none).
_Places = tuple[str | None, str | None]
_NO_PLACES: _Places = (None, None)


def _lease_size(limit: int) -> int:
    return max(1, min(64, limit // 50))


class Ticket:
    """One admitted request: what ``done`` releases and charges, and when it was admitted."""

    __slots__ = ("scopes", "places", "meters", "at", "headers", "reserved")

    def __init__(self, scopes: tuple[Scope, ...], places: list[_Places], at: float,
                 headers: list[tuple[bytes, bytes]], reserved: list[int]) -> None:
        self.scopes, self.places, self.at = scopes, places, at
        self.headers = headers          # x-ratelimit-* once this request took its places
        self.reserved = reserved        # the tokens reserved in each scope, given back by ``done``
        self.meters = any(_meters(s.limits) for s in scopes)


def _meters(lim: Limits) -> bool:
    return lim.tpm is not None or lim.budget is not None


class _Refused(Exception):
    def __init__(self, scope: Scope, limit: str, retry_s: float) -> None:
        self.scope, self.limit, self.retry_s = scope, limit, retry_s


class Limiter:
    """Admits requests against their scopes' limits; a no-op (``active`` False) when none are configured."""

    def __init__(self, config: RateLimits, store: AuthStore, *, keys_have_limits: bool, lease_s: float = 0.0,
                 metrics=None) -> None:
        self.active = keys_have_limits or bool(config.teams) or bool(config.tenants)
        self.metrics = metrics
        self._teams = {name: Scope("team", name, lim) for name, lim in config.teams.items() if not lim.empty()}
        self._tenants = {name: Scope("tenant", name, lim) for name, lim in config.tenants.items() if not lim.empty()}
        self._key_scopes: dict[str, Scope] = {}
        self._local: dict[tuple[str, str], _Local] = {}
        self._shared: dict[tuple[str, str], _Shared] = {}
        self._timeout = config.store_timeout_ms / 1000
        self._prefix = store.prefix + "limit:"
        self._next_member = 0
        self._member = f"{os.getpid()}.{time.time_ns() % 10**9}."
        self._redis: redis.Redis | None = None
        self._worker: Worker | None = None
        self._away = False           # the store did not answer; decide locally until a probe finds it again
        self._sha: dict[str, str] = {}
        if self.active and store.backend == "redis":
            self._redis = redis.Redis.from_url(store.redis_url(), socket_timeout=1.0, socket_connect_timeout=0.5)
            self._worker = Worker("vsr-limits")

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self._worker is not None:
            self._worker.start()
            self._worker.submit(self._warm)

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.stop()

    async def run(self) -> None:
        """Keep the shared view fresh and the leases tidy until cancelled; give every lease back on the way out."""
        if self._worker is None:
            return
        try:
            probed = 0.0
            while True:
                await trio.sleep(_SYNC_S)
                if not self._away:
                    await self._tend()
                elif time.monotonic() - probed >= _PROBE_S:
                    probed = time.monotonic()
                    await self._probe()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                for (kind, name), sh in list(self._shared.items()):
                    base = f"{self._prefix}{kind}:{name}:"
                    self._give_back(base + "rpm", sh.rpm_free)
                    self._give_back(base + "inflight", list(sh.conc_held))
                    sh.rpm_free, sh.conc_free, sh.conc_held = [], [], set()

    # --- the request path ------------------------------------------------------------------

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

    async def admit(self, identity: Identity, api: str, body_bytes: int | None = None) -> Ticket | None:
        """A ticket for an admitted request (None when no limit applies); RateLimited otherwise. ``body_bytes``
        (its Content-Length, when it declares one) sizes the tokens it reserves in a token limit."""
        scopes = self.scopes(identity)
        if not scopes:
            return None
        now = time.time()
        reserved = [0] * len(scopes)
        places = await self._places(scopes, api, now, spend=True, reserve=(body_bytes or 0) // 4,
                                    reserved=reserved)
        for s in scopes:
            local = self._local_of(s)
            if s.limits.rpm is not None:
                local.requests.add(now, 1)
            if s.limits.concurrent is not None:
                local.in_flight += 1
        return Ticket(scopes, places, now, self.rate_headers(scopes, now), reserved)

    async def check(self, identity: Identity, api: str) -> list[tuple[bytes, bytes]]:
        """RateLimited when ``admit`` would refuse a request now; admits nothing, counts nothing. Returns the
        x-ratelimit-* headers (none when no limit applies).

        For what asks the key's limits without being a request they count (count_tokens: authorised as a
        completion would be, charged as none). Places it leases to decide stay this router's to spend, and go
        back unused after ``_IDLE_S`` as any lease's do."""
        scopes = self.scopes(identity)
        if not scopes:
            return []
        now = time.time()
        await self._places(scopes, api, now, spend=False)
        return self.rate_headers(scopes, now)

    async def _places(self, scopes: tuple[Scope, ...], api: str, now: float, *, spend: bool, reserve: int = 0,
                      reserved: list[int] | None = None) -> list[_Places]:
        """Each scope's places, or RateLimited for the first that refuses; ``spend`` False: decide only, taking
        no place. With ``reserved`` (one slot a scope), the tokens reserved in each metered scope: ``reserve``
        or the scope's typical request, whichever is more."""
        places: list[_Places] = []
        try:
            for i, s in enumerate(scopes):
                # This router's own windows first, whether Redis answers or not: they count only its own
                # admissions, so they never refuse what the shared window would grant, and they keep a Redis
                # that comes back empty (or without what was admitted while it was away) from letting a
                # router past the limit a second time within the window.
                local = self._local_of(s)
                refused = local.refusal(s.limits, now)
                if refused is not None:
                    raise _Refused(s, *refused)
                if reserved is not None and _meters(s.limits):
                    # Taken before anything awaits, so a burst admitted meanwhile sees it (the shared check
                    # below leaves it out: it is this request's own).
                    reserved[i] = max(1, reserve, local.typical)
                    local.reserved += reserved[i]
                places.append(await self._admit_shared(s, now, spend, reserved[i] if reserved else 0)
                              if self._shared_up() else _NO_PLACES)
        except _Refused as r:
            for s, place in zip(scopes, places):
                self._unspend(s, place)
            for s, n in zip(scopes, reserved or ()):
                self._local_of(s).settle(n, 0)
            if self.metrics is not None:
                self.metrics.rate_limited.inc(api, r.scope.kind, r.limit)
            retry = _retry_after(r.retry_s)
            raise RateLimited(f"{r.scope.kind} {shown(r.scope.name)} is over its {_WORDS[r.limit]}; retry after "
                              f"{retry} s", retry_after_s=retry, headers=self.rate_headers(scopes, now, r)) from None
        return places

    # --- x-ratelimit-* ---------------------------------------------------------------------

    def rate_headers(self, scopes: tuple[Scope, ...], now: float,
                     refused: _Refused | None = None) -> list[tuple[bytes, bytes]]:
        """OpenAI's ``x-ratelimit-{limit,remaining,reset}-requests`` (and ``-tokens``) for the scope whose
        requests (tokens) per minute leave the fewest: what this router knows of the shared window (exact
        under 50 a minute, where every request leases its place; else as of the last lease or sync), never
        more than its own window leaves. ``reset`` is when the next place frees (the window's oldest entry
        leaves it), which on a 429 is its Retry-After. Only a request some limit applies to pays for this."""
        requests = tokens = None
        for s in scopes:
            lim = s.limits
            if lim.rpm is not None:
                left = self._requests_left(s, lim.rpm, now)
                if requests is None or left[0] < requests[1]:
                    requests = (lim.rpm, *left)
            if lim.tpm is not None:
                left = self._tokens_left(s, lim.tpm, now)
                if tokens is None or left[0] < tokens[1]:
                    tokens = (lim.tpm, *left)
            if lim.budget is not None:
                left = self._budget_left(s, lim, now)
                if tokens is None or left[0] < tokens[1]:
                    tokens = (lim.budget.tokens, *left)
        if refused is not None:
            # The trio of the window that refused is that window's, its reset the 429's Retry-After.
            lim, retry = refused.scope.limits, _retry_after(refused.retry_s)
            if refused.limit == "rpm":
                requests = (lim.rpm, 0, retry)
            elif refused.limit == "tpm":
                tokens = (lim.tpm, 0, retry)
            elif refused.limit == "budget":
                assert lim.budget is not None
                tokens = (lim.budget.tokens, 0, retry)
        out: list[tuple[bytes, bytes]] = []
        for names, found in ((_REQUEST_HEADERS, requests), (_TOKEN_HEADERS, tokens)):
            if found is not None:
                limit, left, reset_s = found
                out += [(names[0], b"%d" % limit), (names[1], b"%d" % max(0, left)), (names[2], _duration(reset_s))]
        return out

    def _requests_left(self, s: Scope, limit: int, now: float) -> tuple[int, float]:
        window = self._local_of(s).requests
        window.trim(now)
        left, reset_s = limit - window.total, window.retry_s(now) if window.entries else 0.0
        sh = self._shared.get((s.kind, s.name))
        if sh is not None and sh.rpm_taken and self._shared_up():
            left = min(left, limit - sh.rpm_taken + len(sh.rpm_free))
            reset_s = sh.rpm_frees_at - now
        return left, reset_s

    def _tokens_left(self, s: Scope, limit: int, now: float) -> tuple[int, float]:
        window = self._local_of(s).tokens
        window.trim(now)
        left, reset_s = limit - window.total, window.retry_s(now) if window.entries else 0.0
        sh = self._shared.get((s.kind, s.name))
        if sh is not None and sh.synced >= 0 and self._shared_up():
            left = min(left, limit - sh.tokens_seen - sh.tokens_new)
            reset_s = sh.tokens_first + 1 + WINDOW_S - now if sh.tokens_first >= 0 else reset_s
        return left, reset_s

    def _budget_left(self, s: Scope, lim: Limits, now: float) -> tuple[int, float]:
        """A budget's tokens left in its period (less what requests in flight here reserved) and its reset."""
        assert lim.budget is not None
        local = self._local_of(s)
        spent = local.spent_in(lim, now)
        sh = self._shared.get((s.kind, s.name))
        if sh is not None and sh.synced >= 0 and self._shared_up():
            spent = max(spent, sh.spent_seen + sh.tokens_new)
        return lim.budget.tokens - spent - local.reserved, _period_left_s(lim, now)

    def own_use(self, key_id: str, lim: Limits, now: float) -> tuple[int, int, int]:
        """What this router alone charged key ``key_id``: its budget's tokens this period, its tokens and requests
        in the last minute (``auth.spend``, without a shared store)."""
        local = self._local.get(("key", key_id))
        if local is None:
            return 0, 0, 0
        local.tokens.trim(now)
        local.requests.trim(now)
        spent = local.spent_in(lim, now) if lim.budget is not None else 0
        return spent, local.tokens.total, local.requests.total

    def done(self, ticket: Ticket, tokens: int, *, counted: bool = True) -> None:
        """Release the request's places and charge its tokens; never waits. ``counted`` False: the request
        was refused for the name its key may not call (``auth.access``) before any routing work; it gives its
        place in the requests-per-minute window back, as if never admitted."""
        now = time.time()
        for s, places, reserved in zip(ticket.scopes, ticket.places, ticket.reserved):
            local = self._local_of(s)
            local.settle(reserved, tokens)
            if not counted:
                if s.limits.rpm is not None:
                    local.requests.take_back(ticket.at, 1)
                self._unspend(s, (places[0], None))
            place = places[1]
            if s.limits.concurrent is not None:
                local.in_flight = max(0, local.in_flight - 1)
            if tokens > 0:
                if s.limits.tpm is not None:
                    local.tokens.add(now, tokens)
                if s.limits.budget is not None:
                    local.spent_in(s.limits, now)       # a period that ended since starts from none
                    local.spent += tokens
            sh = self._shared.get((s.kind, s.name))
            if sh is not None:
                if place is not None:
                    sh.conc_held.discard(place)
                    self._give_back(f"{self._prefix}{s.kind}:{s.name}:inflight", [place])
                if tokens > 0 and (s.limits.tpm is not None or s.limits.budget is not None):
                    sh.tokens_new += tokens

    # --- local ---------------------------------------------------------------------------

    def _local_of(self, s: Scope) -> _Local:
        local = self._local.get((s.kind, s.name))
        if local is None:
            local = self._local[(s.kind, s.name)] = _Local()
        return local

    def _shared_of(self, s: Scope) -> _Shared:
        sh = self._shared.get((s.kind, s.name))
        if sh is None:
            sh = self._shared[(s.kind, s.name)] = _Shared()
        return sh

    def _shared_up(self) -> bool:
        return self._worker is not None and not self._away

    def _mark_down(self, exc: BaseException) -> None:
        if not self._away:
            log.warning("rate limits: the shared store did not answer (%s); deciding locally until it does",
                        type(exc).__name__)
        self._away = True

    async def _probe(self) -> None:
        """Ask a store marked away whether it answers (off the request path: no request waits for it)."""
        assert self._worker is not None and self._redis is not None
        try:
            await self._worker.call(self._redis.ping, timeout=self._timeout)
        except (redis.RedisError, CallTimedOut, OSError):
            return
        self._answered()

    def _answered(self) -> None:
        """A shared call succeeded: say so once after an outage (operators and tests read the pair)."""
        if self._away:
            self._away = False
            log.warning("rate limits: the shared store answers again; sharing the windows")

    # --- shared ----------------------------------------------------------------------------

    async def _admit_shared(self, s: Scope, now: float, spend: bool = True, own: int = 0) -> _Places:
        """Spend one leased place of each count limit, leasing more when none is left; the places taken (the
        in-flight one is given back by ``done``). Admits on the local windows alone when Redis is away.
        ``spend`` False: only make sure a place is there (leased), spending none. ``own``: the tokens this
        request reserved, in this router's reservations already."""
        lim, sh = s.limits, self._shared_of(s)
        rpm_place = None
        try:
            if lim.tpm is not None or lim.budget is not None:
                if now - sh.synced > _SYNC_S:
                    await self._sync(s, sh)
                refused = self._token_refusal(lim, sh, now, self._local_of(s).reserved - own)
                if refused is not None:
                    raise _Refused(s, *refused)
            if lim.rpm is not None:
                if not sh.rpm_free and now < sh.refused_until:
                    # Refused a moment ago: a flood of refusals asks Redis at most once per _SYNC_S.
                    raise _Refused(s, "rpm", sh.refused_retry_s)
                while not sh.rpm_free:
                    await self._lease(s, sh, "rpm", now)
                if spend:
                    rpm_place = sh.rpm_free.pop()
                    sh.rpm_since = now
            if lim.concurrent is not None:
                while not sh.conc_free:
                    await self._lease(s, sh, "concurrent", now)
                return rpm_place, sh.conc_free.pop() if spend else None
            return rpm_place, None
        except (redis.RedisError, CallTimedOut, OSError) as exc:
            self._mark_down(exc)      # ``admit`` read this router's own windows already: they decide alone
            if rpm_place is not None:
                self._shared_of(s).rpm_free.append(rpm_place)   # not admitted by the shared window after all
            return _NO_PLACES

    def _token_refusal(self, lim: Limits, sh: _Shared, now: float, reserved: int) -> tuple[str, float] | None:
        """The shared token window or budget that refuses, counting what others in flight here reserved."""
        used = sh.tokens_seen + sh.tokens_new
        if lim.tpm is not None and used + reserved >= lim.tpm:
            first = sh.tokens_first
            return "tpm", _token_retry_s(used, lim.tpm, (first + 1 + WINDOW_S - now) if first >= 0 else 1.0)
        spent = sh.spent_seen + sh.tokens_new
        if lim.budget is not None and spent + reserved >= lim.budget.tokens:
            return "budget", _token_retry_s(spent, lim.budget.tokens, sh.budget_ttl_s or 1.0)
        return None

    def _unspend(self, s: Scope, places: _Places) -> None:
        """A request admitted by an earlier scope and refused by a later one (or refused for its key's access
        after): the places it took are this router's to spend again."""
        sh = self._shared.get((s.kind, s.name))
        if sh is None:
            return
        rpm, conc = places
        if rpm is not None:
            sh.rpm_free.append(rpm)
        if conc is not None:
            sh.conc_free.append(conc)

    async def _lease(self, s: Scope, sh: _Shared, which: str, now: float) -> None:
        """One lease call per scope at a time: the others wait for it and share its outcome (a refusal, or a
        store that did not answer, which they must not ask again one after another on the one worker thread)."""
        if sh.leasing is not None:
            await sh.leasing.wait()
            if sh.lease_error is not None:
                raise sh.lease_error
            return
        if not self._shared_up():
            raise CallTimedOut("the shared store is marked away")      # by a call another request waited for
        sh.leasing = trio.Event()
        sh.lease_error = None
        try:
            assert self._worker is not None
            base = f"{self._prefix}{s.kind}:{s.name}:"
            limit = s.limits.rpm if which == "rpm" else s.limits.concurrent
            assert limit is not None
            k = _lease_size(limit)
            first = self._next_member          # the k member names this lease may use, never reused
            self._next_member += k
            if which == "rpm":
                granted, retry_ms, taken, frees_ms = await self._worker.call(
                    self._eval, "lease_rpm", _LEASE_RPM, [base + "rpm"],
                    [int(now * 1000), k, limit, self._member, first], timeout=self._timeout)
                self._answered()
                sh.rpm_taken, sh.rpm_frees_at = int(taken), now + int(frees_ms) / 1000
                if int(granted) <= 0:
                    sh.refused_retry_s = int(retry_ms) / 1000
                    sh.refused_until = now + min(sh.refused_retry_s, _SYNC_S)
                    raise _Refused(s, "rpm", sh.refused_retry_s)
                sh.rpm_free += [f"{self._member}{first + i}" for i in range(int(granted))]
            else:
                granted = await self._worker.call(
                    self._eval, "lease_conc", _LEASE_CONC, [base + "inflight"],
                    [int(now * 1000), k, limit, int(_LEASE_TTL_S * 1000), self._member, first],
                    timeout=self._timeout)
                self._answered()
                if int(granted) <= 0:
                    raise _Refused(s, "concurrent", 1.0)
                new = [f"{self._member}{first + i}" for i in range(int(granted))]
                sh.conc_free += new
                sh.conc_held.update(new)
                sh.conc_since = now
        except (_Refused, redis.RedisError, CallTimedOut, OSError) as exc:
            # Shared with those waiting; a cancellation is not: it is this request's own, the others lease again.
            sh.lease_error = exc
            raise
        finally:
            sh.leasing.set()
            sh.leasing = None

    async def _sync(self, s: Scope, sh: _Shared) -> None:
        """Add this router's new tokens to the shared counts and read them back (one call at a time)."""
        if sh.syncing is not None:
            await sh.syncing.wait()
            return
        if not self._shared_up():
            raise CallTimedOut("the shared store is marked away")
        sh.syncing = trio.Event()
        try:
            assert self._worker is not None
            now = time.time()
            base = f"{self._prefix}{s.kind}:{s.name}:"
            budget = s.limits.budget
            period = budget.period if budget is not None else "minute"
            budget_key = base + budget_suffix(period, now)
            ttl_ms = int((periods.current(period, now)[1] - now) * 1000) + 1
            pushed = sh.tokens_new
            own = self._local_of(s).spent_in(s.limits, now) if budget is not None else 0
            total, first, spent, budget_ttl = await self._worker.call(
                self._eval, "tokens", _TOKENS, [base + "tpm", budget_key],
                [int(now * 1000), pushed, ttl_ms, self._member, own], timeout=self._timeout)
            self._answered()
            sh.tokens_new -= pushed
            sh.tokens_seen, sh.tokens_first, sh.spent_seen = int(total), int(first), int(spent)
            sh.budget_ttl_s = max(int(budget_ttl), 0) / 1000
            sh.synced = now
        finally:
            sh.syncing.set()
            sh.syncing = None

    async def _tend(self) -> None:
        """Push new tokens, renew held in-flight leases, give back what stayed idle."""
        now = time.time()
        for key, sh in list(self._shared.items()):
            s = self._scope_named(*key)
            if s is None or not self._shared_up():
                continue
            base = f"{self._prefix}{s.kind}:{s.name}:"
            try:
                if sh.tokens_new or (now - sh.synced > 1.0 and sh.synced >= 0):
                    await self._sync(s, sh)
                if sh.rpm_free and now - sh.rpm_since > _IDLE_S:
                    idle, sh.rpm_free = sh.rpm_free, []
                    self._give_back(base + "rpm", idle)
                if sh.conc_free and now - sh.conc_since > _IDLE_S:
                    idle, sh.conc_free = sh.conc_free, []
                    sh.conc_held.difference_update(idle)
                    self._give_back(base + "inflight", idle)
                if sh.conc_held and now - sh.renewed > _LEASE_TTL_S / 3:
                    sh.renewed = now
                    assert self._worker is not None
                    self._worker.submit(self._eval, "places", _PLACES, [base + "inflight"],
                                        [int((now + _LEASE_TTL_S) * 1000), int(_LEASE_TTL_S * 1000) + 1000,
                                         *sh.conc_held])
            except (redis.RedisError, CallTimedOut, OSError) as exc:
                self._mark_down(exc)

    def _scope_named(self, kind: str, name: str) -> Scope | None:
        if kind == "key":
            return self._key_scopes.get(name)
        return (self._teams if kind == "team" else self._tenants).get(name)

    def _give_back(self, key: str, members: list[str]) -> None:
        if members and self._worker is not None:
            self._worker.submit(self._eval, "places", _PLACES, [key], [0, 0, *members])

    # --- the worker thread -------------------------------------------------------------------

    def _warm(self) -> None:
        """Connect and load the scripts before the first request needs them."""
        assert self._redis is not None
        for name, script in _SCRIPTS.items():
            self._sha[name] = self._redis.script_load(script)

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


def _duration(seconds: float) -> bytes:
    """A wait as OpenAI writes it in x-ratelimit-reset-*: whole seconds, rounded up ("0s", "17s", "1m0s",
    "8h1m17s")."""
    n = max(0, math.ceil(seconds))
    if n < 60:
        return b"%ds" % n
    if n < 3600:
        return b"%dm%ds" % divmod(n, 60)
    hours, rest = divmod(n, 3600)
    return b"%dh%dm%ds" % (hours, *divmod(rest, 60))


def _retry_after(retry_s: float) -> int:
    """A refusal's Retry-After in whole seconds (at least one): its x-ratelimit-reset-* too."""
    return math.ceil(max(retry_s, 1.0))


_REQUEST_HEADERS = (h.RATELIMIT_LIMIT_REQUESTS.encode(), h.RATELIMIT_REMAINING_REQUESTS.encode(),
                    h.RATELIMIT_RESET_REQUESTS.encode())
_TOKEN_HEADERS = (h.RATELIMIT_LIMIT_TOKENS.encode(), h.RATELIMIT_REMAINING_TOKENS.encode(),
                  h.RATELIMIT_RESET_TOKENS.encode())
_SCRIPTS = {"lease_rpm": _LEASE_RPM, "lease_conc": _LEASE_CONC, "places": _PLACES, "tokens": _TOKENS}
_WORDS = {"rpm": "requests per minute", "tpm": "tokens per minute", "concurrent": "requests in flight",
          "budget": "budget for the period"}
