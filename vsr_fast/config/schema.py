"""The v0.5 configuration as msgspec Structs: the single source of truth for its shape.

Every block forbids unknown fields, so a typo fails the load with its path
instead of being kept silently. Cross-references (models, recipes) are checked
in ``checks.py``; this module only says what each block may hold.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, field

from ..headers import registry as headers
from .schema_base import Block
from .application import Signals
from .auth import ClientAuth, RateLimits
from .catalog import ModelCatalog
from .credentials import KeySource
from .signals import Predicate, Projections
from .output import Output
from .algorithm import Algorithm
from .stores import Stores


_Block = Block


PositiveMs = Annotated[int, Meta(ge=1, le=3_600_000)]


# --- providers -----------------------------------------------------------------


class Auth(KeySource):
    """How a static key reaches a backend (spec 6.7); no key means no credential is sent.

    ``header`` and ``prefix`` default to the provider's own: ``x-api-key`` with no
    prefix for an ``anthropic`` backend, ``Authorization: Bearer`` otherwise.
    """

    header: str | None = None
    prefix: str | None = None
    # "delegated": the call acts for the requesting user, with the credential the authenticator in front
    # wrote into global.services.authz.delegated_credential.header (spec 6.7); no key then.
    credential: Literal["delegated"] | None = None


class HealthCheck(_Block):
    """Active health checks (off by default): ``GET path`` under the backend's base URL (``/models``: ``GET
    /v1/models``), with the endpoint's query, every ``interval_ms``; ``unhealthy_threshold`` failed checks in a
    row (a connect error, a timeout past ``timeout_ms``, a status outside 2xx) take the backend out of the
    rotation, ``healthy_threshold`` passing ones in a row bring it back, without any client traffic. An Azure
    deployment's endpoint (``.../openai/deployments/NAME?api-version=V``) is checked under its resource's
    ``/openai`` instead (``GET /openai/models?api-version=V``): Azure lists models only there."""

    enabled: bool = False
    path: Annotated[str, Meta(pattern=r"^/[^\s]*$")] = "/models"
    interval_ms: Annotated[int, Meta(ge=100, le=3_600_000)] = 5_000
    timeout_ms: PositiveMs = 2_000
    unhealthy_threshold: Annotated[int, Meta(ge=1, le=100)] = 3
    healthy_threshold: Annotated[int, Meta(ge=1, le=100)] = 2


BACKEND_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
BACKEND_MAX_EVENT_BYTES = 1024 * 1024


class BackendRef(_Block):
    """One endpoint serving a provider model. A model's live backends share its traffic by ``weight`` (smooth
    weighted round robin); the others of the model are its fallbacks for that request. Ejected ones come after
    the backends of every candidate model, the decision's fallback models included."""

    # The API base the router appends its routes to (/chat/completions, /messages, /responses); its query is kept
    # on every request and health check. Azure OpenAI:
    # https://RES.openai.azure.com/openai/deployments/NAME?api-version=2024-06-01
    # with auth header api-key and prefix "". A fragment, or a base already ending in such a route (a pasted full
    # URL), is refused.
    endpoint: str
    name: str | None = None
    protocol: Literal["http", "https"] | None = None
    weight: Annotated[int, Meta(ge=0)] = 1
    auth: Auth | None = None
    connect_timeout_ms: PositiveMs = 2_000
    # Time allowed between bytes of the answer, not for the whole answer: streams may be long.
    read_timeout_ms: PositiveMs = 120_000
    # Connections of each pool shard. On every request and answer httpcore's pool walks its connections, and
    # all of them again for each idle one, polling each idle socket: many small pools cost less per request
    # than a few large ones; each request takes the shard with the most connections free (bench/RESULTS.md).
    max_connections: Annotated[int, Meta(ge=1, le=64)] = 2
    # Pools per backend: at most max_connections x pool_shards requests in flight, the rest wait their turn.
    # By default 64 in flight per backend and worker (32 x 2): LLM backends serve many requests at once, and a
    # wait for a lease costs the request more than a shard costs idle (bench/RESULTS.md, issue 14).
    pool_shards: Annotated[int, Meta(ge=1, le=64)] = 32
    # An answer (whole or streamed) past this is cut with a 502 or the stream's error event, never held whole.
    # A native alias's (api_format: systemone) left unset is a System One deployment's default, 1 MiB.
    max_response_bytes: Annotated[int, Meta(ge=1024, le=1 << 30)] = BACKEND_MAX_RESPONSE_BYTES
    # One event of a streamed answer (an SSE line or event not yet ended) past this ends the stream with a 502
    # or its error event: an unfinished event is held until it ends, and a backend that never ends one would
    # make each stream hold max_response_bytes (Envoy's per-connection buffer limit is 1 MiB too). Raise it
    # for backends whose single events are larger (a Responses response.completed echoing a long answer).
    max_event_bytes: Annotated[int, Meta(ge=1024, le=1 << 30)] = BACKEND_MAX_EVENT_BYTES
    # Requests in flight or queued for a connection; past it the backend is skipped, and with every backend
    # skipped the client gets 503 with Retry-After at once. Unset: four times the connections.
    max_pending: Annotated[int, Meta(ge=1, le=100_000)] | None = None
    # This backend's active health check, in place of global.router.upstream.health_check.
    health_check: HealthCheck | None = None


