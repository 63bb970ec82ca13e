"""Decisions: three-valued condition trees and the recipe's strategy (spec 5.2, 6.10).

A signal answers True, False or None (unknown). AND/OR/NOT follow Kleene's
logic, so an unknown leaf stays unknown until the root, where the decision's
``rules.on_unknown`` settles it; without it an unknown result is no match.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.schema import Decision, Recipe, RuleNode
from ..errors import DecisionFailed
from ..signals.registry import Readings

Truth = bool | None


def leaf_truth(node: RuleNode, readings: Readings) -> Truth:
    """A leaf's value: its signal's match, or its predicate on the signal's number."""
    outcome = readings.get(node.type or "", node.name or "")
    if outcome is None or outcome.matched is None:
        # A systemone condition's own on_error resolves its unknown (spec 6.10).
        return None if node.on_error is None else node.on_error == "match"
    if node.label is not None:
        return (outcome.labels or {}).get(node.label)
    predicate = node.predicate()
    if predicate is None:
        return outcome.matched
    return None if outcome.value is None else predicate.holds(outcome.value)


def evaluate(node: RuleNode, readings: Readings) -> Truth:
    """Three-valued value of a condition tree; an empty AND is true, an empty OR false."""
    if node.operator is None:
        return leaf_truth(node, readings)
    if node.operator == "NOT":
        value = evaluate(node.conditions[0], readings)
        return None if value is None else not value
    decisive = node.operator == "OR"     # the child value that settles the node at once
    unknown = False
    for child in node.conditions:
        r = evaluate(child, readings)
        if r is decisive:
            return decisive
        unknown |= r is None
    return None if unknown else not decisive


def leaves(node: RuleNode):
    """Every leaf of a condition tree."""
    if node.operator is None:
        yield node
    else:
        for child in node.conditions:
            yield from leaves(child)


def settle(decision: Decision, value: Truth, recipe: str | None = None) -> bool:
    """Apply the decision's ``on_unknown`` policy to an unresolved result."""
    if value is not None:
        return value
    policy = decision.rules.on_unknown
    if policy == "match":
        return True
    if policy == "fail_request":
        raise DecisionFailed(f"decision {decision.name!r} could not be resolved: a signal it reads is unknown",
                             recipe=recipe)
    return False


def confidence(decision: Decision, readings: Readings) -> float:
    """Mean confidence of the leaves that hold; 0 for a decision that holds by no leaf."""
    values = [
        outcome.confidence
        for leaf in leaves(decision.rules)
        if leaf_truth(leaf, readings) is True and (outcome := readings.get(leaf.type or "", leaf.name or ""))
    ]
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """One decision's result, for the preview and the trace."""

    name: str
    value: Truth
    matched: bool
    priority: int
    confidence: float


@dataclass(frozen=True, slots=True)
class Chosen:
    decision: Decision | None
    verdicts: tuple[Verdict, ...]
    why: str


def choose(recipe: Recipe, readings: Readings) -> Chosen:  # noqa: C901 - one pass, one strategy switch
    """Evaluate every decision and pick one by the recipe's strategy."""
    verdicts = []
    for d in recipe.decisions:
        value = evaluate(d.rules, readings)
        matched = settle(d, value, recipe.name)
        conf = confidence(d, readings) if matched and recipe.strategy == "confidence" else (1.0 if matched else 0.0)
        verdicts.append(Verdict(d.name, value, matched, d.priority, conf))
    order = {d.name: i for i, d in enumerate(recipe.decisions)}
    candidates = [v for v in verdicts if v.matched]
    if not candidates:
        return Chosen(None, tuple(verdicts), "no decision matched")
    if recipe.strategy == "confidence":
        best = min(candidates, key=lambda v: (-v.confidence, -v.priority, order[v.name]))
        why = f"highest confidence {best.confidence:.3g} of {len(candidates)} matching"
    else:
        best = min(candidates, key=lambda v: (-v.priority, order[v.name]))
        why = f"highest priority {best.priority} of {len(candidates)} matching"
    by_name = {d.name: d for d in recipe.decisions}
    return Chosen(by_name[best.name], tuple(verdicts), why)
