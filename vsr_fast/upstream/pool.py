"""Connection pools: one set of small, shared httpx clients per backend.

httpcore's pool does work proportional to its size on every request
(STACK-NOTES: 1.35 ms CPU with 1 pooled connection, 5.6 ms with 64), so a
backend gets ``pool_shards`` clients of ``max_connections`` each, used round
robin, instead of one large pool. Clients are built once: building one costs
~43 ms of CPU, mostly its SSL context.
"""
from __future__ import annotations

import http.cookiejar
import itertools
import os
from contextlib import asynccontextmanager
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx

from ..config.schema import BackendRef, ProviderModel, RouterConfig


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

    def __init__(self, model: ProviderModel, ref: BackendRef, index: int) -> None:
        self.model = model
        self.label = ref.name or f"{model.name}[{index}]"
        self.base = base_url(ref)
        self.chat_url = self.base + "/chat/completions"
        key = _key(ref)
        self.auth: tuple[str, str] | None = _auth_header(ref, key, model.api_format)
        # A delegated backend acts for the requesting user: the request's own credential goes under this
        # header and prefix (spec 6.7); no key of the router's.
        self.delegated: tuple[str, str] | None = _place(ref, model.api_format) \
            if ref.auth is not None and ref.auth.credential == "delegated" else None
        self.secret = key.encode() if key else None     # struck from any error body a backend echoes it in
        self.max_response_bytes = ref.max_response_bytes
        self.max_pending = ref.max_pending or 4 * ref.max_connections * ref.pool_shards
        self.pending = 0        # attempts sent or waiting for a connection, streams until closed
        connect = ref.connect_timeout_ms / 1000
        read = ref.read_timeout_ms / 1000
        self._clients = [
            httpx.AsyncClient(
                trust_env=False,
                timeout=httpx.Timeout(connect=connect, read=read, write=read, pool=read),
                limits=httpx.Limits(
                    max_connections=ref.max_connections,
                    max_keepalive_connections=ref.max_connections,
                ),
            )
            for _ in range(ref.pool_shards)
        ]
        for client in self._clients:
            refuse_cookies(client)
        self._cycle = itertools.cycle(self._clients)

    def client(self) -> httpx.AsyncClient:
        """The next client shard."""
        return next(self._cycle)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


# A provider's own credential header and prefix (spec 6.7: a backend defaults to its provider's).
PROVIDER_AUTH = {"anthropic": ("x-api-key", "")}
DEFAULT_AUTH = ("Authorization", "Bearer")


def refuse_cookies(client: httpx.AsyncClient) -> None:
    """Keep no cookie a backend sets: one client serves every user, so a kept cookie would ride
    on the next user's request (and parsing it into a jar costs time on every answer)."""
    client.cookies.jar.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


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


def credential_header(place: tuple[str, str], credential: str) -> tuple[str, str]:
    header, prefix = place
    return header, f"{prefix} {credential}" if prefix else credential


def _auth_header(ref: BackendRef, key: str | None, api_format: str) -> tuple[str, str] | None:
    if ref.auth is None or not key:
        return None
    return credential_header(_place(ref, api_format), key)


class Upstreams:
    """The backends of every provider model, by model name, in fallback order."""

    def __init__(self, config: RouterConfig) -> None:
        self.backends: dict[str, list[Backend]] = {
            m.name: [Backend(m, ref, i) for i, ref in enumerate(m.backend_refs) if ref.weight > 0]
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
