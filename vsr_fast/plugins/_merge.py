"""Field-by-field layering (spec 6.5): a field a layer leaves ``UNSET`` keeps the value below it."""
from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET


def merged_fields(*layers: Any) -> dict[str, Any] | None:
    """The set fields of ``layers`` (lowest first, None skips a layer), later ones winning; None when no layer."""
    present = [layer for layer in layers if layer is not None]
    if not present:
        return None
    values: dict[str, Any] = {}
    for layer in present:
        for f in msgspec.structs.fields(type(layer)):
            value = getattr(layer, f.name)
            if value is not UNSET:
                values[f.name] = value
    return values
