"""``system_prompt``: insert or replace the system prompt of the provider-bound request (spec 5.7).

``insert`` puts the configured prompt ahead of the caller's own (which stays);
``replace`` removes the caller's system instructions and sends only the
configured one, followed by the context the ``context`` plugin placed in the
system prompt (spec 5.7: context reaches the model; the table lists context
ahead of system_prompt, so the context plugin runs first and replace must keep
what it placed). The v0.3 ``append`` replaced the caller's prompt: it is
refused with what to write instead. Written in each target ``api_format``'s
own field: Chat ``system`` messages, Messages ``system``, Responses
``instructions``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from ..config.schema_base import Block
from ._merge import merged_fields

TYPE = "system_prompt"
_SYSTEM_ROLES = ("system", "developer")


class SystemPromptConfig(Block):
    """``{type: system_prompt, configuration: {enabled, mode, system_prompt}}`` at one layer."""

    enabled: bool | UnsetType = UNSET
    mode: Literal["insert", "replace"] | UnsetType = UNSET
    system_prompt: Annotated[str, Meta(min_length=1)] | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    mode: str
    text: str

    def apply(self, body: dict[str, Any], api_format: str, context: tuple[str, ...] = ()) -> str | None:
        """Rewrite ``body`` in place; what changed, for the replay record (None: nothing). ``context``: the
        texts the context plugin placed in the system prompt, which a replace puts back after its own."""
        prompt = self
        if self.mode == "replace" and context:
            prompt = SystemPrompt(self.mode, "\n\n".join((self.text, *context)))
        if api_format == "openai":
            _chat(body, prompt)
        elif api_format == "anthropic":
            _messages(body, prompt)
        elif api_format == "responses":
            _responses(body, prompt)
        else:
            return None
        if prompt is self:
            return f"{self.mode} ({len(self.text)} chars)"
        return f"{self.mode} ({len(self.text)} chars), the injected context kept after it"


def resolve(*layers: SystemPromptConfig | None) -> SystemPrompt | None:
    """The prompt a request gets, layers lowest first; None when off or never configured."""
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False or "system_prompt" not in values:
        return None
    return SystemPrompt(values.get("mode", "insert"), values["system_prompt"])


def check(raw: dict, path: str) -> list[str]:
    """Load errors the block's type cannot say: the removed ``append`` mode."""
    if raw.get("mode") == "append":
        return [f"{path}.mode: removed_field: mode append was removed (it replaced the caller's prompt); "
                "write mode: replace, or mode: insert to keep the caller's prompt"]
    return []


def _chat(body: dict, prompt: SystemPrompt) -> None:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if prompt.mode == "replace":
        messages = [m for m in messages if m.get("role") not in _SYSTEM_ROLES]
    body["messages"] = [{"role": "system", "content": prompt.text}, *messages]


def _messages(body: dict, prompt: SystemPrompt) -> None:
    current = body.get("system")
    if prompt.mode == "replace" or not current:
        body["system"] = prompt.text
    elif isinstance(current, str):
        body["system"] = f"{prompt.text}\n\n{current}"
    else:
        body["system"] = [{"type": "text", "text": prompt.text}, *current]


def _responses(body: dict, prompt: SystemPrompt) -> None:
    current = body.get("instructions")
    if prompt.mode == "replace":
        body["instructions"] = prompt.text
        items = body.get("input")
        if isinstance(items, list):
            body["input"] = [i for i in items if not (isinstance(i, dict) and i.get("role") in _SYSTEM_ROLES)]
    else:
        body["instructions"] = f"{prompt.text}\n\n{current}" if current else prompt.text
