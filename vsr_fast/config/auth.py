"""``global.router.auth`` and ``global.router.rate_limits``: who may call, and how much.

Client keys are an identity source inside the router (the other is a trusted
listener's identity headers). A key is never written here: only its SHA-256,
so the file can be committed. Keys created with ``vsr-fast keys create`` live
in Redis under ``store.prefix`` and reach every router sharing it.
"""
from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, field

from .schema_base import Block
from .stores import RedisAt

Sha256Hex = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]


class Budget(Block):
    """A token budget per period, counted from the answers' usage, whole and streamed alike; each request
    reserves its estimated tokens at admission (settled from its usage), so requests in flight cannot spend
    it many times over. A declared pricing is reported (the cost header, the events), never limited. Periods are
    UTC calendar periods: a day from midnight UTC, a month from the 1st (not 30 days), an hour and a minute the
    clock's; the budget starts from nothing with each."""

    tokens: Annotated[int, Meta(ge=1)]
    period: Literal["minute", "hour", "day", "month"] = "day"


class Limits(Block):
    """Limits of one key, team or tenant; an unset one does not apply."""

    rpm: Annotated[int, Meta(ge=1)] | None = None               # requests per minute (sliding window)
    tpm: Annotated[int, Meta(ge=1)] | None = None               # tokens per minute, counted from usage
    concurrent: Annotated[int, Meta(ge=1)] | None = None        # requests in flight
    budget: Budget | None = None

    def empty(self) -> bool:
        return self.rpm is None and self.tpm is None and self.concurrent is None and self.budget is None


class ClientKey(Block):
    """A declared key: the identity it maps to and what it may reach."""

    id: Annotated[str, Meta(min_length=1, max_length=128)]
    sha256: Sha256Hex
    user: str | None = None
    team: str | None = None
    tenant: str | None = None
    groups: list[str] = field(default_factory=list)            # labels role_bindings' Group subjects match
    entrypoints: list[str] = field(default_factory=list)       # model names of entrypoints it may call; empty: all
    models: list[str] = field(default_factory=list)            # provider models it may name or be routed to; empty: all
    admin: bool = False                                        # may call the admin routes on the serving listener
    limits: Limits = Limits()


class AuthStore(RedisAt):
    """Where stored keys and shared limit windows live: Redis, shared by every router. Without it (``none``) each
    process keeps its own windows: under ``serve --workers N`` every worker enforces each key's, team's and
    tenant's limits apart, so the effective limit is up to N times the declared one (said at start). Run that Redis
    persistent (``appendonly yes``, or RDB snapshots): stored keys, budgets and windows are its data. One that
    restarts empty loses the stored keys (restore or create them again) and the rpm and tpm windows (each
    router's own windows still hold it to each limit within the minute); each budget gets back, within a second,
    what every router still running charged it this period, but not the share of a router restarted since."""

    backend: Literal["redis", "none"] = "none"
    prefix: Annotated[str, Meta(min_length=1)] = "vsr:auth:"
    # How often each router checks the keys' version: a revocation or rotation reaches every router within
    # this (the router whose admin route made it applies it before answering).
    refresh_ms: Annotated[int, Meta(ge=50, le=1_000)] = 250


class ClientAuth(Block):
    """``global.router.auth``: off by default (the quickstart); on, every client API needs a key."""

    enabled: bool = False
    keys: list[ClientKey] = field(default_factory=list)
    store: AuthStore = AuthStore()


class RateLimits(Block):
    """``global.router.rate_limits``: limits per team and tenant (a key's own sit on the key)."""

    teams: dict[str, Limits] = field(default_factory=dict)
    tenants: dict[str, Limits] = field(default_factory=dict)
    # How long a router waits for the shared window before deciding alone with its local one: long enough for
    # a busy host's round trip (a timed-out admission may still count in Redis), short against a dead one.
    store_timeout_ms: Annotated[int, Meta(ge=1, le=10_000)] = 2_000
