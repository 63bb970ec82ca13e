"""What a backend's answer must be before it reaches a client: a final status the router can relay, a success
body of its protocol's top-level shape, a bounded size, and error bodies without the router's own credential.

The shape check decodes only each protocol's one required list (msgspec skips every other field without
building it), so it costs a JSON scan of the body (bench/RESULTS.md, "upstream answer check").
"""
from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import trio

from ..config.schema import BACKEND_MAX_EVENT_BYTES
from ..errors import UpstreamError, UpstreamInvalid, UpstreamTooLarge, VsrError
from ..protocol.error_types import ANTHROPIC_TYPES, anthropic_type, openai_type
from ..protocol.translate import BY_FORMAT, PATHS, ToolCall, parse_arguments
from .transport import Response

log = logging.getLogger("vsr_fast.upstream")

# 1xx never reach here (the HTTP parser consumes them); 3xx would need following, which the router never does.
RELAYABLE = frozenset(range(200, 300)) | frozenset(range(400, 600))
# An error body relayed past this is replaced by a short one of the same protocol: a client needs the
# status and a line, not a megabyte of a backend's page.
MAX_ERROR_BODY = 16 * 1024
# After a stream's terminator a backend sends the end of its body (chunked's last chunk), at once: read and
# dropped, a little and briefly, so the connection goes back to the pool; past either bound it is closed.
DRAIN_MAX_BYTES = 64 * 1024
DRAIN_MAX_S = 0.5
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


class _Typed(msgspec.Struct):
    type: str


class _Choice(msgspec.Struct):
    index: Any = 0
    finish_reason: Any = None


class _Chunk(msgspec.Struct):
    """A Chat chunk: any object (msgspec skips its other fields); one with an ``error`` is the backend's error.
    Its choices' ``finish_reason`` says which of them have ended."""

    error: Any = None
    choices: list[_Choice] | None = None

    @property
    def type(self) -> str:
        return "" if self.error is None else "error"


class _OpeningChoice(msgspec.Struct):
    delta: dict | None = None
    logprobs: Any = None
    finish_reason: Any = None


class _OpeningChunk(msgspec.Struct):
    choices: list[_OpeningChoice] | None = None


_OPENING_CHUNK = msgspec.json.Decoder(_OpeningChunk)


def _opens_only(data: bytes) -> bool:
    """Whether a Chat chunk opens the answer without any of it: every choice's delta at most its ``role`` and
    empty fields (``"content": ""``, no tool call, no refusal), no logprobs content, no finish_reason, as vLLM,
    OpenAI and most servers send first. An error after such chunks alone is one before the answer began (LiteLLM's
    ``is_pre_first_chunk``), as after Messages' ``message_start``. Read only until the answer begins."""
    try:
        chunk = _OPENING_CHUNK.decode(data)
    except msgspec.DecodeError:
        return False
    if not chunk.choices:
        return False
    for choice in chunk.choices:
        if choice.finish_reason is not None or choice.delta is None:
            return False
        if any(v not in (None, "", [], {}) for k, v in choice.delta.items() if k != "role"):
            return False
        lp = choice.logprobs
        if lp is not None and not (isinstance(lp, dict) and not lp.get("content") and not lp.get("refusal")):
            return False
    return True


# By the path the request went to under the backend's base: what answers there must hold.
_SHAPES = {"/chat/completions": msgspec.json.Decoder(_Chat), "/messages": msgspec.json.Decoder(_Messages),
           "/responses": msgspec.json.Decoder(_Responses), "/images/generations": msgspec.json.Decoder(_Images),
           "/messages/count_tokens": msgspec.json.Decoder(_Counted)}


# A streamed event's data, by the backend's api_format: Chat chunks are objects ending with [DONE]; Messages and
# Responses events are objects with their ``type``.
_EVENT_DATA = {"anthropic": msgspec.json.Decoder(_Typed), "responses": msgspec.json.Decoder(_Typed)}
_CHUNK = msgspec.json.Decoder(_Chunk)
# What ends an answer, by api_format: its terminator (Chat's [DONE]), or an error event of the backend's.
_ENDS = {"anthropic": frozenset({"message_stop", "error"}),
         "responses": frozenset({"response.completed", "response.incomplete", "response.failed", "error"})}
