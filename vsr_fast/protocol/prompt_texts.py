"""Every text a request carries to the model: what an estimate of its input tokens is made of.

count_tokens' estimate counts these texts' WordPiece tokens; the usage meter's estimate of an answer that
reported none (``stream_usage: false``) counts their bytes. One list for both, so neither under-counts a
request that carries its bulk outside the messages: tool definitions (Chat's legacy functions are tools in the
conversation), earlier tool calls' arguments (a legacy ``function_call`` is one), and a structured output's
schema (Chat's response_format, Responses' text.format).
"""
from __future__ import annotations

import msgspec

from .translate import Conversation, chat_messages

_JSON = msgspec.json.Encoder()


def conversation_texts(conv: Conversation) -> list[str]:
    """Every text ``conv`` carries to the model, empty ones left out; images and documents carry none."""
    texts: list[str] = []
    for m in chat_messages(conv):
        texts.append(m.text())
        texts += [part for call in m.tool_calls or () for part in (call.function.name, call.function.arguments)]
    for tool in conv.tools:
        texts += [tool.name, tool.description or "", _JSON.encode(tool.parameters or {}).decode()]
    if conv.response_format:
        texts.append(_JSON.encode(conv.response_format).decode())
    return [t for t in texts if t]


def text_bytes(conv: Conversation) -> int:
    """The UTF-8 size of ``conversation_texts``: the basis of the four-bytes-a-token estimate."""
    return sum(len(t.encode()) for t in conversation_texts(conv))


__all__ = ["conversation_texts", "text_bytes"]
