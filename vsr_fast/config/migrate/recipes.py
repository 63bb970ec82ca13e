"""Recipes: ``routing`` (top level or inside a recipe) flattened, decisions and projections rewritten (spec 6.3)."""
from __future__ import annotations

import copy
from typing import Any

from .algorithms import executor_models, rewrite_algorithm
from .conditions import rewrite_tree, true_tree
from .notes import Notes
from .plugins import rewrite_plugins
from .signals import Renames, rewrite_signals

RECIPE_KEYS = ("signals", "projections", "decisions", "strategy", "fallback", "candidate_requirements",
               "model_bindings", "plugins")


def flatten(recipe: dict, path: str, notes: Notes) -> dict:
    """A recipe holds its signals and decisions directly: a ``routing`` block inside it is lifted."""
    if not isinstance(recipe.get("routing"), dict):
        return dict(recipe)
    out = {k: v for k, v in recipe.items() if k != "routing"}
    out.update(recipe["routing"])
    notes.rewrite(f"{path}.routing", "recipes are flat: the recipe's routing block was lifted into it")
    return out


def rewrite_recipe(recipe: dict, path: str, notes: Notes, descriptions: dict[str, str],
                   formats: dict[str, str], labels: dict[str, tuple[str, ...]],
                   sizes: dict[str, str] | None = None, unanswered: frozenset[str] = frozenset()) -> dict:
    """One flat recipe in v0.5 form (modelCards are read by the caller and removed here)."""
    out = {k: v for k, v in recipe.items() if k != "modelCards"}
    renames = Renames()
    signals = rewrite_signals(recipe.get("signals"), f"{path}.signals", notes, renames, labels)

    def add_signal(kind: str, rule: dict) -> None:
        rules = signals.setdefault(kind, [])
        if not any(r.get("name") == rule["name"] for r in rules):
            rules.append(rule)

    if "projections" in recipe:
        out["projections"] = _projections(recipe["projections"], f"{path}.projections", notes, renames,
                                          signals, add_signal)
    decisions = []
    for i, decision in enumerate(recipe.get("decisions") or []):
        if isinstance(decision, dict):
            new = _decision(decision, f"{path}.decisions[{i}]", notes, renames,
                            (descriptions, formats, sizes or {}), add_signal, unanswered)
            if new is not None:
                decisions.append(new)
    if "decisions" in recipe:
        out["decisions"] = decisions
    if "plugins" in recipe:
        out["plugins"] = rewrite_plugins(recipe["plugins"], f"{path}.plugins", notes, add_signal, unanswered)
    policy = out.pop("data_policy", None)
    if isinstance(policy, dict):
        _data_policy(policy, out, f"{path}.data_policy", notes)
    if signals or "signals" in recipe:
        out["signals"] = signals
    return out


def _data_policy(policy: dict, recipe: dict, path: str, notes: Notes) -> None:
    """A recipe's data_policy is its router_replay plugin (spec 8)."""
    conf: dict[str, Any] = {}
    if policy.get("replay") is False:
        conf["enabled"] = False
    if policy.get("replay_personal_data") is False:
        conf["capture_personal_data"] = False
    if conf:
        plugins = recipe.setdefault("plugins", [])
        entry = next((p for p in plugins if p.get("type") == "router_replay"), None)
        if entry is None:
            plugins.append({"type": "router_replay", "configuration": conf})
        else:
            entry["configuration"] = {**entry.get("configuration", {}), **conf}
    notes.rewrite(path, "data_policy became the recipe's router_replay plugin"
                        + (f" ({', '.join(f'{k}: {str(v).lower()}' for k, v in conf.items())})" if conf else ""))