_CHAT_ENDS = frozenset({"error"})
_TERMINATOR = {"anthropic": "message_stop", "responses": "response.completed"}
# Past these nothing more belongs to the answer: what a backend sends after is never read.
_LAST = frozenset({"message_stop", "response.completed", "response.incomplete", "response.failed"})
# The backend's own word that the answer failed: it ends the stream, and the answer is no whole one.
_FAILED = frozenset({"error", "response.failed"})
# Events that open a stream before its answer does: an error after these alone is still a failure before the
# first byte of an answer, the next candidate's to answer (LiteLLM's ``is_pre_first_chunk``).
PREAMBLE = frozenset({"message_start", "ping", "response.created", "response.in_progress", "response.queued"})
_FIELDS = frozenset({b"data", b"event", b"id", b"retry"})
_BOUNDARY = re.compile(rb"\r?\n\r?\n")
_SIMPLE = re.compile(rb"(?:event: ?[^\r\n:]*\r?\n)?data: ?([^\r\n]*)")


class EventCheck:
    """Feed a backend's SSE bytes as they come; learn how many of them end in well-formed events.

    Well formed: every line a comment or one of the event-stream fields (``data``, ``event``, ``id``,
    ``retry``), an event's data (its ``data`` lines joined) a JSON object of the backend's protocol or
    Chat's ``[DONE]``; a block without data dispatches nothing and is let through. Line ends are LF or
    CRLF, as every LLM API writes them (a bare CR is not taken for one). The first bad event sets
    ``failure`` (UpstreamInvalid); the bytes before it are good. A stream must end its answer: with its
    protocol's terminator (Chat's ``[DONE]``, ``message_stop``, ``response.completed`` / ``.incomplete`` /
    ``.failed``) or an error event; one that stops before is cut short, which ``close`` says. A Chat
    stream whose every choice has its ``finish_reason`` has ended too: servers that leave out ``[DONE]``
    exist, and the answer is whole. The terminator is the stream's last event (``done``): ``feed`` passes
    no byte after it. An event not ended within ``max_event`` bytes (a line that never ends) is a failure
    (UpstreamTooLarge): it is held until it ends, so it bounds what a stream holds.
    """

    __slots__ = ("_data", "_ends", "_label", "_max_event", "_open", "_pending", "_terminator", "answering", "done",
                 "ended", "erred", "erred_data", "events", "failure")

    def __init__(self, api_format: str, label: str, max_event: int = BACKEND_MAX_EVENT_BYTES) -> None:
        self._data = _EVENT_DATA.get(api_format, _CHUNK)
        self._ends = _ENDS.get(api_format, _CHAT_ENDS)
        self._terminator = _TERMINATOR.get(api_format, "data: [DONE]")
        self._label = label
        self._max_event = max_event     # an unfinished event past this is a failure: it is held until it ends
        self._pending = bytearray()
        self._open: dict[int, bool] | None = None     # Chat: each choice index seen, whether it is still open
        self.events = 0
        self.ended = False          # the answer's end came: its terminator or an error event
        self.done = False           # its terminator came: nothing after it is the answer's
        self.erred: str | None = None   # the backend's error event that ended it (error, response.failed)
        self.erred_data = b""           # that event's data
        self.answering = False          # an event of the answer came (not a ``PREAMBLE`` one, not an error)
        self.failure: UpstreamInvalid | UpstreamTooLarge | None = None

    def feed(self, chunk: bytes) -> int:
        """How many bytes of ``chunk`` may pass: all of it, its unfinished event included, unless an event
        in it is bad (then only those before that event) or the terminator (then those up to its end)."""
        carried = len(self._pending)
        if not carried and b"\r" not in chunk:
            return self._feed_lf(chunk)
        if carried:
            # An event arriving in many reads (a 1 MiB one in 64 KiB pieces) is kept growing in place and
            # searched only where a boundary can newly be: past the carried bytes, less the 3 a boundary
            # (\r\n\r\n) may straddle. Copying and rescanning it whole at every read was quadratic.
            self._pending += chunk
            data, search_from = self._pending, max(0, carried - 3)
        else:
            data, search_from = chunk, 0
        start = 0
        for m in _BOUNDARY.finditer(data, search_from):
            self.failure = self._problem(bytes(data[start:m.start()]))
            if self.failure is not None:
                self._pending = bytearray()
                return max(0, start - carried)
            start = m.end()
            if self.done:
                self._pending = bytearray()
                return start - carried
        self._pending = bytearray(data[start:]) if start or not carried else self._pending
        if len(self._pending) > self._max_event:
            return self._overlong(max(0, start - carried))
        return len(chunk)

    def _overlong(self, good: int) -> int:
        """The unfinished event passed ``max_event`` bytes: a failure, only the ``good`` bytes before it pass."""
        self._pending = bytearray()
        self.failure = UpstreamTooLarge.at(
            self._label, f"streamed an event not ended within {self._max_event} bytes (max_event_bytes)")
        return good

    def _feed_lf(self, chunk: bytes) -> int:
        # The common read: whole events, LF line ends, nothing carried. bytes.split finds the same
        # boundaries as _BOUNDARY's leftmost matches when there is no CR, at a fraction of a regex's cost.
        blocks = chunk.split(b"\n\n")
        rest = blocks.pop()
        start = 0
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                self.failure = self._check_data(block[6:])
            else:
                self.failure = self._problem(block)
            if self.failure is not None:
                return start
            start += len(block) + 2
            if self.done:
                return start
        if rest:
            self._pending = bytearray(rest)
            if len(rest) > self._max_event:
                return self._overlong(start)
        return len(chunk)

    def close(self) -> UpstreamInvalid | None:
        """The backend ended its stream: what is left must be a whole event, and there must have been one."""
        rest, self._pending = bytes(self._pending).rstrip(b"\r\n"), bytearray()
        if rest:
            self.failure = self._problem(rest)
        if self.failure is None and not self.events:
            self.failure = UpstreamInvalid.at(self._label, "answered an event stream without an event")
        elif self.failure is None and not self.ended and not self._finished:
            # A clean end of the body between two events is no end of the answer: relayed as one, a client
            # would take the half answer for the whole (and a cache could keep it).
            self.failure = UpstreamInvalid.at(
                self._label, f"ended its event stream before the answer did (no {self._terminator})")
        return self.failure

    def _problem(self, block: bytes) -> UpstreamInvalid | None:
        # The shape nearly every event has, one ``data: {...}`` line (after an ``event:`` line for
        # Messages and Responses), checked without splitting it into lines: the check runs per event.
        m = _SIMPLE.fullmatch(block)
        if m is not None:
            return self._check_data(m.group(1))
        data: list[bytes] = []
        for line in block.split(b"\n"):
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line or line[0] == 0x3A:       # ":" starts a comment (a keep-alive)
                continue
            name, _, value = line.partition(b":")
            if name not in _FIELDS:
                return self._bad("a line that is not an event-stream field", line)
            if name == b"data":
                data.append(value[1:] if value[:1] == b" " else value)
        if not data:
            return None     # comments, or a retry: / id: alone: nothing is dispatched, as SSE says
        return self._check_data(b"\n".join(data))

    def _check_data(self, value: bytes) -> UpstreamInvalid | None:
        if value == b"[DONE]" and self._data is _CHUNK:
            self.events += 1
            self.ended = self.done = self.answering = True
            return None
        if not value.isascii():
            # msgspec skips the fields it is not asked for without reading their strings: invalid UTF-8 in a
            # delta's text would pass here and fail the client's translation, after the attempt was accepted.
            try:
                value.decode()
            except UnicodeDecodeError as exc:
                return self._bad(f"an event whose data is not UTF-8 ({exc.reason} at byte {exc.start})", value)
        try:
            event = self._data.decode(value)
        except msgspec.DecodeError as exc:
            return self._bad(f"an event whose data is not a JSON event of its protocol ({exc})", value)
        self.events += 1
        if event.type in self._ends:
            self.ended = True
            self.done = event.type in _LAST
            if event.type in _FAILED:
                self.erred, self.erred_data = event.type, bytes(value)
                return None
        elif self._data is _CHUNK and event.choices:
            self._choices(event.choices)
            if not self.answering and _opens_only(value):
                return None
        if not self.answering and event.type not in PREAMBLE:
            self.answering = True
        return None

    def _choices(self, choices: list[_Choice]) -> None:
        opened = self._open
        if opened is None:
            opened = self._open = {}
        for choice in choices:
            opened[choice.index] = opened.get(choice.index, True) and choice.finish_reason is None

    @property
    def _finished(self) -> bool:
        """Every Chat choice seen has its finish_reason."""
        return bool(self._open) and not any(self._open.values())

    def _bad(self, what: str, sample: bytes) -> UpstreamInvalid:
        # The backend's bytes go to the log, not to the client: they are not the router's to relay.
        log.warning("backend %s streamed %s: %r", self._label, what, sample[:200])
        return UpstreamInvalid.at(self._label, f"streamed {what}")


