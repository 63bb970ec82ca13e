"""The protocol-neutral forms every translation goes through.

Translation is hub and spoke: each protocol reads its request, answer and
stream into these forms and writes them back out, so three protocols need six
readers and writers rather than six pairwise translators per direction. The
forms carry ``path``, the place a part came from in the source document, so a
writer that cannot carry a part records a loss naming the client's field.

Requests: ``Conversation`` of ``Turn``s of parts. Answers: ``Answer``.
Streams: the events at the bottom, in one order: ``Started`` first; then
blocks (``BlockStart``, its deltas, ``BlockStop``); then ``Finished``, or
``Failed`` at any point. A reader may leave blocks open side by side, as a
backend streams parallel tool calls, but stops each before ``Finished``;
``OneBlockAtATime`` hands the writers one open block at a time. Only a delta
to a block already stopped (a Chat call that looked whole, then went on) can
still reach a writer out of turn: one that cannot reopen a block records a loss.
"""
from __future__ import annotations

from typing import Literal

from msgspec import Struct, field

# --- request parts -------------------------------------------------------------------


class NoTurns(Exception):
    """A writer left no turn its format can carry (every message's content was empty): the adapter answers the
    client 400 in its own field rather than send the provider a body it refuses."""


class Text(Struct, frozen=True):
    """Text; in an answer, ``refusal`` marks the model's refusal (Chat's ``refusal``, a Responses refusal part).
    ``cache_control``: a Chat client's prompt-caching marker on the part (or on its message, whose last part it
    is), for a Messages backend; ``cache_path`` is where the client put it (empty means ``<path>.cache_control``)."""

    text: str
    path: str = ""
    refusal: bool = False
    cache_control: dict | None = None
    cache_path: str = ""
    logprobs: list[dict] | None = None   # an answer's token logprobs, in the shape Chat and Responses share


class Image(Struct, frozen=True):
    """An image by URL; inline images are ``data:`` URLs. ``detail_path`` is where the
    source put ``detail`` (Chat nests it under ``image_url``); empty means ``<path>.detail``."""

    url: str
    detail: str | None = None
    path: str = ""
    detail_path: str = ""
    cache_control: dict | None = None
    cache_path: str = ""


class File(Struct, frozen=True):
    """A document: inline as a ``data:`` URL, by URL, or by a provider file id."""

    data_url: str | None = None
    url: str | None = None
    file_id: str | None = None
    filename: str | None = None
    path: str = ""


class ToolCall(Struct, frozen=True):
    id: str
    name: str
    arguments: str   # JSON text, as Chat and Responses carry it
    path: str = ""


class ToolResult(Struct, frozen=True):
    call_id: str
    content: list[Text | Image | File]
    is_error: bool = False
    path: str = ""


class GeneratedImage(Struct, frozen=True):
    """An image the model made (answers only): base64 data or a URL."""

    b64: str | None = None
    url: str | None = None
    revised_prompt: str | None = None
    path: str = ""


class Thinking(Struct, frozen=True):
    """The model's reasoning before its answer: Claude's thinking block (``signature`` is Anthropic's proof that
    Claude wrote it, which Anthropic requires when the block comes back), a redacted one (``redacted``: its opaque
    data, no text), an OpenAI-format backend's ``reasoning_content`` (no signature), or a Responses backend's
    reasoning item (its summary; its ``encrypted_content`` in ``signature``, prefixed: ``_thinking.OPENAI``)."""

    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    path: str = ""


Part = Text | Image | File | ToolCall | ToolResult | Thinking


class Turn(Struct):
    """One turn; ``tool`` turns hold ToolResults; ``system`` turns are mid-conversation instructions."""

    role: Literal["system", "user", "assistant", "tool"]
    parts: list[Part]
    path: str = ""


class ToolDef(Struct, frozen=True):
    name: str
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None
    path: str = ""
    cache_control: dict | None = None   # a Chat client's prompt-caching marker on the tool


class ToolChoice(Struct, frozen=True):
    """``allowed``: the tools a choice of ``auto`` or ``required`` is among (Chat's and Responses' allowed_tools),
    the request's tools all still offered."""

    kind: Literal["auto", "none", "required", "tool"]
    name: str | None = None
    path: str = "tool_choice"
    allowed: tuple[str, ...] | None = None


class Conversation(Struct):
    """A request, whatever protocol it came in."""

    turns: list[Turn]
    system: list[Text] = field(default_factory=list)   # the leading instructions
    tools: list[ToolDef] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    stop_path: str = "stop"    # where the client put them (a Messages client's stop_sequences)
    stream: bool = False
    user: str | None = None
    metadata: dict[str, str] | None = None
    response_format: dict | None = None   # Chat's response_format, Responses' text.format
    reasoning_effort: str | None = None
    # Anthropic's extended thinking config as its clients write it (Messages' own, a Chat client's extra field),
    # and its top_k sampling, which only Messages has.
    thinking: dict | None = None
    top_k: int | None = None
    # The parameters Chat and Responses share, by their Chat names (verbosity, prompt_cache_key, safety_identifier,
    # service_tier, logprobs, top_logprobs, store) -> (value, where the client's request has it).
    shared: dict[str, tuple] = field(default_factory=dict)
    prefill: str | None = None   # a Messages request ending in an assistant turn to continue: that turn's path
    # A Responses client's hosted web search (web_search, web_search_preview): where it is. Anthropic runs its own
    # (web_search_20250305), as LiteLLM maps it; a Chat backend has none (dropped, listed).
    web_search: str | None = None


