"""Helpers every protocol's reader and writer shares."""
from __future__ import annotations

import base64
import hashlib
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Literal

import msgspec

from ...errors import UpstreamAnswer
from ..anthropic import CONTEXT_EXCEEDED, PROMPT_TOO_LONG, context_overflow
from ..chat import TOP_LEVEL_DECODER
from ..error_types import openai_type
from ._ir import Conversation, Image, Text, ToolResult
from ._losses import Loss, dropped

_DATA_URL = re.compile(r"data:([^;,]*)(;[^,]*)?,(.*)", re.S)
_JSON = msgspec.json.Decoder()
ENCODER = msgspec.json.Encoder()

NewId = Callable[[str], str]


def new_id(prefix: str) -> str:
    """A fresh id like OpenAI's and Anthropic's: ``resp_`` + 32 hex digits."""
    return f"{prefix}{uuid.uuid4().hex}"


def native_id(prefix: str, answer_id: str) -> str:
    """An answer's id as the client's protocol spells it (``msg_``, ``chatcmpl-``): an id of another protocol's
    backend keeps its own after the prefix, to be found in that backend's logs; none, a fresh one."""
    if not answer_id:
        return new_id(prefix)
    return answer_id if answer_id.startswith(prefix) else prefix + answer_id


_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
NAME_LIMIT = 64   # OpenAI's and Anthropic's tool names: ^[a-zA-Z0-9_-]{1,64}$


def safe_token(text: str, limit: int | None = None) -> str:
    """``text`` within ``^[a-zA-Z0-9_-]{1,limit}$``: itself when it is already, else its other characters made
    ``_``, cut short, and ``_`` + 8 hex digits of its hash appended, so that the same text always gives the same
    token and two texts that differ only where they were changed still give two."""
    if text and (limit is None or len(text) <= limit) and _UNSAFE.search(text) is None:
        return text
    mark = "_" + hashlib.sha256(text.encode()).hexdigest()[:8]
    kept = _UNSAFE.sub("_", text)
    return (kept if limit is None else kept[:limit - len(mark)]) + mark


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


# What a tool result Anthropic marks ``is_error`` says first where the target protocol has no such flag.
ERROR_MARK = "Error: "


def error_text(texts: list[str]) -> str:
    """A failed tool's result text, marked as an error for a protocol without ``is_error``."""
    return ERROR_MARK + "\n".join(texts)


def dumps(value: object) -> str:
    return ENCODER.encode(value).decode()


def upstream_error(status: int, message: str, code: str | None, type_: str | None,
                   param: str | None = None) -> UpstreamAnswer:
    """A backend's error answer, as an error of ours the client adapter can render."""
    return UpstreamAnswer(message, status=status, code=code, type_=type_, param=param)


class _OpenAIError(msgspec.Struct):
    message: str = ""
    type: str | None = None
    code: str | int | None = None
    param: Any = None


class _AnthropicError(msgspec.Struct):
    message: str = ""
    type: str | None = None


class _AnyError(msgspec.Struct):
    error: _OpenAIError | str | None = None
    type: Any = None
    object: Any = None
    message: Any = None     # an old vLLM's {"object": "error", "message": ...}
    detail: Any = None      # FastAPI's {"detail": ...}


# An error already in a protocol's own shape, one its SDK reads as it is: OpenAI's {"error": {"message": ...}}
# (Chat, Responses, Images) and Anthropic's {"type": "error", "error": {"type": ..., "message": ...}}.
class _OpenAIShape(msgspec.Struct):
    message: str
    type: str | None = None
    code: str | int | None = None
    param: str | None = None


class _OpenAIErrorShape(msgspec.Struct, forbid_unknown_fields=True):
    error: _OpenAIShape     # alone: beside a "type", it is Anthropic's shape


class _AnthropicShape(msgspec.Struct):
    type: str
    message: str


class _AnthropicErrorShape(msgspec.Struct):
    type: Literal["error"]
    error: _AnthropicShape


_ERROR_SHAPES = {"anthropic": msgspec.json.Decoder(_AnthropicErrorShape)}
_OPENAI_ERROR_SHAPE = msgspec.json.Decoder(_OpenAIErrorShape)
# A backend's own words, kept in the client's error up to this many characters (a stack trace is longer).
_SAID_MAX = 500


def is_error_of(api_format: str, body: bytes, status: int = 0) -> bool:
    """Whether ``body`` is an error object of ``api_format``'s own shape, which its SDK reads as it is: not an
    OpenAI-shaped context overflow without OpenAI's code (vLLM's is 400), which is read and given it."""
    try:
        doc = _ERROR_SHAPES.get(api_format, _OPENAI_ERROR_SHAPE).decode(body)
    except msgspec.DecodeError:    # ValidationError included
        return False
    return not (isinstance(doc, _OpenAIErrorShape) and doc.error.code != CONTEXT_EXCEEDED
                and context_overflow(status, doc.error.message))


