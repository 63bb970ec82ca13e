"""hypercorn's HTTP/2 protocol with the defects a hostile client reached worked around (a subclass, not a fork):

- a DATA frame on a stream whose answer has ended raised ``KeyError`` out of hypercorn's event loop, ending the
  connection's task and the router with it; here it is acknowledged (connection flow control) and the stream is
  reset ``NO_ERROR``, which RFC 9113 8.1 gives a server to stop a request it has answered;
- hypercorn's stream buffer let its writer go on whenever a frame smaller than its low-water mark left, a frame
  of nothing (a zero flow-control window) included: a client that granted no window made the router read its
  backend as fast as it could, holding the answer in memory. Here the writer waits until the buffer itself is
  below that mark, so a client that reads nothing stalls the relay, and ``send_timeout_ms`` without progress
  (no frame of it sent) cuts that stream (RST_STREAM CANCEL; the request is recorded 408 ``send_timeout``, as on HTTP/1);
- rapid reset (CVE-2023-44487): a stream reset in the same read as its HEADERS never gets an app task, and a
  connection whose client resets more than ``MAX_RESETS`` streams within ``RESET_WINDOW_S``, and more than half
  the streams it opened in that window, is closed with
  GOAWAY ENHANCE_YOUR_CALM, as nginx and Envoy close it;
- a malformed request (RFC 9113 8.1.1: an uppercase or connection-specific header, NUL, CR or LF in a value, a
  pseudo-header wrong or missing, a content-length its body does not match) was a connection error in h2, so
  hypercorn closed the connection with GOAWAY PROTOCOL_ERROR and every request in flight on it went unanswered;
  here that stream alone is reset PROTOCOL_ERROR (``EdgeH2Connection``). What h2 cannot recover from (framing,
  HPACK) still ends the connection;
- a ``:method`` not in capitals (``post``) was upper-cased and served: its app task is told the method as sent
  (``asgi.STREAM_METHOD``), and the app answers it 400 ``invalid_method`` on its stream, as HTTP/1's request line
  (a method is a case-sensitive token, RFC 9113 8.3.1: the request is well-formed, so no stream reset);
- an HTTP/2 connection had no idle bound (h11 took its preface for a request in flight, which stopped the header
  timer for good): with no stream open it is held to ``limits.header_timeout_ms`` like an HTTP/1 one, then told
  GOAWAY NO_ERROR and closed (``listen.EdgeServer``); a frame header declaring more than the frame size is a
  connection error once its 9 bytes have come (h2 waited for the whole frame, up to 16 MiB, first); a header
  block (or frame header) left unfinished for header_timeout_ms while other streams are open ends the
  connection with GOAWAY PROTOCOL_ERROR (its stream does not exist yet: nothing to reset);
- a stream past SETTINGS_MAX_CONCURRENT_STREAMS was a connection error (GOAWAY PROTOCOL_ERROR, every request on
  the connection lost): that stream alone is refused, RST_STREAM REFUSED_STREAM (RFC 9113 5.1.2, as nginx);
- an app that let go of its stream with the answer unfinished (cut past the request deadline's grace while its
  client granted no window) left the stream open, unreset, until the connection's idle timer: it is reset
  (RST_STREAM CANCEL), as HTTP/1 closes the connection of an answer that did not end.
"""
from __future__ import annotations

import dataclasses

import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.frame_buffer
import h2.stream
import hyperframe.frame
import priority
import trio
from hypercorn.events import Closed, RawData, Updated
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol.events import Body, Data, EndBody, EndData, Response, StreamClosed, Trailers
from hypercorn.protocol.h2 import BUFFER_LOW_WATER, H2Protocol, StreamBuffer
from hypercorn.protocol.h11 import H2CProtocolRequiredError, H2ProtocolAssumedError

from ..errors import SendTimeout
from .asgi import STREAM_METHOD, quotable

