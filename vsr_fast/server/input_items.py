"""``GET /v1/responses/{id}/input_items``: the items a stored response was answered from, in OpenAI's list shape.

They are what the store keeps for ``previous_response_id`` (``StoredResponse.items``: the conversation that went
in, then the response's own output), less that output: the items carried from the responses it continued, then
the request's own input. OpenAI lists "the items used to generate this response" the same way; a response that
continued none lists its request's input only.

An item the client sent without an ``id`` (a message written as ``{"role", "content"}``) is given one derived
from the response's id and the item's place, so every read names it alike and a page's ``last_id`` is a cursor
(``after``). A message's string content is listed as OpenAI lists it, one text part.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ..errors import InvalidValue, echoing
from ..protocol.responses import StoredResponse

# OpenAI's ``ResponseIncludable``: every one names fields the stored items hold already (the router keeps each
# item whole), so asking for one changes nothing; one outside the list is refused as OpenAI refuses it.
INCLUDABLE = ("file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
              "message.input_image.image_url", "computer_call_output.output.image_url",
              "code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs")
ORDERS = ("asc", "desc")
MAX_LIMIT, DEFAULT_LIMIT = 100, 20
_DIGITS = re.compile(r"[0-9]{1,6}")
_ENCODE = msgspec.json.Encoder()


class Query(msgspec.Struct, frozen=True):
    """The list's query parameters, checked."""

    limit: int = DEFAULT_LIMIT
    order: str = "desc"
    after: str | None = None


class _Output(msgspec.Struct):
    output: list[msgspec.Raw] = []


def query(args: Mapping[str, str], values: Any) -> Query:
    """``limit``, ``order``, ``after`` and ``include`` (``include[]=`` as the SDKs send it), or a 400 naming the bad
    one. ``values(name)``: every value of a repeated parameter."""
    raw_limit = args.get("limit")
    limit = DEFAULT_LIMIT
    if raw_limit is not None:
        if not _DIGITS.fullmatch(raw_limit) or not 1 <= int(raw_limit) <= MAX_LIMIT:
            raise echoing(InvalidValue, f"Invalid 'limit': expected an integer from 1 to {MAX_LIMIT}, but got "
                                        "{} instead.", raw_limit, param="limit")
        limit = int(raw_limit)
    order = args.get("order", "desc")
    if order not in ORDERS:
        raise echoing(InvalidValue, "Invalid value: {}. Supported values are: 'asc' and 'desc'.", order, param="order")
    for asked in [*values("include"), *values("include[]")]:
        if asked not in INCLUDABLE:
            raise echoing(InvalidValue, "Invalid value: {}. Supported values are: "
                          + ", ".join(f"'{x}'" for x in INCLUDABLE) + ".", asked, param="include")
    return Query(limit, order, args.get("after"))


def input_items(record: StoredResponse) -> list[dict[str, Any]]:
    """The items ``record``'s response was answered from, oldest first, each with its ``id``."""
    items = msgspec.json.decode(bytes(record.items), type=list[dict[str, Any]])
    produced = len(msgspec.json.decode(bytes(record.response), type=_Output).output)
    return [_listed(item, record.id, i) for i, item in enumerate(items[:len(items) - produced])]


def page(items: list[dict[str, Any]], q: Query, response_id: str) -> bytes:
    """One page of ``items`` in OpenAI's list shape; an ``after`` that names none of them is a 400 naming it."""
    ordered = items if q.order == "asc" else items[::-1]
    start = 0
    if q.after is not None:
        start = next((i + 1 for i, item in enumerate(ordered) if item["id"] == q.after), -1)
        if start < 0:
            raise echoing(InvalidValue, "No input item with id {} in response {}.", q.after, response_id,
                              param="after")
    data = ordered[start:start + q.limit]
    return _ENCODE.encode({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                           "last_id": data[-1]["id"] if data else None,
                           "has_more": start + q.limit < len(ordered)})


def _listed(item: dict[str, Any], response_id: str, place: int) -> dict[str, Any]:
    """``item`` as OpenAI lists it: typed, with an id, a message's text as a content part."""
    kind = item.get("type", "message")
    out = {"id": item.get("id") or _derived_id(kind, response_id, place), "type": kind}
    out.update((k, v) for k, v in item.items() if k not in ("id", "type"))
    if kind == "message":
        if isinstance(out.get("content"), str):
            part = {"type": "output_text", "text": out["content"], "annotations": []} \
                if out.get("role") == "assistant" else {"type": "input_text", "text": out["content"]}
            out["content"] = [part]
        out.setdefault("status", "completed")
    return out


def _derived_id(kind: str, response_id: str, place: int) -> str:
    digest = hashlib.sha256(f"{response_id}\0{place}".encode()).hexdigest()[:40]
    return f"{'msg' if kind == 'message' else 'item'}_{digest}"


__all__ = ["INCLUDABLE", "Query", "input_items", "page", "query"]
