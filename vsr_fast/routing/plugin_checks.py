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
from ..plugins import context, masking, response_cache
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


def _judges(config: RouterConfig) -> Iterator[tuple[str, str | None, frozenset[str], tuple[str, ...]]]:
    """``(path of the judge block, its own deployment, the question types it asks, the card presets it needs)``
    of every judge: a match judge of tools.select (tool_need and tool_rank), of a semantic response_cache
    (same_request unless it asks a custom question) and of each context source (relevance unless custom), and
    the Looper's (the systemone selector's choice, escalate's answer_check)."""
    for path, _, entry in _entries(config, "tools"):
        select = entry.configuration.get("select")
        if isinstance(select, dict):
            judge = _judge_of(select.get("match"))
            yield f"{path}.select.match.judge", judge.get("deployment"), frozenset({"choice", "noul"}), ()
    for recipe in config.recipes:
        for i, d in enumerate(recipe.decisions):
            alg, path = d.algorithm, f"recipes[{recipe.name}].decisions[{i}].algorithm"
            if alg.type in ("systemone", "decision") and alg.systemone is not None:
                yield f"{path}.systemone", alg.systemone.deployment, frozenset({"choice"}), ()
            elif alg.type in ("systemone", "decision"):
                yield f"{path}.systemone", None, frozenset({"choice"}), ()
            esc = alg.escalate if alg.type == "escalate" else None
            check = esc.accept.systemone if esc is not None and esc.accept is not None else None
            if check is not None:
                yield f"{path}.escalate.accept.systemone", check.deployment, frozenset({"noul"}), ("answer_check",)
    for path, _, entry in _entries(config, response_cache.TYPE):
        conf = entry.configuration
        if conf.get("mode", "exact") == "exact" or conf.get("enabled") is False:
            continue
        semantic = conf.get("semantic") if isinstance(conf.get("semantic"), dict) else {}
        match = semantic.get("match")
        if isinstance(match, dict) and "judge" not in match:
            continue                    # recall alone: no judge to ask
        yield _asked(f"{path}.semantic.match", match)
    for path, _, entry in _entries(config, context.TYPE):
        conf = entry.configuration
        if conf.get("enabled") is False:
            continue
        for i, source in enumerate(conf.get("sources") or ()):
            match = source.get("match") if isinstance(source, dict) else None
            # A rag source without a block runs its default, which judges; memory's default does not.
            if isinstance(match, dict) and "judge" not in match or match is None and source.get("type") != "rag":
                continue
            yield _asked(f"{path}.sources[{i}].match", match)
        compress = conf.get("compress")
        match = compress.get("match") if isinstance(compress, dict) else None
        if isinstance(compress, dict) and not (isinstance(match, dict) and "judge" not in match):
            yield _asked(f"{path}.compress.match", match)      # no block: the default, which judges


def _asked(path: str, match: object) -> tuple[str, str | None, frozenset[str], tuple[str, ...]]:
    """A noul judge's (a preset's) or a custom question's: its path, own deployment and question type."""
    judge = _judge_of(match)
    question = judge.get("question") if isinstance(judge.get("question"), dict) else {}
    return f"{path}.judge", judge.get("deployment"), frozenset({question.get("type", "noul")}), ()


def _judge_of(match: object) -> dict:
    judge = match.get("judge") if isinstance(match, dict) else None
    return judge if isinstance(judge, dict) else {}


def judge_deployments(config: RouterConfig) -> dict[str, str]:
    """Deployment -> the path of a judge that asks it (its own deployment, else the decision model)."""
    default = config.global_.model_catalog.system.decision_model.deployment or PRIMARY
    out: dict[str, str] = {}
    for path, own, _, _ in _judges(config):
        out.setdefault(own or default, path)
    return out


def check_judges(config: RouterConfig, table, errors: CompileErrors) -> None:
    """Each match judge's deployment exists and answers the question types the judge asks, and the presets it
    needs: a preset its card says it does not answer is refused in place, every time, so the load fails (spec 5.2)."""
    default = config.global_.model_catalog.system.decision_model.deployment or PRIMARY
    for path, own, types, presets in _judges(config):
        name = own or default
        if name not in table.deployments:
            errors.add(f"{path}.deployment", "unknown_deployment",
                       f"{name!r} is not declared in global.model_catalog.deployments")
            continue
        capable = table.capability(name, errors)
        if capable is None or not capable.known:
            continue
        missing = sorted(types - capable.question_types)
        if missing:
            asks = ("tool_need and tool_rank ask noul and choice questions" if path.endswith("select.match.judge")
                    else f"the judge asks {' and '.join(sorted(types))} questions")
            errors.add(path, "question_type_unsupported",
                       f'{asks}; deployment "{name}" does not answer {", ".join(missing)}')
            continue
        for preset in presets:
            if capable.presets is not None and preset not in capable.presets:
                errors.add(path, "question_type_unsupported",
                           f"deployment {name!r} ({capable.model or capable.kind}) does not answer preset {preset}, "
                           "as its card says; no answer could pass the check: set its deployment to one that answers it")


def check_document(config: RouterConfig, errors: CompileErrors) -> None:
    """The checks that read the document alone: run when the routing table is not whole (a routing error), so
    one run still reports them."""
    declared = {r.name: {rule.name for rule in r.signals.pii} for r in config.recipes}
    check_masking(config, lambda recipe, name: name in declared.get(recipe, ()), errors)


def check(config: RouterConfig, table, errors: CompileErrors) -> None:
    def declares_pii(recipe: str, name: str) -> bool:
        return table.recipes[recipe].learned.declares("pii", name)

    check_masking(config, declares_pii, errors)
    check_judges(config, table, errors)
