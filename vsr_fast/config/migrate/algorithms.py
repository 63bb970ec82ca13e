"""Removed algorithm types to v0.5's selectors and executors (spec 5.6, 8).

prompt and router_dc become systemone; automix, hybrid and latency_aware
multi_factor weights; knn, kmeans, svm and mlp systemone, or static for one
candidate; the Looper confidence algorithm and cascade escalate; the retired
learning types static, with a pointer to what replaces them.
"""
from __future__ import annotations

from typing import Any

from .notes import Notes

RETIRED = ("policy", "session_aware", "elo", "rl_driven", "gmtrouter", "bandit", "personalization", "thompson",
           "router_r1")
TRAINED = ("knn", "kmeans", "svm", "mlp")


def rewrite_algorithm(alg: Any, refs: list[str], descriptions: dict[str, str], path: str, notes: Notes,
                      formats: dict[str, str] | None = None, sizes: dict[str, str] | None = None) -> Any:
    """The v0.5 ``algorithm`` of one decision; ``descriptions`` are the candidates' model-card descriptions,
    ``formats`` their api_format and ``sizes`` their param_size."""
    if not isinstance(alg, dict):
        return alg
    kind = alg.get("type")
    settings = alg.get(kind) if isinstance(alg.get(kind), dict) else {}
    if kind == "decision":
        notes.rewrite(f"{path}.type", "algorithm type decision is systemone")
        return {**{k: v for k, v in alg.items() if k != "decision"}, "type": "systemone", "systemone": settings}
    if kind in ("prompt", "router_dc"):
        out = _systemone(refs, descriptions, settings.get("instructions"))
        notes.review(path, f"{kind} became a systemone selector: one choice over the candidates' descriptions"
                           + ("; its embedding settings were dropped" if kind == "router_dc" else ""))
        return out
    if kind in TRAINED:
        if len(refs) <= 1:
            notes.review(path, f"{kind} over one candidate became static; its trained data is not used")
            return {"type": "static"}
        notes.review(path, f"{kind} became a systemone selector over the candidates' descriptions; the trained "
                           f"{kind} model and its data are not used (global.router.model_selection.ml is removed)")
        return _systemone(refs, descriptions, None)
    if kind in ("automix", "hybrid", "latency_aware"):
        return {"type": "multi_factor", "multi_factor": {"weights": _weights(kind, settings, path, notes)}}
    if kind == "multi_factor":
        return {**alg, "multi_factor": _multi_factor(settings, path, notes)} if settings else alg
    if kind in ("confidence", "cascade"):
        other = sorted({r for r in refs if (formats or {}).get(r, "openai") != "openai"})
        if other:
            notes.review(path, f"{kind} reads logprobs, which only api_format openai models return "
                               f"({', '.join(other)} do not); static tries the modelRefs in order: write an "
                               "escalate with another accept check by hand")
            return {"type": "static"}
        return _escalate(kind, alg, settings, refs, path, notes, sizes or {})
    if kind in RETIRED:
        notes.review(path, f"{kind} was retired with its learning code; static tries the modelRefs in order. "
                           "Its adaptation is global.router.learning.adaptation in v0.5, which this router does not "
                           "read")
        return {"type": "static"}
    if kind in ("fusion", "remom", "ratings", "workflows") and "on_error" in settings and "on_error" not in alg:
        # v0.4 kept on_error inside the executor's block; v0.5 shares it at the algorithm's top level.
        settings = dict(settings)
        on_error = settings.pop("on_error")
        notes.rewrite(f"{path}.{kind}.on_error", f"on_error moved to algorithm.on_error, shared by executors")
        return {**alg, kind: settings, "on_error": on_error}
    return alg


def _systemone(refs: list[str], descriptions: dict[str, str], instructions: str | None) -> dict:
    return {"type": "systemone", "systemone": {
        "instructions": instructions or "Which candidate model best fits this request?",
        "candidates": {r: descriptions.get(r) or r for r in refs}}}