def _said(detail: object) -> object:
    """FastAPI's ``detail``: a string as it is, a validation error list (``{"loc": [...], "msg": ...}`` each) as
    ``body.temperature: bad temperature; ...``, an object's ``msg`` or ``message``; else None."""
    if isinstance(detail, dict):
        detail = [detail]
    if not isinstance(detail, list):
        return detail
    said = []
    for item in detail:
        if isinstance(item, str):
            said.append(item)
        elif isinstance(item, dict):
            msg = item.get("msg", item.get("message"))
            if isinstance(msg, str):
                loc = item.get("loc")
                where = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
                said.append(f"{where}: {msg}" if where else msg)
    return "; ".join(said) or None


def _answered(status: int, body: bytes, content_type: str, said: object = None) -> str:
    """What an upstream answered when its body holds no error object: its status and content type, and the
    text of a ``message`` or ``detail`` field or of a plain-text body; never an HTML page or other markup."""
    if not body.strip():
        return f"the upstream answered HTTP {status} with an empty body"
    kind = content_type.split(";")[0].strip().lower() or "no content type"
    if said is None and kind == "text/plain":
        said = body[:_SAID_MAX].decode("utf-8", "replace")
    text = f"the upstream answered HTTP {status} ({kind}) with no error object of its API"
    return f"{text}: {said.strip()[:_SAID_MAX]}" if isinstance(said, str) and said.strip() else text


def read_error(status: int, body: bytes, content_type: str = "") -> UpstreamAnswer:
    """Any backend's error body (OpenAI's or Anthropic's shape, or anything else) as one of our errors."""
    try:
        doc = msgspec.json.decode(body, type=_AnyError)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return upstream_error(status, _answered(status, body, content_type), None, None)
    err = doc.error
    if isinstance(err, str):
        return upstream_error(status, err, None, None)
    if err is None and doc.object == "error" and isinstance(doc.message, str) and context_overflow(status, doc.message):
        return upstream_error(status, doc.message, CONTEXT_EXCEEDED, None)    # an old vLLM's, in its own words
    if err is None:
        said = doc.message if isinstance(doc.message, str) else _said(doc.detail)
        return upstream_error(status, _answered(status, body, content_type, said), None, None)
    # A type the client's table would not give the status says what the error was: kept, as the code.
    code = str(err.code) if err.code is not None else err.type if err.type != openai_type(status) else None
    param = err.param if isinstance(err.param, str) else None
    if doc.type == "error":   # Anthropic: the type is the code
        code = {"overloaded_error": "overloaded", "rate_limit_error": "rate_limited"}.get(err.type or "", err.type)
        if status == 400 and err.message.startswith(PROMPT_TOO_LONG):
            code = CONTEXT_EXCEEDED
    elif context_overflow(status, err.message):     # vLLM's code is 400: its words tell it, as OpenAI's SDKs read them
        code = CONTEXT_EXCEEDED
    # The type is the client API's for the status (protocol.error_types), whatever the backend called it.
    return upstream_error(status, err.message or f"upstream answered HTTP {status}", code, None, param)


# Reasoning effort (Chat's reasoning_effort, Responses' reasoning.effort) <-> Anthropic's extended thinking budget,
# LiteLLM's mapping: low 1,024 tokens (Anthropic's least), medium 2,048, high 4,096; minimal takes the least too,
# xhigh (above high, Codex's deepest) twice high's, and none is thinking off. Back, a budget is the effort whose
# budget it reaches, high at most (the effort every reasoning model takes).
EFFORT_BUDGET = {"minimal": 1024, "low": 1024, "medium": 2048, "high": 4096, "xhigh": 8192}


def effort_of_thinking(thinking: dict | None, losses: list[Loss]) -> str | None:
    """The reasoning effort an OpenAI-format backend gets for a Messages ``thinking``; None for none (thinking
    off, or not set). Adaptive thinking has the effort Claude Code gives it (``output_config.effort``, read into
    ``effort``; Anthropic's ``max`` is OpenAI's ``high``); without one, or an unknown kind: reported dropped."""
    if thinking is None or thinking.get("type") == "disabled":
        return None
    effort = thinking.get("effort")
    if thinking.get("type") == "adaptive" and isinstance(effort, str):
        return {"max": "high"}.get(effort, effort)
    budget = thinking.get("budget_tokens")
    if thinking.get("type") != "enabled" or not isinstance(budget, int):
        losses.append(dropped("thinking"))
        return None
    return "low" if budget < EFFORT_BUDGET["medium"] else "medium" if budget < EFFORT_BUDGET["high"] else "high"


def cache_losses(conv: Conversation) -> list[Loss]:
    """A Chat client's prompt-caching markers (on parts, messages and tools), each dropped, for a writer whose
    protocol has none: listed, never lost silently."""
    parts = [*conv.system]
    for turn in conv.turns:
        for p in turn.parts:
            parts += p.content if isinstance(p, ToolResult) else [p]
    return [*(dropped(p.cache_path or f"{p.path}.cache_control") for p in parts
              if isinstance(p, (Text, Image)) and p.cache_control is not None),
            *(dropped(f"{t.path}.cache_control") for t in conv.tools if t.cache_control is not None)]
