"""A decision's output contract (spec 5.8): the Struct, its load checks, its run-time rules.

Pure functions over plain data, so the schema, the load checks and the server
each call them without importing one another:

- load: ``output_capability_missing`` (every referenced model declares what
  the contract needs) and ``output_not_executable`` (v0.5 can execute the
  kind, action, algorithm and model API), each returning
  ``<path>: <code>: <message>`` lines like ``checks.py``;
- run time: ``image_route_required`` (the Images API entry),
  ``unsupported_capability`` (a Chat or Messages client of an image decision)
  and ``image_generation_forbidden`` (``tool_choice: none`` on an image-only
  decision), each returning the error to raise or None; ``refusal`` applies
  the three in order, and ``image_tool_plan`` says whether the Router adds and
  forces the Responses ``image_generation`` tool.

Model facts come only from ``capabilities`` and ``modalities {input, output}``
(``ModelFacts``); ``vision`` is read as ``image_input``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NamedTuple

from msgspec import Meta

from ..errors import ImageGenerationForbidden, ImageRouteRequired, OutputRefused, UnsupportedCapability
from .schema_base import Block

Kind = Literal["text", "image", "audio", "video"]
Action = Literal["generate", "edit"]
CLIENT_APIS = frozenset({"chat", "messages", "responses", "images"})
# Executors call several candidates whose answers are text (spec 5.6).
EXECUTOR_ALGORITHMS = frozenset({"escalate", "fusion", "remom", "ratings", "workflows"})
_ALIASES = {"vision": "image_input"}


class Output(Block):
    """``decisions[].output``: what the decision's answers carry. Absent means text."""

    kind: Kind | Annotated[list[Kind], Meta(min_length=1)] = "text"
    action: Action = "generate"

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset([self.kind] if isinstance(self.kind, str) else self.kind)


TEXT = Output()


def kinds_of(output: Output | None) -> frozenset[str]:
    return (output or TEXT).kinds


def is_image_decision(output: Output | None) -> bool:
    return "image" in kinds_of(output)


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What a provider model declares. ``inputs``/``outputs`` None: modalities not declared."""

    name: str
    api_format: str = "openai"
    capabilities: frozenset[str] = frozenset()
    inputs: frozenset[str] | None = None
    outputs: frozenset[str] | None = None

    @classmethod
    def of(cls, name: str, api_format: str = "openai", capabilities: Sequence[str] = (),
           modalities: Mapping[str, Sequence[str]] | None = None) -> "ModelFacts":
        """From config-shaped data: ``capabilities`` list and ``modalities {input, output}``."""
        caps = frozenset(_ALIASES.get(c, c) for c in capabilities)
        mods = modalities or {}
        ins, outs = mods.get("input"), mods.get("output")
        return cls(name, api_format, caps, frozenset(ins) if ins is not None else None,
                   frozenset(outs) if outs is not None else None)

    def declares(self, need: str) -> bool:
        """Whether the model declares one capability the output contract can need."""
        if need in self.capabilities:
            return True
        medium, _, direction = need.partition("_")
        if need == "image_generation":
            medium, direction = "image", "output"
        if need == "text_output":
            return self._outputs_text()
        declared = self.outputs if direction == "output" else self.inputs
        return declared is not None and medium in declared

    def _outputs_text(self) -> bool:
        # Declared output modalities decide; otherwise a model outputs text unless its
        # capabilities name only non-text outputs (an image-only model without "chat").
        if self.outputs is not None:
            return "text" in self.outputs
        media = {"image_generation", "audio_output", "video_output"}
        return "chat" in self.capabilities or not (self.capabilities & media)


def required_capabilities(output: Output | None) -> list[str]:
    """The capabilities a contract needs of each model, in the spec's order."""
    output = output or TEXT
    edit = output.action == "edit"
    needs: list[str] = []
    for kind in ("text", "image", "audio", "video"):
        if kind not in output.kinds:
            continue
        needs += {"text": ["text_output"],
                  "image": ["image_generation", "image_input"] if edit else ["image_generation"],
                  "audio": ["audio_output"],
                  "video": ["video_output", "video_input"] if edit else ["video_output"]}[kind]
    return needs


# --- load checks -------------------------------------------------------------------------------


def output_capability_missing(path: str, output: Output | None, model_refs: Sequence[str],
                              models: Mapping[str, ModelFacts]) -> list[str]:
    """A line per referenced model and capability it lacks; ``path`` is the decision's.

    Undeclared model names are left to the reference check.
    """
    lines = []
    for i, name in enumerate(model_refs):
        facts = models.get(name)
        if facts is None:
            continue
        for need in required_capabilities(output):
            if not facts.declares(need):
                lines.append(f"{path}.modelRefs[{i}]: output_capability_missing:{need}: model {name!r} "
                             f"does not declare {need} {_HOW[need]}")
    return lines


