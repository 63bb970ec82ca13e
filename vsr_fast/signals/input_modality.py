"""``input_modality`` signals: the request carries parts of a medium (spec 5.2).

The media come from ``CanonicalRequest.modalities``: text (a non-empty string
or a text part), image and audio parts, and files by MIME type or extension.
"""
from __future__ import annotations

from collections.abc import Collection

from ..config.signals import InputModalityRule
from .base import CanonicalRequest, CompileErrors, Outcome, RuleFamily, compile_each


class InputModalityFamily(RuleFamily):
    """The compiled ``input_modality`` rules of one recipe: rule name -> medium."""

    condition_type = "input_modality"

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
    return InputModalityFamily(compile_each(rules, path, errors, lambda rule, _path, _errors: rule.modality))


__all__ = ["InputModalityFamily", "compile"]