# An error event's type or code -> the status its failure has when a backend answers it whole. Anthropic's types
# (its errors page), OpenAI's and its Responses codes (those of the client's own input: a 400).
_EVENT_STATUS = {"invalid_request_error": 400, "invalid_prompt": 400, "authentication_error": 401,
                 "billing_error": 402, "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                 "rate_limit_error": 429, "rate_limit_exceeded": 429,
                 "invalid_image": 400, "invalid_image_format": 400, "invalid_base64_image": 400,
                 "invalid_image_url": 400, "image_too_large": 400, "image_too_small": 400, "image_parse_error": 400,
                 "image_content_policy_violation": 400, "invalid_image_mode": 400, "image_file_too_large": 400,
                 "unsupported_image_media_type": 400, "empty_image_file": 400, "failed_to_download_image": 400,
                 "image_file_not_found": 400, "overloaded_error": 529, "overloaded": 503,
                 "server_is_overloaded": 503, "api_error": 500, "server_error": 500, "timeout_error": 504}
# The statuses an error event reads as when it says so itself (its type or code, or an integer code, as vLLM and
# SGLang send): the backend's failure, counted against its health as the same status answered whole is. An
# event the router reads no status from (an unknown type, a bare string as Ollama and TGI send) is the
# backend's failure too, for the next candidate to answer (as a 502), but not held against its health: its cause
# is unknown, and a request's content must not let one client eject a backend for everyone.
UNREAD_EVENT_STATUS = 502


