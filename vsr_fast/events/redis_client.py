"""redis-py, loaded by the first part that opens a Redis.

Importing redis-py costs ~50 ms of a start's CPU (its parsers, its cluster and asyncio clients, and the
OpenTelemetry SDK it loads where that is installed); most routers name no Redis and never need it. Modules that
open a Redis bind ``redis`` here (a type checker sees the package itself); handlers in code that also runs with
no Redis catch ``errors()``, so a failure of another kind does not load the package just to name its class.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any


class _OnFirstUse:
    """Stands for the ``redis`` module: the first attribute read (``redis.Redis.from_url``) imports it."""

    def __getattr__(self, name: str) -> Any:
        import redis

        value = getattr(redis, name)
        setattr(self, name, value)      # read once: later reads are a plain attribute, not this hook
        return value


if TYPE_CHECKING:
    import redis as redis
else:
    redis = _OnFirstUse()


def errors() -> tuple[type[Exception], ...]:
    """``(redis.RedisError,)`` once redis-py is loaded, else none: before any client exists nothing raises one.
    For an ``except (OSError, *errors())`` clause."""
    loaded = sys.modules.get("redis")
    return () if loaded is None else (loaded.RedisError,)


__all__ = ["errors", "redis"]
