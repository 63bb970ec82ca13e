"""A key's spend, as LiteLLM's ``/key/info`` shows it: its budget's use in the current period and its tokens and
requests in the last minute, for the admin routes (``GET /api/v1/keys``).

Read from the counts the limits share in Redis (every router's charges, as of each router's last sync, at most
``limits._SYNC_S`` old), or from this router's own windows when there is no shared store. The requests count
is the shared log's places, which hold the few a router leased ahead and has not spent yet (none under 50 a
minute, where each request leases its own).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ..config.auth import Limits
from . import periods
from .limits import WINDOW_S, Limiter, budget_suffix

if TYPE_CHECKING:
    import redis


class BudgetUse(msgspec.Struct, kw_only=True):
    tokens: int
    period: str
    used: int
    remaining: int
    period_end_ms: int          # when the period ends and its count starts again (Unix ms)


class WindowUse(msgspec.Struct, kw_only=True):
    limit: int
    used: int                   # in the last 60 s


class Usage(msgspec.Struct, kw_only=True, omit_defaults=True):
    budget: BudgetUse | None = None
    tpm: WindowUse | None = None
    rpm: WindowUse | None = None


def _usage(lim: Limits, now: float, spent: int, tokens: int, requests: int) -> Usage:
    out = Usage()
    if lim.budget is not None:
        end = periods.current(lim.budget.period, now)[1]
        out.budget = BudgetUse(tokens=lim.budget.tokens, period=lim.budget.period, used=spent,
                               remaining=max(0, lim.budget.tokens - spent), period_end_ms=int(end * 1000))
    if lim.tpm is not None:
        out.tpm = WindowUse(limit=lim.tpm, used=tokens)
    if lim.rpm is not None:
        out.rpm = WindowUse(limit=lim.rpm, used=requests)
    return out


def shared(r: redis.Redis, prefix: str, keys: Sequence[tuple[str, Limits]], now: float | None = None) -> list[Usage]:
    """Each key's usage from the shared counts under the store's ``prefix``: one pipelined round trip (blocks)."""
    now = time.time() if now is None else now
    now_ms = int(now * 1000)
    pipe = r.pipeline(transaction=False)
    for key_id, lim in keys:
        base = f"{prefix}limit:key:{key_id}:"
        if lim.budget is not None:
            pipe.hvals(base + budget_suffix(lim.budget.period, now))     # each router's share
        if lim.tpm is not None:
            pipe.hgetall(base + "tpm")
        if lim.rpm is not None:     # the rpm script drops places scored at or before 60 s ago
            pipe.zcount(base + "rpm", f"({now_ms - int(WINDOW_S * 1000)}", "+inf")
    replies = iter(pipe.execute())
    floor = (now_ms - int(WINDOW_S * 1000)) // 1000     # the tokens script's: buckets at or before it are gone
    out = []
    for _, lim in keys:
        spent = sum(int(v) for v in next(replies)) if lim.budget is not None else 0
        tokens = sum(int(v) for s, v in next(replies).items() if int(s) > floor) if lim.tpm is not None else 0
        requests = int(next(replies)) if lim.rpm is not None else 0
        out.append(_usage(lim, now, spent, tokens, requests))
    return out


def local(limiter: Limiter, keys: Sequence[tuple[str, Limits]], now: float | None = None) -> list[Usage]:
    """Each key's usage in this router's own windows (no shared store)."""
    now = time.time() if now is None else now
    return [_usage(lim, now, *limiter.own_use(key_id, lim, now)) for key_id, lim in keys]
