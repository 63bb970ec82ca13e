"""OpenTelemetry spans (``global.router.tracing``, off by default; ``pip install vsr-fast[otel]``).

Off, nothing here runs per request: each call site tests ``tracer is not None`` first (one global read) and
the SDK is never imported. On, a request's span continues the ``traceparent`` it came with and is the current
context while the request runs, so what its tasks record (routing, System One calls, upstream attempts) are its
children. Those are recorded once they ended, from the start the stage already keeps, so no stage holds a
context manager open; an upstream attempt's span alone is started as its request leaves, whose ``traceparent``
names it (``begin_attempt``). The SDK's batch processor exports from a thread of its own, never the event loop.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

from .errors import ConfigError

tracer: Any = None      # the SDK's Tracer while tracing is on; None when off
_otel: Any = None       # the SDK pieces the spans use, once imported
# The upstream attempt the current task is making (begin_attempt), until it is recorded (end_attempt).
_ATTEMPT: ContextVar[Any] = ContextVar("vsr_attempt_span", default=None)


class _Otel:
    """The optional SDK, imported by ``start`` only: a router without tracing never loads it."""

    def __init__(self, config: Any) -> None:
        try:
            from opentelemetry import context, trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError as exc:
            raise ConfigError([f"global.router.tracing.enabled: missing_dependency: tracing needs the otel extra "
                               f"(pip install 'vsr-fast[otel]'): {exc}"]) from None
        self.context, self.trace = context, trace
        self.propagator = TraceContextTextMapPropagator()
        self.provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}),
                                       sampler=ParentBased(TraceIdRatioBased(config.sample_ratio)))
        self.provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=config.endpoint, headers=dict(config.headers))))
        self.kinds = {"server": trace.SpanKind.SERVER, "client": trace.SpanKind.CLIENT,
                      "internal": trace.SpanKind.INTERNAL}
        self.error = trace.StatusCode.ERROR


def start(config: Any) -> None:
    """Turn tracing on when ``config`` (``global.router.tracing``) enables it; ConfigError without the SDK."""
    global tracer, _otel
    if not config.enabled:
        return
    _otel = _Otel(config)
    tracer = _otel.provider.get_tracer("vsr_fast")


def stop() -> None:
    """Export what is queued and turn tracing off (blocks until sent: run it in a thread)."""
    global tracer, _otel
    if _otel is not None:
        _otel.provider.shutdown()
    tracer = _otel = None


def begin_request(name: str, headers: Iterable[tuple[bytes, bytes]]) -> tuple[Any, Any]:
    """A request's span, the child of its ``traceparent`` if it sent one, made the current context until
    ``end_request`` (in the same task)."""
    carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k in (b"traceparent", b"tracestate")}
    parent = _otel.propagator.extract(carrier)
    span = tracer.start_span(name, context=parent, kind=_otel.kinds["server"])
    return span, _otel.context.attach(_otel.trace.set_span_in_context(span, parent))


def end_request(handle: tuple[Any, Any], attributes: dict[str, Any], error: str | None) -> None:
    """End the request's span with its outcome and give the task its context back."""
    span, token = handle
    _finish(span, attributes, error, None)
    _otel.context.detach(token)


def record(name: str, started: float, attributes: dict[str, Any], error: str | None = None,
           kind: str = "internal") -> None:
    """A span that began at ``started`` (``time.perf_counter()``) and ends now, a child of the current span."""
    now, wall = time.perf_counter(), time.time_ns()
    span = tracer.start_span(name, start_time=wall - int((now - started) * 1e9), kind=_otel.kinds[kind])
    _finish(span, attributes, error, wall)


def begin_attempt() -> list[tuple[bytes, bytes]]:
    """Start an upstream attempt's span (a child of the current span, ended by ``end_attempt`` in the same task)
    and return the ``traceparent`` (and ``tracestate``) its request carries: W3C Trace Context has a hop that takes
    part rewrite the parent id, so the provider's spans hang under this attempt, not the client's span."""
    span = tracer.start_span("vsr.upstream.attempt", kind=_otel.kinds["client"])
    _ATTEMPT.set(span)
    carrier: dict[str, str] = {}
    _otel.propagator.inject(carrier, context=_otel.trace.set_span_in_context(span))
    return [(k.encode(), v.encode("latin-1")) for k, v in carrier.items()]


def end_attempt(started: float, attributes: dict[str, Any], error: str | None) -> None:
    """End the attempt span ``begin_attempt`` started in this task (or record one from ``started``)."""
    span = _ATTEMPT.get()
    if span is None:
        record("vsr.upstream.attempt", started, attributes, error, kind="client")
        return
    _ATTEMPT.set(None)
    _finish(span, attributes, error, None)


def _finish(span: Any, attributes: dict[str, Any], error: str | None, end: int | None) -> None:
    span.set_attributes({k: v for k, v in attributes.items() if v is not None})
    if error is not None:
        span.set_status(_otel.error, error)
    span.end(end_time=end)
