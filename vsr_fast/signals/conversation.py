"""``conversation`` signals: structural counts over the messages and tools (spec 5.2).

Each rule counts one source and either tests the count with a predicate
(``count``) or asks whether it is above zero (``exists``). Every source is
counted from one pass over the messages, made once per request.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

from ..config.signals import ConversationRule, ConversationSource, Predicate
from .base import CanonicalRequest, CompileErrors, Outcome, RuleFamily, compile_each

# The legacy Chat Completions role "function" carries a function's result: the
# old spelling of a tool result, so it counts as one.
TOOL_RESULT_ROLES = ("tool", "function")
SYSTEM_PROMPT_ROLES = ("system", "developer")

# What a detail calls each source's count.
_NOUNS = {
    "message": "messages", "turn": "user turns", "tool_definition": "tools defined",
    "tool_call": "tool calls", "tool_result": "tool results", "system_prompt": "system prompts",
}


class Tally:
    """Every count a rule can ask for, from one pass over the messages."""

    __slots__ = ("roles", "tool_calls", "tools", "total")

    def __init__(self, request: CanonicalRequest) -> None:
        self.roles: Counter[str] = Counter()
        self.tool_calls = 0
        for m in request.messages:
            self.roles[m.role] += 1
            if m.role == "assistant" and m.tool_calls:
                self.tool_calls += len(m.tool_calls)
        self.total = len(request.messages)
        self.tools = request.tool_count

    def count(self, source: ConversationSource) -> int:
        kind = source.type
        if kind == "message":
            return self.total if source.role is None else self.roles[source.role]
        if kind == "turn":
            return self.roles["user"]
        if kind == "tool_definition":
            return self.tools
        if kind == "tool_call":
            return self.tool_calls
        if kind == "tool_result":
            return sum(self.roles[r] for r in TOOL_RESULT_ROLES)
        return sum(self.roles[r] for r in SYSTEM_PROMPT_ROLES)        # system_prompt


@dataclass(frozen=True, slots=True)
class _Compiled:
    source: ConversationSource
    predicate: Predicate | None       # None: exists
    noun: str
    bounds: str                       # the predicate, for the detail

    def answer(self, tally: Tally) -> Outcome:
        n = tally.count(self.source)
        if self.predicate is None:
            return Outcome(n > 0, value=n, detail=f"{n} {self.noun}")
        hit = self.predicate.holds(n)
        return Outcome(hit, value=n, detail=f"{n} {self.noun}, {'' if hit else 'not '}{self.bounds}")


class ConversationFamily(RuleFamily):
    """The compiled ``conversation`` rules of one recipe."""

    condition_type = "conversation"

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        if not names:
            return {}
        tally = Tally(request)
        return {name: _answer(self._rules[name], tally) for name in names}


def _answer(rule: _Compiled | None, tally: Tally) -> Outcome:
    if rule is None:
        return Outcome(None, confidence=0.0, detail="rule failed to load")
    return rule.answer(tally)


def compile(rules: list[ConversationRule], path: str, errors: CompileErrors) -> ConversationFamily:
    """Check and compile ``rules``; problems go to ``errors``, never raised."""
    return ConversationFamily(compile_each(rules, path, errors, _compile_rule))


def _compile_rule(rule: ConversationRule, rule_path: str, errors: CompileErrors) -> _Compiled | None:
    feature, ok = rule.feature, True
    source = feature.source
    if source.role is not None and source.type != "message":
        errors.add(f"{rule_path}.feature.source.role", "invalid_value",
                   f"role applies only to source type message, not {source.type}")
        ok = False
    if feature.type == "exists" and rule.predicate is not None:
        errors.add(f"{rule_path}.predicate", "invalid_value",
                   "an exists feature takes no predicate: it matches when the count is above 0; "
                   "use feature.type count to test the number")
        ok = False
    if feature.type == "count" and (rule.predicate is None or rule.predicate.is_empty()):
        errors.add(f"{rule_path}.predicate", "invalid_value",
                   "a count feature needs a predicate with at least one of gt, gte, lt, lte, eq")
        ok = False
    if not ok:
        return None
    noun = _NOUNS[source.type] if source.role is None else f"{source.role} messages"
    return _Compiled(source, rule.predicate, noun, _describe(rule.predicate))


def _describe(predicate: Predicate | None) -> str:
    if predicate is None:
        return ""
    marks = (("gt", ">"), ("gte", ">="), ("lt", "<"), ("lte", "<="), ("eq", "=="))
    return " and ".join(f"{sign} {getattr(predicate, f):g}" for f, sign in marks
                        if getattr(predicate, f) is not None)


__all__ = ["SYSTEM_PROMPT_ROLES", "TOOL_RESULT_ROLES", "ConversationFamily", "Tally", "compile"]
