"""The connection layer's refusals (``listen.EdgeServer``), accounted once each, as nginx logs the 400s and 408s it
answers itself with the client's address.

A request refused after its head was read (its chunked body's framing broke) is one request: the edge answers it
400 under the request's own id and marks its scope (``mark``). Its pipeline, when one is accounting it
(``recording.REQUEST_ID_KEY`` set), counts and logs that status in place of a client that left (499); otherwise the
edge logs it, and the app, which can answer nothing now, does not. A request refused in its head is logged with
what of the head was read (``head_scope``).
"""
from __future__ import annotations

import re

from ..auth.source import ANONYMOUS, SCOPE_KEY
from ..errors import VsrError
from .asgi import Scope
from .recording import REQUEST_ID_KEY, request_id

# The scope key of the edge's refusal of the request (``EdgeRefusal``).
KEY = "vsr.edge_refusal"
# A method as far as the access log says one: a token (RFC 9110 5.6.2) of at most 32 characters.
_METHOD = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}")


class EdgeRefusal:
    """The edge's answer to a request whose head was read: its id, status and error; ``owned``: its pipeline
    accounts it (else the edge has)."""

    __slots__ = ("error", "owned", "request_id", "status")

    def __init__(self, request_id: str, status: int, error: VsrError, owned: bool) -> None:
        self.request_id, self.status, self.error, self.owned = request_id, status, error, owned


def mark(scope: Scope, status: int, error: VsrError) -> EdgeRefusal:
    """The edge's refusal of the request of ``scope``, under the id its pipeline answers with when one runs."""
    owner = scope.get(REQUEST_ID_KEY)
    refusal = scope[KEY] = EdgeRefusal(owner or request_id(scope), status, error, owner is not None)
    return refusal


def refusal_of(scope: Scope) -> EdgeRefusal | None:
    """The edge's refusal of this request, if it answered it: the status and error its accounting reports."""
    return scope.get(KEY)


def head_scope(head: bytes, client: tuple | None) -> Scope:
    """What of a request ``head`` the edge refused unread (as far as it came) its access log line says, as a
    scope (``pipeline.client_fields`` reads one): the peer ``client``, the method, the User-Agent. Its headers are
    not trusted: the caller is nobody, whatever key it sent, and no forwarded address is read."""
    lines = head.split(b"\n")
    first = lines[0].split(b" ", 1)
    method = first[0].decode("ascii") if len(first) > 1 and _METHOD.fullmatch(first[0]) else None
    headers = []
    for line in lines[1:-1]:        # whole lines only: the last may have been cut short
        name, colon, value = line.rstrip(b"\r").partition(b":")
        if not name:
            break                   # the head's end
        if colon and name.lower() == b"user-agent":
            headers.append((b"user-agent", value.strip()))
            break
    return {"client": client, "method": method, "headers": headers, SCOPE_KEY: ANONYMOUS}
