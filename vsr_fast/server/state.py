"""What every request handler shares: the loaded configuration and its run-time parts."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from ..routing import Loaded
from ..routing.classify import Classifier
from ..embeddings import Embedders
from ..events.cache_writer import CacheWriter
from ..events.memory_store import MemoryStore
from ..events.vector_store import VectorStore
from ..events.service import EventServices
from ..headers import registry as h, trace
from ..protocol.adapters import make_adapters
from .response_store import response_store
from .route import trace_of
from ..metrics import Metrics
from .forwarded import networks
from ..systemone.client import SystemOneClient
from ..selection.selectors import SelectionState
from ..upstream import Attempt, Dispatcher, Upstreams, cut
from .access_log import AccessLog
from .asgi import BodyPace
from .listen import Connections
from .recording import Policies
from ..auth.limits import Limiter
from ..auth.tally import Tally
from ..auth.source import Authenticator


@dataclass
class AppState:
    loaded: Loaded
    upstreams: Upstreams
    systemone_client: SystemOneClient | None = None
    events: EventServices | None = None
    direct_cache: CacheWriter | None = None    # the response cache without an event stream
    embedders: Embedders | None = None     # the catalog's embedding deployments (recall only), started lazily
    vectors: VectorStore | None = None      # the context plugin's stores, when some decision uses it
    memories: MemoryStore | None = None
    metrics: Metrics = field(default_factory=Metrics)
    draining: bool = False
    # Set at SIGTERM: no request runs past it, so each gets its answer before the graceful timeout cuts it.
    drain_deadline: float = math.inf
    # Set once the listeners have closed (the drain delay past): a request read from then on, on a connection kept
    # alive, is answered 503 shutting_down with its connection's close rather than served.
    closed: bool = False
    inflight: set = field(default_factory=set)      # the pipeline's Exchanges now running
    connections: Connections = field(default_factory=lambda: Connections(None))   # the listener's (serve sets)
    metrics_dir: str | None = None      # under a supervisor: where the workers answer their series (metrics_view)
    worker: int = 0
    # The fields a reload changed that the process reads only at start: they still run the old value (/ready).
    restart_required: tuple[str, ...] = ()
    reloader: Any = None                # serve's reload (POST /admin/reload): awaitable of reload.Reloaded (ok, message, restart_required)

    def __post_init__(self) -> None:
        config = self.loaded.config
        # What lives as long as the process: a reload keeps these (auth, limits, stores, listeners, the access
        # log and System One's client change with a restart only).
        self.auth = Authenticator(config)
        self.identity = self.auth.identity
        self.admin_listener = any(listener.role == "admin" for listener in config.listeners)
        self.response_store = response_store(config.global_.stores.responses)
        self.adapters = make_adapters(self.response_store)
        log_config = config.global_.router.access_log
        self.access_log = AccessLog(log_config) if log_config.enabled else None
        self.trusted_proxies = networks(log_config.trusted_proxies)    # checked at load (config.checks)
        auth = config.global_.router.auth
        limits = config.global_.router.limits
        self.limiter = Limiter(config.global_.router.rate_limits, auth.store, keys_have_limits=_keys_have_limits(config),
                               lease_s=limits.request_timeout_ms / 1000, metrics=self.metrics)
        self.tally = Tally(auth.store, self.metrics)
        self._derive()

    def _derive(self) -> None:
        """What follows from the loaded configuration and the backends: built anew by a reload."""
        config = self.loaded.config
        self.table = self.loaded.table
        self.session_headers = tuple(name.lower().encode() for name in
                                     (h.SESSION_ID, *config.global_.router.headers.session_id_headers))
        client = self.systemone_client
        if client is not None:
            # Answers are reused "until the configuration changes" (spec 5.3): the client outlives a reload, and
            # keys its reuse by this version, so no answer asked under another configuration is served under this.
            client.generation = self.loaded.version_hash
        self.systemone = self.table.asker(client) if client is not None else None
        self.classifier = Classifier(self.table, client)     # the diagnostics classify APIs (spec 6.8)
        self.debug_policy = config.global_.router.headers.debug
        self.policies = Policies(self.loaded)
        self.dispatcher = Dispatcher(self.upstreams, self._count_attempt, self._count_stream_end)
        self.selection = SelectionState()     # multi_factor's measurements and sessions, random's draws
        self.entrypoint_models = self._entrypoint_models()
        self.config_version = self.loaded.version_hash.encode()
        limits = config.global_.router.limits
        self.max_body_bytes = limits.max_body_bytes
        self.request_timeout_s = limits.request_timeout_ms / 1000
        self.body_pace = BodyPace(limits.body_timeout_ms / 1000, limits.min_body_bytes_per_s)
        self.delegated_models = frozenset(name for name, backends in self.upstreams.backends.items()
                                          if any(b.delegated is not None for b in backends))
        self.delegated_deployments = frozenset(
            name for name, r in (client.runners.items() if client is not None else ()) if getattr(r, "delegated", None))
        self.delegated_header = config.global_.services.authz.delegated_credential.header.lower().encode()
        auth = config.global_.router.auth
        self.tally.teams = frozenset([*config.global_.router.rate_limits.teams, *(k.team for k in auth.keys if k.team)])

    def regenerated(self, loaded: Loaded, upstreams: Upstreams) -> "AppState":
        """The next generation: this one's long-lived parts, the new configuration's routes and backends.
        Requests in flight keep the generation they started with."""
        new = copy.copy(self)
        new.loaded, new.upstreams, new.inflight = loaded, upstreams, set()
        # The file's keys (their lists and limits) are the new generation's: a key removed from it is refused
        # from the first request on this generation. The stored keys and the limit windows are the process's.
        new.auth = self.auth.regenerated(loaded.config)
        new.identity = new.auth.identity
        if _keys_have_limits(loaded.config) and self.auth.enabled:
            self.limiter.active = True      # a key that now has limits of its own (the windows are shared)
        new._derive()
        return new

    def _entrypoint_models(self) -> dict[str, set[str]]:
        """Each chat entrypoint's models that have backends (by its first model name): what /ready checks."""
        config = self.loaded.config
        recipes = {r.name: r for r in config.recipes}
        found: dict[str, set[str]] = {}
        for ep in config.entrypoints:
            recipe = recipes.get(ep.recipe or "")
            if ep.api == "systemone" or recipe is None:
                continue
            refs = [ref for d in recipe.decisions for ref in d.modelRefs]
            refs += recipe.fallback.modelRefs if recipe.fallback is not None else []
            models = {ref.model for ref in refs if self.upstreams.backends.get(ref.model)}
            if models:
                found[(ep.model_names or [ep.recipe or ""])[0]] = models
        return found

    def unready(self) -> list[str]:
        """Entrypoints that route to models, none of which has a backend in the rotation (every one ejected)."""
        return [name for name, models in self.entrypoint_models.items()
                if models and not any(self.upstreams.live(m) for m in models)]

    def drain(self, deadline: float) -> None:
        """Stop every request at ``deadline`` (trio time) at the latest: each then answers ShuttingDown."""
        self.draining = True
        self.drain_deadline = deadline
        for ex in list(self.inflight):
            ex.cut_at(deadline)

    def trace_for(self, scope, route) -> str | None:
        """x-vsr-trace for a caller that asked, when the debug policy allows it."""
        identity = self.identity(scope)
        if not trace.allowed(self.debug_policy, True, identity.user is not None):
            return None
        principals = self.loaded.config.global_.router.headers.debug_principals
        if self.debug_policy == "authenticated" and principals and identity.user not in principals:
            return None
        return trace_of(route)

    def _count_attempt(self, attempt: Attempt) -> None:
        # One vocabulary with vsr_upstream_errors_total: an attempt's outcome is "ok" or its cause (status_5xx,
        # read_timeout, connect_refused...). A stream that started is counted as it ends (``_count_stream_end``).
        outcome = attempt.cause or attempt.error or "ok"
        if not attempt.streaming:
            self.metrics.upstream_attempts.inc(attempt.model, attempt.backend, outcome)
        if attempt.cause in cut.CAUSES:     # the router's cancellation, not the model's latency or failure
            return
        # The model's fault only: a 400 is the request's, a delegated backend's 401 the client's own credential.
        self.selection.stats.observe(attempt.model, attempt.seconds, not attempt.failed)
        if attempt.cause is not None:
            self.metrics.upstream_errors.inc(attempt.model, attempt.backend, attempt.cause)

    def _count_stream_end(self, attempt: Attempt, outcome: str) -> None:
        """A stream's attempt, once it ended: ok, or midstream_<cause> as vsr_upstream_errors_total counts it."""
        self.metrics.upstream_attempts.inc(attempt.model, attempt.backend, outcome)


def _keys_have_limits(config) -> bool:
    """Whether some key may carry limits of its own: a declared key with limits, or any stored key."""
    auth = config.global_.router.auth
    return auth.enabled and (auth.store.backend == "redis" or any(not k.limits.empty() for k in auth.keys))
