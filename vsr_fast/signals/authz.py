"""``role_bindings`` signals (condition type ``authz``): roles from trusted identity (spec 5.2).

A binding matches when the caller, as the server's trusted authenticator
named it in ``request.identity``, is one of its User subjects or belongs to
one of its Group subjects. This family never reads headers, metadata or any
other client-supplied field: identity arrives only through ``Identity``.

Fail closed: an anonymous caller (``identity.user`` None, per ``Identity``)
matches no binding, even if groups came with it, and the answer is a plain
False, never unknown, so no ``on_unknown`` setting can turn it into a match.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..config.signals import RoleBinding
from .base import CanonicalRequest, CompileErrors, Identity, Outcome, RuleFamily, compile_each


@dataclass(frozen=True, slots=True)
class _Compiled:
    role: str
    users: frozenset[str]
    groups: frozenset[str]

    def answer(self, who: Identity) -> Outcome:
        if who.user is None:
            return Outcome(False, detail="anonymous caller")
        if who.user in self.users:
            return Outcome(True, detail=f"user {who.user} holds role {self.role}", redacted=f"holds role {self.role}")
        shared = self.groups.intersection(who.groups)
        if shared:
            return Outcome(True, detail=f"group {min(shared)} holds role {self.role}",
                           redacted=f"holds role {self.role}")
        # ``redacted``: the caller's user and groups are identity, which a private request's events keep none of.
        return Outcome(False, detail=f"user {who.user} does not hold role {self.role}",
                       redacted=f"does not hold role {self.role}")


class AuthzFamily(RuleFamily):
    """The compiled ``role_bindings`` of one recipe."""

    condition_type = "authz"

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        who = request.identity
        return {name: self._rules[name].answer(who) for name in names}


def compile(rules: list[RoleBinding], path: str, errors: CompileErrors) -> AuthzFamily:
    """Compile ``rules``; the schema already refuses empty names and subject lists."""
    return AuthzFamily(compile_each(rules, path, errors, lambda rule, _path, _errors: _Compiled(
        rule.role,
        frozenset(s.name for s in rule.subjects if s.kind == "User"),
        frozenset(s.name for s in rule.subjects if s.kind == "Group"),
    )))


__all__ = ["AuthzFamily", "compile"]
