"""The ASGI entry: the hot path as a raw handler, every other route through quart-trio."""
from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Awaitable, Callable
from functools import partial
from http import HTTPStatus

from werkzeug.exceptions import MethodNotAllowed as werkzeug_405, NotFound

from ..errors import (AdminOnly, AmbiguousFraming, AuthError, CodingNotImplemented, HeaderTimeout, HeadTooLarge,
                      InvalidHost, InvalidMethod, MalformedRequest, MethodNotAllowed, NonCanonicalPath, OriginRefused,
                      RequestError, RouteNotFound, ShuttingDown, UnsupportedMedia, VersionNotSupported, VsrError,
                      echoing)
from ..events import ids
from ..headers.public import public_headers
from ..headers.registry import ANTHROPIC_REQUEST_ID, REQUEST_ID as _REQUEST_ID, SERVER, ResponsePath
from ..protocol.anthropic import with_request_id
from .admin import make_admin
from .classify_api import PATHS as CLASSIFY_PATHS, handle_classify
from .asgi import (CLOSE_UNREAD, ClientGone, Receive, Scope, Send, discard_body, header, lingering_close, origin_path, send_whole,
                   sent_method, shield_final, to_origin_form)
from .count_tokens import handle_count_tokens
from .listen import MISSING_HOST, EdgeAnswer
from .input_tokens import PATH as INPUT_TOKENS_PATH, handle_input_tokens
from .models_api import PATH as MODELS_PATH
from .responses_api import PREFIX as RESPONSES_PREFIX, methods_at as responses_methods
from .paths import non_canonical, normalised, versioned
from .edge_refusal import KEY as EDGE_REFUSED, head_scope, mark, refusal_of
from .pipeline import STARTED, handle_api, refused, refused_connection
from .preview import handle_preview
from .recording import request_id
from .shapes import SYSTEMONE_PATHS, error_for_path, error_for_request, unrouted_message
from .systemone_api import handle_systemone, models_listing
from .state import AppState

# Inference routes -> client API (the adapters of protocol/adapters.py).
API_PATHS = {
    "/v1/chat/completions": "chat", "/chat/completions": "chat",
    "/v1/messages": "messages", "/v1/responses": "responses", "/v1/images/generations": "images",
}
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
PREVIEW_PATH = "/api/v1/routing/preview"
SYSTEMONE_MODELS = "/v1/systemone/models"
MODEL_PREFIX = MODELS_PATH + "/"     # GET /v1/models/{id}
# Every inference route -> its client API: a refusal before its handler is counted and logged as its answers are.
INFERENCE_APIS = {**API_PATHS, **dict.fromkeys(SYSTEMONE_PATHS, "systemone")}
# The client API each client route authenticates as (which key headers it reads).
CLIENT_APIS = {**API_PATHS, COUNT_TOKENS_PATH: "count_tokens", INPUT_TOKENS_PATH: "responses",
               SYSTEMONE_MODELS: "systemone", MODELS_PATH: "models", **dict.fromkeys(SYSTEMONE_PATHS, "systemone")}
# The operator's routes: on the admin listener when there is one, else behind an admin key when keys are on.
ADMIN_PREFIXES = ("/api/v1/replay", "/api/v1/keys", "/api/v1/diagnostics", "/api/v1/inventory", "/api/v1/context")
ADMIN_PATHS = frozenset({PREVIEW_PATH, "/metrics", "/admin/reload"})
# Routes anyone may reach on any listener: a load balancer's probes.
PROBE_PATHS = frozenset({"/health", "/ready", "/health/readiness", "/health/liveliness", "/health/liveness"})
# hypercorn's h11_max_incomplete_size: h11 refuses a head past it only while waiting for the rest of it, so one
# that came in a single read (or over HTTP/2) is measured here, as the request line and header lines it was.
MAX_HEAD_BYTES = 16 * 1024
# A method as nginx reads one: capital letters, "_" and "-" (every registered method is so spelled). RFC 9110 9.1:
# methods are case-sensitive, so ``get`` is no GET; h11 takes any token and hypercorn upper-cases it.
_METHOD = re.compile(rb"[A-Z_-]+")
# RFC 9112 3.2's Host: uri-host [":" port], uri-host an IP literal in brackets or a reg-name (RFC 3986 3.2.2:
# unreserved, pct-encoded and sub-delims characters); empty is allowed (a target with no authority).
_HOST = re.compile(rb"(?:\[[0-9A-Za-z:.%~_-]+\]|[0-9A-Za-z._~%!$&'()*+,;=-]*)(?::[0-9]*)?")


