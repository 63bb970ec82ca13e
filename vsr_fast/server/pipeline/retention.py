"""``decisions[].retention`` on the request path (spec 5.7): what a turn leaves for its session's later turns.

A decision with ``ttl_turns: N`` holds the session's next N turns (of the same recipe): on each, its route
serves, with the model that served the session's last turn first when it is one of its candidates, unless the
turn matches a decision of higher priority, or the same decision again (which holds N turns anew). Every
later turn of the session spends one held turn, served or outranked. ``keep_current_model`` puts the model
that served the session's last turn first, in place of the selector's choice; ``drop`` and
``prefer_prefix_retention`` act on the cache write and the provider request (recording, shaping).

A session is the caller's ``x-vsr-session-id`` (or an accepted alias), under its owner; without one a request
keeps and finds nothing. Sessions are remembered per worker process, as multi_factor's affinity is.
"""
from __future__ import annotations

from ...headers import trace
from ...routing import Route
from .exchange import Exchange
from .looper import session_of


def held(ex: Exchange, r: Route | None, recipe: str | None) -> Route | None:
    """The turn's route: ``r`` (None when no decision matched and the recipe has no fallback), or the route of
    the decision an earlier turn of the session keeps."""
    retained = ex.state.selection.retained
    if not retained or recipe is None:      # no session holds a decision: no header scan for the session's name
        return r
    key = session_of(ex)
    if key is None:
        return r
    hold = retained.get(key)
    if hold is None or hold.recipe != recipe:
        return r
    chosen = r.chosen.decision if r is not None and r.chosen is not None else None
    if chosen is not None and chosen.name == hold.decision:
        return r                                  # matched again: fresh() holds its turns anew
    left = retained.spend(key)
    kept = ex.state.table.held_route(hold.recipe, hold.decision, r.readings if r is not None else None, left)
    if kept is None:                              # a reload removed the decision
        retained.release(key)
        return r
    assert kept.chosen is not None and kept.chosen.decision is not None
    if chosen is not None and chosen.priority > kept.chosen.decision.priority:
        return r                                  # the turn's own decision outranks the held one
    ex.kept = ex.state.selection.sessions.get(key)
    return kept


def fresh(ex: Exchange, r: Route) -> None:
    """A turn its own decision routed: that decision's ``ttl_turns`` holds the session's next turns."""
    d = r.chosen.decision if r.chosen is not None else None
    if d is None or d.retention is None or not d.retention.ttl_turns or r.recipe is None:
        return
    key = session_of(ex)
    if key is not None:
        ex.state.selection.retained.hold(key, r.recipe, d.name, d.retention.ttl_turns)


def traced(ex: Exchange, r: Route, was_held: bool) -> None:
    """The trace's ``retention`` member: a held route, and what the decision's retention keeps."""
    d = r.chosen.decision if r.chosen is not None else None
    if ex.trace is None or d is None:
        return
    items = [f"held by an earlier turn: {r.chosen.why}"] if was_held and r.chosen is not None else []
    ret = d.retention
    if ret is not None:
        items += [f"{k}={str(v).lower()}" for k, v in (("drop", ret.drop), ("ttl_turns", ret.ttl_turns),
                                                        ("keep_current_model", ret.keep_current_model),
                                                        ("prefer_prefix_retention", ret.prefer_prefix_retention))
                  if v is not None]
    if items:
        ex.trace = trace.with_member(ex.trace, trace.list_member("retention", items))
