"""Two recordings of the same requests, compared: the routes each recorded, request by request."""
from __future__ import annotations

from collections.abc import Iterable

from vsr_fast.events.types import Event

from .compare import Comparison, Outcome, recorded_outcome


def outcomes(events: Iterable[tuple[str, Event]]) -> dict[str, Outcome]:
    """Each replay id's recorded route (the first one recorded)."""
    found: dict[str, Outcome] = {}
    for _, ev in events:
        if ev.replay_id not in found:
            outcome = recorded_outcome(ev)
            if outcome is not None:
                found[ev.replay_id] = outcome
    return found


def diff(a: dict[str, Outcome], b: dict[str, Outcome]) -> Comparison:
    """Routes of the requests both recorded, A as before and B as after; the others are counted as skipped."""
    cmp = Comparison()
    for replay_id in sorted(a.keys() & b.keys()):
        cmp.add(replay_id, a[replay_id], b[replay_id])
    if only_a := len(a.keys() - b.keys()):
        cmp.skipped["only_in_a"] = only_a
    if only_b := len(b.keys() - a.keys()):
        cmp.skipped["only_in_b"] = only_b
    return cmp


__all__ = ["diff", "outcomes"]
