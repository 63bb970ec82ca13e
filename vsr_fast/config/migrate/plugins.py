"""Removed plugin types and fields to v0.5's eleven plugins (spec 5.7, 8).

``tool_selection`` becomes ``tools.select``, ``shadow_dispatch``
``router_replay.shadow``, the cache aliases ``response_cache``, rag, memory
and context_compression a ``context`` plugin, response_jailbreak and
hallucination a ``response_guard`` over a response-stage rule it adds to the
recipe; ``system_prompt`` mode append becomes replace. ``image_gen`` has no
rewrite: it is dropped with what to write instead.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .notes import Notes

CACHE_ALIASES = ("semantic-cache", "semantic_cache", "response-cache")
AddSignal = Callable[[str, dict], None]


def rewrite_plugins(entries: Any, path: str, notes: Notes, add_signal: AddSignal,
                    unanswered: frozenset[str] = frozenset()) -> list:
    """The v0.5 plugin list of one layer; ``add_signal`` declares a rule a rewritten guard reads, unless its preset
    is ``unanswered`` by the router's decision models (``Target.unanswered``)."""
    out: list[dict] = []
    for j, entry in enumerate(entries or []):
        if not isinstance(entry, dict):
            continue
        where = f"{path}[{j}]"
        new = _rewrite(entry.get("type"), dict(entry.get("configuration") or {}), where, notes, add_signal,
                       unanswered)
        if new is None:
            continue
        if any(e["type"] == new["type"] for e in out):
            notes.review(where, f"a second {new['type']} plugin at this layer was merged into the first")
            first = next(e for e in out if e["type"] == new["type"])
            first["configuration"] = {**new["configuration"], **first["configuration"]}
            continue
        out.append(new)
    return out


def _entry(type_: str, conf: dict) -> dict:
    return {"type": type_, "configuration": conf}


def _rewrite(type_: Any, conf: dict, path: str, notes: Notes, add_signal: AddSignal,
             unanswered: frozenset[str] = frozenset()) -> dict | None:
    if type_ in CACHE_ALIASES:
        notes.rewrite(f"{path}.type", f"plugin {type_} is response_cache")
        type_ = "response_cache"
    if type_ == "response_cache":
        return _entry(type_, _cache(conf, f"{path}.configuration", notes))
    if type_ == "system_prompt" and conf.get("mode") == "append":
        conf["mode"] = "replace"
        notes.rewrite(f"{path}.configuration.mode", "mode append became replace, which is what append did")
    if type_ == "tools":
        return _entry(type_, _tools(conf, f"{path}.configuration", notes))
    if type_ == "tool_selection":
        notes.rewrite(f"{path}.type", "tool_selection became tools with select")
        return _entry("tools", _tool_selection(conf, f"{path}.configuration", notes))
    if type_ == "shadow_dispatch":
        notes.rewrite(f"{path}.type", "shadow_dispatch became router_replay with shadow")
        shadow = {k: conf[k] for k in ("model", "sample_rate", "max_concurrency", "timeout_seconds") if k in conf}
        return _entry("router_replay", {"enabled": conf.get("enabled", True), "shadow": shadow})
    if type_ in ("rag", "memory", "context_compression"):
        return _entry("context", _context(type_, conf, f"{path}.configuration", notes))
    if type_ == "response_jailbreak":
        add_signal("jailbreak", {"name": "response_jailbreak", "stage": "response",
                                 "predicate": {"gte": conf.get("threshold", 0.5)}})
        notes.review(path, "response_jailbreak became a response_guard over the jailbreak rule response_jailbreak "
                           "(stage: response), added to the recipe; its threshold is the rule's predicate to re-fit")
        return _entry("response_guard", _guard("jailbreak", "response_jailbreak", conf))
    if type_ == "hallucination" and "hallucination" in unanswered:
        notes.drop(path, "the hallucination plugin has no rewrite that loads here: this router's decision models do "
                         "not answer the hallucination preset (a rule reading it fails to load, spec 5.2). To restore "
                         "it, bind hallucination to a deployment that answers it (global.model_catalog.bindings."
                         "hallucination) and add a response_guard over a hallucination rule")
        return None
    if type_ == "hallucination":
        add_signal("hallucination", {"name": "hallucination"})
        notes.review(path, "the hallucination plugin became a response_guard over the hallucination rule "
                           "hallucination, added to the recipe; NLI settings were dropped")
        return _entry("response_guard", _guard("hallucination", "hallucination", conf))
    if type_ == "image_gen":
        notes.drop(path, "image_gen has no rewrite: declare the decision's output {kind: image} and route it to a "
                         "providers.models[] entry with api_format: images (spec 5.8)")
        return None
    if type_ in ("jailbreak", "pii"):
        notes.drop(path, f"the {type_} plugin ran a classifier of its own; write a {type_} signal rule in the "
                         "decision's rules" + (" and masking to redact" if type_ == "pii" else ""))
        return None
    return _entry(str(type_), conf)


