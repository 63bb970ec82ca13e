"""Load warnings about which decision a request reaches (spec 5.2 decisions, 5.7 plugins, 6.5 precedence).

A recipe's ``strategy: priority`` (the default) takes the matching decision of highest priority; equal priorities
go to the one written first. The configurations below load, and route as written, but not as their author most
likely meant, and nothing said so:

- ``no_rules``: a decision that omits ``rules`` matches every request. The spec's catch-all is written out,
  ``rules: {operator: AND, conditions: []}`` (the quickstart's ``general``), and is not warned of.
- ``never_matches``: a rule tree that can never hold (an OR over no conditions).
- ``shadowed_decision``: a decision ranked below one that matches every request is never chosen.
- ``equal_priority``: two decisions of one priority that can match the same request are settled by file order.
- ``unused_model_refs``: a decision (or fallback) that a ``fast_response`` answers calls no model, so its
  modelRefs are dead.

Under ``strategy: confidence`` the leaves' confidence ranks first (a catch-all's is 0), so the order checks do not
apply there. Each warning is one ``<path>: <code>: <message>`` line naming the decisions.
"""
from __future__ import annotations

from collections.abc import Iterator

from .schema import NO_RULES, Decision, PluginEntry, Recipe, RouterConfig, RuleNode


def check_decision_order(config: RouterConfig, warnings: list[str]) -> None:
    native = {ep.recipe for ep in config.entrypoints if ep.api == "systemone"}
    for recipe in config.recipes:
        base = f"recipes[{recipe.name}]"
        warnings += _no_rules(recipe, base)
        if recipe.strategy == "priority":
            warnings += _order(recipe, base)
        inherited = [] if recipe.name in native else [("global.plugins", config.global_.plugins),
                                                      (f"{base}.plugins", recipe.plugins)]
        warnings += _answered_without_models(recipe, base, inherited)


def always(node: RuleNode) -> bool:
    """Whether the tree holds for every request, whatever its signals read (an empty AND does)."""
    if node.operator == "AND":
        return all(always(c) for c in node.conditions)
    if node.operator == "OR":
        return any(always(c) for c in node.conditions)
    return node.operator == "NOT" and len(node.conditions) == 1 and never(node.conditions[0])


def never(node: RuleNode) -> bool:
    """Whether the tree holds for no request (an empty OR does not)."""
    if node.operator == "AND":
        return any(never(c) for c in node.conditions)
    if node.operator == "OR":
        return all(never(c) for c in node.conditions)
    return node.operator == "NOT" and len(node.conditions) == 1 and always(node.conditions[0])


def _no_rules(recipe: Recipe, base: str) -> Iterator[str]:
    for i, d in enumerate(recipe.decisions):
        if d.rules is NO_RULES:
            yield (f"{base}.decisions[{i}]: no_rules: decision {d.name!r} has no rules, so it matches every request; "
                   "give it rules, or write rules: {operator: AND, conditions: []} if it is meant as the catch-all")
        elif never(d.rules):
            yield (f"{base}.decisions[{i}].rules: never_matches: decision {d.name!r}'s rules can never hold (an OR "
                   "over no conditions is false), so it is never chosen")


def _order(recipe: Recipe, base: str) -> Iterator[str]:
    ranked = sorted(enumerate(recipe.decisions), key=lambda item: -item[1].priority)    # stable: file order
    top = next(((i, d) for i, d in ranked if always(d.rules)), None)
    shadowed: set[int] = set()
    if top is not None:
        k = ranked.index(top)
        for j, d in ranked[k + 1:]:
            shadowed.add(j)
            yield (f"{base}.decisions[{j}]: shadowed_decision: decision {d.name!r} (priority {d.priority}) is never "
                   f"chosen: decision {top[1].name!r} (decisions[{top[0]}], priority {top[1].priority}) matches every "
                   "request and ranks above it; give the catch-all the lowest priority")
    live = [(i, d) for i, d in enumerate(recipe.decisions) if i not in shadowed and not never(d.rules)]
    for k, (j, later) in enumerate(live):
        ties = [(i, d) for i, d in live[:k] if d.priority == later.priority and not _exclusive(d.rules, later.rules)]
        if not ties:
            continue
        earlier = " and ".join(f"{d.name!r} (decisions[{i}])" for i, d in ties)
        wins = "wins" if len(ties) == 1 else "each win"
        yield (f"{base}.decisions[{j}].priority: equal_priority: decision {later.name!r} shares priority "
               f"{later.priority} with {earlier}, and both can match one request: file order settles it, so "
               f"{earlier} {wins} over {later.name!r}; give them distinct priorities")


def _literals(node: RuleNode) -> set[tuple[tuple, bool]]:
    """The leaves the tree requires, with the value each must have: the root leaf, or an AND's leaf and NOT-leaf
    children. Two trees requiring one leaf with opposite values never hold together."""
    def leaf(n: RuleNode) -> tuple | None:
        if n.operator is not None:
            return None
        return n.type, n.name, n.label, n.gt, n.gte, n.lt, n.lte, n.eq

    def literal(n: RuleNode) -> tuple[tuple, bool] | None:
        if n.operator == "NOT" and len(n.conditions) == 1 and (key := leaf(n.conditions[0])) is not None:
            return key, False
        key = leaf(n)
        return (key, True) if key is not None else None

    children = node.conditions if node.operator == "AND" else [node]
    return {lit for c in children if (lit := literal(c)) is not None}


def _exclusive(a: RuleNode, b: RuleNode) -> bool:
    ours = _literals(a)
    return any((key, not value) in ours for key, value in _literals(b))


def _fast_response(layers: list[tuple[str, list[PluginEntry]]]) -> str | None:
    """Where the fast_response that answers is configured (the most specific layer that has one), or None."""
    found = None
    for path, entries in layers:
        j = next((j for j, e in enumerate(entries) if e.type == "fast_response"), None)
        if j is not None:
            found = f"{path}[{j}]"
    return found


def _answered_without_models(recipe: Recipe, base: str,
                             inherited: list[tuple[str, list[PluginEntry]]]) -> Iterator[str]:
    for i, d in enumerate(recipe.decisions):
        where = _fast_response(inherited + [(f"{base}.decisions[{i}].plugins", d.plugins)])
        if where is not None and d.modelRefs:
            yield (f"{base}.decisions[{i}].modelRefs: unused_model_refs: decision {d.name!r} is answered by the "
                   f"fast_response at {where}, which calls no model: its modelRefs ({_models(d)}) are never "
                   "called; remove them, or the fast_response")
    where = _fast_response(inherited)
    if where is not None and recipe.fallback is not None:
        yield (f"{base}.fallback.modelRefs: unused_model_refs: a request that matches no decision is answered by "
               f"the fast_response at {where}, which calls no model: the fallback's modelRefs are never called")


def _models(d: Decision) -> str:
    return ", ".join(dict.fromkeys(r.model for r in d.modelRefs))


__all__ = ["always", "check_decision_order", "never"]
