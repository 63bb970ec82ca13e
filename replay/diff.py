"""Two recordings of the same requests, compared: the routes each recorded, request by request."""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from vsr_fast.events.types import Event, RequestReceived

from .compare import Comparison, Outcome, recorded_outcome


class Recording(NamedTuple):
    """A recording's routes, and the replay ids it recorded without their request on purpose (``withheld``)."""

    routes: dict[str, Outcome]
    withheld: set[str]


def outcomes(events: Iterable[tuple[str, Event]]) -> Recording:
    """Each replay id's recorded route (the first one recorded), and which requests were withheld."""
    found: dict[str, Outcome] = {}
    withheld: set[str] = set()
    for _, ev in events:
        if isinstance(ev, RequestReceived) and ev.withheld is not None:
            withheld.add(ev.replay_id)
        if ev.replay_id not in found:
            outcome = recorded_outcome(ev)
            if outcome is not None:
                found[ev.replay_id] = outcome
    return Recording(found, withheld)


def diff(a: Recording, b: Recording) -> Comparison:
    """Routes of the requests both recorded, A as before and B as after; the others are counted as skipped, a
    request one side withheld (``vsr-replay run`` re-routes none) as ``run`` counts it: withheld."""
    cmp = Comparison()
    for replay_id in sorted(a.routes.keys() & b.routes.keys()):
        cmp.add(replay_id, a.routes[replay_id], b.routes[replay_id])
    for side, other, label in ((a, b, "only_in_a"), (b, a, "only_in_b")):
        for replay_id in side.routes.keys() - other.routes.keys():
            if replay_id in side.withheld:
                cmp.withheld[side.routes[replay_id].decision_label] += 1
            else:
                cmp.skipped[label] += 1
    return cmp


__all__ = ["Recording", "diff", "outcomes"]
