"""One request's events, numbered in order: what the request path calls.

Every method builds one event and enqueues it (``EventSink.record``): no
await, no I/O. The request's replay policy (``router_replay``, layers
merged) decides what the events may carry: the request copy and identity,
the answer's bytes, and whether a shadow copy is sampled.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

from msgspec.structs import replace as _replace

from ..plugins.response_cache import CachedAnswer
from ..plugins.router_replay import DISABLED, ReplayPolicy
from ..protocol.chat import ChatRequest
from ..routing import Route
from ..signals.base import Identity
from ..signals.registry import Readings
from ..upstream import Attempt, cut
from .capture import AnswerCapture, body_copy, request_copy
from .replay_record import for_record
from . import ids
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
    ShadowSkipped,
    SignalReading,
    SignalsEvaluated,
    UpstreamAttempted,
    Usage,
    now_ms,
)
from .writer import EventSink

_ns = time.time_ns
# The client APIs a shadow copy is made of (Images are no conversation to compare).
SHADOWED_APIS = frozenset({"chat", "messages", "responses"})
# A live model's api_format -> the client API its provider-bound request is read in, for a shadow copy of it.
FORMAT_API = {"openai": "chat", "anthropic": "messages", "responses": "responses"}


# What request_received (and the replay index, built from it) says for a private request's model name that no
# entrypoint serves: the client's free text, an e-mail address as often as not.
MODEL_WITHHELD = "(model not shown)"


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
        "shadow_refused",
        "shadow",
    )

    def __init__(self, sink: EventSink, *, config_version: str, request_id: str = "", session_id: str | None = None,
                 policy: ReplayPolicy = DISABLED, replay_id: str | None = None) -> None:
        self.sink = sink
        self.started = time.perf_counter()
        self.started_ms = ms = _ns() // 1_000_000
        self.replay_id = replay_id or ids.replay_id(ms)
        self.request_id = request_id
        self.session_id = session_id
        self.recipe: str | None = None
        self.config_version = config_version
        self.policy = policy
        self._seq = 0
        self._attempts = 0
        # The stream carries neither body of this request (``withhold``): masking protects it, or capture_personal_data
        # says false.
        self.withheld = False
        # A sampled shadow copy not made, why: ``not_allowed`` (its model is outside the key's models) or
        # ``personal_data`` (capture_personal_data: false).
        self.shadow_refused: str | None = None
        # The sampled shadow copy, its body filled once one provider answered through single-model dispatch
        # (``shadowed``); the answer's event carries it to the shadow dispatcher.
        self.shadow: ShadowCopy | None = None

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
    # request on this path; bench/RESULTS.md, issue 14). For the same reason the hot events take
    # ``seq`` and ``ts_ms`` in line, not through ``_next_seq`` and ``now_ms`` (a Python call each).
    #
    # _FEW_KEYWORDS: a Struct built with more than 15 keywords costs ~4x one built with 15 (CPython
    # 3.11, msgspec 0.23: 0.95 us against 0.28 us for RequestReceived): past 30 stack items CPython's
    # compiler builds a dict and calls through it. RequestReceived is built without its optional fields
    # when all are at their defaults (no copy, no shadow...: most requests); UpstreamAttempted and
    # AnswerCompleted take their usual fields in one call and the rest, when any is set, in one
    # ``msgspec.structs.replace``. The same event, the same bytes (``omit_defaults``).

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
        router_replay.shadow must not run (a request that is no Chat, Messages or Responses one, or has no
        candidate); a sampled copy to a model outside ``identity``'s key ``models``, or under
        capture_personal_data: false (no event carries such a request's text, masked or not), is not made either
        (``shadow_refused``). A sampled copy goes out only once ``shadowed`` gives it the live
        provider-bound request (spec 5.7: single-model provider dispatch only; no cache hit, no Looper executor).
        ``withhold``: no event carries a copy of the body (masking protects what it holds, or
        capture_personal_data: false). Nor, under capture_personal_data: false, of the answer, which can echo the
        request's fields (``answer``); a masking decision's answer, as the model wrote it, holds placeholders only
        (the model read the masked request, which its shadow copy carries too): capture_response_body keeps it.
        """
        self.sink.record(self._received(raw, request, route, identity, api, shadow, model, stream, withhold))

    def _received(self, raw: bytes, request: ChatRequest | None, route: Route | None, identity: Identity | None,
                  api: str, shadow: bool, model: str | None, stream: bool | None, withhold: bool) -> RequestReceived:
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
        sp = p.shadow
        if shadow and api in SHADOWED_APIS and p.enabled and sp is not None and random.random() < sp.sample_rate:
            if not p.capture_personal_data:
                # The copy would carry the prompt to a second model, and through the stream, which this
                # policy keeps no body of (masking may leave labels it does not mask in clear).
                self.shadow_refused = "personal_data"
            elif identity is not None and not identity.reaches(sp.model):
                # The copy would carry the caller's prompt to a model its key may not reach.
                self.shadow_refused = "not_allowed"
            else:
                self.shadow = ShadowCopy(model=sp.model, body=b"", api=api, shaped=True,
                                         decision=route.decision if route is not None else None,
                                         timeout_seconds=sp.timeout_seconds, max_concurrency=sp.max_concurrency,
                                         max_body_bytes=p.response_bytes)
        if request is not None:
            model, stream = request.model, request.stream
        seq = self._seq
        self._seq = seq + 1
        ev = self._received_event(raw, api, model, stream, copy, cut, user, groups, seq)
        # Apart from the constructor (``_FEW_KEYWORDS``): what a copy-less record is missing, and why.
        if withhold and p.request_bytes > 0:
            # The policy keeps request copies (capture_personal_data is true), so only the masking decision
            # withholds this one (``Policies.withholds_request``): vsr-replay says so rather than "no copy".
            ev = _replace(ev, withheld="masking")
        if self.shadow_refused is not None and sp is not None:
            ev = _replace(ev, shadow_skipped=ShadowSkipped(model=sp.model, reason=self.shadow_refused))
        return ev

    def _received_event(self, raw: bytes, api: str, model: str | None, stream: bool | None, copy: bytes | None,
                        cut: bool, user: str | None, groups: list[str], seq: int) -> RequestReceived:
        p = self.policy
        if copy is None and not cut and user is None and not groups:
            # The fields left out are at their defaults: the same event (``_FEW_KEYWORDS``).
            return RequestReceived(
                replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
                config_version=self.config_version, seq=seq, ts_ms=self.started_ms, replay=p.enabled,
                api=api, model=model or "", stream=bool(stream), body_bytes=len(raw),
            )
        return RequestReceived(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=seq, ts_ms=self.started_ms, replay=p.enabled,
            api=api, model=model or "", stream=bool(stream), body_bytes=len(raw), request=copy,
            request_truncated=cut, user=user, groups=groups,
        )

    def signals(self, readings: Readings | None) -> None:
        """The signals routing read: values, matches, coverage and per-family timings."""
        if readings is not None:
            self.sink.record(self._signals(readings))

    def _signals(self, readings: Readings) -> SignalsEvaluated:
        outcomes, timings = readings.outcomes, readings.timings_us
        if outcomes:
            # A withheld request's readings keep each rule's answer, not the words it matched (``redacted``).
            withheld = self.withheld
            out = [SignalReading(type=t, name=n, matched=o.matched, value=o.value, confidence=o.confidence,
                                 detail=o.redacted if withheld and o.redacted is not None else o.detail)
                   for (t, n), o in outcomes.items()]
            coverage = sum(1 for r in out if r.matched is not None) / len(out)
        else:
            out, coverage = [], 1.0     # a decision with no conditions read no signal
        seq = self._seq
        self._seq = seq + 1
        return SignalsEvaluated(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=seq, ts_ms=_ns() // 1_000_000, replay=self.policy.enabled,
            readings=out, coverage=coverage,
            timings_us=dict(timings), total_us=sum(timings.values()) if timings else 0,
        )

    def decision(self, route: Route, *, algorithm: str = "static") -> None:
        """The decision and the model ranking routing chose."""
        self.sink.record(self._decision(route, algorithm))

    def _decision(self, route: Route, algorithm: str) -> DecisionChosen:
        self.recipe = route.recipe
        chosen = route.chosen
        verdicts = [DecisionVerdict(name=v.name, value=v.value, matched=v.matched, priority=v.priority,
                                    confidence=v.confidence) for v in (chosen.verdicts if chosen else ())]
        names = [m.name for m in route.candidates]
        seq = self._seq
        self._seq = seq + 1
        return DecisionChosen(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=seq, ts_ms=_ns() // 1_000_000, replay=self.policy.enabled,
            decision=route.decision, model=names[0] if names else None, candidates=names,
            algorithm=algorithm, fallback=route.fallback, why=chosen.why if chosen else "model named directly",
            verdicts=verdicts,
        )

    def routed(self, raw: bytes, request: ChatRequest | None, route: Route, *, identity: Identity | None = None,
               shadow: bool = True, api: str = "chat", model: str | None = None, stream: bool | None = None,
               withhold: bool = False, model_shown: bool = True) -> None:
        """``received``, ``signals`` and ``decision`` at once: what the hot path calls after routing.
        ``model_shown`` false: the model name the client gave is recorded ``MODEL_WITHHELD``."""
        received = self._received(raw, request, route, identity, api, shadow, model, stream, withhold)
        if not model_shown:
            received = _replace(received, model=MODEL_WITHHELD)
        readings = route.readings
        chosen = route.chosen
        alg = chosen.decision.algorithm.type if chosen and chosen.decision else "static"
        if readings is None:
            self.sink.record_many((received, self._decision(route, alg)))
        else:
            self.sink.record_many((received, self._signals(readings), self._decision(route, alg)))

    # --- the call and the answer ----------------------------------------------------------

    def attempt(self, attempt: Attempt, hop: int | None = None) -> None:
        """One upstream attempt (``Dispatcher``'s ``on_attempt`` hook, or the attempts list after the call);
        ``hop``: the Looper hop it belongs to, for an executor's call."""
        n = self._attempts = self._attempts + 1
        seq = self._seq
        self._seq = seq + 1
        event = UpstreamAttempted(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=seq, ts_ms=_ns() // 1_000_000, replay=self.policy.enabled,
            attempt=n, model=attempt.model, backend=attempt.backend,
            status=attempt.status, error=attempt.error, duration_ms=attempt.seconds * 1000,
        )
        # ``fallback``, ``usage``, ``cause`` and ``hop`` apart, when not at their defaults (_FEW_KEYWORDS: 16 keywords
        # take the slow call). Only the backend's or model's failure has a cause: a client's 4xx passed back is none.
        # A cancellation's cut (``upstream.cut``: deadline, cancelled) is no failure of theirs, and is said too.
        cause = attempt.cause     # None for a success: no call to ``cut.of``
        if cause is not None and not (attempt.failed or cut.of(cause)):
            cause = None
        if attempt.fallback or attempt.usage is not None or cause is not None or hop is not None:
            usage = attempt.usage
            event = _replace(event, fallback=attempt.fallback, cause=cause, hop=hop, usage=None if usage is None
                             else Usage(prompt_tokens=usage[0], completion_tokens=usage[1],
                                        total_tokens=usage[0] + usage[1]))
        self.sink.record(event)

    def attempts(self, attempts: Iterable[Attempt], *, hops: bool = False) -> None:
        """The attempts of the provider call and its fallbacks; with ``hops``, of an executor's calls (Looper
        hops), numbered: each hop begins with an attempt that is no fallback."""
        if not hops:
            for a in attempts:
                self.attempt(a)
            return
        hop = 0
        for a in attempts:
            if not a.fallback:
                hop += 1
            self.attempt(a, hop=hop)

    def shadowed(self, model: str, api_format: str, body: bytes) -> None:
        """One provider (``model``) answered through single-model dispatch the request ``body`` it was sent (in
        ``api_format``, every request plugin applied, masking last): what a sampled shadow copy carries."""
        copy = self.shadow
        api = FORMAT_API.get(api_format)
        if copy is not None and api is not None:
            self.shadow = _replace(copy, body=body, api=api, live_model=model)

    def capture(self, cache: CacheIntent | None, cache_max_bytes: int) -> AnswerCapture | None:
        """What the relay feeds the answer to: enough for the cache and the record, or None for neither."""
        limit = max(self.policy.response_bytes, cache_max_bytes if cache is not None else 0)
        return AnswerCapture(limit) if limit > 0 else None

    def answer(self, *, status: int, response_path: str, model: str | None, streamed: bool, held: bool = False,
               complete: bool = True, finish_reason: str | None = None, usage: Usage | None = None,
               guard: GuardOutcome = "none", guard_codes: Iterable[str] = (), content_type: str | None = None,
               captured: AnswerCapture | None = None, ttfb_ms: float | None = None,
               cache: CacheIntent | None = None, cost: float | None = None,
               cost_currency: str | None = None, handoff: Callable[[AnswerCompleted], None] | None = None) -> None:
        """The answer as the client received it. ``cache``: store it if the guard released it whole. ``usage``
        and ``ttfb_ms`` (``AnswerCompleted``'s) are the backend's, whole or streamed.

        A ``withhold`` request's answer goes to the cache through ``handoff`` (the cache writer in this process,
        ``CacheWriter.submit``), body and intent; the stream's event keeps its size, finish reason and usage."""
        p = self.policy
        seq = self._seq
        self._seq = seq + 1
        shadow, self.shadow = self.shadow, None
        if shadow is not None and not shadow.body:
            shadow = None           # no provider answered through single-model dispatch: nothing to compare
        # The fields most answers set, then the rest apart when any is not at its default (``_FEW_KEYWORDS``).
        event = AnswerCompleted(
            replay_id=self.replay_id, request_id=self.request_id, session_id=self.session_id, recipe=self.recipe,
            config_version=self.config_version, seq=seq, ts_ms=_ns() // 1_000_000, replay=p.enabled,
            status=status, response_path=response_path, model=model, streamed=streamed, complete=complete,
            duration_ms=(time.perf_counter() - self.started) * 1000, content_type=content_type,
        )
        if captured is None:
            if (not held and finish_reason is None and guard == "none" and not guard_codes
                    and cache is None and cost is None and cost_currency is None
                    and not p.response_bytes):
                # Most upstream answers: their usage and time to first byte, in one replace.
                if usage is not None or ttfb_ms is not None or shadow is not None:
                    event = _replace(event, usage=usage, ttfb_ms=ttfb_ms, shadow=shadow)
                self.sink.record(event)
                return
            body, size, truncated = None, 0, False
        else:
            body, size, truncated = captured.body(), captured.size, captured.truncated
        event = _replace(
            event, held=held, finish_reason=finish_reason, usage=usage, guard=guard, guard_codes=list(guard_codes),
            ttfb_ms=ttfb_ms, body=body, body_bytes=size, body_truncated=truncated,
            replay_body_bytes=p.response_bytes, cache=cache, cost=cost,
            cost_currency=cost_currency,
        )
        if self.withheld:
            if cache is not None and handoff is not None:
                handoff(event)
            # As the record would keep it (under capture_personal_data: false no body, replay_body_bytes being 0;
            # a masking decision's as the model wrote it, placeholders and no value), and no cache intent: the
            # writer that stores the answer is the handoff's.
            event = for_record(_replace(event, cache=None))
        if shadow is not None:      # masked where the decision masks: placeholders, never the values
            event = _replace(event, shadow=shadow)
        self.sink.record(event)

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
