"""The one error tree of vsr-fast. Every error knows its HTTP status, code and stage.

    VsrError                        500 internal               internal
    ├── ConfigError                     config_invalid         load (never reaches a client)
    │   ├── StartError                  config_invalid         load (a path the configuration names cannot be opened at start)
    │   ├── ListenError                 listen_failed          load (a busy port, a bad address)
    │   └── ProbesFileError             probes_invalid         load (route probe's probes file)
    ├── AuthError                   401 invalid_api_key        auth (before the body is decoded)
    │   ├── MissingKey              401 missing_api_key
    │   ├── KeyNotAllowed           403 model_not_allowed      (the key may not call this entrypoint or model)
    │   ├── AdminOnly               403 admin_only             (an admin route without an admin key)
    │   ├── KeyStoreUnavailable     503 key_store_unavailable  (no declared key, and the key store never answered)
    │   └── DelegatedCredentialMissing 401 delegated_credential_missing (spec 6.7; before any upstream call)
    ├── RateLimited                 429 rate_limit_exceeded    auth (Retry-After: when the window frees)
    ├── RequestError                400 invalid_request        decode
    │   ├── InvalidJson             400 invalid_json
    │   ├── InvalidUtf8             400 invalid_utf8
    │   ├── InvalidType             400 invalid_type
    │   ├── InvalidValue            400 invalid_value
    │   ├── EmptyArray              400 empty_array
    │   ├── UnknownParameter        400 unknown_parameter
    │   ├── UnsupportedParameter    400 unsupported_parameter  (a parameter the router cannot honour: background)
    │   ├── PreviousResponseNotFound 400 previous_response_not_found
    │   ├── ResponseNotFound        404 response_not_found     (a stored response's id: unknown, or another owner's)
    │   ├── AmbiguousFraming        400 ambiguous_framing      (Content-Length with Transfer-Encoding; TE in HTTP/1.0)
    │   ├── MalformedRequest        400 malformed_request      (HTTP/1.1 h11 refuses: a bad chunk, Content-Length, header)
    │   ├── NonCanonicalPath        400 non_canonical_path     (//metrics, /./x, /%6detrics: read two ways, refused)
    │   ├── HeadTooLarge            431 request_head_too_large (a request head past hypercorn's h11_max_incomplete_size)
    │   ├── CodingNotImplemented    501 transfer_coding_not_implemented (a Transfer-Encoding other than chunked)
    │   ├── InvalidMethod           400 invalid_method         (a method not in capitals: get, Post; HTTP/1 and 2)
    │   ├── InvalidHost             400 invalid_host           (a Host that is not uri-host [":" port], or two)
    │   ├── VersionNotSupported     505 http_version_not_supported (HTTP/2.0 or later as an HTTP/1 request line)
    │   ├── OriginRefused           403 origin_not_allowed     (an Origin not in global.router.cors.allow_origins)
    │   ├── MethodNotAllowed        405 method_not_allowed
    │   ├── HeaderTimeout           408 header_timeout         (a request head unfinished at header_timeout_ms)
    │   ├── RouteNotFound           404 not_found              (a route this listener does not serve)
    │   ├── BodyTimeout             408 body_timeout
    │   ├── BodyTooLarge            413 request_too_large
    │   ├── BodyFragmented          400 request_body_fragmented (thousands of body pieces of a few bytes each)
    │   ├── ContextLengthExceeded   400 context_length_exceeded (a text beyond every window the model reads)
    │   └── UnsupportedMedia        415 unsupported_media_type
    ├── RoutingError                400 routing_error          route
    │   ├── ModelNotFound           404 model_not_found
    │   ├── NoDecision              400 no_decision_matched
    │   ├── DecisionFailed          400 decision_unresolved    (a fail_request decision that could have won is unknown)
    │   │   └── DecisionUnavailable 503 decision_unresolved    (... because the decision model did not answer; Retry-After)
    │   └── OutputRefused           400 output_refused         (the decision's output contract)
    │       ├── ImageRouteRequired        image_route_required
    │       ├── ImageGenerationForbidden  image_generation_forbidden
    │       └── UnsupportedCapability     unsupported_capability
    ├── Overloaded                  429 overloaded             route (the decision model; Retry-After)
    ├── RequestTimeout              504 request_timeout        the stage the deadline cut
    ├── SendTimeout                 408 send_timeout           send (the client read nothing for send_timeout_ms; never
    │                                                          written: its connection is closed, the record keeps it)
    ├── ShuttingDown                503 shutting_down          drain (SIGTERM's graceful timeout; Retry-After)
    ├── StoreUnavailable            503 store_unavailable      store (Redis or another store did not answer)
    ├── StoreFull                   507 store_full             store (a document the vector store has no room for)
    ├── MaskingUnavailable          503 masking_unavailable    plugins (spans for a text to mask could not be had)
    │   └── MaskingRefused          400 masking_unreadable     plugins (an attachment masking cannot clean)
    ├── ToolSelectionFailed         503 tool_selection_failed  plugins (tools.select with on_error: fail)
    ├── MatchFailed                 503 match_failed           plugins (a match judge with on_error: fail)
    ├── ClassifyFailed              503 classify_failed        systemone (a diagnostics question unanswered)
    ├── SystemOneAnswered           (its own status and code) systemone (a System One request's error answer, as the access
    │                                                         log and the events record it; per instance, as the answer says)
    ├── EmbeddingFailed             503 embedding_failed       plugins (an embedding deployment did not answer)
    ├── ContextFailed               503 context_failed         plugins (a context source with on_failure: block)
    ├── ResponseBlocked             403 response_blocked       guard (a response_guard block rule)
    ├── ResponseTooLarge            502 response_too_large     guard (a held answer past its 64 MiB bound)
    ├── UnsendableHeader            500 internal               internal (a response header HTTP cannot carry)
    ├── LooperBudgetExhausted       504 looper_budget_exhausted looper (an executor's deadline)
    │   └── LooperCallsExhausted    502 looper_budget_exhausted looper (its max_calls, no upstream failure last)
    ├── LooperNoAcceptedAnswer      502 looper_no_accepted_answer looper (escalate, on_error: fail)
    ├── LooperCallsFailed           502 looper_calls_failed     looper (ratings, remom, fusion, workflows)
    └── UpstreamError               502 upstream_failed        upstream
        ├── UpstreamTimeout         504 upstream_timeout
        ├── UpstreamInvalid             upstream_invalid_answer   a status outside 2xx/4xx/5xx, a redirect, a body
        │                                                         not of its protocol's shape
        ├── UpstreamTooLarge            upstream_answer_too_large past the backend's max_response_bytes
        ├── BackendsBusy            503 backends_busy          every backend at its max_pending (Retry-After)
        ├── CallsSpent                  (a Looper's max_calls left no attempt; the Looper reports it)
        └── _UpstreamAnswered       (the upstream's own status)
            ├── UpstreamStatus      its body relayed
            │   └── UpstreamsExhausted                     every attempt failed, the last with this answer
            └── UpstreamAnswer      its error read and re-rendered in the client's protocol

Status, code, type and stage are class attributes: an error is never changed
after it is raised; a different answer is a different class. httpx errors are
mapped into this tree once, in ``vsr_fast.upstream.dispatch``; redis errors
where each store reads, ``from`` the original.
"""
from __future__ import annotations