# A client that resets more streams than this within the window, and more than half the streams it opened there,
# is closed (nginx closes past its per-iteration stream budget, Envoy past a premature-reset ratio): an attack resets
# nearly every stream it opens, while a proxy carrying many users' requests on one connection, or an editor that
# cancels each completion as the user types on, resets a share of a busy connection's streams.
MAX_RESETS = 200
RESET_WINDOW_S = 10.0
# The http.disconnect key that tells a request why the router cut its stream (asgi.DisconnectWatch reads it).
CUT_KEY = "vsr.cut"
_SENDING = (Body, Data, EndBody, EndData, Trailers)
# A stream's states once our END_STREAM (or a reset) has been queued.
_ENDED_HERE = frozenset({h2.stream.StreamState.HALF_CLOSED_LOCAL, h2.stream.StreamState.CLOSED})


class H2Counts:
    """What the HTTP/2 connections of one listener refused, for its metrics."""

    __slots__ = ("calmed", "reset_early")

    def __init__(self) -> None:
        self.calmed = 0             # connections closed with ENHANCE_YOUR_CALM: too many resets
        self.reset_early = 0        # streams reset in the read that opened them: never an app task

    def prometheus_lines(self) -> list[str]:
        return ["# HELP vsr_http2_streams_reset_unserved_total HTTP/2 streams their client reset in the read that "
                "opened them: never served.",
                "# TYPE vsr_http2_streams_reset_unserved_total counter",
                f"vsr_http2_streams_reset_unserved_total {self.reset_early}",
                "# HELP vsr_http2_rapid_reset_closes_total HTTP/2 connections closed with GOAWAY "
                f"ENHANCE_YOUR_CALM: more than {MAX_RESETS} stream resets within {RESET_WINDOW_S:g} s, over half its streams.",
                "# TYPE vsr_http2_rapid_reset_closes_total counter",
                f"vsr_http2_rapid_reset_closes_total {self.calmed}"]


class Malformed(h2.events.Event):
    """A request its stream's own rules refused (RFC 9113 8.1.1), or one past the concurrent streams' limit: the
    stream is reset, the connection lives."""

    def __init__(self, stream_id: int, reason: str) -> None:
        self.stream_id, self.reason = stream_id, reason

    def __repr__(self) -> str:
        return f"<Malformed stream_id:{self.stream_id}, reason:{self.reason}>"


class _Refused(Exception):
    """Raised by a stream's header or body-length check in place of h2's ProtocolError, which would end the
    connection."""


def _refusing(check):
    def refuse(*args):
        try:
            return check(*args)
        except h2.exceptions.ProtocolError as error:
            raise _Refused(str(error)) from error
    return refuse


class _EagerFrameBuffer(h2.frame_buffer.FrameBuffer):
    """h2's frame buffer with a frame's length checked once its header has come: h2 checked it once the whole
    frame had, so 9 bytes of 0xff held the connection open (and its buffer growing) for 16 MiB that never came."""

    frames = 0   # frames (header blocks whole) read: once it moves, the head that was unfinished is not

    def __next__(self):
        if len(self._data) >= 9:
            self._validate_frame_length(int.from_bytes(self._data[:3], "big"))
        frame = super().__next__()
        self.frames += 1
        return frame


