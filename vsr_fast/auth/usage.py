"""The tokens an answer used, read from its usage, whole or streamed.

Every protocol reports usage in its own place: Chat's ``usage`` (a stream's
usage-only last chunk, which the router asks an openai-format backend for),
Messages' ``message_start`` (input) and ``message_delta`` (output so far),
Responses' ``response.completed``. A relayed stream is read as the backend sent
it (``upstream``): what the client receives may leave the usage out (a Chat
client that did not ask for it, a translation). An answer that reports none is
estimated at four bytes a token of text: the request's (``prompt``) and the
answer's (a stream's deltas, a whole answer's content), never the JSON or SSE
framing around them. Only what a backend may have billed is estimated: a model's
answer (``answered``), or an attempt cut after its request reached a backend
(``cut``: the client left or the deadline passed while it read or answered, its
connection broke or timed out), whose prompt the provider bills. A request no backend billed
(refused by the router, a backend's error status, a connection refused or a TLS
error, a fast_response or a cache hit) is charged only the usage its calls
reported.
"""
from __future__ import annotations

from typing import Any

import msgspec

from ..protocol.usage import USAGE_DOC

_MARK = b'"usage"'
_DELTA = b'"delta"'
_MAX_LINE = 1 << 20        # a partial line kept past this is dropped (its usage with it): bounded memory


# --- the answer's text, for the estimate ---------------------------------------------------------------


class _Fn(msgspec.Struct):
    arguments: str | None = None


class _Call(msgspec.Struct):
    function: _Fn | None = None


class _Text(msgspec.Struct):
    """What carries a model's text in any protocol: Chat's delta or message, a Messages delta or block."""
    content: str | None = None
    reasoning_content: str | None = None
    refusal: str | None = None
    text: str | None = None
    thinking: str | None = None
    partial_json: str | None = None
    tool_calls: list[_Call] | None = None
    input: Any = None                    # a whole Messages tool_use block's arguments

    def size(self) -> int:
        n = sum(len(s.encode()) for s in (self.content, self.reasoning_content, self.refusal, self.text,
                                           self.thinking, self.partial_json) if s)
        for call in self.tool_calls or ():
            if call.function is not None and call.function.arguments:
                n += len(call.function.arguments.encode())
        if self.input is not None:
            n += len(msgspec.json.encode(self.input))
        return n


class _Choice(msgspec.Struct):
    delta: _Text | None = None
    message: _Text | None = None


class _Line(msgspec.Struct):
    """One stream event: Chat's chunk, a Messages delta, a Responses ``*.delta`` (a string)."""
    choices: list[_Choice] | None = None
    delta: str | _Text | None = None


class _Item(msgspec.Struct):
    content: list[_Text] | None = None
    arguments: str | None = None


class _Whole(msgspec.Struct):
    """A whole answer: Chat's choices, Messages' content blocks, Responses' output items."""
    choices: list[_Choice] | None = None
    content: list[_Text] | None = None
    output: list[_Item] | None = None


_LINE = msgspec.json.Decoder(_Line)
_WHOLE = msgspec.json.Decoder(_Whole)
_BAD = (msgspec.DecodeError, msgspec.ValidationError)


def _line_text(text: bytes) -> int:
    try:
        line = _LINE.decode(text)
    except _BAD:
        return 0
    n = sum(c.delta.size() for c in line.choices or () if c.delta is not None)
    if isinstance(line.delta, str):
        n += len(line.delta.encode())
    elif line.delta is not None:
        n += line.delta.size()
    return n


def _whole_text(body: bytes) -> int:
    try:
        doc = _WHOLE.decode(body)
    except _BAD:
        return 0
    n = sum(c.message.size() for c in doc.choices or () if c.message is not None)
    n += sum(block.size() for block in doc.content or ())
    for item in doc.output or ():
        n += sum(part.size() for part in item.content or ()) + len((item.arguments or "").encode())
    return n


