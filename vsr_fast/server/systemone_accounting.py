"""The System One API's request accounting: what Chat's pipeline gives every inference request, given to
``POST /v1/systemone`` and ``/v1/decisions``.

Route ``systemone`` in ``vsr_requests_total``, ``vsr_responses_total`` and the latency histogram; one access log
line; the request's events (request_received, signals_evaluated and decision_chosen once routed, one
upstream_attempt per native alias call and per attempt of an escalation's judge's Chat call, error,
answer_completed); the client's ``x-request-id`` echoed, else one made; ``x-vsr-trace`` for a caller the debug
policy allows. Each native alias call also counts in
``vsr_systemone_calls_total`` under its deployment, as the signals' calls do, and in
``vsr_upstream_attempts_total`` under the alias and its backend, as a Chat model's attempts do.

Nothing here awaits: events are enqueued, metrics are counters, the access log line goes to its thread.
"""
from __future__ import annotations

import time

import trio

from .. import tracing
from ..config.schema import ProviderModel
from ..errors import SystemOneAnswered, VsrError
from ..headers import registry as h, trace
from ..headers.registry import ResponsePath
from ..protocol import systemone as wire
from ..routing import Route
from ..systemone.deployments import CallFailed
from ..upstream import Attempt, cut
from .asgi import Scope, header
from .edge_refusal import refusal_of
from .pipeline import accounted
from .recording import Recording
from .state import AppState

API = "systemone"
_DEBUG = h.DEBUG.encode()
_TRACE = h.TRACE.encode()
_REQUEST_ID = h.REQUEST_ID.encode()
# Verdicts about the request itself, passed back to the caller: no failure of the deployment's (no cause).
_THE_REQUESTS = frozenset({"question_failed", "invalid_input", "invalid_request", "delegated_credential_missing"})


