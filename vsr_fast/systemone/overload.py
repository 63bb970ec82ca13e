"""Waiting for a decision model that answers ``overloaded`` (``global.model_catalog.on_signal_overload``).

Spec: system-one-performance-and-cost, "When the decision model is overloaded".
With ``action: refuse`` (the default) nothing here changes a call: an overloaded
answer leaves its rules unknown. With ``action: retry`` a request-stage call that
comes back overloaded is asked again while its request waits for capacity:

    OverloadPolicy        one per client: the configuration, a ModelGate per deployment, the metrics
    ├── ModelGate         one deployment as this process sees it, shared by every request:
    │                     open, or refusing (then one waiting request's round per jittered step)
    └── RequestWait       one request's wait, from its first overloaded answer (``policy.request()``)
        └── _ModelWait    the request's calls to one deployment, asked again together in rounds

A request's rounds to one model are due at a quarter, a half and the end of its
wait, at most 3 of them, a step (100 ms) apart at least. A due round asks at once
while the model is open; while it refuses, the round queues at the gate, which
lets one request's round through per step (100 ms doubling to 1 s, jittered),
so a thousand waiting requests cost the model a few asks a second, not a
thousand. Any answer opens the gate and every waiting request's round goes
then. Rejected: a gate per request (the load grows with the requests waiting),
and learning a pace from the wait (a wait says nothing of how fast the model
reads; ``RequestWait.resumed_at`` says when it answered again).

Time is trio's clock throughout, so tests drive it with ``autojump_clock``.
"""
from __future__ import annotations

import enum
import math
import random as _random
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from ..config.catalog import OnSignalOverload
from ..metrics import Counter
from .deployments import CallFailed

T = TypeVar("T")

OVERLOADED = "overloaded"
WARNING = "guard_overloaded"          # x-vsr-warnings on the retryable error
FIRST_STEP_S = 0.1                    # the gate's step while refusing starts here and doubles ...
MAX_STEP_S = 1.0                      # ... up to here
ROUND_AT = (0.25, 0.5, 1.0)           # a request's rounds, as fractions of its wait (so at most 3)
PROBE_ABOVE = 8                       # more calls waiting than this: a refusing model gets one probe first
MAX_RETRY_AFTER_S = 60                # some clients ignore a longer Retry-After, others sleep it in full

Turn = enum.Enum("Turn", "MINE OPEN OVER")      # what ModelGate.take_turn hands a waiting round
CallState = enum.Enum("CallState", "ASKING WAITING SENT OVER")   # a call in a request's wait


def retry_after_seconds(config: OnSignalOverload) -> int:
    """``Retry-After`` of the retryable error: ``retry_after_seconds``, else ``wait_ms`` rounded up, 1 to 60."""
    seconds = config.retry_after_seconds or math.ceil(config.wait_ms / 1000)
    return max(1, min(MAX_RETRY_AFTER_S, seconds))


class OverloadMetrics:
    """The two overload series; the server increments ``retryable`` when it answers the retryable error."""

    def __init__(self) -> None:
        self.waits = Counter("vsr_signal_overload_waits_total",
                             "Calls asked again while their decision model was overloaded, by how the last ask ended.",
                             ("deployment", "outcome"))
        self.retryable = Counter("vsr_signal_overload_retryable_total",
                                 "Requests answered a retryable error because their decision model was overloaded.",
                                 ("format",))

    def render(self) -> list[str]:
        return self.waits.render() + self.retryable.render()


class OverloadPolicy:
    """``on_signal_overload`` at run time: one per client, its gates shared by every request of the process."""

    def __init__(self, config: OnSignalOverload | None = None, *, metrics: OverloadMetrics | None = None,
                 random: Callable[[], float] = _random.random) -> None:
        self.config = config or OnSignalOverload()
        self.retries = self.config.action == "retry"
        self.wait_s = self.config.wait_ms / 1000
        self.retry_after_s = retry_after_seconds(self.config)
        self.metrics = metrics or OverloadMetrics()
        self._random = random
        self._gates: dict[str, ModelGate] = {}

    def gate(self, deployment: str) -> ModelGate:
        gate = self._gates.get(deployment)
        if gate is None:
            gate = self._gates[deployment] = ModelGate(deployment, self._random)
        return gate

    def request(self) -> RequestWait:
        """A new request's wait; pass it every call the request makes."""
        return RequestWait(self)

    def count_retryable(self, api_format: str) -> None:
        """One request answered the retryable error, in the client's wire format (chat, responses, messages)."""
        self.metrics.retryable.inc(api_format)


class _Queued:
    """A round queued at a refusing gate; ``result`` is set when the model opens."""

    __slots__ = ("wake", "result")

    def __init__(self) -> None:
        self.wake = trio.Event()
        self.result: Turn | None = None


