"""The error ``type`` each client API gives an HTTP status: one table per API, read wherever the router writes an
error in that API's shape (its own errors, a backend's read from another protocol's shape, in-stream error events).
What the error was in particular stays in its ``code`` (``overloaded``, ``upstream_failed``, ``rate_limited``...)."""
from __future__ import annotations

# OpenAI (Chat, Responses, Images), as api.openai.com answers: its 404s (an unknown model, an unknown URL) and
# every other 4xx are invalid_request_error, a 5xx (its 503 "overloaded" too) server_error.
_OPENAI = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}

# Anthropic's errors page; 502 is not in it (an api_error: the server's failure), 503 reads as its 529.
_ANTHROPIC = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
              403: "permission_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
              500: "api_error", 503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error"}
ANTHROPIC_TYPES = frozenset(_ANTHROPIC.values())


def openai_type(status: int) -> str:
    """The OpenAI error ``type`` of an error answered with ``status``."""
    return _OPENAI.get(status) or ("invalid_request_error" if status < 500 else "server_error")


def anthropic_type(status: int) -> str:
    """The Anthropic error ``type`` of an error answered with ``status``."""
    return _ANTHROPIC.get(status) or ("invalid_request_error" if status < 500 else "api_error")