class SystemOneExchange:
    """One System One API request, with the fields ``pipeline.accounted`` reads of a Chat ``Exchange``."""

    api = API
    meter = None        # System One answers carry no token usage to meter
    masking = None      # nor a masking plugin's policy: the client's User-Agent is logged as sent

    def __init__(self, state: AppState, scope: Scope) -> None:
        self.state, self.scope = state, scope
        self.started = time.perf_counter()
        self.span = tracing.begin_request(f"vsr {API}", scope["headers"]) if tracing.tracer is not None else None
        self.rec = Recording(state, scope)      # the request id (the client's when sane) and the event recorder
        self.raw = b""
        self.asked: str | None = None           # the body's model
        self.route: Route | None = None
        self.recipe = self.decision = self.model = self.backend = None
        self.attempts: list[Attempt] = []
        self.verdicts: list[str] = []           # an escalation's stages, each with its verdict
        self.status = 499                       # until answered: a client that left
        self.path = ResponsePath.ERROR
        self.first_byte: float | None = None
        self.failure: VsrError | None = None
        self.stage = "decode"
        self._capture = None
        self._received = False

    def routed(self, route: Route) -> None:
        """The route taken: recorded with the request (its signals and decision when a recipe routed it)."""
        self.route, self.stage = route, "route"
        ev = self.rec.events
        if ev is None:
            return
        plan = self.state.policies.plan(route.recipe, route.decision)
        ev.policy = plan.replay
        identity = self.state.identity(self.scope) if plan.replay.request_bytes > 0 else None
        ev.routed(self.raw, None, route, identity=identity, shadow=False, api=API, model=self.asked, stream=False,
                  withhold=plan.private)
        self._received = True
        self._capture = ev.capture(None, 0)

    async def call(self, alias: ProviderModel, runner, body, **how) -> wire.StandardResponse | wire.BatchResponse:
        """``runner.call(body, **how)`` for native alias ``alias``, counted and recorded as one upstream attempt."""
        self.stage = "upstream"
        started = time.perf_counter()
        outcome: str | None = None
        failure = None
        deadline = trio.current_effective_deadline()     # read now: a cancelled scope's reads -inf
        try:
            response = await runner.call(body, **how)
            outcome = "ok"
            return response
        except CallFailed as exc:
            outcome, failure = exc.code, exc
            raise
        except Exception:
            outcome = "internal_error"      # an in-process deployment's own bug (answered 500 by the caller)
            raise
        finally:
            if outcome is None:     # cancelled: the request's deadline (or an escalation's) passed, or the client left
                outcome = cut.cause(deadline)
            self._called(alias, runner.name, time.perf_counter() - started, started, outcome, failure)

    def _called(self, alias: ProviderModel, deployment: str, seconds: float, started: float, outcome: str,
                failure: CallFailed | None) -> None:
        ref = alias.backend_refs[0] if alias.backend_refs else None
        backend = alias.deployment or (ref.name if ref is not None and ref.name else f"{alias.name}[0]")
        # A cut call (``upstream.cut``: deadline, cancelled) is no failure of the alias's, as a Chat attempt the
        # request's deadline or the client's leaving cut is not: counted by its outcome, never as an error.
        failed = outcome != "ok" and outcome not in _THE_REQUESTS and outcome not in cut.CAUSES
        attempt = Attempt(model=alias.name, backend=backend, seconds=seconds, fallback=bool(self.attempts),
                          status=200 if outcome == "ok" else (failure.status if failure is not None else None),
                          error=None if outcome == "ok" or outcome in cut.CAUSES else outcome,
                          cause=outcome if failed or outcome in cut.CAUSES else None,
                          failed=failed)
        self.attempts.append(attempt)
        self.backend = backend
        m = self.state.metrics
        m.upstream_attempts.inc(alias.name, backend, outcome)
        if failed:
            m.upstream_errors.inc(alias.name, backend, outcome)
        client = self.state.systemone_client
        if client is not None:     # its vocabulary: a call past its deadline is a timeout (``client.cut_outcome``)
            client.metrics.calls.inc(deployment, "timeout" if outcome == cut.DEADLINE else outcome)
            client.metrics.latency.observe(seconds, deployment)
        if tracing.tracer is not None:
            tracing.record("vsr.systemone.call", started, {"vsr.deployment": deployment, "vsr.outcome": outcome,
                                                           "vsr.model": alias.name},
                           error=None if outcome == "ok" else outcome, kind="client")
        self.rec.attempts([attempt])

    def tried(self, attempts: list[Attempt]) -> None:
        """A Chat call's upstream attempts (an escalation's judge): recorded and kept for the access log. The
        dispatcher counted each already (``vsr_upstream_attempts_total``, its span)."""
        self.attempts += attempts
        self.rec.attempts(attempts)

    def answered(self, status: int, out: bytes, path: ResponsePath, recipe: str | None, decision: str | None,
                 model: str | None, logged: str | None = None) -> list[tuple[bytes, bytes]]:
        """The answer about to be sent; the headers it carries besides the public set: x-request-id, the replay
        record's id when one is kept, x-vsr-trace for a caller the debug policy allows. ``logged``: an error
        message without the client's values, for the logs (else the answer's own)."""
        self.status, self.path, self.recipe, self.decision, self.model = status, path, recipe, decision, model
        self.first_byte = time.perf_counter()
        if status >= 400:
            try:
                err = wire.ERROR_RESPONSE.decode(out).error
            except Exception:   # noqa: BLE001 - every error body here is the API's own shape; be safe anyway
                err = wire.ErrorBody(code="internal_error", message="")
            self.failure = SystemOneAnswered(logged or err.message, code=err.code, status=status)
        if self._capture is not None:
            self._capture.feed(out)
        extra = [(_REQUEST_ID, self.rec.request_id.encode("latin-1"))]
        replay = self.rec.replay_header()
        if replay is not None:
            extra.append(replay)
        state = self.state
        if self.route is not None and state.debug_policy != "none" and header(self.scope, _DEBUG) is not None:
            value = state.trace_for(self.scope, self.route)
            if value is not None:
                if self.verdicts:   # the Looper's member, as a Chat executor's answer carries it
                    value = trace.with_member(value, trace.list_member("looper", self.verdicts))
                extra.append((_TRACE, value.encode()))
        return extra

    def finish(self) -> None:
        """The request's end, answered or not: its last events, its counts, its access log line, its span."""
        edge = refusal_of(self.scope)
        if edge is not None:    # the connection layer answered its body's broken framing: no client left
            self.status, self.failure, self.path = edge.status, edge.error, ResponsePath.ERROR
        ev = self.rec.events
        if ev is not None:
            if not self._received:
                ev.received(self.raw, None, api=API, model=self.asked, stream=False)
            failure = self.failure
            if failure is not None:
                ev.error(stage=self.stage, code=failure.code, status=self.status, message=failure.detail)
            ev.answer(status=self.status, response_path=self.path.value, model=self.model, streamed=False,
                      complete=self.first_byte is not None, content_type="application/json", captured=self._capture)
        accounted(self, self.span)


__all__ = ["SystemOneExchange"]
