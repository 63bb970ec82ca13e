"""``response_guard``: block or annotate an answer on the signals its rules read (spec 5.7).

Each rule is a ``when`` condition tree, like a decision's rules, over the
request-stage signals as routing evaluated them and the response-stage
signals (refusal, hallucination, ``stage: response`` jailbreak and safety,
``systemone`` rules with ``input.answer``), asked lazily about the answer.
Rules run in order; the first that blocks ends the guard. ``action``:
``block`` (the Router's 403), ``annotate`` (its ``code`` in x-vsr-warnings;
with ``details``, a note at the head of the answer) or ``none`` (recorded
only). ``on_unknown`` (annotate by default) is what a rule does when a signal
it reads is unknown: it failed, timed out, or had no context to check.

A guard that can refuse or rewrite the answer (a block rule, an annotate rule
with details, or ``on_unknown: block``) holds a streamed answer until it has
read all of it (``holds``); any other guard keeps true streaming and records
its outcome after the end.

This module is the configuration, its layering and the verdict's pure parts;
the evaluation lives with routing (``vsr_fast.routing.guard``) and the held
stream with the answer stage.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..config.schema import RuleNode
from ..config.schema_base import Block
from ._merge import merged_fields

TYPE = "response_guard"
# The body limit the protocol codec enforces on any model response: a held answer past it is refused unread.
HOLD_LIMIT_BYTES = 64 * 1024 * 1024
Action = Literal["block", "annotate", "none"]
_CODE = r"^[a-z*][a-z0-9_\-.:*/]{0,63}$"     # an RFC 8941 token, as x-vsr-warnings carries it


class GuardRule(Block):
    """One rule: a condition tree and what to do when it holds."""

    when: RuleNode
    action: Action
    details: bool = False
    code: Annotated[str, Meta(pattern=_CODE)] | None = None


class ResponseGuardConfig(Block):
    """``{type: response_guard, configuration: {enabled, rules, on_unknown}}`` at one layer (field by field)."""

    enabled: bool | UnsetType = UNSET
    rules: Annotated[list[GuardRule], Meta(min_length=1)] | UnsetType = UNSET
    on_unknown: Action | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class Rule:
    when: RuleNode
    action: str
    details: bool
    code: str


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """The guard of one (recipe, decision)."""

    rules: tuple[Rule, ...]
    on_unknown: str
    key: bytes          # the configuration as the cache key reads it

    @property
    def holds(self) -> bool:
        """Whether the guard can refuse or rewrite the answer, so a streamed answer must be held."""
        return self.on_unknown == "block" or any(
            r.action == "block" or (r.action == "annotate" and r.details) for r in self.rules)


_KEY = msgspec.json.Encoder(order="sorted")


def resolve(*layers: ResponseGuardConfig | None) -> GuardPolicy | None:
    """The guard a request gets, layers lowest first; None when off or never given rules."""
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False or "rules" not in values:
        return None
    on_unknown = values.get("on_unknown", "annotate")
    rules = tuple(Rule(r.when, r.action, r.details, r.code or default_code(r.when)) for r in values["rules"])
    key = _KEY.encode({"rules": values["rules"], "on_unknown": on_unknown})
    return GuardPolicy(rules, on_unknown, key)


def default_code(when: RuleNode) -> str:
    """A rule's warning code when it names none: ``guard:<type>:<name>`` of its first leaf."""
    leaf = when
    while leaf.operator is not None and leaf.conditions:
        leaf = leaf.conditions[0]
    if leaf.type and leaf.name:
        return f"guard:{leaf.type}:{_token(leaf.name)}"
    return "guard"


def _token(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-.:" else "_" for c in name.lower()) or "_"


def check(raw: dict, path: str) -> list[str]:
    """Load errors the block's types cannot say: an empty condition tree, details on a rule that cannot note."""
    errors = []
    rules = raw.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else ()):
        if not isinstance(rule, dict):
            continue
        when = rule.get("when")
        if isinstance(when, dict) and not when.get("operator") and not (when.get("type") and when.get("name")):
            errors.append(f"{path}.rules[{i}].when: invalid_value: a condition names a signal (type and name) "
                          "or an operator over conditions")
        if rule.get("details") is True and rule.get("action") != "annotate":
            errors.append(f"{path}.rules[{i}].details: invalid_value: details adds a note to an annotated answer; "
                          f"action {rule.get('action')!r} adds none")
    return errors


def note(codes: list[str]) -> str:
    """The note a ``details`` rule puts at the head of the answer."""
    return f"[Note from the router: this answer was flagged ({', '.join(codes)}).]\n\n"


__all__ = ["GuardPolicy", "GuardRule", "HOLD_LIMIT_BYTES", "ResponseGuardConfig", "Rule", "TYPE", "check",
           "default_code", "note", "resolve"]