class Pricing(_Block):
    """What a model's tokens cost, per million (spec 6.4); the answer's x-vsr-cost is computed from it."""

    input: Annotated[float, Meta(ge=0)] = 0.0
    output: Annotated[float, Meta(ge=0)] = 0.0
    cached: Annotated[float, Meta(ge=0)] | None = None     # cached input tokens; the input price when unset
    currency: Annotated[str, Meta(pattern="^[A-Z]{3}$")] = "USD"


class ProviderModel(_Block):
    """A model alias: its transport and facts (spec 6.4)."""

    name: Annotated[str, Meta(min_length=1)]
    backend_refs: list[BackendRef] = field(default_factory=list)
    # A native alias (api_format: systemone) names one catalog deployment instead of backend_refs.
    deployment: str | None = None
    provider_model_id: str | None = None
    api_format: Literal["openai", "responses", "anthropic", "images", "systemone"] = "openai"
    description: str | None = None
    # What the model can do, beside the output contract's names (image_generation, vision...): `reasoning` says it
    # reasons, so reasoning fields reach it: the client's (Chat's reasoning_effort, Responses' reasoning, Messages'
    # thinking, Claude Code's adaptive thinking with output_config.effort) and the decision's generation tier's.
    # Without it none does, in any api_format: the client's are dropped and listed (model_does_not_reason), as
    # gpt-4o and its like refuse reasoning_effort and Claude's older models thinking.
    capabilities: list[str] = field(default_factory=list)
    # How an openai-format model that reasons takes the reasoning switches (v0.3's reasoning_families[].type):
    # reasoning_effort, OpenAI's own field, or chat_template_kwargs, vLLM's chat template switches (enable_thinking,
    # thinking_budget, with reasoning_effort beside thinking, as the served Qwen3 build takes them). Only a model of
    # the second gets chat_template_kwargs, the client's included: OpenAI answers 400 to an argument it does not know.
    reasoning_family: Literal["reasoning_effort", "chat_template_kwargs"] = "reasoning_effort"
    modalities: dict[Literal["input", "output"], list[str]] | None = None
    context_window_size: Annotated[int, Meta(ge=1)] | None = None
    # The model's parameter count, as the v0.3 model cards wrote it ("8B", "0.5B", "35B-A3B" for a mixture of
    # experts: its total count): escalate's ``order: size`` tries the smallest first.
    param_size: str | None = None
    pricing: Pricing | None = None
    # An openai-format model's streams are asked for their usage (stream_options.include_usage), which the
    # limits, costs, metrics and access log read; false for servers that refuse stream_options (the client's own
    # is left out too; their streams are then estimated from the answer's text, four bytes a token: the estimate
    # is priced, counted in vsr_tokens_total and vsr_tokens_estimated_total, logged with usage_estimated, recorded
    # with usage.estimated, and is the usage a client's protocol reports, a Chat usage chunk asked for included). A
    # whole answer of any model that reports no usage is estimated the same way, and a translated one (a Messages or
    # Responses client's) carries the estimate.
    stream_usage: bool = True
    # The field an openai-format model gets the output limit in when the router translates a request for it (a
    # Messages client's max_tokens, a Responses client's max_output_tokens): max_completion_tokens, as OpenAI's
    # reasoning models refuse max_tokens; max_tokens for Ollama and LM Studio, which ignore the other and generate
    # unbounded. A Chat client's own body keeps the field it sent.
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"

    @property
    def upstream_model(self) -> str:
        """The model name the backend itself knows."""
        return self.provider_model_id or self.name

    @property
    def reasons(self) -> bool:
        """Whether the model declares ``capabilities: [reasoning]``: a client's reasoning effort (or a Messages
        client's ``thinking``) then reaches an OpenAI-format backend (a model that does not reason refuses it)."""
        return "reasoning" in self.capabilities

    @property
    def reasoning(self) -> str | None:
        """The syntax of the model's reasoning fields (its ``reasoning_family``), None when it does not reason: then
        it gets none of them, the client's or the decision's."""
        return self.reasoning_family if self.reasons else None


