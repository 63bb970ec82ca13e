"""Stage 0, admit: the caller's limits before the body is read, and what its key may reach once it is.

The identity itself is read at the edge (``app.py``), before any stage. Here a
request takes its place in each limit that applies (RateLimited otherwise, with
the body left unread), and, after decoding, a key restricted to some
entrypoints or models is held to them. ``release`` gives the place back and
charges the answer's tokens.
"""
from __future__ import annotations

import dataclasses

from ...auth.usage import UsageMeter
from ...errors import KeyNotAllowed
from ...routing import Route
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


def check_name(ex: Exchange, name: str) -> None:
    """A key with ``entrypoints`` names one of them or of its ``models`` (403 otherwise), before any signal runs.

    A key without ``entrypoints`` has no entrypoint limit: its ``models``, if any, trim the route's candidates
    (``allowed_route``), and a provider model named directly is such a route, its one candidate."""
    identity = ex.state.identity(ex.scope)
    if identity.entrypoints is None or name in identity.entrypoints:
        return
    if identity.models is not None and name in identity.models:
        return
    raise KeyNotAllowed(f"this key may not call model {name!r}", param="model")


def allowed_route(ex: Exchange, r: Route) -> Route:
    """The route's candidates a key with ``models`` may reach; 403 when none is left."""
    models = ex.state.identity(ex.scope).models
    if models is None or all(c.name in models for c in r.candidates):
        return r
    kept = tuple(c for c in r.candidates if c.name in models)
    if not kept:
        raise KeyNotAllowed(f"this key may not reach the models the route chose "
                            f"({', '.join(c.name for c in r.candidates)})", param="model")
    return dataclasses.replace(r, candidates=kept)