def head_bytes(scope: Scope) -> int:
    """The request head's size as it came over HTTP/1.1: its request line and header lines."""
    query = scope.get("query_string") or b""
    size = len(scope["method"]) + len(scope.get("raw_path") or b"") + len(query) + 14
    for name, value in scope["headers"]:
        size += len(name) + len(value) + 4
    return size
Handler = Callable[[AppState, Scope, Receive, Send], Awaitable[None]]


def _local(scope: Scope) -> bool:
    """Whether the peer is this host (loopback, or no address: a Unix socket)."""
    client = scope.get("client")
    if not client:
        return True
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return False


def is_admin_path(path: str) -> bool:
    return path in ADMIN_PATHS or path.startswith(ADMIN_PREFIXES)


def make_app(state: AppState, role: str = "serving"):
    """An ASGI app over ``state`` for a listener of ``role``: ``serving`` (the client APIs, and the admin
    routes unless an admin listener serves them) or ``admin`` (the admin routes and the probes only)."""
    admin = make_admin(state)
    urls = admin.url_map.bind("")
    posts = _post_routes()
    allowed = frozenset(o.lower().encode() for o in state.loaded.config.global_.router.cors.allow_origins)
    any_origin = b"*" in allowed
    admin_elsewhere = role == "serving" and state.admin_listener

    def websocket_refusal(path: str) -> tuple[VsrError, list[tuple[bytes, bytes]]]:
        """A WebSocket handshake's refusal on ``path``: 405 on a POST route, 400 on one served to a plain GET,
        else 404."""
        if path in posts:
            return MethodNotAllowed("Only POST is allowed on this route"), [(b"allow", b"POST")]
        if path == SYSTEMONE_MODELS or (_routed(urls, path, "GET") and not (
                is_admin_path(path) if admin_elsewhere else role == "admin" and not is_admin_path(path))):
            return RequestError("WebSocket is not served on this route: send it as plain HTTP"), []
        return RouteNotFound(NotFound.description), []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                # No route speaks WebSocket. quart would try its own, and fail outside a request context (a 500).
                await _refuse_websocket(scope, send, *websocket_refusal(scope["path"]))
            else:
                await admin(scope, receive, send)   # lifespan
            return
        if EDGE_REFUSED in scope:
            # The connection layer refused its body before this began (edge_refusal): answered, logged, closing.
            return
        scope[STARTED] = time.perf_counter()    # a refusal's latency (pipeline.refused)
        path, method = scope["path"], scope["method"]
        if not path.startswith("/"):
            path = to_origin_form(scope)        # once, for every route and quart's alike
        path = versioned(scope, path)           # /models, /responses, /messages: their /v1 routes
        version = scope.get("http_version", "1.1")
        if (spelled := sent_method()) and not _METHOD.fullmatch(spelled):
            # HTTP/1's request line, and HTTP/2's :method alike (RFC 9113 8.3.1 carries it as sent): a token, so
            # the request is well-formed and its stream is not reset; the method is just not one (400, as nginx).
            await discard_body(receive)
            close = [(b"connection", b"close")] if version.startswith("1.") else []
            await _refuse(state, send, scope, path, echoing(
                InvalidMethod, "the request method {} is not one: methods are case-sensitive (RFC 9110 9.1) and "
                "spelled in capitals, as GET and POST", spelled.decode("latin-1")), *close, shape=scope,
                sent=spelled.decode("latin-1"))
            return
        hosts = [value for name, value in scope["headers"] if name == b"host"]
        if len(hosts) > 1 or (hosts and not _HOST.fullmatch(hosts[0])):
            await discard_body(receive)
            close = [(b"connection", b"close")] if version.startswith("1.") else []
            await _refuse(state, send, scope, path, InvalidHost(
                "the request has more than one Host header (RFC 9112 3.2)" if len(hosts) > 1 else
                "the request's Host header is not a host and port (RFC 9112 3.2)"), *close, shape=scope)
            return
        if "." in version and not version.startswith("1."):     # h11's: HTTP/2 and 3 come as "2" and "3"
            await discard_body(receive)
            await _refuse(state, send, scope, path, VersionNotSupported(
                f"HTTP/{version} is not served as an HTTP/1 request line"), (b"connection", b"close"), shape=scope)
            return
        if head_bytes(scope) > MAX_HEAD_BYTES:
            await discard_body(receive)
            await _refuse(state, send, scope, path, HeadTooLarge(
                f"the request's head is larger than {MAX_HEAD_BYTES} bytes"), (b"connection", b"close"), shape=scope)
            return
        if method == "GET" and _websocket_handshake(scope):
            # The HTTP/1 edge takes no Upgrade (h11edge): the handshake is refused as a plain request, in the
            # path's shape, as the WebSocket scope of an HTTP/2 extended CONNECT is.
            err, extra = websocket_refusal(normalised(path))
            await _refuse(state, send, scope, path, err, *extra)
            return
        # Before anything reads the path (the listener's role, the key it needs, the route): paths.py.
        why = non_canonical(scope.get("raw_path") or b"", path)
        if why is not None:
            await discard_body(receive)
            shape = {**scope, "path": normalised(path)}     # the error's protocol only: nothing routes on it
            await _refuse(state, send, scope, shape["path"],
                          NonCanonicalPath(f"the request path is not canonical: {why}"), shape=shape)
            return
        if state.closed:
            # Read after the listeners closed, on a connection kept alive (its bytes came as the drain began): no
            # new request runs on a stopping router, and none is dropped unanswered either.
            await discard_body(receive)
            close = [(b"connection", b"close")] if version.startswith("1.") else []
            await _refuse(state, send, scope, path, ShuttingDown(
                "the router is stopping and takes no new request: send it again on a new connection"),
                (b"retry-after", b"1"), *close, shape=scope)
            return
        origin = header(scope, b"origin")
        if origin is not None:
            # A browser's request: only from the origins the configuration lists. Without this any web page
            # could spend the router's backends with a JSON POST (its preflight answered or not).
            if not any_origin and origin.lower() not in allowed:
                await discard_body(receive)
                await _refuse(state, send, scope, path, echoing(
                    OriginRefused, "Origin {} is not allowed (global.router.cors.allow_origins)",
                    origin.decode("latin-1")), (b"vary", b"origin"), shape=scope)
                return
            if method == "OPTIONS" and header(scope, b"access-control-request-method") is not None:
                await send_whole(send, 204, _preflight(scope, path, origin), b"")
                return
            # The allowed origin may read the answer, the router's headers included.
            send = _adding(send, (b"access-control-allow-origin", origin), (b"access-control-expose-headers", b"*"),
                           (b"vary", b"origin"))
        api = CLIENT_APIS.get(path)
        if api is None and path.startswith(MODEL_PREFIX):
            api = "models"      # one model of the listing: the listing's key
        elif api is None and path.startswith(RESPONSES_PREFIX):
            api = "responses"   # a stored response (and its side routes): whose it is, by the key that made it
        try:
            if role == "admin":
                if not (is_admin_path(path) or path in PROBE_PATHS):
                    await _not_here(send, scope)
                    return
            elif is_admin_path(path):
                if admin_elsewhere:
                    await _not_here(send, scope)
                    return
                if state.auth.enabled:
                    if not state.auth.identify(scope, "admin").admin:
                        raise AdminOnly("this route needs an admin key")
                elif path != "/metrics" and not _local(scope):
                    # Nothing else guards them: reload, captured bodies (replay), writes to the context
                    # stores. Envoy's admin answers on localhost for the same reason; scrapes stay open.
                    raise AdminOnly("the operator's routes answer other hosts only on a listener with role: admin "
                                    "or to a key with admin: true (global.router.auth)")
            elif api is not None:
                state.auth.identify(scope, api)
        except AuthError as exc:
            state.metrics.auth_failures.inc(api or "admin", exc.code)
            await _refuse(state, send, scope, path, exc, *_challenge(exc), shape=scope)
            return
        framing = _ambiguous_framing(scope)
        if framing is not None:
            # h11 has no option to refuse either shape, so the refusal is here, on the head alone (nginx): a body
            # that is not chunked after all would hold its discard until the linger bound. The connection closes
            # unread (lingering_close), as where the body ends is not known.
            scope[CLOSE_UNREAD] = True
            await _refuse(state, send, scope, path, AmbiguousFraming(framing))
            return
        handler = posts.get(path)
        if handler is not None:
            if method != "POST":
                await _refuse(state, send, scope, path, MethodNotAllowed("Only POST is allowed on this route"),
                              (b"allow", b"POST"))
            elif (media := unsupported_media(scope)) is not None:
                # The body is read first (bounded) so the connection stays usable.
                await discard_body(receive)
                await _refuse(state, send, scope, path, *media)
            else:
                try:
                    await handler(state, scope, receive, send)
                except ClientGone:
                    # Gone while its body came: nothing to answer, counted as the inference routes count theirs
                    # (unless the connection layer ended the body: its refusal is logged, edge_refusal).
                    if refusal_of(scope) is None:
                        state.metrics.disconnects.inc(api or "admin")
        elif path == SYSTEMONE_MODELS:
            if method not in ("GET", "HEAD"):
                await _refuse(state, send, scope, path, MethodNotAllowed("Only GET is allowed on this route"),
                              (b"allow", b"GET, HEAD"))
                return
            headers = public_headers(config_version=state.config_version, path=ResponsePath.UPSTREAM,
                                     recipe=None, decision=None, model=None)
            headers.append((b"content-type", b"application/json"))
            await send_whole(send, 200, headers, models_listing(state, state.identity(scope)))
        elif is_admin_path(path) and method != "GET" and _has_body(scope) and \
                (media := unsupported_media(scope)) is not None:
            # The operator's routes read JSON bodies as the client APIs do, and are as open to a web page's POST.
            await discard_body(receive)
            await _refuse(state, send, scope, path, *media)
        elif not _routed(urls, path, method):
            # quart reads a request's body before it finds no route: a client waiting on Expect: 100-continue
            # would be told to send it for a 404.
            await _not_here(send, scope, unrouted=True)
        elif (allow := _methods_if_not(urls, path, method)) is not None:
            # A quart route asked with a method it does not take (POST /health): refused here, as the POST
            # routes' 405 is, so that it carries the client's id and has its access log line.
            await _refuse(state, send, scope, path, MethodNotAllowed(werkzeug_405.description), (b"allow", allow),
                          shape=scope)
        else:
            # Always shielded: whether hypercorn closes after this answer (HTTP/1.0, "Close", "close, TE", its
            # own limits) is h11's call, not a header comparison's.
            await _until_response_ends(admin, scope, receive, send)

    return lingering_close(app)