def _guard(signal_type: str, name: str, conf: dict) -> dict:
    action = "block" if conf.get("action") == "block" or conf.get("hallucination_action") == "block" else "annotate"
    rule: dict[str, Any] = {"when": {"type": signal_type, "name": name}, "action": action}
    if conf.get("include_hallucination_details"):
        rule["details"] = True
    return {"enabled": conf.get("enabled", True), "rules": [rule]}


def _cache(conf: dict, path: str, notes: Notes) -> dict:
    out = {k: v for k, v in conf.items() if k != "similarity_threshold"}
    if "similarity_threshold" in conf:
        out.setdefault("mode", "semantic")
        out["semantic"] = {"match": {"recall": {"method": "embedding", "top_k": 3,
                                                "min_similarity": conf["similarity_threshold"]},
                                     "judge": {"preset": "same_request", "min_score": 0.8}}}
        notes.review(f"{path}.similarity_threshold", "similarity_threshold became semantic.match.recall."
                                                     "min_similarity; the same_request judge now confirms each hit")
    return out


def _tools(conf: dict, path: str, notes: Notes) -> dict:
    policy_keys = ("mode", "allow_tools", "block_tools", "strip_tool_history")
    if not any(k in conf for k in policy_keys):
        return conf
    out = {k: v for k, v in conf.items() if k not in policy_keys and k != "semantic_selection"}
    out["policy"] = {k: conf[k] for k in policy_keys if k in conf}
    notes.rewrite(path, "the flat tool policy fields moved under tools.policy")
    if conf.get("semantic_selection"):
        out["select"] = {"mode": "filter"}
        notes.review(f"{path}.semantic_selection", "semantic_selection became tools.select (mode filter), judged "
                                                   "by the decision model")
    return out


def _tool_selection(conf: dict, path: str, notes: Notes) -> dict:
    select: dict[str, Any] = {"mode": "filter" if conf.get("mode") == "filter" else "add"}
    for key in ("tools_db_path", "preserve_count"):
        if key in conf:
            select[key] = conf[key]
    if "top_k" in conf:
        select["match"] = {"judge": {"preset": "tool_rank", "top_k": conf["top_k"]}}
    dropped = sorted(set(conf) - {"enabled", "mode", "tools_db_path", "preserve_count", "top_k"})
    if dropped:
        notes.review(path, f"{', '.join(dropped)} dropped: the decision model judges tool relevance "
                           "(tool_need and tool_rank), with no similarity scores")
    return {"enabled": conf.get("enabled", True), "select": select}


def _context(type_: str, conf: dict, path: str, notes: Notes) -> dict:
    out: dict[str, Any] = {"enabled": conf.get("enabled", True)}
    if type_ == "rag":
        source = {"type": "rag", **{k: conf[k] for k in ("backend", "backend_config", "on_failure") if k in conf}}
        if conf.get("backend") == "mcp":
            notes.drop(path, "an mcp RAG source has no invoker in v0.5; serve the retrieval over HTTP as an "
                             "external_api source to restore it")
            out["enabled"] = False
        if "min_confidence_threshold" in conf:
            notes.review(f"{path}.min_confidence_threshold", "min_confidence_threshold is removed: write a "
                                                            "fact_check condition in the decision's rules")
        out["sources"] = [source]
        if conf.get("injection_mode"):
            out["injection"] = {"mode": conf["injection_mode"]}
    elif type_ == "memory":
        out["sources"] = [{"type": "memory", "store": {"auto": bool(conf.get("auto_store", False))}}]
    else:
        out["compress"] = {"mode": conf.get("mode", "auto")}
    notes.rewrite(path, f"the {type_} plugin became a context plugin"
                        + {"rag": " with a rag source", "memory": " with a memory source"}.get(type_, " with compress"))
    return out
