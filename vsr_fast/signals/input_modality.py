"""``input_modality`` signals: the request carries parts of a medium (spec 5.2).

The media come from ``CanonicalRequest.modalities``: text (a non-empty string
or a text part), image and audio parts, and files by MIME type or extension.
"""
from __future__ import annotations

from collections.abc import Collection

from ..config.signals import InputModalityRule
from .base import CanonicalRequest, CompileErrors, Outcome


class InputModalityFamily:
    """The compiled ``input_modality`` rules of one recipe: rule name -> medium."""

    condition_type = "input_modality"

    def __init__(self, rules: dict[str, str]) -> None:
        self._rules = rules

    def names(self) -> Collection[str]:
        return self._rules.keys()

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        if not names:
            return {}
        carried = request.modalities
        listed = ", ".join(sorted(carried)) or "nothing"
        return {name: _answer(self._rules[name], carried, listed) for name in names}


def _answer(medium: str, carried: frozenset[str], listed: str) -> Outcome:
    hit = medium in carried
    return Outcome(hit, detail=f"{medium} {'in' if hit else 'not in'} {{{listed}}}")


def compile(rules: list[InputModalityRule], path: str, errors: CompileErrors) -> InputModalityFamily:
    """Compile ``rules``; the schema already limits ``modality`` to the four media."""
    compiled: dict[str, str] = {}
    for rule in rules:
        if rule.name in compiled:
            errors.add(f"{path}[{rule.name}].name", "duplicate_name",
                       f"input_modality rule {rule.name!r} is declared more than once")
            continue
        compiled[rule.name] = rule.modality
    return InputModalityFamily(compiled)


__all__ = ["InputModalityFamily", "compile"]
