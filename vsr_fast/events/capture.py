"""What an event keeps of a request or an answer (sans I/O).

- ``body_copy``: a request's body as received, which ``router_replay`` keeps
  and ``vsr-replay run`` re-routes; past the size cap, media left out, then
  texts cut.
- ``request_copy``: a Chat Completions body past the cap, as its canonical
  form cut with the current user turn last.
- ``AnswerCapture``: the answer's bytes as the client received them, up to a
  bound, fed chunk by chunk by the relay.
- ``answer_facts``: finish reason, usage and completeness read back from a
  whole body or an SSE stream, for consumers that got no facts from the server.
"""
from __future__ import annotations

from typing import Any

import msgspec

from ..protocol.chat import AudioPart, ChatRequest, FilePart, ImagePart, ImageURL, InputAudio, Message, TextPart
from ..protocol.translate._chat import FINISH_OUT as CHAT_FINISH
from ..protocol.translate._messages import FINISH_IN
from ..protocol.translate._responses import INCOMPLETE_IN
from ..protocol.usage import WireUsage
from .types import Usage

_JSON = msgspec.json.Encoder()


# --- the request copy ----------------------------------------------------------------


def request_copy(request: ChatRequest, max_bytes: int) -> tuple[bytes | None, bool]:
    """``(body, truncated)``: the request's routing fields as JSON, at most ``max_bytes``.

    Canonical: the fields routing reads, re-encoded, so two clients' spellings
    of one request give one copy. Media data (data: URLs, audio, files) is left
    out, its kind kept. Past the cap, message texts are cut, oldest first,
    the current user turn last, so a re-route sees the text signals read most.
    None when even the skeleton does not fit.
    """
    if max_bytes <= 0:
        return None, True
    messages = [_without_media(m) for m in request.messages]
    slim = msgspec.structs.replace(request, messages=messages)
    body = _encode(slim)
    media_cut = messages != request.messages
    if len(body) <= max_bytes:
        return body, media_cut
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    order = [i for i in range(len(messages)) if i != last_user] + ([last_user] if last_user >= 0 else [])
    # The body's size follows each cut message's own encoding, so the whole body is encoded once more at the
    # end, not once per message cut (quadratic: 2,000 turns of 3 KB took 30 s).
    size = len(body)
    for i in order:
        # JSON escapes can make a cut text longer than its bytes: one more pass at most.
        for _ in range(2):
            over = size - max_bytes
            if over <= 0:
                break
            before = len(_encode(messages[i]))
            messages[i] = _cut_text(messages[i], over)
            size += len(_encode(messages[i])) - before
        if size <= max_bytes:
            break
    body = _encode(msgspec.structs.replace(slim, messages=messages))
    if len(body) > max_bytes:
        body = _encode(msgspec.structs.replace(slim, messages=messages, tools=None))
    return (body, True) if len(body) <= max_bytes else (None, True)


def _encode(request: ChatRequest | Message) -> bytes:
    """JSON without the fields left at null: the decoder's defaults bring them back."""
    return _JSON.encode(_compact(msgspec.to_builtins(request)))


def _compact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def _without_media(message: Message) -> Message:
    if not isinstance(message.content, list):
        return message
    parts = []
    changed = False
    for part in message.content:
        if isinstance(part, ImagePart) and part.image_url.url.startswith("data:"):
            mime = part.image_url.url[5:].split(";", 1)[0].split(",", 1)[0]
            part = ImagePart(ImageURL(f"data:{mime};omitted", part.image_url.detail))
            changed = True
        elif isinstance(part, AudioPart) and part.input_audio.data:
            part = AudioPart(InputAudio("", part.input_audio.format))
            changed = True
        elif isinstance(part, FilePart) and "file_data" in part.file:
            part = FilePart({k: v for k, v in part.file.items() if k != "file_data"})
            changed = True
        parts.append(part)
    return msgspec.structs.replace(message, content=parts) if changed else message


def _cut(text: str, drop_bytes: int) -> str:
    raw = text.encode()
    keep = max(0, len(raw) - drop_bytes)
    return raw[:keep].decode(errors="ignore")


