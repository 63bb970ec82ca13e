"""A recipe's signals, compiled once: which rules exist, which are read, and reading them.

Only the rules that a decision, a projection or a plugin reads are evaluated
(spec 5.2): a family none of whose rules is read is never called.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..config.schema import Recipe
from ..config.signals import CONDITION_TYPES
from . import authz, context, conversation, input_modality, keywords, language, metadata
from .base import CanonicalRequest, CompileErrors, Family, Outcome

Compiler = Callable[[list, str, CompileErrors], Family]

# signals block key -> compiler; the family's condition_type is what conditions name.
COMPILERS: dict[str, Compiler] = {
    "keywords": keywords.compile,
    "language": language.compile,
    "context": context.compile,
    "conversation": conversation.compile,
    "role_bindings": authz.compile,
    "metadata": metadata.compile,
    "input_modality": input_modality.compile,
}

# Condition types whose outcomes carry a number a leaf predicate can test.
VALUED = {"keyword", "context", "conversation", "projection", "systemone", "domain", "fact_check", "user_feedback",
          "jailbreak", "safety", "pii", "hallucination", "refusal", "turn_relation", "complexity", "modality"}


@dataclass(slots=True)
class Reading:
    """One evaluated rule, as the preview and the trace show it."""

    type: str
    name: str
    outcome: Outcome


class Readings:
    """Every outcome of one request's signals, keyed by (condition type, rule name)."""

    __slots__ = ("outcomes", "timings_us", "coverage", "overloaded", "request_text", "request_parts")

    def __init__(self) -> None:
        self.outcomes: dict[tuple[str, str], Outcome] = {}
        self.timings_us: dict[str, float] = {}
        # Guard rules that read their input in windows: "full", "partial n/m" or "none".
        self.coverage: dict[tuple[str, str], str] = {}
        # Rules left unread because their decision model was overloaded past the wait.
        self.overloaded: set[tuple[str, str]] = set()
        # The current turn the System One questions read: masking reuses its span answers by this text.
        self.request_text: str | None = None
        # Its user messages' texts, in order (``CanonicalRequest.turn_texts``): the request's own text positions.
        self.request_parts: list[str] = []

    def get(self, type_: str, name: str) -> Outcome | None:
        return self.outcomes.get((type_, name))

    def listing(self) -> list[Reading]:
        return [Reading(t, n, o) for (t, n), o in self.outcomes.items()]


class RecipeSignals:
    """The compiled signal families of one recipe, and the subset its decisions read."""

    def __init__(self, recipe: Recipe, path: str, errors: CompileErrors) -> None:
        self.families: dict[str, Family] = {}
        self.keys: dict[str, str] = {}
        for key, compile_family in COMPILERS.items():
            rules = getattr(recipe.signals, key)
            if rules:
                family = compile_family(rules, f"{path}.signals.{key}", errors)
                self.families[family.condition_type] = family
        self._read: dict[str, tuple[str, ...]] = {}

    def declares(self, type_: str, name: str) -> bool:
        family = self.families.get(type_)
        return family is not None and name in family.names()

    def mark_read(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Record the (type, name) pairs that decisions and projections read."""
        read: dict[str, set[str]] = {}
        for type_, name in pairs:
            if type_ in self.families:
                read.setdefault(type_, set()).add(name)
        self._read = {t: tuple(sorted(n)) for t, n in read.items()}

    @property
    def reads_anything(self) -> bool:
        return bool(self._read)

    def evaluate(self, request: CanonicalRequest, readings: Readings, *, skip: frozenset[str] = frozenset(),
                 original: CanonicalRequest | None = None) -> None:
        """Evaluate every read rule into ``readings``, timing each family; the types in ``skip`` read
        ``original`` (compress.signals' skip_signals) instead of ``request``."""
        for type_, names in self._read.items():
            started = time.perf_counter_ns()
            read = original if original is not None and type_ in skip else request
            outcomes = self.families[type_].evaluate(read, names)
            readings.timings_us[type_] = (time.perf_counter_ns() - started) / 1000
            for name, outcome in outcomes.items():
                readings.outcomes[(type_, name)] = outcome


def matched_signals(readings: Readings | None) -> list[str]:
    """The matched rules as ``type:name``, and ``type:name:option`` for labelled answers."""
    if readings is None:
        return []
    out = []
    for (type_, name), outcome in readings.outcomes.items():
        if outcome.matched:
            out.append(f"{type_}:{name}")
        for label, hit in (outcome.labels or {}).items():
            if hit:
                out.append(f"{type_}:{name}:{label}")
    return out


__all__ = ["CONDITION_TYPES", "COMPILERS", "VALUED", "Reading", "Readings", "RecipeSignals", "matched_signals"]
