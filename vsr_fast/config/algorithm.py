"""A decision's ``algorithm`` (spec 5.6): a selector picks one candidate, an executor calls several.

Every algorithm's settings nest under its type key; executors share ``budget``
and ``on_error``, and selectors refuse both. The type is a plain string here so
that a removed or renamed type fails the load with its own code and what to write
instead (``algorithm_errors``), not msgspec's generic "invalid enum value".
"""
from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, field

from .schema_base import Block

SELECTORS = frozenset({"static", "random", "multi_factor", "systemone"})
EXECUTORS = frozenset({"escalate", "fusion", "remom", "ratings", "workflows"})
# Types this router accepts but cannot run yet: refused at load rather than ignored (STYLE: no silent stubs).
NOT_BUILT = frozenset({"systemone", "fusion", "remom", "ratings", "workflows"})

# Removed types (spec 5.6), each with what replaces it.
REMOVED = {
    "prompt": "type: systemone (one choice over the candidates' descriptions)",
    "router_dc": "type: systemone (one choice over the candidates' descriptions)",
    "automix": "type: multi_factor with weights",
    "hybrid": "type: multi_factor with weights (its prompt-cache affinity is multi_factor.affinity)",
    "latency_aware": "type: multi_factor with a latency weight",
    "knn": "type: systemone, or static for a decision with one candidate",
    "kmeans": "type: systemone, or static for a decision with one candidate",
    "svm": "type: systemone, or static for a decision with one candidate",
    "mlp": "type: systemone, or static for a decision with one candidate",
    "confidence": "type: escalate with one accept check (escalate.accept.confidence)",
    "cascade": "type: escalate",
    "policy": "global.router.learning.adaptation",
    "session_aware": "type: multi_factor (its affinity tie-breaker)",
    "elo": "global.router.learning.adaptation",
    "rl_driven": "global.router.learning.adaptation",
    "gmtrouter": "global.router.learning.adaptation",
    "bandit": "global.router.learning.adaptation",
    "personalization": "global.router.learning.adaptation",
    "thompson": "global.router.learning.adaptation",
    "router_r1": "global.router.learning.adaptation",
}
RENAMED = {"decision": "systemone"}

Unit = Annotated[float, Meta(ge=0, le=1)]
Weight = Annotated[float, Meta(ge=0, le=1000)]


Ms = Annotated[int, Meta(ge=0, le=3_600_000)]


class Turn(Block):
    """One wall-clock budget per turn (conversation-tier-budgets.md), split over an executor's attempts.

    The first (thinking) attempt gets min(max(remaining - reserve, remaining / 2), thinking_cap); a rescue
    (every later attempt, after a blank, truncated, malformed or rejected answer) at most rescue_cap, and
    never starts with under rescue_floor left; nothing starts with under min_start left. max_tokens is
    capped at remaining seconds x tokens_per_s. Defaults are that report's.
    """

    reserve_ms: Ms = 130_000
    thinking_cap_ms: Ms = 300_000
    rescue_cap_ms: Ms = 120_000
    rescue_floor_ms: Ms = 10_000
    min_start_ms: Ms = 5_000
    tokens_per_s: Annotated[float, Meta(gt=0, le=100_000)] = 20.0


class Budget(Block):
    """An executor's shared budget, from the request's arrival: every call counts, transport retries included."""

    deadline_ms: Annotated[int, Meta(ge=1, le=3_600_000)] | None = None
    max_calls: Annotated[int, Meta(ge=1, le=64)] | None = None
    turn: Turn | None = None


class MultiFactorWeights(Block):
    """Each factor is 0..1 (cost and latency relative to the dearest and slowest candidate); the default
    error_rate weight of 2 moves traffic off a model once about half its recent calls fail, however cheap."""

    cost: Weight = 1.0
    latency: Weight = 1.0
    error_rate: Weight = 2.0
    quality: Weight = 1.0


