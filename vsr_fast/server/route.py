"""Decode a Chat Completions body and route it: shared by the hot path and the routing preview."""
from __future__ import annotations

from collections.abc import Callable

from ..headers import trace
from ..protocol.chat import REQUEST_DECODER, ChatRequest
from ..protocol.errors import BodyProblem, decode_body, openai_request_error
from ..routing import Route, RoutingTable
from ..routing.plan import SystemOneAsker
from ..signals.base import CanonicalRequest, Identity
from ..signals.registry import matched_signals


def decode_chat(raw: bytes) -> ChatRequest:
    """The typed request; a 400 RequestError naming the bad field's path otherwise (depth included)."""
    try:
        return decode_body(REQUEST_DECODER, raw)
    except BodyProblem as exc:
        raise openai_request_error(exc.problem) from None


async def route_chat(table: RoutingTable, request: ChatRequest, identity: Callable[[], Identity],
                     systemone: SystemOneAsker | None = None) -> Route:
    """Route a decoded request; the canonical form is built only if a signal is read."""
    return await table.route(request.model, lambda: CanonicalRequest.from_chat(request, identity()), systemone)


def request_text(request: ChatRequest, identity: Callable[[], Identity]) -> Callable[[], str]:
    """The request's text as the systemone selector reads it, built when asked."""
    return lambda: CanonicalRequest.from_chat(request, identity()).text


def algorithm_of(route: Route) -> str:
    """The chosen decision's algorithm type; ``static`` for a fallback or a provider model named directly."""
    chosen = route.chosen
    return chosen.decision.algorithm.type if chosen is not None and chosen.decision is not None else "static"


def trace_of(route: Route) -> str:
    """``x-vsr-trace``'s value for a routed request (before any response-stage member)."""
    chosen = route.chosen
    coverage = {f"{t}:{n}": c for (t, n), c in route.readings.coverage.items()} if route.readings else None
    return trace.trace_value(signals=matched_signals(route.readings), decision=route.decision,
                             why=chosen.why if chosen else "model named directly", coverage=coverage,
                             algorithm=algorithm_of(route), modality=modality_member(route))


def modality_member(route: Route) -> str | None:
    """The trace's ``modality``: the chosen decision's output (``decisions[].output``) when it configures one."""
    chosen = route.chosen
    output = chosen.decision.output if chosen is not None and chosen.decision is not None else None
    if output is None:
        return None
    params = {"action": output.action} if output.action != "generate" else {}
    if isinstance(output.kind, str):
        return trace.string_member("modality", output.kind, **params)
    return trace.list_member("modality", list(output.kind), **params)
