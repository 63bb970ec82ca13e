"""``GET /v1/responses/{id}`` and ``DELETE /v1/responses/{id}``: the response objects the router stores for
``previous_response_id`` (``global.stores.responses``), in OpenAI's shapes.

Owner-checked as ``previous_response_id`` is (``ResponsesAdapter.prepare``): an id stored for another owner
(``Identity.owner``) reads as not found, in the same words as an unknown one, so its existence is not told either;
only its owner deletes it, and its id is unknown from then on, to these routes and to ``previous_response_id``.
A response sent with ``store: false`` was never stored. Each call takes its place in the caller's limits, as a
``POST /v1/responses`` does (429 with Retry-After), and writes an access-log line (``path``: ``stored``), a delete
above all.
"""
from __future__ import annotations

import time

import msgspec
from quart import Response, request

from ..errors import RateLimited, ResponseNotFound, VsrError
from .recording import request_id
from .shapes import error_for_request
from .state import AppState

PREFIX = "/v1/responses/"
ROUTE = PREFIX + "<response_id>"     # one path segment: an id holds no slash


async def stored_response(state: AppState, response_id: str) -> Response:
    started, scope = time.perf_counter(), request.scope
    rid, who = request_id(scope), state.identity(scope)
    headers: list[tuple[bytes, bytes]] = [(b"x-request-id", rid.encode("latin-1"))]
    ticket, failure = None, None
    try:
        if state.limiter.active:
            ticket = await state.limiter.admit(who, "responses")
            if ticket is not None:
                headers += ticket.headers
        status, body = 200, await _answer(state, response_id, request.method == "DELETE")
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
            "api": "responses", "method": request.method, "response_id": response_id, "status": status,
            "path": "stored", "latency_s": round(time.perf_counter() - started, 6),
            "error": failure.code if failure is not None else None,
            "message": failure.detail if failure is not None else None,
        })
    return Response(body, status=status, content_type="application/json",
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers])


async def _answer(state: AppState, response_id: str, delete: bool) -> bytes:
    owner = state.identity(request.scope).owner
    record = await state.response_store.get(response_id)
    if record is None or record.owner != owner or bytes(record.response) == b"null":
        raise ResponseNotFound(f"Response with id '{response_id}' not found.")
    if not delete:
        return bytes(record.response)
    await state.response_store.delete(response_id)
    return msgspec.json.encode({"id": response_id, "object": "response", "deleted": True})