class MultiFactor(Block):
    """Weighted factors per candidate; the highest score goes first, the others stay its fallbacks."""

    weights: MultiFactorWeights = MultiFactorWeights()
    # Quality per candidate model, 0..1 (1 the best); a candidate not listed is 0.5.
    quality: dict[str, Unit] = field(default_factory=dict)
    # Bonus (in score units) for the candidate that served the session's earlier turn: prompt-cache reuse.
    # Bounded, so it breaks ties and near-ties but never outweighs a real difference.
    affinity: Annotated[float, Meta(ge=0, le=0.5)] = 0.05


class Random(Block):
    """Draws one candidate, each with probability proportional to its modelRef ``weight``."""

    seed: int | None = None      # for reproducible draws in tests and benchmarks


class Confidence(Block):
    gte: float
    method: Literal["avg_logprob", "margin"] = "avg_logprob"
    # avg_logprob: the answer's mean token logprob, at least gte (e.g. -0.3). margin: the mean gap between the
    # chosen token's logprob and the runner-up's (top_logprobs), at least gte.


class Accept(Block):
    """The one check an escalation's answer must pass to be returned."""

    confidence: Confidence | None = None
    # refusal: false accepts an answer that does not refuse (the model's own refusal field, or a refusal text).
    refusal: Literal[False] | None = None


class Escalate(Block):
    accept: Accept
    order: Literal["modelRefs", "cost"] = "modelRefs"


class Algorithm(Block):
    type: str = "static"
    random: Random | None = None
    multi_factor: MultiFactor | None = None
    escalate: Escalate | None = None
    budget: Budget | None = None
    on_error: Literal["last_attempt", "fail"] | None = None


_BLOCKS = ("random", "multi_factor", "escalate")


def algorithm_errors(path: str, alg: Algorithm, refs: list[str]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of one decision's algorithm, each one line starting with its path."""
    errors: list[str] = []
    warnings: list[str] = []
    kind = alg.type
    if kind in RENAMED:
        warnings.append(f"{path}.type: renamed_algorithm_type: {kind!r} is now {RENAMED[kind]!r}")
        kind = RENAMED[kind]
    if kind in REMOVED:
        return [f"{path}.type: removed_algorithm_type: {kind!r} was removed; write {REMOVED[kind]}"], warnings
    if kind not in SELECTORS | EXECUTORS:
        known = ", ".join(sorted(SELECTORS | EXECUTORS))
        return [f"{path}.type: invalid_value: unknown algorithm type {kind!r} (one of: {known})"], warnings
    if kind in NOT_BUILT:
        return [f"{path}.type: unsupported_value: the {kind} algorithm is not built in this router yet; "
                "use static, random, multi_factor or escalate"], warnings
    for name in _BLOCKS:
        if name != kind and getattr(alg, name) is not None:
            errors.append(f"{path}.{name}: invalid_value: settings of the {name} algorithm under type {kind!r}")
    if kind in SELECTORS:
        for name in ("budget", "on_error"):
            if getattr(alg, name) is not None:
                errors.append(f"{path}.{name}: invalid_value: the {kind} selector takes no {name} "
                              "(only executors do)")
    if kind == "escalate":
        if alg.escalate is None:
            errors.append(f"{path}.escalate: missing_field: an escalate algorithm needs escalate.accept")
        else:
            accept = alg.escalate.accept
            checks = [n for n in ("confidence", "refusal") if getattr(accept, n) is not None]
            if len(checks) != 1:
                errors.append(f"{path}.escalate.accept: invalid_value: exactly one check (confidence or "
                              f"refusal: false), got {len(checks)}")
        if len(refs) < 2:
            errors.append(f"{path}: invalid_value: escalate needs at least two modelRefs to escalate between")
    if kind == "multi_factor" and alg.multi_factor is not None:
        for name in alg.multi_factor.quality:
            if name not in refs:
                errors.append(f"{path}.multi_factor.quality.{name}: unknown_model: {name!r} is not one of "
                              "the decision's modelRefs")
    return errors, warnings
