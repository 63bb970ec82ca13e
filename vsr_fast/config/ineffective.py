"""Load warnings for settings that load but can never take effect: a plugin type given twice in one layer (only
the first is read), a model listed twice in one modelRefs (a candidate once), a fast_response with nothing to
say, a tools policy ``filtered`` with no ``allow_tools`` (it removes every tool), a predicate over a
probability that no probability can meet, a vLLM ``reasoning_family`` on a model that gets no reasoning field,
a masking ``entity_types`` label that its pii rule's ``ignore_labels`` drops (the rule never reports one to mask),
and a context ``compress`` whose ``budget.max_tokens: auto`` has no ``context_window_size`` to read for a
candidate.

Each warning is one ``<path>: <code>: <message>`` line, like the load errors; the file still loads.
"""
from __future__ import annotations

from collections.abc import Iterator

from .application import Signals
from .bindings import APPLICATION_TYPES
from .schema import ModelRef, PluginEntry, RouterConfig, RuleNode
from .signals import Predicate

# Condition types whose value is a probability, 0 to 1 (a systemone score question's is its expected level),
# and the signals field that declares their rules.
_PROBABILITY_FIELDS = {"systemone": "systemone", **APPLICATION_TYPES}


def check_ineffective(config: RouterConfig, warnings: list[str]) -> None:
    native = {ep.recipe for ep in config.entrypoints if ep.api == "systemone"}
    windows = {m.name: m.context_window_size for m in config.providers.models}
    found: list[Iterator[str]] = [_layer_warnings(path, entries) for path, entries in _layers(config)]
    found.append(_unread_families(config))
    for recipe in config.recipes:
        base = f"recipes[{recipe.name}]"
        inherited = [("global.plugins", config.global_.plugins), (f"{base}.plugins", recipe.plugins)]
        found.append(_rule_predicates(recipe.signals, f"{base}.signals"))
        for i, decision in enumerate(recipe.decisions):
            where = f"{base}.decisions[{i}]"
            # A System One entrypoint's decision keeps only its own plugins.
            stack = ([] if recipe.name in native else inherited) + [(f"{where}.plugins", decision.plugins)]
            found += [_twice(decision.modelRefs, where), _tools_filtered(stack),
                      _leaf_predicates(recipe.signals, decision.rules, f"{where}.rules"),
                      _masked_ignored(stack, recipe.signals), _no_window(stack, decision.modelRefs, windows)]
        if recipe.fallback is not None:
            found += [_twice(recipe.fallback.modelRefs, f"{base}.fallback"), _tools_filtered(inherited),
                      _no_window(inherited, recipe.fallback.modelRefs, windows)]
    # A layer's warning is found once for each decision it covers: it is said once.
    warnings += dict.fromkeys(line for lines in found for line in lines)


def _layers(config: RouterConfig) -> Iterator[tuple[str, list[PluginEntry]]]:
    yield "global.plugins", config.global_.plugins
    for recipe in config.recipes:
        yield f"recipes[{recipe.name}].plugins", recipe.plugins
        for i, decision in enumerate(recipe.decisions):
            yield f"recipes[{recipe.name}].decisions[{i}].plugins", decision.plugins


def _layer_warnings(path: str, entries: list[PluginEntry]) -> Iterator[str]:
    first: dict[str, int] = {}
    for j, entry in enumerate(entries):
        if entry.type in first:
            yield (f"{path}[{j}].type: duplicate_plugin: a layer reads one {entry.type} entry, the first "
                   f"([{first[entry.type]}]); this one is never applied: merge the two")
            continue
        first[entry.type] = j
        message = entry.configuration.get("message")
        if entry.type == "fast_response" and isinstance(message, str) and not message.strip():
            yield (f"{path}[{j}].configuration.message: empty_message: the fast_response answers every request "
                   "it takes with an empty message")


def _read_entries(stack: list[tuple[str, list[PluginEntry]]], type_: str) -> Iterator[tuple[str, int, dict]]:
    """``(layer path, index, configuration)`` of the entry of ``type_`` each layer reads (its first), lowest first."""
    for path, entries in stack:
        j, entry = next(((j, e) for j, e in enumerate(entries) if e.type == type_), (None, None))
        if entry is not None and j is not None:
            yield path, j, entry.configuration


def _tools_filtered(stack: list[tuple[str, list[PluginEntry]]]) -> Iterator[str]:
    """A merged tools policy (lowest layer first) ``filtered`` with no allow_tools, named at the layer that set
    the mode."""
    enabled, mode, allow, where = None, None, None, ""
    for path, j, conf in _read_entries(stack, "tools"):
        enabled = conf.get("enabled", enabled)
        policy = conf.get("policy") if isinstance(conf.get("policy"), dict) else {}
        if "mode" in policy:
            mode, where = policy["mode"], f"{path}[{j}].configuration.policy.mode"
        allow = policy.get("allow_tools", allow)
    if enabled is not False and mode == "filtered" and not allow:
        yield (f"{where}: empty_allow_tools: mode filtered keeps only the allow_tools, and none is listed: "
               "every tool is removed (list allow_tools, or write mode: none to mean it)")


def _masked_ignored(stack: list[tuple[str, list[PluginEntry]]], signals: Signals) -> Iterator[str]:
    """Each label of a merged masking ``entity_types`` (lowest layer first) that its pii rule ignores, named at
    the layer that wrote the list: the rule never reports such a span, so masking never masks one."""
    enabled, signal, labels, where = None, None, None, ""
    for path, j, conf in _read_entries(stack, "masking"):
        enabled, signal = conf.get("enabled", enabled), conf.get("signal", signal)
        if isinstance(conf.get("entity_types"), list):
            labels, where = conf["entity_types"], f"{path}[{j}].configuration.entity_types"
    rule = next((r for r in signals.pii if r.name == signal), None)
    if enabled is False or rule is None or not labels:
        return
    for i, label in enumerate(labels):
        if label in rule.ignore_labels:
            yield (f"{where}[{i}]: masked_label_ignored: pii rule {signal!r} ignores {label} (ignore_labels), so "
                   f"it never reports one and masking never masks it: remove {label} from the rule's "
                   "ignore_labels to mask it, or from entity_types")


