"""The ``random``, ``multi_factor`` and ``systemone`` selectors: one candidate first, the others kept as its
fallbacks.

A selector only reorders: the chosen candidate is tried first and the rest keep
their modelRefs order behind it, so a failing choice still falls back as
``static`` does. A selector that fails (no usable weight, a bug in scoring)
leaves the modelRefs order, i.e. the first candidate (spec 5.6).
"""
from __future__ import annotations

import logging
import random as _random
from collections import OrderedDict
from collections.abc import Sequence

from ..config.algorithm import MultiFactor, SystemOneSelect
from ..config.schema import ProviderModel

log = logging.getLogger("vsr_fast.selection")

_ALPHA = 0.2            # EWMA weight of the newest observation: about the last ten calls matter
_SESSIONS = 10_000      # sessions remembered for affinity, least recently used dropped first


def first(chosen: ProviderModel, candidates: Sequence[ProviderModel]) -> tuple[ProviderModel, ...]:
    return (chosen, *(c for c in candidates if c is not chosen))


def pick_random(candidates: Sequence[ProviderModel], weights: Sequence[float],
                rng: _random.Random) -> tuple[ProviderModel, ...]:
    """One candidate drawn with probability proportional to its weight; the modelRefs order if none is > 0."""
    if not candidates or sum(weights) <= 0:
        return tuple(candidates)
    chosen = rng.choices(candidates, weights=weights, k=1)[0]
    return first(chosen, candidates)


class ModelStats:
    """Measured latency (seconds to an answer) and error rate per model, as moving averages of its calls."""

    __slots__ = ("latency", "errors")

    def __init__(self) -> None:
        self.latency: dict[str, float] = {}
        self.errors: dict[str, float] = {}

    def observe(self, model: str, seconds: float, ok: bool) -> None:
        err = 0.0 if ok else 1.0
        self.errors[model] = self.errors.get(model, 0.0) * (1 - _ALPHA) + err * _ALPHA
        if ok:      # a failure's time says nothing about how fast the model answers
            self.latency[model] = self.latency.get(model, seconds) * (1 - _ALPHA) + seconds * _ALPHA


class Sessions:
    """The model that last served each session: multi_factor's prompt-cache affinity, and the current model
    ``retention.keep_current_model`` keeps."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: OrderedDict[bytes, str] = OrderedDict()

    def get(self, session: bytes | None) -> str | None:
        return self._last.get(session) if session else None

    def served(self, session: bytes | None, model: str) -> None:
        if not session:
            return
        self._last[session] = model
        self._last.move_to_end(session)
        if len(self._last) > _SESSIONS:
            self._last.popitem(last=False)


class Held:
    """A decision's choice a session keeps (``retention.ttl_turns``): its recipe and decision, and the turns
    left."""

    __slots__ = ("recipe", "decision", "turns")

    def __init__(self, recipe: str, decision: str, turns: int) -> None:
        self.recipe, self.decision, self.turns = recipe, decision, turns


class Retained:
    """Per session, the decision whose choice routes its next turns (spec 5.7, ``decisions[].retention``)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: OrderedDict[bytes, Held] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self._held)

    def get(self, session: bytes) -> Held | None:
        return self._held.get(session)

    def hold(self, session: bytes, recipe: str, decision: str, turns: int) -> None:
        self._held[session] = Held(recipe, decision, turns)
        self._held.move_to_end(session)
        if len(self._held) > _SESSIONS:
            self._held.popitem(last=False)

    def spend(self, session: bytes) -> int:
        """One of the held turns used; the turns still held after it."""
        held = self._held[session]
        held.turns -= 1
        if held.turns <= 0:
            del self._held[session]
        return held.turns

    def release(self, session: bytes) -> None:
        self._held.pop(session, None)


