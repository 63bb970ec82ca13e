"""``escalate`` on a System One entrypoint (spec 5.6): ``stages`` in order, every answer held to ``quality``.

A native stage asks its alias the original typed request and returns the first answer bundle the
uncalibrated rules accept; a judge stage asks its Chat model (through the upstream dispatch) which of the
complete answers before it to return (complete: no in-place question error unless the rules allow one).
The budget (``deadline_ms``, ``max_calls``) counts from the request's arrival and counts every call. There
is no ``last_attempt``: quality is the contract, so the escalation fails when no answer is accepted. The
judge's attempts go to ``tried`` (the request's events and access log) however its call ends, as a native
stage's call is recorded by ``ask``.
"""
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import msgspec
import trio

from ..config.algorithm import Algorithm, NativeAccept, Stage
from ..config.schema import ProviderModel
from ..errors import LooperBudgetExhausted, LooperCallsExhausted, LooperNoAcceptedAnswer, UpstreamError
from ..protocol import systemone as wire
from ..protocol.adapters import PATHS, Outbound
from ..selection import accept as checks
from ..selection import native_quality
from ..systemone.deployments import CallFailed
from ..upstream import Attempt, cut
from ..upstream.dispatch import CallBudget
from .state import AppState

Response = wire.StandardResponse | wire.BatchResponse
Ask = Callable[[ProviderModel], Awaitable[Response]]     # one native call; raises CallFailed
Tried = Callable[[list[Attempt]], None]                  # a judge call's upstream attempts, for the record
JUDGE = """Several models answered the same typed questions about one request. Choose the best answer.

Request: {request}
Questions: {questions}

{answers}

Reply with the number of the best answer only."""
NUMBER = re.compile(r"\d+")


async def escalate(state: AppState, alg: Algorithm, body: wire.StandardRequest | wire.BatchRequest, ask: Ask,
                   tried: Tried, arrived: float, reaches: Callable[[str], bool] = lambda _: True,
                   verdicts: list[str] | None = None) -> tuple[str, Response]:
    """(the answering alias, its answer): the first one ``quality`` accepts, or the judge's choice. A stage
    whose model the caller's key may not reach (``reaches``) is skipped, never called. ``verdicts`` gets each
    stage's verdict (x-vsr-trace's ``looper`` member)."""
    esc = alg.escalate
    assert esc is not None and esc.quality is not None and esc.quality.accept is not None   # load checks
    rules = esc.quality.accept
    budget = alg.budget
    at = arrived + budget.deadline_ms / 1000 if budget is not None and budget.deadline_ms else float("inf")
    max_calls = budget.max_calls if budget is not None else None
    answers: list[tuple[str, Response]] = []
    verdicts = [] if verdicts is None else verdicts
    calls = CallBudget(max_calls)
    for stage in esc.stages:
        if not reaches(stage.model):
            verdicts.append(f"{stage.model}: not allowed for this key, skipped")
            continue
        if calls.spent():       # calls, not time, ran out: not a timeout
            raise LooperCallsExhausted(f"the escalation's budget ran out: max_calls ({max_calls}) spent "
                                       f"({'; '.join(verdicts)})")
        picked = None
        with trio.move_on_at(at) as cut:
            picked = await _stage(state, stage, rules, body, ask, tried, answers, verdicts, calls)
        if cut.cancelled_caught:
            spent = budget.deadline_ms if budget is not None else None
            raise LooperBudgetExhausted(f"the escalation's budget ran out: deadline ({spent} ms from arrival) "
                                        f"passed during {stage.type} stage {stage.model} ({'; '.join(verdicts)})")
        if picked is not None:
            return picked
    raise LooperNoAcceptedAnswer(f"no stage's answer met escalate.quality ({'; '.join(verdicts)})")


async def _stage(state: AppState, stage: Stage, rules: NativeAccept, body, ask: Ask, tried: Tried,
                 answers: list[tuple[str, Response]], verdicts: list[str], calls: CallBudget
                 ) -> tuple[str, Response] | None:
    model = state.table.models[stage.model]
    if stage.type == "judge":
        return await _judge(state, model, body, _complete(rules, answers), verdicts, calls, tried)
    calls.take()
    try:
        response = await ask(model)
    except CallFailed as exc:
        verdicts.append(f"{stage.model}: {exc.code}")
        return None
    ok, why = native_quality.accepted(rules, response)
    verdicts.append(f"{stage.model}: {why}, {'accepted' if ok else 'rejected'}")
    answers.append((stage.model, response))
    return (stage.model, response) if ok else None


def _complete(rules: NativeAccept, answers: list[tuple[str, Response]]) -> list[tuple[str, Response]]:
    """The answers a judge may choose: every question answered (errors only where the rules allow them)."""
    return [(m, r) for m, r in answers
            if all(a is not None and (rules.question_errors or not isinstance(a, wire.QuestionError))
                   for _, a in native_quality.bundle(r))]


async def _judge(state: AppState, model: ProviderModel, body, complete: list[tuple[str, Response]],
                 verdicts: list[str], calls: CallBudget, tried: Tried) -> tuple[str, Response] | None:
    """The judge's choice among the complete answers, by number; an answer it did not name is no choice."""
    if not complete:
        verdicts.append(f"{model.name}: no complete answer to choose from")
        return None
    standard = isinstance(body, wire.StandardRequest)
    listed = "\n\n".join(f"Answer {i}:\n{_json(r.answers if isinstance(r, wire.StandardResponse) else r.states)}"
                         for i, (_, r) in enumerate(complete, 1))
    prompt = JUDGE.format(request=_json(body.state if standard else body.states),
                          questions=_json(body.questions) if standard else "per entry above", answers=listed)
    chat = msgspec.json.encode({"model": model.upstream_model, "messages": [{"role": "user", "content": prompt}]})
    out = Outbound(PATHS["openai"], chat, False, (("content-type", "application/json"),))

    async def built(_: ProviderModel) -> Outbound:
        return out

    # The call's attempts however it ends: its answer's, its error's, or (the escalation's deadline, the request's,
    # the client gone) those the cancellation left (``upstream.cut``).
    attempts: list[Attempt] = []
    left = cut.LEFT.set(attempts)
    try:
        whole = await state.dispatcher.whole((model,), built, [], calls.take)     # each attempt takes a call
        attempts = whole.attempts
    except UpstreamError as exc:
        attempts = exc.attempts
        verdicts.append(f"{model.name}: judge {exc.code}")
        return None
    finally:
        cut.LEFT.reset(left)
        tried(attempts)
    text = checks.answer_text(whole.body, model.api_format, False) if whole.status < 400 else None
    number = NUMBER.search(text or "")
    if number is None or not 1 <= int(number.group()) <= len(complete):
        verdicts.append(f"{model.name}: judge named no answer (HTTP {whole.status})")
        return None
    chosen = complete[int(number.group()) - 1]
    verdicts.append(f"{model.name}: judge chose {chosen[0]}")
    return chosen



def _json(value) -> str:
    return wire.ENCODER.encode(value).decode()
