"""The response stage in the pipeline: the chosen decision's response_guard on whole, held and true streams.

A whole answer is judged before it is sent. A streamed answer is held when the
guard can refuse or rewrite it (``GuardPolicy.holds``): every event is kept
unsent, at most ``HOLD_LIMIT_BYTES``, until the stream ends and the guard has
read it; then the headers leave with the verdict's warnings, and the answer as
the model streamed it (re-encoded only for a ``details`` note), or the
protocol's stream error on HTTP 200 with nothing of the answer. Any other guard
keeps true streaming and judges the answer once it has ended, for the record.
"""
from __future__ import annotations

import trio

from ...errors import ResponseBlocked
from ...headers import registry as h
from ...headers import trace
from ...plugins.response_guard import note
from ...routing.guard import CompiledGuard, Verdict, asker_for, note_codes, run
from .exchange import Exchange


def guard_of(ex: Exchange) -> CompiledGuard | None:
    """The guard of the route taken (a decision's, the recipe's fallback's, or the global one of a provider
    model named directly), for an API it reads."""
    r = ex.route
    if r is None or not ex.adapter.guardable():
        return None
    return ex.state.table.guard_for(r.recipe, r.decision)


async def judge(ex: Exchange, guard: CompiledGuard, text: str) -> Verdict:
    """The guard's verdict on ``text``; response-stage questions answer within the request's deadline."""
    req = ex.req
    assert req is not None and ex.route is not None
    canonical = ex.adapter.canonical(req, ex.state.identity(ex.scope))
    with trio.CancelScope(deadline=ex.deadline):
        return await run(guard, ex.route.readings, asker_for(ex.state.systemone, canonical, text))


def noted(verdict: Verdict) -> str | None:
    """The note for the head of the answer, or None."""
    codes = note_codes(verdict)
    return note(codes) if codes else None


def blocked_error(verdict: Verdict) -> ResponseBlocked:
    return ResponseBlocked(f"The answer was withheld by the response guard (rule {verdict.blocked_by}).")


def settle(ex: Exchange, outcome: str, codes: list[str], *, held: bool, streamed: bool) -> None:
    """Keep the outcome for the record, the trace and the metrics; ``codes`` are every fired rule's (``Verdict.recorded``)."""
    ex.guard_outcome, ex.guard_codes, ex.held = outcome, list(codes), held
    decision = ex.decision or ""
    metrics = ex.state.metrics
    public = "annotated" if outcome in ("noted", "flagged") else outcome   # the spec's outcome names
    if held:
        metrics.guard_buffered.inc(decision, public)
    stream = ("buffered" if held else "unbuffered") if streamed else "whole"
    metrics.guard_outcomes.inc(decision, public, stream)
    if ex.trace is not None:
        ex.trace = trace.with_member(ex.trace, f"response_guard={public}" + (";buffered" if held else ""))
    if outcome == "blocked":
        ex.path = h.ResponsePath.BLOCKED


__all__ = ["blocked_error", "guard_of", "judge", "noted", "settle"]
