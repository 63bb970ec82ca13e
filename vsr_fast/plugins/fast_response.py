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


def chat_completion(message: str, model: str, n: int = 1) -> bytes:
    """The message as a whole Chat Completion: ``n`` choices (a Chat client's ``n``), each the message."""
    return msgspec.json.encode({
        "id": f"chatcmpl-fast-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
        "model": model, "choices": [{"index": i, "message": {"role": "assistant", "content": message},
                                     "finish_reason": "stop"} for i in range(n)],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })


def chat_stream(message: str, model: str, n: int = 1) -> bytes:
    """The message as a Chat Completions SSE stream: each of the ``n`` choices' role, content and finish, then
    usage, [DONE]."""
    ident, created = f"chatcmpl-fast-{uuid.uuid4().hex[:12]}", int(time.time())

    def chunk(choices: list, usage: dict | None = None) -> bytes:
        body: dict = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": choices}
        if usage is not None:
            body["usage"] = usage
        return b"data: " + msgspec.json.encode(body) + b"\n\n"

    def choice(i: int, delta: dict, finish: str | None = None) -> list:
        return [{"index": i, "delta": delta, "finish_reason": finish}]

    out = b"".join(chunk(choice(i, {"role": "assistant", "content": ""})) + chunk(choice(i, {"content": message}))
                   + chunk(choice(i, {}, "stop")) for i in range(n))
    return out + chunk([], {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}) + b"data: [DONE]\n\n"
