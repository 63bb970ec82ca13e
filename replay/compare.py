"""Routes before and after, compared: which decisions and models moved, by count, with examples.

``run`` compares each recorded route with the route a new configuration
gives the same request; ``diff`` compares the routes two exports recorded for
the same requests. Both report through ``Comparison``.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from vsr_fast.events.types import DecisionChosen, ErrorRaised, Event

EXAMPLES = 3


@dataclass(frozen=True, order=True)
class Outcome:
    """Where routing sent a request: its recipe, decision and first model, or the error it raised."""

    recipe: str | None = None
    decision: str | None = None
    model: str | None = None
    fallback: bool = False
    error: str | None = None

    @property
    def decision_label(self) -> str:
        if self.error:
            return f"error:{self.error}"
        if self.decision:
            return self.decision
        return "(recipe fallback)" if self.fallback else "(model named)"

    @property
    def model_label(self) -> str:
        return self.model or "-"

    def json(self) -> dict:
        return {"recipe": self.recipe, "decision": self.decision, "model": self.model, "fallback": self.fallback,
                "error": self.error}


def recorded_outcome(ev: Event) -> Outcome | None:
    """The route an event recorded: a decision event, or the error that stopped routing."""
    if isinstance(ev, DecisionChosen):
        return Outcome(ev.recipe, ev.decision, ev.model, ev.fallback)
    if isinstance(ev, ErrorRaised) and ev.stage in ("decode", "route"):
        return Outcome(ev.recipe, error=ev.code)
    return None


# The ``why`` of a decision a session's earlier turn held (routing.plan's retention): the route came from the
# session's state, which a request re-routed alone does not have.
RETAINED = "retained from an earlier turn"

# Why a route is not compared, or compared only approximately, in the summary's words.
STATEFUL_REASONS = {
    "retained": "a decision retained from an earlier turn of its session (retention.ttl_turns)",
    "previous_response_id": "a Responses request continuing a stored one (previous_response_id)",
}
APPROXIMATE_REASONS = {
    "cut": "a request copy cut at max_body_bytes (context signals read the recorded token count, the others "
           "the cut copy)",
    "offline": "a System One signal read unknown offline",
}


def stateful_reason(ev: Event) -> str | None:
    """Why a recorded route depended on state the request's copy does not carry, or None."""
    if isinstance(ev, DecisionChosen) and ev.why.startswith(RETAINED):
        return "retained"
    return None


