"""From a request to a route: entrypoint, recipe, signals, decision, candidate models.

The configuration is compiled once into a ``RoutingTable``: every recipe's
signal families, projections and the set of rules its decisions read. The
load checks that need that compilation (undeclared signals in conditions,
invalid regexes) run here, so ``config validate`` reports them too.
"""
from __future__ import annotations

import difflib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TypeVar

import msgspec
import trio

from ..config.catalog import ModelCatalog
from ..config.schema import ModelRef, ProviderModel, Recipe, RouterConfig, RuleNode
from ..config.signals import CONDITION_TYPES, Projections
from ..decisions import engine
from ..decisions.projections import TYPE as PROJECTION, CompiledProjections
from ..errors import ModelNotFound, NoDecision, RoutingError, echoing
from ..selection import static
from ..signals.base import CanonicalRequest, CompileErrors
from ..systemone.presets import APPLICATION_SIGNALS
from ..systemone.learned import LearnedSignals, compile_learned, fold_parts, outcome_of, why_unknown
from ..systemone.history_windows import fold_history
from ..systemone.states import part_shares
from ..signals.compress import SignalsView
from ..signals.registry import VALUED, Readings, RecipeSignals
from ..systemone import capabilities as caps
from ..systemone.asker import SystemOneAsker
from ..systemone.client import Answered, SystemOneClient
from ..systemone.scan import ScanParams
from ..systemone.views import view_for
from ..plugins import context as context_plugin
from ..plugins import layers as plugin_layers
from ..plugins import response_guard
from .guard import CompiledGuard
from .plugin_checks import judge_deployments

# Condition types of learned signals: the systemone primitive and the application signals.
LEARNED_TYPES = frozenset({"systemone", "domain", "fact_check", "user_feedback", "jailbreak", "safety", "pii",
                           "hallucination", "refusal", "turn_relation", "complexity", "modality"})

# The signals block key -> the condition type that reads its rules (``keywords`` rules are ``type: keyword``).
_TYPE_OF_KEY = {**{key: type_ for type_, key in CONDITION_TYPES.items()},
                **{key: type_ for key, (type_, _) in APPLICATION_SIGNALS.items()}, "systemone": "systemone"}


def not_a_condition_type(type_: str, serves: str = "") -> str | None:
    """What is wrong with ``type_`` when no condition has that type (None when one does), with the type meant:
    the one a signals key declares, else the closest."""
    if type_ in CONDITION_TYPES or type_ in LEARNED_TYPES or type_ == PROJECTION:
        return None
    near = _TYPE_OF_KEY.get(type_) or next(iter(difflib.get_close_matches(
        type_, [*CONDITION_TYPES, *LEARNED_TYPES, PROJECTION], n=1)), None)
    return f"{type_!r} is not a condition type{serves}" + (f"; did you mean {near}?" if near else "")


# Condition types of earlier schemas (spec 5.2, "Removed signal types").
REMOVED_CONDITION_TYPES = {
    "embedding": "a systemone yes/no question quoting the examples",
    "classifier": "a systemone choice question over the classifier's labels",
    "preference": "one systemone choice question among the preferences",
    "kb": "nothing: no v0.5 signal reads a knowledge base",
    "reask": "turn_relation with labels: [reask]",
    "topic_continuity": "turn_relation with labels: [continue, shift]",
    "event": "keywords rules with operator: OR",
    "structure": "keywords rules with a count or density predicate",
    "action": "one systemone choice question, action",
}


