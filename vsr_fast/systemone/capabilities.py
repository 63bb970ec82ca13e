"""What each deployment answers, resolved at load from its card, its configuration or the defaults."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from ..config.catalog import BUILTIN_DEPLOYMENTS, DEFAULT_ARTIFACT, Deployment, ModelCatalog
from .runtime import DecisionModel, ModelCard

# Built-in model_runtime artifacts: name -> "module:factory" returning a DecisionModel.
BUILTIN_ARTIFACTS = {"vsr-static-1": "vsr_fast.models.vsr_static:load_1",
                     "vsr-static-2": "vsr_fast.models.vsr_static:load_2",
                     "vsr-static-3": "vsr_fast.models.vsr_static:load_3",
                     "vsr-static-4": "vsr_fast.models.vsr_static:load_4",
                     "vsr-static-5": "vsr_fast.models.vsr_static:load_5",
                     "vsr-static-6": "vsr_fast.models.vsr_static:load_6",
                     "vsr-static-7": "vsr_fast.models.vsr_static:load_7",
                     "vsr-static-8": "vsr_fast.models.vsr_static:load_8",
                     "vsr-static-9": "vsr_fast.models.vsr_static:load_9",
                     "vsr-static-10": "vsr_fast.models.vsr_static:load_10",
                     "vsr-static-11": "vsr_fast.models.vsr_static:load_11",
                     # The contextual encoder (all-MiniLM-L6-v2 int8): needs the `contextual` extra.
                     "vsr-minilm-1": "vsr_fast.models.vsr_static:load_minilm_1"}

# A remote API that says nothing answers choice, yes/no and score over text (spec 5.9).
REMOTE_DEFAULT_TYPES = ("choice", "noul", "score")


@dataclass(frozen=True)
class Capable:
    """One deployment as the load checks see it."""

    name: str
    kind: str                          # embedded | attached | remote
    question_types: frozenset[str]
    modalities: frozenset[str]
    span_heads: frozenset[str] = frozenset()
    calibrated: dict[str, float] = field(default_factory=dict)
    model: str = ""                    # the model's name, for messages
    known: bool = True                 # False: an attached runtime, checked when its card is read
    validated_tokens: int | None = None
    trained_ids: dict[str, str] = field(default_factory=dict)
    presets: frozenset[str] | None = None   # the presets its card says it answers; None: the card says nothing
    span_labels: frozenset[str] | None = None   # the span labels its card says it marks; None: says nothing
    reads: dict[str, dict[str, list[str]]] | None = None   # the card's reads: the parts beyond the turn it reads


def deployments(catalog: ModelCatalog) -> dict[str, Deployment]:
    """Decision model deployments: declared over the pre-declared ones (declaring ``primary`` again replaces
    it). An ``openai_embeddings`` deployment answers no question, so it is none of them."""
    return {**BUILTIN_DEPLOYMENTS,
            **{name: dep for name, dep in catalog.deployments.items() if dep.provider != "openai_embeddings"}}


def load_model(artifact: str) -> DecisionModel:
    """Import and build an in-process model: a built-in name or ``module:factory``."""
    target = BUILTIN_ARTIFACTS.get(artifact, artifact)
    module_name, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"artifact {artifact!r} is neither a built-in model nor 'module:factory'")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory()


def from_card(name: str, kind: str, card: ModelCard) -> Capable:
    return Capable(name, kind, frozenset(card.question_types), frozenset(card.modalities),
                   frozenset(card.span_heads), dict(card.calibrated), card.name,
                   validated_tokens=card.validated_input_tokens, trained_ids=dict(card.trained_ids),
                   presets=frozenset(card.presets) if card.presets else None,
                   span_labels=frozenset(card.span_labels) if card.span_labels else None, reads=card.reads)


def resolve(name: str, dep: Deployment, models: dict[str, DecisionModel]) -> Capable:
    """Capabilities of one deployment; embedded models are built here (and kept in ``models``)."""
    if dep.provider == "systemone":
        caps = dep.capabilities
        types = frozenset(caps.question_types) if caps else frozenset(REMOTE_DEFAULT_TYPES)
        media = frozenset(caps.modalities) if caps else frozenset({"text"})
        return Capable(name, "remote", types, media, model=dep.model or "")
    if dep.endpoint:
        return Capable(name, "attached", frozenset(), frozenset(), known=False)
    model = models.get(name)
    if model is None:
        model = models[name] = load_model(dep.artifact or DEFAULT_ARTIFACT)
    return from_card(name, "embedded", model.card)
