"""Connection pools: several small, shared httpcore pools per backend.

httpcore's pool does work proportional to its size on every request
(STACK-NOTES: 1.35 ms CPU with 1 pooled connection, 5.6 ms with 64), so a
backend gets ``pool_shards`` pools of ``max_connections`` each (32 of 2 by
default), each request leasing a connection of the one with the most free
(``lease.py``), instead of one large pool. Pools are built once, sharing one SSL context
(~40 ms of CPU to build). No cookie jar anywhere: one pool serves every user,
so a kept cookie would ride on the next user's request.
"""
from __future__ import annotations

import re
import time
from contextlib import asynccontextmanager
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpcore
import msgspec

from ..config.credentials import static_key
from ..config.schema import BackendRef, HealthCheck, Outlier, ProviderModel, RouterConfig
from ..errors import ConfigError
from ..headers.registry import ANTHROPIC_VERSION
from ..protocol.anthropic import API_VERSION
from ..metrics import escape as _escape
from . import answers
from .lease import Lease, Shards
from .transport import Origin, new_pool, ssl_context


def base_url(ref: BackendRef) -> str:
    """The backend's API base: a bare ``host:port`` is http, an empty path is ``/v1``; its query (Azure's
    ``api-version``) rides on every request built from it."""
    endpoint = ref.endpoint
    if "://" not in endpoint:
        endpoint = f"{ref.protocol or 'http'}://{endpoint}"
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/") or "/v1"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{path}{query}"


# Azure OpenAI serves a deployment's calls under .../openai/deployments/NAME but lists models only at the
# resource's .../openai/models (same api-version): a check's GET under the deployment is Azure's 404, which would
# take a serving backend out of the rotation, so a deployment's checks ask under the resource's /openai.
_AZURE_DEPLOYMENT = re.compile(r"(.*/openai)/deployments/[^/?]+")


def probe_url(base: str) -> str:
    """The base a health check's path goes under: the backend's, or an Azure deployment's resource."""
    parts = urlsplit(base)
    azure = _AZURE_DEPLOYMENT.fullmatch(parts.path)
    if azure is None:
        return base
    return parts._replace(path=azure.group(1)).geturl()


