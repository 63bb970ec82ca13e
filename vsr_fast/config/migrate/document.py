"""The whole document: version, recipes and entrypoints, providers, global (spec 5.11, 6.1, 8, 8.1)."""
from __future__ import annotations

import copy
from typing import Any

from .legacy import flat_to_v03, is_flat
from .notes import Notes
from .target import Target
from .plugins import rewrite_plugins
from .providers import rewrite_providers
from .recipes import algorithm_recipe, flatten, rewrite_recipe

TARGET = "v0.5"
TOP_ORDER = ("version", "listeners", "providers", "recipes", "entrypoints", "global")
# A Looper algorithm's model names and the algorithm types its default-<algorithm> recipe keeps (spec 8.1).
LOOPER_ALGORITHMS = {"fusion": ("fusion",), "remom": ("remom",), "ratings": ("ratings",),
                     "flow": ("workflows",), "workflows": ("workflows",), "confidence": ("escalate",)}


def rewrite_document(raw: dict, notes: Notes, target: Target) -> dict:
    """Every rewrite of the spec, in one pass; the caller fits the result to the schema."""
    doc = copy.deepcopy(raw)
    if is_flat(doc):
        doc = flat_to_v03(doc, notes)
    if doc.get("version") != TARGET:
        notes.rewrite("version", f"version {doc.get('version')!r} became {TARGET}"
                      + (" (a v0.4 file says v0.3)" if doc.get("version") == "v0.3" else ""))
    doc["version"] = TARGET
    glob = doc.get("global") if isinstance(doc.get("global"), dict) else {}

    recipes: list[dict] = []
    if isinstance(doc.get("routing"), dict):
        notes.rewrite("routing", "the top-level routing block became the recipe default")
        recipes.append({"name": "default", **doc.pop("routing")})
    for i, r in enumerate(doc.get("recipes") or []):
        if isinstance(r, dict):
            recipes.append(flatten(r, f"recipes[{r.get('name', i)}]", notes))
    _inherit_module_thresholds(glob, recipes, notes)
    cards = [(f"recipes[{r['name']}].modelCards[{c.get('name', k)}]", c)
             for r in recipes for k, c in enumerate(r.get("modelCards") or []) if isinstance(c, dict)]
    descriptions = {c["name"]: c.get("description", "") for _, c in cards if "name" in c}
    providers = doc.get("providers")
    if providers is not None:
        doc["providers"] = rewrite_providers(providers, cards, notes)
    formats = {m.get("name"): m.get("api_format", "openai") for m in (doc.get("providers") or {}).get("models") or []
               if isinstance(m, dict)}
    sizes = {m.get("name"): m.get("param_size") for m in (doc.get("providers") or {}).get("models") or []
             if isinstance(m, dict) and m.get("param_size")}
    default_model = (providers or {}).get("defaults", {}).get("default_model") if isinstance(providers, dict) else None
    new_recipes = []
    for r in recipes:
        path = f"recipes[{r.get('name')}]"
        new = rewrite_recipe(r, path, notes, descriptions, formats, target.preset_labels, sizes, target.unanswered)
        if default_model and "fallback" not in new:
            new["fallback"] = {"modelRefs": [{"model": default_model}]}
            notes.rewrite(path, f"providers.defaults.default_model {default_model!r} became the recipe's fallback")
        new_recipes.append(new)
    doc["recipes"] = new_recipes
    eps = _entrypoints(doc, glob, notes)
    if eps or "entrypoints" in doc:
        doc["entrypoints"] = eps
    if raw.get("version") != TARGET:
        _identity(doc, notes)
    if glob:
        doc["global"] = _global(glob, notes, target.unanswered)
        _deployments(doc["global"], target, notes)
    return {k: doc[k] for k in TOP_ORDER if k in doc} | {k: v for k, v in doc.items() if k not in TOP_ORDER}


