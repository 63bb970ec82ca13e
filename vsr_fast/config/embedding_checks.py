"""Load checks of the embedding deployments and of every store's ``embedding`` block (spec 5.5).

Each refusal names what it refuses: an undeclared deployment, one that does
not embed text, or a dimension the deployment does not answer with.
"""
from __future__ import annotations

from .catalog import EmbeddingRef, ModelCatalog, dimension_of, embedding_deployments
from .stores import Stores


def check_embeddings(catalog: ModelCatalog, stores: Stores, errors: list[str]) -> None:
    """Append one line per bad embedding deployment, ``embeddings.default`` or store ``embedding`` block."""
    for name, dep in catalog.deployments.items():
        if dep.provider != "openai_embeddings":
            continue
        base = f"global.model_catalog.deployments.{name}"
        if not dep.endpoint:
            errors.append(f"{base}.endpoint: missing_field: an openai_embeddings deployment names its endpoint")
        if dep.capabilities is None or dep.capabilities.dimensions is None:
            errors.append(f"{base}.capabilities.dimensions: missing_field: an openai_embeddings deployment "
                          f"declares the width of its vectors")
        if dep.auth is not None and dep.auth.credential == "delegated":
            # Entries are embedded by the cache writer too, outside any request: no user's credential there.
            errors.append(f"{base}.auth.credential: invalid_value: this router embeds with its own key only; "
                          f"delegated embedding calls are not supported")
    _check_ref(catalog, catalog.embeddings.default.deployment, None,
               "global.model_catalog.embeddings.default.deployment", errors)
    for name in stores.__struct_fields__:
        ref = getattr(getattr(stores, name), "embedding", None)
        if isinstance(ref, EmbeddingRef):
            _check_ref(catalog, ref.deployment, ref.dimension, f"global.stores.{name}.embedding", errors)


def _check_ref(catalog: ModelCatalog, name: str, dimension: int | None, path: str, errors: list[str]) -> None:
    embedders = embedding_deployments(catalog)
    dep = embedders.get(name)
    if dep is None:
        if name in catalog.deployments:
            errors.append(f"{path}: invalid_value: deployment {name!r} does not embed text (an embedding "
                          f"deployment is openai_embeddings or a built-in vsr-static model)")
        else:
            errors.append(f"{path}: unknown_deployment: {name!r} is not declared in global.model_catalog.deployments")
        return
    if dep.capabilities is not None and "text" not in dep.capabilities.modalities:
        errors.append(f"{path}: invalid_value: deployment {name!r} does not embed text (its modalities: "
                      f"{', '.join(dep.capabilities.modalities)})")
        return
    width = dimension_of(dep)
    if dimension is not None and width is not None and width != dimension:
        errors.append(f"{path.removesuffix('.deployment')}.dimension: invalid_value: the index holds {dimension}-wide "
                      f"vectors; deployment {name!r} answers with {width}")


__all__ = ["check_embeddings"]