import copy
import re

from collections.abc import Sequence
from typing import TypeVar


class VsrError(Exception):
    """Base of every error the router raises on purpose."""

    status: int = 500
    code: str = "internal"
    type: str = "server_error"
    stage: str = "internal"
    retry_after_s: int | None = None     # sent as Retry-After with the error
    # Sent with the error too: the caller's x-ratelimit-* (RateLimited), a backend's renamed ones (UpstreamStatus).
    headers: Sequence[tuple[bytes, bytes]] = ()

    # The message without the client's values it quotes (``echoing``), or None when it quotes none: what the log,
    # the access log and the event journal keep, and what a private request's client reads (``unechoed``).
    bare: str | None = None
    bare_param: str | None = None

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        # What the log, the access log and the event journal keep; ``message`` is what the client reads.
        self.detail = message

    def withhold(self, bare: str, param: str | None = None) -> VsrError:
        """Says ``bare`` is this message without the client's values (``param``: the path without its keys, when
        it names a client's key): the logs keep that. Returns self."""
        self.bare = self.detail = bare
        self.bare_param = param if param is not None else self.param
        return self

    def unechoed(self) -> VsrError:
        """This error as a private request's client reads it (masking, capture_personal_data: false): no value
        of the request quoted, however short."""
        if self.bare is None or (self.bare == self.message and self.bare_param == self.param):
            return self
        other = copy.copy(self)
        other.message, other.param = self.bare, self.bare_param
        return other


