"""The request plugins that rewrite a provider-bound request, run together in the spec's order (spec 5.7).

Applied once per candidate model, after route selection, on the request
already written in that candidate's ``api_format``: the body is decoded once,
each plugin edits it in place, and it is encoded once. A request with no such
plugin is never decoded again (same-protocol bytes stay as the client sent them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from .header_mutation import HeaderMutation
from .request_params import RequestParams
from .system_prompt import SystemPrompt

_DECODE = msgspec.json.Decoder()
_ENCODE = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Shaped:
    body: bytes
    headers: tuple[tuple[str, str], ...]
    changes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Shaping:
    """The resolved shaping plugins of one (recipe, decision): ``(type, policy)`` in order."""

    steps: tuple[tuple[str, Any], ...]

    def thinking(self) -> bool | None:
        """The decision's thinking switch (``request_params.generation.thinking``); None leaves the request's own."""
        for _, policy in self.steps:
            if isinstance(policy, RequestParams) and policy.generation is not None:
                return policy.generation.thinking
        return None

    def headers(self, headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """``headers`` after header_mutation alone: a body every other plugin wrote already (a shadow copy)."""
        out = list(headers)
        for _, policy in self.steps:
            if isinstance(policy, HeaderMutation):
                policy.apply(out)
        return tuple(out)

    def apply(self, body: bytes, api_format: str, headers: tuple[tuple[str, str], ...],
              reasoning: str | None = None, context: tuple[str, ...] = ()) -> Shaped:
        """The provider-bound body and headers after every plugin, with what each changed; ``reasoning`` is the
        model's reasoning syntax (``ProviderModel.reasoning``), which request_params' thinking is written in;
        ``context`` the texts the context plugin put in the system prompt (a system_prompt replace keeps them)."""
        changes: list[str] = []
        doc = None
        out_headers = list(headers)
        for type_, policy in self.steps:
            if isinstance(policy, HeaderMutation):
                change = policy.apply(out_headers)
            else:
                if doc is None:
                    doc = _DECODE.decode(body)
                    if not isinstance(doc, dict):
                        return Shaped(body, headers, ())
                # Only request_params writes reasoning fields, in the model's own syntax.
                extra = (reasoning,) if isinstance(policy, RequestParams) else (
                    (context,) if isinstance(policy, SystemPrompt) else ())
                change = policy.apply(doc, api_format, *extra)
            if change:
                changes.append(f"{type_}: {change}")
        new_body = _ENCODE.encode(doc) if doc is not None and changes else body
        return Shaped(new_body, tuple(out_headers), tuple(changes))
