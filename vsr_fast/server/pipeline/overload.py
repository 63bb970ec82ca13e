"""The two cases of spec "When the decision model is overloaded" that answer a retryable error.

1. Only rules that failed closed on the overloaded model refuse the request.
2. A rule left unread for overload would have refused it had it matched.
Never forward a request while such a rule is unread; a routing question left
unread lets the request go on.
"""
from __future__ import annotations

from ...decisions import engine
from ...errors import Overloaded
from ...systemone import overload
from .exchange import Exchange


def refuse_if_overloaded(ex: Exchange, *, refuses: bool) -> None:
    """Raise ``Overloaded`` (429 / 529, Retry-After) in either case; ``refuses``: the chosen decision refuses."""
    state, r = ex.state, ex.route
    assert r is not None
    readings, chosen = r.readings, r.chosen
    client = state.systemone_client
    if readings is None or not readings.overloaded or chosen is None or client is None:
        return
    if client.overload.config.action != "retry":
        return
    if refuses and chosen.decision is not None:
        held = [_key(leaf) for leaf in engine.leaves(chosen.decision.rules) if engine.leaf_truth(leaf, readings) is True]
        if held and all(key in readings.overloaded for key in held):
            _raise(ex, client)
    if _a_refusing_rule_went_unread(ex):
        _raise(ex, client)


def _a_refusing_rule_went_unread(ex: Exchange) -> bool:
    r = ex.route
    assert r is not None and r.chosen is not None and r.readings is not None
    chosen, recipe = r.chosen, r.recipe
    floor = chosen.decision.priority if chosen.decision is not None else None
    for decision in ex.state.table.recipes[recipe].recipe.decisions if recipe else ():
        if chosen.decision is not None and decision.name == chosen.decision.name:
            continue
        if floor is not None and decision.priority < floor:
            continue
        if ex.state.policies.fast(recipe, decision.name) is None:
            continue
        if any(_key(leaf) in r.readings.overloaded for leaf in engine.leaves(decision.rules)):
            return True
    return False


def _key(leaf) -> tuple[str, str]:
    return leaf.type or "", leaf.name or ""


def _raise(ex: Exchange, client) -> None:
    ex.codes.append(overload.WARNING)
    ex.extra.append((b"retry-after", str(client.overload.retry_after_s).encode()))
    client.overload.count_retryable(ex.api)
    raise Overloaded("the decision model is overloaded; retry after the Retry-After delay")
