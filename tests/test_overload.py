"""Waiting for an overloaded decision model: rounds, the shared gate, probes, the outcome and its metrics.

The first tests drive trio's clock (``autojump_clock``) against an in-process
runner that answers ``overloaded`` on a schedule, and assert the exact virtual
times of the asks. The jitter is pinned (``random=0.5`` makes each step exactly
100 ms, 200, 400, 800, then 1 s) unless a test varies it. The last ones ask the
fake System One API over real HTTP, behaviour by behaviour, and check what it
recorded instead of times.
"""
from __future__ import annotations

from collections import Counter

import httpx
import pytest
import trio

from vsr_fast.routing import load_raw
from vsr_fast.config.catalog import Deployment, OnSignalOverload
from vsr_fast.protocol import systemone as wire
from vsr_fast.systemone.learned import Share, StateSpec
from vsr_fast.systemone.client import Answered, SystemOneClient
from vsr_fast.systemone.deployments import CallFailed, Remote
from vsr_fast.systemone.overload import OverloadPolicy, retry_after_seconds

from .test_systemone_client import REMOTE, doc, user

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
    """The client under the caller's deadline, as the request stage asks it."""
    answers = Answered()
    with trio.move_on_after(deadline_s):
        await c.ask_into(answers, {SHARE: QUESTION}, lambda share: wire.State(request=text), timeouts_ms)
    return answers


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
#
# The same behaviours against the fake System One API as a real HTTP server: real 429 bodies
# decoded into ``overloaded``, real timeouts, on the real clock. A check here asserts what
# the fake recorded (which calls, in which order, with which status) and what the client
# answered, never a time: the exact schedule is the virtual-clock tests' job above.


def fake_rules(fake, *rules: dict) -> None:
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": list(rules)}).raise_for_status()


def fake_calls(fake) -> list[dict]:
    return httpx.get(f"{fake.url}/_fake/calls").json()["calls"]


def asked_text(call: dict) -> str:
    return call["body"]["state"]["request"]


def remote(fake, timeout_ms: int = 10_000) -> Remote:
    return Remote("s1", Deployment(provider="systemone", endpoint=f"{fake.url}/v1/systemone", model="fake",
                                   timeout_ms=timeout_ms))


def http_client(fake, on_overload: OnSignalOverload | None = RETRY, timeout_ms: int = 10_000) -> SystemOneClient:
    return SystemOneClient({"s1": remote(fake, timeout_ms)}, "gen", on_overload=on_overload, random=lambda: 0.5)


async def test_over_http_the_fake_refuses_twice_and_the_request_ends_with_answers(fake):
    fake_rules(fake, {"question": "*", "fail": "overloaded", "times": 2},
               {"question": "systemone:needs_tools", "answer": {"noul": 0.93}})
    c = http_client(fake, OnSignalOverload(action="retry", wait_ms=1000))
    try:
        answers = await ask(c, "over http")
    finally:
        await c.aclose()
    assert answers[SHARE] == wire.NoulAnswer(0.93) and answers.overloaded == frozenset()
    calls = fake_calls(fake)
    assert [call["status"] for call in calls] == [429, 429, 200]
    assert {asked_text(call) for call in calls} == {"over http"}, "the same question, asked again"
    assert series(c, "vsr_signal_overload_waits_total") == [
        'vsr_signal_overload_waits_total{deployment="s1",outcome="ok"} 1']


async def test_over_http_an_always_refusing_model_gets_three_rounds_at_most(fake):
    fake_rules(fake, {"fail": "overloaded"})
    c = http_client(fake)
    try:
        answers = await ask(c, "always refused")
    finally:
        await c.aclose()
    statuses = [call["status"] for call in fake_calls(fake)]
    # The first ask, then the wait's rounds: at least the first (due a quarter in), never more than three.
    assert set(statuses) == {429} and 2 <= len(statuses) <= 4, statuses
    assert answers[SHARE] is None and answers.overloaded == {SHARE}
    assert series(c, "vsr_signal_overload_waits_total") == [
        'vsr_signal_overload_waits_total{deployment="s1",outcome="overloaded"} 1']


