"""Waiting for an overloaded decision model: rounds, the shared gate, probes, the outcome and its metrics.

Every test but the last drives trio's clock (``autojump_clock``) against an
in-process runner that answers ``overloaded`` on a schedule, and asserts the
exact virtual times of the asks. The jitter is pinned (``random=0.5`` makes
each step exactly 100 ms, 200, 400, 800, then 1 s) unless a test varies it.
The last test asks the fake System One API over real HTTP.
"""
from __future__ import annotations

import time

import httpx
import pytest
import trio

from bench.fake_systemone import process as fake_process
from vsr_fast.routing import load_raw
from vsr_fast.config.catalog import Deployment, OnSignalOverload
from vsr_fast.protocol import systemone as wire
from vsr_fast.systemone.learned import Share, StateSpec
from vsr_fast.systemone.client import SystemOneClient
from vsr_fast.systemone.deployments import CallFailed, Remote
from vsr_fast.systemone.overload import OverloadPolicy, retry_after_seconds

from .test_systemone_client import doc, user

RETRY = OnSignalOverload(action="retry", wait_ms=2000)
SHARE = Share("systemone:needs_tools", "s1", "request", StateSpec())
QUESTION = wire.NoulQuestion(instructions="Does this need a tool?")


def always(n: int, now: float) -> bool:
    return True


def first(k: int):
    return lambda n, now: n < k


def until(t: float):
    return lambda n, now: now < t


class Scripted:
    """A runner that refuses as overloaded while ``refuses(n, now)`` (n: its 0-based ask), else answers 0.9.

    It records each ask as (time, the request's text); ``latency(n)`` delays the ask's outcome.
    """

    kind, local = "remote", False

    def __init__(self, refuses=always, latency=lambda n: 0.0) -> None:
        self.refuses, self.latency = refuses, latency
        self.asks: list[tuple[float, str]] = []

    async def call(self, body):
        n, now = len(self.asks), trio.current_time()
        self.asks.append((now, body.state.request))
        await trio.sleep(self.latency(n))
        if self.refuses(n, now):
            raise CallFailed("overloaded", "the decision model is overloaded", status=429)
        return wire.StandardResponse(model="scripted", answers={q: wire.NoulAnswer(0.9) for q in body.questions})

    def times(self) -> list[float]:
        return [round(t, 6) for t, _ in self.asks]

    async def aclose(self) -> None:
        return None


def client(runner, on_overload: OnSignalOverload | None = RETRY, random=lambda: 0.5) -> SystemOneClient:
    return SystemOneClient({"s1": runner}, "gen", on_overload=on_overload, random=random)


async def ask(c: SystemOneClient, text: str = "hello", deadline_s: float = 10.0, timeouts_ms=None):
    return await c.ask({SHARE: QUESTION}, lambda share: wire.State(request=text), deadline_s, timeouts_ms)


def series(c: SystemOneClient, name: str) -> list[str]:
    return [line for line in c.metrics.render() if line.startswith(name + "{")]


# --- one request ----------------------------------------------------------------------------------


async def test_rounds_at_a_quarter_half_and_end_of_the_wait_and_no_more(autojump_clock):
    runner = Scripted(always)
    c = client(runner)
    answers = await ask(c)
    assert runner.times() == [0.0, 0.5, 1.0, 2.0]
    assert trio.current_time() == pytest.approx(2.0)
    assert answers[SHARE] is None and answers.overloaded == {SHARE}
    assert series(c, "vsr_signal_overload_waits_total") == [
        'vsr_signal_overload_waits_total{deployment="s1",outcome="overloaded"} 1']


async def test_an_answer_in_a_round_reads_the_request_as_without_the_overload(autojump_clock):
    runner = Scripted(first(2))
    c = client(runner)
    answers = await ask(c)
    assert runner.times() == [0.0, 0.5, 1.0]
    assert trio.current_time() == pytest.approx(1.0)
    assert answers[SHARE] == wire.NoulAnswer(0.9) and answers.overloaded == frozenset()
    assert series(c, "vsr_signal_overload_waits_total") == ['vsr_signal_overload_waits_total{deployment="s1",outcome="ok"} 1']


