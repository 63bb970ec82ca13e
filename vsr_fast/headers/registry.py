"""Every header the router reads or writes, registered once (spec 5.10).

Outside this package no code spells an ``x-`` header name: it imports the
constant. Contract tests hold the code to the registry.
"""
from __future__ import annotations

import enum
import re
from typing import NamedTuple

from .. import __version__


class Surface(enum.Enum):
    PUBLIC = "public"
    DEBUG = "debug"
    CONTROL = "control"
    INTERNAL = "internal"


class Direction(enum.Enum):
    REQUEST = "request"
    RESPONSE = "response"
    PROVIDER_REQUEST = "provider_request"


class Header(NamedTuple):
    name: str
    direction: Direction
    surface: Surface
    feature: str
    doc: str
    sensitivity: str = "none"


REGISTRY: dict[str, Header] = {}


def _register(name: str, direction: Direction, surface: Surface, feature: str, doc: str, sensitivity: str = "none") -> str:
    REGISTRY[name] = Header(name, direction, surface, feature, doc, sensitivity)
    return name


R, Q, P = Direction.RESPONSE, Direction.REQUEST, Direction.PROVIDER_REQUEST
PUB, DBG, CTL = Surface.PUBLIC, Surface.DEBUG, Surface.CONTROL

SCHEMA_VERSION = _register("x-vsr-schema-version", R, PUB, "headers", "Version of the public header set (3).")
CONFIG_VERSION = _register("x-vsr-config-version", R, PUB, "config", "Hash of the loaded configuration file.")
RESPONSE_PATH = _register("x-vsr-response-path", R, PUB, "headers", "How the response was produced.")
SELECTED_RECIPE = _register("x-vsr-selected-recipe", R, PUB, "recipes", "Recipe that routed the request; absent for a model named directly.")
SELECTED_DECISION = _register("x-vsr-selected-decision", R, PUB, "decisions", "Decision that matched; absent when none did.")
SELECTED_MODEL = _register("x-vsr-selected-model", R, PUB, "selection", "Provider model that answered (or would have).")
REPLAY_ID = _register("x-vsr-replay-id", R, PUB, "router_replay", "Replay record of this request, when one was kept.")
WARNINGS = _register("x-vsr-warnings", R, PUB, "headers", "RFC 8941 list of guard codes and translation losses.")
COST = _register("x-vsr-cost", R, PUB, "pricing", "What the answer cost: every call's usage at its model's pricing, summed.")
COST_CURRENCY = _register("x-vsr-cost-currency", R, PUB, "pricing", "The currency of x-vsr-cost (ISO 4217).")
TRACE = _register("x-vsr-trace", R, DBG, "headers", "RFC 8941 dictionary of debug data, for allowed callers only.")
DEBUG = _register("x-vsr-debug", Q, CTL, "headers", "Asks for x-vsr-trace.")
SESSION_ID = _register("x-vsr-session-id", Q, CTL, "sessions", "Names the session.")
AUTHZ_USER = _register("x-authz-user-id", Q, CTL, "role_bindings", "Caller's user id, read only from a trusted listener.", "identity")
AUTHZ_GROUPS = _register("x-authz-user-groups", Q, CTL, "role_bindings", "Caller's groups (comma-separated), read only from a trusted listener.", "identity")
AUTHZ_TEAM = _register("x-authz-team", Q, CTL, "rate_limits", "Caller's team, read only from a trusted listener.", "identity")
AUTHZ_TENANT = _register("x-authz-tenant", Q, CTL, "rate_limits", "Caller's tenant, read only from a trusted listener.", "identity")
# Client keys (global.router.auth): Authorization: Bearer on every client API, x-api-key on Messages.
API_KEY = _register("x-api-key", Q, CTL, "auth", "Anthropic's key header: a client key on /v1/messages.", "secret")
DELEGATED_CREDENTIAL = _register("x-vsr-delegated-credential", Q, CTL, "auth",
                                 "The requesting user's credential, written by the authenticator in front; reaches "
                                 "only a delegated upstream (spec 6.7).", "secret")
SESSION_ALIASES = (
    _register("x-session-id", Q, CTL, "sessions", "Names the session when x-vsr-session-id is absent."),
    _register("x-claude-code-session-id", Q, CTL, "sessions", "Claude Code's session id; names the session."),
)
CONVERSATION_ID = _register("x-conversation-id", Q, CTL, "sessions",
                            "A conversation's identity, kept apart from the session (spec 5.10).")
REQUEST_ID = _register("x-request-id", Q, Surface.PUBLIC, "headers",
                       "Request correlation id: the client's, else one the router makes; reaches providers (the "
                       "client's), returned on every inference answer and written in its access log line.")