def _entrypoints(doc: dict, glob: dict, notes: Notes) -> list:
    eps = [dict(e) for e in doc.get("entrypoints") or [] if isinstance(e, dict)]
    recipes = doc["recipes"]
    default = next((r for r in recipes if r.get("name") == "default"), None)
    router = glob.get("router") if isinstance(glob.get("router"), dict) else {}
    looper = (glob.get("integrations") or {}).get("looper") if isinstance(glob.get("integrations"), dict) else None
    auto = list(router.pop("auto_model_names", None) or [])
    single = router.pop("auto_model_name", None)
    if single and single not in auto:
        auto.insert(0, single)
    claimed = {n for e in eps for n in e.get("model_names") or []}
    if isinstance(looper, dict):
        if looper.pop("endpoint", None) is not None:
            notes.rewrite("global.integrations.looper.endpoint", "dropped: the router makes a Looper's model calls "
                                                                 "in process")
        for alg, types in LOOPER_ALGORITHMS.items():
            block = looper.get(alg) if isinstance(looper.get(alg), dict) else {}
            names = [n for n in block.pop("model_names", None) or [] if n not in claimed]
            if not names:
                continue
            target = algorithm_recipe(default, alg if alg != "flow" else "workflows", types) if default else None
            where = f"global.integrations.looper.{alg}.model_names"
            if target is None:
                auto += [n for n in names if n not in auto]
                notes.review(where, f"no decision of the default recipe runs {types[0]}; the names "
                                    f"{', '.join(names)} now reach the default recipe")
                continue
            if not any(r["name"] == target["name"] for r in recipes):
                recipes.append(target)
            eps.append({"model_names": names, "recipe": target["name"]})
            claimed.update(names)
            notes.rewrite(where, f"the Looper model names {', '.join(names)} became an entrypoint of recipe "
                                 f"{target['name']} (the default recipe's {types[0]} decisions); a request none "
                                 "of them matches goes to the default model, where v0.4 answered 400")
    auto = [n for n in auto if n not in claimed]
    if auto and default is not None:
        eps.insert(0, {"model_names": auto, "recipe": "default", "default": True})
        notes.rewrite("global.router.auto_model_names", f"the auto model names {', '.join(auto)} became the default "
                                                        "entrypoint of recipe default")
    if eps and len(recipes) > 1 and not any(e.get("default") for e in eps):
        target = next((e for e in eps if e.get("recipe") == "default"), eps[0])
        target["default"] = True
        notes.rewrite("entrypoints", f"the entrypoint of recipe {target.get('recipe')} is marked default: true, "
                                     "so it serves the model names no other entrypoint claims")
    if len(recipes) > 1 and not eps and default is not None:
        eps.append({"model_names": ["vllm-sr/auto"], "recipe": "default", "default": True})
        notes.rewrite("entrypoints", "several recipes compete: vllm-sr/auto is the default entrypoint of recipe "
                                     "default")
    return eps


# A classifier module whose threshold the rules of a signal type inherited when they set none (spec 8).
MODULE_RULES = {("prompt_guard",): "jailbreak", ("feedback_detector",): "user_feedbacks",
                ("classifier", "pii"): "pii", ("classifier", "domain"): "domains"}


def _inherit_module_thresholds(glob: dict, recipes: list[dict], notes: Notes) -> None:
    """A module's threshold becomes the predicate of the rules that inherited it; a guard module's
    on_error: block becomes their on_unknown: match (the signal handlers rewrite both)."""
    modules = (glob.get("model_catalog") or {}).get("modules") if isinstance(glob.get("model_catalog"), dict) else None
    if not isinstance(modules, dict):
        return
    for keys, kind in MODULE_RULES.items():
        module: Any = modules
        for key in keys:
            module = module.get(key) if isinstance(module, dict) else None
        if not isinstance(module, dict) or module.get("enabled") is False:
            continue
        where = "global.model_catalog.modules." + ".".join(keys)
        for recipe in recipes:
            for rule in (recipe.get("signals") or {}).get(kind) or []:
                if not isinstance(rule, dict):
                    continue
                if "threshold" in module and "threshold" not in rule and "predicate" not in rule:
                    rule["threshold"] = module["threshold"]
                    notes.rewrite(f"recipes[{recipe.get('name')}].signals.{kind}[{rule.get('name')}]",
                                  f"inherits {where}.threshold ({module['threshold']})")
                if module.get("on_error") == "block" and "on_error" not in rule:
                    rule["on_error"] = "block"


# Deployment providers of v0.4 (#5853): the runtimes the model runtime replaced, and those with no v0.5 form.
RUNTIME_PROVIDERS = ("candle", "ort", "openvino")
REMOVED_PROVIDERS = ("classify", "http", "rerank")