async def test_the_wait_never_outlives_the_signals_deadline(autojump_clock):
    runner = Scripted(always)
    answers = await ask(client(runner), deadline_s=1.2)
    assert runner.times() == [0.0, 0.5, 1.0]
    assert trio.current_time() == pytest.approx(1.2)
    assert answers.overloaded == {SHARE}, "cut by the deadline while waiting: still unread for overload"


async def test_refuse_leaves_the_rule_unknown_at_once(autojump_clock):
    runner = Scripted(always)
    c = client(runner, on_overload=None)
    answers = await ask(c)
    assert runner.times() == [0.0] and trio.current_time() == 0.0
    assert answers[SHARE] is None and answers.overloaded == frozenset()
    assert series(c, "vsr_signal_overload_waits_total") == []


async def test_wait_ms_0_does_not_wait_but_reports_the_overload(autojump_clock):
    runner = Scripted(always)
    c = client(runner, on_overload=OnSignalOverload(action="retry", wait_ms=0))
    answers = await ask(c)
    assert runner.times() == [0.0] and trio.current_time() == 0.0
    assert answers.overloaded == {SHARE}
    assert series(c, "vsr_signal_overload_waits_total") == []


async def test_a_round_failing_otherwise_ends_the_wait_with_that_reason(autojump_clock):
    runner = Scripted(first(1), latency=lambda n: 0.0 if n == 0 else 5.0)
    c = client(runner)
    answers = await ask(c, timeouts_ms={"s1": 300})
    # The deployment's timeout bounds the round's attempt, not the wait; a timeout is not retried.
    assert runner.times() == [0.0, 0.5]
    assert trio.current_time() == pytest.approx(0.8)
    assert answers[SHARE] is None and answers.overloaded == frozenset()
    assert series(c, "vsr_signal_overload_waits_total") == [
        'vsr_signal_overload_waits_total{deployment="s1",outcome="timeout"} 1']


# --- the gate: many requests, one model ------------------------------------------------------------


async def run_requests(c: SystemOneClient, texts: list[str], start_at: dict[str, float] | None = None):
    results: dict[str, tuple[float, object]] = {}

    async def one(text: str) -> None:
        await trio.sleep((start_at or {}).get(text, 0.0))
        answers = await ask(c, text)
        results[text] = (round(trio.current_time(), 6), answers)

    async with trio.open_nursery() as nursery:
        for text in texts:
            nursery.start_soon(one, text)
    return results


async def test_many_waiting_requests_get_one_round_per_jittered_step(autojump_clock):
    runner = Scripted(always)
    texts = [f"request {i}" for i in range(5)]
    results = await run_requests(client(runner), texts)
    later = [(round(t, 6), text) for t, text in runner.asks if t > 0]
    # Steps of 100 ms (from the first refusal to the first turn), 200, 400, 800: five requests
    # whose rounds are all due at 0.5 s cost the model four asks in their two seconds, not fifteen.
    assert [t for t, _ in later] == [0.5, 0.7, 1.1, 1.9]
    assert len({text for _, text in later}) == 4, "first come, first served: four requests, one round each"
    assert {t for t, _ in results.values()} == {2.0}
    assert all(answers.overloaded == {SHARE} for _, answers in results.values())


async def test_the_step_is_jittered_by_the_random_source(autojump_clock):
    runner = Scripted(always)
    await run_requests(client(runner, random=lambda: 0.0), [f"request {i}" for i in range(5)])
    # Half steps at the low end of the jitter: 50 ms, 100, 200, 400, 500.
    assert [round(t, 6) for t, _ in runner.asks if t > 0] == [0.5, 0.6, 0.8, 1.2, 1.7]


async def test_the_first_answer_opens_the_model_and_every_waiting_request_asks_at_once(autojump_clock):
    runner = Scripted(until(0.3))
    results = await run_requests(client(runner), ["a", "b", "c"], start_at={"c": 0.3})
    assert runner.times() == [0.0, 0.0, 0.3, 0.3, 0.3]
    assert {text: t for text, (t, _) in results.items()} == {"a": 0.3, "b": 0.3, "c": 0.3}
    assert all(answers[SHARE] == wire.NoulAnswer(0.9) for _, answers in results.values())