def scores(candidates: Sequence[ProviderModel], cfg: MultiFactor, stats: ModelStats,
           affinity_model: str | None, domain: dict[str, float] | None = None) -> list[float]:
    """Each candidate's score: quality and domain score minus normalized cost, latency and error rate, each
    weighed. ``domain`` is the matched domain rules' model_scores (absent: no domain factor; a candidate they do
    not list is 0.5, as for quality).

    Cost and latency are divided by the largest among the candidates (0..1, the
    dearest or slowest is 1), so weights compare like with like; an unmeasured
    latency counts as the mean of the measured ones (0 when none is), so a new
    model is neither favoured nor punished. The session's earlier model gets the
    bounded ``affinity`` bonus.
    """
    w = cfg.weights
    costs = [(c.pricing.input + c.pricing.output) if c.pricing is not None else 0.0 for c in candidates]
    measured = [stats.latency[c.name] for c in candidates if c.name in stats.latency]
    mean = sum(measured) / len(measured) if measured else 0.0
    lat = [stats.latency.get(c.name, mean) for c in candidates]
    top_cost, top_lat = max(costs, default=0.0) or 1.0, max(lat, default=0.0) or 1.0
    out = []
    for c, cost, latency in zip(candidates, costs, lat):
        s = (w.quality * cfg.quality.get(c.name, 0.5) - w.cost * cost / top_cost - w.latency * latency / top_lat
             - w.error_rate * stats.errors.get(c.name, 0.0))
        if domain:
            s += w.domain * domain.get(c.name, 0.5)
        if c.name == affinity_model:
            s += cfg.affinity
        out.append(s)
    return out


def pick_multi_factor(candidates: Sequence[ProviderModel], cfg: MultiFactor, stats: ModelStats,
                      affinity_model: str | None, domain: dict[str, float] | None = None) -> tuple[ProviderModel, ...]:
    """The best-scoring candidate first (ties keep the modelRefs order)."""
    return ranked_multi_factor(candidates, cfg, stats, affinity_model, domain)[0]


def ranked_multi_factor(candidates: Sequence[ProviderModel], cfg: MultiFactor, stats: ModelStats,
                        affinity_model: str | None, domain: dict[str, float] | None = None
                        ) -> tuple[tuple[ProviderModel, ...], list[tuple[str, float]]]:
    """The best-scoring candidate first, and every candidate's score best first (x-vsr-trace's ``ranking``,
    the routing preview's); ties keep the modelRefs order. A scoring failure keeps the modelRefs order and
    ranks nothing (spec 5.6)."""
    try:
        s = scores(candidates, cfg, stats, affinity_model, domain)
    except Exception:  # a selector that fails falls back to the first candidate (spec 5.6)
        log.exception("multi_factor failed; the first candidate goes first")
        return tuple(candidates), []
    ranked = sorted(range(len(candidates)), key=lambda i: (-s[i], i))
    return first(candidates[ranked[0]], candidates), [(candidates[i].name, s[i]) for i in ranked]


def domain_scores(matched: Sequence[dict[str, float]]) -> dict[str, float]:
    """The model_scores of the request's matched domain rules, merged: a model's best score among them."""
    out: dict[str, float] = {}
    for scores_ in matched:
        for name, score in scores_.items():
            out[name] = max(score, out.get(name, score))
    return out


def descriptions(candidates: Sequence[ProviderModel], cfg: SystemOneSelect) -> dict[str, str]:
    """The systemone selector's options: each candidate and what it is good at (the selector's own words, else
    its provider entry's description, else its name)."""
    return {c.name: cfg.candidates.get(c.name) or c.description or c.name for c in candidates}


def pick_answered(candidates: Sequence[ProviderModel], probabilities: dict[str, float]) -> tuple[ProviderModel, ...]:
    """The candidate the decision model gave the highest probability first (ties keep the modelRefs order);
    the modelRefs order when it named none of them."""
    known = [(probabilities[c.name], -i) for i, c in enumerate(candidates) if c.name in probabilities]
    if not known:
        return tuple(candidates)
    _, best = max(known)
    return first(candidates[-best], candidates)


class SelectionState:
    """What the selectors remember across requests in one worker: measurements, sessions, random draws."""

    __slots__ = ("stats", "sessions", "retained", "_rngs")

    def __init__(self) -> None:
        self.stats = ModelStats()
        self.sessions = Sessions()
        self.retained = Retained()
        self._rngs: dict[tuple[str | None, str | None], _random.Random] = {}

    def rng(self, key: tuple[str | None, str | None], seed: int | None) -> _random.Random:
        """One generator per decision: a configured seed makes its draws reproducible."""
        found = self._rngs.get(key)
        if found is None:
            found = self._rngs[key] = _random.Random(seed)
        return found
