"""escalate.quality on a System One entrypoint (spec 5.6): uncalibrated acceptance rules over typed answers.

The rules read the answers as the native model gave them (a noul's probability, a choice's confidence, ...);
nothing is converted to Chat text.
"""
from __future__ import annotations

from ..config.algorithm import NativeAccept
from ..protocol import systemone as wire


def confidence(answer: wire.Answer) -> float | None:
    """How sure one typed answer is, 0..1; None for an in-place question error."""
    if isinstance(answer, wire.NoulAnswer):
        return max(answer.noul, 1 - answer.noul)
    if isinstance(answer, (wire.ChoiceAnswer, wire.ScoreAnswer)):
        return answer.confidence
    if isinstance(answer, wire.SetAnswer):
        return min((max(p, 1 - p) for p in answer.probabilities.values()), default=1.0)
    if isinstance(answer, wire.SpanAnswer):
        return min((s.probability for s in answer.spans), default=1.0)
    return None


def bundle(response: wire.StandardResponse | wire.BatchResponse) -> list[tuple[str, wire.Answer | None]]:
    """Every answer of a response as (path, answer): ``q`` for a standard one, ``entry.q`` in a batch; a batch
    entry that failed whole is one (``entry``, None)."""
    if isinstance(response, wire.StandardResponse):
        return list(response.answers.items())
    out: list[tuple[str, wire.Answer | None]] = []
    for name, entry in response.states.items():
        if entry.answers is None:
            out.append((name, None))
        out += [(f"{name}.{q}", a) for q, a in (entry.answers or {}).items()]
    return out


def accepted(rules: NativeAccept, response: wire.StandardResponse | wire.BatchResponse) -> tuple[bool, str]:
    """Whether the whole answer bundle meets the rules, and why (the first answer that does not)."""
    least = 1.0
    for path, answer in bundle(response):
        sure = confidence(answer) if answer is not None else None
        if sure is None:
            if answer is None or not rules.question_errors:
                return False, f"{path}: no answer"
            continue
        least = min(least, sure)
        if rules.min_confidence is not None and sure < rules.min_confidence:
            return False, f"{path}: confidence {sure:.3f} < {rules.min_confidence}"
    return True, f"least confidence {least:.3f}"