class EdgeH2Connection(h2.connection.H2Connection):
    """h2's connection with a malformed request a stream error (RST_STREAM PROTOCOL_ERROR), as RFC 9113 8.1.1 has
    it, rather than a connection error. The header block is still decoded whole first, so HPACK stays in step."""

    # The stream's checks of what it received: its headers (h2's validation), its content-length and its body's
    # length against it. Each runs after the stream's state has taken the frame, so a reset is in order.
    _CHECKS = ("_process_received_headers", "_initialize_content_length", "_track_content_length")

    @classmethod
    def adopt(cls, connection: h2.connection.H2Connection) -> None:
        """Makes hypercorn's new connection (nothing received yet) one of these: its frame table bound h2's own."""
        connection.__class__ = cls
        connection.incoming_buffer.__class__ = _EagerFrameBuffer
        connection._frame_dispatch_table.update({hyperframe.frame.HeadersFrame: connection._receive_headers_frame,
                                                 hyperframe.frame.DataFrame: connection._receive_data_frame})

    def _begin_new_stream(self, stream_id, allowed_ids):
        stream = super()._begin_new_stream(stream_id, allowed_ids)
        for name in self._CHECKS:
            setattr(stream, name, _refusing(getattr(stream, name)))
        return stream

    def _receive_headers_frame(self, frame):
        try:
            return super()._receive_headers_frame(frame)
        except h2.exceptions.TooManyStreamsError as error:
            return self._over_limit(frame, error)
        except _Refused as error:
            return self._refuse(frame.stream_id, error)

    def _over_limit(self, frame, error: h2.exceptions.TooManyStreamsError) -> tuple[list, list]:
        """A stream past SETTINGS_MAX_CONCURRENT_STREAMS, refused alone (RFC 9113 5.1.2: RST_STREAM REFUSED_STREAM,
        as nginx does; h2 raised a connection error). h2 checks the limit before decoding the header block: the
        stream is opened here as h2 would, so HPACK stays in step and the reset is of an open stream."""
        headers = h2.connection._decode_headers(self.decoder, frame.data)
        events = self.state_machine.process_input(h2.connection.ConnectionInputs.RECV_HEADERS)
        stream = self._get_or_create_stream(frame.stream_id, h2.connection.AllowedStreamIDs(not self.config.client_side))
        try:
            stream.receive_headers(headers, "END_STREAM" in frame.flags, self.config.header_encoding)
        except _Refused:
            pass        # malformed as well: refused either way
        return stream.reset_stream(h2.errors.ErrorCodes.REFUSED_STREAM), [*events, Malformed(frame.stream_id, str(error))]

    def _receive_data_frame(self, frame):
        try:
            return super()._receive_data_frame(frame)
        except _Refused as error:
            frames, events = self._refuse(frame.stream_id, error)
            # The frame counted against the connection's window, and no one will acknowledge it now.
            increment = self._inbound_flow_control_window_manager.process_bytes(frame.flow_controlled_length)
            if increment:
                frames.append(hyperframe.frame.WindowUpdateFrame(0, window_increment=increment))
            return frames, events

    def _refuse(self, stream_id: int, error: _Refused) -> tuple[list, list]:
        return self.streams[stream_id].reset_stream(h2.errors.ErrorCodes.PROTOCOL_ERROR), [Malformed(stream_id, str(error))]


