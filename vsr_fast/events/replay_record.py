"""The Router Replay record (spec 5.7 ``router_replay``), folded from one request's events."""
from __future__ import annotations

from collections.abc import Iterable

import msgspec
from msgspec import Struct, field

from .capture import answer_facts
from .types import (
    AnswerCompleted,
    CacheHit,
    CacheWritten,
    DecisionChosen,
    DecisionVerdict,
    ErrorRaised,
    Event,
    PluginsApplied,
    RequestReceived,
    ShadowAnswered,
    SignalReading,
    SignalsEvaluated,
    UpstreamAttempted,
    Usage,
)




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
    usage: Usage | None = None        # a Looper call's own usage
    cause: str | None = None          # a failed attempt's cause (connect_refused, status_5xx); none in older journals
    hop: int | None = None            # the Looper hop (an executor's call) it belongs to; None: the provider call


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
    skipped: str | None = None        # the sampled copy was not made, and why (not_allowed, personal_data)


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
    cost: float | None = None
    cost_currency: str | None = None
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
    # What the request plugins changed, ``model: type: change`` (system_prompt, request_params, ...).
    plugins: list[str] = field(default_factory=list)
    events: int = 0
    unreadable_events: int = 0        # stored events this router could not read, left out of the record


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
        if ev.shadow_skipped is not None:   # sampled but not made: unlike ``shadow: []``, not sampled
            rec.shadow.append(ShadowRecord(model=ev.shadow_skipped.model, skipped=ev.shadow_skipped.reason))
    elif isinstance(ev, SignalsEvaluated):
        rec.signals = list(ev.readings)
        rec.matched_signals = [f"{r.type}:{r.name}" for r in ev.readings if r.matched]
        rec.coverage, rec.signal_timings_us = ev.coverage, dict(ev.timings_us)
    elif isinstance(ev, DecisionChosen):
        rec.decision, rec.selected_model, rec.candidates = ev.decision, ev.model, list(ev.candidates)
        rec.algorithm, rec.fallback, rec.why, rec.verdicts = ev.algorithm, ev.fallback, ev.why, list(ev.verdicts)
    elif isinstance(ev, UpstreamAttempted):
        rec.attempts.append(AttemptRecord(attempt=ev.attempt, model=ev.model, backend=ev.backend, status=ev.status,
                                          error=ev.error, duration_ms=ev.duration_ms, fallback=ev.fallback,
                                          usage=ev.usage, cause=ev.cause, hop=ev.hop))
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
    elif isinstance(ev, PluginsApplied):
        rec.plugins += [f"{ev.model}: {c}" if ev.model else c for c in ev.changes]
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
    rec.cost, rec.cost_currency = ev.cost, ev.cost_currency
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
    if isinstance(ev, (RequestReceived, AnswerCompleted)) and ev.shadow is not None:
        ev = msgspec.structs.replace(ev, shadow=None)
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
    "AttemptRecord", "CacheRecord", "ErrorRecord", "RecordSummary", "ReplayRecord", "ShadowRecord", "build_record",
    "for_record", "summary",
]