_HOW = {
    "text_output": "(its modalities.output leaves out text)",
    "image_generation": "(in capabilities, or image in modalities.output)",
    "image_input": "(in capabilities, vision, or image in modalities.input)",
    "audio_output": "(in capabilities, or audio in modalities.output)",
    "video_output": "(in capabilities, or video in modalities.output)",
    "video_input": "(in capabilities, or video in modalities.input)",
}


def output_not_executable(path: str, output: Output | None, algorithm: str | None,
                          model_refs: Sequence[str], models: Mapping[str, ModelFacts]) -> list[str]:
    """A line per part of the contract v0.5 cannot execute: the codec, executor or model API it needs."""
    if output is None:
        return []
    kinds = output.kinds
    lines = []
    where = f"{path}.output"
    if "audio" in kinds:
        lines.append(f"{where}: output_not_executable: audio output needs the audio output codec (phase 2)")
    if "video" in kinds:
        lines.append(f"{where}: output_not_executable: video output needs the video codec (phase 3)")
    if "image" in kinds and output.action == "edit":
        lines.append(f"{where}: output_not_executable: image edits need the image edit codec (phase 2)")
    if kinds != {"text"} and algorithm in EXECUTOR_ALGORITHMS:
        lines.append(f"{path}.algorithm: output_not_executable: the {algorithm} executor's model calls answer "
                     f"in text only, so it cannot produce {_kind_text(output)}")
    if "image" in kinds:
        allowed = ("responses",) if "text" in kinds else ("images", "responses")
        for i, name in enumerate(model_refs):
            facts = models.get(name)
            if facts is not None and facts.api_format not in allowed:
                lines.append(f"{path}.modelRefs[{i}]: output_not_executable: model {name!r} speaks api_format "
                             f"{facts.api_format}, which cannot carry {_kind_text(output)}; "
                             f"it needs api_format {' or '.join(allowed)}")
    return lines


def _kind_text(output: Output) -> str:
    kinds = sorted(output.kinds, key=["text", "image", "audio", "video"].index)
    return " and ".join(kinds) + " output"


# --- run time -----------------------------------------------------------------------------------


def image_route_required(client_api: str, output: Output | None) -> ImageRouteRequired | None:
    """The Images API entry needs an image decision: ``output`` None means none matched
    (or the request named a model directly)."""
    if client_api != "images" or is_image_decision(output):
        return None
    return ImageRouteRequired("image_route_required: this request reached no image decision, so no model "
                              "may generate its image")


def unsupported_capability(client_api: str, output: Output | None) -> UnsupportedCapability | None:
    """Chat Completions and Messages cannot return an image."""
    if client_api not in ("chat", "messages") or not is_image_decision(output):
        return None
    api = {"chat": "Chat Completions", "messages": "Messages"}[client_api]
    return UnsupportedCapability(f"unsupported_capability: the decision answers with {_kind_text(output)}, "
                                 f"which the {api} API cannot return; use the Responses or Images API")


def image_generation_forbidden(client_api: str, output: Output | None,
                               tool_choice: Any) -> ImageGenerationForbidden | None:
    """An image-only decision must call the image_generation tool; ``tool_choice: none`` forbids it."""
    if client_api != "responses" or kinds_of(output) != {"image"} or tool_choice != "none":
        return None
    return ImageGenerationForbidden("image_generation_forbidden: the decision answers with an image only, and "
                                    "tool_choice none forbids the image_generation tool", param="tool_choice")


def refusal(client_api: str, output: Output | None, tool_choice: Any = None) -> OutputRefused | None:
    """The first run-time rule that refuses the request, or None."""
    return (image_route_required(client_api, output) or unsupported_capability(client_api, output)
            or image_generation_forbidden(client_api, output, tool_choice))


class ImageToolPlan(NamedTuple):
    add_tool: bool     # append {"type": "image_generation"} to the request's tools
    force_tool: bool   # set tool_choice {"type": "image_generation"}


def image_tool_plan(client_api: str, output: Output | None, tool_types: Sequence[str],
                    tool_choice: Any) -> ImageToolPlan:
    """For a Responses request entering an image decision: add the image_generation tool when
    the request lacks it, and force it when the decision is image-only and tool_choice is open."""
    if client_api != "responses" or not is_image_decision(output):
        return ImageToolPlan(False, False)
    add = "image_generation" not in tool_types
    force = kinds_of(output) == {"image"} and tool_choice in (None, "auto")
    return ImageToolPlan(add, force)