class ModelGate:
    """One deployment's capacity as this process sees it: open, or refusing since an overloaded answer.

    Only answers move it: an ``overloaded`` answer makes it refuse, any other
    answer opens it. Other failures (a timeout, a 5xx) say nothing of capacity.
    """

    def __init__(self, deployment: str, random: Callable[[], float]) -> None:
        self.deployment = deployment
        self.refusing = False
        self._random = random
        self._step_s = FIRST_STEP_S
        self._next_turn = -math.inf
        self._opened = trio.Event()
        self._queue: deque[_Queued] = deque()

    async def observe(self, ask: Callable[[], Awaitable[T]]) -> T:
        """Ask once, and let the answer move the gate."""
        try:
            response = await ask()
        except CallFailed as exc:
            if exc.code == OVERLOADED:
                self.refused()
            raise
        self.opened()
        return response

    def refused(self) -> None:
        # Only the refusal that starts a spell sets the step: refusals of fresh
        # requests during the spell would otherwise push every turn back forever.
        if self.refusing:
            return
        self.refusing = True
        self._opened = trio.Event()
        self._step_s = FIRST_STEP_S
        self._next_turn = trio.current_time() + self._jittered(self._step_s)

    def opened(self) -> None:
        # The result goes to each queued round now: a refusal that lands before
        # they run must not take back the round this opening gave them.
        if not self.refusing:
            return
        self.refusing = False
        self._opened.set()
        for queued in self._queue:
            queued.result = Turn.OPEN
            queued.wake.set()
        self._queue.clear()

    async def wait_open(self, until: float) -> bool:
        """Until the model opens or ``until``; whether it is open (or opened meanwhile)."""
        if not self.refusing:
            return True
        opened = self._opened
        with trio.move_on_at(until):
            await opened.wait()
        return opened.is_set()

    async def take_turn(self, until: float) -> Turn:
        """Queue a due round: MINE at its turn while the model refuses, OPEN if it opens, OVER at ``until``.

        Turns go first come, first served, one per jittered step; each turn
        doubles the step, up to 1 s. ``until`` is inclusive, so a round due at
        the very end of its wait still gets a turn that is free by then.
        """
        if not self.refusing:
            return Turn.OPEN
        me = _Queued()
        self._queue.append(me)
        try:
            while me.result is None:
                now = trio.current_time()
                head = self._queue[0] is me
                if head and now >= self._next_turn:
                    self._step_s = min(2 * self._step_s, MAX_STEP_S)
                    self._next_turn = now + self._jittered(self._step_s)
                    return Turn.MINE
                if now >= until:
                    return Turn.OVER
                me.wake = trio.Event()
                with trio.move_on_at(min(self._next_turn, until) if head else until):
                    await me.wake.wait()
            return me.result
        finally:
            self._leave(me)

    def _leave(self, me: _Queued) -> None:
        if self._queue and self._queue[0] is me:
            self._queue.popleft()
            if self._queue:
                self._queue[0].wake.set()      # the new head waits for the next turn itself
        elif me in self._queue:
            self._queue.remove(me)

    def _jittered(self, step_s: float) -> float:
        # Uniform over half to one and a half steps: the mean pace is the step, and
        # processes that began refusing together drift apart instead of asking in step.
        return step_s * (0.5 + self._random())


class _Call:
    """One call in a request's wait for one model."""

    __slots__ = ("state", "round", "in_round")

    def __init__(self) -> None:
        self.state = CallState.ASKING
        self.round = 0             # the last counted round it asked in; 0: none
        self.in_round = False      # asking now in that round (a probe is not in a round)


class RequestWait:
    """One request's wait for overloaded models; ``unread`` keys the calls left overloaded when it ran out."""

    def __init__(self, policy: OverloadPolicy) -> None:
        self._policy = policy
        self.started: float | None = None       # trio time of the request's first overloaded answer
        self.unread: list[object] = []
        self._models: dict[str, _ModelWait] = {}

    async def call(self, deployment: str, ask: Callable[[], Awaitable[T]], key: object = None, *,
                   may_wait: bool = True) -> T:
        """``ask()`` once; when it is refused as overloaded, again in this request's rounds.

        ``ask`` makes one attempt (its own timeout bounds it, not the wait) and
        raises ``CallFailed``. ``may_wait`` is False for calls outside the
        request stage: they only move the gate. A call that ends overloaded
        under ``retry`` adds ``key`` to ``unread``, also when the signals'
        deadline cancels its wait.
        """
        policy = self._policy
        if not policy.retries:
            return await ask()
        try:
            return await policy.gate(deployment).observe(ask)
        except CallFailed as exc:
            if exc.code != OVERLOADED or not may_wait:
                raise
            if policy.wait_s <= 0:              # wait_ms: 0 answers the retryable error at once
                self.unread.append(key)
                raise
            refusal = exc
        if self.started is None:
            self.started = trio.current_time()
        return await self._model(deployment).ask_again(ask, key, refusal)

    def resumed_at(self, deployment: str) -> float | None:
        """When ``deployment`` answered this request again after a wait; a pace counts from here, not the wait."""
        model = self._models.get(deployment)
        return model.resumed_at if model else None

    def _model(self, deployment: str) -> _ModelWait:
        model = self._models.get(deployment)
        if model is None:
            assert self.started is not None
            model = self._models[deployment] = _ModelWait(self, self._policy, deployment, self.started)
        return model


