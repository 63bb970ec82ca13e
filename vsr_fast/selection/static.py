"""The ``static`` selector: a decision's modelRefs, in order, are its candidates."""
from __future__ import annotations

import msgspec

from ..config.candidates import parameter_count
from ..config.schema import ModelRef, ProviderModel


def candidate_models(model_refs: list[ModelRef], models: dict[str, ProviderModel]) -> tuple[ProviderModel, ...]:
    """The provider models to try, first choice first (later ones are fallbacks), each model once.

    A ref's ``lora_name`` is the model name its backends are asked for, as in the vLLM
    Semantic Router: vLLM serves each LoRA adapter under its own model name. The model
    keeps its own name everywhere else (headers, metrics, fallback order).
    """
    loras: dict[str, str | None] = {}
    for ref in model_refs:
        loras.setdefault(ref.model, ref.lora_name)
    return tuple(models[name] if lora is None else msgspec.structs.replace(models[name], provider_model_id=lora)
                 for name, lora in loras.items())



def by_size(candidates: tuple[ProviderModel, ...]) -> tuple[ProviderModel, ...]:
    """Escalate's ``order: size``: the smallest model first, equal sizes in modelRefs order. The load made sure
    every candidate has a size; one without (a model named directly) goes last."""
    def size(m: ProviderModel) -> float:
        count = parameter_count(m.param_size) if m.param_size else None
        return count if count is not None else float("inf")
    return tuple(sorted(candidates, key=size))