class _ErrorEvent(msgspec.Struct):
    """An error event's data, of any protocol: Messages' and Chat's ``error`` object (or Ollama's and TGI's
    string), a Responses ``error`` event (its fields flat, or nested under ``error``) or ``response.failed``
    (``response.error``)."""

    error: Any = None
    response: Any = None
    code: Any = None
    message: Any = None


_ERROR_EVENT = msgspec.json.Decoder(_ErrorEvent)


def event_error(api_format: str, data: bytes) -> tuple[int, bytes, bool]:
    """The status and error body (``api_format``'s error shape) of a backend's error event ``data``, and whether
    the event said that status itself (else ``UNREAD_EVENT_STATUS``, which is no health failure)."""
    try:
        event = _ERROR_EVENT.decode(data)
    except msgspec.DecodeError:
        event = _ErrorEvent()
    error = event.error if isinstance(event.error, dict) else \
        event.response.get("error") if isinstance(event.response, dict) else None
    if isinstance(event.error, str):
        error = {"message": event.error}
    error = error if isinstance(error, dict) else {"code": event.code, "message": event.message}
    kinds = [k for k in (error.get("type"), error.get("code")) if isinstance(k, str) and not k.isdigit()]
    # An integer code (vLLM's, SGLang's) is the status itself, more precise than a generic type beside it
    # (``"type": "server_error", "code": 503``: an overload, not a 500).
    status = _numeric(error.get("code")) or next((_EVENT_STATUS[k] for k in kinds if k in _EVENT_STATUS), None)
    said = status is not None
    status = status or UNREAD_EVENT_STATUS
    message = error.get("message") if isinstance(error.get("message"), str) else "the stream failed"
    if api_format == "anthropic":
        kind = next((k for k in kinds if k in ANTHROPIC_TYPES), None) or anthropic_type(status)
        return status, msgspec.json.encode({"type": "error", "error": {"type": kind, "message": message}}), said
    kind = kinds[0] if kinds else openai_type(status)
    return status, msgspec.json.encode({"error": {"message": message, "type": kind, "param": None,
                                                  "code": error.get("code")}}), said


def _numeric(code: object) -> int | None:
    """An error code that is an HTTP error status (vLLM's and SGLang's ``"code": 400``), else None."""
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    return code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else None