def _weights(kind: str, s: dict, path: str, notes: Notes) -> dict:
    if kind == "latency_aware":
        notes.review(path, "latency_aware became multi_factor weighing latency only; its percentiles "
                           "(ttft_percentile, tpot_percentile) were dropped")
        return {"cost": 0, "latency": 1, "quality": 0}
    if kind == "automix":
        t = float(s.get("cost_quality_tradeoff", 0.5))
        notes.review(path, f"automix became multi_factor with cost {t} and quality {round(1 - t, 4)} from its "
                           "cost_quality_tradeoff; its verification and escalation settings were dropped")
        return {"cost": t, "latency": 0, "quality": round(1 - t, 4)}
    cost = float(s.get("cost_weight", 0))
    quality = round(sum(float(s.get(k, 0)) for k in ("automix_weight", "experience_weight", "router_dc_weight")), 4)
    notes.review(path, f"hybrid became multi_factor with cost {cost} and quality {quality} (its automix, experience "
                       "and router_dc weights summed); its prompt-cache affinity is multi_factor.affinity")
    return {"cost": cost, "latency": 0, "quality": quality}


def _multi_factor(s: dict, path: str, notes: Notes) -> dict:
    out = dict(s)
    quality = out.get("quality")
    if quality is not None and not (isinstance(quality, dict) and all(isinstance(v, (int, float))
                                                                      for v in quality.values())):
        out.pop("quality")
        notes.review(f"{path}.multi_factor.quality", "quality read an evaluation index; v0.5 takes a quality per "
                                                    "candidate (0..1): write them from the index by hand")
    weights = out.get("weights")
    if isinstance(weights, dict) and "load" in weights:
        weights = dict(weights)
        load = weights.pop("load")
        out["weights"] = weights
        notes.review(f"{path}.multi_factor.weights.load", f"the load weight ({load}) was dropped: v0.5 weighs cost, "
                                                         "latency, error rate and quality")
    return out


def _escalate(kind: str, alg: dict, s: dict, refs: list[str], path: str, notes: Notes,
              sizes: dict[str, str]) -> dict:
    if len(refs) < 2:
        notes.review(path, f"{kind} over one candidate has nothing to escalate to; static")
        return {"type": "static"}
    method = s.get("confidence_method", "avg_logprob")
    if method not in ("avg_logprob", "margin"):
        notes.review(f"{path}.{kind}.confidence_method", f"confidence method {method!r} became avg_logprob here "
                                                          "(this router reads avg_logprob and margin)")
        method = "avg_logprob"
    accept = {"confidence": {"method": method, "gte": s.get("threshold", 0.7)}}
    esc: dict[str, Any] = {}
    out: dict[str, Any] = {"type": "escalate", "escalate": esc}
    order = s.get("escalation_order")
    if order not in (None, "declared", "small_to_large"):
        notes.review(f"{path}.{kind}.escalation_order", f"escalation_order {order!r} became the modelRefs order")
    unsized = [r for r in dict.fromkeys(refs) if r not in sizes]
    if order in (None, "small_to_large") and not unsized:
        esc["order"] = "size"
        where = "by size (param_size), the Looper's size order"
    elif order in (None, "small_to_large"):
        # The Looper counted a model without a card param_size as the smallest; with none sized that is the
        # modelRefs order. order: size needs every size, so the modelRefs order keeps what it did.
        names = ", ".join(unsized)
        where = ("in the modelRefs order: the Looper's size order read the cards' param_size, and "
                 + (f"none of {names} has one, so it tried them as listed" if len(unsized) == len(set(refs)) else
                    f"{names} {'has' if len(unsized) == 1 else 'have'} none (it tried those first)")
                 + "; write providers.models[].param_size of each and order: size to escalate by size")
    else:
        where = "in the modelRefs order"
    esc["accept"] = accept
    on_error = alg.get("on_error", s.get("on_error"))
    if on_error in ("fail", "last_attempt"):
        out["on_error"] = on_error
    notes.review(path, f"{kind} became escalate with one accept check ({method} at least "
                       f"{accept['confidence']['gte']}), {where}; the threshold is on a different scale if the "
                       "method changed: re-fit it")
    return out


# The keys under an executor's block that name models (remom.synthesis_model, fusion.model and analysis_models,
# workflows' planner, role and final models).
_MODEL_KEYS = ("model", "models", "synthesis_model", "analysis_models")


def executor_models(alg: Any) -> list[str]:
    """The models an executor's block names, in the order they appear (v0.5's Looper calls only modelRefs)."""
    if not isinstance(alg, dict) or alg.get("type") not in ("fusion", "remom", "ratings", "workflows"):
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _MODEL_KEYS and isinstance(value, str):
                    found.append(value)
                elif key in _MODEL_KEYS and isinstance(value, list):
                    found.extend(v for v in value if isinstance(v, str))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(alg.get(alg["type"]))
    return list(dict.fromkeys(found))