class EdgeH2Protocol(H2Protocol):
    """hypercorn's ``H2Protocol`` with the fixes above; ``send_timeout_s`` and ``counts`` set by ``EdgeProtocol``."""

    send_timeout_s = 60.0
    counts = H2Counts()
    _resets = 0
    _opened = 0
    _window_start = 0.0

    def __init__(self, *args) -> None:
        super().__init__(*args)
        EdgeH2Connection.adopt(self.connection)
        self._idle: dict[int, trio.CancelScope] = {}    # per stream, the wait of its send in progress
        self._head_timer: trio.CancelScope | None = None   # while a header block (or a frame header) is unfinished

    async def handle(self, event) -> None:
        await super().handle(event)
        if isinstance(event, Closed) or self.closed:
            if self._head_timer is not None:
                self._head_timer.cancel()
        elif _head_unfinished(self.connection.incoming_buffer):
            if self._head_timer is None:
                self._head_timer = trio.CancelScope()
                self.task_group.spawn(self._head_deadline, self._head_timer)
        elif self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    async def _head_deadline(self, scope: trio.CancelScope) -> None:
        """Ends the connection whose client left a header block unfinished, no frame read whole, for
        header_timeout_ms while streams were open (with none open, the connection's idle timer closes it first):
        its stream does not exist yet, so there is nothing to reset, and the bytes after it could not be read."""
        buffer = self.connection.incoming_buffer
        with scope:
            # Counted from the read that left the head unfinished; a read loop held up in handle() (a stream's
            # queue full, a slow reader's write) may since have read the rest, so a head finished, or a later one
            # unfinished, is not the client's silence.
            while True:
                seen = buffer.frames
                await trio.sleep(self.config.keep_alive_timeout)
                if buffer.frames == seen or not _head_unfinished(buffer):
                    break
            self._head_timer = None
            if self.idle or not _head_stalled(buffer, seen):   # with no stream open, the idle timer closes it
                return
            self.connection.close_connection(h2.errors.ErrorCodes.PROTOCOL_ERROR, b"request head unfinished")
            await self._flush()
            await self.send(Closed())

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        reset = {e.stream_id for e in events if isinstance(e, h2.events.StreamReset) and e.remote_reset}
        unserved = {e.stream_id for e in events if isinstance(e, h2.events.RequestReceived)} & reset if reset else ()
        self._opened += sum(isinstance(e, h2.events.RequestReceived) for e in events)
        # One event at a time: hypercorn's loop awaits between events, during which an app may end its stream.
        for event in events:
            stream_id = getattr(event, "stream_id", 0)
            if stream_id in unserved:
                if isinstance(event, h2.events.DataReceived):
                    self.connection.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.StreamReset):
                    self.counts.reset_early += 1
                    if await self._reset_seen():
                        return
                continue
            # Answered is our END_STREAM queued, not the app's StreamClosed seen: the app task, woken as its buffer
            # drained, may run after this read task in the scheduler's next pass (on a loaded box the client's DATA,
            # sent on reading END_STREAM, is read in that pass), and the body went to a finished app, with no reset.
            if isinstance(event, h2.events.DataReceived) and (stream_id not in self.streams
                                                              or self._answered(stream_id)):
                self._data_after_answer(event)
                continue
            if isinstance(event, Malformed):     # already reset; a request being read learns its client left
                await self._close_stream(stream_id)
                await self._drop_buffer(stream_id)
                continue
            if isinstance(event, h2.events.RequestReceived) and _tunnel(event.headers):
                # hypercorn takes every CONNECT for a WebSocket and fails on one without a :path (a NameError
                # that ended the connection); the router opens no tunnels: 501 (RFC 9110 15.6.2), on that stream.
                self.connection.send_headers(stream_id, quotable(501, [(b":status", b"501"),
                                                                       (b"content-length", b"0")]), end_stream=True)
                continue
            await super()._handle_events([event])
            if isinstance(event, h2.events.StreamReset) and event.remote_reset and await self._reset_seen():
                return
        await self._flush()

    async def _create_stream(self, request: h2.events.RequestReceived) -> None:
        # The app task hypercorn spawns here copies the context: it reads the method as sent (asgi.sent_method).
        method = next((value for name, value in request.headers if name == b":method"), b"")
        token = STREAM_METHOD.set(method)
        try:
            await super()._create_stream(request)
        finally:
            STREAM_METHOD.reset(token)

    def _answered(self, stream_id: int) -> bool:
        """Whether our side of the stream has ended (END_STREAM queued, or the stream closed): h2 writes frames in
        the order queued, so a reset from here on follows the whole answer."""
        stream = self.connection.streams.get(stream_id)
        return stream is None or stream.state_machine.state in _ENDED_HERE

    def _data_after_answer(self, event: h2.events.DataReceived) -> None:
        """Body bytes of a request whose app has finished or whose answer has ended: their window goes back, and
        once the answer has gone the client is asked to stop sending (RFC 9113 8.1: RST_STREAM NO_ERROR after a
        complete response)."""
        self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        if not self._answered(event.stream_id):     # its answer is still being written: a reset would cut it
            return
        try:
            self.connection.reset_stream(event.stream_id, h2.errors.ErrorCodes.NO_ERROR)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass

    async def goaway(self) -> None:
        """Tells the client the connection is closing (GOAWAY NO_ERROR), before the server closes it."""
        if not self.closed:
            self.connection.close_connection()
            await self._flush()

    async def _reset_seen(self) -> bool:
        """Counts one stream reset by the client; past the limit, closes the connection and says so."""
        now = trio.current_time()
        if now - self._window_start > RESET_WINDOW_S:
            self._window_start, self._resets, self._opened = now, 0, 0
        self._resets += 1
        if self._resets <= MAX_RESETS or self._resets * 2 <= self._opened:
            return False
        self.counts.calmed += 1
        self.connection.close_connection(h2.errors.ErrorCodes.ENHANCE_YOUR_CALM,
                                         b"too many stream resets")
        await self._flush()
        await self.send(Closed())
        return True

    async def stream_send(self, event) -> None:
        if type(event) is Response and event.status_code >= 400:    # hypercorn's own refusals too: given an id
            event = dataclasses.replace(event, headers=quotable(event.status_code, event.headers))
        if isinstance(event, StreamClosed) and self._unfinished(event.stream_id):
            await self._reset_unfinished(event.stream_id)
        if not isinstance(event, _SENDING) or event.stream_id not in self.stream_buffers:
            await super().stream_send(event)
            return
        # hypercorn waits here for the stream's buffer to drain, which only the client's window lets happen: each
        # frame sent moves the deadline (``_send_data``), so only a wait without progress cuts the stream (one
        # event may be an answer of megabytes, longer than send_timeout_s to a slow client that reads steadily).
        with trio.CancelScope(deadline=trio.current_time() + self.send_timeout_s) as idle:
            self._idle[event.stream_id] = idle
            try:
                await super().stream_send(event)
            finally:
                self._idle.pop(event.stream_id, None)
        if idle.cancelled_caught:
            await self._cut(event.stream_id)

    def _unfinished(self, stream_id: int) -> bool:
        """Whether the app let go of a stream whose answer it did not end (no END_STREAM queued, none buffered):
        cut past its deadline's grace while its client took nothing."""
        buffer = self.stream_buffers.get(stream_id)
        return not self._answered(stream_id) and not (buffer is not None and buffer.complete)

    async def _reset_unfinished(self, stream_id: int) -> None:
        """Resets a stream whose answer was cut unfinished (RST_STREAM CANCEL), as HTTP/1 closes the connection:
        hypercorn only forgot it, and the client waited on it until the connection's idle timer."""
        try:
            self.connection.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass
        await self._drop_buffer(stream_id)
        await self._flush()

    async def _cut(self, stream_id: int) -> None:
        """Ends a stream whose client took none of it for ``send_timeout_s``: its request learns why first."""
        why = SendTimeout(f"the client took none of the answer for {self.send_timeout_s:g} s (send_timeout_ms); "
                          "its HTTP/2 stream was reset")
        put = getattr(self.streams.get(stream_id), "app_put", None)
        if put is not None:
            await put({"type": "http.disconnect", CUT_KEY: why})
        try:
            self.connection.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            pass
        await self._drop_buffer(stream_id)
        await self._close_stream(stream_id)
        await self._flush()

    async def _drop_buffer(self, stream_id: int) -> None:
        buffer = self.stream_buffers.pop(stream_id, None)
        if buffer is not None:
            await buffer.close()
        try:
            self.priority.remove_stream(stream_id)
        except priority.MissingStreamError:
            pass

    async def _send_data(self, stream_id: int) -> None:
        # hypercorn's, with the buffer's writer let go by what is left in it (``_take``), not by the frame sent.
        buffer = self.stream_buffers.get(stream_id)
        if buffer is None:
            return
        try:
            size = max(0, min(self.connection.local_flow_control_window(stream_id),
                              self.connection.max_outbound_frame_size))
            data = await _take(buffer, size)
            if data:
                self.connection.send_data(stream_id, data)
                await self._flush()
                idle = self._idle.get(stream_id)
                if idle is not None:        # progress: the client took a frame
                    idle.deadline = trio.current_time() + self.send_timeout_s
            else:
                self.priority.block(stream_id)
            if buffer.complete:
                # Let go of the buffer with END_STREAM queued (the stream's state says the answer is over, see
                # _answered): nothing is left to write, whatever the client sends on reading it.
                self.connection.end_stream(stream_id)
                self.stream_buffers.pop(stream_id, None)
                self.priority.remove_stream(stream_id)
                await self._flush()
        except (h2.exceptions.StreamClosedError, KeyError, h2.exceptions.ProtocolError,
                priority.MissingStreamError):
            # The stream or the connection closed while this waited to send: its writer is let go.
            await self._drop_buffer(stream_id)


