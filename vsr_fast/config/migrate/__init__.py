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
    notes = Notes()
    doc = rewrite_document(raw, notes, target or Target())
    doc = fit(doc, RouterConfig, "", notes, target.plugins if target else None)
    return Migrated(doc, notes.items)


def dump(document: dict) -> str:
    """The document as YAML, in its own key order, the same bytes on every run."""
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)
