"""``vsr-fast config migrate``: any earlier configuration to v0.5, deterministically, with a note per rewrite.

The rewrites follow the spec (5.2, 5.6, 5.7, 5.11, 6.6, 8, 8.1); a last pass
fits the result to what this router loads (``fit``), dropping with a note what
it does not read. Migrating a v0.5 file changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from ..schema import RouterConfig
from .document import rewrite_document
from .fit import fit
from .legacy import FLAT_KEYS, is_flat
from .notes import Note, Notes
from .target import Target

__all__ = ["Migrated", "Note", "Target", "dump", "migrate"]


@dataclass(frozen=True)
class Migrated:
    """The v0.5 document and the notes of every rewrite, in order."""

    document: dict
    notes: list[Note]


def migrate(raw: object, target: Target | None = None) -> Migrated:
    """Rewrite a decoded document; with a ``target`` the result is also fitted to what this router loads."""
    if not isinstance(raw, dict):
        raise ValueError(f"a configuration is a mapping, not {type(raw).__name__}")
    _refuse_unknown_layout(raw)
    notes = Notes()
    doc = rewrite_document(raw, notes, target or Target())
    doc = fit(doc, RouterConfig, "", notes, target.plugins if target else None)
    return Migrated(doc, notes.items)


# The versions migrate reads, and the top-level sections a file (or a fragment of one: a routing block, a plugin)
# of those versions holds; the flat layout before v0.3 has its own (``legacy.FLAT_KEYS``).
VERSIONS = ("v0.3", "v0.4", "v0.5")
SECTIONS = ("listeners", "providers", "routing", "recipes", "entrypoints", "global", "plugin")
# Other routers' files that reach migrate by mistake, by a top-level key only they have.
FOREIGN = {"model_list": "a LiteLLM proxy configuration (model_list)",
           "router_settings": "a LiteLLM proxy configuration (router_settings)"}


def _refuse_unknown_layout(raw: dict) -> None:
    """A document of none of the layouts migrate knows is refused: rewriting it would drop all it says and write
    an empty v0.5 file as if it had been migrated."""
    version = raw.get("version")
    if version is not None:
        if version not in VERSIONS:
            raise ValueError(f"not a vLLM-SR configuration migrate knows: version {version!r} is none of "
                             f"{', '.join(VERSIONS)}")
        return
    if is_flat(raw) or any(k in raw for k in SECTIONS):
        return
    what = next((FOREIGN[k] for k in raw if k in FOREIGN), None)
    keys = ", ".join(map(str, list(raw)[:6])) or "none"
    raise ValueError(f"not a vLLM-SR configuration: it has no version and none of the sections migrate reads "
                     f"({', '.join(SECTIONS)}, or the flat layout's {', '.join(FLAT_KEYS)}); its top-level keys: "
                     f"{keys}" + (f"; it looks like {what}, which has no vLLM-SR equivalent to migrate from: "
                                  "write providers.models and recipes by hand" if what else ""))


def dump(document: dict) -> str:
    """The document as YAML, in its own key order, the same bytes on every run."""
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)
