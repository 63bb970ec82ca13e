"""Plugin entries: each ``{type, configuration}`` checked against its type's block, layers merged (spec 6.5)."""
from __future__ import annotations

from functools import lru_cache

import msgspec

from ..config.schema import PluginEntry, Recipe, RouterConfig
from ..config.shape import collect_shape_problems
from . import router_replay as _replay
from .table import CONFIGURATIONS, PLUGINS, REMOVED_PLUGIN_TYPES


def check_plugins(config: RouterConfig, bad: list[PluginEntry] | None = None) -> list[str]:
    """Every plugin entry's configuration against its type, and the replay checks across layers.

    ``bad`` collects the entries that failed on their own, so a caller can check the rest without them.
    """
    errors: list[str] = []
    failed = bad if bad is not None else []
    layers = [("global.plugins", config.global_.plugins)]
    for recipe in config.recipes:
        layers.append((f"recipes[{recipe.name}].plugins", recipe.plugins))
        for i, decision in enumerate(recipe.decisions):
            layers.append((f"recipes[{recipe.name}].decisions[{i}].plugins", decision.plugins))
    for path, entries in layers:
        for j, entry in enumerate(entries):
            if entry.type in REMOVED_PLUGIN_TYPES:
                errors.append(f"{path}[{j}].type: removed_plugin_type: {entry.type} was removed; write "
                              f"{REMOVED_PLUGIN_TYPES[entry.type]}")
                failed.append(entry)
                continue
            if entry.type not in CONFIGURATIONS:
                errors.append(f"{path}[{j}].type: invalid_value: plugin type {entry.type!r} is not served "
                              f"(served: {', '.join(sorted(CONFIGURATIONS))})")
                failed.append(entry)
                continue
            own_check = PLUGINS[entry.type].check
            if own_check is not None:
                early = own_check(entry.configuration, f"{path}[{j}].configuration")
                if early:
                    errors += early
                    failed.append(entry)
                    continue
            problems = collect_shape_problems(entry.configuration, CONFIGURATIONS[entry.type], [],
                                              entry.configuration)
            for _, line in problems:
                errors.append(f"{path}[{j}].configuration.{line}" if not line.startswith("(document)")
                              else f"{path}[{j}].configuration{line[len('(document)'):]}")
            if problems:
                failed.append(entry)
    if errors:
        return errors   # the layers below need every configuration to decode
    models = [m.name for m in config.providers.models]
    for recipe in config.recipes:
        for i, decision in enumerate(recipe.decisions):
            stack = [("global.plugins[router_replay].configuration", layer_of(config.global_.plugins, "router_replay")),
                     (f"recipes[{recipe.name}].plugins[router_replay].configuration", layer_of(recipe.plugins, "router_replay")),
                     (f"recipes[{recipe.name}].decisions[{i}].plugins[router_replay].configuration",
                      layer_of(decision.plugins, "router_replay"))]
            for line in _replay.check(stack, models):
                if line not in errors:
                    errors.append(line)
    return errors


def layer_of(entries: list[PluginEntry], type_: str):
    """The typed configuration of ``type_`` at one layer, or None when the layer has no such entry."""
    for entry in entries:
        if entry.type == type_:
            return _convert(type_, msgspec.json.encode(entry.configuration))
    return None


@lru_cache(maxsize=4096)
def _convert(type_: str, encoded: bytes):
    return msgspec.json.decode(encoded, type=CONFIGURATIONS[type_])


def layers(config: RouterConfig, recipe: Recipe | None, decision_name: str | None, type_: str) -> list:
    """The configurations of ``type_``, lowest first: global, recipe, decision (spec 6.5)."""
    out = [layer_of(config.global_.plugins, type_)]
    if recipe is not None:
        out.append(layer_of(recipe.plugins, type_))
        decision = next((d for d in recipe.decisions if d.name == decision_name), None)
        if decision is not None:
            out.append(layer_of(decision.plugins, type_))
    return out


def _entries(config: RouterConfig):
    return (entry for _, entry in config.plugin_entries())


def types_used(config: RouterConfig) -> set[str]:
    """The plugin types some layer configures (enabled or not: a layer may enable what another disables)."""
    return {entry.type for entry in _entries(config)}


def shadow_used(config: RouterConfig) -> bool:
    """Whether any router_replay layer names a shadow model."""
    return any(entry.type == "router_replay" and entry.configuration.get("shadow") for entry in _entries(config))
