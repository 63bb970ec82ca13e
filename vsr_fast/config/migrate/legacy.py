"""The Router's flat layout before config v0.3 (``vllm_endpoints``, ``model_config``, ``categories``) rewritten into
the v0.3 layout, so the v0.3-to-v0.5 rewrites then run in the same pass (spec 5.11)."""
from __future__ import annotations

from typing import Any

from .notes import Notes

FLAT_KEYS = ("vllm_endpoints", "model_config", "categories")


def is_flat(raw: dict) -> bool:
    """Whether ``raw`` is the flat layout: no version, and the flat layout's own sections."""
    return "version" not in raw and any(k in raw for k in FLAT_KEYS)


def flat_to_v03(raw: dict, notes: Notes) -> dict:
    """The v0.3 document of a flat-layout file; what has no v0.3 place is left for ``fit`` to drop with a note."""
    out: dict[str, Any] = {"version": "v0.3"}
    notes.rewrite("(document)", "the flat layout before config v0.3 was rewritten into the v0.3 layout first")
    out["providers"] = {"models": _models(raw, notes)}
    if raw.get("default_model"):
        out["providers"]["defaults"] = {"default_model": raw["default_model"]}
    signals: dict[str, list] = {}
    decisions = []
    for i, cat in enumerate(raw.get("categories") or []):
        if not isinstance(cat, dict) or "name" not in cat:
            continue
        name = str(cat["name"])
        signals.setdefault("domains", []).append({"name": name, **({"description": cat["description"]}
                                                                  if cat.get("description") else {})})
        scores = sorted((s for s in cat.get("model_scores") or [] if isinstance(s, dict) and s.get("model")),
                        key=lambda s: -float(s.get("score", 0)))
        refs = [{"model": s["model"], **({"use_reasoning": s["use_reasoning"]} if "use_reasoning" in s else {})}
                for s in scores]
        if not refs:
            notes.drop(f"categories[{i}]", f"category {name!r} names no model; it routes nowhere, dropped")
            continue
        decisions.append({"name": name, "priority": 100,
                          "rules": {"operator": "AND", "conditions": [{"type": "domain", "name": name}]},
                          "modelRefs": refs})
        notes.rewrite(f"categories[{i}]", f"category {name!r} became a domains rule and a decision over its "
                                          "model_scores, best score first")
    out["routing"] = {"signals": signals, "decisions": decisions}
    glob: dict[str, Any] = {}
    if isinstance(raw.get("semantic_cache"), dict):
        glob.setdefault("stores", {})["semantic_cache"] = raw["semantic_cache"]
    if isinstance(raw.get("tools"), dict):
        glob.setdefault("integrations", {})["tools"] = raw["tools"]
    if glob:
        out["global"] = glob
    guard = raw.get("prompt_guard")
    if isinstance(guard, dict) and guard.get("enabled"):
        notes.review("prompt_guard", "the global prompt guard has no v0.5 switch: write a jailbreak rule and a "
                                     "decision over it that answers with a fast_response plugin")
    for key in sorted(set(raw) - {"vllm_endpoints", "model_config", "categories", "default_model", "semantic_cache",
                                  "tools", "prompt_guard"}):
        notes.drop(key, f"{key} has no v0.5 counterpart in this router (the classifier models it configured are "
                        "replaced by the decision model); dropped")
    return out


def _models(raw: dict, notes: Notes) -> list[dict]:
    """One provider model per served model name, its backends the endpoints that serve it, preferred first. A
    model is served by the endpoints whose ``models`` list it, or, where none does (vLLM-SR's cookbook declares
    models only in ``model_config``), by the endpoints its ``preferred_endpoints`` name."""
    endpoints = [e for e in raw.get("vllm_endpoints") or [] if isinstance(e, dict)]
    config = raw.get("model_config") if isinstance(raw.get("model_config"), dict) else {}
    names: list[str] = []
    for e in endpoints:
        names += [m for m in e.get("models") or [] if m not in names]
    names += [m for m in config if m not in names]
    models = []
    for name in names:
        entry = config.get(name) if isinstance(config.get(name), dict) else {}
        preferred = entry.get("preferred_endpoints") or []
        serving = [e for e in endpoints if name in (e.get("models") or [])] \
            or [e for e in endpoints if e.get("name") in preferred]
        serving.sort(key=lambda e: preferred.index(e.get("name")) if e.get("name") in preferred else len(preferred))
        if not serving:
            notes.review(f"model_config.{name}", f"no vllm_endpoints entry serves {name!r} (none lists it in models "
                                                 f"and its preferred_endpoints {preferred} name none): write its "
                                                 f"providers.models[] entry by hand")
            continue
        refs = [{"name": e.get("name"), "endpoint": f"{e.get('address')}:{e.get('port')}",
                 **({"weight": e["weight"]} if "weight" in e else {})} for e in serving]
        models.append({"name": name, "backend_refs": refs})
        if entry.get("pii_policy"):
            notes.review(f"model_config.{name}.pii_policy", "a model's pii_policy has no v0.5 form: write a pii rule "
                                                            "and a decision that keeps personal data off the model")
    if models:
        notes.rewrite("vllm_endpoints", "vllm_endpoints and model_config became providers.models[], one per model "
                                        "name")
    return models
