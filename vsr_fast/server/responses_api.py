"""``GET /v1/responses/{id}`` and ``DELETE /v1/responses/{id}``: the response objects the router stores for
``previous_response_id`` (``global.stores.responses``), in OpenAI's shapes.

Owner-checked as ``previous_response_id`` is (``ResponsesAdapter.prepare``): an id stored for another owner
(``Identity.owner``) reads as not found, in the same words as an unknown one, so its existence is not told either;
only its owner deletes it, and its id is unknown from then on, to these routes and to ``previous_response_id``.
A response sent with ``store: false`` was never stored.
"""
from __future__ import annotations

import msgspec
from quart import Response, request

from ..errors import ResponseNotFound, VsrError
from .shapes import error_for_request
from .state import AppState

PREFIX = "/v1/responses/"
ROUTE = PREFIX + "<response_id>"     # one path segment: an id holds no slash


async def stored_response(state: AppState, response_id: str) -> Response:
    try:
        status, body = 200, await _answer(state, response_id, request.method == "DELETE")
    except VsrError as exc:
        status, body = error_for_request(request.scope, exc)
    return Response(body, status=status, content_type="application/json")


async def _answer(state: AppState, response_id: str, delete: bool) -> bytes:
    owner = state.identity(request.scope).owner
    record = await state.response_store.get(response_id)
    if record is None or record.owner != owner or bytes(record.response) == b"null":
        raise ResponseNotFound(f"Response with id '{response_id}' not found.")
    if not delete:
        return bytes(record.response)
    await state.response_store.delete(response_id)
    return msgspec.json.encode({"id": response_id, "object": "response", "deleted": True})
