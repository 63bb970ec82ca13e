"""What every signal reads and what it answers.

A request becomes one ``CanonicalRequest`` (protocol-neutral,
``vsr_fast.protocol.canonical``) before any signal runs; each signal family compiles its rules once at load and answers
``Outcome``s for the rule names a recipe reads.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

# The request and caller live with the protocols that build them; signals read them from here too.
from ..protocol.canonical import ANONYMOUS as ANONYMOUS
from ..protocol.canonical import CanonicalRequest as CanonicalRequest
from ..protocol.canonical import Identity as Identity


@dataclass(slots=True)
class Outcome:
    """One rule's answer. ``matched`` None means unknown (three-valued logic)."""

    matched: bool | None
    value: float | None = None        # the number the rule publishes (count, density, tokens)
    confidence: float = 1.0           # for strategy: confidence and projections
    detail: str | None = None         # why, in a few words, for the preview and the trace
    labels: dict[str, bool] | None = None   # per option, for conditions that name a label
    spans: list | None = None               # span answers, for masking
    # The detail without the request's own words (a matched span, a client's value), set where ``detail`` quotes
    # them: what the event stream carries of a private request (masking, or capture_personal_data: false).
    redacted: str | None = None


class Family(Protocol):
    """A compiled signal type: the rules of one ``recipes[].signals.<key>`` list."""

    condition_type: str

    def names(self) -> Collection[str]:
        """The rule names it declares."""
        ...

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        """An Outcome for each of ``names`` (a subset of ``names()``)."""
        ...


@dataclass
class CompileErrors:
    """Load errors a family found in its rules, as ``<path>: <code>: <message>`` lines."""

    lines: list[str] = field(default_factory=list)

    def add(self, path: str, code: str, message: str) -> None:
        self.lines.append(f"{path}: {code}: {message}")


class RuleFamily:
    """Base of the compiled families: rule name -> that rule's compiled form.

    A rule that failed to load is kept as None, so conditions naming it are not
    also reported as undeclared; the load fails on its own error anyway.
    """

    condition_type: str = ""

    def __init__(self, rules: dict) -> None:
        self._rules = rules

    def names(self) -> Collection[str]:
        return self._rules.keys()


def compile_each(rules: list, path: str, errors: CompileErrors, compile_one) -> dict:
    """``{name: compile_one(rule, rule_path, errors)}``; a repeated name is a load error."""
    compiled: dict = {}
    for rule in rules:
        rule_path = f"{path}[{rule.name}]"
        if rule.name in compiled:
            kind = path.rsplit(".", 1)[-1]
            errors.add(f"{rule_path}.name", "duplicate_name", f"{kind} rule {rule.name!r} is declared more than once")
            continue
        compiled[rule.name] = compile_one(rule, rule_path, errors)
    return compiled