async def test_over_http_the_signals_deadline_ends_the_wait(fake):
    fake_rules(fake, {"fail": "overloaded"})
    # The first round is due at a quarter of 60 s; the signals' deadline (5 s, room for the first
    # call to come back on a loaded machine) comes first.
    c = http_client(fake, OnSignalOverload(action="retry", wait_ms=60_000))
    try:
        answers = await ask(c, "cut by the deadline", deadline_s=5.0)
    finally:
        await c.aclose()
    assert [call["status"] for call in fake_calls(fake)] == [429]
    assert answers.overloaded == {SHARE}, "cut while waiting: still unread for overload"
    assert series(c, "vsr_signal_overload_waits_total") == [
        'vsr_signal_overload_waits_total{deployment="s1",outcome="overloaded"} 1']


@pytest.mark.parametrize("on_overload, overloaded", [
    (None, frozenset()), (OnSignalOverload(action="retry", wait_ms=0), {SHARE})], ids=["refuse", "wait_ms_0"])
async def test_over_http_refuse_and_wait_ms_0_ask_once(fake, on_overload, overloaded):
    fake_rules(fake, {"fail": "overloaded"})
    c = http_client(fake, on_overload)
    try:
        answers = await ask(c, f"asked once {on_overload}")
    finally:
        await c.aclose()
    assert [call["status"] for call in fake_calls(fake)] == [429]
    assert answers[SHARE] is None and answers.overloaded == overloaded
    assert series(c, "vsr_signal_overload_waits_total") == []


async def test_over_http_a_round_that_times_out_ends_the_wait_with_that_reason(fake):
    fake_rules(fake, {"fail": "overloaded", "times": 1}, {"fail": "hang"})
    c = http_client(fake, timeout_ms=300)
    try:
        answers = await ask(c, "then it hangs")
    finally:
        await c.aclose()
    calls = fake_calls(fake)
    assert [call["status"] for call in calls] == [429, None], "the hanging round is not asked again"
    assert answers[SHARE] is None and answers.overloaded == frozenset()
    assert series(c, "vsr_signal_overload_waits_total") == [
        'vsr_signal_overload_waits_total{deployment="s1",outcome="timeout"} 1']


async def test_over_http_many_waiting_requests_share_the_gate(fake):
    fake_rules(fake, {"fail": "overloaded"})
    c = http_client(fake)
    texts = [f"gated {i}" for i in range(20)]
    try:
        results = await run_requests(c, texts)
    finally:
        await c.aclose()
    asked = Counter(asked_text(call) for call in fake_calls(fake))
    assert sorted(asked) == sorted(texts), "each request asked once at least"
    # Without the gate: 20 requests x 3 rounds. With it, one round per jittered step (100 ms doubling
    # to 1 s) in a wait of 2 s: at most five, each a different request's (first come, first served).
    # Counted per request, not by arrival order: on a loaded box a gated round may reach the fake before
    # the last of the first asks.
    later = [text for text, n in asked.items() for _ in range(n - 1)]
    assert 1 <= len(later) <= 5 and len(set(later)) == len(later), later
    assert all(answers.overloaded == {SHARE} for _, answers in results.values())


async def test_over_http_the_first_answer_opens_the_model_for_every_waiting_request(fake):
    fake_rules(fake, {"request_contains": "waiting", "fail": "overloaded", "times": 2})
    # Their first round is due at 15 s and their deadline is 8 s: only the opening can answer them.
    c = http_client(fake, OnSignalOverload(action="retry", wait_ms=60_000))
    results: dict[str, object] = {}

    async def waiting(text: str) -> None:
        results[text] = await ask(c, text, deadline_s=8.0)

    try:
        async with trio.open_nursery() as nursery, httpx.AsyncClient() as control:
            nursery.start_soon(waiting, "waiting a")
            nursery.start_soon(waiting, "waiting b")
            with trio.fail_after(10):
                while len((await control.get(f"{fake.url}/_fake/calls")).json()["calls"]) < 2:
                    await trio.sleep(0.01)
            results["opener"] = await ask(c, "opener")
    finally:
        await c.aclose()
    calls = fake_calls(fake)
    assert [call["status"] for call in calls] == [429, 429, 200, 200, 200]
    assert asked_text(calls[2]) == "opener"
    assert sorted(asked_text(call) for call in calls[3:]) == ["waiting a", "waiting b"]
    assert all(answers[SHARE] == wire.NoulAnswer(0.5) for answers in results.values())


async def windows_over_http(fake, n: int, refusals: int):
    """``n`` windows of one request asked of the fake, which refuses its first ``refusals`` asks."""
    fake_rules(fake, {"fail": "overloaded", "times": refusals})
    # A wait of 8 s: its first round (2 s in) finds every window refused and waiting.
    policy = OverloadPolicy(OnSignalOverload(action="retry", wait_ms=8000), random=lambda: 0.5)
    runner = remote(fake)
    try:
        wait, answered = await calls_of_one_request(policy, runner, n)
    finally:
        await runner.aclose()
    return wait, answered, fake_calls(fake)


