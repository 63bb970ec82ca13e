"""``POST /api/v1/routing/preview``: a request through signals and decisions, no model called.

It takes the body of any of the three conversation APIs, read as its own
endpoint reads it (``preview_api``): Chat Completions, Messages (its top-level
``system`` included) or Responses (``input``, a ``previous_response_id``
expanded from the caller's stored responses), or a System One body naming a
System One entrypoint or native alias, routed as ``POST /v1/systemone`` routes
it; an explicit ``?api=`` says which and wins over the body's fields. The body
passes the endpoints' scan (depth, items, UTF-8) before anything decodes. It
routes it with the same code, runs the decision's selector as the request path
does (random excepted: it says each candidate's chance rather than draw), and
says what the live route would be and why. A request a decision error would
fail gets that error's status, with the signals and decisions besides. It is
also the entry point of the routing benchmark: ``timings_us`` times the routing
alone.
"""
from __future__ import annotations

import dataclasses
import time

import msgspec

from ..config import output as output_rules
from ..config.algorithm import kind_of
from ..errors import DecisionFailed, NoDecision, RequestError, VsrError, echoing
from ..headers.public import public_headers
from ..headers import registry as h
from ..headers import trace
from ..headers.registry import ResponsePath
from ..protocol import systemone as wire
from ..protocol.errors import openai_error_body, openai_request_error, quoted_values, shape_problem
from ..routing import Route
from .asgi import Receive, Scope, Send, header, read_body, send_whole
from .pipeline import looper
from .pipeline.looper import Selected
from ..protocol.chat import TOP_LEVEL_DECODER
from .route import algorithm_of, route_chat
from .state import AppState
from .systemone_api import canonical

_JSON = (b"content-type", b"application/json")
_ENCODER = msgspec.json.Encoder()
_DEBUG = h.DEBUG.encode()
_TRACE = h.TRACE.encode()
_ANTHROPIC_VERSION = b"anthropic-version"
PREVIEW_APIS = ("chat", "messages", "responses", "systemone")


def preview_model(route: Route, picked: Selected | None = None) -> str | None:
    """The model the request would go to first; for a random draw, only a model nothing else can be drawn
    beside (None while the draw is open: the preview's ``selection`` gives each candidate's chance)."""
    info = picked.preview if picked is not None else {}
    if info.get("type") == "random":
        drawable = [name for name, p in info["probabilities"].items() if p > 0]
        return drawable[0] if len(drawable) == 1 else None
    return route.candidates[0].name if route.candidates else None


# The executors: their answers are the Looper's (x-vsr-response-path: looper), whole or failed.
_LOOPER_ALGORITHMS = frozenset({"escalate", "ratings", "remom", "fusion", "workflows"})


def preview_api(scope: Scope, raw: bytes, table) -> str:
    """Which API's body this is: ``?api=chat|messages|responses|systemone`` if given (it wins over the fields:
    a Chat body may name a System One entrypoint, which Chat routes by its default recipe); else by its fields:
    a ``model`` naming a System One entrypoint or native alias is System One, ``input`` and no ``messages`` is
    Responses, ``messages`` with a top-level ``system`` (or an ``anthropic-version`` header, as the Anthropic
    SDK sends) is Messages, anything else Chat. A bad ``api`` is a 400 quoting it capped."""
    for part in scope.get("query_string", b"").split(b"&"):
        name, _, value = part.partition(b"=")
        if name == b"api":
            api = value.decode("latin-1")
            if api not in PREVIEW_APIS:
                raise echoing(RequestError, "api must be one of " + ", ".join(PREVIEW_APIS) + ", not {}", api,
                              param="api")
            return api
    if names_systemone(table, raw):
        return "systemone"
    try:
        top = TOP_LEVEL_DECODER.decode(raw)
    except msgspec.DecodeError:
        return "chat"           # not a JSON object: Chat's decoder says what is wrong with it, by path
    if "input" in top and "messages" not in top:
        return "responses"
    if "messages" in top and ("system" in top or header(scope, _ANTHROPIC_VERSION) is not None):
        return "messages"
    return "chat"


async def previewed_route(table, request, identity, asker, policies, adapter=None) -> Route:
    """The request's route, as the request path gives it (``adapter``: its API's, Chat's by default); when no
    decision matched and the recipe has a fast_response, the unmatched route it answers on (the request path's
    rule, ``pipeline.route``), not the 400."""
    try:
        if adapter is None:
            return await route_chat(table, request, identity, asker)
        return await table.route(adapter.model(request), lambda: adapter.canonical(request, identity()), asker)
    except NoDecision as exc:
        unmatched = exc.unmatched
        if unmatched is None or policies.fast(unmatched.recipe, None) is None:
            raise
        return unmatched


