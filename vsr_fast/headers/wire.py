"""The heads the router writes on HTTP/1.1 (its answers to clients, its requests to backends), validated as h11 does,
at a fraction of h11's cost.

h11 validates every header of an event it is given: per header two ``bytesify`` calls and two regex matches
(``normalize_and_validate``), ~50 regex calls per proxied request; and when it chooses chunked framing for an answer
it rebuilds the head twice and validates it all again (``set_comma_header``), headers it validated a moment before.
``valid_headers`` returns what ``normalize_and_validate`` returns, checking each header pair once with h11's own
patterns and remembering it valid (a head is mostly the same pairs every time); any input off its fast path (a
str, a Content-Length that is not one plain number or comes twice, a Transfer-Encoding, a header h11 refuses) goes
to h11's own function, which then answers it, errors and their messages included. Incoming heads are read by
``headers.read`` (h11's parse, each line checked once), which a ``WireConnection`` installs: a malformed one is still a 400.

This leans on h11 internals (``Headers``, its header patterns, three methods of ``Connection`` copied);
``tests/test_headers_wire.py`` pins each one and fails if an h11 release changes them.
"""
from __future__ import annotations

from collections.abc import Iterable

import h11
from h11._connection import _SWITCH_CONNECT, _SWITCH_UPGRADE, NEED_DATA, PAUSED
from h11._headers import CONTENT_LENGTH_MAX_DIGITS, Headers, _field_name_re, _field_value_re, normalize_and_validate
from h11._readers import READERS, ChunkedReader
from h11._state import (CLIENT, DONE, ERROR, IDLE, MIGHT_SWITCH_PROTOCOL, SEND_BODY, SEND_RESPONSE, SERVER,
                        SWITCHED_PROTOCOL)
from h11._util import LocalProtocolError, RemoteProtocolError
from h11._writers import WRITERS

from .read import read_request, read_response
from .said import CONNECTION, UPGRADE, Said, body_framing, expects_continue, keep_alive, said

__all__ = ["WireConnection", "adopt", "valid_headers"]

# Header pairs already validated, each with its item as h11 stores it (raw name, lowercase name, value): most of a
# head repeats from one request to the next (the router's own headers, a backend's host and key), and a pair
# valid once is valid forever. Content-Length is never kept (h11 counts it); bounded by starting over when full.
_HEADS = (h11.Request, h11.Response, h11.InformationalResponse)
_HEADS_FINAL = (h11.Request, h11.Response)
_SEEN: dict[tuple[bytes, bytes], tuple[bytes, bytes, bytes]] = {}
SEEN_MAX = 4096
# The state machine's moves once made, by what decides them (``WireConnection._process_event``): a few dozen at most.
_MOVES: dict[tuple, tuple] = {}


def valid_headers(headers: Iterable[tuple[bytes, bytes]]) -> Headers:
    """``h11._headers.normalize_and_validate(headers)``: the same ``Headers``, or the same ``LocalProtocolError``."""
    if not isinstance(headers, list):
        headers = list(headers)
    seen = _SEEN
    full = []
    length = False
    try:
        for pair in headers:
            item = seen.get(pair)
            if item is None:
                item = _checked(pair)
                if item is None:
                    return normalize_and_validate(headers)      # h11 converts it, or finds what is wrong and says so
                if item[1] == b"content-length":
                    if length:      # h11 drops a repeat of the same number and refuses another
                        return normalize_and_validate(headers)
                    length = True
                else:
                    if len(seen) >= SEEN_MAX:
                        seen.clear()
                    seen[pair] = item
            full.append(item)
    except TypeError:       # a pair that is no tuple (a list, a bytearray in it): h11's to convert
        return normalize_and_validate(headers)
    return Said(full)


def _checked(pair: tuple[bytes, bytes]) -> tuple[bytes, bytes, bytes] | None:
    """The item of a pair of bytes h11 takes as it is (its own patterns), or None: anything else is h11's."""
    if type(pair) is not tuple or len(pair) != 2:
        return None
    name, value = pair
    if type(name) is not bytes or type(value) is not bytes \
            or _field_name_re.fullmatch(name) is None or _field_value_re.fullmatch(value) is None:
        return None
    lower = name.lower()
    if lower == b"content-length":
        # h11 splits on commas and strips: one plain number is the fast case.
        if not value.isdigit() or len(value) > CONTENT_LENGTH_MAX_DIGITS:
            return None
    elif lower == b"transfer-encoding":
        return None
    return (name, lower, value)


# h11's readers of heads (``READERS``: a request from an idle client, an answer from a server) and what stands in.
_HEAD_READERS = {(CLIENT, IDLE): read_request, (SERVER, IDLE): read_response, (SERVER, SEND_RESPONSE): read_response}


def adopt(connection: h11.Connection) -> None:
    """Make an h11 connection a ``WireConnection``; the reader h11 chose as it was built is chosen again, so even
    its first head is read by ``headers.read`` (a body's reader, which needs its head, is left as it is)."""
    connection.__class__ = WireConnection
    if connection.their_state is not SEND_BODY:
        connection._reader = connection._get_io_object(connection.their_role, None, READERS)


