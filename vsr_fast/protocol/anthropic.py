"""Anthropic Messages wire types (``POST /v1/messages``).

Like ``chat.py``: tolerant of fields we do not read, strict about the types of
the ones we do; a turn is strict as Anthropic is (``Message``), with the betas a
request names let through (``BetaMessage``). Request content blocks are read by their ``type`` (``AnyBlock``):
those translation reads strictly, any other well-formed one as it came (``OtherBlock``), for an Anthropic
backend to judge: Anthropic adds block types faster than a router can learn them.
Answers and stream events from a backend are decoded into loose Structs
(``Block``, ``Delta``) so that a block type added next month passes through
translation as a recorded loss instead of a decode error.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from ..errors import UpstreamAnswer, UpstreamStatus, VsrError
from .bounds import INT32_MAX, Count, PositiveCount
from .error_types import anthropic_type

API_VERSION = "2023-06-01"   # the anthropic-version header a translated request carries


# --- request -------------------------------------------------------------------------


class Base64Source(Struct, tag="base64", frozen=True):
    media_type: str
    data: str


class URLSource(Struct, tag="url", frozen=True):
    url: str


class FileSource(Struct, tag="file", frozen=True):
    file_id: str


class TextSource(Struct, tag="text", frozen=True):
    """A plain-text document source."""

    data: str
    media_type: str = "text/plain"


class ContentSource(Struct, tag="content", frozen=True):
    content: str | list[dict[str, Any]]


ImageSource = Base64Source | URLSource | FileSource
DocumentSource = Base64Source | URLSource | FileSource | TextSource | ContentSource


class CacheControl(Struct, frozen=True, omit_defaults=True):
    """A prompt-caching breakpoint, typed as Anthropic types it: a wrong shape is a 400 here, not Anthropic's."""

    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class AnyBlock:
    """A request content block of any type: what ``Message.content`` (and a tool_result's) lists. The types
    translation reads are decoded strictly (``KNOWN_BLOCKS``: a wrong field type is a 400 naming its path); any
    other well-formed block (``type`` a string: Anthropic adds some every month, ``tool_reference``,
    ``mcp_tool_use``, ``container_upload``...) is an ``OtherBlock``, which a backend of Anthropic's format gets as
    the client sent it and a translation drops, listed."""

    __slots__ = ()


class TextBlock(Struct, AnyBlock, tag="text", frozen=True):
    text: str
    cache_control: CacheControl | None = None


class ImageBlock(Struct, AnyBlock, tag="image", frozen=True):
    source: ImageSource
    cache_control: CacheControl | None = None


class DocumentBlock(Struct, AnyBlock, tag="document", frozen=True):
    source: DocumentSource
    title: str | None = None
    cache_control: CacheControl | None = None


class ToolUseBlock(Struct, AnyBlock, tag="tool_use", frozen=True):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None


class ToolResultBlock(Struct, AnyBlock, tag="tool_result", frozen=True):
    tool_use_id: str
    content: str | list[AnyBlock] | None = None
    is_error: bool = False
    cache_control: CacheControl | None = None


class ThinkingBlock(Struct, AnyBlock, tag="thinking", frozen=True):
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(Struct, AnyBlock, tag="redacted_thinking", frozen=True):
    data: str


class ServerToolUseBlock(Struct, AnyBlock, tag="server_tool_use", frozen=True):
    id: str
    name: str
    input: dict[str, Any]


class WebSearchResultBlock(Struct, AnyBlock, tag="web_search_tool_result", frozen=True):
    tool_use_id: str
    content: Any = None


class SearchResultBlock(Struct, AnyBlock, tag="search_result", frozen=True):
    """A search result a client (a RAG tool's result) gives the model to cite: its text carries elsewhere."""

    source: str
    title: str
    content: list[TextBlock]


class ToolReferenceBlock(Struct, AnyBlock, tag="tool_reference", frozen=True):
    """A deferred tool a tool search found (Claude Code's ToolSearch, beta ``advanced-tool-use-2025-11-20``),
    inside a tool_result: Anthropic loads that tool's definition for the model."""

    tool_name: str


