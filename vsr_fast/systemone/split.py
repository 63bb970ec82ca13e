"""A set question for a model that answers no set questions: one yes/no question per label, in the same call.

Spec 5.2: "A model without native set support answers a set question as one
yes/no question per label, in the same call." The router expands the question
when it builds the call and folds the answers back into one set answer, so the
rules that share the question read it as they would a native set answer.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..protocol import systemone as wire


@dataclass(frozen=True)
class SetAsNoul:
    """The set question, asked label by label."""

    question: wire.SetQuestion

    def expand(self, wire_id: str) -> dict[str, wire.NoulQuestion]:
        """One noul question per label, under ``<wire_id>/<label>``."""
        lead = self.question.instructions or "Which labels apply?"
        return {
            f"{wire_id}/{label}": wire.NoulQuestion(
                instructions=f"{lead} Does this label apply: {label}?",
                criteria=wire.NoulCriteria(true=description or label, false=f"Not {label}."),
            )
            for label, description in self.question.criteria.items()
        }

    def collapse(self, wire_id: str, answers: Mapping[str, wire.Answer]) -> wire.SetAnswer | None:
        """The set answer from the labels answered; None when no label was."""
        probabilities = {}
        for label in self.question.criteria:
            answer = answers.get(f"{wire_id}/{label}")
            if isinstance(answer, wire.NoulAnswer):
                probabilities[label] = answer.noul
        return wire.SetAnswer(probabilities) if probabilities else None


def cache_form(question) -> wire.Question:
    """What keys an answer for reuse: the set question itself, however it is asked."""
    return question.question if isinstance(question, SetAsNoul) else question
