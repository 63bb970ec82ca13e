"""Requests and tokens per key and per team in the current UTC day and month, for the admin API (LiteLLM's spend
per key and team), whether or not the key or team has limits.

The tokens are what each request was charged (``UsageMeter.tokens``). A router adds its counts up for a second and
then into Redis in one pipelined call (``usage:<key|team>:<name>:<period>:<number>`` hashes that expire after their
period), so every router's requests are in the admin API's answer within about a second; with no shared store
each router answers its own. Memory is one entry per key and team that called in a second (or, without a store,
per key and team of the current periods).
"""
from __future__ import annotations

import logging
import time

import trio

from ..events.redis_client import redis
from ..config.auth import AuthStore
from . import periods

log = logging.getLogger("vsr_fast.auth")

PERIODS = ("day", "month")
_FLUSH_S = 1.0
_KEEP_S = {"day": 2 * 86_400, "month": 32 * 86_400}     # a period's hash outlives it by a little (a late flush)
Scope = tuple[str, str]      # ("key", id) or ("team", name)


class Tally:
    def __init__(self, store: AuthStore, metrics=None) -> None:
        self._prefix = store.prefix + "usage:"
        self._redis = (redis.Redis.from_url(store.redis_url(), socket_timeout=2.0, socket_connect_timeout=1.0)
                       if store.backend == "redis" else None)
        self._new: dict[Scope, list[int]] = {}                     # since the last flush: [requests, tokens]
        self._own: dict[tuple[Scope, str], tuple[int, list[int]]] = {}   # no store: (period number, counts)
        self.metrics = metrics
        self.teams: frozenset[str] = frozenset()     # the teams the configuration names: a metric label each

    def add(self, key_id: str | None, team: str | None, tokens: int, now: float) -> None:
        """One request of ``key_id`` (and ``team``) ended, charged ``tokens``; never waits."""
        for scope in (("key", key_id), ("team", team)):
            if scope[1] is None:
                continue
            counts = self._new.setdefault(scope, [0, 0]) if self._redis is not None else None
            if counts is not None:
                counts[0] += 1
                counts[1] += tokens
            else:
                for period in PERIODS:
                    number = periods.current(period, now)[0]
                    held = self._own.get((scope, period))
                    if held is None or held[0] != number:
                        held = self._own[(scope, period)] = (number, [0, 0])
                    held[1][0] += 1
                    held[1][1] += tokens
        if self.metrics is not None and team is not None:
            # Bounded by the configuration: a team no declared key or rate limit names is counted as "other".
            label = team if team in self.teams else "other"
            self.metrics.team_requests.inc(label)
            self.metrics.team_tokens.inc(label, by=tokens)

    async def run(self) -> None:
        """Flush the counts into Redis every ``_FLUSH_S`` until cancelled (and once more on the way out)."""
        if self._redis is None:
            return
        try:
            while True:
                await trio.sleep(_FLUSH_S)
                await self._flush()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await self._flush()

    async def _flush(self) -> None:
        new, self._new = self._new, {}
        if not new:
            return
        now = time.time()
        try:
            await trio.to_thread.run_sync(self._write, new, now, abandon_on_cancel=True)
        except (redis.RedisError, OSError) as exc:
            log.warning("usage counts: the store did not take them (%s); %d scopes' counts kept for the next try",
                        type(exc).__name__, len(new))
            for scope, (requests, tokens) in new.items():     # bounded: one entry per scope, as before
                counts = self._new.setdefault(scope, [0, 0])
                counts[0] += requests
                counts[1] += tokens

    def _write(self, new: dict[Scope, list[int]], now: float) -> None:
        assert self._redis is not None
        pipe = self._redis.pipeline(transaction=False)
        for (kind, name), (requests, tokens) in new.items():
            for period in PERIODS:
                key = f"{self._prefix}{kind}:{name}:{period}:{periods.current(period, now)[0]}"
                pipe.hincrby(key, "requests", requests)
                pipe.hincrby(key, "tokens", tokens)
                pipe.expire(key, _KEEP_S[period])
        pipe.execute()

    def counts(self, scopes: list[Scope], now: float) -> list[dict[str, dict[str, int]]]:
        """Each scope's ``{"day": {"requests", "tokens"}, "month": {...}}`` (blocks on Redis: a thread's call)."""
        if self._redis is None:
            return [{p: _shown(held[1] if (held := self._own.get((s, p))) is not None
                               and held[0] == periods.current(p, now)[0] else [0, 0]) for p in PERIODS}
                    for s in scopes]
        pipe = self._redis.pipeline(transaction=False)
        for kind, name in scopes:
            for period in PERIODS:
                pipe.hgetall(f"{self._prefix}{kind}:{name}:{period}:{periods.current(period, now)[0]}")
        rows = iter(pipe.execute())
        return [{p: _shown([int((row := next(rows)).get(b"requests", 0)), int(row.get(b"tokens", 0))])
                 for p in PERIODS} for _ in scopes]


def _shown(counts: list[int]) -> dict[str, int]:
    return {"requests": counts[0], "tokens": counts[1]}
