"""The ASGI entry: the hot path as a raw handler, every other route through quart-trio."""
from __future__ import annotations

import trio

from ..errors import RequestError
from ..headers.public import public_headers
from ..headers.registry import ResponsePath
from ..protocol.errors import openai_error_body
from .admin import make_admin
from .asgi import Receive, Scope, Send, header, send_whole
from .chat import handle_chat
from .state import AppState

CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})


def make_app(state: AppState):
    """An ASGI app over ``state``."""
    admin = make_admin(state)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in CHAT_PATHS:
            if scope["method"] == "POST":
                await handle_chat(state, scope, receive, send)
            else:
                await _method_not_allowed(state, send)
        elif scope["type"] == "http" and header(scope, b"connection") == b"close":
            await _until_response_ends(admin, scope, receive, send)
        else:
            await admin(scope, receive, send)

    return app


async def _method_not_allowed(state: AppState, send: Send) -> None:
    err = RequestError("Only POST is allowed on this route")
    err.status, err.code = 405, "method_not_allowed"
    headers = public_headers(config_version=state.config_version, path=ResponsePath.ERROR,
                             recipe=None, decision=None, model=None)
    headers += [(b"content-type", b"application/json"), (b"allow", b"POST")]
    await send_whole(send, 405, headers, openai_error_body(err))


async def _until_response_ends(app, scope: Scope, receive: Receive, send: Send) -> None:
    """Run quart until its response is sent, then return.

    quart-trio keeps its request task (and so the connection) alive until the
    client disconnects, so a ``Connection: close`` request would never be
    closed (STACK-NOTES). Ending the ASGI call once the last body message is
    sent lets hypercorn close the connection as asked.
    """
    async with trio.open_nursery() as nursery:
        async def send_then_finish(message: dict) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                nursery.cancel_scope.cancel()

        nursery.start_soon(app, scope, receive, send_then_finish)
