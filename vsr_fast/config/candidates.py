"""What a decision asks of its candidates and of the session's later turns, checked at load: escalate's
``order: size`` over each candidate's ``param_size`` (spec 5.6, 6.6), the recipe's ``candidate_requirements``
(6.3), and each decision's ``retention`` (5.7)."""
from __future__ import annotations

import re

from .schema import ModelRef, ProviderModel, Recipe, RouterConfig

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMBT])(?:\s*-\s*A\d+(?:\.\d+)?\s*[KMBT]?)?\s*$", re.IGNORECASE)
_UNIT = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def parameter_count(param_size: str) -> float | None:
    """A model's parameter count from its ``param_size`` ("8B", "0.5B", "350M"; a mixture of experts'
    "35B-A3B" is its total, 35B), or None when the text is no count."""
    m = _SIZE.match(param_size)
    return float(m.group(1)) * _UNIT[m.group(2).upper()] if m else None


def check_candidates(config: RouterConfig, errors: list[str], warnings: list[str]) -> None:
    models = {m.name: m for m in config.providers.models}
    for m in config.providers.models:
        if m.param_size is not None and parameter_count(m.param_size) is None:
            errors.append(f"providers.models[{m.name}].param_size: invalid_value: {m.param_size!r} is not a "
                          "parameter count (a number and K, M, B or T: 8B, 0.5B, 35B-A3B)")
    for recipe in config.recipes:
        _requirements(recipe, models, errors)
        for i, d in enumerate(recipe.decisions):
            path = f"recipes[{recipe.name}].decisions[{i}]"
            esc = d.algorithm.escalate
            if d.algorithm.type == "escalate" and esc is not None and esc.order == "size":
                errors += _unsized(f"{path}.algorithm.escalate.order", d.modelRefs, models)
            r = d.retention
            if r is None:
                continue
            if r.drop and r.ttl_turns:
                errors.append(f"{path}.retention: invalid_value: drop: true keeps nothing of the turn, so "
                              f"ttl_turns: {r.ttl_turns} has nothing to keep; write one of them")
            if not (r.drop or r.ttl_turns or r.keep_current_model or r.prefer_prefix_retention):
                warnings.append(f"{path}.retention: ineffective_retention: the block keeps and drops nothing; set "
                                "drop, ttl_turns, keep_current_model or prefer_prefix_retention")


def _unsized(path: str, refs: list[ModelRef], models: dict[str, ProviderModel]) -> list[str]:
    return [f"{path}: missing_field: order: size reads each candidate's param_size, and providers.models[{name}] "
            "has none; write its parameter count (param_size: 8B, or 35B-A3B for a mixture of experts)"
            for name in dict.fromkeys(r.model for r in refs)
            if name in models and models[name].param_size is None]


def _requirements(recipe: Recipe, models: dict[str, ProviderModel], errors: list[str]) -> None:
    """Every candidate of the recipe (each decision's modelRefs, the fallback's) declares what it asks."""
    need = recipe.candidate_requirements
    if need is None or not need.capabilities:
        return
    lists = [(f"recipes[{recipe.name}].decisions[{i}]", d.modelRefs) for i, d in enumerate(recipe.decisions)]
    if recipe.fallback is not None:
        lists.append((f"recipes[{recipe.name}].fallback", recipe.fallback.modelRefs))
    for path, refs in lists:
        for j, ref in enumerate(refs):
            model = models.get(ref.model)
            if model is None:
                continue
            for cap in need.capabilities:
                if cap not in model.capabilities:
                    errors.append(f"{path}.modelRefs[{j}]: candidate_requirement_unmet: model {ref.model!r} does "
                                  f"not declare the {cap} capability recipes[{recipe.name}].candidate_requirements "
                                  "asks of every candidate")