def preview_path(route: Route, policies) -> ResponsePath:
    """The x-vsr-response-path the real request would answer on (a cache hit aside, which no preview can tell):
    the decision's fast_response answers with no model; an executor's answer is the Looper's (``fallback``
    says a later candidate answered, which no preview can tell either; the recipe's fallback is ``upstream``); an image decision's, an image generation; else a model's, upstream. The
    request path's rule, in its order (``pipeline.route``, ``pipeline.answer``)."""
    if policies.fast(route.recipe, route.decision) is not None:
        return ResponsePath.FAST_RESPONSE
    if algorithm_of(route) in _LOOPER_ALGORITHMS:
        return ResponsePath.LOOPER
    chosen = route.chosen
    if chosen is not None and chosen.decision is not None and output_rules.is_image_decision(chosen.decision.output):
        return ResponsePath.IMAGE_GENERATION
    return ResponsePath.UPSTREAM


def preview_body(route: Route, model_name: str, routing_us: float, picked: Selected | None = None,
                 path: ResponsePath = ResponsePath.UPSTREAM) -> dict:
    """The preview's JSON document for one routed request."""
    readings = route.readings
    chosen = route.chosen
    fast = path == ResponsePath.FAST_RESPONSE
    return {
        "model_requested": model_name,
        "recipe": route.recipe,
        "decision": route.decision,
        "algorithm": algorithm_of(route),
        "model": None if fast else preview_model(route, picked),    # a fast_response calls no model
        "response_path": path.value,
        "candidates": [m.name for m in route.candidates],
        "selection": picked.preview if picked is not None and picked.preview else None,
        "fallback": route.fallback,
        "why": chosen.why if chosen else "the request names a provider model directly",
        "signals": signal_rows(readings),
        "decisions": decision_rows(chosen.verdicts if chosen else ()),
        "timings_us": {"signals": dict(readings.timings_us) if readings else {}, "routing": routing_us},
    }


def signal_rows(readings) -> list[dict]:
    return [{"type": r.type, "name": r.name, "matched": r.outcome.matched, "value": r.outcome.value,
             "confidence": r.outcome.confidence, "detail": r.outcome.detail}
            for r in (readings.listing() if readings else [])]


def decision_rows(verdicts) -> list[dict]:
    return [{"name": v.name, "value": v.value, "matched": v.matched, "priority": v.priority,
             "confidence": v.confidence, "unresolved": v.unresolved} for v in verdicts]


def unresolved_body(exc: DecisionFailed, model_name: str) -> dict:
    """What the preview says of a request a ``fail_request`` decision fails: the error, and the signals and
    decisions that led to it, the unresolved decision named."""
    return {"model_requested": model_name, "recipe": exc.recipe, "decision": None, "unresolved": exc.decision,
            "unknown": [f"{t}:{n}" for t, n in exc.unknown], "signals": signal_rows(exc.readings),
            "decisions": decision_rows(exc.verdicts)}


def error_document(exc: VsrError, model_name: str | None) -> bytes:
    """The error body; a decision error's carries the signals and decisions besides."""
    if not isinstance(exc, DecisionFailed) or exc.readings is None:
        return openai_error_body(exc)
    doc = msgspec.json.decode(openai_error_body(exc))
    doc.update(unresolved_body(exc, model_name or ""))
    return _ENCODER.encode(doc)


class _Named(msgspec.Struct):
    model: object = None


_NAMED = msgspec.json.Decoder(_Named)


def names_systemone(table, raw: bytes) -> str | None:
    """``raw``'s ``model`` when it names a System One entrypoint or native alias (a System One body: no Chat
    request may name one, a Chat body naming a native alias is refused), else None. ``raw`` passed the scan
    (``shape_problem``): its decode is bounded."""
    try:
        name = _NAMED.decode(raw).model
    except msgspec.DecodeError:
        return None
    known = isinstance(name, str) and (name in table.systemone_by_name or name in table.native_aliases())
    return name if known else None


