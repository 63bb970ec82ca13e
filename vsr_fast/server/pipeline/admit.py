"""Stage 0, admit: the caller's limits before the body is read.

The identity itself is read at the edge (``app.py``), before any stage. Here a
request takes its place in each limit that applies (RateLimited otherwise, with
the body left unread); after decoding, the route stage holds a key restricted
to some entrypoints or models to them (``auth.access``). ``release`` gives the
place back and charges the answer's tokens.
"""
from __future__ import annotations

from ...auth.usage import UsageMeter
from .exchange import Exchange


async def admit(ex: Exchange) -> None:
    limiter = ex.state.limiter
    if not limiter.active:
        return
    ex.ticket = await limiter.admit(ex.state.identity(ex.scope), ex.api)
    if ex.ticket is not None and ex.ticket.meters:
        ex.meter = UsageMeter(0)


def release(ex: Exchange) -> None:
    ticket = ex.ticket
    if ticket is not None:
        ex.ticket = None
        ex.state.limiter.done(ticket, ex.meter.tokens() if ex.meter is not None else 0)
