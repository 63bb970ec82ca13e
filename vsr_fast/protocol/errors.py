"""Error bodies in the client protocol's own shape, and request decode errors with paths."""
from __future__ import annotations

import re

import msgspec

from ..errors import InvalidJson, InvalidType, InvalidUtf8, InvalidValue, RequestError, VsrError
from .chat import ENCODER, ErrorBody, ErrorResponse

_AT = re.compile(r" - at `\$(.*)`$")
# msgspec's type mismatch; its constraint failures ("Expected `int` >= 1") are values of the right type.
_WRONG_TYPE = re.compile(r"Expected `[^`]*`, got `[^`]*`")


def openai_error_body(exc: VsrError) -> bytes:
    """``{"error": {message, type, param, code}}`` as OpenAI sends it."""
    return ENCODER.encode(ErrorResponse(ErrorBody(exc.message, exc.type, exc.param, exc.code)))


def decode_error(exc: msgspec.DecodeError) -> RequestError:
    """Map a msgspec decode or validation error to a 400 naming the bad field's path."""
    text = str(exc)
    m = _AT.search(text)
    if isinstance(exc, msgspec.ValidationError):
        path = m.group(1).lstrip(".") if m else None
        message = _AT.sub("", text)
        missing = re.match(r"Object missing required field `([^`]*)`", message)
        if missing:
            path = f"{path}.{missing.group(1)}" if path else missing.group(1)
        where = f" at `{path}`" if path else ""
        kind = InvalidType if _WRONG_TYPE.match(message) else InvalidValue
        return kind(f"Invalid request body: {message}{where}", param=path or None)
    if "UTF-8" in text:
        return InvalidUtf8(f"Request body is not valid UTF-8: {text}")
    return InvalidJson(f"Request body is not valid JSON: {text}")
