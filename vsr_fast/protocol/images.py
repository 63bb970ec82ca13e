"""OpenAI Images wire types (``POST /v1/images/generations``)."""
from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct


class ImagesRequest(Struct, frozen=True, omit_defaults=True):
    """The fields of an image generation request that routing and translation read."""

    prompt: Annotated[str, Meta(min_length=1)]
    model: str = ""
    n: Annotated[int, Meta(ge=1, le=10)] | None = None
    size: str | None = None
    quality: str | None = None
    style: str | None = None
    response_format: Literal["url", "b64_json"] | None = None
    output_format: str | None = None
    background: str | None = None
    user: str | None = None
    stream: bool = False


class Image(Struct, frozen=True, omit_defaults=True):
    """One generated image: a URL or base64 data, never both in practice."""

    url: str | None = None
    b64_json: str | None = None
    revised_prompt: str | None = None


class InputTokensDetails(Struct, frozen=True):
    text_tokens: int = 0
    image_tokens: int = 0


class Usage(Struct, frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    input_tokens_details: InputTokensDetails = InputTokensDetails()


class ImagesResponse(Struct, frozen=True, omit_defaults=True):
    created: int
    data: list[Image] = msgspec.field(default_factory=list)
    usage: Usage | None = None


REQUEST_DECODER = msgspec.json.Decoder(ImagesRequest)
RESPONSE_DECODER = msgspec.json.Decoder(ImagesResponse)
ENCODER = msgspec.json.Encoder()
