"""The model runtime interface: what a decision model served in the router process implements.

The embedded ``primary`` deployment and any other in-process model answer
through ``DecisionModel.answer``, which is blocking CPU work: the client calls
it from a worker thread (``trio.to_thread``), never on the trio loop.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from ..protocol.systemone import Answer, Entry

CONTRACT = "4.0.0"


class ModelCard(msgspec.Struct, frozen=True, kw_only=True):
    """What a decision model answers; the load checks and uncalibrated_preset warnings read it."""

    name: str
    family: str
    contract: str = CONTRACT
    question_types: list[str]                 # of choice, noul, score, set, span
    modalities: list[str] = msgspec.field(default_factory=lambda: ["text"])
    presets: list[str] = msgspec.field(default_factory=list)   # presets it answers at all
    trained: list[str] = msgspec.field(default_factory=list)   # presets answered by trained heads
    calibrated: dict[str, float] = msgspec.field(default_factory=dict)  # preset -> threshold
    span_heads: list[str] = msgspec.field(default_factory=list)
    # The span labels it marks when asked (pii and operators' span rules); empty: the card says nothing.
    span_labels: list[str] = msgspec.field(default_factory=list)
    validated_input_tokens: int = 8192
    # Presets this family was trained on under IDs of its own (e.g. "attack" for jailbreak).
    trained_ids: dict[str, str] = msgspec.field(default_factory=dict)
    # The state parts beyond the one a question is about that it reads, by stage: stage -> part (history,
    # tool_results, previous_turns, context) -> the questions it reads the part for, each a question type or
    # "preset:<name>". A rule whose input.* asks for a part left out is warned of at load (input_unread).
    # None: the card says nothing.
    reads: dict[str, dict[str, list[str]]] | None = None


class DecisionModel(Protocol):
    """A decision model answering System One questions in process."""

    card: ModelCard

    def answer(self, entries: Sequence[Entry]) -> list[dict[str, Answer]]:
        """Answers for every entry, keyed like its questions; blocking, so call it off the loop.

        Questions arrive under their wire IDs: ``preset:<name>`` for a preset's
        canonical question, ``systemone:<rule>`` for an operator's own. A question
        the model cannot answer gets a ``QuestionError`` in place; the others are
        answered.
        """
        ...
