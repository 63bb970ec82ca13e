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


def kind_of(alg: "Algorithm") -> str:
    """The algorithm's type as it runs: a renamed type under its new name."""
    return RENAMED.get(alg.type, alg.type)

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
    # The matched domain rules' model_scores (recipes[].signals.domains[].model_scores), 0..1 per model.
    domain: Weight = 1.0


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
    method: Literal["avg_logprob", "margin", "hybrid", "self_verify"] = "avg_logprob"
    # avg_logprob: the answer's mean token logprob, at least gte (e.g. -0.3). margin: the mean gap between the
    # chosen token's logprob and the runner-up's (top_logprobs), at least gte. hybrid (0..1, as vLLM Semantic
    # Router normalizes them): logprob_weight x clamp((avg_logprob + 3) / 3) + margin_weight x (1 - e^(-margin/3)).
    # self_verify (0..1): the answering model rates its own answer when asked (AutoMix), one more call.
    logprob_weight: Annotated[float, Meta(ge=0, le=1)] = 0.5
    margin_weight: Annotated[float, Meta(ge=0, le=1)] = 0.5


TimeoutMs = Annotated[int, Meta(ge=1, le=60_000)]


class AnswerCheck(Block):
    """accept.systemone: the decision model's ``answer_check`` of the request and the answer, P(yes) >= gte."""

    gte: Unit
    deployment: str | None = None        # the decision model (system.decision_model) unless named
    timeout_ms: TimeoutMs | None = None  # else the deployment's, else 1,000 ms


class Accept(Block):
    """The one check an escalation's answer must pass to be returned."""

    confidence: Confidence | None = None
    systemone: AnswerCheck | None = None
    # refusal: false accepts an answer that does not refuse (the model's own refusal field, or a refusal text).
    refusal: Literal[False] | None = None


class Stage(Block):
    """One stage of a System One escalation: ``native`` asks its model the original typed request; ``judge``
    has its model (a Chat model of the decision) choose among the complete answers before it."""

    type: Literal["native", "judge"]
    model: str


class NativeAccept(Block):
    """Uncalibrated acceptance rules over the whole typed answer bundle (every answer of every entry)."""

    # Every answer's confidence at least this: noul max(p, 1 - p); choice and score their confidence; set the
    # least sure label's max(p, 1 - p); span the least probable span (no spans: 1).
    min_confidence: Unit | None = None
    # An in-place question error fails the bundle unless allowed.
    question_errors: bool = False


class Quality(Block):
    """escalate.quality: the policy every accepted answer of a System One escalation meets."""

    mode: Literal["uncalibrated", "calibrated"]
    accept: NativeAccept | None = None      # uncalibrated
    max_risk: Unit | None = None            # calibrated: needs certified evaluation evidence


class Escalate(Block):
    accept: Accept | None = None            # Chat entrypoints: the one check
    order: Literal["modelRefs", "size", "cost"] = "modelRefs"   # size: each candidate's param_size, smallest first
    stages: list[Stage] = field(default_factory=list)   # System One entrypoints: run in order
    quality: Quality | None = None


class SystemOneSelect(Block):
    """The ``systemone`` selector: one choice question whose options are the candidates and their descriptions."""

    instructions: str = "Which model should answer this request?"
    # Candidate model -> what it is good at; a candidate not listed is described by its provider entry's
    # description, else by its name.
    candidates: dict[str, str] = field(default_factory=dict)
    deployment: str | None = None        # the decision model (system.decision_model) unless named
    timeout_ms: TimeoutMs | None = None  # else the deployment's, else 1,000 ms


Count = Annotated[int, Meta(ge=1, le=64)]
Temperature = Annotated[float, Meta(ge=0, le=2)]
Tokens = Annotated[int, Meta(ge=1, le=1_000_000)]


class Ratings(Block):
    """Every candidate answers, concurrently; the answer carries one choice per model (arena-style ratings)."""

    max_concurrent: Count | None = None


class Remom(Block):
    """Rounds of parallel answers, each round reading the previous one's, then one final synthesis (ReMoM)."""

    breadth_schedule: Annotated[list[Count], Meta(min_length=1, max_length=8)]
    model_distribution: Literal["weighted", "equal", "round_robin", "first_only"] = "weighted"
    temperature: Temperature = 1.0
    max_completion_tokens: Tokens | None = None
    compaction_strategy: Literal["full", "last_n_tokens"] = "full"
    compaction_tokens: Tokens = 1000
    max_concurrent: Count | None = None
    min_successful_responses: Count | None = None   # a round ends once this many answered (the rest cancelled)
    max_responses_per_round: Count | None = None    # how many of a round's answers the next round reads
    synthesis_template: str | None = None           # {{original}} and {{references}} are replaced
    synthesis_model: str | None = None              # the final round's one model; by model_distribution if unset
    shuffle_seed: int = 42
    include_intermediate_responses: bool = True


