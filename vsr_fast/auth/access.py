"""What a key may reach: the one check every client API makes (Chat, Messages, Responses, Images,
count_tokens, the System One API), before its limits are asked (``limits.Limiter``): a request its key may
never make is a 403 that takes no place in any window, never a 429 that says to retry it.

A key's two lists mean:

- ``entrypoints``: the public names it may put in ``model``; each is routed by its entrypoint's recipe. A key
  with ``entrypoints`` names one of them or one of its ``models`` (403 otherwise), before any signal runs; a
  name no entrypoint and no provider model has (which a key without ``entrypoints`` gets routed by the
  default recipe) is none of them, so a restricted key never reaches the default recipe by an arbitrary name.
- ``models``: the provider models it may reach, named directly or chosen by a route. They trim the route's
  candidates, and a route left with none is a 403. A provider model named directly is such a route, its one
  candidate.

Names are held to the configuration the request is served by, not to the one the key was made under: a
stored key that lists a model or entrypoint a reload removed reaches nothing by that name (fails closed).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Container

from ..errors import KeyNotAllowed, echoing
from ..protocol.canonical import Identity
from ..routing import Route


def check_name(identity: Identity, name: str, entrypoints: Container[str], models: Container[str]) -> None:
    """KeyNotAllowed unless the key may put ``name`` in ``model``: one of its ``entrypoints`` that is one of
    ``entrypoints`` (the API's, in the configuration served), or one of its ``models`` that is one of
    ``models`` (the provider models declared, which a name reaches directly). A key without ``entrypoints``
    may name any but a provider model outside its ``models`` (what a route reaches is held by
    ``allowed_route`` once routing chose)."""
    if identity.entrypoints is None:
        if identity.models is None or name not in models or name in identity.models:
            return
    elif name in identity.entrypoints and name in entrypoints:
        return
    elif identity.models is not None and name in identity.models and name in models:
        return
    raise echoing(KeyNotAllowed, "this key may not call model {}", name, param="model")


def allowed_route(identity: Identity, r: Route) -> Route:
    """The route's candidates the key may reach; KeyNotAllowed when none is left."""
    if identity.models is None or all(identity.reaches(c.name) for c in r.candidates):
        return r
    kept = tuple(c for c in r.candidates if identity.reaches(c.name))
    if not kept:
        # The client's message names none of the route's models: they are outside the key's list, models it may
        # not see (GET /models hides them); the log keeps their names.
        refused = KeyNotAllowed("this key may not reach the models the route chose: they are outside this key's "
                                "models", param="model")
        refused.detail = f"{refused.message} ({', '.join(c.name for c in r.candidates)})"
        raise refused
    return dataclasses.replace(r, candidates=kept)
