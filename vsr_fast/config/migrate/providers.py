"""``providers.models[]``: model-card facts move onto the entry of the same name; removed backend fields
become ``endpoint``, ``auth`` blocks (spec 6.4, 6.7, 8)."""
from __future__ import annotations

from typing import Any

from .notes import Notes

# v0.4 model-card modality keywords as v0.5 modalities (spec 5.8).
MODALITIES = {"ar": {"input": ["text"], "output": ["text"]},
              "diffusion": {"input": ["text"], "output": ["image"]},
              "omni": {"input": ["text", "image"], "output": ["text", "image"]},
              "both": {"input": ["text", "image"], "output": ["text", "image"]}}
PRICING = {"prompt_per_1m": "input", "completion_per_1m": "output", "cached_input_per_1m": "cached"}


def rewrite_providers(providers: Any, cards: list, notes: Notes) -> dict:
    """The v0.5 ``providers`` block; ``cards`` are every recipe's ``modelCards``."""
    if not isinstance(providers, dict):
        return providers
    out = {k: v for k, v in providers.items() if k != "models"}
    if "models" not in providers:
        return out
    by_name = {}
    for where, card in cards:
        if isinstance(card, dict) and "name" in card:
            by_name.setdefault(card["name"], (where, card))
    defaults = providers.get("defaults")
    families = defaults.get("reasoning_families") if isinstance(defaults, dict) else None
    families = families if isinstance(families, dict) else {}
    models = []
    for i, model in enumerate(providers.get("models") or []):
        if not isinstance(model, dict):
            continue
        path = f"providers.models[{model.get('name', i)}]"
        model = dict(model)
        if isinstance(model.get("pricing"), dict):
            model["pricing"] = _pricing(model["pricing"], f"{path}.pricing", notes)
        model["backend_refs"] = [_backend(ref, f"{path}.backend_refs[{j}]", notes)
                                 for j, ref in enumerate(model.get("backend_refs") or []) if isinstance(ref, dict)]
        found = by_name.get(model.get("name"))
        if found:
            _facts(model, found[1], found[0], notes)
        family = model.get("reasoning_family")
        v05 = family in ("chat_template_kwargs", "reasoning_effort") and family not in families
        if family is not None and not v05:
            _reasoning_family(model, families, path, notes)
        models.append(model)
    out["models"] = models
    return out


def _facts(model: dict, card: dict, where: str, notes: Notes) -> None:
    moved = []
    for key in ("capabilities", "description", "context_window_size", "param_size", "loras"):
        if key in card and key not in model:
            model[key] = card[key]
            moved.append(key)
    modality = str(card.get("modality", "")).lower()
    if modality in MODALITIES and "modalities" not in model:
        model["modalities"] = MODALITIES[modality]
        moved.append(f"modality {modality} as modalities")
        if modality == "diffusion":
            model["api_format"] = "images"
            notes.rewrite(where, f"{card['name']} generates images: api_format images")
    notes.rewrite(where, f"the model card {card['name']!r} moved to providers.models[{card['name']}]"
                         + (f" ({', '.join(moved)})" if moved else ""))


# v0.3's reasoning_families[].type as v0.5's reasoning_family: OpenAI's field is the default.
FAMILY_TYPES = {"chat_template_kwargs": "chat_template_kwargs", "reasoning_effort": None,
                "top_level_reasoning_effort": None}


def _reasoning_family(model: dict, families: dict, path: str, notes: Notes) -> None:
    """A model's named family (``providers.defaults.reasoning_families``) becomes the syntax it names, and the
    model declares that it reasons: a v0.3 family was how its reasoning fields were written."""
    name = model.pop("reasoning_family")
    family = families.get(name) if isinstance(name, str) else None
    kind = family.get("type") if isinstance(family, dict) else None
    where = f"{path}.reasoning_family"
    if kind not in FAMILY_TYPES:
        notes.drop(where, f"the reasoning family {name!r} has no type this router writes (chat_template_kwargs, "
                          "reasoning_effort); dropped, so OpenAI's reasoning_effort applies")
        return
    syntax = FAMILY_TYPES[kind]
    if syntax is not None:
        model["reasoning_family"] = syntax
    caps = model.get("capabilities")
    if isinstance(caps, list) and "reasoning" not in caps:
        model["capabilities"] = [*caps, "reasoning"]
    elif caps is None:
        model["capabilities"] = ["reasoning"]
    notes.rewrite(where, f"the reasoning family {name!r} ({kind}) became "
                         + (f"reasoning_family: {syntax}" if syntax else "OpenAI's reasoning_effort, the default")
                         + ", and capabilities lists reasoning")
    parameter = family.get("parameter") if isinstance(family, dict) else None
    if syntax is not None and parameter not in (None, "enable_thinking"):
        notes.review(where, f"the family's switch was chat_template_kwargs.{parameter}; the router writes "
                            "chat_template_kwargs.enable_thinking")


def _pricing(p: dict, path: str, notes: Notes) -> dict:
    out = {}
    for key, value in p.items():
        new = PRICING.get(key, key)
        if new != key:
            notes.rewrite(f"{path}.{key}", f"{key} became {new}")
        out[new] = value
    return out


def _backend(ref: dict, path: str, notes: Notes) -> dict:
    ref = dict(ref)
    if "base_url" in ref:
        url = ref.pop("base_url")
        ref.setdefault("endpoint", url)
        notes.rewrite(f"{path}.base_url", "base_url became endpoint")
    auth = dict(ref.get("auth") or {})
    for old, new in (("api_key_env", "api_key_env"), ("api_key", "api_key"), ("auth_header", "header"),
                     ("auth_prefix", "prefix")):
        if old in ref:
            auth[new] = ref.pop(old)
            notes.rewrite(f"{path}.{old}", f"{old} became auth.{new}")
    if auth.get("api_key") and auth.get("api_key_env"):
        auth.pop("api_key")
        notes.review(f"{path}.auth", "an inline api_key does not load together with api_key_env; the env var kept")
    if auth:
        ref["auth"] = auth
    if ref.pop("trusted_gateway", None) is not None:
        notes.review(f"{path}.trusted_gateway", "trusted_gateway is removed with no mechanical rewrite: write "
                                                "auth: {credential: delegated} on this upstream and enable "
                                                "global.services.authz.delegated_credential")
    return ref