class Backend:
    """One backend_ref of one provider model, with its clients and credential."""

    def __init__(self, model: ProviderModel, ref: BackendRef, index: int, context) -> None:
        self.model = model
        self.ref = ref
        self.label = ref.name or f"{model.name}[{index}]"
        url = base_url(ref)
        self.base = url.partition("?")[0]       # what traces name: a query may carry a key
        self.origin = Origin(url)
        self.probe_origin = Origin(probe_url(url))
        self._where = f"providers.models[{model.name}].backend_refs[{index}]"
        self.rekey()
        # A delegated backend acts for the requesting user: the request's own credential goes under this
        # header and prefix (spec 6.7); no key of the router's.
        self.delegated: tuple[str, str] | None = _place(ref, model.api_format) \
            if ref.auth is not None and ref.auth.credential == "delegated" else None
        self.max_response_bytes = ref.max_response_bytes
        self.max_event_bytes = ref.max_event_bytes
        self.max_pending = ref.max_pending or 4 * ref.max_connections * ref.pool_shards
        self.pending = 0        # attempts sent or waiting for a connection, streams until closed
        read = ref.read_timeout_ms / 1000
        self.timeouts = {"connect": ref.connect_timeout_ms / 1000, "read": read, "write": read, "pool": read}
        self._pools = [new_pool(ref.max_connections, context) for _ in range(ref.pool_shards)]
        self._shards = Shards(ref.pool_shards, ref.max_connections)
        self.weight = ref.weight
        self.current = 0            # smooth weighted round robin's running score
        self.failures = 0           # consecutive failed attempts
        self.level = 0              # ejections since the last success: the next ejection lasts 2**level base
        self.ejected_until = 0.0    # time.monotonic() at which it rejoins the rotation
        self.not_before = 0.0       # a Retry-After it sent: after the others until then
        self.ejections = 0          # vsr_backend_ejections_total
        # Active health (``health``): set by Upstreams from the backend's or the global block; None when off.
        self.health: HealthCheck | None = None
        self.check_down = False     # failed unhealthy_threshold checks in a row; out until healthy_threshold pass
        self.check_streak = 0       # checks in a row with the same outcome as the last one
        self.check_last_ok = True
        self.checks: dict[str, int] = {}    # vsr_backend_health_checks_total by outcome
        self.probing = False
        self.next_probe = 0.0       # trio time of the next check
        self.probe_pool: httpcore.AsyncConnectionPool | None = None    # its own connection: traffic never delays it
        self._context = context

    def rekey(self) -> None:
        """Read the key its ``auth`` names (again: a reload keeps the backend, and a rotated key file or
        variable takes effect with it)."""
        key = _key(self.ref, self._where)
        self.auth: tuple[bytes, bytes] | None = _auth_header(self.ref, key, self.model.api_format)
        self.secret = key.encode() if key else None     # struck from any error body a backend echoes it in
        # A health check's headers: what a request of the backend's provider carries, but the client's own.
        self.probe_headers = ([self.auth] if self.auth else []) + list(PROVIDER_HEADERS.get(self.model.api_format, ()))

    def up(self, now: float) -> bool:
        return not self.check_down and now >= self.ejected_until

    def checked(self, outcome: str) -> str | None:
        """Count one health check (``ok`` or its cause); "down" or "up" when it changes the backend's state."""
        health = self.health
        assert health is not None
        self.checks[outcome] = self.checks.get(outcome, 0) + 1
        ok = outcome == "ok"
        self.check_streak = self.check_streak + 1 if ok == self.check_last_ok else 1
        self.check_last_ok = ok
        if ok and self.check_down and self.check_streak >= health.healthy_threshold:
            self.check_down = False
            return "up"
        if not ok and not self.check_down and self.check_streak >= health.unhealthy_threshold:
            self.check_down = True
            self.ejections += 1
            return "down"
        return None

    def prober(self) -> httpcore.AsyncConnectionPool:
        """The health checks' own one-connection pool."""
        if self.probe_pool is None:
            self.probe_pool = new_pool(1, self._context)
        return self.probe_pool

    def succeeded(self) -> None:
        self.failures = 0
        self.level = 0
        self.ejected_until = 0.0

    def failed(self, outlier: Outlier, now: float) -> bool:
        """Count a failed attempt; True when it ejects the backend. An ejected backend tried anyway (every
        other one was down) stays ejected until its time without a longer sentence."""
        if not self.up(now):
            return False
        self.failures += 1
        if self.failures < outlier.consecutive_failures:
            return False
        self.failures = 0
        ms = min(outlier.base_ejection_ms * 2 ** self.level, outlier.max_ejection_ms)
        self.level += 1
        self.ejected_until = now + ms / 1000
        self.ejections += 1
        return True

    async def lease(self) -> Lease:
        """A connection of the shard with the most free, counted in ``pending`` until released; waits its turn
        while every one is lent, httpcore.PoolTimeout past the backend's pool timeout."""
        self.pending += 1
        shard = self._shards.take()
        if shard < 0:
            try:
                shard = await self._shards.wait(self.timeouts["pool"])
            except BaseException:
                self.pending -= 1
                raise
        return Lease(self, shard)

    def lease_now(self) -> Lease | None:
        """``lease`` when a connection is free and nobody waits for one (no coroutine to make); else None."""
        shard = self._shards.take()
        if shard < 0:
            return None
        self.pending += 1
        return Lease(self, shard)

    def returned(self, shard: int) -> None:
        self.pending -= 1
        self._shards.give_back(shard)

    def pool(self, shard: int) -> httpcore.AsyncConnectionPool:
        return self._pools[shard]

    async def sweep(self) -> None:
        """Closes its pools' idle connections that expired or that the backend closed (``QuietPool.sweep``)."""
        for pool in self._pools:
            await pool.sweep()

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
        if self.probe_pool is not None:
            await self.probe_pool.aclose()


# A provider's own credential header and prefix (spec 6.7: a backend defaults to its provider's).
PROVIDER_AUTH = {"anthropic": ("x-api-key", "")}
# What a provider's API requires on every call besides the key, its health checks' GET included: Anthropic
# refuses a call without anthropic-version (400), which would take a healthy backend out of the rotation.
# OpenAI's APIs (chat, responses, images) require nothing more.
PROVIDER_HEADERS: dict[str, tuple[tuple[bytes, bytes], ...]] = {
    "anthropic": ((ANTHROPIC_VERSION.encode(), API_VERSION.encode()),)}
DEFAULT_AUTH = ("Authorization", "Bearer")


def _key(ref: BackendRef, where: str) -> str | None:
    try:
        return static_key(ref.auth)
    except (OSError, UnicodeDecodeError) as exc:
        # The load checks read the file too; one that became unreadable since is no reason to call keyless.
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError([f"{where}.auth.api_key_file: file_unreadable: {ref.auth.api_key_file}: {why}"]) from None


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


def order(backends: list[Backend], now: float) -> list[Backend]:
    """One request's backends of a model: the smooth weighted round robin's pick among the live ones
    (nginx's: every live backend gains its weight, the highest score wins and pays the total back), the
    other live ones, those that asked to wait (Retry-After), then the ejected, soonest back first."""
    if len(backends) == 1:
        return backends
    live = [b for b in backends if b.up(now) and b.not_before <= now]
    if live:
        total = 0
        best = live[0]
        for b in live:
            b.current += b.weight
            total += b.weight
            if b.current > best.current:
                best = b
        best.current -= total
        live.remove(best)
        live.insert(0, best)
    waiting = sorted((b for b in backends if b.up(now) and b.not_before > now), key=lambda b: b.not_before)
    ejected = sorted((b for b in backends if not b.up(now)), key=lambda b: b.ejected_until)
    return live + waiting + ejected


