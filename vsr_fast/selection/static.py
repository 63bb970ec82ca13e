"""The ``static`` selector: a decision's modelRefs, in order, are its candidates."""
from __future__ import annotations

from ..config.schema import ModelRef


def candidates(model_refs: list[ModelRef]) -> list[str]:
    """Model names to try, first choice first; later ones are fallbacks."""
    seen: dict[str, None] = {}
    for ref in model_refs:
        seen.setdefault(ref.model, None)
    return list(seen)
