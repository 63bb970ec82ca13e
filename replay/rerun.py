"""Re-route recorded requests offline under another configuration: signals and decisions, no upstream call.

A request is re-routed from the copy its ``request_received`` event kept
(``router_replay.capture_request_body``), read by the adapter of the client
API it came in (Chat, Messages, Responses, Images), with the identity routing
read then. Requests recorded without a copy are counted, not guessed.

A route chosen on state the copy does not carry is not compared but counted
as ``stateful`` (``compare.STATEFUL_REASONS``): a decision a session's earlier
turn retained (``retention.ttl_turns``; its ``why`` says so), a Responses
request continuing a stored one (``previous_response_id``). Re-routed alone,
each would read as a change the configuration did not make. A copy cut at
``max_body_bytes``, or a System One signal read unknown offline, is compared
but ``approximate``: a move among those is shown apart, never a change. A cut
copy's context signals read the token count the live route read (its
``signals_evaluated`` event), not the cut copy's.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from vsr_fast.routing import Loaded
from vsr_fast.errors import VsrError
from vsr_fast.events.types import DecisionChosen, ErrorRaised, Event, RequestReceived, SignalsEvaluated, now_ms
from vsr_fast.signals.context import BYTES_PER_TOKEN
from vsr_fast.protocol.adapters import Adapter, make_adapters
from vsr_fast.protocol.responses import MemoryResponseStore
from vsr_fast.routing.plan import SystemOneAsker
from vsr_fast.signals.base import Identity

from .compare import Comparison, Outcome, recorded_outcome, stateful_reason
from .sources import LINE_ENCODER, ExportLine


@dataclass
class Recorded:
    replay_id: str
    received: RequestReceived | None = None
    received_id: str = ""
    outcome: Outcome | None = None
    stateful: str | None = None        # why its recorded route came from state (compare.STATEFUL_REASONS)
    tokens: int | None = None          # the token estimate the live context signals read, when one did


def requests(events: Iterable[tuple[str, Event]]) -> Iterator[Recorded]:
    """Each request with its recorded route, as soon as both are known; the incomplete ones at the end."""
    pending: dict[str, Recorded] = {}
    for entry_id, ev in events:
        is_received = isinstance(ev, RequestReceived)
        outcome = None if is_received else recorded_outcome(ev)
        if isinstance(ev, SignalsEvaluated) and ev.replay_id in pending:    # after its request_received
            pending[ev.replay_id].tokens = next(
                (int(x.value) for x in ev.readings if x.type == "context" and x.value is not None), None)
        if not is_received and outcome is None:
            continue
        r = pending.get(ev.replay_id)
        if r is None:
            r = pending[ev.replay_id] = Recorded(ev.replay_id)
        if isinstance(ev, RequestReceived):
            r.received, r.received_id = ev, entry_id
        elif r.outcome is None:
            r.outcome = outcome
            r.stateful = stateful_reason(ev)
        if r.received is not None and r.outcome is not None:
            yield pending.pop(ev.replay_id)
    yield from pending.values()


# What a learned signal's outcome says when no System One client was given (routing/plan.py).
_OFFLINE = "no System One client"


def recorded_adapters() -> dict[str, Adapter]:
    """The client APIs' adapters, reading recorded copies (no store: nothing is continued here)."""
    return make_adapters(MemoryResponseStore(max_entries=1))


