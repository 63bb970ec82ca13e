"""Load checks of plugin blocks that need the compiled recipes: the rules, presets and deployments a plugin names.

``masking`` names a ``pii`` rule its recipe declares, and takes the pii
preset's labels in ``entity_types`` and ``placeholders`` (spec 5.7).
``tools.select`` asks tool_need (noul) and tool_rank (choice) of its judge's
deployment, or of the decision model: it must exist and answer both. Each
line names the layer that wrote the bad field.
"""
from __future__ import annotations

from collections.abc import Iterator

from ..config.catalog import PRIMARY
from ..config.schema import PluginEntry, RouterConfig
from ..plugins import masking
from ..plugins._merge import merged_fields
from ..plugins.layers import layers as plugin_layers
from ..signals.base import CompileErrors
from ..systemone.presets import PII_LABELS


def _entries(config: RouterConfig, type_: str) -> Iterator[tuple[str, str | None, PluginEntry]]:
    """``(path, recipe, entry)`` of every ``type_`` entry: global (recipe None), recipe, decision."""
    for j, entry in enumerate(config.global_.plugins):
        if entry.type == type_:
            yield f"global.plugins[{j}].configuration", None, entry
    for recipe in config.recipes:
        for j, entry in enumerate(recipe.plugins):
            if entry.type == type_:
                yield f"recipes[{recipe.name}].plugins[{j}].configuration", recipe.name, entry
        for i, decision in enumerate(recipe.decisions):
            for j, entry in enumerate(decision.plugins):
                if entry.type == type_:
                    yield f"recipes[{recipe.name}].decisions[{i}].plugins[{j}].configuration", recipe.name, entry


def check_masking(config: RouterConfig, declares_pii, errors: CompileErrors) -> None:
    """``declares_pii(recipe, name)``: whether the recipe declares that pii rule."""
    for path, _, entry in _entries(config, masking.TYPE):
        raw = entry.configuration
        for i, label in enumerate(raw.get("entity_types") or ()):
            if label not in PII_LABELS:
                errors.add(f"{path}.entity_types[{i}]", "invalid_value",
                           f"{label!r} is not a label of preset pii ({', '.join(PII_LABELS)})")
        for label in raw.get("placeholders") or {}:
            if label not in PII_LABELS:
                errors.add(f"{path}.placeholders.{label}", "invalid_value",
                           f"{label!r} is not a label of preset pii ({', '.join(PII_LABELS)})")
    for recipe in config.recipes:
        for i, decision in enumerate(recipe.decisions):
            values = merged_fields(*plugin_layers(config, recipe, decision.name, masking.TYPE))
            if not values or values.get("enabled") is False:
                continue
            where = f"{_deepest(config, recipe, i, 'signal')}.signal"
            if "signal" not in values:
                errors.add(where, "missing_field", "masking names the pii rule whose detections it masks")
            elif not declares_pii(recipe.name, values["signal"]):
                errors.add(where, "unknown_signal", f"masking names pii rule {values['signal']!r}, which "
                           f"recipes[{recipe.name}].signals.pii does not declare")


def _deepest(config: RouterConfig, recipe, i: int, field: str) -> str:
    """The path of the most specific masking entry over decision ``i`` that sets ``field`` (else any)."""
    layers = [("global.plugins", config.global_.plugins), (f"recipes[{recipe.name}].plugins", recipe.plugins),
              (f"recipes[{recipe.name}].decisions[{i}].plugins", recipe.decisions[i].plugins)]
    found = any_found = None
    for base, entries in layers:
        for j, entry in enumerate(entries):
            if entry.type == masking.TYPE:
                any_found = f"{base}[{j}].configuration"
                if field in entry.configuration:
                    found = any_found
    return found or any_found or f"recipes[{recipe.name}].decisions[{i}].plugins"


def judge_deployments(config: RouterConfig) -> dict[str, str]:
    """Deployment -> the path of a tools.select that asks it (its judge's own, else the decision model)."""
    default = config.global_.model_catalog.system.decision_model.deployment or PRIMARY
    out: dict[str, str] = {}
    for path, _, entry in _entries(config, "tools"):
        select = entry.configuration.get("select")
        if not isinstance(select, dict):
            continue
        match = select.get("match") if isinstance(select.get("match"), dict) else {}
        judge = match.get("judge") if isinstance(match.get("judge"), dict) else {}
        out.setdefault(judge.get("deployment") or default, f"{path}.select")
    return out


def check_tools(config: RouterConfig, table, errors: CompileErrors) -> None:
    for name, path in judge_deployments(config).items():
        if name not in table.deployments:
            errors.add(f"{path}.match.judge.deployment", "unknown_deployment",
                       f"{name!r} is not declared in global.model_catalog.deployments")
            continue
        capable = table.capability(name, errors)
        if capable is None or not capable.known:
            continue
        missing = sorted({"choice", "noul"} - capable.question_types)
        if missing:
            errors.add(f"{path}.match.judge", "question_type_unsupported",
                       f'tool_need and tool_rank ask noul and choice questions; deployment "{name}" '
                       f"does not answer {', '.join(missing)}")


def check(config: RouterConfig, table, errors: CompileErrors) -> None:
    def declares_pii(recipe: str, name: str) -> bool:
        return table.recipes[recipe].learned.declares("pii", name)

    check_masking(config, declares_pii, errors)
    check_tools(config, table, errors)