class OtherBlock(Struct, AnyBlock, frozen=True):
    """A well-formed block of a type translation does not read: ``fields`` is the block as sent."""

    type: str
    fields: dict[str, Any]


ContentBlock = (
    TextBlock | ImageBlock | DocumentBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock
    | RedactedThinkingBlock | ServerToolUseBlock | WebSearchResultBlock | SearchResultBlock | ToolReferenceBlock
)
KNOWN_BLOCKS: dict[str, type] = {t.__struct_config__.tag: t for t in ContentBlock.__args__}
# AnyBlock stands for this union where errors.problem_of looks up the allowed values of a field.
AnyBlock.schema_type = ContentBlock
_JSON_TYPES = {str: "str", int: "int", float: "float", bool: "bool", list: "array", dict: "object",
               type(None): "null"}


def _block_hook(kind: type, value: Any) -> Any:
    """``value`` (a decoded JSON value) as an ``AnyBlock``. A ValueError names what is wrong in msgspec's words
    (``- at `$.field```): msgspec adds the block's own path after it, which ``errors.problem_of`` joins."""
    if kind is not AnyBlock:
        raise NotImplementedError       # msgspec's dec_hook protocol: "not a type this hook decodes", not a stub
    if not isinstance(value, dict):
        raise ValueError(f"Expected `object`, got `{_JSON_TYPES.get(type(value), 'value')}`")
    tag = value.get("type")
    if tag is None:
        raise ValueError("Object missing required field `type`")
    if not isinstance(tag, str):
        raise ValueError(f"Expected `str`, got `{_JSON_TYPES.get(type(tag), 'value')}` - at `$.type`")
    known = KNOWN_BLOCKS.get(tag)
    if known is None:
        return OtherBlock(tag, value)
    try:
        return msgspec.convert(value, known, dec_hook=_block_hook)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None


class Message(Struct, frozen=True, forbid_unknown_fields=True):
    """A turn; ``system`` is Claude Code's mid-conversation instruction (beta
    ``mid-conversation-system-2026-04-07``), carried in place where the target can. No other field: Anthropic
    refuses one (``messages.0.extra: Extra inputs are not permitted``) unless a beta adds it (``BetaMessage``)."""

    role: Literal["user", "assistant", "system"]
    content: str | list[AnyBlock]


class BetaMessage(Struct, frozen=True):
    """A turn of a request that names betas (``anthropic-beta``): the fields a beta adds to a turn (Claude
    Code's per-turn ``output_config``) pass, for the anthropic backend that receives them to judge."""

    role: Literal["user", "assistant", "system"]
    content: str | list[AnyBlock]


class Tool(Struct, frozen=True, omit_defaults=True):
    """A client tool (``type`` absent or ``custom``) or a server tool (any other ``type``)."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None
    strict: bool | None = None
    cache_control: CacheControl | None = None

    @property
    def is_client_tool(self) -> bool:
        return self.type in (None, "custom")


class _ToolChoice(Struct, frozen=True, omit_defaults=True, tag_field="type"):
    """One of Anthropic's tool_choice shapes, told apart by ``type``: a ``tool`` choice without the
    tool's ``name`` is refused at ``tool_choice.name``, as Anthropic refuses it."""

    disable_parallel_tool_use: bool | None = None

    @property
    def kind(self) -> str:
        return self.__struct_config__.tag


class ToolChoiceAuto(_ToolChoice, tag="auto", frozen=True):
    pass


class ToolChoiceAny(_ToolChoice, tag="any", frozen=True):
    pass


class ToolChoiceTool(_ToolChoice, tag="tool", frozen=True, kw_only=True):
    name: str


class ToolChoiceNone(_ToolChoice, tag="none", frozen=True):
    pass


ToolChoice = ToolChoiceAuto | ToolChoiceAny | ToolChoiceTool | ToolChoiceNone