class Providers(_Block):
    models: list[ProviderModel] = field(default_factory=list)


# --- recipes -------------------------------------------------------------------


class RuleNode(_Block):
    """A condition tree node: an operator over children, or a leaf naming a signal."""

    operator: Literal["AND", "OR", "NOT"] | None = None
    conditions: list[RuleNode] = field(default_factory=list)
    type: str | None = None
    name: str | None = None
    label: str | None = None
    # A decision's unresolved result; fail_request fails the request only when the decision could have won.
    on_unknown: Literal["no_match", "match", "fail_request"] | None = None
    on_error: Literal["no_match", "match"] | None = None   # a systemone condition's own policy
    # A leaf may test the number its signal publishes instead of its match.
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    eq: float | None = None

    def predicate(self) -> Predicate | None:
        """The leaf's numeric predicate, or None when it tests the match."""
        p = Predicate(gt=self.gt, gte=self.gte, lt=self.lt, lte=self.lte, eq=self.eq)
        return None if p.is_empty() else p


class ModelRef(_Block):
    model: Annotated[str, Meta(min_length=1)]
    weight: Annotated[float, Meta(ge=0)] = 1.0
    use_reasoning: bool | None = None
    lora_name: str | None = None


class PluginEntry(_Block):
    """``{type, configuration}``: a plugin at one layer (global, recipe or decision); checked per type at load."""

    type: Annotated[str, Meta(min_length=1)]
    configuration: dict[str, Any] = field(default_factory=dict)


class Retention(_Block):
    """``decisions[].retention`` (spec 5.7): what a turn this decision routes leaves for the session's later turns.

    A session is the caller's x-vsr-session-id (or an accepted alias), remembered per worker process.
    ``ttl_turns``: the decision's choice (the decision, and the model that answered first) routes the session's
    next N turns of the recipe, unless a turn matches a decision of higher priority; each later turn spends one,
    and matching the decision again holds N anew. ``keep_current_model``: the model that served the session's
    last turn goes first when it is a candidate, in place of the selector's choice (executors keep their own
    order). ``drop``: the answer is looked up in the response cache but never written to it
    (``llm_cache_write_skipped_total{reason="retention_drop"}``); ``drop: true`` with ``ttl_turns`` fails to
    load. ``prefer_prefix_retention``: the providers are asked to keep the prompt's cached prefix longer
    (OpenAI ``prompt_cache_retention: 24h``; Anthropic's 5-minute prompt-cache markers become 1 hour).
    """

    drop: bool | None = None
    ttl_turns: Annotated[int, Meta(ge=0)] | None = None
    keep_current_model: bool | None = None
    prefer_prefix_retention: bool | None = None


