"""What a key may reach: the one check every client API makes (Chat, Messages, Responses, Images,
count_tokens, the System One API), after its limits admitted the request (``limits.Limiter``).

A key with ``entrypoints`` names one of them or of its ``models`` (403 otherwise), before any signal runs. A
key with ``models`` reaches only them: they trim the route's candidates, and a route left with none is a
403. A provider model named directly is such a route, its one candidate.
"""
from __future__ import annotations

import dataclasses

from ..errors import KeyNotAllowed
from ..protocol.canonical import Identity
from ..routing import Route


def check_name(identity: Identity, name: str) -> None:
    """KeyNotAllowed unless the key may put ``name`` in ``model``; a key without ``entrypoints`` may name any
    (its ``models``, if any, are held by ``allowed_route`` once routing chose)."""
    if identity.entrypoints is None or name in identity.entrypoints:
        return
    if identity.models is not None and name in identity.models:
        return
    raise KeyNotAllowed(f"this key may not call model {name!r}", param="model")


def allowed_route(identity: Identity, r: Route) -> Route:
    """The route's candidates the key may reach; KeyNotAllowed when none is left."""
    if identity.models is None or all(identity.reaches(c.name) for c in r.candidates):
        return r
    kept = tuple(c for c in r.candidates if identity.reaches(c.name))
    if not kept:
        raise KeyNotAllowed(f"this key may not reach the models the route chose "
                            f"({', '.join(c.name for c in r.candidates)})", param="model")
    return dataclasses.replace(r, candidates=kept)
