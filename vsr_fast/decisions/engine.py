"""Decisions: three-valued condition trees and the recipe's strategy (spec 5.2, 6.10).

A signal answers True, False or None (unknown). AND/OR/NOT follow Kleene's
logic, so an unknown leaf stays unknown until the root, where the decision's
``rules.on_unknown`` settles it; without it an unknown result is no match.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.schema import Decision, Recipe, RuleNode
from ..errors import DecisionFailed, DecisionUnavailable
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


def settle(decision: Decision, value: Truth) -> bool:
    """Apply the decision's ``on_unknown`` policy to an unresolved result. ``fail_request`` is a miss here:
    ``choose`` fails the request only when the decision could have won (spec 5.2, 6.10)."""
    if value is not None:
        return value
    return decision.rules.on_unknown == "match"


def confidence(decision: Decision, readings: Readings) -> float:
    """Mean confidence of the leaves that hold; 0 for a decision that holds by no leaf."""
    values = [
        outcome.confidence
        for leaf in leaves(decision.rules)
        if leaf_truth(leaf, readings) is True and (outcome := readings.get(leaf.type or "", leaf.name or ""))
    ]
    return sum(values) / len(values) if values else 0.0


def confidence_ceiling(decision: Decision, readings: Readings) -> float:
    """The most confidence an unresolved decision could have had: each unknown leaf holding with confidence 1."""
    values = []
    for leaf in leaves(decision.rules):
        truth = leaf_truth(leaf, readings)
        if truth is None:
            values.append(1.0)
        elif truth and (outcome := readings.get(leaf.type or "", leaf.name or "")):
            values.append(outcome.confidence)
    return sum(values) / len(values) if values else 0.0


def unknown_leaves(decision: Decision, readings: Readings) -> tuple[tuple[str, str], ...]:
    """The (type, name) of the decision's leaves that read unknown, each once."""
    return tuple(dict.fromkeys((leaf.type or "", leaf.name or "") for leaf in leaves(decision.rules)
                               if leaf_truth(leaf, readings) is None))


@dataclass(frozen=True, slots=True)
class Verdict:
    """One decision's result, for the preview and the trace. ``unresolved``: an ``on_unknown: fail_request``
    decision left unknown (it fails the request only if it outranks every match)."""

    name: str
    value: Truth
    matched: bool
    priority: int
    confidence: float
    unresolved: bool = False


@dataclass(frozen=True, slots=True)
class Chosen:
    decision: Decision | None
    verdicts: tuple[Verdict, ...]
    why: str


def choose(recipe: Recipe, readings: Readings, remote: frozenset[str] = frozenset()) -> Chosen:
    """Evaluate every decision and pick one by the recipe's strategy.

    A ``fail_request`` decision left unknown fails the request only when it could have been the winner: when
    it outranks every decision that matched (under ``confidence``, at the most confidence it could have had).
    ``remote``: the condition types the decision model answers; an unknown among them makes the failure a
    retryable 503 (``DecisionUnavailable``).
    """
    by_confidence = recipe.strategy == "confidence"
    order = {d.name: i for i, d in enumerate(recipe.decisions)}

    def rank(v: Verdict) -> tuple:
        return (-v.confidence, -v.priority, order[v.name]) if by_confidence else (-v.priority, order[v.name])

    verdicts = []
    for d in recipe.decisions:
        value = evaluate(d.rules, readings)
        matched = settle(d, value)
        unresolved = value is None and d.rules.on_unknown == "fail_request"
        if unresolved and by_confidence:
            conf = confidence_ceiling(d, readings)
        elif matched and by_confidence:
            conf = confidence(d, readings)
        else:
            conf = 1.0 if matched else 0.0
        verdicts.append(Verdict(d.name, value, matched, d.priority, conf, unresolved))
    candidates = [v for v in verdicts if v.matched]
    best = min(candidates, key=rank) if candidates else None
    blocking = min((v for v in verdicts if v.unresolved), key=rank, default=None)
    if blocking is not None and (best is None or rank(blocking) < rank(best)):
        raise _unresolved(recipe, blocking.name, readings, tuple(verdicts), remote)
    if best is None:
        return Chosen(None, tuple(verdicts), "no decision matched")
    if by_confidence:
        why = f"highest confidence {best.confidence:.3g} of {len(candidates)} matching"
    else:
        why = f"highest priority {best.priority} of {len(candidates)} matching"
    by_name = {d.name: d for d in recipe.decisions}
    return Chosen(by_name[best.name], tuple(verdicts), why)


def _unresolved(recipe: Recipe, name: str, readings: Readings, verdicts: tuple[Verdict, ...],
                remote: frozenset[str]) -> DecisionFailed:
    """The error naming the decision, its unknown signals and why each is unknown."""
    decision = next(d for d in recipe.decisions if d.name == name)
    unknown = unknown_leaves(decision, readings)
    reasons = []
    for type_, rule in unknown:
        outcome = readings.get(type_, rule)
        why = (outcome.detail or "unknown") if outcome is not None else "not read"
        reasons.append(f"{type_}:{rule} ({why.removeprefix('unknown: ')})")
    outranked = "no decision matched" if not any(v.matched for v in verdicts) else "it outranks every match"
    message = (f"decision {name!r} could not be resolved (on_unknown: fail_request, {outranked}): "
               f"unknown {', '.join(reasons) or 'signal'}")
    cls = DecisionUnavailable if any(t in remote for t, _ in unknown) else DecisionFailed
    return cls(message, recipe=recipe.name, decision=name, unknown=unknown, verdicts=verdicts, readings=readings)