# A decision that omits ``rules`` gets this very tree (an empty AND: it matches every request). The load tells
# it from a catch-all written out, ``rules: {operator: AND, conditions: []}``, by identity, and warns of it.
NO_RULES = RuleNode(operator="AND")


class Decision(_Block):
    name: Annotated[str, Meta(min_length=1)]
    # Empty only for a decision that answers with a fast_response plugin.
    modelRefs: list[ModelRef] = field(default_factory=list)
    # The matching decision of highest priority wins; of equal ones, the one written first (a load warning).
    priority: int = 0
    description: str | None = None
    # Omitted, the decision matches every request (a load warning); a catch-all writes {operator: AND, conditions: []}.
    rules: RuleNode = NO_RULES
    algorithm: Algorithm = Algorithm()
    plugins: list[PluginEntry] = field(default_factory=list)
    output: Output | None = None         # the decision's output contract (spec 5.8)
    # The decision's own request deadline, from the request's arrival; the global limit otherwise.
    request_timeout_ms: PositiveMs | None = None
    retention: Retention | None = None


class Fallback(_Block):
    """Where a request goes when no decision matches."""

    modelRefs: Annotated[list[ModelRef], Meta(min_length=1)]


class CandidateRequirements(_Block):
    """``recipes[].candidate_requirements`` (spec 6.3): what every candidate of the recipe (each decision's
    modelRefs and the fallback's) must declare, checked at load."""

    capabilities: list[str] = field(default_factory=list)


class Recipe(_Block):
    name: Annotated[str, Meta(min_length=1)]
    signals: Signals = Signals()
    projections: Projections = Projections()
    decisions: list[Decision] = field(default_factory=list)
    strategy: Literal["priority", "confidence"] = "priority"
    fallback: Fallback | None = None
    candidate_requirements: CandidateRequirements | None = None
    # Application signal condition type -> deployment, over global.model_catalog.bindings.
    model_bindings: dict[str, str] = field(default_factory=dict)
    plugins: list[PluginEntry] = field(default_factory=list)


class Entrypoint(_Block):
    api: Literal["chat", "systemone"] = "chat"
    model_names: list[str] = field(default_factory=list)
    recipe: str | None = None
    default: bool = False


# --- global ----------------------------------------------------------------------


class HeadersConfig(_Block):
    debug: Literal["none", "any", "authenticated"] = "none"
    debug_principals: list[str] = field(default_factory=list)
    # Client headers that also name the session after x-vsr-session-id, in order (spec 5.10).
    session_id_headers: list[str] = field(default_factory=lambda: list(headers.SESSION_ALIASES))


