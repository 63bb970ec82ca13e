"""The response stage: a decision's ``response_guard`` compiled against its recipe, and run on an answer.

Compiling checks each ``when`` leaf as a decision's leaves are checked, except
that response-stage rules are allowed; the request-stage signals a guard reads
join what routing asks, so the guard sees them "as routing evaluated them".

Running is lazy and merged. The rules' trees are evaluated in rounds: each
round walks every rule not yet settled, and an AND stops at its first false
(or still unasked) condition, an OR at its first true one; the response-stage
rules at that frontier are asked together, one merged call per deployment
(``SystemOneAsker.ask_response``), and the next round goes on from there. A
rule whose tree holds fires its action, one that stays unknown fires the
guard's ``on_unknown``; the first block ends the guard.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..config.schema import RuleNode
from ..decisions import engine
from ..plugins.response_guard import GuardPolicy, Rule
from ..protocol import systemone as wire
from ..signals.base import CanonicalRequest, Outcome
from ..selection.refusal import refusal_text
from ..signals.registry import Readings
from ..systemone.learned import LearnedRule, outcome_of, why_unknown

Ask = Callable[[list[LearnedRule]], Awaitable[dict[tuple[str, str], Outcome]]]


@dataclass(frozen=True)
class CompiledGuard:
    """A decision's guard and the response-stage rules its trees read."""

    policy: GuardPolicy
    response: dict[tuple[str, str], LearnedRule]

    @property
    def holds(self) -> bool:
        return self.policy.holds


@dataclass
class Fired:
    code: str
    action: str
    unknown: bool = False
    details: bool = False             # an annotate rule's own note (never for on_unknown)


@dataclass
class Verdict:
    """What the guard did with one answer."""

    outcome: str = "passed"           # passed, noted, flagged, blocked
    fired: list[Fired] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)   # response-stage rules asked, as type:name
    cpu_us: float = 0.0

    @property
    def codes(self) -> list[str]:
        """The warning codes of the annotate actions, an unknown one marked ``;unknown``."""
        return [f.code + (";unknown" if f.unknown else "") for f in self.fired if f.action == "annotate"]

    @property
    def recorded(self) -> list[str]:
        """Every fired rule's code for the record, whatever its action (the blocking one included), marked alike."""
        return [f.code + (";unknown" if f.unknown else "") for f in self.fired]

    @property
    def blocked_by(self) -> str | None:
        return next((f.code for f in self.fired if f.action == "block"), None)


class _Pending(frozenset):
    """A tree's value is not known until these response-stage rules are asked."""


def _value(node: RuleNode, readings: Readings, response: dict) -> bool | None | _Pending:
    if node.operator is None:
        key = (node.type or "", node.name or "")
        if key in response and key not in readings.outcomes:
            return _Pending([key])
        return engine.leaf_truth(node, readings)
    if node.operator == "NOT":
        v = _value(node.conditions[0], readings, response)
        return v if isinstance(v, _Pending) or v is None else not v
    decisive = node.operator == "OR"
    unknown = False
    for child in node.conditions:
        v = _value(child, readings, response)
        if isinstance(v, _Pending):
            return v        # lazy: what follows is read only once this child is known
        if v is decisive:
            return decisive
        unknown |= v is None
    return None if unknown else not decisive


async def run(guard: CompiledGuard, request_readings: Readings | None, ask: Ask) -> Verdict:
    """The verdict on one answer; ``ask`` answers response-stage rules (one merged round per call)."""
    started = time.process_time_ns()
    readings = Readings()
    if request_readings is not None:
        readings.outcomes.update(request_readings.outcomes)
    verdict = Verdict()
    values: dict[int, bool | None] = {}
    rules = guard.policy.rules
    while True:
        frontier: set[tuple[str, str]] = set()
        for i, rule in enumerate(rules):
            if i in values:
                continue
            v = _value(rule.when, readings, guard.response)
            if isinstance(v, _Pending):
                frontier |= v
            else:
                values[i] = v
        if not frontier:
            break
        wanted = [guard.response[k] for k in sorted(frontier)]
        verdict.asked += [f"{t}:{n}" for t, n in sorted(frontier)]
        own = time.process_time_ns()
        got = await ask(wanted)
        started += time.process_time_ns() - own      # the guard's CPU, not the call's
        for key in frontier:
            readings.outcomes[key] = got.get(key) or Outcome(None, detail="unknown: not answered")
    for i, rule in enumerate(rules):
        action = _action(rule, values[i], guard.policy.on_unknown)
        if action is None:
            continue
        unknown = values[i] is None
        verdict.fired.append(Fired(rule.code, action, unknown, details=rule.details and not unknown))
        if action == "block":
            break
    verdict.outcome = _outcome(verdict)
    verdict.cpu_us = (time.process_time_ns() - started) / 1000
    return verdict


def _action(rule: Rule, value: bool | None, on_unknown: str) -> str | None:
    if value is True:
        return rule.action
    if value is None:
        return on_unknown
    return None


def _outcome(verdict: Verdict) -> str:
    if verdict.blocked_by is not None:
        return "blocked"
    annotated = [f for f in verdict.fired if f.action == "annotate"]
    if any(f.details for f in annotated):
        return "noted"
    return "flagged" if annotated else "passed"


def note_codes(verdict: Verdict) -> list[str]:
    """The codes whose rule asks for a note at the head of the answer."""
    return [f.code for f in verdict.fired if f.action == "annotate" and f.details]


# What a refusal rule reads from an answer that opens with a refusal text: certain, so no model is asked.
_TEXT_REFUSAL = wire.ChoiceAnswer(choice="refusal", confidence=1.0, probabilities={"refusal": 1.0, "compliance": 0.0})


def asker_for(systemone, canonical: CanonicalRequest, answer: str) -> Ask:
    """``ask`` over the request stage's System One asker; the context is the request's tool results. A
    ``refusal`` rule on an answer that opens with a refusal text (``selection.refusal``) is answered from the
    text: the decision model's refusal question is zero-shot and uncalibrated, the phrasing is not."""
    context = "\n\n".join(canonical.tool_results) or None
    phrase = refusal_text(answer)

    async def ask(rules: list[LearnedRule]) -> dict[tuple[str, str], Outcome]:
        out: dict[tuple[str, str], Outcome] = {}
        live = []
        for rule in rules:
            key = (rule.condition_type, rule.name)
            if rule.condition_type == "refusal" and phrase is not None:
                out[key] = dataclasses.replace(outcome_of(rule, _TEXT_REFUSAL), detail=f"refusal text ({phrase})")
            elif systemone is None:
                out[key] = outcome_of(rule, None, "no System One client")
            elif rule.share.spec.context and context is None:
                out[key] = outcome_of(rule, None, "no grounding context to check against")
            else:
                live.append(rule)
        if live:
            answers = await systemone.ask_response({r.share: r.question for r in live}, canonical, answer, context)
            for rule in live:
                out[(rule.condition_type, rule.name)] = outcome_of(rule, answers.get(rule.share),
                                                                   why_unknown(answers, rule.share))
        return out

    return ask


__all__ = ["CompiledGuard", "Fired", "Verdict", "asker_for", "compile_guard", "note_codes", "run"]
