"""The one error tree of vsr-fast. Every error knows its HTTP status and code.

    VsrError                      500 internal
    ├── ConfigError                   config_invalid      (load failures; never reaches a client)
    ├── RequestError              400 invalid_request_error
    │   ├── BodyTooLarge          413 request_too_large
    │   └── UnsupportedMedia      415 unsupported_media_type
    ├── RoutingError              400 routing_error       (no decision/model could serve it)
    │   └── ModelNotFound         404 model_not_found
    └── UpstreamError             502 upstream_failed
        ├── UpstreamTimeout       504 upstream_timeout
        └── UpstreamStatus        (the upstream's own status, passed through)

httpx errors are mapped into this tree once, in ``vsr_fast.upstream._dispatch``.
"""
from __future__ import annotations


class VsrError(Exception):
    """Base of every error the router raises on purpose."""

    status: int = 500
    code: str = "internal"
    type: str = "server_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class ConfigError(VsrError):
    """A configuration that does not load; ``lines`` holds every error found."""

    code = "config_invalid"

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class RequestError(VsrError):
    """The client sent something we cannot read; ``param`` is the path to the bad field."""

    status, code, type = 400, "invalid_request", "invalid_request_error"


class BodyTooLarge(RequestError):
    status, code = 413, "request_too_large"


class UnsupportedMedia(RequestError):
    status, code = 415, "unsupported_media_type"


class RoutingError(VsrError):
    status, code, type = 400, "routing_error", "invalid_request_error"
    recipe: str | None = None   # the recipe that could not route it, for the response headers


class ModelNotFound(RoutingError):
    status, code = 404, "model_not_found"


class UpstreamError(VsrError):
    """Every backend of every candidate model failed before answering."""

    status, code, type = 502, "upstream_failed", "upstream_error"


class UpstreamTimeout(UpstreamError):
    status, code = 504, "upstream_timeout"


class UpstreamStatus(UpstreamError):
    """The last upstream answered with an error status; relay its status and body."""

    def __init__(self, message: str, *, status: int, body: bytes, content_type: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.content_type = content_type
