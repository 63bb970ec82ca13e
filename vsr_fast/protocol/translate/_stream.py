"""Stream translators: backend SSE bytes in, client SSE bytes out, sans I/O.

Every translator's output is whole events only, so an error event appended
after a backend failure is never glued onto half a JSON line.

``Passthrough`` serves a client and backend that speak the same protocol:
bytes leave as they came, cut at the last event boundary (``EventCutter``), at
no cost beyond that and a count. ``Translating`` parses the backend's events,
reads them into neutral events and writes the client's. ``WholeToStream`` serves a streaming client
whose backend answers whole (the Images API): it keeps the body and writes
the events at ``close``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec

from ...errors import VsrError
from ._ir import (
    Answer, ArgsDelta, BlockStart, BlockStop, Event, Failed, Finished, SignatureDelta, TextDelta, Usage,
    answer_events,
)
from ._losses import Loss
from ..sse import EventCutter
from ._sse import SSEParser


# The usage of an answer whose backend reported none, estimated once the answer has ended.
Estimate = Callable[[], Usage]


class Writer(Protocol):
    losses: list[Loss]

    def write(self, ev: Event) -> bytes: ...

    def fail(self, message: str, status: int, code: str | None, kind: str | None = None) -> bytes: ...


class Reader(Protocol):
    losses: list[Loss]

    def event(self, name: str | None, data: bytes) -> list[Event]: ...

    def close(self) -> list[Event]: ...


class StreamTranslator(Protocol):
    """What the server drives: ``feed`` each backend chunk, ``close`` at a clean end,
    ``fail`` instead when the backend broke mid-stream."""

    losses: list[Loss]

    def feed(self, chunk: bytes) -> bytes:
        """Client bytes for this backend chunk (possibly empty)."""
        ...

    def close(self) -> bytes:
        """The client bytes that end the stream."""
        ...

    def fail(self, exc: VsrError) -> bytes:
        """An in-stream error event in the client's shape, ending the stream."""
        ...

    def final(self) -> bytes | None:
        """For a Responses client: the completed response object, to remember; else None."""
        ...


class _Finalizer(msgspec.Struct):
    response: msgspec.Raw = msgspec.Raw(b"null")   # Raw cannot be part of a union


_FINAL = msgspec.json.Decoder(_Finalizer)
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})


class Passthrough:
    """Same protocol both sides: bytes unchanged, released up to the last complete event.

    ``tap`` (a Responses client whose answer is to be remembered) also parses the
    events, to keep the final response object; the bytes still pass unchanged.
    ``restate`` (Responses) rewrites the events it is given, the count before them and the
    stream's first: the backend's own error event, in the shape the router's failures have.
    """

    def __init__(self, fail: Callable[[str, int, str | None, str, int, bytes], bytes], tap: bool = False,
                 restate: Callable[[bytes, int, bytes], bytes] | None = None) -> None:
        self.losses: list[Loss] = []
        self._fail = fail
        self._restate = restate
        self._parser = SSEParser() if tap else None
        self._final: bytes | None = None
        self._events = 0
        self._head = b""    # the first event the client got: a Responses failure ends the response it opened
        self._cutter = EventCutter()

    def feed(self, chunk: bytes) -> bytes:
        if self._parser is not None:
            for name, data in self._parser.feed(chunk):
                if name in _FINAL_EVENTS:
                    self._keep(data)
        return self._released(self._cutter.feed(chunk))

    def _released(self, out: bytes) -> bytes:
        if out and not self._events:
            self._head = out[:out.find(b"\n\n") + 2]
        if out and self._restate is not None:
            out = self._restate(out, self._events, self._head)
        self._events += out.count(b"\n\n")
        return out

    def _keep(self, data: bytes) -> None:
        try:
            response = _FINAL.decode(data).response
        except msgspec.DecodeError:
            return
        if bytes(response) != b"null":
            self._final = bytes(response)

    def close(self) -> bytes:
        if self._parser is not None:
            for name, data in self._parser.close():
                if name in _FINAL_EVENTS:
                    self._keep(data)
        return self._released(self._cutter.flush())

    def fail(self, exc: VsrError) -> bytes:
        self._cutter.flush()   # half an event: dropped, the error event replaces it
        return self._fail(exc.message, exc.status, exc.code, exc.type, self._events, self._head)

    def final(self) -> bytes | None:
        return self._final


