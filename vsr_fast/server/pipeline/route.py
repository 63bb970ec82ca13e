"""Stage 2, route: signals and decision, the decision's output contract, the trace, and the overload refusal."""
from __future__ import annotations

from ...auth.access import allowed_route
from ...config import output as output_rules
from ...errors import NoDecision
from ...headers import registry as h
from ...protocol.adapters import Inbound
from ...routing import Route
from ..asgi import header
from ..delegation import bind_for_systemone
from . import overload, retention
from .exchange import Exchange
from .offload import off_loop, signals_runner

_DEBUG = h.DEBUG.encode()


async def route(ex: Exchange) -> None:
    """Choose the recipe, decision and candidates; refuse what the output contract or the overload policy refuses."""
    state, adapter, req = ex.state, ex.adapter, ex.req
    assert req is not None
    name = adapter.model(req)
    identity = state.identity(ex.scope)      # the name it sent was held to its key by ``admit``
    bind_for_systemone(state, ex.scope)
    refused: NoDecision | None = None
    routed: Route | None = None
    try:
        routed = await state.table.route(name, lambda: adapter.canonical(req, identity), state.systemone,
                                         signals_runner(state.metrics, len(ex.raw)))
        recipe = routed.recipe
    except NoDecision as exc:
        refused = exc
        compiled = state.table.recipe_for(name)         # a NoDecision came from a recipe
        recipe = compiled.recipe.name if compiled is not None else None
        # No decision matched: the recipe's and the global plugins still run (spec 6.5), so a fast_response
        # of theirs answers instead of the 400.
        if exc.unmatched is not None and state.policies.fast(recipe, None) is not None:
            routed = exc.unmatched
    r = retention.held(ex, routed, recipe)       # a session's earlier turn may hold a decision for this one
    if r is None:
        assert refused is not None
        raise refused
    was_held = r is not routed
    r = allowed_route(identity, r)
    if not was_held:
        retention.fresh(ex, r)
    ex.route = r
    ex.recipe, ex.decision = r.recipe, r.decision
    own = r.chosen.decision.request_timeout_ms if r.chosen is not None and r.chosen.decision is not None else None
    if own is not None:
        ex.deadline = ex.arrived + own / 1000
    ex.model = r.candidates[0].name if r.candidates else None
    if r.readings is not None and any(c != "full" for c in r.readings.coverage.values()):
        ex.codes.append("scan_partial")
    ex.req = _apply_output_contract(ex, req, r)
    if ex.api == "images" or output_rules.is_image_decision(_output(r)):
        ex.path = h.ResponsePath.IMAGE_GENERATION
    if state.debug_policy != "none" and header(ex.scope, _DEBUG) is not None:
        ex.trace = state.trace_for(ex.scope, r)
        retention.traced(ex, r, was_held)
    # The cache key's canonical request and the replay copy: body-sized work.
    await off_loop(ex.state.metrics, "record", len(ex.raw), ex.rec.routed, state, ex.scope, ex.raw, req, r)
    replay = ex.rec.replay_header()
    if replay is not None:
        ex.extra.append(replay)
    overload.refuse_if_overloaded(ex, refuses=state.policies.fast(r.recipe, r.decision) is not None)


def _output(r: Route):
    chosen = r.chosen
    return chosen.decision.output if chosen is not None and chosen.decision is not None else None


def _apply_output_contract(ex: Exchange, req: Inbound, r: Route) -> Inbound:
    """The decision's output contract, enforced before any model is called (spec 5.8)."""
    if r.recipe is None:
        return req   # a provider model named directly: its own api_format decides
    output = _output(r)
    refused = output_rules.refusal(ex.api, output, ex.adapter.tool_choice(req))
    if refused is not None:
        raise refused
    return ex.adapter.with_output_tools(req, output)