def _tunnel(headers: list[tuple[bytes, bytes]]) -> bool:
    """A plain CONNECT (RFC 9113 8.5): a tunnel asked for, not an extended CONNECT's protocol (RFC 8441)."""
    names = {name for name, _ in headers}
    # Any spelling: hypercorn upper-cases the method before taking a CONNECT for a WebSocket.
    return any(n == b":method" and v.upper() == b"CONNECT" for n, v in headers) and b":protocol" not in names


def _head_stalled(buffer: _EagerFrameBuffer, frames_seen: int) -> bool:
    """Whether the head unfinished when ``buffer`` had read ``frames_seen`` frames is unfinished still: no frame
    has come whole since."""
    return buffer.frames == frames_seen and _head_unfinished(buffer)


def _head_unfinished(buffer: h2.frame_buffer.FrameBuffer) -> bool:
    """Whether h2 holds part of a frame header, of a HEADERS or CONTINUATION frame, or a header block awaiting
    its CONTINUATION (a DATA frame's pace is the body timeout's)."""
    data = buffer._data
    return bool(buffer._headers_buffer) or 0 < len(data) < 9 or (len(data) >= 9 and data[3] in (0x1, 0x9))


async def _take(buffer: StreamBuffer, size: int) -> bytes:
    """Up to ``size`` bytes off ``buffer``'s front; its writer goes on once what is left is below the low-water
    mark (hypercorn's ``pop`` lets it go whenever the bytes taken are, a frame of none included)."""
    data = bytes(buffer.buffer[:size])
    del buffer.buffer[:size]
    if len(buffer.buffer) < BUFFER_LOW_WATER:
        await buffer._paused.set()
    if not buffer.buffer:
        await buffer._is_empty.set()
    return data


