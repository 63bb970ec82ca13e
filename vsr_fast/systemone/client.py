"""The one System One client: a stage's questions merged into one call per deployment (spec 5.3).

Per deployment, every question of the stage goes in one call; questions about
the same state share one entry; one distinct state is a standard request, two
or more a batch with entries "1", "2", ... in a fixed order. All deployments
are asked concurrently under the signals' deadline. A late or failed answer
is None (unknown) and never fails the request by itself.

A request-stage call refused as ``overloaded`` waits for capacity when
``on_signal_overload.action`` is ``retry`` (``overload.py``); the shares still
unread when that wait runs out come back in ``Answered.overloaded``, for the
gateway's retryable error.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from .. import tracing
from ..config.catalog import OnSignalOverload
from ..metrics import Counter, Histogram
from ..protocol import systemone as wire
from .learned import Share
from .deployments import DEFAULT_TIMEOUT_MS, Body, CallFailed, Response
from .overload import OverloadMetrics, OverloadPolicy, RequestWait
from .reuse import AnswerCache, question_key, state_key
from .split import SetAsNoul, cache_form

log = logging.getLogger("vsr_fast.systemone")
Answers = dict[Share, wire.Answer | None]
REQUEST_STAGE = "request"


class Answered(dict):
    """Every share's answer or None (a plain ``Answers`` mapping), and which of the Nones are overload's.

    ``overloaded`` holds the shares left unread because their model was still
    overloaded when the request's wait ran out; empty unless
    ``on_signal_overload.action`` is ``retry``.
    """

    overloaded: frozenset[Share] = frozenset()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # share -> why it has no answer, "<reason>: <detail>": its call's failure ("unreachable: ...", "timeout:
        # ..."), its question's ("question_failed: ...", asked again without it), an answer left out of a call that
        # succeeded ("invalid_response: ..."). Any reason the client layer gives reaches the outcome's detail.
        self.failed: dict[Share, str] = {}


@dataclass
class Call:
    """One deployment's call of one stage: entries in order, each a state and its questions."""

    deployment: str
    entries: list[tuple[str, wire.State, dict[str, wire.Question]]]
    shares: dict[tuple[str, str], list[Share]] = field(default_factory=dict)   # (entry, wire_id) -> shares
    splits: dict[str, SetAsNoul] = field(default_factory=dict)    # wire_id -> a set asked label by label
    dropped: dict[tuple[str, str], str] = field(default_factory=dict)  # (entry, wire_id) left out, and why

    def body(self) -> Body:
        """Standard form for one entry, batch form for two or more."""
        if len(self.entries) == 1:
            _, state, questions = self.entries[0]
            return wire.StandardRequest(state=state, questions=questions)
        return wire.BatchRequest(states={n: wire.Entry(state=s, questions=q) for n, s, q in self.entries})


class SystemOneMetrics:
    def __init__(self) -> None:
        self.calls = Counter("vsr_systemone_calls_total", "System One calls by deployment and outcome.",
                             ("deployment", "outcome"))
        self.latency = Histogram("vsr_systemone_call_seconds", "System One call latency.", ("deployment",))
        self.reused = Counter("vsr_systemone_answers_reused_total", "Answers served from reuse, not asked.",
                              ("deployment",))
        self.overload = OverloadMetrics()

    def render(self) -> list[str]:
        return self.calls.render() + self.latency.render() + self.reused.render() + self.overload.render()


