"""Starting the deployments a configuration resolves to, and only those (spec 5.9)."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import dataclasses
import logging

import httpx
import msgspec
import trio

from .loaded import Loaded
from ..errors import ConfigError
from .plan import RoutingTable
from ..signals.base import CompileErrors
from ..systemone.capabilities import Capable
from ..systemone.deployments import Attached
from ..systemone.runtime import CONTRACT
from ..config.catalog import SYSTEMONE_MAX_RESPONSE_BYTES, Deployment, DeploymentAuth
from ..config.schema import BACKEND_MAX_RESPONSE_BYTES, ProviderModel
from ..systemone.client import SystemOneClient
from ..systemone.deployments import runner

log = logging.getLogger("vsr_fast.systemone")


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
        # A System One answer is small: the provider default (64 MiB) left unset is a deployment's (1 MiB).
        max_response_bytes=SYSTEMONE_MAX_RESPONSE_BYTES if ref.max_response_bytes == BACKEND_MAX_RESPONSE_BYTES
        else ref.max_response_bytes,
        # A backend's unset header and prefix are a deployment's defaults (Authorization, Bearer).
        auth=DeploymentAuth(api_key=auth.api_key, api_key_env=auth.api_key_env, api_key_file=auth.api_key_file,
                            header=auth.header or "Authorization",
                            prefix="Bearer" if auth.prefix is None else auth.prefix,
                            credential=auth.credential) if auth else None,
    )


async def read_attached_cards(loaded: Loaded) -> Loaded:
    """Read each attached runtime's model card and check the rules against it (spec 5.9).

    A card that refuses a rule fails the start like a load error; a runtime that
    does not answer is logged and its questions stay unknown until it does.
    """
    table = loaded.table
    attached = {n: table.deployments[n] for n in table.used_deployments()
                if table.deployments[n].provider == "model_runtime" and table.deployments[n].endpoint}
    if not attached:
        return loaded
    found: dict[str, Capable] = {}
    errors: list[str] = []
    for name, dep in attached.items():
        runtime = Attached(name, dep)
        try:
            with trio.move_on_after(5):
                listing = await runtime.models()
        except (httpx.HTTPError, msgspec.DecodeError) as exc:
            log.warning("attached runtime %s did not give its model card: %s", name, exc)
            continue
        finally:
            await runtime.aclose()
        if not listing.models:
            continue
        card = listing.models[0]
        if card.contract and card.contract != CONTRACT:
            errors.append(f"global.model_catalog.deployments.{name}: incompatible: the runtime at {dep.endpoint} "
                          f"speaks contract {card.contract}; this router needs {CONTRACT}")
            continue
        found[name] = Capable(name, "attached", frozenset(card.question_types), frozenset(card.modalities or ["text"]),
                              model=card.name)
    compile_errors = CompileErrors()
    warnings: list[str] = []
    table = RoutingTable(loaded.config, compile_errors, warnings, attached=found)
    errors += compile_errors.lines
    if errors:
        raise ConfigError(errors)
    return dataclasses.replace(loaded, table=table, warnings=loaded.warnings + warnings)


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
    client = SystemOneClient(runners, loaded.version_hash,
                             on_overload=loaded.config.global_.model_catalog.on_signal_overload)
    try:
        yield client
    finally:
        await client.aclose()