# The thinking configurations of the anthropic SDK's ThinkingConfigParam (its beta one has the same types).
# Read by no one here (forwarded as sent, or reported dropped): typed so that a type Anthropic does not
# know is a 400 rather than silently ignored. Fields not declared (``display``'s values change) pass.
class _Thinking(Struct, frozen=True, omit_defaults=True, tag_field="type"):
    display: str | None = None


class ThinkingEnabled(_Thinking, tag="enabled", frozen=True, kw_only=True):
    budget_tokens: Annotated[int, Meta(ge=1024, le=INT32_MAX)]     # Anthropic's minimum (the SDK's docstring)


class ThinkingDisabled(_Thinking, tag="disabled", frozen=True):
    pass


class ThinkingAdaptive(_Thinking, tag="adaptive", frozen=True):
    pass


class ThinkingBetweenTools(_Thinking, tag="between_tools", frozen=True):
    pass


Thinking = ThinkingEnabled | ThinkingDisabled | ThinkingAdaptive | ThinkingBetweenTools


# --- extended thinking, as the router writes it -----------------------------------------------------------------

MIN_THINKING_BUDGET = 1024     # the smallest budget_tokens Anthropic accepts


def enable_thinking(body: dict, budget: int, ceiling: int | None = None) -> list[str]:
    """Extended thinking on in a Messages ``body`` with ``budget`` tokens, made valid as Anthropic checks it: the
    budget below ``max_tokens`` (thinking is billed inside it: raised to ``ceiling`` where that leaves room, else to
    the budget plus the smallest budget), and no changed temperature, top_k, or top_p below 0.95 beside it
    ("Feature compatibility"). What changed, in request_params' words (``max_tokens=N``, ``-top_k (thinking)``).
    The caller keeps a forced tool_choice off it (Anthropic refuses thinking with one)."""
    changes = []
    most = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else None
    if most is not None and budget >= most:
        most = ceiling if ceiling and ceiling > budget else budget + MIN_THINKING_BUDGET
        body["max_tokens"] = most
        changes.append(f"max_tokens={most}")
    for name, allowed in (("temperature", lambda v: v == 1), ("top_k", lambda v: False),
                          ("top_p", lambda v: isinstance(v, (int, float)) and 0.95 <= v <= 1)):
        if name in body and not allowed(body[name]):
            del body[name]
            changes.append(f"-{name} (thinking)")
    body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return changes


THINKING_BLOCKS = ("thinking", "redacted_thinking")


def thinking_block_missing(body: dict) -> bool:
    """Whether the last assistant turn of a Messages ``body`` calls a tool without starting with its thinking
    block: with thinking on, Anthropic refuses that ("a final assistant message must start with a thinking
    block"), so thinking must stay off (a client that dropped the block, or history from another model)."""
    messages = body.get("messages")
    last = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "assistant"), None) \
        if isinstance(messages, list) else None
    content = last.get("content") if last is not None else None
    if not isinstance(content, list) or not content:
        return False
    types = [b.get("type") if isinstance(b, dict) else None for b in content]
    return "tool_use" in types and types[0] not in THINKING_BLOCKS


class CountTokensRequest(Struct, frozen=True, omit_defaults=True, kw_only=True):
    """A ``POST /v1/messages/count_tokens`` body: a Messages request, ``max_tokens`` optional."""

    messages: Annotated[list[Message], Meta(min_length=1)]
    max_tokens: PositiveCount | None = None
    model: str = ""
    system: str | list[TextBlock] | None = None
    stop_sequences: list[str] | None = None
    # Anthropic's ranges.
    temperature: Annotated[float, Meta(ge=0, le=1)] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    top_k: Count | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    metadata: dict[str, Any] | None = None
    stream: bool = False
    thinking: Thinking | None = None

    def system_text(self) -> str:
        if self.system is None:
            return ""
        if isinstance(self.system, str):
            return self.system
        return "\n".join(b.text for b in self.system)


class MessagesRequest(CountTokensRequest, frozen=True, omit_defaults=True, kw_only=True):
    """The fields of a Messages request that routing and translation read."""

    max_tokens: PositiveCount


class BetaCountTokensRequest(CountTokensRequest, frozen=True, omit_defaults=True, kw_only=True):
    messages: Annotated[list[BetaMessage], Meta(min_length=1)]


