"""Decode a Chat Completions body and route it: shared by the hot path and the routing preview."""
from __future__ import annotations

from collections.abc import Callable

from ..protocol.chat import REQUEST_DECODER, ChatRequest
from ..protocol.errors import BodyProblem, decode_body, openai_request_error
from ..routing import Route, RoutingTable
from ..routing.plan import SystemOneAsker
from ..signals.base import CanonicalRequest, Identity


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