# Runs a body-sized step and gives its result: in a worker thread for a big body (``server.pipeline.offload``).
_T = TypeVar("_T")
Runner = Callable[[Callable[[], _T]], Awaitable[_T]]


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes. ``recipe`` is None for a provider model named directly."""

    recipe: str | None
    decision: str | None
    candidates: tuple[ProviderModel, ...]
    fallback: bool = False          # the recipe's fallback, not a decision, chose the models
    readings: Readings | None = None
    chosen: engine.Chosen | None = None


@dataclass
class CompiledRecipe:
    recipe: Recipe
    path: str
    signals: RecipeSignals
    learned: LearnedSignals
    projections: CompiledProjections
    guards: dict[str | None, CompiledGuard] = field(default_factory=dict)   # decision (None: fallback) -> guard
    shrink: SignalsView | None = None       # compress.signals: the compressed text the signals read
    evaluates: bool = field(init=False)

    def __post_init__(self) -> None:
        self.evaluates = self.signals.reads_anything or bool(self.learned.read) or bool(self.projections.scores)

    async def read(self, request: Callable[[], CanonicalRequest], systemone: "SystemOneAsker | None",
                   run: Runner | None = None) -> Readings:
        """Evaluate the heuristics and the System One questions the decisions read, then the projections;
        ``run`` runs the canonical form and the heuristics, which cost in proportion to the request."""
        readings = Readings()
        if self.evaluates:
            def heuristics() -> tuple[CanonicalRequest, CanonicalRequest]:
                built = request()
                view = self.shrink.view(built) if self.shrink is not None else built
                if view is built:
                    self.signals.evaluate(built, readings)
                else:       # compress.signals: its skip_signals read the original
                    self.signals.evaluate(view, readings, skip=self.shrink.skip, original=built)
                return built, view

            canonical, view = heuristics() if run is None else await run(heuristics)
            if self.learned.read and view is canonical:
                await read_learned(self.learned, canonical, readings, systemone)
            elif self.learned.read:     # compress.signals: two reads at once, the skip_signals' of the original
                assert self.shrink is not None
                skip = self.shrink.skip
                async with trio.open_nursery() as nursery:
                    for rules, text in (([r for r in self.learned.read if r.condition_type not in skip], view),
                                        ([r for r in self.learned.read if r.condition_type in skip], canonical)):
                        if rules:
                            nursery.start_soon(read_learned, replace(self.learned, read=rules), text, readings,
                                               systemone)
                if readings.request_text is not None:   # masking indexes the pii rule's spans in the turn as sent
                    readings.request_text, readings.request_parts = canonical.text, canonical.turn_texts
            self.projections.evaluate(readings)
        return readings

    def declares(self, type_: str, name: str) -> bool:
        return self.signals.declares(type_, name) or self.learned.declares(type_, name)


async def read_learned(learned: LearnedSignals, canonical: CanonicalRequest, readings: Readings,
                       systemone: "SystemOneAsker | None") -> Answered | None:
    """Ask the questions of ``learned``'s read rules (one merged call per deployment, long full-coverage inputs
    in windows) and put each rule's outcome in ``readings``; the raw answers, None without a client."""
    asked = learned.asked()
    if systemone is None:
        for rule in learned.read:
            readings.outcomes[(rule.condition_type, rule.name)] = outcome_of(rule, None, "no System One client")
        return None
    started = time.perf_counter_ns()
    readings.request_text = canonical.text
    readings.request_parts = canonical.turn_texts
    scanned = systemone.scanned(asked, canonical)
    # A span rule's earlier turns and tool results, each asked on its own in the same merged call.
    parts = {r.share: part_shares(r.share, canonical) for r in learned.read if r.question_type == "span"}
    asked = {s: q for s, q in asked.items() if s not in scanned}
    for share, shares in parts.items():
        asked.update(dict.fromkeys(shares, learned.questions[share]))
    # The long earlier turns a rule reads whole, in windows, each a state of the same merged call.
    windows = systemone.history_windows(learned.read, canonical) if canonical.history else {}
    for share, plan in windows.items():
        asked.update(dict.fromkeys(plan.windows, learned.questions[share]))
    answers, scans = await systemone.ask_with_scans(asked, scanned, learned.read, canonical)
    readings.timings_us["systemone"] = (time.perf_counter_ns() - started) / 1000
    for rule in learned.read:
        key = (rule.condition_type, rule.name)
        if rule.share in scanned:
            result = scans.get(rule.share)
            rule_scan = result.rules.get(f"{rule.condition_type}:{rule.name}") if result else None
            readings.outcomes[key] = (_apply_on_unknown(rule, rule_scan.outcome()) if rule_scan
                                      else outcome_of(rule, None, "scan did not run"))
            if result is not None:
                coverage = str(rule_scan.coverage if rule_scan else result.coverage)
                readings.coverage[key] = coverage
                # The replay record and the preview read the detail: say how much was read.
                outcome = readings.outcomes[key]
                outcome.detail = f"{outcome.detail or ''}; coverage {coverage}".lstrip("; ")
        else:
            overloaded = rule.share in getattr(answers, "overloaded", ())
            if overloaded:
                readings.overloaded.add(key)
            readings.outcomes[key] = outcome_of(rule, answers.get(rule.share),
                                                "overloaded" if overloaded else why_unknown(answers, rule.share))
        if parts.get(rule.share):
            left = getattr(answers, "overloaded", ())
            if any(p in left for p in parts[rule.share]):
                readings.overloaded.add(key)
            readings.outcomes[key] = fold_parts(readings.outcomes[key], [
                (p.part, outcome_of(rule, answers.get(p), "overloaded" if p in left else why_unknown(answers, p)))
                for p in parts[rule.share]])
        if rule.share in windows:
            if not getattr(answers, "overloaded", frozenset()).isdisjoint(windows[rule.share].windows):
                readings.overloaded.add(key)
            readings.outcomes[key], history_read = fold_history(rule, readings.outcomes[key], windows[rule.share],
                                                                answers)
            systemone.scan_metrics.record_rule(history_read)
    return answers