def _ambiguous_framing(scope: Scope) -> str | None:
    """Why the request's body framing cannot be trusted, or None.

    Content-Length beside Transfer-Encoding: h11 lets chunked win and keeps the connection, so the bytes past
    the chunked body would be read as a second request. Transfer-Encoding in an HTTP/1.0 request: RFC 9112
    6.1 has the server treat its framing as faulty (an HTTP/1.0 hop in front reads the body by its end, not
    its chunks), as nginx answers it (400, connection closed); h11 would decode it."""
    if header(scope, b"transfer-encoding") is None:
        return None
    if header(scope, b"content-length") is not None:
        return "Content-Length and Transfer-Encoding together are refused"
    if scope.get("http_version") == "1.0":
        return "Transfer-Encoding in an HTTP/1.0 request is refused (RFC 9112 6.1): send Content-Length"
    return None


def _preflight(scope: Scope, path: str, origin: bytes) -> list[tuple[bytes, bytes]]:
    """A CORS preflight's answer for an allowed origin: the path's methods, the headers it asked for."""
    asked = header(scope, b"access-control-request-headers")
    # A stored response is read and deleted by its id (cancelled by a POST); every other route takes GET or POST.
    methods = responses_methods(path) if path.startswith(RESPONSES_PREFIX) else b"GET, POST"
    headers = [(b"access-control-allow-origin", origin), (b"vary", b"origin"),
               (b"access-control-allow-methods", methods), (b"access-control-max-age", b"600")]
    if asked:
        headers.append((b"access-control-allow-headers", asked))
    return headers


