"""The one System One client: a stage's questions merged into one call per deployment (spec 5.3).

Per deployment, every question of the stage goes in one call; questions about
the same state share one entry; one distinct state is a standard request, two
or more a batch with entries "1", "2", ... in a fixed order. All deployments
are asked concurrently under the signals' deadline. A late or failed answer
is None (unknown) and never fails the request by itself.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from ..metrics import Counter, Histogram
from ..protocol import systemone as wire
from ..signals.learned import Share
from .deployments import DEFAULT_TIMEOUT_MS, Body, CallFailed, Response, entries_of
from .reuse import AnswerCache, question_key, state_key

log = logging.getLogger("vsr_fast.systemone")
Answers = dict[Share, wire.Answer | None]


@dataclass
class Call:
    """One deployment's call of one stage: entries in order, each a state and its questions."""

    deployment: str
    entries: list[tuple[str, wire.State, dict[str, wire.Question]]]
    shares: dict[tuple[str, str], list[Share]] = field(default_factory=dict)   # (entry, wire_id) -> shares

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

    def render(self) -> list[str]:
        return self.calls.render() + self.latency.render() + self.reused.render()


class SystemOneClient:
    """Asks a stage's questions of every deployment they resolve to."""

    def __init__(self, runners: dict, generation: str, metrics: SystemOneMetrics | None = None) -> None:
        self.runners = runners
        self.generation = generation
        self.metrics = metrics or SystemOneMetrics()
        self.caches = {name: AnswerCache.for_deployment(r.local) for name, r in runners.items()}

    def plan(self, asked: dict[Share, wire.Question], state_for: Callable[[Share], wire.State]) -> tuple[list[Call], Answers]:
        """Merge questions into calls; answers already known come back without a call."""
        reused: Answers = {}
        by_dep: dict[str, dict[bytes, tuple[wire.State, dict[str, wire.Question], list[Share]]]] = {}
        for share, question in asked.items():
            state = state_for(share)
            skey = state_key(state)
            key = (self.generation, skey, question_key(share.wire_id, question))
            hit = self.caches[share.deployment].get(key)
            if hit is not None:
                reused[share] = hit
                self.metrics.reused.inc(share.deployment)
                continue
            entries = by_dep.setdefault(share.deployment, {})
            _, questions, shares = entries.setdefault(skey, (state, {}, []))
            questions[share.wire_id] = question
            shares.append(share)
        calls = []
        for dep, entries in by_dep.items():
            call = Call(dep, [])
            for i, (state, questions, shares) in enumerate(entries.values(), start=1):
                name = str(i)
                call.entries.append((name, state, questions))
                for s in shares:
                    call.shares.setdefault((name, s.wire_id), []).append(s)
            calls.append(call)
        return calls, reused

    async def ask(self, asked: dict[Share, wire.Question], state_for: Callable[[Share], wire.State],
                  deadline_s: float, timeouts_ms: dict[str, int] | None = None) -> Answers:
        """Every share's answer, or None when it could not be had in time."""
        calls, answers = self.plan(asked, state_for)
        for share in asked:
            answers.setdefault(share, None)
        if not calls:
            return answers
        with trio.move_on_after(deadline_s):
            async with trio.open_nursery() as nursery:
                for call in calls:
                    timeout_s = ((timeouts_ms or {}).get(call.deployment) or DEFAULT_TIMEOUT_MS) / 1000
                    nursery.start_soon(self._ask_into, call, timeout_s, answers)
        return answers

    async def _ask_into(self, call: Call, timeout_s: float, answers: Answers) -> None:
        """One deployment's call, its one retry after a named question failure, into ``answers``."""
        runner = self.runners[call.deployment]
        started = time.perf_counter()
        outcome = "ok"
        try:
            with trio.fail_after(timeout_s):
                answered, response = await self._call_with_retries(runner, call)
        except CallFailed as exc:
            outcome = exc.code
            log.info("System One call to %s failed: %s", call.deployment, exc)
            return
        except trio.TooSlowError:
            outcome = "timeout"
            return
        finally:
            self.metrics.calls.inc(call.deployment, outcome)
            self.metrics.latency.observe(time.perf_counter() - started, call.deployment)
        self._store(answered, response, answers)

    async def _call_with_retries(self, runner, call: Call) -> tuple[Call, Response]:
        """Ask; after a remote ``question_failed`` or ``invalid_input``, ask once more without it (spec 5.3)."""
        try:
            return call, await runner.call(call.body())
        except CallFailed as exc:
            retry = _without(call, exc)
            if retry is None:
                raise
        try:
            return retry, await runner.call(retry.body())
        except CallFailed as again:
            if again.code != "question_failed" or again.question is None:
                raise
            last = _without(retry, CallFailed("question_failed", "", question=again.question))
            if last is None:
                raise
            return last, await runner.call(last.body())

    def _store(self, call: Call, response: Response, answers: Answers) -> None:
        """Hand each answer to the shares that asked it, and keep it for reuse."""
        if isinstance(response, wire.StandardResponse):
            by_entry = {call.entries[0][0]: response.answers}
        else:
            by_entry = {name: entry.answers or {} for name, entry in response.states.items()}
        cache = self.caches[call.deployment]
        for name, state, questions in call.entries:
            got = by_entry.get(name, {})
            skey = state_key(state)
            for wire_id, question in questions.items():
                answer = got.get(wire_id)
                if answer is None:
                    continue
                for share in call.shares.get((name, wire_id), ()):
                    answers[share] = answer
                cache.put((self.generation, skey, question_key(wire_id, question)), answer)

    async def aclose(self) -> None:
        for runner in self.runners.values():
            await runner.aclose()


def _without(call: Call, exc: CallFailed) -> Call | None:
    """The call left after a named failure: the question out of its entry (every entry if none named),
    the whole entry out for ``invalid_input``; None when the failure names nothing or nothing is left."""
    if exc.code not in ("question_failed", "invalid_input") or exc.question is None:
        return None
    single = len(call.entries) == 1
    entries = []
    for name, state, questions in call.entries:
        named = exc.state is None or exc.state == name or single
        if named and exc.code == "invalid_input":
            continue
        kept = {q: v for q, v in questions.items() if not (named and q == exc.question)}
        if kept:
            entries.append((name, state, kept))
    if not entries:
        return None
    return Call(call.deployment, entries, call.shares)
