"""Stage 1, decode: the body read under the request's deadline, then decoded in the client's protocol."""
from __future__ import annotations

from ..asgi import Message, Receive, read_body
from .exchange import Exchange
from .offload import off_loop


async def read(ex: Exchange, receive: Receive, first: Message | None = None) -> None:
    """The whole body (BodyTooLarge past the limit, BodyTimeout behind the body's pace, ClientGone if the
    client leaves); ``first``: its first message, already taken."""
    ex.raw = await read_body(ex.scope, receive, ex.state.max_body_bytes, ex.state.body_pace, first)


async def decode(ex: Exchange) -> None:
    """The typed request (RequestError with the bad field's path), expanded by any I/O the protocol needs:
    the caller's own stored Responses only (``Inbound.owner``)."""
    req = await off_loop(ex.state.metrics, "decode", len(ex.raw), ex.adapter.decode, ex.raw, ex.scope["headers"])
    req.owner = ex.state.identity(ex.scope).owner
    ex.req = await ex.adapter.prepare(req)
