"""``router_replay``: record the route; ``shadow`` sends a sampled copy to a candidate model (spec 5.7).

Three things live here: the plugin's configuration block, as written at each
layer; the policy a request runs under once the layers are merged; and the
Router Replay record, folded from a request's events. Where records are kept
is ``vsr_fast.events.records``; who writes them is the replay recorder
(``vsr_fast.events.recorder``).

Layers override field by field (spec 6.5): ``global.plugins``, then the
recipe's, then the decision's. A field a layer leaves out is ``UNSET`` and
keeps the value below it; ``shadow: null`` turns an inherited shadow off.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from ..config.schema_base import Block
from ..events.capture import answer_facts
from ..events.types import (
    AnswerCompleted,
    CacheHit,
    CacheWritten,
    DecisionChosen,
    DecisionVerdict,
    ErrorRaised,
    Event,
    RequestReceived,
    ShadowAnswered,
    SignalReading,
    SignalsEvaluated,
    UpstreamAttempted,
    Usage,
)

TYPE = "router_replay"


class ShadowConfig(Block):
    """``router_replay.shadow``: where sampled copies go."""

    model: Annotated[str, Meta(min_length=1)] | UnsetType = UNSET
    sample_rate: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET
    max_concurrency: Annotated[int, Meta(ge=1, le=64)] | UnsetType = UNSET
    timeout_seconds: Annotated[float, Meta(gt=0, le=600)] | UnsetType = UNSET


class RouterReplayConfig(Block):
    """``{type: router_replay, configuration: ...}`` at one layer."""

    enabled: bool | UnsetType = UNSET
    capture_request_body: bool | UnsetType = UNSET
    capture_response_body: bool | UnsetType = UNSET
    # false keeps no body and no identity, whatever the capture_* fields say (migrated data_policy).
    capture_personal_data: bool | UnsetType = UNSET
    max_body_bytes: Annotated[int, Meta(ge=0, le=1 << 20)] | UnsetType = UNSET
    max_records: Annotated[int, Meta(ge=1, le=100_000_000)] | UnsetType = UNSET
    ttl_seconds: Annotated[int, Meta(ge=1, le=366 * 86_400)] | UnsetType = UNSET
    shadow: ShadowConfig | None | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class ShadowPolicy:
    model: str
    sample_rate: float = 0.05
    max_concurrency: int = 2
    timeout_seconds: float = 30.0


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    """What router_replay does for one request, the layers merged."""

    enabled: bool = True
    capture_request_body: bool = False
    capture_response_body: bool = False
    capture_personal_data: bool = True
    max_body_bytes: int = 4096
    max_records: int = 10_000
    ttl_seconds: int = 86_400
    shadow: ShadowPolicy | None = None

    @property
    def request_bytes(self) -> int:
        """How much of the request the record may keep (0: nothing, not even the identity)."""
        allowed = self.enabled and self.capture_request_body and self.capture_personal_data
        return self.max_body_bytes if allowed else 0

    @property
    def response_bytes(self) -> int:
        allowed = self.enabled and self.capture_response_body and self.capture_personal_data
        return self.max_body_bytes if allowed else 0


DISABLED = ReplayPolicy(enabled=False)


def resolve(*layers: RouterReplayConfig | None) -> ReplayPolicy:
    """The policy of a request: ``layers`` lowest first (global, recipe, decision); None skips a layer.

    No layer at all means no ``router_replay`` entry: nothing is recorded. A
    layer that exists turns recording on unless it says ``enabled: false``.
    """
    present = [layer for layer in layers if layer is not None]
    if not present:
        return DISABLED
    values: dict[str, object] = {}
    shadow: dict[str, object] | None = None
    for layer in present:
        for f in msgspec.structs.fields(RouterReplayConfig):
            value = getattr(layer, f.name)
            if value is UNSET:
                continue
            if f.name != "shadow":
                values[f.name] = value
            elif value is None:
                shadow = None
            else:
                shadow = dict(shadow or {})
                shadow.update({k.name: getattr(value, k.name) for k in msgspec.structs.fields(ShadowConfig)
                               if getattr(value, k.name) is not UNSET})
    if shadow is not None and "model" in shadow:
        values["shadow"] = ShadowPolicy(**shadow)  # type: ignore[arg-type]
    return ReplayPolicy(**values)  # type: ignore[arg-type]


def check(layers: Iterable[tuple[str, RouterReplayConfig | None]], models: Iterable[str]) -> list[str]:
    """Load errors of the merged layers: ``layers`` are ``(path, config)`` lowest first.

    A shadow must name a provider model. A shadow model with a delegated
    backend must be refused too (spec 6.7); the schema has no delegated
    credential yet, so that check joins when it does.
    """
    known = set(models)
    errors: list[str] = []
    shadow_model: str | UnsetType = UNSET
    where = ""
    for path, layer in layers:
        if layer is None or layer.shadow is UNSET:
            continue
        if layer.shadow is None:
            shadow_model, where = UNSET, ""
        elif layer.shadow.model is not UNSET:
            shadow_model, where = layer.shadow.model, f"{path}.shadow.model"
        elif shadow_model is UNSET:
            errors.append(f"{path}.shadow.model: missing_field: a shadow names the model its copies go to")
    if shadow_model is not UNSET and shadow_model not in known:
        errors.append(f"{where}: unknown_model: shadow model {shadow_model!r} is not in providers.models")
    return errors


# --- the record ----------------------------------------------------------------------


class _Rec(Struct, kw_only=True, omit_defaults=False):
    """A part of a replay record; JSON for the API."""


class AttemptRecord(_Rec):
    attempt: int
    model: str
    backend: str
    status: int | None
    error: str | None
    duration_ms: float
    fallback: bool


class CacheRecord(_Rec):
    hit: bool = False
    key: str | None = None
    stored: bool | None = None        # None: no write was tried (yet)
    reason: str | None = None
    age_ms: int | None = None


class ShadowRecord(_Rec):
    model: str
    status: int | None = None
    duration_ms: float = 0.0
    finish_reason: str | None = None
    usage: Usage | None = None
    body: str | None = None
    body_truncated: bool = False
    error: str | None = None


class ErrorRecord(_Rec):
    stage: str
    code: str
    status: int
    message: str


class ReplayRecord(_Rec):
    """One request's route, as ``GET /api/v1/replay/{id}`` returns it."""

    id: str
    request_id: str = ""
    session_id: str | None = None
    config_version: str = ""
    ts_ms: int = 0
    recipe: str | None = None
    # the request
    api: str | None = None
    requested_model: str | None = None
    requested_stream: bool | None = None
    request_body_bytes: int | None = None
    request_body: str | None = None
    request_truncated: bool = False
    user: str | None = None
    groups: list[str] = field(default_factory=list)
    # the signals
    signals: list[SignalReading] = field(default_factory=list)
    matched_signals: list[str] = field(default_factory=list)
    coverage: float | None = None
    signal_timings_us: dict[str, float] = field(default_factory=dict)
    # the route
    decision: str | None = None
    selected_model: str | None = None
    candidates: list[str] = field(default_factory=list)
    algorithm: str | None = None
    fallback: bool = False
    why: str | None = None
    verdicts: list[DecisionVerdict] = field(default_factory=list)
    # the call
    attempts: list[AttemptRecord] = field(default_factory=list)
    # the answer
    model: str | None = None
    status: int | None = None
    response_path: str | None = None
    streamed: bool | None = None
    stream: str | None = None         # "buffered" (held for the guard) or "unbuffered", for a streamed answer
    complete: bool | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    guard: str | None = None
    guard_codes: list[str] = field(default_factory=list)
    duration_ms: float | None = None
    ttfb_ms: float | None = None
    response_body_bytes: int | None = None
    response_body: str | None = None
    response_truncated: bool = False
    cache: CacheRecord | None = None
    shadow: list[ShadowRecord] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    events: int = 0


