"""The router's own System One API: ``POST /v1/systemone`` and ``/v1/decisions``, ``GET /v1/systemone/models``.

Served on an ``api: systemone`` entrypoint (spec 6.3): the request's state is
routed by the entrypoint's recipe like any text, and its decision's native
aliases (``api_format: systemone``) answer it, in the form it came in, in
order (``systemone_failover``: a 429, a 5xx, a timeout, an answer that does
not fit its questions move on; a verdict about the request itself goes back
as it is). The request's deadline covers it from the body's first byte, and
the client's leaving cancels every call made for it.
"""
from __future__ import annotations

import logging

import msgspec
import trio

from ..auth.access import allowed_route, check_name
from ..auth.keys import may_name_entrypoint, may_name_model
from ..errors import (
    DelegatedCredentialMissing,
    KeyNotAllowed,
    LooperBudgetExhausted,
    LooperNoAcceptedAnswer,
    ModelNotFound,
    RateLimited,
    RoutingError,
    VsrError,
    WITHHELD,
)
from ..headers.public import public_headers
from ..config.algorithm import kind_of
from ..config.schema import ProviderModel
from ..headers.registry import ResponsePath
from ..protocol import systemone as wire
from ..protocol.errors import quoted_values
from ..protocol.canonical import Identity
from ..protocol.chat import Message
from ..signals.base import CanonicalRequest
from ..routing import Route
from . import systemone_failover as failover
from .asgi import ClientGone, Receive, Scope, Send, read_body, send_whole, watching
from .delegation import bind_for_systemone
from .state import AppState
from .systemone_accounting import SystemOneExchange
from .systemone_escalate import escalate

log = logging.getLogger("vsr_fast.gateway")
_JSON = (b"content-type", b"application/json")


def error_body(exc: VsrError) -> bytes:
    """``exc`` in the System One API's error shape."""
    return wire.ENCODER.encode(wire.ErrorResponse(wire.ErrorBody(code=exc.code, message=exc.message)))


def _error(code: str, message: str, *, question: str | None = None, state: str | None = None) -> tuple[int, bytes]:
    return failover.error(code, message, question=question, state=state)


async def handle_systemone(state: AppState, scope: Scope, receive: Receive, send: Send) -> None:
    """Route a System One request through its entrypoint's recipe and answer it with a native alias.

    The caller's key is held to what Chat holds it to: its ``entrypoints`` and ``models`` decide what it may
    name and reach (403 ``model_not_allowed``), then its limits admit the request (429 with Retry-After
    otherwise), before any System One call. A request refused for the name it sent takes no place in any window
    (``auth.access``); one refused after routing (its route trimmed to nothing it may reach) keeps its place."""
    admitted = _Admitted()
    # Counted, logged and recorded as Chat's requests are, whatever ends it (a client gone: 499).
    acct = SystemOneExchange(state, scope)
    try:
        await _serve(state, scope, receive, send, state.identity(scope), admitted, acct)
    finally:
        if admitted.ticket is not None:
            # A refusal for the name it sent comes before the limits (no place taken); one after routing keeps its
            # place: its signals ran.
            state.limiter.done(admitted.ticket, 0)
        acct.finish()


class _Admitted:
    """What the limits admitted (released by ``handle_systemone``)."""

    __slots__ = ("ticket",)

    def __init__(self) -> None:
        self.ticket = None


