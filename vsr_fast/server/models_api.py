"""``GET /v1/models`` and ``GET /v1/models/{id}``: the names the request's key may put in ``model`` and be served
(the entrypoints' names with a route it may reach, then the provider models that are not System One aliases,
unless ``direct_models: refuse``), in OpenAI's shape or, for
Anthropic's SDK (told apart by its ``anthropic-version`` header, as Anthropic's API needs it), Anthropic's.
A name the key may not call is neither listed nor found (404); one only the catch-all serves is not listed, and is
found by Anthropic's SDK only (Claude Code's default model)."""
from __future__ import annotations

from collections.abc import Mapping

import msgspec
from quart import request

from ..auth.access import check_name
from ..auth.keys import may_name_entrypoint, may_name_model
from ..config.schema import Recipe
from ..errors import InvalidValue, KeyNotAllowed, ModelNotFound, echoing
from ..headers.registry import ANTHROPIC_VERSION as ANTHROPIC_VERSION
from ..protocol.canonical import Identity
from .state import AppState

PATH = "/v1/models"
# No release date is known: OpenAI's ``created`` is 0, Anthropic's ``created_at`` the same epoch (its ModelInfo:
# "may be set to an epoch value if the release date is unknown").
EPOCH = "1970-01-01T00:00:00Z"
ANTHROPIC_LIMIT, ANTHROPIC_MAX_LIMIT = 20, 1000     # Anthropic's page size: default and bound


def names(state: AppState) -> list[str]:
    """The model names of the listing, entrypoints first: those the request's key may call and be served by
    (all without keys): an entrypoint with a route the key may reach, a provider model unless
    ``direct_models: refuse``."""
    identity = state.identity(request.scope)
    table = state.table
    chat_models = [] if table.direct_models == "refuse" else \
        [n for n, m in table.models.items() if m.api_format != "systemone"]
    return [*(n for n in table.entrypoint_names
              if may_name_entrypoint(identity, n) and _reachable(identity, table.by_name[n].recipe)),
            *(n for n in chat_models if may_name_model(identity, n))]


def _reachable(identity: Identity, recipe: Recipe) -> bool:
    """Whether some route of ``recipe`` (a decision's or the fallback's) keeps a candidate the key reaches:
    a name whose every route ``allowed_route`` refuses (403) is one the key may not ask for."""
    if identity.models is None:
        return True
    routes = [d.modelRefs for d in recipe.decisions] + ([recipe.fallback.modelRefs] if recipe.fallback else [])
    # A route with no candidate (a decision answered by its plugins) is never refused.
    return any(not refs or any(identity.reaches(r.model) for r in refs) for refs in routes)


def openai_model(name: str) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": "vsr-fast"}


def anthropic_model(name: str) -> dict:
    return {"type": "model", "id": name, "display_name": name, "created_at": EPOCH, "lifecycle": "active"}


def listing(state: AppState, anthropic: bool, args: Mapping[str, str]) -> bytes:
    """The whole listing in OpenAI's shape, or one page of it in Anthropic's (``after_id``, ``before_id``,
    ``limit``); InvalidValue for a limit outside Anthropic's 1 to 1000."""
    every = names(state)
    if not anthropic:
        return msgspec.json.encode({"object": "list", "data": [openai_model(n) for n in every]})
    try:
        limit = int(args.get("limit", ANTHROPIC_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= ANTHROPIC_MAX_LIMIT:
        raise InvalidValue(f"limit: Input should be between 1 and {ANTHROPIC_MAX_LIMIT}", param="limit")
    page, has_more = _page(every, args.get("after_id"), args.get("before_id"), limit)
    return msgspec.json.encode({"data": [anthropic_model(n) for n in page], "has_more": has_more,
                                "first_id": page[0] if page else None, "last_id": page[-1] if page else None})


def _page(every: list[str], after_id: str | None, before_id: str | None, limit: int) -> tuple[list[str], bool]:
    """Anthropic's cursor paging: the ``limit`` names right before ``before_id``, else right after ``after_id``,
    else the first; an unknown cursor reads as the end of the list."""
    if before_id is not None:
        end = every.index(before_id) if before_id in every else 0
        start = max(0, end - limit)
        return every[start:end], start > 0
    start = every.index(after_id) + 1 if after_id in every else (0 if after_id is None else len(every))
    return every[start:start + limit], start + limit < len(every)


def one(state: AppState, anthropic: bool, model_id: str) -> bytes:
    """The model ``model_id`` in the listing's shape: a listed name (OpenAI's rule: what the list does not show
    is not found, as OpenAI and LiteLLM answer, so a client probing an id learns what the list says); in
    Anthropic's shape also any other the key may put in ``model`` that the default entrypoint's recipe serves
    (the catch-all: Claude Code asks for its own default, ``claude-...``, which ``POST /v1/messages`` serves, and
    stops on a 404), which no listing can enumerate; ModelNotFound otherwise."""
    if model_id not in names(state) and not (anthropic and _caught_all(state, model_id)):
        raise echoing(ModelNotFound, "The model {} does not exist", model_id, param="model")
    return msgspec.json.encode(anthropic_model(model_id) if anthropic else openai_model(model_id))


def _caught_all(state: AppState, name: str) -> bool:
    """Whether a request naming ``name`` (no entrypoint's, no provider model's) is served by the catch-all."""
    table = state.table
    if table.default is None or name in table.models or name in table.by_name \
            or name in table.systemone_by_name:
        return False
    identity = state.identity(request.scope)
    try:
        check_name(identity, name, table.by_name, table.models)
    except KeyNotAllowed:
        return False
    return _reachable(identity, table.default.recipe)


def is_models_path(path: str) -> bool:
    return path == PATH or path.startswith(PATH + "/")