def _apply_on_unknown(rule, outcome):
    """A scan's unknown, settled by a jailbreak or pii rule's own on_unknown (spec 6.10)."""
    if outcome.matched is None and rule.on_unknown in ("match", "no_match"):
        outcome.matched = rule.on_unknown == "match"
    return outcome


def compile_recipe(recipe: Recipe, catalog: ModelCatalog, capable: Callable, errors: CompileErrors,
                   warnings: list[str], guards: dict | None = None) -> CompiledRecipe:
    """Compile one recipe's signals and projections and check every condition against them.

    ``guards``: decision name (None: the fallback) -> (its response_guard policy, the path of the layer
    that gave its rules); their leaves are checked too, and the request-stage signals they read are asked.
    """
    path = f"recipes[{recipe.name}]"
    signals = RecipeSignals(recipe, path, errors)
    learned = compile_learned(recipe.signals, path, recipe.model_bindings, catalog, capable, errors, warnings)

    def declares(type_: str, name: str) -> bool:
        return signals.declares(type_, name) or learned.declares(type_, name)

    projections = CompiledProjections(recipe.projections, f"{path}.projections", errors, declares,
                                      not_a_condition_type)
    read: list[tuple[str, str]] = list(projections.inputs())
    for i, decision in enumerate(recipe.decisions):
        for leaf_path, leaf in _leaves(decision.rules, f"{path}.decisions[{i}].rules"):
            _check_leaf(leaf, leaf_path, signals, learned, projections, errors)
            if leaf.on_error is not None and decision.rules.on_unknown is not None:
                errors.add(f"{leaf_path}.on_error", "invalid_value",
                           "a condition's on_error cannot be set together with its decision's rules.on_unknown")
            read.append((leaf.type or "", leaf.name or ""))
    compiled_guards = {}
    for decision_name, (policy, guard_path) in (guards or {}).items():
        compiled_guards[decision_name] = _compile_guard(policy, guard_path, signals, learned, projections, errors,
                                                        read)
    signals.mark_read(read)
    learned.mark_read(read)
    return CompiledRecipe(recipe, path, signals, learned, projections, compiled_guards)


def _compile_guard(policy, path: str, signals: RecipeSignals, learned: LearnedSignals,
                   projections: CompiledProjections, errors: CompileErrors, read: list) -> CompiledGuard:
    """A guard's leaves checked like a decision's, response-stage rules allowed; request-stage ones join ``read``."""
    response = {}
    for j, rule in enumerate(policy.rules):
        for leaf_path, leaf in _leaves(rule.when, f"{path}.rules[{j}].when"):
            key = (leaf.type or "", leaf.name or "")
            learned_rule = learned.rule(*key) if key[0] in LEARNED_TYPES else None
            if learned_rule is not None and learned_rule.stage == "response":
                response[key] = learned_rule
                if leaf.label is not None and leaf.label not in learned_rule.options:
                    errors.add(f"{leaf_path}.label", "invalid_value", f"{leaf.label!r} is not an option of "
                               f"{leaf.type} rule {leaf.name!r} ({', '.join(learned_rule.options) or 'none'})")
                continue
            if leaf.on_unknown is not None:
                errors.add(f"{leaf_path}.on_unknown", "invalid_value",
                           "a guard rule's unknown is the guard's on_unknown, not a condition's")
            _check_leaf(leaf, leaf_path, signals, learned, projections, errors)
            read.append(key)
    return CompiledGuard(policy, response)


