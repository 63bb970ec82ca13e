"""From a request to a route: entrypoint, recipe, signals, decision, candidate models.

The configuration is compiled once into a ``RoutingTable``: every recipe's
signal families, projections and the set of rules its decisions read. The
load checks that need that compilation (undeclared signals in conditions,
invalid regexes) run here, so ``config validate`` reports them too.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..config.schema import ProviderModel, Recipe, RouterConfig, RuleNode
from ..config.signals import CONDITION_TYPES
from ..decisions import engine
from ..decisions.projections import TYPE as PROJECTION, CompiledProjections
from ..errors import ModelNotFound, RoutingError
from ..selection import static
from ..signals.base import CanonicalRequest, CompileErrors
from ..signals.registry import VALUED, Readings, RecipeSignals

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


class NoDecision(RoutingError):
    code = "no_decision_matched"


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
    projections: CompiledProjections
    evaluates: bool = field(init=False)

    def __post_init__(self) -> None:
        self.evaluates = self.signals.reads_anything or bool(self.projections.scores)

    def read(self, request: Callable[[], CanonicalRequest]) -> Readings:
        """Evaluate the signals the decisions read, then the projections."""
        readings = Readings()
        if self.evaluates:
            self.signals.evaluate(request(), readings)
            self.projections.evaluate(readings)
        return readings


def compile_recipe(recipe: Recipe, errors: CompileErrors) -> CompiledRecipe:
    """Compile one recipe's signals and projections and check every condition against them."""
    path = f"recipes[{recipe.name}]"
    signals = RecipeSignals(recipe, path, errors)
    projections = CompiledProjections(recipe.projections, f"{path}.projections", errors, signals.declares)
    read: list[tuple[str, str]] = list(projections.inputs())
    for i, decision in enumerate(recipe.decisions):
        for leaf_path, leaf in _leaves(decision.rules, f"{path}.decisions[{i}].rules"):
            _check_leaf(leaf, leaf_path, signals, projections, errors)
            read.append((leaf.type or "", leaf.name or ""))
    signals.mark_read(read)
    return CompiledRecipe(recipe, path, signals, projections)


def _leaves(node: RuleNode, path: str) -> Iterator[tuple[str, RuleNode]]:
    if node.operator is None:
        if node.type and node.name:
            yield path, node
        return
    for i, child in enumerate(node.conditions):
        yield from _leaves(child, f"{path}.conditions[{i}]")


def _check_leaf(leaf: RuleNode, path: str, signals: RecipeSignals, projections: CompiledProjections,
                errors: CompileErrors) -> None:
    type_, name = leaf.type or "", leaf.name or ""
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
        errors.add(f"{path}.type", "unknown_signal", f"{type_!r} is not a condition type this router serves")
        return
    if leaf.label is not None:
        errors.add(f"{path}.label", "invalid_value", f"{type_} conditions have no labels")
    if leaf.predicate() is not None and type_ not in VALUED:
        errors.add(path, "invalid_value", f"{type_} signals publish no number for gt/gte/lt/lte/eq to test")


class RoutingTable:
    """The configuration compiled for lookups on the request path."""

    def __init__(self, config: RouterConfig, errors: CompileErrors | None = None) -> None:
        errors = errors if errors is not None else CompileErrors()
        self.models = {m.name: m for m in config.providers.models}
        self.recipes = {r.name: compile_recipe(r, errors) for r in config.recipes}
        self.by_name: dict[str, CompiledRecipe] = {}
        self.default: CompiledRecipe | None = None
        for ep in config.entrypoints:
            if ep.api != "chat" or ep.recipe not in self.recipes:
                continue
            for name in ep.model_names:
                self.by_name[name] = self.recipes[ep.recipe]
            if ep.default:
                self.default = self.recipes[ep.recipe]
        if self.default is None and len(config.recipes) == 1:
            self.default = self.recipes[config.recipes[0].name]
        self.entrypoint_names = list(self.by_name)

    def recipe_for(self, model_name: str) -> CompiledRecipe | None:
        """The recipe serving a public model name, or None when a provider model is named."""
        if model_name in self.models:
            return None
        recipe = self.by_name.get(model_name) or self.default
        if recipe is None:
            raise ModelNotFound(f"The model {model_name!r} does not exist", param="model")
        return recipe

    def route(self, model_name: str, request: Callable[[], CanonicalRequest]) -> Route:
        """Resolve one request; raises RoutingError when nothing can serve it.

        ``request`` builds the canonical request; it is called only when the
        recipe reads a signal.
        """
        compiled = self.recipe_for(model_name)
        if compiled is None:
            return Route(None, None, (self.models[model_name],))
        recipe = compiled.recipe
        readings = compiled.read(request)
        try:
            chosen = engine.choose(recipe, readings)
        except RoutingError as exc:
            exc.recipe = recipe.name
            raise
        if chosen.decision is not None:
            names = static.candidates(chosen.decision.modelRefs)
            return Route(recipe.name, chosen.decision.name, tuple(self.models[n] for n in names),
                         readings=readings, chosen=chosen)
        if recipe.fallback is not None:
            names = static.candidates(recipe.fallback.modelRefs)
            return Route(recipe.name, None, tuple(self.models[n] for n in names), fallback=True,
                         readings=readings, chosen=chosen)
        exc = NoDecision(f"No decision of recipe {recipe.name!r} matched and it has no fallback", param="model")
        exc.recipe = recipe.name
        raise exc
