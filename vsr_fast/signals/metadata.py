"""``metadata`` signals: a predicate on one key of the request's metadata (spec 5.2).

The metadata is whatever the client put in the request body's ``metadata``
object: untrusted data. A rule over it may steer routing (a tier hint, a
feature flag) but must never authorize anything; roles come only from trusted
identity, through ``role_bindings`` (``authz``).

Each rule sets exactly one predicate. A missing key fails ``equals``, ``in``
and ``matches``, passes ``not_equals``, and is what ``exists: false`` asks for.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ..config.signals import MetadataPredicate, MetadataRule
from .base import CanonicalRequest, CompileErrors, Outcome, RuleFamily, compile_each

# The predicate fields, by their config names ("in" is ``in_`` in Python).
_FIELDS = (("equals", "equals"), ("not_equals", "not_equals"), ("in", "in_"),
           ("exists", "exists"), ("matches", "matches"))
_SHOWN = 40     # characters of a client's value a detail repeats
_VERDICT = {True: "holds", False: "fails"}


@dataclass(frozen=True, slots=True)
class _Compiled:
    key: str
    test: Callable[[str], bool]       # on a present value
    if_missing: bool
    says: str                         # the predicate, for the detail

    def answer(self, metadata: dict[str, str]) -> Outcome:
        value = metadata.get(self.key)
        if value is None:
            return Outcome(self.if_missing, detail=f"{self.key} missing, {self.says} {_VERDICT[self.if_missing]}")
        hit = self.test(value)
        shown = value if len(value) <= _SHOWN else value[:_SHOWN] + "..."
        return Outcome(hit, detail=f"{self.key}={shown!r}, {self.says} {_VERDICT[hit]}",
                       redacted=f"{self.key} {self.says} {_VERDICT[hit]}")


class MetadataFamily(RuleFamily):
    """The compiled ``metadata`` rules of one recipe."""

    condition_type = "metadata"

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        metadata = request.metadata
        return {name: _answer(self._rules[name], metadata) for name in names}


def _answer(rule: _Compiled | None, metadata: dict[str, str]) -> Outcome:
    if rule is None:
        return Outcome(None, confidence=0.0, detail="rule failed to load")
    return rule.answer(metadata)


def compile(rules: list[MetadataRule], path: str, errors: CompileErrors) -> MetadataFamily:
    """Check and compile ``rules``; problems go to ``errors``, never raised."""
    return MetadataFamily(compile_each(rules, path, errors, lambda r, p, e: _compile_rule(r, p + ".predicate", e)))


def _compile_rule(rule: MetadataRule, at: str, errors: CompileErrors) -> _Compiled | None:
    pred: MetadataPredicate = rule.predicate
    given = [name for name, attr in _FIELDS if getattr(pred, attr) is not None]
    if len(given) != 1:
        errors.add(at, "invalid_value",
                   f"set exactly one of equals, not_equals, in, exists, matches; got "
                   f"{', '.join(given) if given else 'none'}")
        return None
    key = rule.key
    if pred.equals is not None:
        want = pred.equals
        return _Compiled(key, lambda v: v == want, False, f"== {want!r}")
    if pred.not_equals is not None:
        avoid = pred.not_equals
        return _Compiled(key, lambda v: v != avoid, True, f"!= {avoid!r}")
    if pred.in_ is not None:
        if not pred.in_:
            errors.add(f"{at}.in", "invalid_value", "an empty list matches no value")
            return None
        allowed = frozenset(pred.in_)
        return _Compiled(key, allowed.__contains__, False, f"in {sorted(allowed)}")
    if pred.exists is not None:
        present = pred.exists
        return _Compiled(key, lambda v: present, not present, "exists" if present else "absent")
    try:
        # The operator's pattern runs on client data: keep it free of nested
        # quantifiers, since Python's re backtracks.
        pattern = re.compile(pred.matches)
    except re.error as exc:
        errors.add(f"{at}.matches", "invalid_value", f"{pred.matches!r} is not a valid regex: {exc}")
        return None
    return _Compiled(key, lambda v: pattern.search(v) is not None, False, f"matches {pred.matches!r}")


__all__ = ["MetadataFamily", "compile"]
