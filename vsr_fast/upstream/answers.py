"""What a backend's answer must be before it reaches a client: a final status the router can relay, a success
body of its protocol's top-level shape, a bounded size, and error bodies without the router's own credential.

The shape check decodes only each protocol's one required list (msgspec skips every other field without
building it), so it costs a JSON scan of the body (bench/RESULTS.md, "upstream answer check").
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import msgspec

from ..errors import UpstreamInvalid, UpstreamTooLarge
from .transport import Response

log = logging.getLogger("vsr_fast.upstream")

# 1xx never reach here (the HTTP parser consumes them); 3xx would need following, which the router never does.
RELAYABLE = frozenset(range(200, 300)) | frozenset(range(400, 600))
# An error body relayed past this is replaced by a short one of the same protocol: a client needs the
# status and a line, not a megabyte of a backend's page.
MAX_ERROR_BODY = 16 * 1024
REDACTED = b"[redacted]"


class _Chat(msgspec.Struct):
    choices: list[msgspec.Raw]


class _Messages(msgspec.Struct):
    content: list[msgspec.Raw]


class _Responses(msgspec.Struct):
    output: list[msgspec.Raw]


class _Images(msgspec.Struct):
    data: list[msgspec.Raw]


class _Counted(msgspec.Struct):
    input_tokens: int


# By the path the request went to under the backend's base: what answers there must hold.
_SHAPES = {"/chat/completions": msgspec.json.Decoder(_Chat), "/messages": msgspec.json.Decoder(_Messages),
           "/responses": msgspec.json.Decoder(_Responses), "/images/generations": msgspec.json.Decoder(_Images),
           "/messages/count_tokens": msgspec.json.Decoder(_Counted)}


def check_status(status: int, label: str) -> None:
    """UpstreamInvalid unless ``status`` is a success or an error the client may see."""
    if status not in RELAYABLE:
        kind = "a redirect, which the router does not follow" if 300 <= status < 400 else "not a status it relays"
        raise UpstreamInvalid(f"backend {label} answered HTTP {status}: {kind}")


def check_shape(path: str, body: bytes, label: str) -> None:
    """UpstreamInvalid unless a success ``body`` from ``path`` is JSON of the top-level shape answers there have."""
    decoder = _SHAPES.get(path)
    if decoder is None:
        return
    try:
        decoder.decode(body)
    except msgspec.DecodeError as exc:   # ValidationError included
        raise UpstreamInvalid(f"backend {label} answered 2xx with a body that is not an answer of {path}: "
                              f"{exc}") from None


async def read_bounded(resp: Response, limit: int, label: str) -> bytes:
    """The whole body of ``resp``, read in chunks; UpstreamTooLarge as soon as it is known to pass ``limit``."""
    declared = resp.header(b"content-length")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(label, limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.chunks():
        size += len(chunk)
        if size > limit:
            raise _too_large(label, limit)
        chunks.append(chunk)
    return b"".join(chunks)


class Bounded:
    """``chunks`` until ``limit`` bytes in all (``already`` counted), then UpstreamTooLarge. A class, not an
    async generator: the relay may drop it unfinished, and it holds nothing to finalize."""

    __slots__ = ("_chunks", "_label", "_limit", "_size")

    def __init__(self, chunks: AsyncIterator[bytes], limit: int, label: str, already: int) -> None:
        self._chunks, self._limit, self._label, self._size = chunks, limit, label, already

    def __aiter__(self) -> "Bounded":
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._chunks.__anext__()
        self._size += len(chunk)
        if self._size > self._limit:
            raise _too_large(self._label, self._limit)
        return chunk


def _too_large(label: str, limit: int) -> UpstreamTooLarge:
    return UpstreamTooLarge(f"backend {label} answered more than {limit} bytes")


def sanitized(body: bytes, secret: bytes | None, api_format: str, status: int, label: str) -> bytes:
    """An error body safe to relay: the backend's own key never in it, and at most MAX_ERROR_BODY bytes
    (past that, a short error of the same protocol). The original goes to the DEBUG log, key removed."""
    if secret:
        body = body.replace(secret, REDACTED)
    log.debug("backend %s answered HTTP %d with %d bytes: %r", label, status, len(body), body)
    if len(body) <= MAX_ERROR_BODY:
        return body
    message = f"backend {label} answered HTTP {status} with an error body of {len(body)} bytes, not relayed"
    if api_format == "anthropic":
        kind = "invalid_request_error" if status < 500 else "api_error"
        return msgspec.json.encode({"type": "error", "error": {"type": kind, "message": message}})
    return msgspec.json.encode({"error": {"message": message, "type": "upstream_error", "param": None,
                                          "code": None}})