# --- answers -----------------------------------------------------------------------------

Finish = Literal["stop", "length", "tool_calls", "content_filter", "stop_sequence"]


class Usage(Struct, frozen=True):
    """Input as Chat and Responses count it: ``cached`` (read from the provider's cache) and ``cache_write``
    (written to it, Messages only) are part of ``input_tokens``; ``reasoning`` (the model's hidden thinking, as
    Chat's completion_tokens_details and Responses' output_tokens_details count it) is part of ``output_tokens``."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached: int = 0
    cache_write: int = 0
    reasoning: int = 0


class Answer(Struct):
    id: str
    model: str
    parts: list[Text | ToolCall | GeneratedImage | Thinking]
    finish: Finish = "stop"
    usage: Usage | None = None
    created: int = 0
    stop_sequence: str | None = None


# --- stream events -----------------------------------------------------------------------------


class Started(Struct, frozen=True):
    id: str
    model: str
    created: int = 0
    input_tokens: int | None = None       # as Usage's: the cache's reads and writes included
    cached: int = 0
    cache_write: int = 0


class BlockStart(Struct, frozen=True):
    index: int
    kind: Literal["text", "tool", "image", "thinking"]
    call_id: str = ""
    name: str = ""
    image: GeneratedImage | None = None   # an image block arrives whole, at its start
    refusal: bool = False                 # a text block that is the model's refusal
    redacted: str | None = None           # a redacted thinking block's data: it arrives whole, at its start


class TextDelta(Struct, frozen=True):
    index: int
    text: str
    logprobs: list[dict] | None = None   # the logprobs of this piece's tokens (``Text.logprobs``)


class ArgsDelta(Struct, frozen=True):
    index: int
    json: str


class SignatureDelta(Struct, frozen=True):
    """A thinking block's signature, which Anthropic streams after its text."""

    index: int
    signature: str


class BlockStop(Struct, frozen=True):
    index: int


class Finished(Struct, frozen=True):
    finish: Finish
    usage: Usage | None = None
    stop_sequence: str | None = None


class Failed(Struct, frozen=True):
    message: str
    status: int = 500
    code: str | None = None
    type: str | None = None     # a backend's own OpenAI error type; else the writer's for the status


Event = Started | BlockStart | TextDelta | ArgsDelta | SignatureDelta | BlockStop | Finished | Failed


def answer_events(answer: Answer) -> list[Event]:
    """A whole answer as the stream events that would have carried it."""
    u = answer.usage
    events: list[Event] = [Started(answer.id, answer.model, answer.created, u.input_tokens if u else None,
                                   u.cached if u else 0, u.cache_write if u else 0)]
    for i, part in enumerate(answer.parts):
        if isinstance(part, Text):
            events += [BlockStart(i, "text", refusal=part.refusal), TextDelta(i, part.text, part.logprobs),
                       BlockStop(i)]
        elif isinstance(part, ToolCall):
            events += [BlockStart(i, "tool", part.id, part.name), ArgsDelta(i, part.arguments), BlockStop(i)]
        elif isinstance(part, Thinking):
            events.append(BlockStart(i, "thinking", redacted=part.redacted))
            events += [TextDelta(i, part.text)] if part.text else []
            events += [SignatureDelta(i, part.signature)] if part.signature else []
            events.append(BlockStop(i))
        else:
            events += [BlockStart(i, "image", image=part), BlockStop(i)]
    events.append(Finished(answer.finish, answer.usage, answer.stop_sequence))
    return events


def events_answer(events: list[Event]) -> Answer | None:
    """The whole answer a complete stream's events carry (``answer_events`` read back); None for a stream that
    failed or did not end."""
    start = next((ev for ev in events if isinstance(ev, Started)), None)
    end = next((ev for ev in events if isinstance(ev, Finished)), None)
    if start is None or end is None or any(isinstance(ev, Failed) for ev in events):
        return None
    kinds: dict[int, BlockStart] = {}
    texts: dict[int, list[str]] = {}
    logprobs: dict[int, list[dict]] = {}
    signatures: dict[int, str] = {}
    for ev in events:
        if isinstance(ev, BlockStart):
            kinds.setdefault(ev.index, ev)
        elif isinstance(ev, (TextDelta, ArgsDelta)):
            texts.setdefault(ev.index, []).append(ev.text if isinstance(ev, TextDelta) else ev.json)
            if isinstance(ev, TextDelta) and ev.logprobs:
                logprobs.setdefault(ev.index, []).extend(ev.logprobs)
        elif isinstance(ev, SignatureDelta):
            signatures[ev.index] = signatures.get(ev.index, "") + ev.signature
    parts: list[Text | ToolCall | GeneratedImage | Thinking] = []
    for i, block in sorted(kinds.items()):
        text = "".join(texts.get(i, ()))
        if block.kind == "text":
            parts.append(Text(text, refusal=block.refusal, logprobs=logprobs.get(i)))
        elif block.kind == "tool":
            parts.append(ToolCall(block.call_id, block.name, text))
        elif block.kind == "thinking":
            parts.append(Thinking(text, signatures.get(i), block.redacted))
        elif block.image is not None:
            parts.append(block.image)
    usage = end.usage
    if usage is None and start.input_tokens is not None:
        usage = Usage(start.input_tokens, 0, start.cached, start.cache_write)
    return Answer(start.id, start.model, parts, end.finish, usage, start.created, end.stop_sequence)