def _decision(d: dict, path: str, notes: Notes, renames: Renames, models: tuple[dict, dict, dict],
              add_signal, unanswered: frozenset[str] = frozenset()) -> dict | None:
    descriptions, formats, sizes = models
    out = dict(d)
    if "rules" in d:
        rules = rewrite_tree(d["rules"], f"{path}.rules", lambda leaf, p: renames.leaf(leaf, p, notes))
        if rules is False:
            notes.drop(path, "the decision's rules can never match in v0.5 (they read only dropped rules); "
                             "the decision was dropped: restore its signals by hand to keep it")
            return None
        out["rules"] = true_tree() if rules is True else rules
    refs = [r.get("model") for r in d.get("modelRefs") or [] if isinstance(r, dict)]
    images = [r for r in refs if formats.get(r) == "images"]
    if images and len(images) < len(refs):
        notes.drop(path, f"a text-and-image route over two models ({', '.join(refs)}) has no v0.5 form: dropped. "
                         "Restore it as two decisions, or one over a model that serves both (api_format responses "
                         "with image_generation)")
        return None
    if images and "output" not in d:
        out["output"] = {"kind": "image"}
        notes.rewrite(path, f"the route's model {images[0]} generates images: output {{kind: image}}")
    if "algorithm" in d:
        out["algorithm"] = rewrite_algorithm(d["algorithm"], refs, descriptions, f"{path}.algorithm", notes, formats,
                                             sizes)
        missing = [m for m in executor_models(out["algorithm"]) if m not in refs]
        if missing:
            out["modelRefs"] = list(d.get("modelRefs") or []) + [{"model": m} for m in missing]
            notes.rewrite(f"{path}.modelRefs", f"the executor calls {', '.join(missing)}, and v0.5's Looper calls "
                                               "only the decision's modelRefs: added")
    if "plugins" in d:
        out["plugins"] = rewrite_plugins(d["plugins"], f"{path}.plugins", notes, add_signal, unanswered)
    if "emits" in d:
        emits = out.pop("emits") or []
        kept = [e.get("retention") for e in emits if isinstance(e, dict) and e.get("kind") == "retention"]
        if kept:
            out["retention"] = kept[0]
        notes.rewrite(f"{path}.emits", "emits became retention (retention was its only kind)")
    return out


# Condition type -> the signals key of its rules, for the application signals whose options a score may read.
SIGNAL_KEYS = {"systemone": "systemone", "complexity": "complexity", "turn_relation": "turn_relation", "user_feedback": "user_feedbacks",
               "modality": "modality", "domain": "domains", "fact_check": "fact_check", "safety": "safety"}


def _labelled_input(item: dict, where: str, notes: Notes, signals: dict, add_signal) -> dict:
    """A score input that read one option of a rule reads a rule of that option: scores read rules, not labels."""
    label, base = item.pop("label"), item["name"]
    key = SIGNAL_KEYS.get(item.get("type", ""))
    rule = next((r for r in signals.get(key, []) if r.get("name") == base), None) if key else None
    if rule is None:
        item["name"] = f"{base}:{label}"
        return item
    name = f"{base}_{label}"
    add_signal(key, {**rule, "name": name, "labels": [label]})
    notes.rewrite(where, f"the score read option {label} of rule {base}: it reads the rule {name} (labels: [{label}]), "
                         "added beside it" + ("; a systemone rule asks its own question, so this is one more question "
                                              "per request" if key == "systemone" else "; both share one question"))
    return {**item, "name": name}


def _projections(p: Any, path: str, notes: Notes, renames: Renames, signals: dict, add_signal) -> Any:
    if not isinstance(p, dict):
        return p
    out = dict(p)
    scores, dropped = [], set()
    for score in p.get("scores") or []:
        inputs = []
        where = f"{path}.scores[{score.get('name')}]"
        for k, item in enumerate(score.get("inputs") or []):
            if item.get("type") == "kb_metric":
                notes.drop(f"{where}.inputs[{k}]", "a kb_metric input reads a knowledge base, which v0.5 does not; "
                                                   "dropped")
                continue
            new = renames.leaf(dict(item), f"{where}.inputs[{k}]", notes)
            if new is False:
                continue
            if new.get("value_source") == "raw":
                new["value_source"] = "value"
            if "label" in new:
                new = _labelled_input(new, f"{where}.inputs[{k}]", notes, signals, add_signal)
            inputs.append(new)
        if not inputs:
            notes.drop(where, "every input of this score was dropped; the score and its mappings were dropped")
            dropped.add(score.get("name"))
            continue
        scores.append({**score, "inputs": inputs})
    mappings = []
    for m in p.get("mappings") or []:
        if m.get("source") in dropped:
            for band in m.get("outputs") or []:
                renames.set("projection", str(band.get("name")), False)
            continue
        mappings.append(m)
    for name in dropped:
        renames.set("projection", str(name), False)
    if "scores" in p:
        out["scores"] = scores
    if "mappings" in p:
        out["mappings"] = mappings
    return out


def algorithm_recipe(default: dict, algorithm: str, types: tuple[str, ...]) -> dict | None:
    """``default-<algorithm>``: the default recipe with only its decisions of that algorithm (spec 8.1)."""
    decisions = [d for d in default.get("decisions") or []
                 if isinstance(d.get("algorithm"), dict) and d["algorithm"].get("type") in types]
    if not decisions:
        return None
    out = copy.deepcopy({k: v for k, v in default.items() if k != "decisions"})
    out["name"] = f"default-{algorithm}"
    out["description"] = f"The {algorithm} decisions of recipe default"
    out["decisions"] = copy.deepcopy(decisions)
    return out
