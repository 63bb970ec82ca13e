"""Starting the deployments a configuration resolves to, and only those (spec 5.9)."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..config import Loaded
from .client import SystemOneClient
from .deployments import runner


@asynccontextmanager
async def open_systemone(loaded: Loaded) -> AsyncIterator[SystemOneClient | None]:
    """A client over the deployments some rule resolves to; None when no rule asks System One."""
    table = loaded.table
    used = table.used_deployments()
    if not used:
        yield None
        return
    runners = {name: runner(name, table.deployments[name], table.decision_models) for name in used}
    client = SystemOneClient(runners, loaded.version_hash)
    try:
        yield client
    finally:
        await client.aclose()
