"""Helpers every protocol's reader and writer shares."""
from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable, Iterable

import msgspec

from ...errors import UpstreamAnswer
from ..chat import TOP_LEVEL_DECODER
from ._losses import Loss, dropped

_DATA_URL = re.compile(r"data:([^;,]*)(;[^,]*)?,(.*)", re.S)
_JSON = msgspec.json.Decoder()
ENCODER = msgspec.json.Encoder()

NewId = Callable[[str], str]


def new_id(prefix: str) -> str:
    """A fresh id like OpenAI's and Anthropic's: ``resp_`` + 32 hex digits."""
    return f"{prefix}{uuid.uuid4().hex}"


def unknown_fields(raw: bytes, known: Iterable[str]) -> list[Loss]:
    """A loss per top-level field of ``raw`` that the translation does not carry."""
    try:
        keys = TOP_LEVEL_DECODER.decode(raw).keys()
    except msgspec.DecodeError:
        return []
    known = set(known)
    return [dropped(key) for key in keys if key not in known]


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a base64 ``data:`` URL, else None."""
    m = _DATA_URL.fullmatch(url)
    if m is None or "base64" not in (m.group(2) or ""):
        return None
    return m.group(1) or "application/octet-stream", m.group(3)


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def text_to_b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def parse_arguments(arguments: str) -> dict | None:
    """A tool call's JSON arguments as an object, or None if they are not one."""
    if not arguments.strip():
        return {}
    try:
        value = _JSON.decode(arguments)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def dumps(value: object) -> str:
    return ENCODER.encode(value).decode()


def upstream_error(status: int, message: str, code: str | None, type_: str | None) -> UpstreamAnswer:
    """A backend's error answer, as an error of ours the client adapter can render."""
    return UpstreamAnswer(message, status=status, code=code, type_=type_)


class _OpenAIError(msgspec.Struct):
    message: str = ""
    type: str | None = None
    code: str | int | None = None


class _AnthropicError(msgspec.Struct):
    message: str = ""
    type: str | None = None


class _AnyError(msgspec.Struct):
    error: _OpenAIError | str | None = None
    type: str | None = None


def read_error(status: int, body: bytes) -> UpstreamAnswer:
    """Any backend's error body (OpenAI's or Anthropic's shape, or text) as one of our errors."""
    try:
        doc = msgspec.json.decode(body, type=_AnyError)
    except (msgspec.DecodeError, msgspec.ValidationError):
        text = body[:500].decode("utf-8", "replace").strip() or f"upstream answered HTTP {status}"
        return upstream_error(status, text, None, None)
    err = doc.error
    if isinstance(err, str):
        return upstream_error(status, err, None, None)
    if err is None:
        return upstream_error(status, f"upstream answered HTTP {status}", None, None)
    kind = err.type
    code = str(err.code) if err.code is not None else None
    if doc.type == "error":   # Anthropic: the type is the code
        code = {"overloaded_error": "overloaded", "rate_limit_error": "rate_limited"}.get(kind or "", kind)
        kind = "invalid_request_error" if status < 500 else "upstream_error"
    return upstream_error(status, err.message or f"upstream answered HTTP {status}", code, kind)