def _cut_text(message: Message, drop_bytes: int) -> Message:
    """The message with up to ``drop_bytes`` UTF-8 bytes cut from the end of its text."""
    if isinstance(message.content, str):
        return msgspec.structs.replace(message, content=_cut(message.content, drop_bytes))
    if not isinstance(message.content, list):
        return message
    parts: list[Any] = []
    for part in reversed(message.content):
        if drop_bytes > 0 and isinstance(part, TextPart):
            size = len(part.text.encode())
            part = TextPart(_cut(part.text, drop_bytes))
            drop_bytes -= size - len(part.text.encode())
        parts.append(part)
    return msgspec.structs.replace(message, content=parts[::-1])


# A string under one of these keys names or tags something: never cut, or the copy would not decode.
_NAMES = frozenset({"type", "role", "model", "name", "id", "call_id", "tool_use_id", "namespace", "media_type",
                    "previous_response_id", "status", "detail"})
_JSON_DECODER = msgspec.json.Decoder()


def body_copy(raw: bytes, max_bytes: int) -> tuple[bytes | None, bool]:
    """``(body, truncated)``: a request body as received, at most ``max_bytes``.

    Whole when it fits. Past the cap, media data (base64 sources, ``data:`` URLs,
    file data) is left out, its kind kept, then the longest texts are cut first,
    so the copy still decodes as the client's protocol. None when even that does
    not fit, or the body is no JSON object.
    """
    if max_bytes <= 0:
        return None, True
    if len(raw) <= max_bytes:
        return raw, False
    try:
        doc = _JSON_DECODER.decode(raw)
    except msgspec.DecodeError:
        return None, True
    if not isinstance(doc, dict):
        return None, True
    leaves: list[tuple[dict | list, str | int]] = []
    _slim(doc, leaves)
    body = _JSON.encode(doc)
    leaves.sort(key=lambda leaf: -len(leaf[0][leaf[1]]))   # type: ignore[index]
    # Each cut moves the body's size by its string's own encoding: one more encoding of the whole at the end,
    # not one per string cut (quadratic in a body of many texts).
    size = len(body)
    for container, key in leaves:
        over = size - max_bytes
        if over <= 0:
            break
        text = container[key]   # type: ignore[index]
        cut = container[key] = _cut(text, over)   # type: ignore[index]
        size += len(_JSON.encode(cut)) - len(_JSON.encode(text))
    if size != len(body):
        body = _JSON.encode(doc)
    return (body, True) if len(body) <= max_bytes else (None, True)


def _slim(value: Any, leaves: list[tuple[dict | list, str | int]]) -> None:
    """Leave media data out of ``value`` in place; collect the strings that may be cut."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, v in list(items):
        if isinstance(v, str):
            if key == "file_data" or (key == "data" and isinstance(value, dict) and value.get("type") == "base64"):
                value[key] = ""
            elif v.startswith("data:") and ";base64," in v[:100]:
                value[key] = v[:v.index(";base64,")] + ";omitted"
            elif key not in _NAMES:
                leaves.append((value, key))
        elif isinstance(v, (dict, list)):
            _slim(v, leaves)


# --- the answer ----------------------------------------------------------------------


class AnswerCapture:
    """The answer's first ``limit`` bytes, fed chunk by chunk; ``size`` counts them all."""

    __slots__ = ("_parts", "limit", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._parts: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        room = self.limit - self.size
        self.size += len(chunk)
        if room > 0:
            self._parts.append(chunk if len(chunk) <= room else chunk[:room])

    @property
    def truncated(self) -> bool:
        return self.size > self.limit

    def body(self) -> bytes:
        return b"".join(self._parts)


class _Choice(msgspec.Struct):
    finish_reason: str | None = None


class _Incomplete(msgspec.Struct):
    reason: str | None = None


class _Item(msgspec.Struct):
    type: str | None = None


class _Inner(msgspec.Struct):
    """A Messages ``message`` (message_start) or a Responses ``response`` (its stream's events)."""

    stop_reason: str | None = None
    status: str | None = None
    incomplete_details: _Incomplete | None = None
    output: list[_Item] | None = None
    usage: WireUsage | None = None
    error: Any = None


class _Payload(msgspec.Struct):
    """Any answer or stream event of Chat Completions, Messages or Responses, tolerantly: only what we read."""

    type: str | None = None
    object: str | None = None
    choices: list[_Choice] | None = None
    usage: WireUsage | None = None
    error: Any = None
    stop_reason: str | None = None                 # a whole Messages answer
    status: str | None = None                      # a whole Responses answer
    incomplete_details: _Incomplete | None = None
    output: list[_Item] | None = None
    delta: Any = None                              # message_delta: {stop_reason}; other events: text
    message: _Inner | None = None                  # message_start
    response: _Inner | None = None                 # response.completed, .incomplete, .failed


_PAYLOAD = msgspec.json.Decoder(_Payload)
# The ends of a stream: Chat's [DONE] line, Messages' message_stop, Responses' terminal events.
_RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _usage(u: WireUsage | None, usage: Usage | None = None) -> Usage | None:
    """The record's usage from any API's; a Messages stream's later counts update the earlier ones."""
    if u is None:
        return usage
    prompt, completion = u.input, u.output
    if usage is not None:
        prompt = usage.prompt_tokens if prompt is None else prompt
        completion = usage.completion_tokens if completion is None else completion
    prompt, completion = prompt or 0, completion or 0
    total = u.total_tokens if u.total_tokens is not None else prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


# The Responses output items the client runs (Codex's freeform exec is a custom_tool_call): a call, as Chat's.
CLIENT_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call",
                          "computer_call"})