def _set_comma_header(headers: Headers, name: bytes, new_values: list[bytes]) -> Headers:
    """h11's ``set_comma_header`` on headers h11 already validated (an event's): only the new values are checked."""
    kept = [item for item in headers._full_items if item[1] != name]
    added = valid_headers([(name.title(), value) for value in new_values])._full_items if new_values else []
    return Said(kept + added)


class _CrlfChunks(ChunkedReader):
    """h11's chunked body reader, refusing a chunk line ended by a bare LF as soon as it comes: h11 finds a chunk
    line only by its CRLF, so it waited for one that never came, and the request ended at body_timeout_ms as a 408
    blaming the client's pace. RFC 9112 7.1 has CRLF there; a bare LF is refused, not taken for one, so that no
    proxy before the router reads the body's framing otherwise (a chunk size not in hex is refused the same way)."""

    def __call__(self, buf):
        event = super().__call__(buf)
        # No event, with a chunk line awaited: no CRLF in the buffer, so any LF in it is a bare one.
        if event is None and not (self._bytes_in_chunk or self._bytes_to_discard or self._reading_trailer) \
                and b"\n" in buf._data:
            raise h11.RemoteProtocolError("a chunk line ended by a bare LF, not CRLF")
        return event


class WireConnection(h11.Connection):
    """h11's connection, writing an answer of unknown length (chunked, or HTTP/1.0's close) without validating
    its head twice more: ``_clean_up_response_headers_for_sending`` is h11 0.16's, with the rebuilt heads made by
    ``_set_comma_header``. ``_process_event`` and ``_get_io_object`` are h11 0.16's without their ``typing.cast``
    calls, whose ``Union[...]`` is built anew (typing's cache lookup) at every head: no-ops that cost a few
    thousand instructions each; a body's ``Data`` skips the state machine it cannot move, and a head's move is
    remembered (``_MOVES``); what a head says of its framing is read once (``headers.said``). ``next_event``
    and ``start_next_cycle`` are h11's without its properties and list membership on the way. Set as the
    ``__class__`` of the connections hypercorn and httpcore build."""

    def _process_event(self, role, event) -> None:
        cstate = self._cstate
        states = cstate.states
        kind = type(event)
        if kind is h11.Data and states[role] is SEND_BODY:
            # A body's Data leaves every state as it was (SEND_BODY -> SEND_BODY for both roles in h11's table; the
            # state-triggered rules already stood at their fixed point, and neither a switch proposal nor keep-alive
            # can change on Data), so all h11 does besides is the flag below: four Data a proxied request, each
            # through the state machine's five calls for nothing.
            if role is CLIENT:
                self.client_is_waiting_for_100_continue = False
            return
        old_client, old_server = states[CLIENT], states[SERVER]
        if kind is h11.Request or kind is h11.Response:
            head = said(event.headers)
            closes = not keep_alive(event, head)
        else:
            head = None
            closes = False
        # A move the state machine made once it makes again from the same states: h11's ConnectionState is a
        # function of both roles' states, keep_alive and the pending switch proposals, the role, the event's type
        # and the server's switch event. Remembered only with no proposal pending or made and no switch event
        # (a CONNECT, an Upgrade, a 101 go through h11 each time), so the key below is all of that.
        key = moved = None
        if not cstate.pending_switch_proposals and not (
                (kind is h11.InformationalResponse and event.status_code == 101)
                or (kind is h11.Request and role is CLIENT and (event.method == b"CONNECT" or head[UPGRADE]))):
            key = (role, kind, old_client, old_server, cstate.keep_alive, closes)
            moved = _MOVES.get(key)
        if moved is not None:
            states[CLIENT], states[SERVER] = moved
            if closes:
                cstate.keep_alive = False
            if kind is h11.Response:
                cstate.pending_switch_proposals = set()     # as h11 does (it was empty)
        else:
            # h11's own moves, in h11's order.
            if role is CLIENT and kind is h11.Request:
                if event.method == b"CONNECT":
                    cstate.process_client_switch_proposal(_SWITCH_CONNECT)
                if head[UPGRADE]:
                    cstate.process_client_switch_proposal(_SWITCH_UPGRADE)
            server_switch_event = None
            if role is SERVER:
                server_switch_event = self._server_switch_event(event)
            cstate.process_event(role, kind, server_switch_event)
            if closes:
                cstate.process_keep_alive_disabled()
            states = cstate.states
            if key is not None:
                _MOVES[key] = (states[CLIENT], states[SERVER])
        # The rest of h11's: its bookkeeping, then ``_respond_to_state_changes`` from the states before the move.
        if kind is h11.Request:
            self._request_method = event.method
            if expects_continue(event, head):
                self.client_is_waiting_for_100_continue = True
        if role is self.their_role and kind in _HEADS:
            self.their_http_version = event.http_version
        if kind is h11.InformationalResponse or kind is h11.Response:
            self.client_is_waiting_for_100_continue = False
        if role is CLIENT and (kind is h11.Data or kind is h11.EndOfMessage):
            self.client_is_waiting_for_100_continue = False
        ours = self.our_role
        if ours is CLIENT:
            if states[CLIENT] is not old_client:
                self._writer = self._get_io_object(CLIENT, event, WRITERS)
            if states[SERVER] is not old_server:
                self._reader = self._get_io_object(SERVER, event, READERS)
        else:
            if states[SERVER] is not old_server:
                self._writer = self._get_io_object(SERVER, event, WRITERS)
            if states[CLIENT] is not old_client:
                self._reader = self._get_io_object(CLIENT, event, READERS)

    def next_event(self):
        # h11 0.16's, with ``_extract_next_receive_event`` in it, states read without the properties, and the
        # event told from NEED_DATA and PAUSED by identity (``not in [NEED_DATA, PAUSED]``: the same answer, by
        # __eq__ calls).
        states = self._cstate.states
        their_role = self.their_role
        if states[their_role] is ERROR:
            raise RemoteProtocolError("Can't receive data when peer state is ERROR")
        try:
            state = states[their_role]
            buffer = self._receive_buffer
            if (state is DONE and buffer) or state is MIGHT_SWITCH_PROTOCOL or state is SWITCHED_PROTOCOL:
                event = PAUSED
            else:
                assert self._reader is not None
                event = self._reader(buffer)
                if event is None:
                    if not buffer and self._receive_buffer_closed:
                        if hasattr(self._reader, "read_eof"):
                            event = self._reader.read_eof()
                        else:
                            event = h11.ConnectionClosed()
                if event is None:
                    event = NEED_DATA
            if event is not NEED_DATA and event is not PAUSED:
                self._process_event(their_role, event)
            if event is NEED_DATA:
                if len(buffer) > self._max_incomplete_event_size:
                    raise RemoteProtocolError("Receive buffer too long", error_status_hint=431)
                if self._receive_buffer_closed:
                    raise RemoteProtocolError("peer unexpectedly closed connection")
            return event
        except BaseException as exc:
            self._process_error(their_role)
            if isinstance(exc, LocalProtocolError):
                exc._reraise_as_remote_protocol_error()
            else:
                raise

    def send(self, event):
        # h11 0.16's, with its ``send_with_data_passthrough`` in it (one call less a message: nothing here calls
        # that one) and our state read without the property.
        if self._cstate.states[self.our_role] is ERROR:
            raise LocalProtocolError("Can't send data when our state is ERROR")
        try:
            if type(event) is h11.Response:
                event = self._clean_up_response_headers_for_sending(event)
            writer = self._writer
            self._process_event(self.our_role, event)
            if type(event) is h11.ConnectionClosed:
                return None
            assert writer is not None
            data_list: list[bytes] = []
            writer(event, data_list.append)
        except:     # noqa: E722 -- as h11: whatever went wrong, our side is in error
            self._process_error(self.our_role)
            raise
        return b"".join(data_list)

    def start_next_cycle(self) -> None:
        # h11 0.16's: the states go from DONE to IDLE for both roles or it raises, so both the reader and the
        # writer are chosen again (``_respond_to_state_changes`` finds both changed).
        self._cstate.start_next_cycle()
        self._request_method = None
        assert not self.client_is_waiting_for_100_continue
        self._writer = self._get_io_object(self.our_role, None, WRITERS)
        self._reader = self._get_io_object(self.their_role, None, READERS)

    def _get_io_object(self, role, event, io_dict):
        state = self._cstate.states[role]
        if state is SEND_BODY:
            framing_type, args = body_framing(self._request_method, event)
            make = io_dict[SEND_BODY][framing_type]
            return (_CrlfChunks if make is ChunkedReader else make)(*args)
        if io_dict is READERS:      # the heads read by ``headers.read``: h11's readers, each line checked once
            reader = _HEAD_READERS.get((role, state))
            if reader is not None:
                return reader
        return io_dict.get((role, state))

    def _clean_up_response_headers_for_sending(self, response: h11.Response) -> h11.Response:
        assert type(response) is h11.Response

        headers = response.headers
        need_close = False

        method_for_choosing_headers = self._request_method
        if method_for_choosing_headers == b"HEAD":
            method_for_choosing_headers = b"GET"
        framing_type, _ = body_framing(method_for_choosing_headers, response)
        if framing_type in ("chunked", "http/1.0"):
            headers = _set_comma_header(headers, b"content-length", [])
            if self.their_http_version is None or self.their_http_version < b"1.1":
                headers = _set_comma_header(headers, b"transfer-encoding", [])
                if self._request_method != b"HEAD":
                    need_close = True
            else:
                headers = _set_comma_header(headers, b"transfer-encoding", [b"chunked"])

        if not self._cstate.keep_alive or need_close:
            connection = set(said(headers)[CONNECTION])
            connection.discard(b"keep-alive")
            connection.add(b"close")
            headers = _set_comma_header(headers, b"connection", sorted(connection))

        if headers is response.headers and type(response.status_code) is int and type(response.reason) is bytes \
                and type(response.http_version) is bytes:
            # Nothing to change: h11's new Response would be this one, field for field (its checks passed on these).
            return response
        return h11.Response(
            headers=headers,
            status_code=response.status_code,
            http_version=response.http_version,
            reason=response.reason,
        )
