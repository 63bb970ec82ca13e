"""``POST /api/v1/routing/preview``: a request through signals and decisions, no model called.

It takes the same Chat Completions body as the hot path, routes it with the
same code, and says what the live route would be and why. It is also the
entry point of the routing benchmark: ``timings_us`` times the routing alone.
"""
from __future__ import annotations

import time

import msgspec

from ..errors import VsrError
from ..headers.public import public_headers
from ..headers import registry as h
from ..headers.registry import ResponsePath
from ..protocol.errors import openai_error_body
from ..routing import Route
from .asgi import Receive, Scope, Send, header, read_body, send_whole
from .route import algorithm_of, decode_chat, route_chat
from .state import AppState

_JSON = (b"content-type", b"application/json")
_ENCODER = msgspec.json.Encoder()
_DEBUG = h.DEBUG.encode()
_TRACE = h.TRACE.encode()


def preview_body(route: Route, model_name: str, routing_us: float) -> dict:
    """The preview's JSON document for one routed request."""
    readings = route.readings
    chosen = route.chosen
    return {
        "model_requested": model_name,
        "recipe": route.recipe,
        "decision": route.decision,
        "algorithm": algorithm_of(route),
        "model": route.candidates[0].name if route.candidates else None,
        "candidates": [m.name for m in route.candidates],
        "fallback": route.fallback,
        "why": chosen.why if chosen else "the request names a provider model directly",
        "signals": [
            {"type": r.type, "name": r.name, "matched": r.outcome.matched, "value": r.outcome.value,
             "confidence": r.outcome.confidence, "detail": r.outcome.detail}
            for r in (readings.listing() if readings else [])
        ],
        "decisions": [
            {"name": v.name, "value": v.value, "matched": v.matched, "priority": v.priority, "confidence": v.confidence}
            for v in (chosen.verdicts if chosen else ())
        ],
        "timings_us": {"signals": dict(readings.timings_us) if readings else {}, "routing": routing_us},
    }


async def handle_preview(state: AppState, scope: Scope, receive: Receive, send: Send) -> None:
    """Route the body and answer with the route, its signals and its reasons."""
    try:
        raw = await read_body(scope, receive, state.max_body_bytes, state.body_pace)
        request = decode_chat(raw)
        started = time.perf_counter_ns()
        route = await route_chat(state.table, request, lambda: state.identity(scope), state.systemone)
        routing_us = (time.perf_counter_ns() - started) / 1000
    except VsrError as exc:
        headers = public_headers(config_version=state.config_version, path=ResponsePath.ERROR,
                                 recipe=getattr(exc, "recipe", None), decision=None, model=None)
        headers.append(_JSON)
        await send_whole(send, exc.status, headers, openai_error_body(exc))
        return
    headers = public_headers(config_version=state.config_version, path=ResponsePath.UPSTREAM,
                             recipe=route.recipe, decision=route.decision,
                             model=route.candidates[0].name if route.candidates else None)
    if state.debug_policy != "none" and header(scope, _DEBUG) is not None:
        # The trace the live route would carry, for callers the debug policy allows (route probe asks).
        value = state.trace_for(scope, route)
        if value is not None:
            headers.append((_TRACE, value.encode()))
    headers.append(_JSON)
    await send_whole(send, 200, headers, _ENCODER.encode(preview_body(route, request.model, routing_us)))