# A URL's password (``redis://:pw@host``, ``http://user:pw@host``) and a query's credential (``?key=...``): an
# error that quotes a URL quotes them too, and errors reach logs, terminals and HTTP answers.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/@\s:'\"]*):[^/@\s'\"]*@")
_QUERY_SECRET = re.compile(r"([?&](?:api[_-]?key|key|token|access_token|secret|password|passwd|pwd|sig|signature"
                           r"|auth)=)[^&#\s'\"]*", re.I)


def redact(text: str) -> str:
    """``text`` with every URL's password and credential-named query value written ``***``."""
    if "://" not in text:
        return text
    return _QUERY_SECRET.sub(r"\1***", _USERINFO.sub(r"\1:***@", text))


# A client's value an error message quotes is cut to this many characters: enough to recognise it, not a copy.
SHOWN_MAX = 64


def shown(value: str, limit: int = SHOWN_MAX) -> str:
    """A client's ``value`` as an error message may quote it: ``repr``'s quoting, so control, bidi and other
    unprintable characters are escaped (a log line or a terminal cannot be forged through it), cut to ``limit``
    characters with the count of the rest."""
    more = len(value) - limit
    return repr(value[:limit]) + (f" (and {more} more characters)" if more > 0 else "")


def told(words: str, limit: int = SHOWN_MAX) -> str:
    """A remote's own words (an error's code or message) as a message may carry them: as they are when short and
    printable, else ``shown`` (escaped, cut): a remote's 200 KB message never reaches a client or a log line."""
    return words if len(words) <= limit and words.isprintable() else shown(words, limit)


E = TypeVar("E", bound=VsrError)
# What stands for a client's value in the message a private request reads, and in every log.
WITHHELD = "(value not shown)"


def echoing(cls: type[E], template: str, *values: str, **kwargs) -> E:
    """``cls`` with ``template``'s ``{}`` each a client's value (``shown``) for the client to read, and withheld
    (``WITHHELD``) from the logs and from a private request's answer."""
    # Not str.format: the rest of the message may hold braces (a configured name's), past the values' slots.
    parts = template.split("{}", len(values))
    assert len(parts) == len(values) + 1, template

    def filled(words: list[str]) -> str:
        return parts[0] + "".join(w + part for w, part in zip(words, parts[1:]))
    error = cls(filled([shown(v) for v in values]), **kwargs)
    error.withhold(filled([WITHHELD] * len(values)))
    return error


class ConfigError(VsrError):
    """A configuration that does not load; ``lines`` holds every error found, a URL's password redacted."""

    code, stage = "config_invalid", "load"

    def __init__(self, lines: list[str], *, shown: list[str] | None = None) -> None:
        lines = [redact(line) for line in lines]
        super().__init__("\n".join(lines))
        self.lines = lines
        # The lines as a person reads them (serve's refusal, a refused reload): a line about a decision names it
        # after its code (``config._paths.name_decisions``); ``lines`` stays what the loader's callers compare.
        self.shown = [redact(line) for line in shown] if shown is not None else lines


class StartError(ConfigError):
    """Something the configuration names cannot be opened where the router starts (a file, a directory)."""