# Anthropic's name for it: its SDK reads ``request-id`` (a message's ``_request_id``, an error's ``request_id``).
ANTHROPIC_REQUEST_ID = _register("request-id", R, PUB, "headers",
                                 "On /v1/messages and /v1/messages/count_tokens: x-request-id's value, under the name "
                                 "the Anthropic SDK reads.")

# The caller's own limits (global.router.rate_limits, a key's limits), as OpenAI names them (an external
# contract, spec 5.10): on every answer, 429s included, to a caller some requests- or tokens-per-minute limit
# applies to; the tightest scope's.
RATELIMIT_LIMIT_REQUESTS = _register("x-ratelimit-limit-requests", R, PUB, "rate_limits",
                                     "Requests per minute the caller's tightest requests limit allows.")
RATELIMIT_REMAINING_REQUESTS = _register("x-ratelimit-remaining-requests", R, PUB, "rate_limits",
                                         "Requests left in that limit's sliding minute, this one counted.")
RATELIMIT_RESET_REQUESTS = _register("x-ratelimit-reset-requests", R, PUB, "rate_limits",
                                     "When that window's next place frees, as OpenAI writes it ('17s', '1m0s').")
RATELIMIT_LIMIT_TOKENS = _register("x-ratelimit-limit-tokens", R, PUB, "rate_limits",
                                   "Tokens per minute the caller's tightest tokens limit allows.")
RATELIMIT_REMAINING_TOKENS = _register("x-ratelimit-remaining-tokens", R, PUB, "rate_limits",
                                       "Tokens left in that limit's sliding minute, before this answer's.")
RATELIMIT_RESET_TOKENS = _register("x-ratelimit-reset-tokens", R, PUB, "rate_limits",
                                   "When that window's oldest tokens leave it.")

# A backend's own rate-limit headers (OpenAI's x-ratelimit-*, Anthropic's anthropic-ratelimit-*) reach the
# client under the router's prefix (as LiteLLM's llm_provider-<name>), their leading x- dropped:
# x-ratelimit-remaining-requests -> x-vsr-provider-ratelimit-remaining-requests. Only the names the two providers
# document, with a value that reads as a count, a duration or a time: a backend cannot pass anything else (an
# identity, a credential, a token under a ratelimit-looking name) to the client, and the caller's own
# x-ratelimit-* (above) are never the backend's.
PROVIDER_PREFIX = _register("x-vsr-provider-*", R, PUB, "rate_limits",
                            "A backend's own x-ratelimit-* / anthropic-ratelimit-* as it sent them, under "
                            "x-vsr-provider-<name without its x->, on the answer it gave.").removesuffix("*")
PROVIDER_RATE_NAMES = frozenset(
    [f"x-ratelimit-{what}-{unit}".encode() for what in ("limit", "remaining", "reset")
     for unit in ("requests", "tokens")]
    + [f"anthropic-ratelimit-{unit}-{what}".encode() for what in ("limit", "remaining", "reset")
       for unit in ("requests", "tokens", "input-tokens", "output-tokens")])
# 1000, 59ms, 6m0s, 1.5s, 2026-12-03T14:00:00Z: digits, units and a timestamp's punctuation, nothing longer.
_RATE_VALUE = re.compile(rb"[0-9A-Za-z.:+\-]{1,40}")


def provider_rate_headers(headers) -> list[tuple[bytes, bytes]]:
    """The backend ``headers`` (name, value byte pairs) the client receives, renamed under PROVIDER_PREFIX."""
    out = []
    for name, value in headers:
        low = name.lower()
        if low in PROVIDER_RATE_NAMES and _RATE_VALUE.fullmatch(value.strip()):
            out.append((_PROVIDER + (low[2:] if low.startswith(b"x-") else low), value.strip()))
    return out


_PROVIDER = PROVIDER_PREFIX.encode()

PUBLIC_SCHEMA = "3"
# The Server header of every answer: the router by name, as nginx and Envoy name theirs; never the stack under it
# (hypercorn's default said hypercorn-h11).
SERVER = "vsr-fast"
ROUTER_PREFIX = "x-vsr-"

# The only client headers a provider-bound request may carry (spec 5.10): the
# router writes content-type, accept and the backend's credential itself.
TO_PROVIDER = frozenset({REQUEST_ID, "traceparent", "tracestate", "user-agent"})
# What a masking decision's request says in the client's User-Agent's place: the client's is its free text
# ("SupportDesk/1.0 (agent Maria Gonzalez)"), which masking does not read, so it does not leave the router.
ROUTER_AGENT = f"vsr-fast/{__version__}".encode()

