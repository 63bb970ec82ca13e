"""Rewriting a request body for one upstream model without re-encoding the conversation."""
from __future__ import annotations

import msgspec

from .chat import ENCODER, TOP_LEVEL_DECODER


class ModelRewriter:
    """``body_for(model_name)``: the client's bytes with ``model`` replaced.

    The client's bytes go out untouched when the name already matches; other
    names cost one top-level decode (values stay raw JSON) shared by every
    fallback attempt, and one encode that copies the raw values.
    """

    __slots__ = ("_raw", "_client_model", "_top", "_cache")

    def __init__(self, raw: bytes, client_model: str) -> None:
        self._raw = raw
        self._client_model = client_model
        self._top: dict[str, msgspec.Raw] | None = None
        self._cache: dict[str, bytes] = {}

    def __call__(self, upstream_model: str) -> bytes:
        if upstream_model == self._client_model:
            return self._raw
        body = self._cache.get(upstream_model)
        if body is None:
            if self._top is None:
                self._top = TOP_LEVEL_DECODER.decode(self._raw)
            top = dict(self._top)
            top["model"] = msgspec.Raw(ENCODER.encode(upstream_model))
            body = self._cache[upstream_model] = ENCODER.encode(top)
        return body
