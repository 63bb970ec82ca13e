"""Stage 2, admit: what the caller's key may name, then its limits, once the body is decoded.

The identity itself is read at the edge (``app.py``), before any stage. Here a
key restricted to some entrypoints or models is held to the name it sent
(``auth.access``: 403 ``model_not_allowed``), and only then does the request
take its place in each limit that applies (RateLimited otherwise): a request
its key may never make is refused without counting, and is never told to
retry (as LiteLLM checks model access before its rate limits). The route stage
trims the chosen candidates to the key's ``models``; a refusal there, or any
later one for what the key may reach, gives the request's place back
(``release``). ``release`` also returns its in-flight place and charges the
answer's tokens.
"""
from __future__ import annotations

from ...auth.access import check_name
from ...auth.usage import UsageMeter
from ...errors import KeyNotAllowed
from .exchange import Exchange


async def admit(ex: Exchange) -> None:
    state = ex.state
    identity = state.identity(ex.scope)
    if identity.entrypoints is not None or identity.models is not None:
        assert ex.req is not None
        check_name(identity, ex.adapter.model(ex.req), state.table.by_name, state.table.models)
    limiter = state.limiter
    if not limiter.active:
        return
    ticket = ex.ticket = await limiter.admit(identity, ex.api)
    if ticket is not None:
        ex.extra += ticket.headers          # x-ratelimit-*, on whatever the request is answered
        if ticket.meters:
            ex.meter = UsageMeter(len(ex.raw))


def release(ex: Exchange) -> None:
    ticket = ex.ticket
    if ticket is not None:
        ex.ticket = None
        ex.state.limiter.done(ticket, ex.meter.tokens() if ex.meter is not None else 0,
                              counted=not isinstance(ex.failure, KeyNotAllowed))