async def test_over_http_more_than_8_waiting_calls_are_all_answered_after_the_probes(fake):
    wait, answered, calls = await windows_over_http(fake, 10, refusals=11)
    texts = [asked_text(call) for call in calls]
    assert [call["status"] for call in calls] == [429] * 11 + [200] * 10
    # A refused probe, an answered one, then the nine others (the refused probe among them); each window
    # answered once. That the probes go one per gate turn, not as a round, is the virtual-clock test's
    # to show: on the real clock a probe slower than the step overlaps the next one.
    probe, second = texts[10], texts[11]
    assert probe != second and sorted(texts[12:]) == sorted(set(texts[:10]) - {second})
    assert len(answered) == 10 and wait.unread == []


async def test_over_http_8_waiting_windows_are_asked_again_once_each_and_answered(fake):
    # (Together, without a probe: the virtual-clock test's to show, as above.)
    wait, answered, calls = await windows_over_http(fake, 8, refusals=8)
    assert [call["status"] for call in calls] == [429] * 8 + [200] * 8
    assert sorted(asked_text(call) for call in calls[8:]) == sorted(asked_text(call) for call in calls[:8])
    assert len(answered) == 8 and wait.unread == []


async def test_over_http_a_call_leaving_the_wait_hands_its_rounds_to_the_others(fake):
    fake_rules(fake, {"fail": "overloaded", "times": 2})
    wait = OverloadPolicy(OnSignalOverload(action="retry", wait_ms=8000), random=lambda: 0.5).request()
    runner = remote(fake)
    got: dict[int, object] = {}

    async def one(i: int, scope: trio.CancelScope) -> None:
        body = wire.StandardRequest(state=wire.State(request=f"window {i}"), questions={"q": QUESTION})
        with scope:
            got[i] = await wait.call("s1", lambda: runner.call(body), key=i)

    first, second = trio.CancelScope(), trio.CancelScope()
    try:
        async with trio.open_nursery() as nursery, httpx.AsyncClient() as control:
            nursery.start_soon(one, 0, first)
            with trio.fail_after(10):
                while not (await control.get(f"{fake.url}/_fake/calls")).json()["calls"]:
                    await trio.sleep(0.01)
            nursery.start_soon(one, 1, second)
            with trio.fail_after(10):
                while len((await control.get(f"{fake.url}/_fake/calls")).json()["calls"]) < 2:
                    await trio.sleep(0.01)
            first.cancel()        # call 0 drove the rounds; it leaves before the first one (2 s in)
    finally:
        await runner.aclose()
    calls = fake_calls(fake)
    assert [(asked_text(c), c["status"]) for c in calls] == [("window 0", 429), ("window 1", 429), ("window 1", 200)]
    assert list(got) == [1] and wait.unread == [0]


@pytest.mark.parametrize("action, outcome, statuses", [("refuse", None, [429]), ("retry", True, [429, 200])])
async def test_over_http_a_rule_is_unknown_under_refuse_and_read_after_a_round_under_retry(
        fake, action, outcome, statuses):
    fake_rules(fake, {"fail": "overloaded", "times": 1}, {"question": "systemone:needs_tools", "answer": {"noul": 0.9}})
    d = doc(NEEDS_TOOLS, [{"type": "systemone", "name": "needs_tools"}])
    d["global"]["model_catalog"]["deployments"] = {"remote": {**REMOTE, "endpoint": f"{fake.url}/v1/systemone"}}
    d["global"]["model_catalog"]["on_signal_overload"] = {"action": action, "wait_ms": 2000}
    loaded = load_raw(d)
    deployment = loaded.config.global_.model_catalog.deployments["remote"]
    runner = Remote("remote", deployment)
    c = SystemOneClient({"remote": runner}, loaded.version_hash,
                        on_overload=loaded.config.global_.model_catalog.on_signal_overload, random=lambda: 0.5)
    try:
        route = await loaded.table.route("any", lambda: user(f"hello {action}"), loaded.table.asker(c))
    finally:
        await c.aclose()
    assert route.readings.outcomes[("systemone", "needs_tools")].matched is outcome
    assert [call["status"] for call in fake_calls(fake)] == statuses