class Limits(_Block):
    # 413 past it. Whatever its size, a body is refused 400 past 256 levels of JSON nesting or 200,000 items
    # (arrays, objects and the commas between their members; the error names the top-level field); a body past
    # 256 KiB is decoded, routed, recorded and translated in a worker thread, off the event loop
    # (vsr_off_loop_steps_total counts those steps).
    max_body_bytes: Annotated[int, Meta(ge=1024, le=1 << 30)] = 64 * 1024 * 1024
    # From the first byte of the body to the last byte of the answer, every stage and attempt included.
    # LiteLLM's default (600 s): long enough for a reasoning model's stream, short enough to free a stuck one.
    request_timeout_ms: PositiveMs = 600_000
    # A connection's time to send a request's headers, from its opening or from the previous answer's end.
    # hypercorn has one timer for both, so it is also how long an idle kept-alive connection stays open
    # (an HTTP/2 one too, while no stream is open: then GOAWAY NO_ERROR).
    # nginx's client_header_timeout (60 s); past it the socket closes with no answer, as nginx's does,
    # since no route (hence no client protocol) is known yet.
    header_timeout_ms: PositiveMs = 60_000
    # The body's pace (Apache mod_reqtimeout's body=…,MinRate=…): body_timeout_ms to start with, one more
    # second per min_body_bytes_per_s received, never past the request's deadline; 408 past it.
    body_timeout_ms: PositiveMs = 30_000
    min_body_bytes_per_s: Annotated[int, Meta(ge=0)] = 1024
    # Time allowed between two writes to a client that take some of the answer, not for the whole answer
    # (nginx's send_timeout, 60 s): a client that reads nothing for this long has its connection closed, the
    # backend's let go, and is recorded 408 send_timeout (no error can be written to it). The request's deadline
    # ends a blocked write too: a stream's error event is written if the client reads it within a second.
    send_timeout_ms: PositiveMs = 60_000
    # Concurrent connections per listening socket and worker; past it a new connection gets 503 with
    # Retry-After and is closed. None: half the process's open-file limit (each may hold a backend's too).
    max_connections: Annotated[int, Meta(ge=1, le=1_000_000)] | None = None


# An origin as a browser sends it (scheme://host[:port], no path), "null" (sandboxed pages, file://), or "*".
Origin = Annotated[str, Meta(pattern=r"^(\*|null|https?://[A-Za-z0-9.\-\[\]:]+)$")]


class Cors(_Block):
    """``global.router.cors``: which web pages may call the router. A request with an ``Origin`` header (a
    browser's) from an origin not listed is refused 403; requests without one (SDKs, agents) never are."""

    allow_origins: list[Origin] = field(default_factory=list)


class Outlier(_Block):
    """Passive health: a backend failing ``consecutive_failures`` attempts in a row (connect error, timeout,
    5xx, an answer the router cannot trust) leaves the rotation for ``base_ejection_ms``, doubled at each
    ejection that follows without a success in between, up to ``max_ejection_ms`` (Envoy's outlier detection).
    While out it is tried only after every live backend of the request's candidate models; with all of them
    out, they are still tried, soonest back first within each model."""

    consecutive_failures: Annotated[int, Meta(ge=1, le=1000)] = 5
    base_ejection_ms: PositiveMs = 10_000
    max_ejection_ms: PositiveMs = 300_000


class Retries(_Block):
    """Another round over the candidates, before the first byte and within the request's deadline, when a
    round failed with a connect error, a 429 or a 503: after the largest ``Retry-After`` the round saw (up to
    ``max_retry_after_ms``; past it, or past the deadline, no retry) or a jittered exponential backoff."""

    max_retries: Annotated[int, Meta(ge=0, le=10)] = 2
    backoff_base_ms: PositiveMs = 100
    max_backoff_ms: PositiveMs = 2_000
    max_retry_after_ms: PositiveMs = 30_000


class UpstreamPolicy(_Block):
    outlier: Outlier = Outlier()
    retries: Retries = Retries()
    health_check: HealthCheck = HealthCheck()     # every backend's, unless its backend_ref has its own
    # Bytes of whole answers being read, across a worker's requests: an answer that would pass it is the backend's
    # failure (502 upstream_answer_too_large, the next backend tried), however far below its max_response_bytes.
    # Each answer is bounded on its own; this bounds them together (12 backends trickling 64 MiB each took a
    # worker from 160 MB to 1.4 GB), as nginx's proxy_buffers and Envoy's buffer limits bound theirs.
    max_buffered_bytes: Annotated[int, Meta(ge=1 << 20, le=1 << 40)] = 256 << 20


