"""The request stage's System One asker: merged calls and guard scans under the signals' deadline.

The signals' deadline is a cancel scope this module sets inside the caller's:
``signal_timeout_s`` when the configuration sets one, else half of what the
request's own deadline leaves (the model keeps the other half).

It binds the client to one configuration's state building (routing views per
deployment), call timeouts, scan window parameters and wire questions.
"""
from __future__ import annotations

import random

import msgspec
import trio

from ..protocol import systemone as wire
from ..signals.base import CanonicalRequest
from .client import Answered, SystemOneClient, cut_outcome
from .learned import Share
from .deployments import DEFAULT_TIMEOUT_MS, CallFailed
from .history_windows import plan_history, reads_history
from .scan import GuardScan, ScanMetrics, ScanRule, scan
from .split import SetAsNoul
from .states import build_state, part_state


# The signals' budget when nothing bounds the request (the preview, vsr-replay): the catalog's old default.
UNBOUNDED_SIGNALS_S = 45.0


def _whole(text: str) -> str:
    return text


class SystemOneAsker:
    """Binds the client to the state building, guard scans and budgets of one configuration."""

    def __init__(self, client: SystemOneClient, views: dict, timeouts_ms: dict[str, int],
                 signal_timeout_s: float | None = None, scan_params: dict | None = None,
                 max_parallel: dict | None = None, questions: dict | None = None) -> None:
        self.client, self.views, self.timeouts_ms = client, views, timeouts_ms
        self.signal_timeout_s = signal_timeout_s
        self.scan_params = scan_params or {}
        self.max_parallel = max_parallel or {}
        self._questions = questions or {}     # share -> its wire question, for guard-scan windows
        self.scan_metrics = ScanMetrics()

    async def ask_into(self, answers: Answered, asked, canonical: CanonicalRequest) -> None:
        def state_for(share):
            if share.part:
                return part_state(canonical, share.part, self.views[share.deployment])
            return build_state(canonical, share.spec, self.views[share.deployment])
        await self.client.ask_into(answers, asked, state_for, self.timeouts_ms)

    async def ask_response(self, asked, canonical: CanonicalRequest, answer: str,
                           context: str | None) -> Answered:
        """The response stage's questions about the request and the model's answer: one merged call per
        deployment (the request stage's client, merging and reuse), under a deadline of their own set
        like the signals' one, inside the caller's."""
        answers = Answered()

        def state_for(share):
            return build_state(canonical, share.spec, self.views[share.deployment], answer=answer, context=context)

        with trio.move_on_at(self.signals_deadline()):
            await self.client.ask_into(answers, asked, state_for, self.timeouts_ms)
        for share in asked:
            answers.setdefault(share, None)
        return answers

    def signals_deadline(self) -> float:
        """When the request stage's questions must be answered: inside the caller's deadline, always."""
        now, outer = trio.current_time(), trio.current_effective_deadline()
        if self.signal_timeout_s is not None:
            return min(outer, now + self.signal_timeout_s)
        if outer == float("inf"):
            return now + UNBOUNDED_SIGNALS_S
        return now + (outer - now) / 2

    def scanned(self, asked, canonical: CanonicalRequest) -> set:
        """Full-coverage questions whose input is longer than one window: read in windows, not in a view."""
        out = set()
        size = None
        for share in asked:
            params = self.scan_params.get(share.deployment)
            if share.spec.coverage != "full" or params is None:
                continue
            if size is None:
                size = len(canonical.text.encode())
            if size > params.window_bytes:
                out.add(share)
        return out

    def history_windows(self, rules, canonical: CanonicalRequest) -> dict:
        """share -> the windows its rules read of the long earlier turns (``history_windows``), for the shares
        of ``rules`` that read the earlier turns whole; asked in the stage's merged call."""
        out: dict = {}
        seed = random.getrandbits(32)
        for rule in rules:
            share = rule.share
            if share in out or not reads_history(rule) or share.deployment not in self.scan_params:
                continue
            plan = plan_history(share, canonical.history, self.views.get(share.deployment, _whole),
                                self.scan_params[share.deployment], seed)
            if plan is not None:
                out[share] = plan
        return out

    async def ask_with_scans(self, asked, scanned: set, rules, canonical: CanonicalRequest):
        """The stage's merged call and its guard scans, concurrently, under the signals' deadline."""
        answers = Answered()    # filled as calls return; it carries which shares overload left unread
        guards: dict = {}
        for share in scanned:
            scan_rules = [ScanRule.from_learned(r, threshold=r.threshold, on_unscanned=r.on_unscanned,
                                                min_coverage=r.min_coverage)
                          for r in rules if r.share == share]
            guards[share] = GuardScan(canonical.text, scan_rules, self.scan_params[share.deployment],
                                      seed=random.getrandbits(32))
        with trio.move_on_at(self.signals_deadline()):
            async with trio.open_nursery() as nursery:
                if asked:
                    nursery.start_soon(self.ask_into, answers, asked, canonical)
                for share, guard in guards.items():
                    nursery.start_soon(self._scan, share, guard, canonical)
        scans = {share: guard.result() for share, guard in guards.items()}
        for result in scans.values():
            self.scan_metrics.record(result)
        return answers, scans

    async def _scan(self, share, guard, canonical: CanonicalRequest | None, question=None) -> None:
        """Read ``guard``'s windows; each window's state is the request's parts (``canonical``, or none
        for a text read on its own) with the window as its request; ``question`` replaces the share's."""
        runner = self.client.runners.get(share.deployment)
        if runner is None:
            return      # not started (a reload began to ask it): nothing read, the scan's unscanned decides
        question = question or self._questions[share]
        # The window replaces the request; the other parts are read through the view, as in the merged call.
        view = self.views.get(share.deployment, _whole)
        base = build_state(canonical, share.spec, view) if canonical is not None else wire.State()

        async def ask_window(text: str, wire_ids) -> dict | None:
            state = msgspec.structs.replace(base, request=text)
            try:
                with trio.fail_after((self.timeouts_ms.get(share.deployment) or 1000) / 1000):
                    if isinstance(question, SetAsNoul):
                        response = await runner.call(wire.StandardRequest(state=state,
                                                                          questions=question.expand(share.wire_id)))
                        folded = question.collapse(share.wire_id, response.answers)
                        return {share.wire_id: folded} if folded is not None else None
                    response = await runner.call(wire.StandardRequest(state=state, questions={share.wire_id: question}))
            except (CallFailed, trio.TooSlowError):
                return None
            if isinstance(response.answers.get(share.wire_id), wire.QuestionError):
                return None     # an invalid or failed answer leaves the window unread, as a failed call does
            return response.answers

        await scan(guard, ask_window, max_parallel=self.max_parallel.get(share.deployment, 4))

    async def spans(self, rule, texts: list[str], labels: frozenset[str] | None = None
                    ) -> dict[str, list[wire.Span] | None]:
        """Every span ``rule`` (a span rule) keeps in each text, each text read on its own (masking, spec 5.7);
        with ``labels``, only those are asked (a model may skip a detector no label needs).

        Texts that fit one window go in one merged call (a standard request for one
        text, a batch for more), answers reused from the client's cache by state, so
        a text the request stage already asked about costs nothing. A longer text is
        read whole in windows. A text left without a full answer maps to None.
        """
        share = rule.share
        params = self.scan_params.get(share.deployment)
        window = params.window_bytes if params is not None else None
        short = [t for t in texts if window is None or len(t.encode()) <= window]
        long_ = [t for t in texts if window is not None and len(t.encode()) > window]
        out: dict[str, list[wire.Span] | None] = {t: None for t in texts}
        # One share per text: shares of one call are told apart by their stage, and keyed for reuse by state.
        shares = {Share(share.wire_id, share.deployment, f"masking:{i}", share.spec): t for i, t in enumerate(short)}
        question = self._questions[share]
        if labels is not None and isinstance(question, wire.SpanQuestion):
            question = msgspec.structs.replace(question, criteria={
                k: v for k, v in question.criteria.items() if k in labels} or question.criteria)
        answers = Answered()
        guards = {t: GuardScan(t, [ScanRule.from_learned(rule, threshold=rule.threshold, on_unscanned="unknown")],
                               params, seed=random.getrandbits(32)) for t in long_}
        async with trio.open_nursery() as nursery:
            if shares:
                nursery.start_soon(self.client.ask_into, answers, dict.fromkeys(shares, question),
                                   lambda s: wire.State(request=shares[s]), self.timeouts_ms)
            for guard in guards.values():
                nursery.start_soon(self._scan, share, guard, None, question)
        for s, text in shares.items():
            answer = answers.get(s)
            if isinstance(answer, wire.SpanAnswer):
                out[text] = [x for x in answer.spans if x.label not in rule.ignore and rule.passes(x.probability)]
        for text, guard in guards.items():
            result = guard.result().rules.get(f"{rule.condition_type}:{rule.name}")
            if result is not None and result.coverage.kind == "full":
                out[text] = list(result.spans)
        return out

    async def ask_standard(self, deployment: str, state: wire.State, questions: dict[str, wire.Question],
                           timeout_ms: int | None = None) -> dict[str, wire.Answer] | None:
        """One standard request to ``deployment`` (a plugin's judge: tools' tool_need and tool_rank), within
        ``timeout_ms`` (else the deployment's, else 1,000 ms); None when it fails or is late."""
        response = await self._judge_call(deployment, wire.StandardRequest(state=state, questions=questions),
                                          timeout_ms)
        return response.answers if response is not None else None

    async def ask_batch(self, deployment: str, entries: dict[str, tuple[wire.State, dict[str, wire.Question]]],
                        timeout_ms: int | None = None) -> dict[str, dict[str, wire.Answer] | None] | None:
        """One batch request (a match judge's entry per candidate); each entry's answers or None when that
        entry failed; None when the call failed or was late."""
        body = wire.BatchRequest(states={n: wire.Entry(state=st, questions=q) for n, (st, q) in entries.items()})
        response = await self._judge_call(deployment, body, timeout_ms)
        states = getattr(response, "states", None)
        if states is None:
            return None
        return {n: (e.answers if e.error is None else None) for n, e in states.items()}

    async def _judge_call(self, deployment: str, body, timeout_ms: int | None):
        """``body`` sent to ``deployment`` within ``timeout_ms`` (else the deployment's, else 1,000 ms), the
        call counted by outcome; None when the deployment is unknown, fails or is late."""
        runner = self.client.runners.get(deployment)
        if runner is None:
            return None
        timeout_s = (timeout_ms or self.timeouts_ms.get(deployment) or DEFAULT_TIMEOUT_MS) / 1000
        outcome: str | None = None
        deadline = trio.current_effective_deadline()
        try:
            with trio.fail_after(timeout_s):
                response = await runner.call(body)
            outcome = "ok"
            return response
        except CallFailed as exc:
            outcome = exc.code
            return None
        except trio.TooSlowError:
            outcome = "timeout"
            return None
        finally:
            self.client.metrics.calls.inc(deployment, outcome or cut_outcome(deadline))
