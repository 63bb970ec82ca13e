"""Decisions: three-valued condition trees and the recipe's strategy (spec 5.2, 6.10).

A signal answers True, False or None (unknown). AND/OR/NOT follow Kleene's
logic, so an unknown leaf stays unknown until the root, where the decision's
``rules.on_unknown`` settles it; without it an unknown result is no match.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..config.schema import Decision, Recipe, RuleNode
from ..errors import RoutingError

Truth = bool | None
SignalKey = tuple[str, str, str | None]   # (type, name, label)
Lookup = Callable[[SignalKey], Truth]


def evaluate(node: RuleNode, lookup: Lookup) -> Truth:
    """Three-valued value of a condition tree; an empty AND is true, an empty OR false."""
    if node.operator is None:
        return lookup((node.type or "", node.name or "", node.label))
    if node.operator == "NOT":
        value = evaluate(node.conditions[0], lookup)
        return None if value is None else not value
    results = (evaluate(child, lookup) for child in node.conditions)
    if node.operator == "AND":
        unknown = False
        for r in results:
            if r is False:
                return False
            unknown |= r is None
        return None if unknown else True
    unknown = False
    for r in results:
        if r is True:
            return True
        unknown |= r is None
    return None if unknown else False


class DecisionFailed(RoutingError):
    """A decision with ``on_unknown: fail_request`` could not be resolved."""

    code = "decision_unresolved"


def settle(decision: Decision, value: Truth) -> bool:
    """Apply the decision's ``on_unknown`` policy to an unresolved result."""
    if value is not None:
        return value
    policy = decision.rules.on_unknown
    if policy == "match":
        return True
    if policy == "fail_request":
        raise DecisionFailed(
            f"decision {decision.name!r} could not be resolved: a signal it reads is unknown"
        )
    return False


@dataclass(frozen=True, slots=True)
class Chosen:
    decision: Decision | None
    matched: tuple[str, ...]   # names of every matching decision, best first


def choose(recipe: Recipe, lookup: Lookup) -> Chosen:
    """The recipe's priority strategy: the highest priority matching decision; ties by order."""
    matched = [d for d in _by_priority(recipe) if settle(d, evaluate(d.rules, lookup))]
    return Chosen(matched[0] if matched else None, tuple(d.name for d in matched))


def _by_priority(recipe: Recipe) -> list[Decision]:
    # sorted() is stable, so equal priorities keep the file's order.
    return sorted(recipe.decisions, key=lambda d: -d.priority)


def no_signals(_: SignalKey) -> Truth:
    """The lookup used before any signal layer exists: every signal is unknown."""
    return None


def lookup_from(values: Mapping[SignalKey, Truth]) -> Lookup:
    """A lookup over a mapping; absent signals are unknown."""
    return lambda key: values.get(key)