class _ModelWait:
    """A request's calls to one model: asked again together, in rounds.

    One waiting call at a time drives the rounds (waits for the next one and
    sends it); the others wait on ``_changed``. A call refused while a round of
    this request is still asking joins that round at once, so a model that
    answers some calls and refuses others does not spend the request's rounds
    one call at a time.
    """

    def __init__(self, request: RequestWait, policy: OverloadPolicy, deployment: str, started: float) -> None:
        self._request = request
        self._metrics = policy.metrics
        self.gate = policy.gate(deployment)
        self._slots = [started + f * policy.wait_s for f in ROUND_AT]
        self._ends_at = self._slots[-1]
        self._rounds = 0
        self._round_asks = 0                      # asks of the latest round still out
        self._last_round = trio.current_time()    # its first refusal counts as the ask before round 1
        self._waiting: list[_Call] = []
        self._driver: _Call | None = None
        self._changed = trio.Event()
        self._over = False
        self.resumed_at: float | None = None

    async def ask_again(self, ask: Callable[[], Awaitable[T]], key: object, refusal: CallFailed) -> T:
        call = _Call()
        outcome = OVERLOADED
        try:
            while await self._until_sent(call):
                try:
                    response = await self.gate.observe(ask)
                except CallFailed as exc:
                    if exc.code != OVERLOADED:
                        outcome = exc.code
                        raise
                    refusal = exc
                else:
                    outcome = "ok"
                    self.resumed_at = trio.current_time()
                    return response
                finally:
                    self._returned(call)
            raise refusal
        finally:
            # Counted once per call, by its last ask; a call the signals' deadline
            # cancels while it waits ends overloaded too: it was never read.
            self._leave(call)
            self._metrics.waits.inc(self.gate.deployment, outcome)
            if outcome == OVERLOADED:
                self._request.unread.append(key)

    async def _until_sent(self, call: _Call) -> bool:
        """Until ``call`` may ask again (True) or the wait is over (False)."""
        if self._over:
            return False
        if self._round_asks and call.round != self._rounds:
            self._send(call, in_round=True)       # joins the round its request's other calls are asking in
            return True
        call.state = CallState.WAITING
        self._waiting.append(call)
        while call.state is CallState.WAITING:
            if self._driver is None:
                self._driver = call
                try:
                    await self._drive()
                finally:
                    self._driver = None
                    self._changed.set()
                    self._changed = trio.Event()
            else:
                await self._changed.wait()
        return call.state is CallState.SENT

    async def _drive(self) -> None:
        """Wait for this request's next round and send it, or end the wait."""
        if self._rounds == len(ROUND_AT):
            return self._end()
        earliest = self._last_round + FIRST_STEP_S
        due = max(self._slots[self._rounds], earliest)
        if earliest > self._ends_at:
            return self._end()
        await trio.sleep_until(earliest)
        if await self.gate.wait_open(until=min(due, self._ends_at)):
            return self._send_round()             # the model answered someone: every waiting request goes now
        if due > self._ends_at:
            return self._end()
        turn = await self.gate.take_turn(until=self._ends_at)
        if turn is Turn.OVER:
            return self._end()
        if turn is Turn.MINE and len(self._waiting) > PROBE_ABOVE:
            # Many calls (a long input's windows) would all be refused again: one
            # goes alone and, answered, opens the model for the rest. Not a round.
            return self._send(self._waiting.pop(0), in_round=False)
        self._send_round()

    def _send_round(self) -> None:
        self._rounds += 1
        self._last_round = trio.current_time()
        self._round_asks = 0      # an ask still out from an earlier round holds only that round open
        waiting, self._waiting = self._waiting, []
        for call in waiting:
            self._send(call, in_round=True)

    def _send(self, call: _Call, *, in_round: bool) -> None:
        call.state = CallState.SENT
        call.in_round = in_round
        if in_round:
            call.round = self._rounds
            self._round_asks += 1

    def _returned(self, call: _Call) -> None:
        """The call's ask came back (or never went): it no longer holds its round open."""
        if call.in_round and call.round == self._rounds:
            self._round_asks -= 1
        call.in_round = False
        call.state = CallState.ASKING

    def _leave(self, call: _Call) -> None:
        if call in self._waiting:
            self._waiting.remove(call)
        self._returned(call)

    def _end(self) -> None:
        self._over = True
        for call in self._waiting:
            call.state = CallState.OVER
        self._waiting = []


__all__ = ["FIRST_STEP_S", "MAX_STEP_S", "OVERLOADED", "PROBE_ABOVE", "ROUND_AT", "WARNING", "ModelGate",
           "OverloadMetrics", "OverloadPolicy", "RequestWait", "Turn", "retry_after_seconds"]