async def reroute(loaded: Loaded, received: RequestReceived, systemone: SystemOneAsker | None = None,
                  adapters: dict[str, Adapter] | None = None, tokens: int | None = None) -> tuple[Outcome, str | None]:
    """The route ``loaded`` gives the recorded request copy, and what it lacked, or None:
    ``previous_response_id`` (a Responses request continued turns its copy does not hold: stateful),
    ``offline`` (a learned signal read unknown: approximate). ``tokens``: the token estimate the live
    context signals read (a cut copy's context signals read it).

    With ``systemone``, learned rules ask the configuration's deployments, as the
    live router would (no model is called); without it (``--offline``) a rule
    that reads the decision model is unknown and its decisions settle by on_unknown.
    """
    assert received.request is not None
    adapter = (adapters or recorded_adapters())[received.api]
    identity = Identity(user=received.user, groups=frozenset(received.groups))

    def canonical():
        c = adapter.canonical(req, identity)
        if tokens is not None and received.request_truncated:
            # The copy was cut: the context signals read the size the live route read, not the cut copy's
            # (``all_text_bytes`` is the estimate's basis, a cached property of the canonical request).
            c.__dict__["all_text_bytes"] = max(c.all_text_bytes, tokens * BYTES_PER_TOKEN)
        return c

    try:
        req = adapter.decode(received.request)
        route = await loaded.table.route(adapter.model(req), canonical, systemone)
    except VsrError as exc:
        return Outcome(getattr(exc, "recipe", None), error=exc.code), None
    model = route.candidates[0].name if route.candidates else None
    offline = route.readings is not None and any(
        o.matched is None and _OFFLINE in (o.detail or "") for o in route.readings.outcomes.values())
    continued = getattr(req.body, "previous_response_id", None) is not None
    note = "previous_response_id" if continued else "offline" if offline else None
    return Outcome(route.recipe, route.decision, model, route.fallback), note


async def run(loaded: Loaded, events: Iterable[tuple[str, Event]], *, out: IO[bytes] | None = None,
              on_request: Callable[[int], None] | None = None, systemone: SystemOneAsker | None = None,
              recorded_under: str | None = None) -> Comparison:
    """Compare every recorded route with the one ``loaded`` gives; ``out`` receives the re-routed export.
    ``recorded_under``: a configuration version; requests recorded under another are counted as ``other_config``
    (the default journals hold every router's of a directory, whatever it ran: mixed in, its routes would read
    as moves the configuration did not make)."""
    cmp = Comparison()
    adapters = recorded_adapters()
    seen = 0
    for r in requests(events):
        seen += 1
        if on_request is not None:
            on_request(seen)
        if r.received is None:
            cmp.skipped["no_request_event"] += 1
            continue
        if recorded_under is not None and r.received.config_version != recorded_under:
            cmp.skipped["other_config"] += 1
            continue
        if r.received.request is None:
            if r.received.withheld is not None:
                cmp.withheld[r.outcome.decision_label if r.outcome is not None else "(unknown)"] += 1
            else:
                cmp.skipped["no_request_copy"] += 1
            continue
        if r.outcome is None:
            cmp.skipped["no_recorded_route"] += 1
            continue
        if r.received.api not in adapters:
            cmp.skipped[f"api_{r.received.api}"] += 1   # a client API this router does not re-route
            continue
        if r.stateful is not None:
            cmp.add_stateful(r.stateful)
            continue
        after, note = await reroute(loaded, r.received, systemone, adapters, r.tokens)
        if note == "previous_response_id":
            cmp.add_stateful(note)
            continue
        cmp.add(r.replay_id, r.outcome, after, approximate="cut" if r.received.request_truncated else note)
        if out is not None:
            _write(out, r, after, loaded.version_hash)
    return cmp


def _write(out: IO[bytes], r: Recorded, after: Outcome, version: str) -> None:
    """The request and its new route as export lines, so ``diff`` can compare runs like recordings."""
    received = r.received
    assert received is not None
    common = {"replay_id": received.replay_id, "request_id": received.request_id,
              "session_id": received.session_id, "recipe": after.recipe, "config_version": version,
              "seq": received.seq + 1, "ts_ms": now_ms()}
    routed: Event
    if after.error:
        routed = ErrorRaised(**common, stage="route", code=after.error, status=400)
    else:
        routed = DecisionChosen(**common, decision=after.decision, model=after.model,
                                candidates=[after.model] if after.model else [], fallback=after.fallback,
                                why="vsr-replay run")
    for ev in (received, routed):
        out.write(LINE_ENCODER.encode(ExportLine(r.received_id, ev)) + b"\n")


__all__ = ["Recorded", "requests", "reroute", "run"]
