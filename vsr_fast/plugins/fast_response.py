"""``fast_response``: answer with a fixed message, without calling a model (spec 5.7).

The answer is written as an OpenAI Chat Completion (or its SSE stream) and
handed to the client's adapter, so every client API gets it in its own shape.
"""
from __future__ import annotations

import time
import uuid

import msgspec

from ..config.schema_base import Block


class FastResponseConfig(Block):
    """``{type: fast_response, configuration: {message}}``."""

    message: str


def chat_completion(message: str, model: str) -> bytes:
    """The message as a whole Chat Completion."""
    return msgspec.json.encode({
        "id": f"chatcmpl-fast-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
        "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": message},
                                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })


def chat_stream(message: str, model: str) -> bytes:
    """The message as a Chat Completions SSE stream: role, content, finish, usage, [DONE]."""
    ident, created = f"chatcmpl-fast-{uuid.uuid4().hex[:12]}", int(time.time())

    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
        body: dict = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else []}
        if usage is not None:
            body["usage"] = usage
        return b"data: " + msgspec.json.encode(body) + b"\n\n"

    return (chunk({"role": "assistant", "content": ""}) + chunk({"content": message}) + chunk({}, "stop")
            + chunk({}, usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}) + b"data: [DONE]\n\n")
