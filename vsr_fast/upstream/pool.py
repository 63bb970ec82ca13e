"""Connection pools: a few small, shared httpcore pools per backend.

httpcore's pool does work proportional to its size on every request
(STACK-NOTES: 1.35 ms CPU with 1 pooled connection, 5.6 ms with 64), so a
backend gets ``pool_shards`` pools of ``max_connections`` each, used round
robin, instead of one large pool. Pools are built once, sharing one SSL context
(~40 ms of CPU to build). No cookie jar anywhere: one pool serves every user,
so a kept cookie would ride on the next user's request.
"""
from __future__ import annotations

import itertools
import os
from contextlib import asynccontextmanager
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpcore

from ..config.schema import BackendRef, ProviderModel, RouterConfig
from .transport import Origin, new_pool, ssl_context


def base_url(ref: BackendRef) -> str:
    """The backend's API base: a bare ``host:port`` is http, an empty path is ``/v1``."""
    endpoint = ref.endpoint
    if "://" not in endpoint:
        endpoint = f"{ref.protocol or 'http'}://{endpoint}"
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/") or "/v1"
    return f"{parts.scheme}://{parts.netloc}{path}"


class Backend:
    """One backend_ref of one provider model, with its clients and credential."""

    def __init__(self, model: ProviderModel, ref: BackendRef, index: int, context) -> None:
        self.model = model
        self.label = ref.name or f"{model.name}[{index}]"
        self.base = base_url(ref)
        self.origin = Origin(self.base)
        key = _key(ref)
        self.auth: tuple[bytes, bytes] | None = _auth_header(ref, key, model.api_format)
        # A delegated backend acts for the requesting user: the request's own credential goes under this
        # header and prefix (spec 6.7); no key of the router's.
        self.delegated: tuple[str, str] | None = _place(ref, model.api_format) \
            if ref.auth is not None and ref.auth.credential == "delegated" else None
        self.secret = key.encode() if key else None     # struck from any error body a backend echoes it in
        self.max_response_bytes = ref.max_response_bytes
        self.max_pending = ref.max_pending or 4 * ref.max_connections * ref.pool_shards
        self.pending = 0        # attempts sent or waiting for a connection, streams until closed
        read = ref.read_timeout_ms / 1000
        self.timeouts = {"connect": ref.connect_timeout_ms / 1000, "read": read, "write": read, "pool": read}
        self._pools = [new_pool(ref.max_connections, context) for _ in range(ref.pool_shards)]
        self._cycle = itertools.cycle(self._pools)

    def pool(self) -> httpcore.AsyncConnectionPool:
        """The next pool shard."""
        return next(self._cycle)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


# A provider's own credential header and prefix (spec 6.7: a backend defaults to its provider's).
PROVIDER_AUTH = {"anthropic": ("x-api-key", "")}
DEFAULT_AUTH = ("Authorization", "Bearer")


def _key(ref: BackendRef) -> str | None:
    auth = ref.auth
    if auth is None:
        return None
    return (os.environ.get(auth.api_key_env) if auth.api_key_env else auth.api_key) or None


def _place(ref: BackendRef, api_format: str) -> tuple[str, str]:
    """The header and prefix a credential travels under: the backend's, else its provider's own."""
    auth = ref.auth
    assert auth is not None
    default_header, default_prefix = PROVIDER_AUTH.get(api_format, DEFAULT_AUTH)
    return auth.header or default_header, default_prefix if auth.prefix is None else auth.prefix


def credential_header(place: tuple[str, str], credential: str) -> tuple[bytes, bytes]:
    """The header that carries ``credential`` at ``place`` (header, prefix), as the transport sends it."""
    header, prefix = place
    value = f"{prefix} {credential}" if prefix else credential
    return header.encode("ascii"), value.encode("latin-1")


def _auth_header(ref: BackendRef, key: str | None, api_format: str) -> tuple[bytes, bytes] | None:
    if ref.auth is None or not key:
        return None
    return credential_header(_place(ref, api_format), key)


class Upstreams:
    """The backends of every provider model, by model name, in fallback order."""

    def __init__(self, config: RouterConfig) -> None:
        context = ssl_context()
        self.backends: dict[str, list[Backend]] = {
            m.name: [Backend(m, ref, i, context) for i, ref in enumerate(m.backend_refs) if ref.weight > 0]
            for m in config.providers.models if m.api_format != "systemone"
        }

    async def aclose(self) -> None:
        for backends in self.backends.values():
            for backend in backends:
                await backend.aclose()


@asynccontextmanager
async def open_upstreams(config: RouterConfig) -> AsyncIterator[Upstreams]:
    """Build every backend's clients; close them all on exit."""
    upstreams = Upstreams(config)
    try:
        yield upstreams
    finally:
        await upstreams.aclose()
