"""The heads the router reads on HTTP/1.1 (a client's request, a backend's answer), parsed as h11 parses them, each
line checked once.

h11 parses every head line by line: per header line a fold check, a regex ``fullmatch`` and its ``groupdict``, a
lowercasing, then the event's own checks (~15 us for a client's 8-line head in process). Most lines of a head
repeat from one request to the next (a client's user agent and accept headers, a backend's content type), so each
plain header line is remembered, as the item h11 stores for it, once h11's own pattern took it, and a start line
likewise; a line not seen before goes through the same pattern. Anything off this path (a folded line, a line the
pattern refuses, a Transfer-Encoding, a Content-Length that is not one plain number or comes twice, no Host or two
on a request, a status under 100) goes to h11's own code from the same lines, which builds the event or raises its
error, messages included. Lines naming credentials are checked each time and never remembered.

The readers are installed by ``wire.WireConnection``; ``tests/test_headers_read.py`` holds them to h11's readers on
fuzzed heads and pins the h11 code they stand in for.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from h11._events import InformationalResponse, Request, Response
from h11._headers import CONTENT_LENGTH_MAX_DIGITS
from h11._readers import _decode_header_lines, header_field_re, request_line_re, status_line_re
from h11._receivebuffer import ReceiveBuffer
from h11._util import LocalProtocolError, validate

from .said import Said

__all__ = ["read_request", "read_response"]

# Remembered lines: a header line's item (raw name, lowercase name, value), a start line's event class and fields. A
# line valid once is valid forever; bounded by starting over when full, and only short lines are kept.
_FIELDS: dict[bytes, tuple[bytes, bytes, bytes]] = {}
_REQUEST_LINES: dict[bytes, tuple] = {}
_STATUS_LINES: dict[bytes, tuple] = {}
LINES_MAX = 4096
LINE_BYTES_MAX = 256
_SECRET = frozenset({b"authorization", b"proxy-authorization", b"cookie", b"set-cookie", b"x-api-key", b"api-key"})
_OWN = (b"content-length", b"transfer-encoding")


def _remember(table: dict, line: bytes, value: tuple) -> None:
    if len(line) <= LINE_BYTES_MAX:
        if len(table) >= LINES_MAX:
            table.clear()
        table[line] = value


def _items(lines: list[bytearray]) -> tuple[list[tuple[bytes, bytes, bytes]] | None, int]:
    """``lines[1:]`` as the items of h11's ``Headers`` (None when any is h11's to judge), and how many name Host."""
    fields = _FIELDS
    items = []
    length = False
    hosts = 0
    for i in range(1, len(lines)):
        line = bytes(lines[i])
        item = fields.get(line)
        if item is None:
            if line[:1] in b" \t":      # a folded line (or an empty one, which h11's pattern refuses): h11's
                return None, 0
            match = header_field_re.fullmatch(line)
            if match is None:
                return None, 0
            name, value = match.group("field_name", "field_value")
            lower = name.lower()
            item = (name, lower, value)
            if lower in _OWN:
                # h11 splits a Content-Length on commas and strips each part; one plain number is the fast case.
                if lower != b"content-length" or length or not value.isdigit() \
                        or len(value) > CONTENT_LENGTH_MAX_DIGITS:
                    return None, 0
                length = True
            elif lower not in _SECRET:
                _remember(fields, line, item)
        if item[1] == b"host":
            hosts += 1
        items.append(item)
    return items, hosts


def _read(starts: dict, start_of: Callable, h11_read: Callable, buf: ReceiveBuffer):
    """A head out of ``buf`` as ``h11_read`` (h11's reader once the lines are out) makes it, each line checked
    once: its start line by ``start_of`` (the event's class and fields, or None for h11 to judge)."""
    lines = buf.maybe_extract_lines()
    if lines is None:
        if buf.is_next_line_obviously_invalid_request_line():
            raise LocalProtocolError("illegal request line")
        return None
    if not lines:
        return h11_read(lines)
    start = bytes(lines[0])
    parts = starts.get(start)
    if parts is None:
        parts = start_of(start)
        if parts is None:
            return h11_read(lines)
        _remember(starts, start, parts)
    items, hosts = _items(lines)
    if items is None:
        return h11_read(lines)
    cls, fields = parts
    # h11's Request refuses an HTTP/1.1 request without a Host, and any with two (RFC 7230 5.4), in its words.
    if cls is Request and (hosts > 1 or (hosts == 0 and fields[2][1] == b"1.1")):
        return h11_read(lines)
    event = object.__new__(cls)
    setattr_ = object.__setattr__
    setattr_(event, "headers", Said(items))
    for name, value in fields:
        setattr_(event, name, value)
    return event


def _request_start(line: bytes) -> tuple | None:
    match = request_line_re.fullmatch(line)
    if match is None:
        return None
    return Request, tuple(zip(("method", "target", "http_version"), match.group("method", "target", "http_version")))


def _status_start(line: bytes) -> tuple | None:
    match = status_line_re.fullmatch(line)
    if match is None:
        return None
    version, status, reason = match.group("http_version", "status_code", "reason")
    status = int(status)
    if status < 100:
        return None     # h11's InformationalResponse refuses it
    return (InformationalResponse if status < 200 else Response,
            (("http_version", b"1.1" if version is None else version), ("status_code", status),
             ("reason", b"" if reason is None else reason)))


def _h11_request(lines: list[bytearray]) -> Request:
    # h11 0.16's ``maybe_read_from_IDLE_client`` once the lines are out of the buffer (pinned by digest).
    if not lines:
        raise LocalProtocolError("no request line received")
    matches = validate(request_line_re, lines[0], "illegal request line: {!r}", lines[0])
    return Request(headers=list(_decode_header_lines(lines[1:])), _parsed=True, **matches)


def _h11_response(lines: list[bytearray]) -> InformationalResponse | Response:
    # h11 0.16's ``maybe_read_from_SEND_RESPONSE_server`` once the lines are out of the buffer (pinned by digest).
    if not lines:
        raise LocalProtocolError("no response line received")
    matches = validate(status_line_re, lines[0], "illegal status line: {!r}", lines[0])
    http_version = b"1.1" if matches["http_version"] is None else matches["http_version"]
    reason = b"" if matches["reason"] is None else matches["reason"]
    status_code = int(matches["status_code"])
    class_ = InformationalResponse if status_code < 200 else Response
    return class_(headers=list(_decode_header_lines(lines[1:])), _parsed=True, status_code=status_code,
                  reason=reason, http_version=http_version)


# h11's reader of a request head (``maybe_read_from_IDLE_client``) and of an answer's
# (``maybe_read_from_SEND_RESPONSE_server``): the same event, or the same error.
read_request = partial(_read, _REQUEST_LINES, _request_start, _h11_request)
read_response = partial(_read, _STATUS_LINES, _status_start, _h11_response)
