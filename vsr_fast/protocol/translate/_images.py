"""The Images API <-> Responses (and the neutral answer).

An image decision's model may speak the Images API or the Responses API
(spec 5.8): an Images client reaching a Responses model asks for the
``image_generation`` tool, and a Responses client reaching an Images model has
its last user turn sent as the prompt.
"""
from __future__ import annotations

import time

from .. import images as wire
from ._common import ENCODER
from ._ir import Answer, Conversation, GeneratedImage, Text, Usage
from ._losses import CONVERTED, Loss, dropped

PATH = "/images/generations"


def images_to_responses(req: wire.ImagesRequest, model: str) -> tuple[bytes, list[Loss]]:
    """An Images request as a Responses request that forces the image_generation tool."""
    losses: list[Loss] = []
    tool: dict = {"type": "image_generation"}
    for key in ("size", "quality", "background", "output_format"):
        value = getattr(req, key)
        if value is not None:
            tool[key] = value
    if req.n is not None and req.n > 1:
        losses.append(Loss(CONVERTED, "unsupported", "n"))   # one image_generation call, one image
    if req.style is not None:
        losses.append(dropped("style"))
    body: dict = {"model": model, "input": req.prompt, "tools": [tool],
                  "tool_choice": {"type": "image_generation"}, "store": False}
    if req.user is not None:
        body["user"] = req.user
    return ENCODER.encode(body), losses


def write_images_request(conv: Conversation, model: str, tool: dict | None) -> tuple[bytes, list[Loss]]:
    """A Responses client's request as an Images request: its last user turn is the prompt."""
    losses: list[Loss] = []
    users = [i for i, t in enumerate(conv.turns) if t.role == "user"]
    prompt_parts: list = conv.turns[users[-1]].parts if users else []
    for i, turn in enumerate(conv.turns):
        if not users or i != users[-1]:
            losses.append(dropped(turn.path, "history"))
    for p in prompt_parts:
        if not isinstance(p, Text):
            losses.append(dropped(p.path))   # generation reads text only; edits are a later codec
    if conv.system:
        losses.append(dropped("instructions"))
    losses += [dropped(t.path) for t in conv.tools]   # function tools: an image model calls none
    body: dict = {"model": model, "prompt": "\n".join(p.text for p in prompt_parts if isinstance(p, Text)),
                  "n": 1, "response_format": "b64_json"}
    for key in ("size", "quality", "background", "output_format"):
        if tool and tool.get(key) is not None:
            body[key] = tool[key]
    if conv.user is not None:
        body["user"] = conv.user
    return ENCODER.encode(body), losses


def read_answer(body: bytes) -> tuple[Answer, list[Loss]]:
    doc = wire.RESPONSE_DECODER.decode(body)
    parts = [GeneratedImage(d.b64_json, d.url, d.revised_prompt, f"data[{i}]") for i, d in enumerate(doc.data)]
    usage = Usage(doc.usage.input_tokens, doc.usage.output_tokens) if doc.usage else None
    return Answer(f"img_{doc.created}", "", parts, "stop", usage, doc.created), []


def write_answer(answer: Answer, req: wire.ImagesRequest) -> tuple[bytes, list[Loss]]:
    """A Responses answer's images as an Images answer; its text has nowhere to go."""
    losses: list[Loss] = []
    data: list[wire.Image] = []
    for p in answer.parts:
        if isinstance(p, GeneratedImage):
            data.append(wire.Image(url=p.url, b64_json=p.b64, revised_prompt=p.revised_prompt))
        else:
            losses.append(dropped(p.path))
    if req.response_format == "url" and any(d.url is None for d in data):
        losses.append(Loss(CONVERTED, "unsupported", "response_format"))   # base64 is all we have
    usage = None
    if answer.usage is not None:
        u = answer.usage
        usage = wire.Usage(u.input_tokens, u.output_tokens, u.input_tokens + u.output_tokens)
    doc = wire.ImagesResponse(answer.created or int(time.time()), data, usage)
    return ENCODER.encode(doc), losses
