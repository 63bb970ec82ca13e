"""A backend's error ``param`` in the client's field names, for a translated request.

A backend names the field of the body it got (OpenAI Chat's ``"param": "messages"`` on a context overflow); when
that body was translated from another protocol's, the client never sent such a field: its SDK, and a person
reading the error, look for their own (``input``). Only OpenAI's two protocols have a ``param``; Anthropic's errors
name none. An indexed path keeps only its top field: the translation merges and splits turns, so an index of the
backend's body is not the client's.
"""
from __future__ import annotations

import re

# (backend format, client format) -> the backend's top-level field -> the client's.
_TOP = {
    ("openai", "responses"): {"messages": "input", "max_completion_tokens": "max_output_tokens",
                              "max_tokens": "max_output_tokens", "response_format": "text.format",
                              "reasoning_effort": "reasoning.effort", "verbosity": "text.verbosity"},
    ("responses", "openai"): {"input": "messages", "instructions": "messages", "max_output_tokens":
                              "max_completion_tokens", "text": "response_format", "reasoning": "reasoning_effort"},
}
_HEAD = re.compile(r"[A-Za-z_]+")


def client_param(backend: str, client: str, param: str | None) -> str | None:
    """``param`` of a ``backend``-format error in the ``client`` format's names: the same when both are one
    format, or the field is named alike in both; the client's top field for a path into a renamed one."""
    names = _TOP.get((backend, client))
    if not param or names is None:
        return param
    head = _HEAD.match(param)
    if head is None or head.group() not in names:
        return param
    return names[head.group()]