class RecordSummary(_Rec):
    """One line of ``GET /api/v1/replay``."""

    id: str
    ts_ms: int
    recipe: str | None
    decision: str | None
    model: str | None
    status: int | None
    response_path: str | None


def _text(data: bytes | None, limit: int) -> tuple[str | None, bool]:
    if data is None or limit <= 0:
        return None, False
    cut = data[:limit]
    return cut.decode("utf-8", errors="replace"), len(data) > limit


def _apply(rec: ReplayRecord, ev: Event) -> None:
    """Fold one event into the record (the events of a request, in order)."""
    if isinstance(ev, RequestReceived):
        rec.ts_ms = ev.ts_ms
        rec.api, rec.requested_model, rec.requested_stream = ev.api, ev.model, ev.stream
        rec.request_body_bytes = ev.body_bytes
        if ev.request is not None:
            rec.request_body = ev.request.decode("utf-8", errors="replace")
        rec.request_truncated = ev.request_truncated
        rec.user, rec.groups = ev.user, list(ev.groups)
    elif isinstance(ev, SignalsEvaluated):
        rec.signals = list(ev.readings)
        rec.matched_signals = [f"{r.type}:{r.name}" for r in ev.readings if r.matched]
        rec.coverage, rec.signal_timings_us = ev.coverage, dict(ev.timings_us)
    elif isinstance(ev, DecisionChosen):
        rec.decision, rec.selected_model, rec.candidates = ev.decision, ev.model, list(ev.candidates)
        rec.algorithm, rec.fallback, rec.why, rec.verdicts = ev.algorithm, ev.fallback, ev.why, list(ev.verdicts)
    elif isinstance(ev, UpstreamAttempted):
        rec.attempts.append(AttemptRecord(attempt=ev.attempt, model=ev.model, backend=ev.backend, status=ev.status,
                                          error=ev.error, duration_ms=ev.duration_ms, fallback=ev.fallback))
    elif isinstance(ev, AnswerCompleted):
        _apply_answer(rec, ev)
    elif isinstance(ev, CacheHit):
        rec.cache = CacheRecord(hit=True, key=ev.key, age_ms=ev.age_ms)
        rec.model = rec.model or ev.model
    elif isinstance(ev, CacheWritten):
        rec.cache = rec.cache or CacheRecord(key=ev.key)
        rec.cache.stored, rec.cache.reason = ev.stored, ev.reason
    elif isinstance(ev, ShadowAnswered):
        body, cut = _text(ev.body, len(ev.body or b""))
        rec.shadow.append(ShadowRecord(model=ev.model, status=ev.status, duration_ms=ev.duration_ms,
                                       finish_reason=ev.finish_reason, usage=ev.usage, body=body,
                                       body_truncated=ev.body_truncated or cut, error=ev.error))
    elif isinstance(ev, ErrorRaised):
        rec.errors.append(ErrorRecord(stage=ev.stage, code=ev.code, status=ev.status, message=ev.message))
        rec.status = rec.status or ev.status


