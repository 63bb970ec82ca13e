"""OpenAI Chat Completions wire types.

Tolerant of fields we do not read (clients and providers add them all the
time), strict about the types of the fields we do. The raw request bytes are
kept next to the decoded request and forwarded unchanged unless the model name
or a plugin rewrites them.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from .anthropic import Thinking

# OpenAI's reasoning efforts (Chat's reasoning_effort, Responses' reasoning.effort), gpt-5.1's none and
# gpt-5.1-codex-max's xhigh among them: another value is refused naming the field, as OpenAI refuses it.
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
EFFORTS: tuple[str, ...] = ReasoningEffort.__args__
from .bounds import Count, Int64, PositiveCount


class ImageURL(Struct, frozen=True):
    url: str
    detail: str | None = None


class InputAudio(Struct, frozen=True):
    data: str
    format: str


class TextPart(Struct, tag="text", frozen=True, omit_defaults=True):
    text: str
    cache_control: dict[str, Any] | None = None   # Anthropic's prompt caching, as LiteLLM's clients mark parts


class ImagePart(Struct, tag="image_url", frozen=True, omit_defaults=True):
    image_url: ImageURL
    cache_control: dict[str, Any] | None = None


class AudioPart(Struct, tag="input_audio", frozen=True):
    input_audio: InputAudio


class FilePart(Struct, tag="file", frozen=True):
    file: dict[str, Any]


class RefusalPart(Struct, tag="refusal", frozen=True):
    refusal: str


ContentPart = TextPart | ImagePart | AudioPart | FilePart | RefusalPart


class FunctionCall(Struct, frozen=True):
    name: str
    arguments: str


class ToolCall(Struct, frozen=True):
    id: str
    function: FunctionCall
    type: str = "function"


class Message(Struct, frozen=True):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    function_call: FunctionCall | None = None     # the legacy functions' call, on an assistant message
    tool_call_id: str | None = None
    cache_control: dict[str, Any] | None = None   # the whole message's, as LiteLLM's clients mark one for Anthropic
    # An assistant turn's reasoning as LiteLLM returns it: its text, and Claude's thinking blocks (signed), which
    # Anthropic needs back at the head of the turn in a tool loop with thinking on.
    reasoning_content: str | None = None
    thinking_blocks: list[Any] | None = None

    def text(self) -> str:
        """The message's text parts joined; images and audio contribute nothing."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


class FunctionDef(Struct, frozen=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(Struct, frozen=True):
    function: FunctionDef
    type: str = "function"
    cache_control: dict[str, Any] | None = None   # Anthropic's prompt caching on a tool, as LiteLLM carries it


class StreamOptions(Struct, frozen=True):
    include_usage: bool | None = None


class NamedFunction(Struct, frozen=True):
    name: str


class ToolChoiceObject(Struct, frozen=True):
    """An object ``tool_choice``: its type, for ``function`` the function named, for ``allowed_tools`` its mode and
    tools (read where it is translated); the fields of the other types (``custom``) pass unread."""

    type: str
    function: NamedFunction | None = None
    allowed_tools: dict[str, Any] | None = None


class ChatRequest(Struct, frozen=True):
    """The fields of a Chat Completions request that routing reads.

    Strict where OpenAI is: at least one message (``empty_array``), the roles
    and tool_choice modes it knows, the ranges of the sampling numbers. Fields it does not read pass (vendor
    extensions such as vLLM's are common on Chat).
    """

    messages: Annotated[list[Message], Meta(min_length=1)]
    model: str = ""
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | ToolChoiceObject | None = None
    # The legacy forms of tools and tool_choice (deprecated by OpenAI, still sent by older clients and LiteLLM's).
    functions: list[FunctionDef] | None = None
    function_call: Literal["none", "auto"] | NamedFunction | None = None
    # OpenAI's ranges: a value it refuses is refused here, before it reaches (or is translated for) a backend.
    max_tokens: PositiveCount | None = None
    max_completion_tokens: PositiveCount | None = None
    temperature: Annotated[float, Meta(ge=0, le=2)] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    n: Annotated[int, Meta(ge=1, le=128)] | None = None
    presence_penalty: Annotated[float, Meta(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Meta(ge=-2, le=2)] | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    # Not read by routing: typed so that a wrong type is a 400 here, not a failure in translation.
    stop: str | list[str] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    reasoning_effort: ReasoningEffort | None = None
    seed: Int64 | None = None
    logit_bias: dict[str, Annotated[float, Meta(ge=-100, le=100)]] | None = None     # token id -> bias
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None     # as Responses'
    logprobs: bool | None = None
    verbosity: str | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    store: bool | None = None
    # Anthropic's, for a Claude model (LiteLLM takes them the same way; the openai SDK sends them in extra_body):
    # typed as Anthropic types them, so that a wrong shape is a 400 here rather than from Anthropic.
    thinking: Thinking | None = None
    top_k: Count | None = None


# --- responses ---------------------------------------------------------------------


class PromptTokensDetails(Struct, frozen=True):
    cached_tokens: int | None = 0       # null from some OpenAI-compatible servers


class CompletionTokensDetails(Struct, frozen=True):
    reasoning_tokens: int | None = 0    # null from some OpenAI-compatible servers


class Usage(Struct, frozen=True):
    prompt_tokens: int | None = 0           # null from some OpenAI-compatible servers: read as 0
    completion_tokens: int | None = 0
    total_tokens: int | None = 0
    prompt_tokens_details: PromptTokensDetails | None = None      # cached_tokens: part of prompt_tokens
    completion_tokens_details: CompletionTokensDetails | None = None   # reasoning_tokens: part of completion_tokens


class AssistantMessage(Struct, frozen=True):
    role: str = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    refusal: str | None = None


class Choice(Struct, frozen=True):
    index: int
    message: AssistantMessage
    finish_reason: str | None = None


class ChatResponse(Struct, frozen=True):
    id: str
    choices: list[Choice]
    model: str
    created: int = 0
    object: str = "chat.completion"
    usage: Usage | None = None


class ChunkDelta(Struct, frozen=True):
    role: str | None = None
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class ChunkChoice(Struct, frozen=True):
    index: int
    delta: ChunkDelta
    finish_reason: str | None = None


class ChatChunk(Struct, frozen=True):
    id: str
    choices: list[ChunkChoice]
    model: str
    created: int = 0
    object: str = "chat.completion.chunk"
    usage: Usage | None = None


class ErrorBody(Struct, frozen=True, omit_defaults=False):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(Struct, frozen=True):
    error: ErrorBody


REQUEST_DECODER = msgspec.json.Decoder(ChatRequest)
# Top-level keys with their values left as raw JSON: rewriting `model` then
# costs a copy of the other values, not a re-encode of the whole conversation.
TOP_LEVEL_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
RESPONSE_DECODER = msgspec.json.Decoder(ChatResponse)
CHUNK_DECODER = msgspec.json.Decoder(ChatChunk)
ENCODER = msgspec.json.Encoder()

__all__ = [name for name in dir() if not name.startswith("_") and name[0].isupper()] + [
    "REQUEST_DECODER", "TOP_LEVEL_DECODER", "ENCODER", "field",
]
