"""What the router that runs a migrated file loads: migrate fits its output to it (``fit``)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """What this router loads, from the layers above config: plugin type -> configuration Struct, the built-in
    model artifacts, and the labels of the presets whose labels a rule lists (pii, domain)."""

    plugins: dict[str, type] = field(default_factory=dict)
    artifacts: frozenset[str] = frozenset()
    preset_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The presets this router's built-in decision models do not answer: a rule a rewrite would write for one
    # fails to load (spec 5.2), and a migrated file must load (spec 5.11), so the rewrite is dropped with a note.
    unanswered: frozenset[str] = frozenset()
