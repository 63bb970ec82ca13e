"""What a head says about its own connection and framing (Connection, Transfer-Encoding, Content-Length, Upgrade,
Expect), read once a head as h11 reads it.

h11 reads these with ``get_comma_header``, a scan of every header for one name, at each use: keep-alive, the body's
framing (Transfer-Encoding, then Content-Length), the upgrade proposal and 100-continue, ~18 scans a proxied request
over its four heads, the same head scanned up to five times. ``said`` scans a head once for all five names, each
list built as ``get_comma_header`` builds it, and a head of ``headers.read`` or ``headers.wire`` (a ``Said``) keeps
the answer. ``keep_alive``, ``body_framing`` and ``expects_continue`` are h11 0.16's ``_keep_alive``,
``_body_framing`` and ``has_expect_100_continue`` reading it; ``tests/test_headers_said.py`` holds each to h11's on
fuzzed heads and pins h11's by digest.
"""
from __future__ import annotations

from h11._events import Request, Response
from h11._headers import Headers

__all__ = ["Said", "body_framing", "expects_continue", "keep_alive", "said"]

# The names h11 reads with get_comma_header, each one's place in what ``said`` returns.
CONNECTION, TRANSFER_ENCODING, CONTENT_LENGTH, UPGRADE, EXPECT = range(5)
_PLACES = {b"connection": CONNECTION, b"transfer-encoding": TRANSFER_ENCODING, b"content-length": CONTENT_LENGTH,
           b"upgrade": UPGRADE, b"expect": EXPECT}
# A head naming none of them (most answers: their Content-Length aside): nothing to build.
_NOTHING: tuple = ((), (), (), (), ())


class Said(Headers):
    """h11's ``Headers``, keeping what ``said`` read of it (a head's items never change once built)."""

    __slots__ = ("_said",)

    def __init__(self, full_items: list[tuple[bytes, bytes, bytes]]) -> None:
        self._full_items = full_items
        self._said = None


def said(headers: Headers) -> tuple:
    """``get_comma_header(headers, name)`` for Connection, Transfer-Encoding, Content-Length, Upgrade and Expect, in
    that order (a tuple where none came)."""
    if type(headers) is Said:
        out = headers._said
        if out is None:
            out = headers._said = _scan(headers._full_items)
        return out
    return _scan(headers._full_items)


def _scan(items: list[tuple[bytes, bytes, bytes]]) -> tuple:
    out = None
    places = _PLACES
    for _, name, value in items:
        if name in places:
            if out is None:
                out = ([], [], [], [], [])
            values = out[places[name]]
            # get_comma_header's, for each of its names at once.
            for part in value.lower().split(b","):
                part = part.strip()
                if part:
                    values.append(part)
    return _NOTHING if out is None else out


def keep_alive(event: Request | Response, head: tuple) -> bool:
    """h11's ``_keep_alive(event)``, ``head`` being ``said(event.headers)``."""
    if b"close" in head[CONNECTION]:
        return False
    if getattr(event, "http_version", b"1.1") < b"1.1":
        return False
    return True


def body_framing(request_method: bytes, event: Request | Response) -> tuple[str, tuple]:
    """h11's ``_body_framing(request_method, event)``."""
    assert type(event) in (Request, Response)
    if type(event) is Response:
        if (
            event.status_code in (204, 304)
            or request_method == b"HEAD"
            or (request_method == b"CONNECT" and 200 <= event.status_code < 300)
        ):
            return ("content-length", (0,))
        assert event.status_code >= 200
    head = said(event.headers)
    transfer_encodings = head[TRANSFER_ENCODING]
    if transfer_encodings:
        assert transfer_encodings == [b"chunked"]
        return ("chunked", ())
    content_lengths = head[CONTENT_LENGTH]
    if content_lengths:
        return ("content-length", (int(content_lengths[0]),))
    if type(event) is Request:
        return ("content-length", (0,))
    else:
        return ("http/1.0", ())


def expects_continue(request: Request, head: tuple) -> bool:
    """h11's ``has_expect_100_continue(request)``, ``head`` being ``said(request.headers)``."""
    if request.http_version < b"1.1":
        return False
    return b"100-continue" in head[EXPECT]