def _adding(send: Send, *extra: tuple[bytes, bytes]) -> Send:
    """``send`` whose answer's head carries ``extra`` too."""
    async def adding(message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)
    return adding


def _post_routes() -> dict[str, Handler]:
    """Every POST-only route to its handler."""
    routes: dict[str, Handler] = {path: partial(_api, api) for path, api in API_PATHS.items()}
    routes[COUNT_TOKENS_PATH] = handle_count_tokens
    routes[INPUT_TOKENS_PATH] = handle_input_tokens
    routes[PREVIEW_PATH] = handle_preview
    routes.update(dict.fromkeys(CLASSIFY_PATHS, handle_classify))
    routes.update(dict.fromkeys(SYSTEMONE_PATHS, handle_systemone))
    return routes


def is_json(content_type: bytes | None) -> bool:
    """Whether a Content-Type names JSON: application/json or a ``+json`` type, any parameters."""
    if content_type is None:
        return False
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


def unsupported_media(scope: Scope) -> tuple[UnsupportedMedia, tuple[bytes, bytes]] | None:
    """The 415 for a body not typed JSON or coded other than identity, with the header naming what is served."""
    if not is_json(header(scope, b"content-type")):
        # A web page may POST text/plain, a form or an untyped blob to any origin with no CORS preflight.
        return UnsupportedMedia("Content-Type must be application/json"), (b"accept", b"application/json")
    coding = body_coding(scope)
    if coding is not None:
        # RFC 9110 §15.5.16: a content coding the server does not decode is a 415 that names the codings it does.
        # Decoding gzip or br here would let a small body inflate past max_body_bytes; left unchecked, a
        # compressed body read as JSON is a misleading invalid_json at byte 0.
        return echoing(UnsupportedMedia, "Content-Encoding {} is not supported: send the body uncompressed "
                       "(identity)", coding), (b"accept-encoding", b"identity")
    return None