class AccessLogConfig(_Block):
    """One line per inference request: time (RFC 3339, UTC, milliseconds), request id (the client's
    x-request-id when it is printable ASCII of at most 200 bytes, else one the router makes, as Envoy
    regenerates an id it cannot use; the answer and the provider's request carry it in x-request-id), replay id
    (when a replay record is kept: x-vsr-replay-id), the client (``remote_addr``: the peer's address, as nginx's
    $remote_addr, or behind ``trusted_proxies`` the client's they forwarded, ``peer_addr`` then the proxy's; ``method``; ``user_agent``, its first 256 characters, "(not shown)" on a masking decision), the caller (key id, never the key; user,
    team, tenant), client API, recipe, decision, model, the backend that answered (else the last one tried),
    ``attempts`` (how many upstream attempts) and ``failed_backends`` (those that failed, comma-separated, in
    order), status, response path, latency, time to first byte, tokens (``usage_estimated: true`` when they are the router's estimate: the backend reported none), error code, an upstream failure's cause and the error's message; logfmt quotes a value with a space,
    quote, equals sign, backslash or control character and escapes the latter (\\t, \\u0001). A request refused
    before routing (its method, media type, key) has its line too, and so does each request the connection
    layer refuses itself (a head or chunked body h11 cannot read, a head it holds unfinished past 16 KiB or at
    ``header_timeout_ms``), on any path, once, under the x-request-id its answer carries (the client's when its
    head was read), with ``remote_addr`` (of a head that was not read, the peer's: none of its headers is
    trusted), ``method``,
    ``user_agent`` and ``uri`` (the target's path, its first 256 characters) as far as they came, and latency
    from its first byte; one on a path of no client API has no ``api`` and is counted only in
    ``vsr_http_refusals_total``. A body whose framing broke is that 400, never a client that left (499). Each such
    refusal closes its connection, so a flood of them writes no faster than one of requests. ``level: errors``: statuses 400 and up
    only. ``path``: appended to (none: stderr). Lines the writer could not keep up with are counted in
    ``vsr_access_log_dropped_total{reason="queue_full"}``; lines a write failed on (a full disk, stderr's reader gone) are dropped, as nginx does, and counted with
    ``reason="write_error"``, with a warning at most once a minute: serving goes on, and writing resumes once
    the disk has room (or after a reopen).

    Rotation (logrotate without ``copytruncate``): rename the file, then send SIGHUP (a reload, which reopens
    the file whether or not the configuration changed; ``POST /admin/reload`` too) or SIGUSR1 (reopens only,
    as nginx does). With no signal the router follows the rename within a second: before writing, it checks
    at most once a second whether ``path`` still names the file it has open, and opens it anew when not.
    Every line is whole in one file."""

    enabled: bool = False
    format: Literal["json", "logfmt"] = "json"
    level: Literal["all", "errors"] = "all"
    path: str | None = None
    # CIDRs (or addresses) of the proxies in front of the router (a load balancer's subnet): from a peer among
    # them, X-Forwarded-For names the client, read right to left past every trusted address (nginx's real_ip,
    # recursive), and ``remote_addr`` is that client's, ``peer_addr`` the proxy's. Empty: always the peer.
    trusted_proxies: list[str] = field(default_factory=list)


class ConfigWatch(_Block):
    """Reload when the configuration file changes (off by default; read at start): its modification time, size
    and inode are read every ``interval_ms``, and a change reloads it as SIGHUP does; so does a change of a
    secret file it names (``api_key_file``, ``password_file``: a rotated Kubernetes Secret)."""

    enabled: bool = False
    interval_ms: Annotated[int, Meta(ge=100, le=3_600_000)] = 2_000