async def systemone_route(state: AppState, raw: bytes) -> tuple[Route, str, object]:
    """(route, model asked, its text) of a System One body, routed as ``POST /v1/systemone`` routes it: by its
    entrypoint's recipe on the state's request, or to the native alias it names (no recipe)."""
    try:
        body = wire.decode_request(raw, model_required=True)
    except wire.InvalidRequest as exc:
        raise RequestError(f"Invalid System One body: {quoted_values(exc.message)}") from None
    except msgspec.DecodeError as exc:
        raise RequestError(f"Invalid System One body: {quoted_values(str(exc))}") from None
    table, name = state.table, body.model or ""
    direct = None if name in table.systemone_by_name else table.native_aliases().get(name)
    if direct is not None:
        return Route(None, None, (direct,)), name, None
    # An entrypoint's recipe; any other name is model_not_found, as POST /v1/systemone answers it.
    route = await table.route_recipe(table.systemone_recipe_for(name), lambda: canonical(body), state.systemone)
    return route, name, lambda: canonical(body).text


def systemone_stages(table, route: Route) -> tuple[Route, Selected] | None:
    """A System One escalation's calls as ``POST /v1/systemone`` makes them (``systemone_escalate``): its
    ``stages`` one by one, in their order, never reordered by cost nor by health (a native alias answered by a
    deployment has no backend a health check could eject: Chat's order would put the judge first); None for any
    other route."""
    alg = looper.algorithm_of(route)
    if alg is None or kind_of(alg) != "escalate" or alg.escalate is None or not alg.escalate.stages:
        return None
    calls = [stage.model for stage in alg.escalate.stages]
    order = tuple(table.models[name] for name in dict.fromkeys(calls))
    return dataclasses.replace(route, candidates=order), Selected(
        order, preview={"type": "escalate", "calls": calls, "order": "stages"})


async def handle_preview(state: AppState, scope: Scope, receive: Receive, send: Send) -> None:
    """Route the body and answer with the route, its signals and its reasons."""
    request = model_name = None
    try:
        raw = await read_body(scope, receive, state.max_body_bytes, state.body_pace)
        # The endpoints' scan before anything decodes (README: nesting past 256 is a 400, never a decode's
        # RecursionError): the API's detection decodes too.
        problem = shape_problem(raw)
        if problem is not None:
            raise openai_request_error(problem)
        api = preview_api(scope, raw, state.table)
        if api == "systemone":
            model_name = names_systemone(state.table, raw)
            started = time.perf_counter_ns()
            route, model_name, text = await systemone_route(state, raw)
            routing_us = (time.perf_counter_ns() - started) / 1000
        else:
            adapter = state.adapters[api]
            # As the endpoint decodes it: the caller's own stored responses only, for a previous_response_id.
            request = adapter.decode(raw, scope["headers"])
            request.owner = state.identity(scope).owner
            request = await adapter.prepare(request)
            model_name = adapter.model(request)
            started = time.perf_counter_ns()
            route = await previewed_route(state.table, request, lambda: state.identity(scope), state.systemone,
                                          state.policies, adapter)
            routing_us = (time.perf_counter_ns() - started) / 1000
            # The selector the request path runs, on the same measurements; not timed as routing.
            text = lambda: adapter.canonical(request, state.identity(scope)).text  # noqa: E731
        staged = systemone_stages(state.table, route) if api == "systemone" else None
        if staged is not None:
            route, picked = staged
        else:
            route, picked = await looper.previewed(route, state.table, state.systemone, state.selection, text,
                                                   state.selection.sessions.get(looper.session_key(state, scope)),
                                                   state.upstreams.live)
    except VsrError as exc:
        headers = public_headers(config_version=state.config_version, path=ResponsePath.ERROR,
                                 recipe=getattr(exc, "recipe", None), decision=None, model=None)
        if exc.retry_after_s is not None:
            headers.append((b"retry-after", str(exc.retry_after_s).encode()))
        headers.append(_JSON)
        await send_whole(send, exc.status, headers, error_document(exc, model_name))
        return
    path = preview_path(route, state.policies)
    model = None if path == ResponsePath.FAST_RESPONSE else preview_model(route, picked)
    headers = public_headers(config_version=state.config_version, path=path,
                             recipe=route.recipe, decision=route.decision, model=model)
    if state.debug_policy != "none" and header(scope, _DEBUG) is not None:
        # The trace the live route would carry, for callers the debug policy allows (route probe asks).
        value = state.trace_for(scope, route)
        if value is not None:
            headers.append((_TRACE, with_notes(value, picked).encode()))
    headers.append(_JSON)
    await send_whole(send, 200, headers, _ENCODER.encode(preview_body(route, model_name, routing_us, picked, path)))


def with_notes(value: str, picked: Selected) -> str:
    """The trace with the members the selector writes (``selector``, ``ranking``), as the request path adds them."""
    for member, items in picked.notes.items():
        value = trace.with_member(value, trace.list_member(member, items))
    return value