class Fusion(Block):
    """A panel answers in parallel, a judge model analyses the answers, then writes the final one."""

    model: str | None = None                        # the judge; the first analysis model if unset
    analysis_models: list[str] = field(default_factory=list)   # the panel; the modelRefs if empty
    analysis_mode: Literal["separate", "none"] = "separate"    # none: no analysis call, synthesis only
    max_concurrent: Count | None = None
    min_successful_responses: Count | None = None
    max_completion_tokens: Tokens | None = None
    temperature: Temperature | None = None
    include_analysis: bool = True
    include_intermediate_responses: bool = True
    analysis_template: str | None = None            # {{original}} and {{responses}} are replaced
    synthesis_template: str | None = None           # ... and {{analysis}}


class WorkflowRole(Block):
    name: Annotated[str, Meta(min_length=1)]
    models: Annotated[list[str], Meta(min_length=1)]
    prompt: str | None = None
    # Earlier outputs this role reads, by role name or agent ("role:index:model"); every earlier one if empty.
    access_list: list[str] = field(default_factory=list)


class WorkflowFinal(Block):
    model: str | None = None                        # the last role's first model if unset
    prompt: str | None = None


class WorkflowPlanner(Block):
    model: str | None = None                        # the first modelRef if unset
    max_completion_tokens: Tokens | None = None


class Workflows(Block):
    """Roles run in order, each role's models in parallel, each reading earlier outputs; a final model merges.
    ``static``: the roles as written; ``dynamic``: the planner model writes the roles (at most ``max_steps``)."""

    mode: Literal["static", "dynamic"] = "static"
    roles: list[WorkflowRole] = field(default_factory=list)
    planner: WorkflowPlanner = WorkflowPlanner()
    max_steps: Count = 4
    final: WorkflowFinal = WorkflowFinal()
    max_parallel: Count = 2
    min_successful_responses: Count | None = None
    max_completion_tokens: Tokens | None = None
    temperature: Temperature | None = None
    include_intermediate_responses: bool = True


class Algorithm(Block):
    type: str = "static"
    random: Random | None = None
    multi_factor: MultiFactor | None = None
    systemone: SystemOneSelect | None = None
    escalate: Escalate | None = None
    ratings: Ratings | None = None
    remom: Remom | None = None
    fusion: Fusion | None = None
    workflows: Workflows | None = None
    budget: Budget | None = None
    # Executors only, each its own two: escalate last_attempt (its default) or fail; ratings, remom, fusion and
    # workflows skip (their default) or fail. Selectors take none.
    on_error: Literal["last_attempt", "fail", "skip"] | None = None


_BLOCKS = ("random", "multi_factor", "systemone", "escalate", "ratings", "remom", "fusion", "workflows")


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
        elif alg.escalate.stages or alg.escalate.quality is not None:
            errors += _stage_errors(f"{path}.escalate", alg.escalate, refs)
        elif alg.escalate.accept is None:
            errors.append(f"{path}.escalate.accept: missing_field: an escalate algorithm needs escalate.accept")
        else:
            accept = alg.escalate.accept
            checks = [n for n in ("confidence", "systemone", "refusal") if getattr(accept, n) is not None]
            if len(checks) != 1:
                errors.append(f"{path}.escalate.accept: invalid_value: exactly one check (confidence, systemone "
                              f"or refusal: false), got {len(checks)}")
        if len(refs) < 2:
            errors.append(f"{path}: invalid_value: escalate needs at least two modelRefs to escalate between")
    if kind == "escalate" and alg.on_error == "skip":
        errors.append(f"{path}.on_error: invalid_value: escalate's on_error is last_attempt or fail")
    elif kind in EXECUTORS and kind != "escalate" and alg.on_error == "last_attempt":
        errors.append(f"{path}.on_error: invalid_value: {kind}'s on_error is skip or fail")
    if kind in EXECUTORS and kind != "escalate" and alg.budget is not None and alg.budget.turn is not None:
        errors.append(f"{path}.budget.turn: invalid_value: the turn budget splits escalate's attempts; {kind} "
                      "takes deadline_ms and max_calls")
    if kind == "fusion" and alg.fusion is not None and alg.fusion.min_successful_responses is not None:
        panel = len(dict.fromkeys(alg.fusion.analysis_models or refs))
        if alg.fusion.min_successful_responses > panel:
            errors.append(f"{path}.fusion.min_successful_responses: invalid_value: "
                          f"{alg.fusion.min_successful_responses} exceeds the panel of {panel}")
    if kind == "systemone":
        described = alg.systemone.candidates if alg.systemone is not None else {}
        for name in described:
            if name not in refs:
                errors.append(f"{path}.systemone.candidates.{name}: unknown_model: {name!r} is not one of the "
                              "decision's modelRefs")
        if len(dict.fromkeys(refs)) < 2:
            errors.append(f"{path}: invalid_value: the systemone selector needs at least two modelRefs to choose "
                          "between")
    errors += _named_models(path, alg, kind, refs)
    if kind == "multi_factor" and alg.multi_factor is not None:
        for name in alg.multi_factor.quality:
            if name not in refs:
                errors.append(f"{path}.multi_factor.quality.{name}: unknown_model: {name!r} is not one of "
                              "the decision's modelRefs")
    return errors, warnings


