"""The routing events: one msgspec Struct per kind, a tagged union, msgpack on the wire.

Every event carries the request's replay id, request id, session id, recipe,
configuration version and ``seq``, the request's own monotonic sequence
(0, 1, 2... in the order the request path recorded them). Events a consumer
appends later (a cache write, a shadow answer) repeat the ``seq`` of the event
they answer; their kind tells them apart.

Strict like the configuration (STYLE 9): we own this schema, so an unknown
field is an error rather than something silently dropped. Bodies travel as
bytes (msgpack ``bin``), and only the copies ``router_replay`` and
``response_cache`` allow.
"""
from __future__ import annotations

import time
from typing import Literal

import msgspec
from msgspec import Struct, field

from . import ids


class _Part(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A nested value of an event."""


class Usage(_Part):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    # The router's estimate (four bytes a token of the request's and the answer's text): the backend reported none.
    estimated: bool = False


class SignalReading(_Part):
    type: str
    name: str
    matched: bool | None              # None: unknown (three-valued)
    value: float | None = None
    confidence: float = 1.0
    detail: str | None = None


class DecisionVerdict(_Part):
    name: str
    value: bool | None                # the condition tree's value before on_unknown
    matched: bool
    priority: int = 0
    confidence: float = 0.0


class ShadowCopy(_Part):
    """What the shadow dispatcher needs to send a sampled copy (router_replay.shadow).

    ``shaped`` (every copy made now): ``body`` is the live model's provider-bound request as it was sent, every
    request plugin applied (tools policy, context, system_prompt, request_params, masking last: placeholders,
    never the values), in ``api``, the client API of that model's format. The dispatcher writes it in the
    shadow model's format and name and adds only header_mutation's headers. Without ``shaped`` (a copy an
    earlier version journaled): the client's body, which gets the decision's (``decision``) per-model
    rewrites. The body never carries a header, so never a credential; the shadow model's own is sent.
    """

    model: str
    body: bytes
    api: str = "chat"                 # the client API the body is written in: chat, messages, responses
    shaped: bool = False              # ``body`` is the live provider-bound request, every rewrite made
    decision: str | None = None       # the live decision, whose request plugins the copy gets too
    live_model: str | None = None     # the model the live request went to, for the comparison
    timeout_seconds: float = 30.0
    max_concurrency: int = 2
    max_body_bytes: int = 0           # how much of the shadow answer the record may keep


class ShadowSkipped(_Part):
    """A sampled router_replay.shadow copy that was not made, and why: so a record tells it from one not sampled."""

    model: str
    reason: str                       # not_allowed (the key may not reach the model), personal_data


class CacheIntent(_Part):
    """The answer may be cached under ``key`` if the guard released it whole."""

    key: str
    ttl_seconds: int
    # The semantic cache's: the partition the request is compared in, and the text compared by meaning.
    partition: str | None = None
    text: str | None = None
    # The decision's retention says drop: the answer is looked up, never stored (spec 5.7).
    drop: bool = False
    # The router served the answer though its own accept check refused it (escalate's ``on_error:
    # last_attempt``): never stored, so the next request asks the models again.
    not_accepted: bool = False


GuardOutcome = Literal["none", "passed", "noted", "flagged", "blocked", "over_limit", "incomplete"]
"""What response_guard did with the answer.

``passed``: no rule fired (or only ``action: none`` rules); ``noted``: annotated
with a note inside the answer (``details``); ``flagged``: annotated only in
x-vsr-warnings; ``blocked``; ``over_limit``: a held answer past its 64 MiB
bound; ``incomplete``: the answer ended before the guard could read it whole.
"""


class _Event(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True,
             tag_field="kind"):
    replay_id: str
    request_id: str = ""
    session_id: str | None = None
    recipe: str | None = None
    config_version: str = ""
    seq: int = 0
    ts_ms: int = 0                    # wall clock, milliseconds since the epoch
    replay: bool = True               # router_replay keeps a record of this request


class RequestReceived(_Event, tag="request_received"):
    api: str = "chat"
    model: str = ""                   # the model name the client asked for
    stream: bool = False
    body_bytes: int = 0               # the size of the client's body
    # The request, capped at router_replay.max_body_bytes; present only when capture is
    # allowed. Chat: a canonical Chat Completions body (routing fields, media data left
    # out). Messages, Responses, Images: the body as received (past the cap, media data
    # left out and the longest texts cut; request_truncated says so).
    request: bytes | None = None
    request_truncated: bool = False
    user: str | None = None           # the identity routing read, kept with the request copy
    groups: list[str] = field(default_factory=list)
    shadow: ShadowCopy | None = None
    shadow_skipped: ShadowSkipped | None = None
    # Why ``request`` is absent though the policy keeps copies: "masking" (the decision masks and no layer says
    # capture_personal_data: true). vsr-replay counts such a request as withheld, not replayable.
    withheld: str | None = None


class SignalsEvaluated(_Event, tag="signals_evaluated"):
    readings: list[SignalReading] = field(default_factory=list)
    coverage: float = 1.0             # share of the rules read that answered (not unknown)
    timings_us: dict[str, float] = field(default_factory=dict)
    total_us: float = 0.0


class DecisionChosen(_Event, tag="decision_chosen"):
    decision: str | None = None       # None: no decision matched
    model: str | None = None          # the first candidate
    candidates: list[str] = field(default_factory=list)   # the ranking, in fallback order
    algorithm: str = "static"
    fallback: bool = False            # the recipe's fallback, not a decision, chose the models
    why: str = ""
    verdicts: list[DecisionVerdict] = field(default_factory=list)


class UpstreamAttempted(_Event, tag="upstream_attempt"):
    attempt: int = 1                  # 1-based, in the order tried
    model: str = ""
    backend: str = ""
    status: int | None = None
    error: str | None = None          # the router's error code for a failure without a status (upstream_failed)
    duration_ms: float = 0.0
    fallback: bool = False            # tried after another attempt of the same call (the provider call, a hop) failed
    usage: Usage | None = None        # what its answer reported, for a Looper's call (each one is paid for)
    cause: str | None = None          # a failed attempt's cause in one word (connect_refused, status_5xx)
    # The Looper hop it belongs to (spec 5.6: an executor's model calls, "each a hop"), 1-based in the order the
    # hops ended; None for the provider call and its fallbacks. An executor's parallel calls are hops, not fallbacks.
    hop: int | None = None


class AnswerCompleted(_Event, tag="answer_completed"):
    status: int = 200
    response_path: str = "upstream"   # x-vsr-response-path
    model: str | None = None          # the model that answered
    streamed: bool = False
    held: bool = False                # a streamed answer held for the guard (spec 5.7)
    complete: bool = True             # ended normally ([DONE], or the whole body read)
    finish_reason: str | None = None
    usage: Usage | None = None
    guard: GuardOutcome = "none"
    guard_codes: list[str] = field(default_factory=list)
    duration_ms: float = 0.0
    # From the router's receiving the request (the duration's start) to the first byte of the backend's answer: a
    # stream's first event of the answer (``dispatch._first_event``), a whole answer's status line and headers.
    # None where no backend's answer was relayed (cache, fast_response, an executor's own answer, every call failed).
    ttfb_ms: float | None = None
    content_type: str | None = None
    body: bytes | None = None         # the answer as the client received it, possibly cut
    body_bytes: int = 0               # its whole size
    body_truncated: bool = False      # ``body`` is a prefix
    replay_body_bytes: int = 0        # how much of ``body`` router_replay may keep (0: none)
    cache: CacheIntent | None = None
    cost: float | None = None         # x-vsr-cost: every call of the answer at its model's pricing
    cost_currency: str | None = None
    # A sampled router_replay.shadow copy: only an answer of single-model provider dispatch carries one.
    shadow: ShadowCopy | None = None


class CacheHit(_Event, tag="cache_hit"):
    key: str = ""
    model: str | None = None
    decision: str | None = None
    age_ms: int = 0


class CacheWritten(_Event, tag="cache_write"):
    key: str = ""
    stored: bool = False
    reason: str | None = None         # why not, when not stored
    ttl_seconds: int = 0
    bytes: int = 0


class ShadowAnswered(_Event, tag="shadow_answer"):
    model: str = ""
    live_model: str | None = None
    status: int | None = None
    duration_ms: float = 0.0
    finish_reason: str | None = None
    usage: Usage | None = None
    body: bytes | None = None         # capped at the shadow copy's max_body_bytes
    body_truncated: bool = False
    error: str | None = None


class PluginsApplied(_Event, tag="plugins_applied"):
    """What the request plugins changed in the provider-bound request, per candidate: ``type: change``."""

    model: str | None = None
    changes: list[str] = field(default_factory=list)


class ErrorRaised(_Event, tag="error"):
    stage: str = "internal"           # decode, route, upstream, relay, guard, internal
    code: str = "internal"
    status: int = 500
    message: str = ""


Event = (RequestReceived | SignalsEvaluated | DecisionChosen | UpstreamAttempted | AnswerCompleted
         | CacheHit | CacheWritten | ShadowAnswered | PluginsApplied | ErrorRaised)

EVENT_TYPES: tuple[type[Struct], ...] = (RequestReceived, SignalsEvaluated, DecisionChosen, UpstreamAttempted,
                                         AnswerCompleted, CacheHit, CacheWritten, ShadowAnswered, PluginsApplied,
                                         ErrorRaised)
KINDS = tuple(t.__struct_config__.tag for t in EVENT_TYPES)

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Event)
_JSON_ENCODER = msgspec.json.Encoder()
_JSON_DECODER = msgspec.json.Decoder(Event)

encode_event = _ENCODER.encode
"""The event's msgpack bytes: the one encoding on the hot path."""


def decode_event(data: bytes) -> Event:
    """An event from its msgpack bytes; raises ``msgspec.DecodeError``/``ValidationError``."""
    return _DECODER.decode(data)


def event_json(event: Event) -> bytes:
    """The event as JSON (bodies as base64), for exports and the API."""
    return _JSON_ENCODER.encode(event)


def event_from_json(data: bytes | str) -> Event:
    return _JSON_DECODER.decode(data)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_replay_id() -> str:
    """A 24-hex-digit id that sorts by creation time: 12 digits of milliseconds, 12 random."""
    return ids.replay_id(time.time_ns() // 1_000_000)


__all__ = [
    "AnswerCompleted", "CacheHit", "CacheIntent", "CacheWritten", "DecisionChosen", "DecisionVerdict",
    "EVENT_TYPES", "ErrorRaised", "Event", "GuardOutcome", "KINDS", "RequestReceived", "ShadowAnswered",
    "ShadowCopy", "SignalReading", "SignalsEvaluated", "UpstreamAttempted", "Usage", "decode_event",
    "encode_event", "event_from_json", "event_json", "new_replay_id", "now_ms",
]