def _deployments(glob: dict, target: Target, notes: Notes) -> None:
    """A model_runtime deployment of a model this router does not ship (vLLM-SR's Vela and Decision models) is
    dropped: the pre-declared primary, this router's embedded model, answers in its place."""
    catalog = glob.get("model_catalog") if isinstance(glob.get("model_catalog"), dict) else {}
    deployments = catalog.get("deployments") if isinstance(catalog.get("deployments"), dict) else {}
    bindings = catalog.get("bindings") if isinstance(catalog.get("bindings"), dict) else {}
    for name, dep in list(deployments.items()):
        where = f"global.model_catalog.deployments.{name}"
        if not isinstance(dep, dict):
            continue
        if dep.get("provider") in RUNTIME_PROVIDERS:
            notes.rewrite(f"{where}.provider", f"provider {dep['provider']} became model_runtime")
            dep["provider"] = "model_runtime"
        elif dep.get("provider") in REMOVED_PROVIDERS:
            del deployments[name]
            named = sorted(k for k, v in bindings.items() if v == name)
            for key in named:
                del bindings[key]
            notes.drop(where, f"provider {dep['provider']} has no v0.5 form; the deployment was dropped"
                              + (f" with the bindings that named it ({', '.join(named)})" if named else ""))
            continue
        if dep.pop("operating_point", None) is not None:
            notes.drop(f"{where}.operating_point", "the runtime applies the operating point its model package declares")
        if "question_types" in dep:
            dep.setdefault("capabilities", {})["question_types"] = dep.pop("question_types")
            notes.rewrite(f"{where}.question_types", "question_types moved to capabilities.question_types")
    if not target.artifacts:
        return
    for name, dep in list(deployments.items()):
        if not isinstance(dep, dict) or dep.get("provider", "model_runtime") != "model_runtime" or dep.get("endpoint"):
            continue
        artifact = str(dep.get("artifact", ""))
        if artifact in target.artifacts or ":" in artifact:
            continue
        del deployments[name]
        notes.drop(f"global.model_catalog.deployments.{name}",
                   f"this router does not ship {artifact!r}; the deployment was dropped, so "
                   + ("the built-in primary (this router's embedded model) answers in its place" if name == "primary"
                      else "what named it falls back to the decision model")
                   + ". Serve the model from an attached runtime (endpoint) to keep it")
        for key in [k for k, v in bindings.items() if v == name]:
            del bindings[key]


def _identity(doc: dict, notes: Notes) -> None:
    """v0.4 served behind Envoy, whose gateway set the caller's identity: rules that read it (role_bindings) need a
    listener that trusts the identity headers of the authenticator in front (spec 8.1, #5872)."""
    if not any((r.get("signals") or {}).get("role_bindings") for r in doc["recipes"]):
        return
    auth = ((doc.get("global") or {}).get("router") or {}).get("auth")
    if isinstance(auth, dict) and auth.get("enabled"):
        return      # client keys are an identity source of their own
    listeners = [x for x in doc.get("listeners") or [] if isinstance(x, dict) and x.get("role", "serving") == "serving"]
    if not listeners:
        notes.review("listeners", "role_bindings read the caller's identity: add a listener with identity.trust_headers: "
                                  "true behind an authenticating proxy, or client keys (global.router.auth)")
        return
    for listener in listeners:
        if (listener.get("identity") or {}).get("trust_headers"):
            continue
        listener["identity"] = {**(listener.get("identity") or {}), "trust_headers": True}
        notes.review(f"listeners[{listener.get('name')}].identity.trust_headers",
                     "role_bindings read the caller's identity, which v0.4 took from the gateway in front (Envoy); "
                     "trust_headers: true keeps that, and is safe only behind a proxy that authenticates callers "
                     "and strips client-sent identity headers. Otherwise remove it and use client keys")