@dataclass
class Move:
    count: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    """Pairs of (before, after) routes, counted."""

    compared: int = 0
    unchanged: int = 0
    # Compared on less than the live route read (APPROXIMATE_REASONS): a move among them is counted apart
    # (``approximate_moves``), never as a change: it may be the copy's, not the configuration's.
    approximate: int = 0
    approximate_reasons: collections.Counter = field(default_factory=collections.Counter)
    # Routed on the session's or a stored response's state (STATEFUL_REASONS): not compared, never a change.
    stateful: collections.Counter = field(default_factory=collections.Counter)
    skipped: collections.Counter = field(default_factory=collections.Counter)
    # Recorded without their request on purpose (a masking decision's, by default), by recorded decision: a
    # recipe change's effect on them cannot be replayed, and this says how many that is.
    withheld: collections.Counter = field(default_factory=collections.Counter)
    moves: dict[tuple[Outcome, Outcome], Move] = field(default_factory=dict)
    approximate_moves: dict[tuple[Outcome, Outcome], Move] = field(default_factory=dict)
    decisions_before: collections.Counter = field(default_factory=collections.Counter)
    decisions_after: collections.Counter = field(default_factory=collections.Counter)
    models_before: collections.Counter = field(default_factory=collections.Counter)
    models_after: collections.Counter = field(default_factory=collections.Counter)

    def add(self, replay_id: str, before: Outcome, after: Outcome, *, approximate: str | None = None) -> None:
        """One route compared; ``approximate``: why the re-route read less than the live one (a key of
        APPROXIMATE_REASONS), or None."""
        self.compared += 1
        if approximate:
            self.approximate += 1
            self.approximate_reasons[approximate] += 1
        self.decisions_before[before.decision_label] += 1
        self.decisions_after[after.decision_label] += 1
        self.models_before[before.model_label] += 1
        self.models_after[after.model_label] += 1
        if before == after:
            self.unchanged += 1
            return
        move = (self.approximate_moves if approximate else self.moves).setdefault((before, after), Move())
        move.count += 1
        if len(move.examples) < EXAMPLES:
            move.examples.append(replay_id)

    def add_stateful(self, reason: str) -> None:
        """A route its session's or a stored response's state chose (a key of STATEFUL_REASONS): not compared."""
        self.stateful[reason] += 1

    @property
    def changed(self) -> int:
        return sum(m.count for m in self.moves.values())

    @property
    def approximate_changed(self) -> int:
        return sum(m.count for m in self.approximate_moves.values())

    def sorted_moves(self, approximate: bool = False) -> list[tuple[Outcome, Outcome, Move]]:
        moves = self.approximate_moves if approximate else self.moves
        return [(b, a, m) for (b, a), m in sorted(moves.items(), key=lambda kv: (-kv[1].count, kv[0]))]

    def json(self) -> dict:
        return {
            "compared": self.compared, "unchanged": self.unchanged, "changed": self.changed,
            "approximate": self.approximate, "approximate_changed": self.approximate_changed,
            "approximate_reasons": dict(self.approximate_reasons), "stateful": dict(self.stateful),
            "skipped": dict(self.skipped), "withheld": dict(self.withheld),
            "moves": [{"from": b.json(), "to": a.json(), "count": m.count, "examples": m.examples}
                      for b, a, m in self.sorted_moves()],
            "approximate_moves": [{"from": b.json(), "to": a.json(), "count": m.count, "examples": m.examples}
                                  for b, a, m in self.sorted_moves(approximate=True)],
            "decisions": _table(self.decisions_before, self.decisions_after),
            "models": _table(self.models_before, self.models_after),
        }

    def text(self, title: str) -> str:
        lines = [title, f"  compared   {self.compared}", f"  unchanged  {self.unchanged}",
                 f"  changed    {self.changed}"]
        if self.approximate:
            lines.append(f"  approximate {self.approximate}, {self.approximate_changed} of them moved (not counted"
                         " as changed: re-routed on less than the live route read)")
            for reason, n in sorted(self.approximate_reasons.items()):
                lines.append(f"             {n} ({APPROXIMATE_REASONS.get(reason, reason)})")
        for reason, n in sorted(self.stateful.items()):
            lines.append(f"  stateful   {n} (not compared: {STATEFUL_REASONS.get(reason, reason)}; re-routed alone,"
                         " without that state, it would read as a change)")
        for reason, n in sorted(self.skipped.items()):
            lines.append(f"  skipped    {n} ({reason.replace('_', ' ')})")
        for decision, n in sorted(self.withheld.items()):
            lines.append(f"  withheld   {n} (withheld: masking decision {decision} keeps no request copy; not"
                         " replayable)")
        for title, approximate in (("Moved:", False), ("Moved, approximately (not changes):", True)):
            moves = self.sorted_moves(approximate)
            if moves:
                lines += ["", title]
            for b, a, m in moves:
                route = f"{b.decision_label} -> {a.decision_label}"
                models = "" if b.model == a.model else f"  [{b.model_label} -> {a.model_label}]"
                lines.append(f"  {m.count:>6}  {route}{models}  e.g. {', '.join(m.examples)}")
        for name, before, after in (("Decisions", self.decisions_before, self.decisions_after),
                                    ("Models", self.models_before, self.models_after)):
            if before == after:
                continue
            lines += ["", f"{name}:{'before':>28}{'after':>8}"]
            for key, row in _table(before, after).items():
                lines.append(f"  {key:<28}{row['before']:>8}{row['after']:>8}")
        return "\n".join(lines)


def _table(before: collections.Counter, after: collections.Counter) -> dict[str, dict[str, int]]:
    keys = sorted(set(before) | set(after), key=lambda k: (-(before[k] + after[k]), k))
    return {k: {"before": before[k], "after": after[k]} for k in keys}


__all__ = ["APPROXIMATE_REASONS", "Comparison", "Move", "Outcome", "STATEFUL_REASONS", "recorded_outcome",
           "stateful_reason"]