def check_status(status: int, label: str) -> None:
    """UpstreamInvalid unless ``status`` is a success or an error the client may see."""
    if status not in RELAYABLE:
        kind = "a redirect, which the router does not follow" if 300 <= status < 400 else "not a status it relays"
        raise UpstreamInvalid.at(label, f"answered HTTP {status}: {kind}")


def check_shape(path: str, body: bytes, label: str) -> None:
    """UpstreamInvalid unless a success ``body`` from ``path`` is JSON of the top-level shape answers there have."""
    decoder = _SHAPES.get(path)
    if decoder is not None:
        _reads(decoder.decode, body, label, f"answered 2xx with a body that is not an answer of {path}")


def check_whole(api_format: str, path: str, body: bytes, label: str, streamed: bool = False,
                tool_objects: bool = False) -> None:
    """UpstreamInvalid unless a whole success ``body`` reads as an answer of ``api_format``, all of it, when it
    is one (from the format's answer path, or to a stream request, whose answer is written as the client's
    events); else of its path's top-level shape. Read here, in the attempt, an unreadable answer (invalid
    UTF-8, ``prompt_tokens: "12"``) is the backend's failure and the next one answers, whatever the client's
    API: read only when translated, it was a 502 for some clients and relayed to others. The whole read costs
    about what the shape check does (1.9 against 0.7 µs for 852 bytes, 303 against 274 µs for 1 MiB).
    ``tool_objects``: the client reads each tool call's arguments as an object (a Messages client's tool_use
    input), so a call whose arguments are not a JSON object is unreadable too (it was ``input: {}``, the call's
    arguments lost)."""
    reader = BY_FORMAT.get(api_format) if streamed or path == PATHS.get(api_format) else None
    # The shape first: a reader fills fields left out with defaults (a Chat answer with no ``choices`` reads).
    check_shape(path, body, label)
    if reader is None:
        return
    what = "answered a stream request whole, with no answer it could stream" if streamed else \
        f"answered 2xx with a body that is not a readable answer of {path}"
    answer = _reads(reader.read_answer, body, label, what)
    # A call cut by the answer's length is the model's own end (max_tokens to the client, as streamed), not a
    # broken answer: no other candidate would be asked for it.
    if tool_objects and answer is not None and answer[0].finish != "length":
        for part in answer[0].parts:
            if isinstance(part, ToolCall) and parse_arguments(part.arguments) is None:
                raise UpstreamInvalid.at(label, f"answered a tool call ({part.name}) whose arguments are not a JSON "
                                                "object, as a Messages client's tool_use input must be")


def _reads(read, body: bytes, label: str, what: str):
    try:
        return read(body)
    except msgspec.DecodeError as exc:   # ValidationError included
        raise UpstreamInvalid.at(label, f"{what}: {exc}") from None
    except VsrError:
        return None     # a Responses answer whose status is failed: the client reads that failure