def estimated(text_bytes: int) -> int:
    """Tokens in ``text_bytes`` of text at four bytes a token, rounded up: any text is one at least ("hi" was 0).
    What the access log shows and what a key is charged (``tokens``) alike: the prompt's and the answer's each."""
    return -(-text_bytes // 4)


class UsageMeter:
    __slots__ = ("request_bytes", "prompt", "text_bytes", "tail", "input", "output", "total", "seen", "relayed",
                 "unsent", "prepaid", "answered", "cut_short")

    def __init__(self, request_bytes: int) -> None:
        self.request_bytes = request_bytes      # the request body's size: the estimate's input until ``prompt``
        self.prompt: Any = None                 # a callable: the request's text size (UTF-8), read when estimated
        self.text_bytes = 0                     # the answer's text seen so far
        self.tail = b""
        self.input = self.output = self.total = 0
        self.seen = False
        self.relayed = False                    # the stream is read from the backend's bytes (``upstream``)
        self.unsent = 0                         # the reported usage of calls whose answers the client never got
        # An executor's answer, whose usage sums its calls: each call was charged (``unsent``) as it ended, so the
        # answer's own usage is read (the access log's) but not charged, nor counted, again.
        self.prepaid = False
        # A model's answer (2xx) reached the request: only then is its text estimated when it reports no usage.
        self.answered = False
        # An attempt was cut after its request reached a backend (``upstream.billing``): its prompt is charged.
        self.cut_short = False

    def cut(self) -> None:
        """An attempt was cut after its request reached a backend, which may bill its prompt."""
        self.cut_short = True

    def feed(self, chunk: bytes) -> None:
        """One piece of the answer as the client receives it, cut anywhere; unread once ``upstream`` reads it."""
        if not self.relayed:
            self._lines(chunk)

    def upstream(self, chunk: bytes) -> None:
        """One piece of a stream as the backend sent it: from the first one on, what the client receives is not
        read (it may leave the usage out)."""
        self.relayed = True
        self._lines(chunk)

    def _lines(self, chunk: bytes) -> None:
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if len(self.tail) < _MAX_LINE:
                self.tail += chunk
            return
        lines = self.tail + chunk[:cut] if self.tail else chunk[:cut]
        self.tail = chunk[cut + 1:]
        if _MARK in lines or _DELTA in lines:
            for line in lines.split(b"\n"):
                self._line(line)

    def _line(self, line: bytes) -> None:
        text = line[5:] if line.startswith(b"data:") else line
        if _MARK in text:
            self._read(text)
        if _DELTA in text and not self.seen:      # once usage came, nothing is estimated
            self.text_bytes += _line_text(text)

    def whole(self, body: bytes) -> None:
        """A whole answer: one JSON document, however it is laid out."""
        if _MARK in body:
            self._read(body)
        if not self.seen:
            self.text_bytes += _whole_text(body)

    def finish(self) -> None:
        tail, self.tail = self.tail, b""
        if tail:
            self._line(tail)

    def _read(self, text: bytes) -> None:
        try:
            doc = USAGE_DOC.decode(text.strip())
        except _BAD:
            return
        for u in doc.usages():
            self.seen = True
            self.input = max(self.input, u.input or 0)     # cached input included, as the provider counts it
            self.output = max(self.output, u.completion_tokens or 0, u.output_tokens or 0)
            self.total = max(self.total, u.total_tokens or 0)

    def estimate(self, body: bytes | None = None) -> tuple[int, int]:
        """The answer's usage (input, output) estimated at four bytes a token: the request's text and the
        answer's (a whole ``body``'s, else the stream's deltas read so far)."""
        if body is None:
            self.finish()       # the stream has ended: its last line is whole
        text = _whole_text(body) if body is not None else self.text_bytes
        return estimated(self._prompt()), estimated(text)

    def usage(self) -> tuple[int, int, int, bool] | None:
        """The answer's usage (input, output, total, estimated): as the backend reported it, else the estimate of
        a model's answer that reported none (docs/config.md, ``stream_usage``) or of an attempt cut after it
        reached a backend (what ``tokens`` charges); None when no backend billed it, and for an executor's answer,
        whose calls were each counted as they ended."""
        reported = self.reported()
        if reported is not None:
            return (*reported, False)
        if not (self.answered or self.cut_short) or self.prepaid:
            return None
        given, taken = self.estimate()
        return given, taken, given + taken, True

    def reported(self) -> tuple[int, int, int] | None:
        """The answer's own usage as the backend reported it (input, output, total), or None: never an estimate."""
        self.finish()
        if not self.seen:
            return None
        return self.input, self.output, max(self.total, self.input + self.output)

    def tokens(self) -> int:
        """What the request is charged: the answer's usage (or its estimate), every call it did not send, and the
        prompt's estimate at least when an attempt was cut after its request reached a backend."""
        self.finish()
        if self.prepaid:        # an executor's calls, each charged as it ended; one cut short, its prompt
            return self.unsent + (estimated(self._prompt()) if self.cut_short else 0)
        if self.seen:
            return max(self.total, self.input + self.output) + self.unsent
        if not (self.answered or self.cut_short):
            return self.unsent
        # The estimate the access log shows (``usage``): the prompt's and the answer's each rounded up. Their sum
        # rounded down charged a token or two less than the line said.
        return estimated(self._prompt()) + estimated(self.text_bytes) + self.unsent

    def _prompt(self) -> int:
        return self.prompt() if self.prompt is not None else self.request_bytes