def _no_window(stack: list[tuple[str, list[PluginEntry]]], refs: list[ModelRef],
               windows: dict[str, int | None]) -> Iterator[str]:
    """A merged context ``compress`` (lowest layer first) whose budget is ``max_tokens: auto``, named at the
    layer that wrote the compress block, for each candidate with no context_window_size to read it from."""
    enabled, compress, where = None, None, ""
    for path, j, conf in _read_entries(stack, "context"):
        enabled = conf.get("enabled", enabled)
        if "compress" in conf:
            compress, where = conf["compress"], f"{path}[{j}].configuration.compress"
    if enabled is False or not isinstance(compress, dict):
        return
    budget = compress.get("budget") if isinstance(compress.get("budget"), dict) else {}
    if budget.get("max_tokens", "auto") != "auto":
        return
    for ref in refs:
        if ref.model in windows and windows[ref.model] is None:
            yield (f"{where}.budget.max_tokens: no_context_window: a compress block with max_tokens auto has no "
                   f"window to read for model {ref.model!r}: requests to it are not brought under a budget (set "
                   f"providers.models[{ref.model}].context_window_size, or budget.max_tokens)")


def _unread_families(config: RouterConfig) -> Iterator[str]:
    for m in config.providers.models:
        where = f"providers.models[{m.name}].reasoning_family"
        if m.reasoning_family != "chat_template_kwargs":
            continue
        if m.api_format != "openai":
            yield (f"{where}: family_not_read: only an openai-format model takes chat_template_kwargs; a "
                   f"{m.api_format}-format model's reasoning is written in its API's own fields")
        elif not m.reasons:
            yield (f"{where}: family_not_read: the model does not declare capabilities: [reasoning], so it gets no "
                   "reasoning field, chat_template_kwargs included; declare it if the model reasons")


def _twice(refs: list[ModelRef], base: str) -> Iterator[str]:
    first: dict[str, int] = {}
    for j, ref in enumerate(refs):
        if ref.model in first:
            yield (f"{base}.modelRefs[{j}].model: duplicate_model: {ref.model!r} is already modelRefs"
                   f"[{first[ref.model]}]; a model is a candidate once, so this ref (its weight, lora_name, "
                   "use_reasoning) is never used")
        else:
            first[ref.model] = j


def _range(signals: Signals, type_: str, name: str) -> tuple[float, float | None] | None:
    """The values a rule of ``type_`` publishes, (low, high; None: unbounded), or None when it is not one of the
    probability types or the rule is not declared (the compile step reports that)."""
    field = _PROBABILITY_FIELDS.get(type_)
    rule = next((r for r in getattr(signals, field) if r.name == name), None) if field else None
    if rule is None:
        return None
    question = getattr(rule, "question", None)
    if question is not None and question.type == "score":
        return 0.0, (len(question.criteria) - 1.0) if question.criteria else None
    return 0.0, 1.0


def _never_holds(p: Predicate, low: float, high: float | None) -> bool:
    """Whether no value in [low, high] satisfies every bound of ``p``."""
    lo, lo_open, hi, hi_open = low, False, high, False
    for bound, is_open in ((p.gte, False), (p.gt, True)):
        if bound is not None and (bound > lo or (bound == lo and is_open)):
            lo, lo_open = bound, is_open
    for bound, is_open in ((p.lte, False), (p.lt, True)):
        if bound is not None and (hi is None or bound < hi or (bound == hi and is_open)):
            hi, hi_open = bound, is_open
    if p.eq is not None:
        return not p.holds(p.eq) or p.eq < low or (high is not None and p.eq > high)
    return hi is not None and (lo > hi or (lo == hi and (lo_open or hi_open)))


def _what(low: float, high: float | None) -> str:
    if (low, high) == (0.0, 1.0):
        return "a probability, 0 to 1"
    return f"a score from {low:g}" + (f" to {high:g}" if high is not None else "")


def _bounds(p: Predicate) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in (("gt", p.gt), ("gte", p.gte), ("lt", p.lt), ("lte", p.lte),
                                                 ("eq", p.eq)) if v is not None)


def _rule_predicates(signals: Signals, base: str) -> Iterator[str]:
    for type_, field in _PROBABILITY_FIELDS.items():
        for rule in getattr(signals, field):
            p = getattr(rule, "predicate", None)
            span = _range(signals, type_, rule.name)
            if p is not None and span is not None and not p.is_empty() and _never_holds(p, *span):
                yield (f"{base}.{field}[{rule.name}].predicate: never_matches: {_bounds(p)} over {_what(*span)}: "
                       "the rule can never match")


def _leaf_predicates(signals: Signals, node: RuleNode, path: str) -> Iterator[str]:
    if node.operator is not None:
        for k, child in enumerate(node.conditions):
            yield from _leaf_predicates(signals, child, f"{path}.conditions[{k}]")
        return
    p = node.predicate()
    span = _range(signals, node.type or "", node.name or "") if p is not None else None
    if p is not None and span is not None and _never_holds(p, *span):
        yield (f"{path}: never_matches: {node.type} condition {node.name!r} tests {_what(*span)} with "
               f"{_bounds(p)}: it can never hold")


__all__ = ["check_ineffective"]