def _has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length")
    return header(scope, b"transfer-encoding") is not None or (length is not None and length.strip(b"0 ") != b"")


def body_coding(scope: Scope) -> str | None:
    """The first content coding other than ``identity`` the request's Content-Encoding headers list, else None."""
    for key, value in scope["headers"]:
        if key == b"content-encoding":
            for coding in value.split(b","):
                coding = coding.strip().lower()
                if coding and coding != b"identity":
                    return coding.decode("latin-1")
    return None


def _api(api: str, state: AppState, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
    # Returns handle_api's coroutine rather than awaiting it: no frame of its own to resume at every suspension.
    return handle_api(state, api, scope, receive, send)


def _challenge(exc: AuthError) -> tuple[tuple[bytes, bytes], ...]:
    if exc.retry_after_s is not None:       # the key store not answering yet: come back, the key may be good
        return ((b"retry-after", str(exc.retry_after_s).encode()),)
    return ((b"www-authenticate", b'Bearer realm="vsr-fast"'),) if exc.status == 401 else ()


def _routed(urls, path: str, method: str) -> bool:
    """Whether quart has a route at ``path`` (for any method: its own 405 names the ones it serves)."""
    try:
        urls.match(path, method=method)
    except NotFound:
        return False
    except Exception:       # MethodNotAllowed, a redirect to the slashed path: quart answers those itself
        return True
    return True


def _methods_if_not(urls, path: str, method: str) -> bytes | None:
    """The ``allow`` of quart's route at ``path`` when it does not take ``method``; None when it does."""
    try:
        urls.match(path, method=method)
    except werkzeug_405 as exc:
        return ", ".join(sorted(exc.valid_methods or ())).encode()
    except Exception:       # NotFound, a redirect to the slashed path: quart's to answer
        return None
    return None


def _sent_path(scope: Scope, path: str) -> str:
    """The request's path as the client spelled it (no query), for its access log line."""
    raw = scope.get("raw_path")
    return raw.decode("latin-1") if raw else path


async def _not_here(send: Send, scope: Scope, unrouted: bool = False) -> None:
    """404 for a route this listener does not serve, worded as quart words one that exists nowhere; ``unrouted``
    (no listener serves it), an OpenAI route's saying so."""
    message = NotFound.description
    if unrouted:
        message = unrouted_message(scope["method"], scope["path"], message)
    status, body = error_for_request(scope, RouteNotFound(message))
    await send_whole(send, status, [(b"content-type", b"application/json"),
                                    (_REQUEST_ID.encode(), request_id(scope).encode("latin-1"))], body)


def _websocket_handshake(scope: Scope) -> bool:
    """Whether the request asks for a WebSocket (RFC 6455 4.1: Upgrade naming it, Connection naming Upgrade)."""
    upgrade = header(scope, b"upgrade")
    if upgrade is None or b"websocket" not in (t.strip() for t in upgrade.lower().split(b",")):
        return False
    connection = header(scope, b"connection") or b""
    return b"upgrade" in (t.strip() for t in connection.lower().split(b","))


async def _refuse_websocket(scope: Scope, send: Send, err: VsrError, extra: list[tuple[bytes, bytes]]) -> None:
    """A WebSocket handshake refused in the path's own shape (``websocket_refusal``), before any upgrade (ASGI's
    websocket.http.response, else hypercorn's bare 403)."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close"})
        return
    status, body = error_for_request(scope, err)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (_REQUEST_ID.encode(), request_id(scope).encode("latin-1")), *extra]
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body, "more_body": False})


async def _refuse(state: AppState, send: Send, scope: Scope, path: str, err: VsrError,
                  *extra: tuple[bytes, bytes], shape: Scope | None = None, sent: str | None = None) -> None:
    """``err`` before any handler ran, in the protocol of the route ``path`` names (with ``shape``: of the
    request, for a route two client APIs share, shapes.error_for_request), carrying the request's id and logged
    (``sent``: the method as spelled, when hypercorn's upper-casing is the refusal's cause); on an inference route
    counted as the pipeline's answers are."""
    headers = public_headers(config_version=state.config_version, path=ResponsePath.ERROR,
                             recipe=None, decision=None, model=None)
    headers += [(b"content-type", b"application/json"), *extra]
    if err.bare is not None and state.policies.unrouted_private:
        err = err.unechoed()    # no decision yet: private if any decision the request may reach is
    status, body = error_for_path(path, err) if shape is None else error_for_request(shape, err)
    api = INFERENCE_APIS.get(path)
    rid = request_id(scope)
    # Every refusal carries the request's id (the client's when sane), whatever the route, for the user to quote.
    # An error in Anthropic's shape (its routes, and /v1/models asked by its SDK) carries it in request-id and in
    # the body too, where the Anthropic SDK reads it.
    shaped = with_request_id(body, rid)
    headers.append((_REQUEST_ID.encode(), rid.encode("latin-1")))
    if shaped is not body:
        headers.append((ANTHROPIC_REQUEST_ID.encode(), rid.encode("latin-1")))
        body = shaped
    try:
        await send_whole(send, status, headers, body)
    finally:
        if refusal_of(scope) is None:   # else the connection layer's answer went in its place, and is logged
            # On a path of no client API: logged as the edge logs its refusals there, with the path as sent.
            logged = scope if sent is None else {**scope, "method": sent}
            refused(state, api, logged, rid, status, err, uri=None if api is not None else _sent_path(scope, path))


# The refusals the connection server answers itself, before any app saw the request (listen.EdgeServer): at the
# header timeout, and in place of hypercorn's empty answer to what h11 refuses (its error_status_hint).
EDGE_REFUSALS = {
    400: MalformedRequest("the request is not valid HTTP (its request line, a header or its body's framing)"),
    408: HeaderTimeout("the request's headers did not arrive in time"),
    431: HeadTooLarge("the request's head is too large"),
    501: CodingNotImplemented("only Transfer-Encoding: chunked is supported"),
}


_SERVER = SERVER.encode()
# A refusal of the edge's whose cause is known (``listen.EdgeAnswer``): in place of its status's.
EDGE_CAUSES = {MISSING_HOST: InvalidHost("an HTTP/1.1 request must carry a Host header (RFC 9112 3.2)")}


def edge_error(status: int, why: str | None = None) -> VsrError | None:
    """The error of a request the edge refused with ``status``, for the cause ``why`` when one is known."""
    return (EDGE_CAUSES.get(why) if why is not None else None) or EDGE_REFUSALS.get(status)


def edge_answer(target: bytes, status: int, request_id: str, why: str | None = None) -> bytes | None:
    """The whole answer, closing the connection, to a request refused with ``status`` before any app saw it, in
    the protocol of the path its request ``target`` names (b"": not known); None for a status not listed."""
    err = edge_error(status, why)
    if err is None:
        return None
    path = origin_path(target).split(b"?", 1)[0].decode("latin-1")
    status, body = error_for_path(path, err)
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nx-request-id: %s\r\nserver: %s\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (status, HTTPStatus(status).phrase.encode(),
                                                                     request_id.encode(), _SERVER, len(body), body))


