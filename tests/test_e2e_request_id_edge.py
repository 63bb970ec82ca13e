"""A client's x-request-id is kept only when it is a sane token (printable ASCII, at most 200 bytes); any other is
replaced at the edge by a new id, as Envoy regenerates one it cannot use. Before, a control character in it failed
the request with a 500 after the backend had answered (tokens spent), and a 7,000-byte id was echoed and logged."""
from __future__ import annotations

import re
import socket

import pytest

from .test_e2e_chat import mock_stats

BODY = b'{"model":"vsr/auto","messages":[{"role":"user","content":"hi"}]}'


def raw_chat(port: int, header: bytes, path: str = "/v1/chat/completions") -> bytes:
    """A chat request with ``header`` (``name: value``, bytes as sent, which httpx would refuse), on a connection
    of its own; the whole raw response."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Connection: close\r\n" + header + b"\r\nContent-Length: " + str(len(BODY)).encode()
                  + b"\r\n\r\n" + BODY)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def _post(port: int, request_id: bytes, path: str = "/v1/chat/completions") -> tuple[int, dict[bytes, bytes]]:
    head = raw_chat(port, b"x-request-id: " + request_id, path).split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in head[1:])}
    return int(head[0].split()[1]), headers


@pytest.mark.parametrize("sent", [b"abc\x01def", b"a\tb", b"x" * 7000, b"caf\xc3\xa9"])
def test_an_unusable_request_id_is_replaced_before_routing(routed, mock, sent):
    status, headers = _post(routed.port, sent)
    assert status == 200, headers
    rid = headers[b"x-request-id"]
    assert re.fullmatch(rb"[0-9a-f]{32}", rid), rid
    assert mock_stats(mock)["last_request"]["headers"]["x-request-id"] == rid.decode()


def test_a_sane_request_id_is_kept_and_forwarded(routed, mock):
    status, headers = _post(routed.port, b"trace-7f3a:span/1.2")
    assert status == 200 and headers[b"x-request-id"] == b"trace-7f3a:span/1.2"
    assert mock_stats(mock)["last_request"]["headers"]["x-request-id"] == "trace-7f3a:span/1.2"


def test_a_refusal_before_routing_replaces_it_too(routed):
    status, headers = _post(routed.port, b"bad\x01id", "/v1/messages/zz")
    assert status == 404
    assert re.fullmatch(rb"[0-9a-f]{32}", headers.get(b"x-request-id", b"none")) or b"x-request-id" not in headers