def _apply_answer(rec: ReplayRecord, ev: AnswerCompleted) -> None:
    rec.model, rec.status, rec.response_path = ev.model or rec.model, ev.status, ev.response_path
    rec.streamed, rec.complete = ev.streamed, ev.complete
    rec.stream = ("buffered" if ev.held else "unbuffered") if ev.streamed else None
    rec.finish_reason, rec.usage = ev.finish_reason, ev.usage
    if ev.finish_reason is None and ev.body is not None and not ev.body_truncated:
        facts = answer_facts(ev.body, ev.streamed)
        rec.finish_reason, rec.usage = facts.finish_reason, ev.usage or facts.usage
    rec.guard, rec.guard_codes = ev.guard, list(ev.guard_codes)
    rec.duration_ms, rec.ttfb_ms, rec.response_body_bytes = ev.duration_ms, ev.ttfb_ms, ev.body_bytes
    body, cut = _text(ev.body, ev.replay_body_bytes)
    rec.response_body, rec.response_truncated = body, body is not None and (cut or ev.body_truncated)
    if ev.cache is not None:
        rec.cache = rec.cache or CacheRecord(key=ev.cache.key)


def build_record(events: Iterable[Event]) -> ReplayRecord | None:
    """The record of one request from its events, in any order; None for no events.

    Request-path events apply by ``seq``; events consumers appended (cache
    writes, shadow answers) after them.
    """
    derived = (CacheWritten, ShadowAnswered)
    ordered = sorted(events, key=lambda e: (isinstance(e, derived), e.seq, e.ts_ms))
    if not ordered:
        return None
    first = ordered[0]
    rec = ReplayRecord(id=first.replay_id, request_id=first.request_id, session_id=first.session_id,
                       config_version=first.config_version, ts_ms=first.ts_ms)
    for ev in ordered:
        rec.recipe = ev.recipe or rec.recipe
        rec.request_id = rec.request_id or ev.request_id
        rec.session_id = rec.session_id or ev.session_id
        _apply(rec, ev)
        rec.events += 1
    return rec


def summary(rec: ReplayRecord) -> RecordSummary:
    return RecordSummary(id=rec.id, ts_ms=rec.ts_ms, recipe=rec.recipe, decision=rec.decision,
                         model=rec.model or rec.selected_model, status=rec.status, response_path=rec.response_path)


def for_record(ev: Event) -> Event:
    """The event as the record keeps it: without what the policy did not allow it to keep.

    The shadow copy's body (the whole request, for the dispatcher) and an
    answer body kept only for the cache are dropped; the rest stays.
    """
    if isinstance(ev, RequestReceived) and ev.shadow is not None:
        return msgspec.structs.replace(ev, shadow=None)
    if isinstance(ev, AnswerCompleted) and ev.body is not None:
        if ev.finish_reason is None and not ev.body_truncated:
            # Read the facts while the whole body is still here; the record may keep none of it.
            facts = answer_facts(ev.body, ev.streamed)
            ev = msgspec.structs.replace(ev, finish_reason=facts.finish_reason, usage=ev.usage or facts.usage)
        keep = ev.replay_body_bytes
        if keep <= 0:
            return msgspec.structs.replace(ev, body=None)
        if len(ev.body) > keep:
            return msgspec.structs.replace(ev, body=ev.body[:keep], body_truncated=True)
        return ev
    return ev


__all__ = [
    "AttemptRecord", "CacheRecord", "DISABLED", "ErrorRecord", "RecordSummary", "ReplayPolicy", "ReplayRecord",
    "RouterReplayConfig", "ShadowConfig", "ShadowPolicy", "ShadowRecord", "TYPE", "build_record", "check",
    "for_record", "resolve", "summary",
]
