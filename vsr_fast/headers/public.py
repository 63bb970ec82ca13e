"""The public header set of a response, built once per request as ASGI header pairs."""
from __future__ import annotations

from . import registry as h

_SCHEMA = (h.SCHEMA_VERSION.encode(), h.PUBLIC_SCHEMA.encode())
_CONFIG, _PATH = h.CONFIG_VERSION.encode(), h.RESPONSE_PATH.encode()
_RECIPE, _DECISION, _MODEL = h.SELECTED_RECIPE.encode(), h.SELECTED_DECISION.encode(), h.SELECTED_MODEL.encode()


def public_headers(
    *,
    config_version: bytes,
    path: h.ResponsePath,
    recipe: str | None,
    decision: str | None,
    model: str | None,
    warnings: list[str] | None = None,
) -> list[tuple[bytes, bytes]]:
    """The public set of spec 5.10; absent members are omitted as the spec says."""
    out = [_SCHEMA, (_CONFIG, config_version), (_PATH, path.value.encode())]
    if recipe:
        out.append((_RECIPE, recipe.encode()))
    if decision:
        out.append((_DECISION, decision.encode()))
    if model:
        out.append((_MODEL, model.encode()))
    if warnings:
        out.append((h.WARNINGS.encode(), ", ".join(warnings).encode()))
    return out