def recipe_guards(config: RouterConfig, recipe: Recipe) -> dict:
    """Each decision's (and the fallback's) response_guard, with the path of the layer that gave its rules."""
    out = {}
    names = [(i, d.name) for i, d in enumerate(recipe.decisions)] + [(None, None)]
    for i, name in names:
        layers = plugin_layers.layers(config, recipe, name, response_guard.TYPE)
        policy = response_guard.resolve(*layers)
        if policy is None:
            continue
        entries = [("global.plugins", config.global_.plugins), (f"recipes[{recipe.name}].plugins", recipe.plugins)]
        if i is not None:
            entries.append((f"recipes[{recipe.name}].decisions[{i}].plugins", recipe.decisions[i].plugins))
        giver = max(k for k, layer in enumerate(layers) if layer is not None and layer.rules is not msgspec.UNSET)
        where, plugins = entries[giver]
        j = next(j for j, entry in enumerate(plugins) if entry.type == response_guard.TYPE)
        out[name] = (policy, f"{where}[{j}].configuration")
    return out


def _leaves(node: RuleNode, path: str) -> Iterator[tuple[str, RuleNode]]:
    if node.operator is None:
        if node.type and node.name:
            yield path, node
        return
    for i, child in enumerate(node.conditions):
        yield from _leaves(child, f"{path}.conditions[{i}]")


def _check_leaf(leaf: RuleNode, path: str, signals: RecipeSignals, learned: LearnedSignals,
                projections: CompiledProjections, errors: CompileErrors) -> None:
    type_, name = leaf.type or "", leaf.name or ""
    if leaf.on_error is not None and type_ != "systemone":
        errors.add(f"{path}.on_error", "invalid_value", "on_error belongs to systemone conditions")
    if type_ in LEARNED_TYPES:
        _check_learned_leaf(leaf, path, learned, errors)
        return
    if type_ in REMOVED_CONDITION_TYPES:
        errors.add(f"{path}.type", "removed_signal_type",
                   f"{type_!r} conditions were removed; write {REMOVED_CONDITION_TYPES[type_]}")
        return
    if type_ == PROJECTION:
        if not projections.declares(name):
            errors.add(path, "unknown_signal", f"projection {name!r} is not declared in this recipe's projections")
        elif projections.is_score(name) and leaf.predicate() is None:
            errors.add(path, "invalid_value", f"projection score {name!r} is a number: test it with gt/gte/lt/lte/eq")
    elif type_ in CONDITION_TYPES:
        if not signals.declares(type_, name):
            errors.add(path, "unknown_signal",
                       f"{type_} rule {name!r} is not declared in this recipe's signals.{CONDITION_TYPES[type_]}")
    else:
        errors.add(f"{path}.type", "unknown_signal", not_a_condition_type(type_, " this router serves") or "")
        return
    if leaf.label is not None:
        errors.add(f"{path}.label", "invalid_value", f"{type_} conditions have no labels")
    if leaf.predicate() is not None and type_ not in VALUED:
        errors.add(path, "invalid_value", f"{type_} signals publish no number for gt/gte/lt/lte/eq to test")


def _check_learned_leaf(leaf: RuleNode, path: str, learned: LearnedSignals, errors: CompileErrors) -> None:
    rule = learned.rule(leaf.type or "", leaf.name or "")
    if rule is None:
        if not learned.declares(leaf.type or "", leaf.name or ""):   # else refused at load, with its own error
            errors.add(path, "unknown_signal", f"{leaf.type} rule {leaf.name!r} is not declared in this recipe's signals")
        return
    if rule.stage != "request":
        errors.add(path, "invalid_value", f"decisions route before an answer exists; {leaf.type} rule {leaf.name!r} "
                   "reads the response stage")
    if leaf.label is not None and leaf.label not in rule.options:
        errors.add(f"{path}.label", "invalid_value",
                   f"{leaf.label!r} is not an option of {leaf.type} rule {leaf.name!r} ({', '.join(rule.options) or 'none'})")


