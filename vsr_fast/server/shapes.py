"""Which client API's error shape a path's client reads: shared by the raw ASGI app, quart's routes and the
connection server's own answers (a request refused before any app saw it)."""
from __future__ import annotations

from ..errors import VsrError, told
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


# The routes the router serves, as a 404 under /v1/ names them.
SERVED = ("POST /v1/chat/completions", "POST /v1/responses", "GET|DELETE /v1/responses/{id}",
          "GET /v1/responses/{id}/input_items", "POST /v1/responses/{id}/cancel", "POST /v1/responses/input_tokens",
          "POST /v1/messages", "POST /v1/messages/count_tokens", "POST /v1/images/generations", "GET /v1/models",
          "GET /v1/models/{id}")
# OpenAI's routes the router has none of: a client pointed at it for everything is told to go to the provider.
PROVIDER_ONLY = tuple(f"/v1/{name}" for name in (
    "embeddings", "completions", "audio", "moderations", "files", "batches", "fine_tuning", "vector_stores",
    "images/edits", "images/variations", "uploads", "assistants", "threads", "realtime"))


# Azure OpenAI's own routes (its SDK's AzureOpenAI client): the router serves their calls under OpenAI's paths.
AZURE_PREFIX = "/openai/"


def unrouted_message(method: str, path: str, default: str) -> str:
    """A 404's message under /v1/, for one of OpenAI's routes spelled without it (every client route is served
    both ways) and for Azure's (``default`` elsewhere): OpenAI's words for an unknown URL, what the router serves,
    and for one of OpenAI's routes it has none of, to send it to the provider (a typo is no such route)."""
    bare = "/v1" + path
    provider_only = any(p == q or p.startswith(q + "/") for p in (path, bare) for q in PROVIDER_ONLY)
    azure = path.startswith(AZURE_PREFIX)
    if not (path.startswith("/v1/") or provider_only or azure):
        return default
    # The client's method and path as OpenAI's words quote them, a long or unprintable one capped (``told``).
    method, path = told(method), told(path)
    served = ", ".join(SERVED)
    if azure:
        return (f"Invalid URL ({method} {path}): not routed by vsr-fast, which serves {served}; Azure OpenAI's "
                "deployment routes are not among them: point an OpenAI client at the router's /v1 and name the "
                "model, and the router calls the Azure deployment a backend names.")
    if provider_only:
        return (f"Invalid URL ({method} {path}): not routed by vsr-fast, which serves {served}; "
                "send this request to the provider itself.")
    return f"Invalid URL ({method} {path}): no such route; vsr-fast serves {served}."