class SystemOneClient:
    """Asks a stage's questions of every deployment they resolve to."""

    def __init__(self, runners: dict, generation: str, metrics: SystemOneMetrics | None = None, *,
                 on_overload: OnSignalOverload | None = None, random: Callable[[], float] | None = None) -> None:
        """``on_overload`` is ``global.model_catalog.on_signal_overload``; ``random`` jitters the overload
        gate's step (tests pass a constant)."""
        self.runners = runners
        self.generation = generation
        self.metrics = metrics or SystemOneMetrics()
        # A delegated deployment's answer was obtained with one user's credential: never reused (spec 6.7).
        self.caches = {name: AnswerCache(0, None) if getattr(r, "delegated", None) else AnswerCache.for_deployment(r.local)
                       for name, r in runners.items()}
        extra = {"random": random} if random is not None else {}
        self.overload = OverloadPolicy(on_overload, metrics=self.metrics.overload, **extra)

    def plan(self, asked: dict[Share, wire.Question], state_for: Callable[[Share], wire.State]) -> tuple[list[Call], Answers]:
        """Merge questions into calls; answers already known come back without a call."""
        reused: Answers = {}
        split: dict[str, SetAsNoul] = {}
        by_dep: dict[str, dict[bytes, tuple[wire.State, dict[str, wire.Question], list[Share]]]] = {}
        for share, question in asked.items():
            if share.deployment not in self.runners:
                continue        # a reload began to ask it; the client starts its deployments at start only
            state = state_for(share)
            skey = state_key(state)
            key = (self.generation, skey, question_key(share.wire_id, cache_form(question)))
            hit = self.caches[share.deployment].get(key)
            if hit is not None:
                reused[share] = hit
                self.metrics.reused.inc(share.deployment)
                continue
            entries = by_dep.setdefault(share.deployment, {})
            _, questions, shares = entries.setdefault(skey, (state, {}, []))
            if isinstance(question, SetAsNoul):
                questions.update(question.expand(share.wire_id))
                split.setdefault(share.wire_id, question)
            else:
                questions[share.wire_id] = question
            shares.append(share)
        calls = []
        for dep, entries in by_dep.items():
            call = Call(dep, [], splits=split)
            for i, (state, questions, shares) in enumerate(entries.values(), start=1):
                name = str(i)
                call.entries.append((name, state, questions))
                for s in shares:
                    call.shares.setdefault((name, s.wire_id), []).append(s)
            calls.append(call)
        return calls, reused

    async def ask_into(self, answers: Answered, asked: dict[Share, wire.Question],
                       state_for: Callable[[Share], wire.State], timeouts_ms: dict[str, int] | None = None) -> None:
        """Fill ``answers`` with every share's answer as its call returns (None until then).

        No deadline of its own: the caller's cancel scope ends it, and what came
        in before stays in ``answers``, with ``answers.overloaded`` set either way.
        """
        calls, reused = self.plan(asked, state_for)
        answers.update(reused)
        for share in asked:
            answers.setdefault(share, None)
        if not calls:
            return
        wait = self.overload.request()
        try:
            async with trio.open_nursery() as nursery:
                for call in calls:
                    timeout_s = ((timeouts_ms or {}).get(call.deployment) or DEFAULT_TIMEOUT_MS) / 1000
                    nursery.start_soon(self._ask_into, call, timeout_s, answers, wait)
        finally:
            # The wait keys each call it left overloaded by the Call it sent, which a
            # named-question retry may have narrowed: only its shares went unread for overload.
            answers.overloaded = frozenset(s for sent in wait.unread for s in _shares(sent) if answers[s] is None)

    async def _ask_into(self, call: Call, timeout_s: float, answers: Answers, wait: RequestWait) -> None:
        """One deployment's call, its one retry after a named question failure, into ``answers``."""
        runner = self.runners[call.deployment]
        may_wait = any(s.stage == REQUEST_STAGE for shares in call.shares.values() for s in shares)
        started = began = time.perf_counter()
        outcome: str | None = None
        deadline = trio.current_effective_deadline()     # read now: a cancelled scope's reads -inf

        async def send(sent: Call) -> Response:
            async def attempt() -> Response:
                nonlocal started
                started = time.perf_counter()   # the model's latency is its last ask's, never the wait's
                return await _attempt(runner, sent, timeout_s)
            return await wait.call(call.deployment, attempt, sent, may_wait=may_wait)

        try:
            answered, response = await self._call_with_retries(send, call)
            outcome = "ok"
        except CallFailed as exc:
            outcome = exc.code
            log.info("System One call to %s failed: %s", call.deployment, exc)
            if isinstance(answers, Answered):    # why its rules are unknown, for the trace and decision errors
                for shares in call.shares.values():
                    answers.failed.update(dict.fromkeys(shares, exc.reason))
            return
        finally:
            if outcome is None:         # cancelled: the signals' deadline cut it, or its request ended
                outcome = cut_outcome(deadline)
            self.metrics.calls.inc(call.deployment, outcome)
            self.metrics.latency.observe(time.perf_counter() - started, call.deployment)
            if tracing.tracer is not None:
                tracing.record("vsr.systemone.call", began, {
                    "vsr.deployment": call.deployment, "vsr.outcome": outcome,
                    "vsr.questions": sum(len(q) for _, _, q in call.entries)},
                    error=None if outcome == "ok" else outcome, kind="client")
        self._store(answered, response, answers)

    async def _call_with_retries(self, send: Callable[[Call], Awaitable[Response]], call: Call) -> tuple[Call, Response]:
        """Ask; after a remote ``question_failed`` or ``invalid_input``, ask once more without it (spec 5.3)."""
        try:
            return call, await send(call)
        except CallFailed as exc:
            retry = _without(call, exc)
            if retry is None:
                raise
        try:
            return retry, await send(retry)
        except CallFailed as again:
            if again.code != "question_failed" or again.question is None:
                raise
            last = _without(retry, CallFailed("question_failed", again.message, question=again.question,
                                              said=again.said))
            if last is None:
                raise
            return last, await send(last)

    def _store(self, call: Call, response: Response, answers: Answers) -> None:
        """Hand each answer to the shares that asked it, and keep it for reuse."""
        if isinstance(response, wire.StandardResponse):
            by_entry = {call.entries[0][0]: response.answers}
        else:
            by_entry = {name: entry.answers if entry.error is None else _refused(entry.error, call, name)
                        for name, entry in response.states.items()}
        cache = self.caches[call.deployment]
        failed = answers.failed if isinstance(answers, Answered) else {}
        for (name, wire_id), why in call.dropped.items():
            failed.update(dict.fromkeys(call.shares.get((name, wire_id), ()), why))
        for name, state, questions in call.entries:
            got = by_entry.get(name) or {}
            skey = state_key(state)
            for wire_id, question in questions.items():
                answer = got.get(wire_id)
                if answer is None:
                    failed.update(dict.fromkeys(call.shares.get((name, wire_id), ()),
                                                f"invalid_response: the deployment answered without {wire_id}"))
                    continue
                for share in call.shares.get((name, wire_id), ()):
                    answers[share] = answer
                if not isinstance(answer, wire.QuestionError):     # a failure is not an answer to reuse
                    cache.put((self.generation, skey, question_key(wire_id, question)), answer)
            for wire_id, split in call.splits.items():
                shares = call.shares.get((name, wire_id), ())
                folded = split.collapse(wire_id, got) if shares else None
                if folded is None:
                    continue
                for share in shares:
                    answers[share] = folded
                cache.put((self.generation, skey, question_key(wire_id, split.question)), folded)

    async def aclose(self) -> None:
        for runner in self.runners.values():
            await runner.aclose()