class OneBlockAtATime:
    """A reader's events with its blocks one after another, as the writers need them.

    A backend may stream blocks side by side (a Chat or Responses backend's parallel tool calls, their argument
    deltas alternating); the Messages and Responses client streams cannot. A block that starts while another is
    open waits, its events kept, until the open one stops: then it follows whole, or, if still going, live.
    """

    def __init__(self) -> None:
        self._open: int | None = None
        self._waiting: dict[int, list[Event]] = {}   # in the order the blocks started

    def __call__(self, events: list[Event]) -> list[Event]:
        if not self._waiting and not any(isinstance(ev, (BlockStart, BlockStop)) for ev in events):
            return events   # deltas of the open block: the most of a stream
        out: list[Event] = []
        for ev in events:
            if isinstance(ev, BlockStart):
                if self._open is None:
                    self._open = ev.index
                    out.append(ev)
                else:
                    self._waiting[ev.index] = [ev]
            elif isinstance(ev, (TextDelta, ArgsDelta, SignatureDelta, BlockStop)):
                held = self._waiting.get(ev.index)
                if held is not None:
                    held.append(ev)
                    continue
                out.append(ev)   # the open block's, or a late one for a block already left: the writer's to judge
                if isinstance(ev, BlockStop) and ev.index == self._open:
                    self._open = None
                    out += self._release()
            else:
                if isinstance(ev, Finished) and self._waiting:
                    out += self._drain()
                out.append(ev)
        return out

    def _release(self) -> list[Event]:
        out: list[Event] = []
        while self._waiting:
            index = next(iter(self._waiting))
            held = self._waiting.pop(index)
            out += held
            if not isinstance(held[-1], BlockStop):
                self._open = index
                break
        return out

    def _drain(self) -> list[Event]:
        """Readers stop every block before they finish; were one left open, the blocks waiting still go out."""
        out: list[Event] = []
        while self._open is not None:
            out.append(BlockStop(self._open))
            self._open = None
            out += self._release()
        return out


class Translating:
    """Backend events -> neutral events (one block at a time) -> client events."""

    def __init__(self, reader: Reader, writer: Writer, estimate: Estimate | None = None) -> None:
        self._parser = SSEParser()
        self._reader = reader
        self._order = OneBlockAtATime()
        self._writer = writer
        self._ended = False
        self._failed = False
        # The usage of an answer whose backend reported none, estimated (``auth.usage``): a client protocol whose
        # end carries usage (Messages' message_delta, Responses' response.completed, a Chat usage chunk asked for)
        # reads the estimate, not zeros it would take for the backend's count.
        self._estimate = estimate

    @property
    def losses(self) -> list[Loss]:
        return self._reader.losses + self._writer.losses

    def feed(self, chunk: bytes) -> bytes:
        if self._ended:
            return b""
        return self._write_all(self._parser.feed(chunk))

    def close(self) -> bytes:
        if self._ended:
            return b""
        out = self._write_all(self._parser.close())
        if not self._ended:
            out += self._emit(self._order(self._reader.close()))
        self._ended = True
        return out

    def fail(self, exc: VsrError) -> bytes:
        if self._ended:
            return b""
        # A reader that holds events until the answer says what they are (``JsonUnwrapping``) lets them out first.
        release = getattr(self._reader, "release", None)
        out = self._emit(self._order(release())) if release is not None else b""
        self._ended = True
        return out + self._writer.fail(exc.message, exc.status, exc.code, exc.type)

    def final(self) -> bytes | None:
        return getattr(self._writer, "final", None)

    def _write_all(self, events) -> bytes:
        out = b""
        for name, data in events:
            try:
                neutral = self._order(self._reader.event(name, data))
            except msgspec.DecodeError as exc:
                # An event we cannot read ends the answer: guessing would corrupt it.
                neutral = [Failed(f"unreadable upstream event: {exc}", 502, "upstream_failed")]
            out += self._emit(neutral)
            if self._ended:
                break
        return out

    def _emit(self, neutral: list[Event]) -> bytes:
        out = b""
        for ev in neutral:
            if isinstance(ev, Finished) and ev.usage is None and self._estimate is not None:
                ev = msgspec.structs.replace(ev, usage=self._estimate())
            out += self._writer.write(ev)
            if isinstance(ev, Failed):
                self._ended = True
                break
        return out


class WholeToStream:
    """A whole backend answer written as the client's stream once it is complete."""

    def __init__(self, read: Callable[[bytes], tuple[Answer, list[Loss]]], writer: Writer) -> None:
        self._read = read
        self._writer = writer
        self._body = bytearray()
        self._losses: list[Loss] = []
        self._ended = False

    @property
    def losses(self) -> list[Loss]:
        return self._losses + self._writer.losses

    def feed(self, chunk: bytes) -> bytes:
        self._body += chunk
        return b""

    def close(self) -> bytes:
        if self._ended:
            return b""
        self._ended = True
        try:
            answer, self._losses = self._read(bytes(self._body))
        except msgspec.DecodeError as exc:
            return self._writer.fail(f"unreadable upstream answer: {exc}", 502, "upstream_failed")
        except VsrError as exc:   # the backend's answer was itself a failure
            return self._writer.fail(exc.message, exc.status, exc.code, exc.type)
        return b"".join(self._writer.write(ev) for ev in answer_events(answer))

    def fail(self, exc: VsrError) -> bytes:
        self._ended = True
        return self._writer.fail(exc.message, exc.status, exc.code, exc.type)

    def final(self) -> bytes | None:
        return getattr(self._writer, "final", None)