class ListenError(ConfigError):
    """A listener's address cannot be bound: the port is taken, the address is not this host's or not one."""

    code = "listen_failed"


class ProbesFileError(ConfigError):
    """A probes file (``route probe --probes``) that cannot be read as probes; the line names the field."""

    code = "probes_invalid"


# --- auth --------------------------------------------------------------------------------


class AuthError(VsrError):
    """The caller did not present a key the router knows (wrong, revoked or expired)."""

    status, code, type, stage = 401, "invalid_api_key", "authentication_error", "auth"


class MissingKey(AuthError):
    code = "missing_api_key"


class KeyStoreUnavailable(AuthError):
    """A key matches no declared key and the key store has not answered since the router started: the key may
    well be a stored one, so the caller is told to come back rather than that its key is wrong."""

    status, code, type, retry_after_s = 503, "key_store_unavailable", "api_error", 1


class KeyNotAllowed(AuthError):
    """A known key asking for an entrypoint or model outside what it may call."""

    status, code, type = 403, "model_not_allowed", "permission_error"


class AdminOnly(AuthError):
    status, code, type = 403, "admin_only", "permission_error"


class DelegatedCredentialMissing(AuthError):
    """A delegated upstream would be called and the request carries no credential for it (spec 6.7)."""

    code = "delegated_credential_missing"