class EdgeProtocol(ProtocolWrapper):
    """hypercorn's protocol switch (HTTP/1.1, then HTTP/2 by prior knowledge or upgrade), to ``EdgeH2Protocol``.
    ``send_timeout_s`` and ``counts`` are set by the connection server when it installs this class."""

    send_timeout_s = 60.0
    counts = H2Counts()

    async def handle(self, event) -> None:
        try:
            return await self.protocol.handle(event)
        except H2ProtocolAssumedError as error:
            self.protocol = self._h2()
            await self.protocol.initiate()
            data = error.data
        except H2CProtocolRequiredError as error:
            self.protocol = self._h2()
            await self.protocol.initiate(error.headers, error.settings)
            data = error.data
        # h11 took the preface (or the upgrade) for a request in flight: the header timeout runs again while the
        # connection has no stream open (EdgeServer closes it past header_timeout_ms, as an idle HTTP/1 one).
        await self.send(Updated(idle=self.protocol.idle))
        if data != b"":
            await self.protocol.handle(RawData(data=data))

    def _h2(self) -> EdgeH2Protocol:
        protocol = EdgeH2Protocol(self.app, self.config, self.context, self.task_group, self.state, self.ssl,
                                  self.client, self.server, self.send)
        protocol.send_timeout_s, protocol.counts = self.send_timeout_s, self.counts
        return protocol