def edge_refusals(state_of: Callable[[], AppState]) -> EdgeAnswer:
    """``edge_answer`` for the connection server, each refusal counted (``vsr_http_refusals_total``) and logged
    once, on any path, with the client's address and what of its head was read (nginx logs the 400s and 408s it
    answers itself); on an inference path counted as its other refusals are. ``scope``: the request's, when its
    head was read (its body's framing broke: ``edge_refusal``); else ``head``, the bytes of it that came. ``peer``:
    the connection's (address, port); ``since``: perf_counter() as its first byte was read."""
    def answer(target: bytes, status: int, why: str | None = None, *, scope: Scope | None = None,
               head: bytes = b"", peer: tuple | None = None, since: float | None = None) -> bytes | None:
        err = edge_error(status, why)
        if err is None:
            return None
        state = state_of()
        state.metrics.http_refusals.inc(str(status))
        path = origin_path(target).split(b"?", 1)[0].decode("latin-1")
        api = INFERENCE_APIS.get(path)
        if scope is None:
            rid = ids.request_id()
            scope = head_scope(head, peer)
        else:
            refusal = mark(scope, status, err)
            rid = refusal.request_id
            if refusal.owned:       # its pipeline accounts it, as the 400 in place of a client that left
                return edge_answer(target, status, rid, why)
        scope.setdefault(STARTED, since if since is not None else time.perf_counter())
        refused(state, api, scope, rid, status, err, uri=path)
        return edge_answer(target, status, rid, why)
    return answer


def connection_refusals(state_of: Callable[[], AppState]) -> Callable[[str, str | None, str, str], None]:
    """``refused`` for the listener: each connection it answers 503 before reading a request, logged."""
    def logged(request_id: str, peer: str | None, code: str, message: str) -> None:
        refused_connection(state_of(), request_id, peer, code, message)
    return logged


async def _until_response_ends(app, scope: Scope, receive: Receive, send: Send) -> None:
    """Run quart so that a connection hypercorn closes after the answer gets closed.

    hypercorn closes the socket from inside the app's final ``send``; quart-trio
    cancels its request nursery at that moment, which interrupts the close and
    leaves the connection open until the client gives up (STACK-NOTES). The
    final send is shielded so hypercorn can finish closing.
    """
    await app(scope, receive, shield_final(send))
