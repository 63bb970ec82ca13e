"""``GET /v1/responses/{id}``, ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items`` and
``POST /v1/responses/{id}/cancel``: the response objects the router stores for ``previous_response_id``
(``global.stores.responses``), in OpenAI's shapes.

Cancel: OpenAI cancels only a response created with ``background: true``, which the router refuses
(``ResponsesAdapter.decode``); every response it stored was answered in its request, and its cancel is OpenAI's
400 for a synchronous one, and so is a ``GET`` that asks to stream it again (``stream=true``). ``POST /v1/responses/compact`` asks a model to compact a conversation into items only
OpenAI can read back (encrypted): not served, an OpenAI-shaped 404 rather than a 405 of the id route.

Owner-checked as ``previous_response_id`` is (``ResponsesAdapter.prepare``): an id stored for another owner
(``Identity.owner``) reads as not found, in the same words as an unknown one, so its existence is not told either;
only its owner deletes it, and its id is unknown from then on, to these routes and to ``previous_response_id``.
A response sent with ``store: false`` was never stored. Each call takes its place in the caller's limits, as a
``POST /v1/responses`` does (429 with Retry-After), and writes an access-log line (``path``: ``stored``), a delete
above all; the line's ``route`` names which of them (retrieve, delete, input_items, cancel).
"""
from __future__ import annotations

import time

import msgspec
from quart import Response, request

from ..errors import RateLimited, RequestError, ResponseNotFound, RouteNotFound, VsrError, echoing, told
from ..protocol.responses import StoredResponse
from . import input_items
from .input_tokens import PATH as INPUT_TOKENS_PATH
from .pipeline.offload import off_loop
from .recording import request_id
from .shapes import error_for_request
from .state import AppState

PREFIX = "/v1/responses/"
ROUTE = PREFIX + "<response_id>"     # one path segment: an id holds no slash
ITEMS_ROUTE = ROUTE + "/input_items"
CANCEL_ROUTE = ROUTE + "/cancel"
COMPACT_PATH = PREFIX + "compact"


def methods_at(path: str) -> bytes:
    """The methods a path under PREFIX takes (a CORS preflight's answer)."""
    return b"POST" if path.endswith("/cancel") or path in (COMPACT_PATH, INPUT_TOKENS_PATH) else \
        b"GET" if path.endswith("/input_items") else b"GET, DELETE"


def not_served(path: str) -> Response:
    """A Responses route the router does not serve, in OpenAI's words for an unknown one."""
    status, body = error_for_request(request.scope, RouteNotFound(
        f"Invalid URL (POST {told(path)}): the router does not serve it; OpenAI's own API does."))
    return Response(body, status=status, content_type="application/json")


async def stored_response(state: AppState, response_id: str, route: str) -> Response:
    """One of the stored-response routes (``route``: retrieve, delete, input_items, cancel), limited and logged."""
    started, scope = time.perf_counter(), request.scope
    rid, who = request_id(scope), state.identity(scope)
    headers: list[tuple[bytes, bytes]] = [(b"x-request-id", rid.encode("latin-1"))]
    ticket, failure = None, None
    try:
        if state.limiter.active:
            ticket = await state.limiter.admit(who, "responses")
            if ticket is not None:
                headers += ticket.headers
        status, body = 200, await _answer(state, response_id, route)
    except VsrError as exc:
        failure = exc
        status, body = error_for_request(scope, exc)
        if isinstance(exc, RateLimited):
            headers += [(b"retry-after", str(exc.retry_after_s).encode()), *exc.headers]
    finally:
        if ticket is not None:
            state.limiter.done(ticket, 0)
    if state.access_log is not None:
        state.access_log.log({
            "request_id": rid, "key_id": who.key_id, "user": who.user, "team": who.team, "tenant": who.tenant,
            "api": "responses", "method": request.method, "route": route, "response_id": response_id,
            "status": status, "path": "stored", "latency_s": round(time.perf_counter() - started, 6),
            "error": failure.code if failure is not None else None,
            "message": failure.detail if failure is not None else None,
        })
    return Response(body, status=status, content_type="application/json",
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers])


async def _answer(state: AppState, response_id: str, route: str) -> bytes:
    # The list's parameters first: a bad one is refused whoever's the id is, so the answer tells nothing of it.
    query = input_items.query(request.args, request.args.getlist) if route == "input_items" else None
    if route == "retrieve" and request.args.get("stream", "false").lower() not in ("false", "0"):
        # OpenAI streams a response again only while a background one runs; the router's are all answered.
        raise RequestError("Cannot stream a synchronous response: it was answered whole or streamed in the request "
                           "that made it; retrieve it without stream.", param="stream")
    record = await _owned(state, response_id)
    if route == "retrieve":
        return bytes(record.response)
    if route == "delete":
        await state.response_store.delete(response_id)
        return msgspec.json.encode({"id": response_id, "object": "response", "deleted": True})
    if route == "cancel":
        raise RequestError("Cannot cancel a synchronous response.")
    items = await off_loop(state.metrics, "decode", record.size(), input_items.input_items, record)
    return input_items.page(items, query, response_id)


async def _owned(state: AppState, response_id: str) -> StoredResponse:
    """The caller's stored response, else not found in the same words, whether unknown or another owner's."""
    owner = state.identity(request.scope).owner
    record = await state.response_store.get(response_id)
    if record is None or record.owner != owner or bytes(record.response) == b"null":
        raise echoing(ResponseNotFound, "Response with id {} not found.", response_id)
    return record
