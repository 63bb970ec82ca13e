"""Which client API's error shape a path's client reads: shared by the raw ASGI app, quart's routes and the
connection server's own answers (a request refused before any app saw it)."""
from __future__ import annotations

from ..errors import VsrError
from ..headers.registry import ANTHROPIC_VERSION
from ..protocol import anthropic
from ..protocol.errors import openai_error_body
from .asgi import Scope, header
from .models_api import is_models_path
from .systemone_api import error_body as systemone_error_body

ANTHROPIC_PREFIX = "/v1/messages"     # /v1/messages and everything under it: Anthropic's error shape
SYSTEMONE_PATHS = frozenset({"/v1/systemone", "/v1/decisions"})
_SYSTEMONE_PREFIXES = ("/v1/systemone/", "/v1/decisions/")    # System One's API and its routes' own 404s
_ANTHROPIC_VERSION = ANTHROPIC_VERSION.encode()


def error_for_path(path: str, err: VsrError) -> tuple[int, bytes]:
    """``(status, body)`` of ``err`` in the protocol of the route ``path`` names (OpenAI's by default)."""
    if path.startswith(ANTHROPIC_PREFIX):
        return anthropic.vsr_error_answer(err)
    if path in SYSTEMONE_PATHS or path.startswith(_SYSTEMONE_PREFIXES):
        return err.status, systemone_error_body(err)
    return err.status, openai_error_body(err)


def error_for_request(scope: Scope, err: VsrError) -> tuple[int, bytes]:
    """``error_for_path`` for a request: the models routes are Anthropic's too, in its shape when its SDK asks
    (the ``anthropic-version`` header it always sends)."""
    path = scope["path"]
    if is_models_path(path) and header(scope, _ANTHROPIC_VERSION) is not None:
        return anthropic.vsr_error_answer(err)
    return error_for_path(path, err)


# The generation routes, as a 404 under /v1/ names them.
SERVED = ("POST /v1/chat/completions", "POST /v1/responses", "POST /v1/messages", "POST /v1/images/generations",
          "GET /v1/models")


def unrouted_message(method: str, path: str, default: str) -> str:
    """A 404's message: under /v1/ (an OpenAI route the router has none of: embeddings, completions, audio,
    files...) OpenAI's words for an unknown URL and what the router does serve, rather than werkzeug's advice to
    check the spelling; ``default`` elsewhere."""
    if not path.startswith("/v1/"):
        return default
    return (f"Invalid URL ({method} {path}): not routed by vsr-fast, which serves {', '.join(SERVED)}; "
            "send this request to the provider itself.")
