"""hypercorn's HTTP/1.1 protocol, telling the app the method as the request line spells it, and writing each
answer's head without h11 validating it again and again.

hypercorn hands h11 the head as a list, which h11 validates header by header (~25 regex calls an answer), then for
a streamed answer rebuilds and validates it twice more to set its framing. ``EdgeH11Protocol`` gives h11 the head
already validated by ``headers.wire`` (the same checks, the same result, the same error on a header HTTP cannot
carry), and its connection is a ``WireConnection``. What the client sends is parsed and validated by h11 as before.
"""
from __future__ import annotations

from itertools import chain

import h11
from hypercorn.events import Event
from hypercorn.protocol.events import Response
from hypercorn.protocol.h11 import H11Protocol

from ..headers.wire import WireConnection, valid_headers
from .asgi import CLIENT_SIDE


class EdgeH11Protocol(H11Protocol):
    """Set as the ``__class__`` of hypercorn's HTTP/1.1 protocol once the connection has one (``listen``)."""

    async def _create_stream(self, request: h11.Request) -> None:
        # The method as the request line spells it (``asgi.sent_method``): hypercorn upper-cases it in the scope,
        # so a ``get`` would be served as GET.
        side = CLIENT_SIDE.get()
        if side is not None:
            side.method = request.method
        await super()._create_stream(request)

    def adopt(self) -> None:
        """Called once the class is set: its h11 connection writes heads through ``headers.wire`` too."""
        if type(self.connection) is h11.Connection:
            self.connection.__class__ = WireConnection

    async def stream_send(self, event: Event) -> None:
        # hypercorn 0.18's final-answer branch, the head validated by headers.wire instead of h11's constructor.
        if type(event) is Response and event.status_code >= 200:
            headers = list(chain(event.headers, self.config.response_headers("h11")))
            if self.keep_alive_requests >= self.config.keep_alive_max_requests:
                headers.append((b"connection", b"close"))
            await self._send_h11_event(h11.Response(headers=valid_headers(headers), status_code=event.status_code))
        else:
            await super().stream_send(event)