class BetaMessagesRequest(MessagesRequest, frozen=True, omit_defaults=True, kw_only=True):
    messages: Annotated[list[BetaMessage], Meta(min_length=1)]


# --- response --------------------------------------------------------------------------


class Usage(Struct, frozen=True):
    input_tokens: int | None = 0          # null from some Anthropic-compatible servers: read as 0
    output_tokens: int | None = 0
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class Block(Struct, frozen=True):
    """An answer's content block, any type: the fields of the types we translate, all optional."""

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None
    thinking: str | None = None     # thinking
    signature: str | None = None
    data: str | None = None         # redacted_thinking


class MessagesResponse(Struct, frozen=True):
    """A complete answer as a backend sends it (decoding) and as we send it (encoding)."""

    id: str
    content: list[Block]
    model: str | None = ""
    type: str | None = "message"
    role: str | None = "assistant"
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = Usage()         # null from some Anthropic-compatible servers


class OutText(Struct, tag="text", frozen=True):
    text: str


class OutToolUse(Struct, tag="tool_use", frozen=True):
    id: str
    name: str
    input: dict[str, Any]


class OutThinking(Struct, tag="thinking", frozen=True):
    thinking: str
    signature: str     # "" for reasoning that no Anthropic model signed (an OpenAI-format backend's)


class OutRedactedThinking(Struct, tag="redacted_thinking", frozen=True):
    data: str


class OutUsage(Struct, frozen=True):
    """Usage as Anthropic sends it: every counter an integer (clients add them up), never null."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class OutMessage(Struct, frozen=True):
    """The answer we send an Anthropic client: only the block types we produce."""

    id: str
    model: str
    content: list[OutThinking | OutRedactedThinking | OutText | OutToolUse]
    stop_reason: str | None
    stop_sequence: str | None = None
    usage: OutUsage = OutUsage()
    type: str = "message"
    role: str = "assistant"


# --- stream events ------------------------------------------------------------------------


class Delta(Struct, frozen=True):
    """A content_block_delta's delta, any type."""

    type: str
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None     # thinking_delta
    signature: str | None = None    # signature_delta


class MessageStart(Struct, frozen=True):
    message: MessagesResponse


class ContentBlockStart(Struct, frozen=True):
    index: int
    content_block: Block


class ContentBlockDelta(Struct, frozen=True):
    index: int
    delta: Delta


class ContentBlockStop(Struct, frozen=True):
    index: int


class StopDelta(Struct, frozen=True):
    stop_reason: str | None = None
    stop_sequence: str | None = None


class DeltaUsage(Struct, frozen=True):
    output_tokens: int | None = 0
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class MessageDelta(Struct, frozen=True):
    delta: StopDelta = StopDelta()
    usage: DeltaUsage | None = DeltaUsage()


# --- errors ---------------------------------------------------------------------------------


class ErrorDetail(Struct, frozen=True):
    type: str
    message: str


class ErrorResponse(Struct, frozen=True):
    error: ErrorDetail
    type: str = "error"


class _ErrorTop(msgspec.Struct):
    type: Any = None
    error: Any = None
    request_id: Any = None


_ERROR_TOP = msgspec.json.Decoder(_ErrorTop)


def with_request_id(body: bytes, request_id: str) -> bytes:
    """An Anthropic error ``body`` with the request's id at its top (``request_id``), as Anthropic's own errors
    carry it: added after its last member, the backend's bytes before it as they came. A backend's own id is
    kept (the provider's, for its support); any other body is left as it is."""
    try:
        top = _ERROR_TOP.decode(body)
    except msgspec.DecodeError:
        return body
    if top.type != "error" or not isinstance(top.error, dict) or top.request_id is not None:
        return body
    end = body.rstrip()
    return end[:-1] + b',"request_id":' + msgspec.json.encode(request_id) + b"}"


STATUS_OF_TYPE = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
    "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
}