def _global(glob: dict, notes: Notes, unanswered: frozenset[str]) -> dict:
    out = copy.deepcopy(glob)
    plugins = rewrite_plugins(out.get("plugins"), "global.plugins", notes, lambda kind, rule: None, unanswered)
    stores = out.get("stores") if isinstance(out.get("stores"), dict) else {}
    for key in ("semantic_cache", "response_cache"):
        block = stores.get(key)
        if isinstance(block, dict) and "enabled" in block:
            enabled = bool(block.get("enabled"))
            if enabled and not any(p["type"] == "response_cache" for p in plugins):
                conf: dict[str, Any] = {"enabled": True, "mode": "semantic"}
                if "similarity_threshold" in block:
                    conf["semantic"] = {"match": {"recall": {"method": "embedding", "top_k": 3,
                                                             "min_similarity": block["similarity_threshold"]}}}
                plugins.append({"type": "response_cache", "configuration": conf})
            notes.rewrite(f"global.stores.{key}.enabled",
                          "stores never switch a feature on: " + ("the cache is a response_cache plugin in "
                                                                  "global.plugins" if enabled else
                                                                  "the cache stays off (no plugin entry)"))
            block.pop("enabled")
    if "semantic_cache" in stores:
        stores.setdefault("response_cache", {}).update(stores.pop("semantic_cache"))
        notes.rewrite("global.stores.semantic_cache", "global.stores.semantic_cache is global.stores.response_cache")
    services = out.get("services") if isinstance(out.get("services"), dict) else {}
    replay = services.get("router_replay")
    if isinstance(replay, dict) and replay.get("enabled") and not any(p["type"] == "router_replay" for p in plugins):
        conf = {"enabled": True}
        if replay.get("capture_personal_data") is False:
            conf["capture_personal_data"] = False
        if "ttl_seconds" in replay:
            conf["ttl_seconds"] = replay["ttl_seconds"]
        plugins.append({"type": "router_replay", "configuration": conf})
        notes.rewrite("global.services.router_replay", "the replay switch became a router_replay plugin in "
                                                       "global.plugins; its store settings were dropped")
        services.pop("router_replay")
    tools = (out.get("integrations") or {}).get("tools") if isinstance(out.get("integrations"), dict) else None
    if isinstance(tools, dict) and tools.get("enabled") and not any(p["type"] == "tools" for p in plugins):
        select: dict[str, Any] = {"mode": "add"}
        if "tools_db_path" in tools:
            select["tools_db_path"] = tools["tools_db_path"]
        if "top_k" in tools:
            select["match"] = {"judge": {"preset": "tool_rank", "top_k": tools["top_k"]}}
        plugins.append({"type": "tools", "configuration": {"enabled": True, "select": select}})
        if "tools_db_path" in tools:
            notes.review("global.integrations.tools.tools_db_path", f"the tool catalog {tools['tools_db_path']} is "
                                                                    "read at load, relative to where the router starts")
        notes.review("global.integrations.tools", "global.integrations.tools became a tools plugin with select in "
                                                  "global.plugins; its similarity settings were dropped")
        out["integrations"].pop("tools")
    external = (out.get("model_catalog") or {}).get("external") if isinstance(out.get("model_catalog"), dict) else None
    if isinstance(external, list):
        for i, ext in enumerate(external):
            if isinstance(ext, dict):
                notes.drop(f"global.model_catalog.external[{i}]",
                           f"the external model {ext.get('name', i)!r} (role {ext.get('model_role', 'none')}) answered a "
                           "classifier's question; the decision model answers every signal now. Declare a systemone "
                           "deployment and bind the signal types to it to keep a remote model")
        out["model_catalog"].pop("external")
    modules = (out.get("model_catalog") or {}).get("modules") if isinstance(out.get("model_catalog"), dict) else None
    if isinstance(modules, dict):
        compression = modules.get("prompt_compression")
        if isinstance(compression, dict) and compression.get("enabled"):
            signals = {k: compression[k] for k in ("profile", "max_tokens", "skip_signals") if k in compression}
            plugins.append({"type": "context", "configuration": {"enabled": True,
                                                                 "compress": {"signals": {"enabled": True, **signals}}}})
            notes.rewrite("global.model_catalog.modules.prompt_compression",
                          "prompt_compression became compress.signals of a context plugin in global.plugins")
        notes.review("global.model_catalog.modules", "the classifier modules are removed: the decision model answers "
                                                     "every signal; their thresholds became the predicates of the "
                                                     "rules (re-fit them)")
        out["model_catalog"].pop("modules")
    if plugins or "plugins" in out:
        out["plugins"] = plugins
    return out
