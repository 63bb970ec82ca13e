"""The tokens an answer used, read from the bytes the client receives, whole or streamed.

Every client protocol reports usage in its own place: Chat's ``usage`` (the last
chunk of a stream), Messages' ``message_start`` (input) and ``message_delta``
(output so far), Responses' ``response.completed``. Only lines that mention
``"usage"`` are decoded. An answer that reports none (a Chat stream without
``include_usage``) is estimated at four bytes a token of request and answer.
"""
from __future__ import annotations

import msgspec

from ..protocol.sse import MarkedLines

_MARK = b'"usage"'
_MAX_LINE = 1 << 20        # a partial line kept past this is dropped (its usage with it): bounded memory


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class _Inner(msgspec.Struct):
    usage: _Usage | None = None


class _Doc(msgspec.Struct):
    usage: _Usage | None = None
    message: _Inner | None = None       # Messages' message_start
    response: _Inner | None = None      # Responses' response.completed


_DECODE = msgspec.json.Decoder(_Doc)


class UsageMeter:
    __slots__ = ("request_bytes", "answer_bytes", "lines", "input", "output", "total", "seen")

    def __init__(self, request_bytes: int) -> None:
        self.request_bytes = request_bytes
        self.answer_bytes = 0
        self.lines = MarkedLines(_MARK, _MAX_LINE)
        self.input = self.output = self.total = 0
        self.seen = False

    def feed(self, chunk: bytes) -> None:
        """One piece of a stream, cut anywhere: complete lines are read, the partial one is kept."""
        self.answer_bytes += len(chunk)
        for line in self.lines.feed(chunk):
            self._read(line[5:] if line.startswith(b"data:") else line)

    def whole(self, body: bytes) -> None:
        """A whole answer: one JSON document, however it is laid out."""
        self.answer_bytes += len(body)
        if _MARK in body:
            self._read(body)

    def finish(self) -> None:
        tail, self.lines.tail = self.lines.tail, b""
        if tail and _MARK in tail:
            self._read(tail[5:] if tail.startswith(b"data:") else tail)

    def _read(self, text: bytes) -> None:
        try:
            doc = _DECODE.decode(text.strip())
        except msgspec.DecodeError:
            return
        for u in (doc.usage, doc.message.usage if doc.message else None,
                  doc.response.usage if doc.response else None):
            if u is not None:
                self.seen = True
                self.input = max(self.input, u.prompt_tokens, u.input_tokens)
                self.output = max(self.output, u.completion_tokens, u.output_tokens)
                self.total = max(self.total, u.total_tokens)

    def tokens(self) -> int:
        self.finish()
        if self.seen:
            return max(self.total, self.input + self.output)
        return (self.request_bytes + self.answer_bytes) // 4