# --- one request, many calls to one model (a long input's windows) -----------------------------------


async def calls_of_one_request(policy: OverloadPolicy, runner: Scripted, n: int, latency=None):
    """``n`` concurrent calls of one request to deployment s1, each asking ``runner`` for its own window."""
    wait = policy.request()
    answered: dict[int, float] = {}

    async def one(i: int) -> None:
        body = wire.StandardRequest(state=wire.State(request=f"window {i}"), questions={"q": QUESTION})
        try:
            await wait.call("s1", lambda: runner.call(body), key=i)
        except CallFailed:
            return
        answered[i] = round(trio.current_time(), 6)

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(one, i)
    return wait, answered


async def test_more_than_8_waiting_calls_send_one_probe_alone_first(autojump_clock):
    runner = Scripted(first(11))        # 10 first asks and the first probe are refused
    policy = OverloadPolicy(RETRY, random=lambda: 0.5)
    wait, answered = await calls_of_one_request(policy, runner, 10)
    # A probe alone at the first turn (0.5 s), refused; the next alone at the next turn (a 200 ms step),
    # answered: that opens the model and the other nine go at once, as the request's first round.
    assert runner.times() == [0.0] * 10 + [0.5] + [0.7] * 10
    assert len(answered) == 10 and set(answered.values()) == {0.7} and wait.unread == []
    assert wait.resumed_at("s1") == pytest.approx(0.7)


async def test_8_waiting_calls_ask_together_without_a_probe(autojump_clock):
    runner = Scripted(first(8))
    wait, answered = await calls_of_one_request(OverloadPolicy(RETRY, random=lambda: 0.5), runner, 8)
    assert runner.times() == [0.0] * 8 + [0.5] * 8
    assert len(answered) == 8


async def test_a_call_refused_just_after_a_round_joins_it_and_spends_no_round(autojump_clock):
    # Call 0 is refused at once; call 1's first ask takes 0.6 s and is refused while call 0's
    # round (0.5 s, 200 ms per ask) is still out, so it asks in that round too.
    runner = Scripted(always, latency=lambda n: {0: 0.0, 1: 0.6}.get(n, 0.2))
    wait, answered = await calls_of_one_request(OverloadPolicy(RETRY, random=lambda: 0.5), runner, 2)
    assert runner.times() == [0.0, 0.0, 0.5, 0.6, 1.0, 1.0, 2.0, 2.0]
    assert trio.current_time() == pytest.approx(2.2), "three rounds refused: the wait is over"
    assert answered == {} and sorted(wait.unread) == [0, 1]


async def test_a_slow_ask_of_an_earlier_round_does_not_hold_a_later_round_open(autojump_clock):
    # Round 1 (0.5 s): one ask is refused at once, the other after 1 s. Round 2 (1.0 s) sends the
    # first alone; the slow one, refused at 1.5 s after round 2 is back, waits for round 3.
    runner = Scripted(always, latency=lambda n: 1.0 if n == 3 else 0.0)
    wait, _ = await calls_of_one_request(OverloadPolicy(RETRY, random=lambda: 0.5), runner, 2)
    assert runner.times() == [0.0, 0.0, 0.5, 0.5, 1.0, 2.0, 2.0]
    assert sorted(wait.unread) == [0, 1]


async def test_a_call_leaving_the_wait_hands_its_rounds_to_the_others(autojump_clock):
    # Call 0 waits first, so it drives the request's rounds; when it leaves (its window no longer
    # needed, say), call 1 takes over and still asks at 0.5 s.
    runner = Scripted(first(2))
    wait = OverloadPolicy(RETRY, random=lambda: 0.5).request()
    got: dict[int, float] = {}

    async def one(i: int, start_s: float, leave_s: float) -> None:
        await trio.sleep(start_s)
        body = wire.StandardRequest(state=wire.State(request=f"window {i}"), questions={"q": QUESTION})
        with trio.move_on_after(leave_s):
            await wait.call("s1", lambda: runner.call(body), key=i)
            got[i] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, 0, 0.0, 0.3)
        nursery.start_soon(one, 1, 0.05, 10.0)
    assert runner.times() == [0.0, 0.05, 0.5]
    assert got == {1: pytest.approx(0.5)} and wait.unread == [0]


