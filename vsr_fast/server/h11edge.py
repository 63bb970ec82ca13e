"""hypercorn's HTTP/1.1 protocol, telling the app the method as the request line spells it, and writing each
answer's head without h11 validating it again and again.

hypercorn hands h11 the head as a list, which h11 validates header by header (~25 regex calls an answer), then for
a streamed answer rebuilds and validates it twice more to set its framing. ``EdgeH11Protocol`` gives h11 the head
already validated by ``headers.wire`` (the same checks, the same result, the same error on a header HTTP cannot
carry), and its connection is a ``WireConnection``. What the client sends is parsed and validated as h11 does
(``headers.read``: the same events, the same errors).

An ``Upgrade`` is never taken (RFC 9110 7.8: a server may ignore it), as nginx and Envoy do by default:

- ``h2c`` (RFC 9113 3.1 deprecates it): hypercorn answered 101 and switched to HTTP/2 before any check of the
  request (an HTTP/1.0 line, no HTTP2-Settings, a method in lowercase, which HTTP/2's side then served), and an
  HTTP/1 client that only passed the header on saw 101, frames, then the connection close. HTTP/2 is still
  served by prior knowledge (the ``PRI`` preface) and ALPN;
- ``websocket``: no route speaks it. hypercorn took a GET's handshake to its WebSocket stream, which answered one
  it found broken (no key, HTTP/1.0, a request pipelined behind it) with a bare 400 and then held the connection
  open; as a plain request the app refuses it in the path's own shape (``app._refuse_websocket``) and the
  connection serves the next one.
"""
from __future__ import annotations

from itertools import chain

import h11
from hypercorn.events import Event
from hypercorn.protocol.events import Body, EndBody, Request, Response
from hypercorn.protocol.h11 import STREAM_ID, H2ProtocolAssumedError, H11Protocol
from hypercorn.protocol.http_stream import HTTPStream

from ..headers.wire import adopt as to_wire
from ..headers.wire import valid_headers
from . import process
from .asgi import CLIENT_SIDE, quotable


class EdgeH11Protocol(H11Protocol):
    """Set as the ``__class__`` of hypercorn's HTTP/1.1 protocol once the connection has one (``listen``)."""

    async def _create_stream(self, request: h11.Request) -> None:
        # The method as the request line spells it (``asgi.sent_method``): hypercorn upper-cases it in the scope,
        # so a ``get`` would be served as GET.
        side = CLIENT_SIDE.get()
        if side is not None:
            side.method = request.method
        # hypercorn 0.18's, with every request a plain HTTP stream (its WebSocket branch left out, above).
        self.stream = HTTPStream(self.app, self.config, self.context, self.task_group, self.ssl, self.client,
                                 self.server, self.stream_send, STREAM_ID)
        # ``list(request.headers)`` is h11's Sequence walked a Python ``__getitem__`` per header (and an IndexError
        # to end it): the same pairs, its lowercase names and values, read from h11's stored items in one pass.
        headers = request.headers.raw_items() if self.config.h11_pass_raw_headers else \
            [(name, value) for _, name, value in request.headers._full_items]
        await self.stream.handle(Request(stream_id=STREAM_ID, headers=headers,
                                         http_version=request.http_version.decode(),
                                         method=request.method.decode("ascii").upper(), raw_path=request.target,
                                         state=self.connection_state))
        self.keep_alive_requests += 1
        await self.context.mark_request()

    async def _check_protocol(self, event: h11.Request) -> None:
        # hypercorn's, without the h2c upgrade (above): HTTP/2 by prior knowledge only.
        if event.method == b"PRI" and event.target == b"*" and event.http_version == b"2.0":
            raise H2ProtocolAssumedError(b"PRI * HTTP/2.0\r\n\r\n" + self.connection.trailing_data[0])

    def adopt(self) -> None:
        """Called once the class is set: its h11 connection writes heads through ``headers.wire`` too."""
        if type(self.connection) is h11.Connection:
            to_wire(self.connection)

    async def stream_send(self, event: Event) -> None:
        # hypercorn 0.18's final-answer branch, the head validated by headers.wire instead of h11's constructor; a
        # refusal of hypercorn's own (its bare 4xx and 5xx) given a request id. A body's pieces and its end are its
        # Body and EndBody branches, found by type (hypercorn's events are final classes) rather than at the end
        # of its isinstance chain: one a streamed answer's chunk.
        kind = type(event)
        if kind is Body:
            await self._send_h11_event(h11.Data(data=event.data))
        elif kind is EndBody:
            await self._send_h11_event(h11.EndOfMessage())
        elif kind is Response and event.status_code >= 200:
            headers = list(chain(event.headers, self.config.response_headers("h11")))
            if event.status_code >= 400:
                headers = quotable(event.status_code, headers)
            if self.keep_alive_requests >= self.config.keep_alive_max_requests or (
                    process.draining() and (b"connection", b"close") not in headers):
                # Draining: as Envoy's drain, each answer begun from SIGTERM on (one in flight then too) closes its
                # connection, so a keep-alive client's next request goes to a router that is not stopping.
                headers.append((b"connection", b"close"))
            await self._send_h11_event(h11.Response(headers=valid_headers(headers), status_code=event.status_code))
        else:
            await super().stream_send(event)
