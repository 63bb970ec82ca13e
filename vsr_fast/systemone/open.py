"""Starting the deployments a configuration resolves to, and only those (spec 5.9)."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..config import Loaded
from ..config.catalog import Deployment, DeploymentAuth
from ..config.schema import ProviderModel
from .client import SystemOneClient
from .deployments import runner


def alias_key(alias: str) -> str:
    """The runner key of a native alias served by its own backend_refs."""
    return f"alias:{alias}"


def _alias_deployment(model: ProviderModel) -> Deployment:
    """A native alias's first backend_ref as a remote System One deployment."""
    ref = model.backend_refs[0]
    auth = ref.auth
    return Deployment(
        provider="systemone", endpoint=ref.endpoint, model=model.provider_model_id,
        timeout_ms=min(ref.read_timeout_ms, 60_000),
        auth=DeploymentAuth(api_key_env=auth.api_key_env, header=auth.header, prefix=auth.prefix) if auth else None,
    )


@asynccontextmanager
async def open_systemone(loaded: Loaded) -> AsyncIterator[SystemOneClient | None]:
    """A client over the deployments some rule or native alias resolves to; None when nothing asks System One."""
    table = loaded.table
    used = table.used_deployments()
    aliases = {n: m for n, m in table.native_aliases().items() if m.backend_refs}
    if not used and not aliases:
        yield None
        return
    for name in used:
        if table.deployments[name].provider == "model_runtime" and not table.deployments[name].endpoint:
            table.ensure_model(name)
    runners = {name: runner(name, table.deployments[name], table.decision_models) for name in used}
    runners.update({alias_key(n): runner(alias_key(n), _alias_deployment(m), {}) for n, m in aliases.items()})
    client = SystemOneClient(runners, loaded.version_hash)
    try:
        yield client
    finally:
        await client.aclose()
