"""Stage 0, admit: the caller's limits before the body is read; then, once it is decoded, what its key may name.

The identity itself is read at the edge (``app.py``), before any stage. Here a
request takes its place in each limit that applies (RateLimited otherwise, with
the body left unread, so a key over its limits holds no body reads). Once the
body is decoded, a key restricted to some entrypoints or models is held to the
name it sent (``auth.access``: 403 ``model_not_allowed``); that refusal gives
its place back, as LiteLLM checks model access before its rate limits, so a call
the key may never make is not counted and a full window never turns it into a
429. A refusal after routing (the route's candidates trimmed to none) keeps its
place: its signals ran. ``release`` returns the in-flight place and the tokens the
request reserved, and charges the answer's tokens.
"""
from __future__ import annotations

import time

from ...auth.access import check_name
from ...auth.usage import UsageMeter
from ...errors import KeyNotAllowed
from ..asgi import header
from .exchange import Exchange


async def admit(ex: Exchange) -> None:
    limiter = ex.state.limiter
    if not limiter.active:
        return
    # The body is not read yet: its declared length sizes the tokens it reserves (none when chunked).
    length = header(ex.scope, b"content-length")
    ticket = ex.ticket = await limiter.admit(ex.state.identity(ex.scope), ex.api,
                                             int(length) if length is not None and length.isdigit() else None)
    if ticket is not None:
        ex.extra += ticket.headers          # x-ratelimit-*, on whatever the request is answered
        if ticket.meters:
            ex.meter = UsageMeter(0)


def check_names(ex: Exchange) -> None:
    """The name the request sent, held to its key's ``entrypoints`` and ``models``; refused, it is not counted."""
    state = ex.state
    identity = state.identity(ex.scope)
    if identity.entrypoints is None and identity.models is None:
        return
    assert ex.req is not None
    try:
        check_name(identity, ex.adapter.model(ex.req), state.table.by_name, state.table.models)
    except KeyNotAllowed:
        ticket = ex.ticket
        if ticket is not None:
            ex.ticket = None
            state.limiter.done(ticket, 0, counted=False)
        raise


def release(ex: Exchange) -> None:
    tokens = ex.meter.tokens() if ex.meter is not None else 0
    ticket = ex.ticket
    if ticket is not None:
        ex.ticket = None
        ex.state.limiter.done(ticket, tokens)
    who = ex.state.identity(ex.scope)
    if who.key_id is not None or who.team is not None:     # the admin API's counts per key and team
        ex.state.tally.add(who.key_id, who.team, tokens, time.time())
