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
from .client import Answered, SystemOneClient
from .deployments import CallFailed
from .scan import GuardScan, ScanMetrics, ScanRule, scan
from .split import SetAsNoul
from .states import build_state


# The signals' budget when nothing bounds the request (the preview, vsr-replay): the catalog's old default.
UNBOUNDED_SIGNALS_S = 45.0


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

    async def _scan(self, share, guard, canonical: CanonicalRequest) -> None:
        runner = self.client.runners[share.deployment]
        question = self._questions[share]

        async def ask_window(text: str, wire_ids) -> dict | None:
            state = build_state(canonical, share.spec, lambda t: t)
            state = msgspec.structs.replace(state, request=text)
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
            return response.answers

        await scan(guard, ask_window, max_parallel=self.max_parallel.get(share.deployment, 4))
