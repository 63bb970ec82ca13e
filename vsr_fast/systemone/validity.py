"""A remote answer held to the question it answers: ``invalid_response`` (spec 5.3; the standard form's
SystemOneResponse: "Answers keyed by the question names supplied in the request. Each answer's type matches
its question's type", probabilities "from 0 to 1").

A System One API over HTTP (a remote one, an attached runtime) is a backend the router does not trust: an
answer of another kind than its question, a probability outside 0..1, a choice, label or level the question
did not offer, an answer or a batch entry missing, each would otherwise be relayed to a client, accepted by a
quality gate or routed on. ``checked`` keeps what was asked and valid; an answer not asked (or an entry not
sent) is dropped, as the response is keyed by what was asked. Each invalid or missing answer becomes an
in-place ``QuestionError`` with code ``invalid_response``: the signal that asked it is unknown with that
reason, while the call's other answers stand. A caller that relays the whole bundle (a native alias, an
escalation's native stage) takes ``strict``: any problem fails the call, so the next candidate answers.

A remote's own value in a problem (a choice, a label) is quoted by ``errors.shown``: escaped and cut to 64
characters, since the problem reaches the client's error, the access log and the decision's reason.
"""
from __future__ import annotations

import math

from ..errors import shown, told
from ..protocol import systemone as wire

INVALID = "invalid_response"
# Rounding in a remote's softmax may put a probability a hair past 1.
_SLACK = 1e-6


def _unit(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and -_SLACK <= x <= 1 + _SLACK


def answer_problem(question: wire.Question, answer: wire.Answer) -> str | None:
    """What is wrong with ``answer`` as an answer to ``question``, or None; an in-place error is an answer."""
    if isinstance(answer, wire.QuestionError):
        return None
    kind, got = question.__struct_config__.tag, answer.__struct_config__.tag
    if kind != got:
        return f"a {got} answer to a {kind} question"
    if isinstance(answer, wire.NoulAnswer):
        return None if _unit(answer.noul) else f"noul {answer.noul} is outside 0..1"
    if isinstance(answer, wire.ChoiceAnswer):
        offered = question.criteria      # type: ignore[union-attr]
        if answer.choice not in offered:
            return f"choice {shown(answer.choice)} was not offered"
        return _confidence(answer.confidence) or _probabilities(answer.probabilities, offered, "choice")
    if isinstance(answer, wire.ScoreAnswer):
        levels = len(question.criteria)      # type: ignore[union-attr]
        if not (math.isfinite(answer.score) and -_SLACK <= answer.score <= levels - 1 + _SLACK):
            return f"score {answer.score} is outside 0..{levels - 1}"
        return _confidence(answer.confidence) or \
            _probabilities(answer.probabilities, {str(i) for i in range(levels)}, "level")
    if isinstance(answer, wire.SetAnswer):
        return _probabilities(answer.probabilities, question.criteria, "label")    # type: ignore[union-attr]
    if isinstance(answer, wire.SpanAnswer):
        offered = question.criteria      # type: ignore[union-attr]
        for span in answer.spans:
            if span.label not in offered:
                return f"span label {shown(span.label)} was not asked"
            if not 0 <= span.start <= span.end:
                return f"span {span.start}..{span.end} is not a range"
            if not _unit(span.probability):
                return f"span probability {span.probability} is outside 0..1"
    return None


def _confidence(value: float) -> str | None:
    return None if _unit(value) else f"confidence {value} is outside 0..1"


def _probabilities(probabilities: dict[str, float], offered, what: str) -> str | None:
    for name, p in probabilities.items():
        if name not in offered:
            return f"{what} {shown(name)} was not offered"
        if not _unit(p):
            return f"probability {p} of {shown(name)} is outside 0..1"
    return None


def _answers(questions: dict[str, wire.Question], got: dict[str, wire.Answer], where: str,
             problems: list[str]) -> dict[str, wire.Answer]:
    """Every asked question's answer, an invalid or missing one an in-place ``invalid_response``."""
    out: dict[str, wire.Answer] = {}
    for name, question in questions.items():
        answer = got.get(name)
        if isinstance(answer, wire.QuestionError):     # the remote's own words go on to reasons and logs: capped
            answer = wire.QuestionError(told(answer.code), told(answer.message))
        why = "no answer" if answer is None else answer_problem(question, answer)
        if why is not None:
            problems.append(f"{where}.{name}: {why}")
            answer = wire.QuestionError(INVALID, f"{where}.{name}: {why}")
        out[name] = answer      # type: ignore[assignment]
    return out


def checked(body: wire.StandardRequest | wire.BatchRequest, response: wire.StandardResponse | wire.BatchResponse
            ) -> tuple[wire.StandardResponse | wire.BatchResponse, list[str]]:
    """``response`` as an answer to ``body``: only what was asked, each problem an in-place ``invalid_response``;
    and the problems (paths and why), empty when the response is whole and valid."""
    problems: list[str] = []
    if isinstance(body, wire.StandardRequest):
        assert isinstance(response, wire.StandardResponse)
        answers = _answers(body.questions, response.answers, "$.answers", problems)
        return wire.StandardResponse(model=response.model, answers=answers, usage=response.usage), problems
    assert isinstance(response, wire.BatchResponse)
    states: dict[str, wire.EntryResponse] = {}
    for name, entry in body.states.items():
        got = response.states.get(name)
        where = f"$.states.{name}"
        if got is None or (got.error is None and got.answers is None):
            why = "no entry" if got is None else "neither answers nor an error"
            problems.append(f"{where}: {why}")
            states[name] = wire.EntryResponse(answers=dict.fromkeys(entry.questions, wire.QuestionError(INVALID, why)))
        elif got.error is not None:
            # The remote refused this entry: its own verdict, its words capped as they go on to the client.
            e = got.error
            question, entry = (None if v is None else told(v) for v in (e.question, e.state))
            said = wire.ErrorBody(told(e.code), told(e.message), question=question, state=entry, type=told(e.type))
            states[name] = wire.EntryResponse(usage=got.usage, error=said)
        else:
            answers = _answers(entry.questions, got.answers or {}, f"{where}.answers", problems)
            states[name] = wire.EntryResponse(answers=answers, usage=got.usage)
    return wire.BatchResponse(model=response.model, states=states, usage=response.usage), problems