def _stage_errors(path: str, esc: Escalate, refs: list[str]) -> list[str]:
    """A System One escalation's stages and quality (spec 5.6); where they may run is checked with the entrypoints."""
    errors = [f"{path}.stages[{i}].model: unknown_model: {s.model!r} is not one of the decision's modelRefs"
              for i, s in enumerate(esc.stages) if s.model not in refs]
    if not esc.stages:
        errors.append(f"{path}.stages: missing_field: escalate.quality needs the stages it judges")
    elif esc.stages[0].type != "native":
        errors.append(f"{path}.stages[0].type: invalid_value: a judge chooses among the answers before it; "
                      "the first stage is native")
    if esc.accept is not None:
        errors.append(f"{path}.accept: invalid_value: escalate.accept is Chat's check; stages are judged by "
                      "escalate.quality")
    q = esc.quality
    if q is None:
        errors.append(f"{path}.quality: missing_field: a System One escalation needs escalate.quality")
    elif q.mode == "uncalibrated" and (q.accept is None or q.max_risk is not None):
        errors.append(f"{path}.quality: invalid_value: uncalibrated quality takes accept (and no max_risk)")
    elif q.mode == "calibrated":
        errors.append(f"{path}.quality.mode: invalid_value: calibrated quality (max_risk) needs certified "
                      "evaluation evidence, which this router does not read yet; write mode: uncalibrated")
    return errors


def _named_models(path: str, alg: Algorithm, kind: str, refs: list[str]) -> list[str]:
    """The models an executor's settings name: each must be one of the decision's modelRefs (its candidates)."""
    named: list[tuple[str, str | None]] = []
    if kind == "remom" and alg.remom is not None:
        named.append(("remom.synthesis_model", alg.remom.synthesis_model))
    elif kind == "remom":
        return [f"{path}.remom: missing_field: a remom algorithm needs remom.breadth_schedule"]
    if kind == "fusion" and alg.fusion is not None:
        named.append(("fusion.model", alg.fusion.model))
        named += [(f"fusion.analysis_models[{i}]", m) for i, m in enumerate(alg.fusion.analysis_models)]
    if kind == "workflows" and alg.workflows is not None:
        w = alg.workflows
        if w.mode == "static" and not w.roles:
            return [f"{path}.workflows.roles: missing_field: a static workflow needs its roles"]
        if w.mode == "dynamic" and w.roles:
            return [f"{path}.workflows.roles: invalid_value: a dynamic workflow's planner writes its roles; "
                    "remove them or set mode: static"]
        named.append(("workflows.planner.model", w.planner.model))
        earlier: list[str] = []         # what a role may read: earlier roles and their agents (role:index:model)
        for i, role in enumerate(w.roles):
            for k, entry in enumerate(role.access_list):
                if entry not in earlier:
                    return [f"{path}.workflows.roles[{i}].access_list[{k}]: invalid_value: {entry!r} names no earlier "
                            f"role nor one of its agents ({', '.join(earlier) or 'none'})"]
            earlier += [role.name, *(f"{role.name}:{j}:{m}" for j, m in enumerate(role.models))]
            named += [(f"workflows.roles[{i}].models[{j}]", m) for j, m in enumerate(role.models)]
            if w.min_successful_responses is not None and w.min_successful_responses > len(role.models):
                return [f"{path}.workflows.min_successful_responses: invalid_value: {w.min_successful_responses} "
                        f"exceeds the {len(role.models)} models of roles[{i}]"]
        named.append(("workflows.final.model", w.final.model))
    elif kind == "workflows":
        return [f"{path}.workflows: missing_field: a workflows algorithm needs workflows.roles"]
    return [f"{path}.{where}: unknown_model: {name!r} is not one of the decision's modelRefs"
            for where, name in named if name is not None and name not in refs]
