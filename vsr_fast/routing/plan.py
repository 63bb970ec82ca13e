"""From a request's model name to a route: entrypoint, recipe, decision, candidate models."""
from __future__ import annotations

from dataclasses import dataclass

from ..config.schema import ProviderModel, Recipe, RouterConfig
from ..decisions import engine
from ..errors import ModelNotFound, RoutingError
from ..selection import static


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes. ``recipe`` is None for a provider model named directly."""

    recipe: str | None
    decision: str | None
    candidates: tuple[ProviderModel, ...]
    fallback: bool = False          # the recipe's fallback, not a decision, chose the models


class RoutingTable:
    """The configuration compiled for lookups on the request path."""

    def __init__(self, config: RouterConfig) -> None:
        self.models = {m.name: m for m in config.providers.models}
        self.recipes = {r.name: r for r in config.recipes}
        self.by_name: dict[str, Recipe] = {}
        self.default: Recipe | None = None
        for ep in config.entrypoints:
            if ep.api != "chat" or ep.recipe is None:
                continue
            for name in ep.model_names:
                self.by_name[name] = self.recipes[ep.recipe]
            if ep.default:
                self.default = self.recipes[ep.recipe]
        if self.default is None and len(config.recipes) == 1:
            self.default = config.recipes[0]
        self.entrypoint_names = list(self.by_name)

    def recipe_for(self, model_name: str) -> Recipe | None:
        """The recipe serving a public model name, or None when a provider model is named."""
        if model_name in self.models:
            return None
        recipe = self.by_name.get(model_name) or self.default
        if recipe is None:
            raise ModelNotFound(f"The model {model_name!r} does not exist", param="model")
        return recipe

    def route(self, model_name: str, lookup: engine.Lookup = engine.no_signals) -> Route:
        """Resolve one request; raises RoutingError when nothing can serve it."""
        recipe = self.recipe_for(model_name)
        if recipe is None:
            return Route(None, None, (self.models[model_name],))
        chosen = engine.choose(recipe, lookup)
        if chosen.decision is not None:
            names = static.candidates(chosen.decision.modelRefs)
            return Route(recipe.name, chosen.decision.name, tuple(self.models[n] for n in names))
        if recipe.fallback is not None:
            names = static.candidates(recipe.fallback.modelRefs)
            return Route(recipe.name, None, tuple(self.models[n] for n in names), fallback=True)
        raise RoutingError(
            f"No decision of recipe {recipe.name!r} matched and it has no fallback", param="model"
        )