def error_status_and_type(status: int, code: str | None = None, relayed: bool = False) -> tuple[int, str]:
    """The status and error type an Anthropic client gets for one of our errors.

    ``code == "overloaded"`` and a 503 are Anthropic's overloaded_error: the router's own (load shed, every
    backend busy) with Anthropic's 529; a backend's (``relayed``) with the status it answered. Any other status
    keeps itself, typed by Anthropic's table (``error_types``).
    """
    if code == "overloaded" or status in (503, 529):
        return (status if relayed and status >= 500 else 529), "overloaded_error"
    return status, anthropic_type(status)


# A context window overflow in each protocol's words: OpenAI's code (which Codex and LiteLLM's
# ContextWindowExceededError read) and the start of Anthropic's message (which Claude Code reads, to compact).
CONTEXT_EXCEEDED = "context_length_exceeded"
PROMPT_TOO_LONG = "prompt is too long"
_OPENAI_CONTEXT = re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested|has) (\d+) (?:input )?"
                             r"tokens", re.DOTALL)
# OpenAI's overflow and every server that copies its words (vLLM, SGLang, LM Studio), whatever code it gives it
# (vLLM's is its status, 400): told by the words, as OpenAI's SDKs and LiteLLM tell it.
_OPENAI_OVERFLOW = re.compile(r"maximum context length is \d+ tokens")


def context_overflow(status: int, message: str) -> bool:
    """Whether a backend's error answer says its context window overflowed, in OpenAI's or Anthropic's words."""
    return status == 400 and (message.startswith(PROMPT_TOO_LONG) or _OPENAI_OVERFLOW.search(message) is not None)


def prompt_too_long(message: str) -> str:
    """An OpenAI-format backend's context overflow in Anthropic's words (``prompt is too long: N tokens > M
    maximum``), its own message after it when its numbers cannot be read."""
    if message.startswith(PROMPT_TOO_LONG):
        return message
    found = _OPENAI_CONTEXT.search(message)
    if found is None:
        return f"{PROMPT_TOO_LONG}: {message}"
    return f"{PROMPT_TOO_LONG}: {found.group(2)} tokens > {found.group(1)} maximum"


def error_body(message: str, kind: str) -> bytes:
    return ENCODER.encode(ErrorResponse(ErrorDetail(kind, message)))


def vsr_error_answer(exc: VsrError) -> tuple[int, bytes]:
    """``(status, body)`` of an error in Anthropic's shape."""
    status, kind = error_status_and_type(exc.status, exc.code, relayed(exc))
    message = exc.message
    if exc.code == CONTEXT_EXCEEDED:   # an OpenAI-format backend's, in the words Claude Code compacts on
        message = prompt_too_long(message)
    return status, error_body(message, kind)


def relayed(exc: VsrError) -> bool:
    """Whether ``exc`` is a backend's own error answer, whose status the client gets."""
    return isinstance(exc, (UpstreamAnswer, UpstreamStatus))


REQUEST_DECODER = msgspec.json.Decoder(MessagesRequest, dec_hook=_block_hook)
COUNT_TOKENS_DECODER = msgspec.json.Decoder(CountTokensRequest, dec_hook=_block_hook)
BETA_DECODERS = {REQUEST_DECODER: msgspec.json.Decoder(BetaMessagesRequest, dec_hook=_block_hook),
                 COUNT_TOKENS_DECODER: msgspec.json.Decoder(BetaCountTokensRequest, dec_hook=_block_hook)}
RESPONSE_DECODER = msgspec.json.Decoder(MessagesResponse)
ERROR_DECODER = msgspec.json.Decoder(ErrorResponse)
EVENT_DECODERS: dict[str, msgspec.json.Decoder] = {
    "message_start": msgspec.json.Decoder(MessageStart),
    "content_block_start": msgspec.json.Decoder(ContentBlockStart),
    "content_block_delta": msgspec.json.Decoder(ContentBlockDelta),
    "content_block_stop": msgspec.json.Decoder(ContentBlockStop),
    "message_delta": msgspec.json.Decoder(MessageDelta),
    "error": ERROR_DECODER,
}
ENCODER = msgspec.json.Encoder()
