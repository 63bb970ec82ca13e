"""A deterministic in-process decision model for tests: implements the runtime interface by rules on words.

choice/set: an option whose name appears in the text gets 0.9 (the rest share 0.1);
noul: 0.9 when the text contains "yes", else 0.1; score: level 1 of n;
span: every "@word.word" email-like token is an EMAIL_ADDRESS span.
"""
from __future__ import annotations

import re

import msgspec

from vsr_fast.protocol import systemone as wire
from vsr_fast.systemone.runtime import ModelCard

EMAIL = re.compile(r"\S+@\S+\.\w+")


class ScriptedModel:
    card = ModelCard(
        name="scripted-1", family="scripted", question_types=["choice", "noul", "score", "set", "span"],
        presets=["domain", "jailbreak", "pii", "complexity"], trained=["domain"], calibrated={"domain": 0.4},
        span_heads=[], validated_input_tokens=4096, trained_ids={"jailbreak": "attack"},
    )

    def __init__(self) -> None:
        self.calls: list[list[wire.Entry]] = []

    def answer(self, entries):
        self.calls.append(list(entries))
        return [{qid: self._one(e.state, q) for qid, q in e.questions.items()} for e in entries]

    def _one(self, state: wire.State, q: wire.Question) -> wire.Answer:
        text = state.request.lower()
        if isinstance(q, wire.NoulQuestion):
            return wire.NoulAnswer(0.9 if "yes" in text else 0.1)
        if isinstance(q, (wire.ChoiceQuestion, wire.SetQuestion)):
            hits = [o for o in q.criteria if o.lower() in text]
            rest = (0.1 / max(len(q.criteria) - len(hits), 1)) if hits else 1 / len(q.criteria)
            probs = {o: (0.9 / len(hits) if o in hits else rest) for o in q.criteria}
            if isinstance(q, wire.SetQuestion):
                return wire.SetAnswer(probs)
            best = max(probs, key=probs.get)
            return wire.ChoiceAnswer(best, probs[best], probs)
        if isinstance(q, wire.ScoreQuestion):
            probs = {str(i): (1.0 if i == 1 else 0.0) for i in range(len(q.criteria))}
            return wire.ScoreAnswer(1.0, 1.0, probs)
        spans = [wire.Span("EMAIL_ADDRESS", m.start(), m.end(), 0.99, m.group(0)) for m in EMAIL.finditer(state.request)]
        return wire.SpanAnswer(spans)


def make() -> ScriptedModel:
    return ScriptedModel()


class EmailsOnlyModel(ScriptedModel):
    """The scripted model with a card that names the one span label it marks."""

    card = msgspec.structs.replace(ScriptedModel.card, name="scripted-emails", span_labels=["EMAIL_ADDRESS"])


def make_emails_only() -> EmailsOnlyModel:
    return EmailsOnlyModel()


class BrokenModel(ScriptedModel):
    """The scripted model with a bug: any text with "boom" in it raises (a deployment's own exception)."""

    def answer(self, entries):
        if any("boom" in e.state.request for e in entries):
            raise RuntimeError("the scripted model's bug")
        return super().answer(entries)


def make_broken() -> BrokenModel:
    return BrokenModel()