class TracingConfig(_Block):
    """OpenTelemetry spans, off by default (needs ``pip install vsr-fast[otel]``): a request's span continues an
    incoming ``traceparent``, with children for routing, each System One call and each upstream attempt, sent by
    OTLP over HTTP (protobuf) to ``endpoint`` from a thread of the SDK's, never the event loop. A trace without a
    sampled parent is kept at ``sample_ratio``. Read at start."""

    enabled: bool = False
    endpoint: str = "http://127.0.0.1:4318/v1/traces"
    headers: dict[str, str] = {}
    service_name: str = "vsr-fast"
    sample_ratio: Annotated[float, Meta(ge=0.0, le=1.0)] = 1.0


class RouterSettings(_Block):
    """``direct_models``: what a request naming a provider model (``providers.models[].name``) gets. ``allow``:
    that model, the recipe skipped; ``global.plugins`` still apply (global masking and a global response_guard
    read the default recipe's rules). ``route``: the default recipe routes it, as a name no entrypoint claims,
    so its decisions and their plugins (a jailbreak block, masking) apply. ``refuse``: 404 ``model_not_found``
    naming the entrypoints. A key's ``models`` narrows what each key may name, whatever this says."""

    direct_models: Literal["allow", "route", "refuse"] = "allow"
    headers: HeadersConfig = HeadersConfig()
    limits: Limits = Limits()
    upstream: UpstreamPolicy = UpstreamPolicy()
    access_log: AccessLogConfig = AccessLogConfig()
    config_watch: ConfigWatch = ConfigWatch()
    tracing: TracingConfig = TracingConfig()
    cors: Cors = Cors()
    auth: ClientAuth = ClientAuth()
    rate_limits: RateLimits = RateLimits()


class DelegatedCredential(_Block):
    """Where the authenticator in front writes the requesting user's credential (spec 6.7)."""

    enabled: bool = False
    header: str = headers.DELEGATED_CREDENTIAL


class Authz(_Block):
    delegated_credential: DelegatedCredential = DelegatedCredential()


class Services(_Block):
    authz: Authz = Authz()


class Global(_Block):
    router: RouterSettings = RouterSettings()
    services: Services = Services()
    model_catalog: ModelCatalog = ModelCatalog()
    stores: Stores = Stores()
    plugins: list[PluginEntry] = field(default_factory=list)


class Identity(_Block):
    """Where a listener reads the caller's identity. Client headers count only when trusted."""

    trust_headers: bool = False
    user_header: str = headers.AUTHZ_USER
    groups_header: str = headers.AUTHZ_GROUPS
    team_header: str = headers.AUTHZ_TEAM
    tenant_header: str = headers.AUTHZ_TENANT


class Listener(_Block):
    """A socket the router serves. ``serving``: the client APIs; ``admin``: replay, preview, metrics and
    key management, which then leave the serving listener."""

    name: Annotated[str, Meta(min_length=1)]
    role: Literal["serving", "admin"] = "serving"
    address: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535)] = 8080
    identity: Identity = Identity()


class RouterConfig(_Block):
    """A whole v0.5 configuration document."""

    version: str
    listeners: list[Listener] = field(default_factory=list)
    providers: Providers = Providers()
    recipes: list[Recipe] = field(default_factory=list)
    entrypoints: list[Entrypoint] = field(default_factory=list)
    global_: Global = field(default_factory=Global, name="global")

    def plugin_entries(self):
        """Every plugin entry with its path in the document (the one load errors name), global first."""
        for i, entry in enumerate(self.global_.plugins):
            yield f"global.plugins[{i}]", entry
        for recipe in self.recipes:
            for i, entry in enumerate(recipe.plugins):
                yield f"recipes[{recipe.name}].plugins[{i}]", entry
            for decision in recipe.decisions:
                for i, entry in enumerate(decision.plugins):
                    yield f"recipes[{recipe.name}].decisions[{decision.name}].plugins[{i}]", entry


def convert(raw: object, typ: type) -> object:
    """Convert decoded YAML/JSON into ``typ``; raises ``msgspec.ValidationError``."""
    return msgspec.convert(raw, typ, strict=True)
