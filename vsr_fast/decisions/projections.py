"""Projections: weighted sums of signal values, mapped to threshold bands (spec 5.2, 6.6).

A score publishes ``projection:<score>`` with its value (conditions test it
with a predicate); each band of a mapping publishes ``projection:<band>``,
true when the score falls in it. An unknown or unread input contributes 0:
a projection is a soft score, and one unknown signal should not silence it.
"""
from __future__ import annotations

from collections.abc import Callable

from ..config.signals import BandOutput, Projections
from ..signals.base import CompileErrors, Outcome
from ..signals.registry import Readings

TYPE = "projection"


def _band_holds(band: BandOutput, value: float) -> bool:
    return not (
        (band.gt is not None and not value > band.gt)
        or (band.gte is not None and not value >= band.gte)
        or (band.lt is not None and not value < band.lt)
        or (band.lte is not None and not value <= band.lte)
    )


class CompiledProjections:
    """The projections of one recipe, checked against the signals it declares."""

    def __init__(self, projections: Projections, path: str, errors: CompileErrors,
                 declares: Callable[[str, str], bool],
                 not_a_type: Callable[[str], str | None] = lambda type_: None) -> None:
        """``not_a_type``: what is wrong with an input's type that no condition has (None when one does)."""
        self.scores = projections.scores
        self.mappings = projections.mappings
        self.score_names = {s.name for s in self.scores}
        self.band_names: set[str] = set()
        for i, score in enumerate(self.scores):
            for j, source in enumerate(score.inputs):
                problem = not_a_type(source.type)
                if problem:
                    errors.add(f"{path}.scores[{i}].inputs[{j}].type", "unknown_signal", problem)
                elif not declares(source.type, source.name):
                    errors.add(f"{path}.scores[{i}].inputs[{j}]", "unknown_signal",
                               f"{source.type} rule {source.name!r} is not declared in this recipe's signals")
        seen: set[str] = set(self.score_names)
        for i, mapping in enumerate(self.mappings):
            if mapping.source not in self.score_names:
                errors.add(f"{path}.mappings[{i}].source", "unknown_signal",
                           f"{mapping.source!r} is not a projection score of this recipe")
            for j, band in enumerate(mapping.outputs):
                if band.name in seen:
                    errors.add(f"{path}.mappings[{i}].outputs[{j}].name", "duplicate_name",
                               f"projection {band.name!r} is declared more than once")
                seen.add(band.name)
                self.band_names.add(band.name)
        if len(self.score_names) != len(self.scores):
            errors.add(f"{path}.scores", "duplicate_name", "two projection scores share a name")

    def declares(self, name: str) -> bool:
        return name in self.score_names or name in self.band_names

    def is_score(self, name: str) -> bool:
        return name in self.score_names

    def inputs(self) -> list[tuple[str, str]]:
        """The (type, name) pairs the scores read."""
        return [(s.type, s.name) for score in self.scores for s in score.inputs]

    def evaluate(self, readings: Readings) -> None:
        """Publish every score and band into ``readings``."""
        values: dict[str, float] = {}
        for score in self.scores:
            total = 0.0
            for source in score.inputs:
                total += source.weight * _input_value(readings.get(source.type, source.name), source.value_source)
            values[score.name] = total
            readings.outcomes[(TYPE, score.name)] = Outcome(True, value=total, detail=f"{score.name}={total:.4g}")
        for mapping in self.mappings:
            value = values.get(mapping.source, 0.0)
            for band in mapping.outputs:
                hit = _band_holds(band, value)
                readings.outcomes[(TYPE, band.name)] = Outcome(hit, value=value, detail=f"{mapping.source}={value:.4g}")


def _input_value(outcome: Outcome | None, source: str) -> float:
    if outcome is None or outcome.matched is None:
        return 0.0
    if source == "value":
        return outcome.value or 0.0
    if not outcome.matched:
        return 0.0
    return outcome.confidence if source == "confidence" else 1.0