class Buffered:
    """The bytes of whole answers being read across a worker's requests, and their bound
    (``global.router.upstream.max_buffered_bytes``, set by ``Upstreams``)."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int = 256 << 20) -> None:
        self.held, self.limit = 0, limit


BUFFERED = Buffered()


async def read_bounded(resp: Response, limit: int, label: str, buffered: Buffered = BUFFERED) -> bytes:
    """The whole body of ``resp``, read in chunks; UpstreamTooLarge as soon as it is known to pass ``limit``, or
    to take the bytes ``buffered`` holds for every answer being read past its limit."""
    declared = resp.header(b"content-length")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(label, limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in resp.chunks():
            size += len(chunk)
            buffered.held += len(chunk)
            if size > limit or buffered.held > buffered.limit:
                # Let go of what was read now: the error's traceback holds this frame, and whoever keeps the error
                # (a round's last failure, in a reference cycle with its frame) would keep ``limit`` bytes alive
                # until the cyclic collector runs, which a router with a frozen heap and a raised threshold seldom
                # does.
                chunks.clear()
                del chunk
                raise _too_large(label, limit) if size > limit else UpstreamTooLarge.at(
                    label, f"answered while the router held {buffered.limit} bytes of answers being read "
                           "(max_buffered_bytes)")
            chunks.append(chunk)
    finally:
        buffered.held -= size
    return b"".join(chunks)


class Checked:
    """A backend's event stream as it comes, each chunk released only as far as its events are well formed
    (``EventCheck``) and ``limit`` bytes in all (``already`` counted); past either, UpstreamInvalid or
    UpstreamTooLarge, after the good bytes before it; it ends with the answer's terminator, whatever follows.
    A class, not an async generator: the relay may drop it unfinished, and it holds nothing to finalize."""

    __slots__ = ("_check", "_chunks", "_drained", "_failure", "_label", "_limit", "_size")

    def __init__(self, chunks: AsyncIterator[bytes], check: EventCheck, limit: int, label: str,
                 already: int = 0) -> None:
        self._chunks, self._check, self._limit, self._label, self._size = chunks, check, limit, label, already
        self._failure: UpstreamError | None = None
        self._drained = False

    @property
    def events(self) -> int:
        return self._check.events

    def ended_in_error(self) -> UpstreamError | None:
        """The failure of an answer the backend ended with its own error event (relayed, or translated, as it
        came: the client has read it), or None."""
        kind = self._check.erred
        if kind is None:
            return None
        return UpstreamError.at(self._label, f"ended its answer with its own {kind} event", cause="upstream_error")

    @property
    def answering(self) -> bool:
        """An event of the answer itself came, past the stream's opening events (``PREAMBLE``)."""
        return self._check.answering

    @property
    def ended(self) -> bool:
        return self._check.ended

    def failed_at_once(self, api_format: str, secret: bytes | None) -> tuple[int, bytes, bool] | None:
        """A stream whose answer never began, ended by the backend's error event: the status and error body
        (``api_format``'s, the key struck out) the same failure answered whole would have, and whether the event
        said that status (``event_error``); else None."""
        check = self._check
        if check.erred is None or check.answering:
            return None
        status, body, said = event_error(api_format, check.erred_data)
        return status, sanitized(body, secret, api_format, status, self._label), said

    def __aiter__(self) -> "Checked":
        return self

    async def __anext__(self) -> bytes:
        if self._failure is not None:
            raise self._failure
        if self._check.done:
            # The answer ended: what the backend sends after it is never relayed. The end of its body is read
            # (bounded) so the connection can be reused; one left unfinished is closed when the relay closes the
            # answer (closing every stream's connection cost a connect per streamed request).
            if not self._drained:
                self._drained = True
                await self._drain()
            raise StopAsyncIteration
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            failure = self._check.close()
            if failure is not None:
                self._failure = failure
                raise failure from None
            raise
        self._size += len(chunk)
        if self._size > self._limit:
            self._failure = _too_large(self._label, self._limit)
            raise self._failure
        good = self._check.feed(chunk)
        if self._check.failure is None:
            return chunk if good == len(chunk) else chunk[:good]
        self._failure = self._check.failure
        if not good:
            raise self._failure
        return chunk[:good]


    async def _drain(self) -> None:
        left = DRAIN_MAX_BYTES
        with trio.move_on_after(DRAIN_MAX_S):
            try:
                while left >= 0:
                    left -= len(await self._chunks.__anext__())
            except StopAsyncIteration:
                return
            except Exception as exc:  # a reset after the answer ended: the answer is whole, the connection goes
                log.debug("backend %s: after its answer's end: %r", self._label, exc)


def _too_large(label: str, limit: int) -> UpstreamTooLarge:
    return UpstreamTooLarge.at(label, f"answered more than {limit} bytes")


def sanitized(body: bytes, secret: bytes | None, api_format: str, status: int, label: str) -> bytes:
    """An error body safe to relay: the backend's own key never in it, and at most MAX_ERROR_BODY bytes
    (past that, a short error of the same protocol). The original goes to the DEBUG log, key removed."""
    if secret:
        body = body.replace(secret, REDACTED)
    log.debug("backend %s answered HTTP %d with %d bytes: %r", label, status, len(body), body)
    if len(body) <= MAX_ERROR_BODY:
        return body
    message = f"the upstream answered HTTP {status} with an error body of {len(body)} bytes, not relayed"
    if api_format == "anthropic":
        return msgspec.json.encode({"type": "error", "error": {"type": anthropic_type(status), "message": message}})
    return msgspec.json.encode({"error": {"message": message, "type": openai_type(status), "param": None,
                                          "code": None}})
