"""One request's events, numbered in order: what the request path calls.

Every method builds one event and enqueues it (``EventSink.record``): no
await, no I/O. The request's replay policy (``router_replay``, layers
merged) decides what the events may carry: the request copy and identity,
the answer's bytes, and whether a shadow copy is sampled.
"""
from __future__ import annotations

import random
import time
from collections.abc import Iterable

from ..plugins.response_cache import CachedAnswer
from ..plugins.router_replay import DISABLED, ReplayPolicy
from ..protocol.chat import ChatRequest
from ..routing import Route
from ..signals.base import Identity
from ..signals.registry import Readings
from ..upstream import Attempt
from .capture import AnswerCapture, body_copy, request_copy
from .types import (
    AnswerCompleted,
    CacheHit,
    CacheIntent,
    DecisionChosen,
    DecisionVerdict,
    ErrorRaised,
    GuardOutcome,
    PluginsApplied,
    RequestReceived,
    ShadowCopy,
    SignalReading,
    SignalsEvaluated,
    UpstreamAttempted,
    Usage,
    new_replay_id,
    now_ms,
)
from .writer import EventSink


class RequestEvents:
    """The event recorder of one request. ``replay_id`` goes in x-vsr-replay-id when ``kept``."""

    __slots__ = (
        "_attempts",
        "_seq",
        "config_version",
        "policy",
        "recipe",
        "replay_id",
        "request_id",
        "session_id",
        "sink",
        "started",
        "started_ms",
        "withheld",
    )

    def __init__(self, sink: EventSink, *, config_version: str, request_id: str = "", session_id: str | None = None,
                 policy: ReplayPolicy = DISABLED, replay_id: str | None = None) -> None:
        self.sink = sink
        self.replay_id = replay_id or new_replay_id()
        self.request_id = request_id
        self.session_id = session_id
        self.recipe: str | None = None
        self.config_version = config_version
        self.policy = policy
        self.started = time.perf_counter()
        self.started_ms = now_ms()
        self._seq = 0
        self._attempts = 0
        self.withheld = False   # masking protects this request: the record keeps neither body

    @property
    def kept(self) -> bool:
        """Whether router_replay keeps a record of this request (and the response names it)."""
        return self.policy.enabled

    def _common(self) -> dict:
        """The fields every event of this request carries, the next ``seq`` taken (tests build events with it)."""
        return {"replay_id": self.replay_id, "request_id": self.request_id, "session_id": self.session_id,
                "recipe": self.recipe, "config_version": self.config_version, "seq": self._next_seq(),
                "ts_ms": now_ms(), "replay": self.policy.enabled}

    def _next_seq(self) -> int:
        seq = self._seq
        self._seq = seq + 1
        return seq

    # Each event below is built with its common fields spelled out, not ``**self._common()``: a dict
    # merged into the call's keywords took msgspec's slow path, ~1.2 us more per event (of ~20 us per
    # request on this path; bench/RESULTS.md, issue 14).

    def _elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    # --- the request --------------------------------------------------------------------

    def received(self, raw: bytes, request: ChatRequest | None, *, route: Route | None = None,
                 identity: Identity | None = None, api: str = "chat", shadow: bool = True,
                 model: str | None = None, stream: bool | None = None, withhold: bool = False) -> None:
        """The request arrived (record it once routing chose the policy; ``ts_ms`` is its arrival).

        The body is kept as received, every field the client sent (``body_copy``).
        Chat: ``request`` is the decoded body; past the policy's ``request_bytes`` the
        copy is its canonical form cut with the current user turn last (``request_copy``).
        Any other client API: ``request`` is None, a copy past the limit is cut by
        ``body_copy``, and ``model`` and ``stream`` say what it asked for. ``shadow``: False where
        router_replay.shadow must not run (anything but single-model provider dispatch
        of a Chat request, spec 5.7). ``withhold``: keep no copy of the body (masking
        protects what it holds), nor of the answer, which can echo the request's fields.
        """
        if route is not None:
            self.recipe = route.recipe
        self.withheld = withhold
        p = self.policy
        copy, cut = (None, False)
        user, groups = None, []
        if p.request_bytes > 0 and not withhold and (request is not None or api != "chat"):
            if request is not None and len(raw) > p.request_bytes:
                copy, cut = request_copy(request, p.request_bytes)   # cut: the canonical copy, the current turn last
            else:
                copy, cut = body_copy(raw, p.request_bytes)
            if identity is not None:
                user, groups = identity.user, sorted(identity.groups)
        shadow_copy = None
        sp = p.shadow
        # The shadow dispatcher sends Chat Completions bodies: other APIs are not sampled.
        if shadow and api == "chat" and p.enabled and sp is not None and random.random() < sp.sample_rate:
            live = route.candidates[0].name if route is not None and route.candidates else None
            shadow_copy = ShadowCopy(model=sp.model, body=raw, live_model=live, timeout_seconds=sp.timeout_seconds,
                                     max_concurrency=sp.max_concurrency, max_body_bytes=p.response_bytes)
        if request is not None:
            model, stream = request.model, request.stream
        self.sink.record(RequestReceived(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=self._next_seq(), ts_ms=self.started_ms, replay=p.enabled,
            api=api, model=model or "", stream=bool(stream), body_bytes=len(raw), request=copy,
            request_truncated=cut, user=user, groups=groups, shadow=shadow_copy,
        ))

    def signals(self, readings: Readings | None) -> None:
        """The signals routing read: values, matches, coverage and per-family timings."""
        if readings is None:
            return
        out = [SignalReading(type=t, name=n, matched=o.matched, value=o.value, confidence=o.confidence,
                             detail=o.detail) for (t, n), o in readings.outcomes.items()]
        known = sum(1 for r in out if r.matched is not None)
        self.sink.record(SignalsEvaluated(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=self._next_seq(), ts_ms=now_ms(), replay=self.policy.enabled,
            readings=out, coverage=known / len(out) if out else 1.0,
            timings_us=dict(readings.timings_us), total_us=sum(readings.timings_us.values()),
        ))

    def decision(self, route: Route, *, algorithm: str = "static") -> None:
        """The decision and the model ranking routing chose."""
        self.recipe = route.recipe
        chosen = route.chosen
        verdicts = [DecisionVerdict(name=v.name, value=v.value, matched=v.matched, priority=v.priority,
                                    confidence=v.confidence) for v in (chosen.verdicts if chosen else ())]
        names = [m.name for m in route.candidates]
        self.sink.record(DecisionChosen(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=self._next_seq(), ts_ms=now_ms(), replay=self.policy.enabled,
            decision=route.decision, model=names[0] if names else None, candidates=names,
            algorithm=algorithm, fallback=route.fallback, why=chosen.why if chosen else "model named directly",
            verdicts=verdicts,
        ))

    def routed(self, raw: bytes, request: ChatRequest | None, route: Route, *, identity: Identity | None = None,
               shadow: bool = True, api: str = "chat", model: str | None = None, stream: bool | None = None,
               withhold: bool = False) -> None:
        """``received``, ``signals`` and ``decision`` at once: what the hot path calls after routing."""
        self.received(raw, request, route=route, identity=identity, shadow=shadow, api=api, model=model,
                      stream=stream, withhold=withhold)
        self.signals(route.readings)
        alg = route.chosen.decision.algorithm.type if route.chosen and route.chosen.decision else "static"
        self.decision(route, algorithm=alg)

    # --- the call and the answer ----------------------------------------------------------

    def attempt(self, attempt: Attempt) -> None:
        """One upstream attempt (``Dispatcher``'s ``on_attempt`` hook, or the attempts list after the call)."""
        self._attempts += 1
        self.sink.record(UpstreamAttempted(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=self._next_seq(), ts_ms=now_ms(), replay=self.policy.enabled,
            attempt=self._attempts, model=attempt.model, backend=attempt.backend,
            status=attempt.status, error=attempt.error, duration_ms=attempt.seconds * 1000,
            fallback=self._attempts > 1,
        ))

    def capture(self, cache: CacheIntent | None, cache_max_bytes: int) -> AnswerCapture | None:
        """What the relay feeds the answer to: enough for the cache and the record, or None for neither."""
        limit = max(self.policy.response_bytes, cache_max_bytes if cache is not None else 0)
        return AnswerCapture(limit) if limit > 0 else None

    def answer(self, *, status: int, response_path: str, model: str | None, streamed: bool, held: bool = False,
               complete: bool = True, finish_reason: str | None = None, usage: Usage | None = None,
               guard: GuardOutcome = "none", guard_codes: Iterable[str] = (), content_type: str | None = None,
               captured: AnswerCapture | None = None, ttfb_ms: float | None = None,
               cache: CacheIntent | None = None, cost: float | None = None,
               cost_currency: str | None = None) -> None:
        """The answer as the client received it. ``cache``: store it if the guard released it whole."""
        body = captured.body() if captured is not None else None
        self.sink.record(AnswerCompleted(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=self._next_seq(), ts_ms=now_ms(), replay=self.policy.enabled,
            status=status, response_path=response_path, model=model, streamed=streamed,
            held=held, complete=complete, finish_reason=finish_reason, usage=usage, guard=guard,
            guard_codes=list(guard_codes), duration_ms=self._elapsed_ms(), ttfb_ms=ttfb_ms,
            content_type=content_type, body=body, body_bytes=captured.size if captured is not None else 0,
            body_truncated=captured.truncated if captured is not None else False,
            replay_body_bytes=0 if self.withheld else self.policy.response_bytes, cache=cache,
            cost=cost, cost_currency=cost_currency,
        ))

    def cache_hit(self, key: str, answer: CachedAnswer, *, decision: str | None) -> None:
        """The answer came from the response cache."""
        self.sink.record(CacheHit(**self._common(), key=key, model=answer.model, decision=decision,
                                  age_ms=max(0, now_ms() - answer.stored_ms)))

    def plugins_applied(self, model: str | None, changes: list[str]) -> None:
        """What the request plugins changed in one candidate's provider-bound request."""
        self.sink.record(PluginsApplied(**self._common(), model=model, changes=changes))

    def error(self, *, stage: str, code: str, status: int, message: str = "") -> None:
        """A failure the client saw (or that ended the answer), by stage: decode, route, upstream, relay..."""
        self.sink.record(ErrorRaised(**self._common(), stage=stage, code=code, status=status, message=message[:512]))


__all__ = ["RequestEvents"]