class RateLimited(VsrError):
    """A key, team or tenant is over one of its limits; ``retry_after_s`` says when the window frees."""

    status, code, type, stage = 429, "rate_limit_exceeded", "rate_limit_error", "auth"

    def __init__(self, message: str, *, retry_after_s: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = max(1, retry_after_s)
        self.headers = headers or []


# --- decode ------------------------------------------------------------------------------


class RequestError(VsrError):
    """The client sent something we cannot read; ``param`` is the path to the bad field."""

    status, code, type, stage = 400, "invalid_request", "invalid_request_error", "decode"


class InvalidJson(RequestError):
    code = "invalid_json"


class InvalidUtf8(RequestError):
    code = "invalid_utf8"


class InvalidType(RequestError):
    code = "invalid_type"


class InvalidValue(RequestError):
    code = "invalid_value"


class EmptyArray(RequestError):
    code = "empty_array"


class UnknownParameter(RequestError):
    code = "unknown_parameter"


class UnsupportedParameter(RequestError):
    """A parameter the API defines that the router cannot honour (``background: true``): refused, not ignored."""

    code = "unsupported_parameter"


class PreviousResponseNotFound(RequestError):
    code = "previous_response_not_found"


class ResponseNotFound(RequestError):
    """``/v1/responses/{id}`` (and its ``input_items``, ``cancel``) of an id not stored, or stored for another owner (the same words)."""

    status, code = 404, "response_not_found"


class AmbiguousFraming(RequestError):
    """A request that says where its body ends twice (Content-Length and Transfer-Encoding), or with a
    Transfer-Encoding its HTTP/1.0 cannot carry (RFC 9112 6.1): shapes of request smuggling, refused and the
    connection closed, as Envoy and nginx do."""

    code = "ambiguous_framing"


class MalformedRequest(RequestError):
    """A request h11 (under hypercorn) cannot read as HTTP/1.1: a bad chunk size, a Content-Length that is not a
    number, a header name with a space... The connection closes: where the next request starts is unknown."""

    code = "malformed_request"


class HeadTooLarge(RequestError):
    """A request head larger than h11 holds unfinished (hypercorn's ``h11_max_incomplete_size``, 16 KiB)."""

    status, code = 431, "request_head_too_large"


class CodingNotImplemented(RequestError):
    """A request body in a Transfer-Encoding other than chunked (h11 reads no other)."""

    status, code = 501, "transfer_coding_not_implemented"


class InvalidMethod(RequestError):
    """A method not spelled in capitals (``get``), on an HTTP/1 request line or as HTTP/2's ``:method``: methods
    are case-sensitive (RFC 9110 9.1), and hypercorn upper-cases them, which served ``get`` as GET. A 400, as nginx
    answers."""

    code = "invalid_method"


class InvalidHost(RequestError):
    """A Host header that is not ``uri-host [":" port]`` (``a b/c``), or more than one: RFC 9112 3.2 has a server
    answer 400, as nginx does ("client sent invalid host header"); it was served."""

    code = "invalid_host"


class VersionNotSupported(RequestError):
    """An HTTP/1 request line naming a major version past 1 (``HTTP/2.0`` as text): h11 reads any ``d.d``."""

    status, code = 505, "http_version_not_supported"


class OriginRefused(RequestError):
    """A browser's request from an origin the configuration does not allow (``global.router.cors``)."""

    status, code = 403, "origin_not_allowed"


class MethodNotAllowed(RequestError):
    status, code = 405, "method_not_allowed"


class HeaderTimeout(RequestError):
    """A request's head was still unfinished when ``limits.header_timeout_ms`` passed (slowloris)."""

    status, code = 408, "header_timeout"


class RouteNotFound(RequestError):
    """A path this listener does not serve; the same answer as one that exists nowhere, so the serving
    listener does not reveal the admin routes."""

    status, code = 404, "not_found"


class NonCanonicalPath(RequestError):
    """A request path that routing would read other than as it is spelled: repeated slashes, a dot segment, a
    trailing slash, a percent-encoded letter, digit or slash (server/paths.py)."""

    code = "non_canonical_path"


class BodyTimeout(RequestError):
    """The request body did not arrive before the request's deadline."""

    status, code = 408, "body_timeout"


class BodyTooLarge(RequestError):
    status, code = 413, "request_too_large"


class BodyFragmented(RequestError):
    """A body sent in thousands of pieces of a few bytes each (1-byte chunks, 1-byte DATA frames): each piece
    costs the server the same parsing and hand-over, whatever its size, so such a body is refused past a bound
    rather than read for minutes of CPU (the connection closes: its rest is not read)."""

    code = "request_body_fragmented"


class ContextLengthExceeded(RequestError):
    """A text longer than every window the decision model can read it in (spec PERF, "Long inputs")."""

    code = "context_length_exceeded"


class UnsupportedMedia(RequestError):
    status, code = 415, "unsupported_media_type"


# --- route -------------------------------------------------------------------------------


class RoutingError(VsrError):
    """No decision or model could serve the request; ``recipe`` names the recipe that tried."""

    status, code, type, stage = 400, "routing_error", "invalid_request_error", "route"

    def __init__(self, message: str, *, param: str | None = None, recipe: str | None = None) -> None:
        super().__init__(message, param=param)
        self.recipe = recipe


class ModelNotFound(RoutingError):
    status, code = 404, "model_not_found"


class NoDecision(RoutingError):
    """``unmatched``: the route of the recipe no decision took (no candidates), whose plugins still run (spec
    6.5): a recipe's fast_response answers it in this error's stead."""

    code = "no_decision_matched"
    unmatched = None


class DecisionFailed(RoutingError):
    """A decision with ``on_unknown: fail_request`` could not be resolved, and it outranks every decision that
    matched, so it could have been the winner. ``unknown`` names the (type, name) of the signals it read as
    unknown; ``verdicts`` and ``readings`` are every decision's result and the signals, for the preview."""

    code = "decision_unresolved"

    def __init__(self, message: str, *, recipe: str | None = None, decision: str | None = None,
                 unknown: tuple = (), verdicts: tuple = (), readings=None) -> None:
        super().__init__(message, recipe=recipe)
        self.decision, self.unknown, self.verdicts, self.readings = decision, unknown, verdicts, readings


class DecisionUnavailable(DecisionFailed):
    """The same, when a signal left unknown is the decision model's (it failed, timed out or was unreachable):
    the server's fault, and one a retry may not meet, so 503 with Retry-After (SDKs do not retry a 400)."""

    status, type, retry_after_s = 503, "api_error", 1


class OutputRefused(RoutingError):
    """A request the decision's output contract refuses before any model is called."""

    code = "output_refused"


class ImageRouteRequired(OutputRefused):
    code = "image_route_required"


class ImageGenerationForbidden(OutputRefused):
    code = "image_generation_forbidden"


class UnsupportedCapability(OutputRefused):
    code = "unsupported_capability"


class Overloaded(VsrError):
    """The decision model was too busy to read a rule that refuses requests: the client should retry."""

    status, code, type, stage = 429, "overloaded", "overloaded_error", "route"


# --- the request as a whole ----------------------------------------------------------------


class RequestTimeout(VsrError):
    """The request's deadline (``global.router.limits.request_timeout_ms``) passed before it was answered."""

    status, code, type, stage = 504, "request_timeout", "timeout_error", "deadline"


class SendTimeout(VsrError):
    """The client took none of the answer for ``global.router.limits.send_timeout_ms`` (nginx's send_timeout):
    its connection was closed, so this is never sent; the access log, the record and
    ``vsr_request_timeouts_total{stage="send"}`` keep it."""

    status, code, type, stage = 408, "send_timeout", "timeout_error", "send"


class ShuttingDown(VsrError):
    """The router is stopping (SIGTERM) and its graceful timeout is about to pass: the request is answered
    now rather than cut without a status; another instance, or this one restarted, can take it."""

    status, code, type, stage, retry_after_s = 503, "shutting_down", "api_error", "drain", 1


class StoreUnavailable(VsrError):
    """A store the request needs (Redis) did not answer: try again later. Never the client's fault."""

    status, code, type, stage = 503, "store_unavailable", "api_error", "store"


class StoreFull(VsrError):
    """A document the vector store has no room for (``max_chunks``): nothing of it was added."""

    status, code, type, stage = 507, "store_full", "api_error", "store"


# --- request plugins ---------------------------------------------------------------------------


class MaskingUnavailable(VsrError):
    """masking could not get the personal-data spans of a text it must read: the request fails closed,
    unsent. The message names no text (it would carry what masking protects)."""

    status, code, type, stage = 503, "masking_unavailable", "api_error", "plugins"


class MaskingRefused(MaskingUnavailable):
    """An attachment masking cannot clean (a binary file, a URL holding personal data): the request fails
    closed, unsent, with ``param`` the field's path in the provider-bound body."""

    status, code, type = 400, "masking_unreadable", "invalid_request_error"


class ToolSelectionFailed(VsrError):
    """tools.select could not choose (the decision model failed or was late) and its on_error is fail."""

    status, code, type, stage = 503, "tool_selection_failed", "api_error", "plugins"


class MatchFailed(VsrError):
    """A match block's judge failed or was late and its on_error is fail."""

    status, code, type, stage = 503, "match_failed", "api_error", "plugins"


class ClassifyFailed(VsrError):
    """A diagnostics classify question the decision model did not answer (failed, late or not ready)."""

    status, code, type, stage = 503, "classify_failed", "api_error", "systemone"


class EmbeddingFailed(VsrError):
    """An embedding deployment did not answer, or answered vectors of another width than it declares."""

    status, code, type, stage = 503, "embedding_failed", "api_error", "plugins"


class ContextFailed(VsrError):
    """A context source (RAG, memory) failed and its on_failure is block: the request is not sent."""

    status, code, type, stage = 503, "context_failed", "api_error", "plugins"


# --- the response stage --------------------------------------------------------------------


class ResponseBlocked(VsrError):
    """The decision's response_guard blocked the answer: nothing of it reaches the client."""

    status, code, type, stage = 403, "response_blocked", "permission_error", "guard"


class ResponseTooLarge(VsrError):
    """A streamed answer held for the guard grew past its bound: refused, never forwarded unread."""

    status, code, type, stage = 502, "response_too_large", "upstream_error", "guard"


class UnsendableHeader(VsrError):
    """A response header's value HTTP cannot carry (a name with a newline reached it): the answer is a 500."""


# --- the Looper (executors) ----------------------------------------------------------------


class LooperBudgetExhausted(VsrError):
    """An executor's budget (deadline or max_calls, from the request's arrival) ran out before an answer
    passed its check, and its on_error is fail (or no attempt answered at all)."""

    status, code, type, stage = 504, "looper_budget_exhausted", "timeout_error", "looper"


class LooperCallsExhausted(LooperBudgetExhausted):
    """An executor's ``max_calls`` were spent before an answer passed its check: not a timeout (a call that
    failed upstream last is reported as that failure, its status and type)."""

    status, type = 502, "upstream_error"


class LooperNoAcceptedAnswer(VsrError):
    """Every candidate of an escalation answered and none passed its accept check, with on_error: fail (on a
    System One entrypoint, no stage's answer met escalate.quality, whatever on_error says)."""

    status, code, type, stage = 502, "looper_no_accepted_answer", "upstream_error", "looper"


class LooperCallsFailed(VsrError):
    """An executor that writes its own answer (ratings, remom, fusion, workflows) could not: a call failed
    under on_error: fail, or none of the calls a step needed answered."""

    status, code, type, stage = 502, "looper_calls_failed", "upstream_error", "looper"


# --- upstream ------------------------------------------------------------------------------


class UpstreamError(VsrError):
    """Every backend of every candidate model failed before answering. ``cause`` says why in one word
    (``connect_refused``, ``read_timeout``, ``status_5xx``...): the label of ``vsr_upstream_errors_total``
    and the access log's ``cause``. ``message`` names no backend, address or exception (the client reads
    it, as Envoy's and nginx's 502s name none); ``detail`` has them, for the log."""

    status, code, type, stage = 502, "upstream_failed", "upstream_error", "upstream"
    cause = "upstream_error"
    backend: str | None = None      # the last attempt's backend, for the access log (never the client)
    attempts: list = []             # the dispatcher's attempts before it gave up (never mutated in place)

    def __init__(self, message: str, *, param: str | None = None, cause: str | None = None,
                 detail: str | None = None, retry_after_s: int | None = None) -> None:
        super().__init__(message, param=param)
        if cause is not None:
            self.cause = cause
        if detail is not None:
            self.detail = detail
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s      # an upstream's own Retry-After, passed on

    def noting(self, note: str) -> UpstreamError:
        """This failure with ``note`` after its message (an escalation naming every call's verdict). Returns self."""
        self.message = f"{self.message} ({note})"
        self.detail = f"{self.detail} ({note})"
        return self

    @classmethod
    def at(cls, label: str, what: str, **kwargs):
        """What backend ``label`` did (``answered HTTP 999``): the client reads it of "the backend", the log
        with its name."""
        return cls(f"the backend {what}", detail=f"backend {label} {what}", **kwargs)


class CallsSpent(UpstreamError):
    """A Looper's ``max_calls`` had no call left for an attempt, so none was made: the caller reports its budget."""

    cause = "budget"


def status_cause(status: int) -> str:
    """The cause of an upstream's error status: ``status_429``, ``status_5xx`` or ``status_4xx``."""
    return "status_429" if status == 429 else "status_5xx" if status >= 500 else "status_4xx"


# A cause in the words a client reads (UpstreamError.message): what happened, never where.
_CAUSE_WORDS = {
    "connect_refused": "the connection was refused", "connect_timeout": "the connection timed out",
    "dns_error": "the backend's name did not resolve", "connect_error": "the connection could not be made",
    "tls_error": "the TLS handshake failed",
    "read_timeout": "no answer came within the read timeout", "write_timeout": "the request could not be sent in time",
    "pool_timeout": "no connection was free in time", "connection_closed": "the connection was closed or reset",
    "protocol_error": "the answer was not valid HTTP", "invalid_answer": "the answer was not a valid answer",
    "too_large": "the answer was too large", "status_429": "the backend answered 429 (rate limited)",
    "status_4xx": "the backend answered an error status", "status_5xx": "the backend answered a server error",
}


def cause_words(cause: str, timeouts: dict[str, float] | None = None, why: str = "") -> str:
    """``cause`` (an UpstreamError's) in words, with the code: ``the connection was refused (connect_refused)``; a
    timeout with its value when ``timeouts`` (a backend's, by ``connect``, ``read``...) has it: ``no answer came
    within the read timeout (0.3 s; read_timeout)``; ``why`` after the words: ``the TLS handshake failed:
    certificate verify failed: self-signed certificate (tls_error)``."""
    bare = cause.removeprefix("midstream_")
    words = _CAUSE_WORDS.get(bare)
    if not words:
        return cause
    if why:
        words = f"{words}: {why}"
    limit = timeouts.get(bare.removesuffix("_timeout")) if timeouts is not None and bare.endswith("_timeout") else None
    return f"{words} ({limit:g} s; {cause})" if limit is not None else f"{words} ({cause})"


class UpstreamTimeout(UpstreamError):
    status, code, cause = 504, "upstream_timeout", "read_timeout"


class UpstreamInvalid(UpstreamError):
    """A backend's answer is not one the router can trust: a status outside 200-299 and 400-599 (a
    redirect included: the router never follows one) or a success body not of its protocol's shape."""

    code, cause = "upstream_invalid_answer", "invalid_answer"


class UpstreamTooLarge(UpstreamError):
    """A backend's answer grew past its ``max_response_bytes``: it is dropped, never held whole."""

    code, cause = "upstream_answer_too_large", "too_large"


class BackendsBusy(UpstreamError):
    """Every backend tried already holds its ``max_pending`` requests: refused at once rather than queued."""

    status, code, retry_after_s, cause = 503, "backends_busy", 1, "backends_busy"


class _UpstreamAnswered(UpstreamError):
    """An upstream's own error status reaches the client: the one error whose status is per instance."""

    def __init__(self, message: str, *, status: int, detail: str | None = None,
                 retry_after_s: int | None = None) -> None:
        super().__init__(message, cause=status_cause(status), detail=detail, retry_after_s=retry_after_s)
        self.status = status


class UpstreamStatus(_UpstreamAnswered):
    """The last upstream answered with an error status; relay its status and body (``api_format``'s)."""

    def __init__(self, message: str, *, status: int, body: bytes, content_type: str, api_format: str,
                 detail: str | None = None, retry_after_s: int | None = None,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message, status=status, detail=detail, retry_after_s=retry_after_s)
        self.body = body
        self.content_type = content_type
        self.api_format = api_format
        self.tried = ""     # what the attempts before it answered, for the client's message
        self.headers = headers or []


class UpstreamsExhausted(UpstreamStatus):
    """Every attempt failed, the last with an error answer of its backend's: the client gets that answer (its
    status, message and code), as nginx and Envoy pass the last upstream's on; ``tried`` names every attempt
    when there were several."""

    def __init__(self, message: str, *, last: UpstreamStatus, tried: str, detail: str) -> None:
        super().__init__(message, status=last.status, body=last.body, content_type=last.content_type,
                         api_format=last.api_format, detail=detail, retry_after_s=last.retry_after_s,
                         headers=last.headers)
        self.tried = tried


class UpstreamAnswer(_UpstreamAnswered):
    """A backend's error answer, read in its protocol and rendered in the client's."""

    def __init__(self, message: str, *, status: int, code: str | None, type_: str | None,
                 param: str | None = None) -> None:
        super().__init__(message, status=status)
        self.param = param      # the backend's, as it named the field
        self.code = code or ("overloaded" if status == 529 else "upstream_error")
        self.type = type_ or ("invalid_request_error" if status < 500 else "upstream_error")


class SystemOneAnswered(VsrError):
    """The error a System One request was answered with, its status and code as its body says them: what the
    access log and the events record (``systemone_accounting``). The other error whose status is per instance."""

    stage = "systemone"

    def __init__(self, message: str, *, code: str, status: int) -> None:
        super().__init__(message)
        self.code, self.status = code, status