# Provider-defined headers a client sends for the body it sends: the betas that
# unlock fields (Claude Code's context_management, output_config, mid-conversation
# system messages) and the API version that reads them. They reach a backend of
# the client's own api_format only, which receives that body unchanged; a
# translated body is written for the backend's stable API and carries none.
ANTHROPIC_VERSION = _register("anthropic-version", P, PUB, "protocol",
                              "Anthropic API version; the client's reaches an anthropic backend with its own body "
                              "(a translated body gets 2023-06-01).")
ANTHROPIC_BETA = _register("anthropic-beta", P, PUB, "protocol",
                           "Anthropic betas the client's body uses; reach an anthropic backend only.")
OPENAI_BETA = _register("openai-beta", P, PUB, "protocol",
                        "OpenAI betas the client's body uses; reach a backend of the client's own format only.")
CODEX_RESPONSES_LITE = _register("x-openai-internal-codex-responses-lite", P, PUB, "protocol",
                                 "Codex's Responses dialect (tools in additional_tools input items); reaches a "
                                 "responses backend only.")
SAME_FORMAT = {
    "anthropic": frozenset({ANTHROPIC_VERSION, ANTHROPIC_BETA}),
    "openai": frozenset({OPENAI_BETA}),
    "responses": frozenset({OPENAI_BETA, CODEX_RESPONSES_LITE}),
}

# A count_tokens answer computed by the router rather than by the model's provider.
TOKEN_COUNT = _register("x-vsr-token-count", R, PUB, "protocol",
                        "On POST /v1/messages/count_tokens: 'estimate' when the router counted with its embedded "
                        "tokenizer (the model's backend is not an Anthropic one), absent when the backend counted. "
                        "On POST /v1/responses/input_tokens: 'estimate', always.")

# Provider-bound headers the router writes itself: framing and every hop-by-hop name (RFC 9110 7.6.1: each
# connection's own, never forwarded), the backend's credential, the protocol version it speaks.
# header_mutation may not write them (reserved_header).
ROUTER_WRITES = frozenset({
    "host", "content-type", "content-length", "transfer-encoding", "connection", "accept-encoding",
    "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "anthropic-version",
})
IDENTITY_PREFIX = "x-authz-"


def router_owned(name: str) -> bool:
    """Whether the router owns ``name`` on provider-bound requests: its own x-vsr-*, identity,
    credentials and framing (spec 5.7, header_mutation's reserved_header)."""
    low = name.lower()
    return low.startswith(ROUTER_PREFIX) or low.startswith(IDENTITY_PREFIX) or low in ROUTER_WRITES or low in REGISTRY


class ResponsePath(enum.StrEnum):
    """Values of x-vsr-response-path."""

    UPSTREAM = "upstream"
    CACHE = "cache"
    FAST_RESPONSE = "fast_response"
    LOOPER = "looper"
    IMAGE_GENERATION = "image_generation"
    BLOCKED = "blocked"
    RATE_LIMITED = "rate_limited"
    ERROR = "error"
    FALLBACK = "fallback"


class TraceMember(NamedTuple):
    name: str
    feature: str
    doc: str


# x-vsr-trace's members, highest priority first (spec 5.10): the dictionary carries them in this order, and past
# 4 KB the last ones are left out and ``truncated`` ends it. ``headers.trace`` places every member by this list.
TRACE_MEMBERS: tuple[TraceMember, ...] = (
    TraceMember("signals", "signals", "The matched signals, as type:name."),
    TraceMember("coverage", "signals", "How much of the request a signal read, where it did not read it all."),
    TraceMember("confidence", "decisions", "The chosen decision's confidence."),
    TraceMember("algorithm", "decisions", "The chosen decision's algorithm type (static for none)."),
    TraceMember("decision", "decisions", "The decision that matched."),
    TraceMember("why", "decisions", "Why it was chosen (its priority among the matching ones, a model named)."),
    TraceMember("selector", "selection", "What the selector did: a kept model, System One's choice."),
    TraceMember("ranking", "selection", "multi_factor's score of each candidate, best first."),
    TraceMember("modality", "output", "The decision's output modality (decisions[].output), when configured; "
                                      "action=edit for an edit."),
    TraceMember("cache", "response_cache", "A cache hit: exact, or semantic with the similarity of the request it "
                                           "was stored for."),
    TraceMember("retention", "retention", "A route an earlier turn held, and what the decision's retention keeps."),
    TraceMember("prompt_cache", "prompt_cache", "Each model's prompt_cache markers, or why it got none."),
    TraceMember("tools", "tools", "What the tools policy kept and removed, and what tools.select chose."),
    TraceMember("response_guard", "response_guard", "The guard's outcome; buffered for a stream it held."),
    TraceMember("looper", "looper", "Each Looper call and its verdict."),
    TraceMember("match_judge_truncated", "match", "A match judge that read fewer candidates than recall found."),
)
TRACE_RANK = {member.name: rank for rank, member in enumerate(TRACE_MEMBERS)}