# --- through the routing table ----------------------------------------------------------------------


NEEDS_TOOLS = {"systemone": [{"name": "needs_tools", "question": {"type": "noul"}, "predicate": {"gte": 0.7}}]}


@pytest.mark.parametrize("action, outcome, at", [("refuse", None, 0.0), ("retry", True, 0.5)])
async def test_a_rule_is_unknown_under_refuse_and_read_after_a_round_under_retry(autojump_clock, action, outcome, at):
    d = doc(NEEDS_TOOLS, [{"type": "systemone", "name": "needs_tools"}])
    d["global"]["model_catalog"]["on_signal_overload"] = {"action": action, "wait_ms": 2000}
    loaded = load_raw(d)
    runner = Scripted(first(1))
    c = SystemOneClient({"remote": runner}, loaded.version_hash,
                        on_overload=loaded.config.global_.model_catalog.on_signal_overload, random=lambda: 0.5)
    route = await loaded.table.route("any", lambda: user("hello"), loaded.table.asker(c))
    assert route.readings.outcomes[("systemone", "needs_tools")].matched is outcome
    assert trio.current_time() == at


# --- the outcome for the gateway ----------------------------------------------------------------------


@pytest.mark.parametrize("retry_after, wait_ms, seconds", [
    (0, 2000, 2), (0, 2001, 3), (0, 1, 1), (0, 0, 1), (0, 60_000, 60), (5, 2000, 5), (60, 100, 60), (90, 100, 60)])
def test_retry_after_is_configured_or_wait_ms_rounded_up_from_1_to_60(retry_after, wait_ms, seconds):
    config = OnSignalOverload(action="retry", wait_ms=wait_ms, retry_after_seconds=retry_after)
    assert retry_after_seconds(config) == seconds
    assert OverloadPolicy(config).retry_after_s == seconds


async def test_metric_lines(autojump_clock):
    c = client(Scripted(first(1)))
    await ask(c, "one")
    c.overload.count_retryable("messages")
    c.overload.count_retryable("chat")
    c.overload.count_retryable("chat")
    lines = c.metrics.render()
    assert "# TYPE vsr_signal_overload_waits_total counter" in lines
    assert "# TYPE vsr_signal_overload_retryable_total counter" in lines
    assert series(c, "vsr_signal_overload_waits_total") == ['vsr_signal_overload_waits_total{deployment="s1",outcome="ok"} 1']
    assert series(c, "vsr_signal_overload_retryable_total") == [
        'vsr_signal_overload_retryable_total{format="chat"} 2', 'vsr_signal_overload_retryable_total{format="messages"} 1']


# --- over real HTTP ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake():
    with fake_process() as proc:
        yield proc


async def test_over_http_the_fake_refuses_twice_and_the_request_ends_with_answers(fake):
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [
        {"question": "*", "fail": "overloaded", "times": 2},
        {"question": "systemone:needs_tools", "answer": {"noul": 0.93}}]}).raise_for_status()
    remote = Remote("s1", Deployment(provider="systemone", endpoint=f"{fake.url}/v1/systemone", model="fake",
                                     timeout_ms=2000))
    c = SystemOneClient({"s1": remote}, "gen", on_overload=OnSignalOverload(action="retry", wait_ms=1000),
                        random=lambda: 0.5)
    try:
        started = time.monotonic()
        answers = await ask(c, "over http")
        elapsed = time.monotonic() - started
    finally:
        await c.aclose()
    assert answers[SHARE] == wire.NoulAnswer(0.93) and answers.overloaded == frozenset()
    calls = httpx.get(f"{fake.url}/_fake/calls").json()["calls"]
    assert [call["status"] for call in calls] == [429, 429, 200]
    gaps = [b["time"] - a["time"] for a, b in zip(calls, calls[1:])]
    # Rounds at a quarter (0.25 s) and half (0.5 s) of the 1 s wait from the first refusal.
    assert gaps == [pytest.approx(0.25, abs=0.08), pytest.approx(0.25, abs=0.08)]
    assert elapsed < 1.0
    assert 'vsr_signal_overload_waits_total{deployment="s1",outcome="ok"} 1' in c.metrics.render()
