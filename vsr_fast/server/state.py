"""What every request handler shares: the loaded configuration and its run-time parts."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..routing import Loaded
from ..events.cache_writer import DirectCacheWriter
from ..events.service import EventServices
from ..headers import trace
from ..signals.registry import matched_signals
from ..protocol.adapters import make_adapters
from .response_store import response_store
from ..metrics import Metrics
from ..systemone.client import SystemOneClient
from ..upstream import Attempt, Dispatcher, Upstreams
from .asgi import BodyPace
from .recording import Policies
from .route import identity_reader


@dataclass
class AppState:
    loaded: Loaded
    upstreams: Upstreams
    systemone_client: SystemOneClient | None = None
    events: EventServices | None = None
    direct_cache: DirectCacheWriter | None = None    # the response cache without an event stream
    metrics: Metrics = field(default_factory=Metrics)
    draining: bool = False

    def __post_init__(self) -> None:
        self.table = self.loaded.table
        self.identity = identity_reader(self.loaded.config)
        client = self.systemone_client
        self.systemone = self.table.asker(client) if client is not None else None
        self.debug_policy = self.loaded.config.global_.router.headers.debug
        self.policies = Policies(self.loaded)
        self.response_store = response_store(self.loaded.config.global_.stores.responses)
        self.adapters = make_adapters(self.response_store)
        self.dispatcher = Dispatcher(self.upstreams, self._count_attempt)
        self.config_version = self.loaded.version_hash.encode()
        limits = self.loaded.config.global_.router.limits
        self.max_body_bytes = limits.max_body_bytes
        self.request_timeout_s = limits.request_timeout_ms / 1000
        self.body_pace = BodyPace(limits.body_timeout_ms / 1000, limits.min_body_bytes_per_s)

    def trace_for(self, scope, route) -> str | None:
        """x-vsr-trace for a caller that asked, when the debug policy allows it."""
        identity = self.identity(scope)
        if not trace.allowed(self.debug_policy, True, identity.user is not None):
            return None
        principals = self.loaded.config.global_.router.headers.debug_principals
        if self.debug_policy == "authenticated" and principals and identity.user not in principals:
            return None
        chosen = route.chosen
        coverage = {f"{t}:{n}": c for (t, n), c in route.readings.coverage.items()} if route.readings else None
        return trace.trace_value(signals=matched_signals(route.readings), decision=route.decision,
                                 why=chosen.why if chosen else "model named directly", coverage=coverage)

    def _count_attempt(self, attempt: Attempt) -> None:
        if attempt.error is not None:
            outcome = attempt.error
        elif attempt.status is not None and attempt.status >= 400:
            outcome = f"http_{attempt.status}"
        else:
            outcome = "ok"
        self.metrics.upstream_attempts.inc(attempt.model, attempt.backend, outcome)
        if outcome != "ok":
            self.metrics.upstream_errors.inc(attempt.model, attempt.backend, outcome)
