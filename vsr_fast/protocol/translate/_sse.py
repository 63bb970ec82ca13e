"""Server-sent events in and out, sans I/O: an incremental parser and the writers."""
from __future__ import annotations

import re

_EOL = re.compile(rb"\r\n|\r|\n")

SSEvent = tuple[str | None, bytes]   # (event name or None, data lines joined by \n)


class SSEParser:
    """Feed bytes cut anywhere (inside a line, a CRLF or a UTF-8 sequence); get whole events.

    Follows the WHATWG event-stream rules: LF, CR or CRLF ends a line, ``:``
    starts a comment, a blank line dispatches. Unlike the standard, ``close``
    also dispatches an event the stream ended without a blank line after,
    since some backends end on ``data: [DONE]\\n``.
    """

    __slots__ = ("_parts", "_event", "_data")

    def __init__(self) -> None:
        self._parts: list[bytes] = []     # the unfinished line, as the reads that brought it
        self._event: str | None = None
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[SSEvent]:
        parts = self._parts
        search = 0
        if parts:
            # A line arriving in many reads is kept as its reads, each searched once, and joined when it ends
            # (joining and searching all of it at every read cost the square of its length). A carried CR may
            # be half a CRLF: the search starts on it.
            if parts[-1][-1:] != b"\r" and _EOL.search(chunk) is None:
                parts.append(chunk)
                return []
            carried = sum(map(len, parts))
            buf, self._parts = b"".join((*parts, chunk)), []
            search = carried - 1 if parts[-1][-1:] == b"\r" else carried
        else:
            buf = chunk
        events: list[SSEvent] = []
        pos = 0
        while (m := _EOL.search(buf, search)) is not None:
            if m.group() == b"\r" and m.end() == len(buf):
                break   # maybe the first half of a CRLF: wait for the next byte
            self._line(buf[pos:m.start()], events)
            pos = search = m.end()
        if pos < len(buf):
            self._parts = [buf[pos:]]
        return events

    def close(self) -> list[SSEvent]:
        events: list[SSEvent] = []
        if self._parts:
            self._line(b"".join(self._parts).rstrip(b"\r"), events)
            self._parts = []
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[SSEvent]) -> None:
        if not line:
            if self._data:
                events.append((self._event, b"\n".join(self._data)))
            self._event, self._data = None, []
            return
        if line[0] == 0x3A:   # ":" comment
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")


def data_event(data: bytes) -> bytes:
    """A ``data:`` only event (Chat Completions)."""
    return b"data: " + data + b"\n\n"


def named_event(name: bytes, data: bytes) -> bytes:
    """An ``event:`` + ``data:`` event (Messages, Responses)."""
    return b"event: " + name + b"\ndata: " + data + b"\n\n"