async def _serve(state: AppState, scope: Scope, receive: Receive, send: Send, identity: Identity,
                 admitted: _Admitted, acct: SystemOneExchange) -> None:
    recipe = decision = model = logged = None
    arrived = trio.current_time()
    looper = limited = False
    extra: list[tuple[bytes, bytes]] = []
    status, out, watch, raw = None, b"", None, None
    # One deadline from the body's first byte to the answer (global.router.limits.request_timeout_ms, or the
    # chosen decision's own; the drain's when nearer), and the client's leaving, end every call made for it.
    timeout_s = state.request_timeout_s
    with trio.CancelScope(deadline=min(arrived + timeout_s, state.drain_deadline)) as cut:
        try:
            raw = acct.raw = await read_body(scope, receive, state.max_body_bytes, state.body_pace)
            try:
                body = wire.decode_request(raw, model_required=True)
            except wire.InvalidRequest as exc:
                status, out = _error("invalid_request", quoted_values(exc.message), question=exc.question,
                                     state=exc.state)
                logged = quoted_values(exc.message, WITHHELD)      # the logs keep no value of the client's
            except msgspec.DecodeError as exc:   # ValidationError included
                status, out = _error("invalid_request", quoted_values(str(exc)))
                logged = quoted_values(str(exc), WITHHELD)
            else:
                acct.asked = body.model
                async with watching(scope, receive, send, cut) as watch:
                    if identity.entrypoints is not None or identity.models is not None:
                        check_name(identity, body.model or "", state.table.systemone_by_name,
                                   state.table.native_aliases())
                    if state.limiter.active:
                        # System One answers carry no token usage: a call counts towards rpm and in-flight, never
                        # tokens.
                        admitted.ticket = await state.limiter.admit(identity, "systemone")
                        if admitted.ticket is not None:
                            extra += admitted.ticket.headers
                    bind_for_systemone(state, scope)
                    direct = None if body.model in state.table.systemone_by_name else \
                        state.table.native_aliases().get(body.model or "")
                    if direct is not None:
                        # A native alias named directly answers itself, no recipe: the listing names it.
                        acct.routed(allowed_route(identity, Route(None, None, (direct,))))
                        model, status, out, said, logged = await failover.answer(state, [direct], body, acct)
                        extra += said
                    else:
                        compiled = state.table.systemone_recipe_for(body.model)
                        route = allowed_route(identity, await state.table.route_recipe(
                            compiled, lambda: canonical(body), state.systemone))
                        recipe, decision = route.recipe, route.decision
                        acct.routed(route)
                        chosen = route.chosen.decision if route.chosen else None
                        if chosen is not None and chosen.request_timeout_ms is not None:
                            timeout_s = chosen.request_timeout_ms / 1000
                            cut.deadline = min(arrived + timeout_s, state.drain_deadline)
                        alg = chosen.algorithm if chosen is not None else None
                        looper = alg is not None and kind_of(alg) == "escalate"
                        if looper:
                            model, response = await escalate(state, alg, body,
                                                             lambda alias: failover.ask(state, alias, body, acct),
                                                             acct.tried, arrived, identity.reaches, acct.verdicts)
                            status, out = 200, wire.ENCODER.encode(response)
                        else:
                            model, status, out, said, logged = await failover.answer(state, route.candidates, body,
                                                                                     acct)
                            extra += said
        except ModelNotFound as exc:
            status, out = _error("model_not_found", exc.message)
        except RoutingError as exc:
            status, out = _error("invalid_request", exc.message)
            recipe = exc.recipe
        except DelegatedCredentialMissing as exc:
            status, out = exc.status, _error(exc.code, exc.message)[1]
        except KeyNotAllowed as exc:
            status, out = exc.status, _error(exc.code, exc.message)[1]
        except (LooperBudgetExhausted, LooperNoAcceptedAnswer) as exc:
            status, out = exc.status, _error(exc.code, exc.message)[1]
        except RateLimited as exc:
            status, out = exc.status, error_body(exc)
            extra += [(b"retry-after", str(exc.retry_after_s).encode()), *exc.headers]
            limited = True
        except VsrError as exc:
            status, out = _error(exc.code, exc.message)
        except ClientGone:
            raise
        except Exception:  # a deployment's own bug (an in-process model's): logged, answered in this API's shape
            log.exception("internal error on %s", scope.get("path"))
            status, out = _error("internal_error", "the router failed to answer this request")
    if watch is not None and watch.gone:
        raise ClientGone        # nothing to answer; every call made for it was cancelled
    if status is None and raw is None:      # the deadline passed first, while the body came (as chat answers it)
        status, out = _error("body_timeout", "the request body did not arrive within the request's deadline")
    elif status is None:
        status, out = _error("request_timeout", f"the request was not answered within its deadline ({timeout_s:g} s)")
    path = (ResponsePath.LOOPER if looper else ResponsePath.UPSTREAM) if status < 400 else \
        ResponsePath.RATE_LIMITED if limited else ResponsePath.ERROR
    headers = public_headers(config_version=state.config_version, path=path, recipe=recipe, decision=decision,
                             model=model)
    headers += extra
    headers += acct.answered(status, out, path, recipe, decision, model, logged)
    headers.append(_JSON)
    await send_whole(send, status, headers, out)


def canonical(body: wire.StandardRequest | wire.BatchRequest) -> CanonicalRequest:
    """Route on the text the questions are about: the state's request (a batch's first entry)."""
    first = body.state if isinstance(body, wire.StandardRequest) else next(iter(body.states.values())).state
    return CanonicalRequest([Message(role="user", content=first.request)])


def models_listing(state: AppState, identity: Identity) -> bytes:
    """``GET /v1/systemone/models``: every name the caller's key may pass as ``model`` and what it answers: the
    System One entrypoints' names (what their recipes' native aliases answer; one whose recipe reaches none of
    the key's ``models`` is left out) and the native aliases themselves, as ``/v1/models`` lists them."""
    table = state.table
    every = table.native_aliases()
    answers = {name: _answers(table, alias) for name, alias in every.items()}
    aliases = {name: alias for name, alias in every.items() if may_name_model(identity, name)}
    infos = []
    for name, compiled in table.systemone_by_name.items():
        recipe = compiled.recipe
        refs = [r.model for d in recipe.decisions for r in d.modelRefs]
        refs += [r.model for r in recipe.fallback.modelRefs] if recipe.fallback else []
        if not may_name_entrypoint(identity, name) or (identity.models is not None
                                                        and not any(identity.reaches(ref) for ref in refs)):
            continue
        types: set[str] = set()
        modalities: set[str] = set()
        for ref in dict.fromkeys(refs):
            if ref in answers and identity.reaches(ref):
                types |= answers[ref][0]
                modalities |= answers[ref][1]
        infos.append(wire.ModelMetadata(name=name, description=f"routed by recipe {recipe.name}",
                                        release_date=wire.UNKNOWN_RELEASE_DATE,
                                        question_types=sorted(types), modalities=sorted(modalities)))
    for name, alias in aliases.items():
        types, modalities = answers[name]
        infos.append(wire.ModelMetadata(
            name=name, description=alias.description or "", release_date=wire.UNKNOWN_RELEASE_DATE,
            question_types=sorted(types), modalities=sorted(modalities),
        ))
    return wire.ENCODER.encode(wire.ModelMetadataList(models=infos))


def _answers(table, alias: ProviderModel) -> tuple[set[str], set[str]]:
    """The question types and modalities the deployment behind ``alias`` answers (none known: empty)."""
    capable = table._capable.get(alias.deployment or "")
    return (set(capable.question_types), set(capable.modalities)) if capable else (set(), set())