class RoutingTable:
    """The configuration compiled for lookups on the request path."""

    def __init__(self, config: RouterConfig, errors: CompileErrors | None = None,
                 warnings: list[str] | None = None, attached: dict[str, caps.Capable] | None = None) -> None:
        errors = errors if errors is not None else CompileErrors()
        warnings = warnings if warnings is not None else []
        self.catalog = config.global_.model_catalog
        self.deployments = caps.deployments(self.catalog)
        self.decision_models: dict = {}           # embedded models, built when a rule resolves to them
        # Attached runtimes' capabilities, once their cards were read at start.
        self._capable: dict[str, caps.Capable | None] = dict(attached or {})
        self.config = config
        self.models = {m.name: m for m in config.providers.models}
        self._candidates_of: dict[int, tuple[ProviderModel, ...]] = {}    # id(modelRefs) -> candidates
        self.recipes = {r.name: compile_recipe(r, self.catalog, lambda n: self._capability(n, errors), errors, warnings,
                                               recipe_guards(config, r))
                        for r in config.recipes}
        for r in config.recipes:
            shrink = context_plugin.signals_compression(*plugin_layers.layers(config, r, None, context_plugin.TYPE))
            self.recipes[r.name].shrink = (SignalsView(shrink.profile, shrink.max_tokens, shrink.skip_signals)
                                           if shrink is not None else None)
        self._prepare_models(warnings)
        self.by_name: dict[str, CompiledRecipe] = {}
        self.default: CompiledRecipe | None = None
        self.systemone_by_name: dict[str, CompiledRecipe] = {}
        for ep in config.entrypoints:
            if ep.recipe not in self.recipes:
                continue
            if ep.api == "systemone":
                for name in ep.model_names:
                    self.systemone_by_name[name] = self.recipes[ep.recipe]
                continue
            for name in ep.model_names:
                self.by_name[name] = self.recipes[ep.recipe]
            if ep.default:
                self.default = self.recipes[ep.recipe]
        native = {ep.recipe for ep in config.entrypoints if ep.api == "systemone"}
        chat_recipes = [r for r in config.recipes if r.name not in native]
        if self.default is None and len(chat_recipes) == 1:
            self.default = self.recipes[chat_recipes[0].name]
        self.entrypoint_names = list(self.by_name)
        self.direct_models = config.global_.router.direct_models
        # What a request naming a provider model reads (``direct_models: allow``): the default recipe's
        # rules, for the global plugins that name them (masking, response_guard), and nothing else.
        # With no default recipe, an empty one: a global guard then reads its rules as unknown (its on_unknown)
        # and global masking fails closed, rather than either being skipped.
        self.direct: CompiledRecipe | None = None
        if self.direct_models != "refuse":     # route without a default recipe serves the name as allow does
            base = msgspec.structs.replace(self.default.recipe if self.default is not None else Recipe(name="direct"),
                                           decisions=[], fallback=None, plugins=[], projections=Projections())
            self.direct = compile_recipe(base, self.catalog, lambda n: self._capability(n, CompileErrors()),
                                         CompileErrors(), [], recipe_guards(config, base))

    def _prepare_models(self, warnings: list[str]) -> None:
        """Let each embedded model load what its questions need before the first request (vsr-static's
        named-entity pipeline, for a pii rule that keeps its labels): seconds here, not in a request."""
        asked: dict[str, list] = {}
        for compiled in self.recipes.values():
            for share, question in compiled.learned.questions.items():
                asked.setdefault(share.deployment, []).append(question)
        for name, questions in asked.items():
            prepare = getattr(self.decision_models.get(name), "prepare", None)
            if prepare is None:
                continue
            try:
                prepare(questions)
            except Exception as exc:  # the model still answers; its first requests pay the load, or fail in place
                warnings.append(f"global.model_catalog.deployments.{name}: model_prepare_failed: "
                                f"{type(exc).__name__}: {exc}")

    def _candidates(self, refs: list[ModelRef]) -> tuple[ProviderModel, ...]:
        """A decision's (or fallback's) candidates, built once per modelRefs list of the loaded config."""
        found = self._candidates_of.get(id(refs))
        if found is None:
            found = self._candidates_of[id(refs)] = static.candidate_models(refs, self.models)
        return found

    def capability(self, name: str, errors: CompileErrors) -> caps.Capable | None:
        """What deployment ``name`` answers (building an embedded model once); load problems go to ``errors``."""
        return self._capability(name, errors)

    def _capability(self, name: str, errors: CompileErrors) -> caps.Capable | None:
        if name not in self._capable:
            try:
                self._capable[name] = caps.resolve(name, self.deployments[name], self.decision_models)
            except Exception as exc:  # a model that cannot be built is a load error, whatever broke
                self._capable[name] = None
                errors.add(f"global.model_catalog.deployments.{name}.artifact", "invalid_value",
                           f"cannot load {self.deployments[name].artifact!r}: {type(exc).__name__}: {exc}")
        return self._capable[name]

    def systemone_recipe_for(self, model_name: str | None) -> CompiledRecipe:
        """The recipe of the System One entrypoint a System One request names (or the only one)."""
        if model_name and model_name in self.systemone_by_name:
            return self.systemone_by_name[model_name]
        recipes = list(dict.fromkeys(id(r) for r in self.systemone_by_name.values()))
        if model_name is None and len(recipes) == 1:
            return next(iter(self.systemone_by_name.values()))
        raise echoing(ModelNotFound, "No System One entrypoint serves the model {}", str(model_name), param="model")

    def native_aliases(self) -> dict[str, ProviderModel]:
        return {n: m for n, m in self.models.items() if m.api_format == "systemone"}

    def ensure_model(self, name: str) -> None:
        """Build the embedded model of deployment ``name`` if no rule's load check already did."""
        if name not in self.decision_models:
            self._capability(name, CompileErrors())

    def used_deployments(self) -> dict[str, int]:
        """Deployments some rule or native alias resolves to, with the call timeout their rules ask for (ms)."""
        used: dict[str, int] = {m.deployment: 0 for m in self.native_aliases().values()
                                if m.deployment and m.deployment in self.deployments}
        for compiled in self.recipes.values():
            for rule in compiled.learned.rules.values():
                dep = rule.share.deployment
                own = rule.timeout_ms or self.deployments[dep].timeout_ms or 0
                used[dep] = max(used.get(dep, 0), own)
        for dep in judge_deployments(self.config):     # the tools plugin's tool_need and tool_rank
            if dep in self.deployments:
                used.setdefault(dep, self.deployments[dep].timeout_ms or 0)
        return used

    def asked_by(self) -> dict[str, str]:
        """Each deployment ``used_deployments`` names, with the path of the first rule or judge that asks it."""
        found = {m.deployment: f"providers.models[{n}].deployment" for n, m in self.native_aliases().items()
                 if m.deployment and m.deployment in self.deployments}
        for compiled in self.recipes.values():
            for rule in compiled.learned.rules.values():
                found.setdefault(rule.share.deployment, rule.path)
        for dep, path in judge_deployments(self.config).items():
            if dep in self.deployments:
                found.setdefault(dep, path)
        return found

    def resolved(self, name: str) -> caps.Capable | None:
        """What deployment ``name`` answers, when a rule already resolved it (never builds a model)."""
        return self._capable.get(name)

    def asker(self, client: SystemOneClient, extra_questions: dict | None = None) -> SystemOneAsker:
        """The request stage's System One asker over this table's deployments; ``extra_questions`` (share ->
        wire question) are rules compiled outside the recipes (diagnostics), for their guard scans."""
        used = self.used_deployments()
        views = {name: view_for(self.deployments[name], self._capable.get(name)) for name in used}
        # 0: derived from each request's own deadline (SystemOneAsker.signals_deadline).
        signal_timeout_s = self.catalog.signal_timeout_ms / 1000 or None
        params, parallel = {}, {}
        for name in used:
            dep = self.deployments[name]
            capable = self._capable.get(name)
            params[name] = ScanParams.from_config(dep.scan_window, provider=dep.provider,
                                                  validated_tokens=capable.validated_tokens if capable else None)
            parallel[name] = dep.scan_window.max_parallel
        compiled_all = [*self.recipes.values(), *([self.direct] if self.direct is not None else [])]
        questions = {share: q for compiled in compiled_all for share, q in compiled.learned.questions.items()}
        questions.update(extra_questions or {})
        return SystemOneAsker(client, views, {k: v for k, v in used.items() if v}, signal_timeout_s, params,
                              parallel, questions)

    def guard_for(self, recipe: str | None, decision: str | None) -> CompiledGuard | None:
        """The response_guard of a route: its decision's (None: the fallback's), or for a provider model named
        directly (``recipe`` None) the global one, compiled against the default recipe's rules."""
        compiled = self.recipes.get(recipe) if recipe is not None else self.direct
        return compiled.guards.get(decision) if compiled is not None else None

    def signals_of(self, recipe: str | None) -> CompiledRecipe | None:
        """The compiled recipe whose rules a route's plugins name: its own, or the direct one's."""
        return self.recipes.get(recipe) if recipe is not None else self.direct

    def knows_model(self, model_name: str | None) -> bool:
        """Whether ``model_name`` is a name this configuration serves (an entrypoint's or a provider model's): any
        other is the client's free text, which a default entrypoint routes all the same."""
        return model_name in self.by_name or model_name in self.models or model_name in self.systemone_by_name

    def recipe_for(self, model_name: str) -> CompiledRecipe | None:
        """The recipe serving a public model name, or None when a provider model is named and
        ``global.router.direct_models`` allows it."""
        if model_name in self.models:
            if self.models[model_name].api_format == "systemone":
                raise echoing(RoutingError, "{} is a native System One alias: ask it on /v1/systemone", model_name,
                              param="model")
            if self.direct_models == "refuse":
                names = ", ".join(self.entrypoint_names) or "an entrypoint's model name"
                raise echoing(ModelNotFound, "The model {} is not served by name here "
                              f"(global.router.direct_models: refuse): name {names}", model_name, param="model")
            if self.direct_models == "allow" or self.default is None:
                return None
            return self.default
        recipe = self.by_name.get(model_name) or self.default
        if recipe is None:
            raise echoing(ModelNotFound, "The model {} does not exist", model_name, param="model")
        return recipe

    async def route(self, model_name: str, request: Callable[[], CanonicalRequest],
                    systemone: SystemOneAsker | None = None, run: Runner | None = None) -> Route:
        """Resolve one request; raises RoutingError when nothing can serve it.

        ``request`` builds the canonical request; it is called only when the
        recipe reads a signal, by ``run`` when given (a big body's, off the event loop).
        """
        compiled = self.recipe_for(model_name)
        if compiled is None:
            direct = self.direct
            # The rules the global plugins read (a response_guard's request-stage ones), as a recipe reads them.
            readings = await direct.read(request, systemone, run) if direct is not None and direct.evaluates else None
            return Route(None, None, (self.models[model_name],), readings=readings)
        return await self.route_recipe(compiled, request, systemone, run)

    def held_route(self, recipe: str, decision: str, readings: Readings | None, turns: int) -> Route | None:
        """The route of a decision a session's earlier turn keeps (``retention.ttl_turns``), or None when the
        loaded configuration no longer has it."""
        compiled = self.recipes.get(recipe)
        d = next((d for d in compiled.recipe.decisions if d.name == decision), None) if compiled else None
        if d is None:
            return None
        chosen = engine.Chosen(d, (), f"retained from an earlier turn of the session ({turns} more turns)")
        return Route(recipe, decision, self._candidates(d.modelRefs), readings=readings, chosen=chosen)

    async def route_recipe(self, compiled: CompiledRecipe, request: Callable[[], CanonicalRequest],
                           systemone: SystemOneAsker | None = None, run: Runner | None = None) -> Route:
        """Route through one compiled recipe: its signals, decisions, strategy and fallback."""
        recipe = compiled.recipe
        readings = await compiled.read(request, systemone, run)
        chosen = engine.choose(recipe, readings, LEARNED_TYPES)
        if chosen.decision is not None:
            return Route(recipe.name, chosen.decision.name, self._candidates(chosen.decision.modelRefs),
                         readings=readings, chosen=chosen)
        if recipe.fallback is not None:
            return Route(recipe.name, None, self._candidates(recipe.fallback.modelRefs), fallback=True,
                         readings=readings, chosen=chosen)
        refused = NoDecision(f"No decision of recipe {recipe.name!r} matched and it has no fallback", param="model",
                             recipe=recipe.name)
        refused.unmatched = Route(recipe.name, None, (), readings=readings, chosen=chosen)
        raise refused