async def _attempt(runner, call: Call, timeout_s: float) -> Response:
    """One ask of ``call``; the deployment's timeout bounds each attempt, not an overload wait."""
    with trio.move_on_after(timeout_s):
        return await runner.call(call.body())
    raise CallFailed("timeout", f"no answer within {timeout_s:g} s", detail=f"{call.deployment}: no answer within {timeout_s:g} s")


def cut_outcome(deadline: float) -> str:
    """A call's outcome when a cancellation ended it: ``timeout`` when ``deadline`` (the effective one as the call
    began: the signals', the request's) has passed, ``cancelled`` when its request ended first (the client left)."""
    return "timeout" if trio.current_time() >= deadline else "cancelled"


def _refused(error: wire.ErrorBody, call: Call, name: str) -> dict[str, wire.Answer]:
    """A batch entry the API refused as a whole: each of its questions unknown with the API's code."""
    questions = next((q for n, _, q in call.entries if n == name), {})
    return dict.fromkeys(questions, wire.QuestionError(error.code, error.message))


def _shares(call: Call) -> list[Share]:
    """The shares of the questions ``call`` carries."""
    return [s for name, _, questions in call.entries for q in questions for s in call.shares.get((name, q), ())]


def _without(call: Call, exc: CallFailed) -> Call | None:
    """The call left after a named failure: the question out of its entry (every entry if none named),
    the whole entry out for ``invalid_input``; None when the failure names nothing or nothing is left."""
    if exc.code not in ("question_failed", "invalid_input") or exc.question is None:
        return None
    single = len(call.entries) == 1
    entries = []
    dropped = dict(call.dropped)
    # Why, for the rule's unknown and a decision's error (a client reads it): the remote's verdict on its question
    # in its own words, never ``str(exc)``, whose detail names the deployment (for the log).
    why = f"{exc.code}: {exc.said}" if exc.said else exc.reason
    for name, state, questions in call.entries:
        named = exc.state is None or exc.state == name or single
        if named and exc.code == "invalid_input":
            dropped.update(dict.fromkeys(((name, q) for q in questions), why))
            continue
        kept = {q: v for q, v in questions.items() if not (named and q == exc.question)}
        dropped.update(dict.fromkeys(((name, q) for q in questions if q not in kept), why))
        if kept:
            entries.append((name, state, kept))
    if not entries:
        return None
    return Call(call.deployment, entries, call.shares, dropped=dropped)