def _response_reason(doc: _Payload | _Inner) -> str | None:
    """A Responses object's end in the record's (Chat's) words: the translator's mapping."""
    if doc.status == "incomplete":
        return INCOMPLETE_IN.get(doc.incomplete_details.reason or "" if doc.incomplete_details else "", "length")
    if doc.status == "completed":
        return "tool_calls" if any(i.type in CLIENT_CALLS for i in doc.output or ()) else "stop"
    return None


def _messages_reason(stop_reason: str | None) -> str | None:
    """A Messages stop_reason as a Chat client reads it (stop_sequence is Chat's stop)."""
    return None if stop_reason is None else CHAT_FINISH.get(FINISH_IN.get(stop_reason, "stop"), "stop")


def _reason(p: _Payload) -> str | None:
    """The finish reason a whole answer or one stream event carries, in the record's (Chat's) words."""
    if p.choices:
        return next((c.finish_reason for c in p.choices if c.finish_reason), None)
    if p.type == "message":
        return _messages_reason(p.stop_reason)
    if p.type == "message_delta" and isinstance(p.delta, dict):
        return _messages_reason(p.delta.get("stop_reason"))
    if p.object == "response":
        return _response_reason(p)
    if p.type in _RESPONSE_ENDS and p.response is not None:
        return _response_reason(p.response)
    return None


def _failed(p: _Payload) -> bool:
    """An error body or event of any API (a Responses stream's error event has no ``error`` member)."""
    return (p.error is not None or p.type in ("error", "response.failed")
            or (p.response is not None and p.response.error is not None) or p.status == "failed")


class AnswerFacts(msgspec.Struct, frozen=True):
    finish_reason: str | None
    usage: Usage | None
    complete: bool
    error: bool


def answer_facts(body: bytes, streamed: bool) -> AnswerFacts:
    """Finish reason, usage, completeness and error, read from a whole body or an SSE stream of
    Chat Completions, Messages or Responses. The finish reason is in Chat's words (stop, length,
    tool_calls, content_filter...), as the translators map the other APIs', and usage in Chat's
    fields (input tokens are prompt tokens, output tokens completion tokens)."""
    if not streamed:
        try:
            p = _PAYLOAD.decode(body)
        except msgspec.DecodeError:
            return AnswerFacts(None, None, False, True)
        return AnswerFacts(_reason(p), _usage(p.usage), True, _failed(p))
    reason, usage, done, error = None, None, False, False
    for line in body.splitlines():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            continue
        try:
            p = _PAYLOAD.decode(data)
        except msgspec.DecodeError:
            error = True
            continue
        error |= _failed(p)
        done |= p.type == "message_stop" or p.type in _RESPONSE_ENDS
        usage = _usage(p.usage, usage)
        if p.message is not None:
            usage = _usage(p.message.usage, usage)
        if p.response is not None:
            usage = _usage(p.response.usage, usage)
        reason = _reason(p) or reason
    return AnswerFacts(reason, usage, done and not error, error)


__all__ = ["AnswerCapture", "AnswerFacts", "answer_facts", "body_copy", "request_copy"]
