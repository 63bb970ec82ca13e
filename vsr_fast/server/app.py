"""The ASGI entry: the hot path as a raw handler, every other route through quart-trio."""
from __future__ import annotations

from ..errors import MethodNotAllowed
from ..headers.public import public_headers
from ..headers.registry import ResponsePath
from ..protocol import anthropic
from ..protocol.errors import openai_error_body
from .admin import make_admin
from .asgi import Receive, Scope, Send, header, lingering_close, send_whole, shield_final
from .count_tokens import handle_count_tokens
from .pipeline import handle_api
from .preview import handle_preview
from .systemone_api import handle_systemone, models_listing
from .state import AppState

# Inference routes -> client API (the adapters of protocol/adapters.py).
API_PATHS = {
    "/v1/chat/completions": "chat", "/chat/completions": "chat",
    "/v1/messages": "messages", "/v1/responses": "responses", "/v1/images/generations": "images",
}
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
PREVIEW_PATH = "/api/v1/routing/preview"
SYSTEMONE_PATHS = frozenset({"/v1/systemone", "/v1/decisions"})
SYSTEMONE_MODELS = "/v1/systemone/models"


def make_app(state: AppState):
    """An ASGI app over ``state``."""
    admin = make_admin(state)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        api = API_PATHS.get(scope["path"]) if scope["type"] == "http" else None
        if api is not None:
            if scope["method"] == "POST":
                await handle_api(state, api, scope, receive, send)
            else:
                await _method_not_allowed(state, send, api == "messages")
        elif scope["type"] == "http" and scope["path"] == COUNT_TOKENS_PATH:
            if scope["method"] == "POST":
                await handle_count_tokens(state, scope, receive, send)
            else:
                await _method_not_allowed(state, send, anthropic_shape=True)
        elif scope["type"] == "http" and scope["path"] == PREVIEW_PATH and scope["method"] == "POST":
            await handle_preview(state, scope, receive, send)
        elif scope["type"] == "http" and scope["path"] in SYSTEMONE_PATHS and scope["method"] == "POST":
            await handle_systemone(state, scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == SYSTEMONE_MODELS and scope["method"] == "GET":
            headers = public_headers(config_version=state.config_version, path=ResponsePath.UPSTREAM,
                                     recipe=None, decision=None, model=None)
            headers.append((b"content-type", b"application/json"))
            await send_whole(send, 200, headers, models_listing(state))
        elif scope["type"] == "http" and header(scope, b"connection") == b"close":
            await _until_response_ends(admin, scope, receive, send)
        else:
            await admin(scope, receive, send)

    return lingering_close(app)


async def _method_not_allowed(state: AppState, send: Send, anthropic_shape: bool = False) -> None:
    err = MethodNotAllowed("Only POST is allowed on this route")
    headers = public_headers(config_version=state.config_version, path=ResponsePath.ERROR,
                             recipe=None, decision=None, model=None)
    headers += [(b"content-type", b"application/json"), (b"allow", b"POST")]
    body = anthropic.error_body(err.message, "invalid_request_error") if anthropic_shape else openai_error_body(err)
    await send_whole(send, 405, headers, body)


async def _until_response_ends(app, scope: Scope, receive: Receive, send: Send) -> None:
    """Run quart so that a ``Connection: close`` request gets its connection closed.

    hypercorn closes the socket from inside the app's final ``send``; quart-trio
    cancels its request nursery at that moment, which interrupts the close and
    leaves the connection open until the client gives up (STACK-NOTES). The
    final send is shielded so hypercorn can finish closing.
    """
    await app(scope, receive, shield_final(send))