def _identity(model: ProviderModel, ref: BackendRef) -> bytes:
    return msgspec.json.encode(model) + b"\0" + msgspec.json.encode(ref)


class Upstreams:
    """The backends of every provider model, by model name, in configuration order."""

    def __init__(self, config: RouterConfig, previous: "Upstreams | None" = None) -> None:
        # Built once the first https backend needs it (certifi's roots: ~20-40 ms of a start), then shared with
        # every later generation: most routers' backends (a local vLLM, a sidecar, the tests' mocks) are http.
        self.context = previous.context if previous is not None else None
        self.outlier = config.global_.router.upstream.outlier
        self.retries = config.global_.router.upstream.retries
        answers.BUFFERED.limit = config.global_.router.upstream.max_buffered_bytes     # the worker's, one bound
        # A reload keeps the backends whose model and ref are unchanged: their connections and health.
        kept: dict[bytes, list[Backend]] = {}
        for bs in (previous.backends.values() if previous is not None else ()):
            for b in bs:
                kept.setdefault(_identity(b.model, b.ref), []).append(b)

        def backend(m: ProviderModel, ref: BackendRef, i: int) -> Backend:
            same = kept.get(_identity(m, ref))
            if not same:
                if self.context is None and urlsplit(base_url(ref)).scheme != "http":
                    self.context = ssl_context()
                return Backend(m, ref, i, self.context)
            b = same.pop(0)
            b.rekey()
            return b

        self.backends: dict[str, list[Backend]] = {
            m.name: [backend(m, ref, i) for i, ref in enumerate(m.backend_refs) if ref.weight > 0]
            for m in config.providers.models if m.api_format != "systemone"
        }
        default_check = config.global_.router.upstream.health_check
        for bs in self.backends.values():
            for b in bs:
                check = b.ref.health_check or default_check
                b.health = check if check.enabled else None
                b.check_down = b.check_down and b.health is not None     # a check turned off lets it back

    def checked(self) -> list[Backend]:
        """The backends with an active health check."""
        return [b for bs in self.backends.values() for b in bs if b.health is not None]

    def order(self, model: str) -> list[Backend]:
        return order(self.backends[model], time.monotonic())

    def servable(self) -> bool:
        """Whether some model can be served: a backend of any model in the rotation, or no backend at all (nothing
        to be down). Any provider model may be named directly, outside every entrypoint."""
        now = time.monotonic()
        found = False
        for backends in self.backends.values():
            for b in backends:
                if b.up(now):
                    return True
                found = True
        return not found

    def live(self, model: str) -> bool:
        """Whether the model has a backend in the rotation now."""
        now = time.monotonic()
        return any(b.up(now) for b in self.backends.get(model, ()))

    def prometheus_lines(self) -> list[str]:
        now = time.monotonic()
        up = ["# HELP vsr_backend_up Whether a backend is in the rotation (1) or ejected (0).",
              "# TYPE vsr_backend_up gauge"]
        ejections = ["# HELP vsr_backend_ejections_total Ejections of a backend by passive or active health checks.",
                     "# TYPE vsr_backend_ejections_total counter"]
        checks = ["# HELP vsr_backend_health_checks_total Active health checks by outcome (ok or the failure's cause).",
                  "# TYPE vsr_backend_health_checks_total counter"]
        pending = ["# HELP vsr_backend_pending Requests holding or waiting for one of a backend's connections "
                   "(streams until closed); past max_pending the backend is skipped.",
                   "# TYPE vsr_backend_pending gauge"]
        for model, backends in self.backends.items():
            for b in backends:
                labels = f'model="{_escape(model)}",backend="{_escape(b.label)}"'
                up.append(f"vsr_backend_up{{{labels}}} {int(b.up(now))}")
                ejections.append(f"vsr_backend_ejections_total{{{labels}}} {b.ejections}")
                checks += [f'vsr_backend_health_checks_total{{{labels},outcome="{o}"}} {n}'
                           for o, n in sorted(b.checks.items())]
                pending.append(f"vsr_backend_pending{{{labels}}} {b.pending}")
        return up + ejections + checks + pending

    async def aclose(self, keep: "Upstreams | None" = None) -> None:
        """Close every backend but those ``keep`` (the next generation) holds too."""
        kept = {id(b) for bs in keep.backends.values() for b in bs} if keep is not None else set()
        for backends in self.backends.values():
            for backend in backends:
                if id(backend) not in kept:
                    await backend.aclose()


@asynccontextmanager
async def open_upstreams(config: RouterConfig) -> AsyncIterator[Upstreams]:
    """Build every backend's clients; close them all on exit."""
    upstreams = Upstreams(config)
    try:
        yield upstreams
    finally:
        await upstreams.aclose()
