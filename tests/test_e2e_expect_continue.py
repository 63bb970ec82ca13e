"""``Expect: 100-continue`` end to end, on a raw socket: a refusal that needs no body is the first and only status
line (no ``100 Continue`` before it, the body never asked for, the connection then closed); a request the router
serves gets its 100 when it waits for the body, then its answer."""
from __future__ import annotations

import json
import socket

import pytest

from .procs import router, write_config
from .test_e2e_auth import KEY, auth_doc

BODY = json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.fixture(scope="module")
def keyed(mock, tmp_path_factory):
    with router(write_config(auth_doc(mock.url, limits={"max_body_bytes": 1 << 20}),
                             str(tmp_path_factory.mktemp("expect")))) as proc:
        yield proc


def head(proc, path: str, *, key: str, length: int, content_type: bytes = b"application/json") -> bytes:
    return (b"POST %s HTTP/1.1\r\nhost: %s\r\nauthorization: Bearer %s\r\ncontent-type: %s\r\n"
            b"content-length: %d\r\nexpect: 100-continue\r\n\r\n"
            % (path.encode(), proc.url.split("//")[1].encode(), key.encode(), content_type, length))


def read_all(s: socket.socket) -> bytes:
    """Everything the router sends until it closes the connection."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def connect(proc) -> socket.socket:
    host, port = proc.url.split("//")[1].split(":")
    return socket.create_connection((host, int(port)), timeout=60)


@pytest.mark.parametrize("case", ["bad_key", "too_large", "not_json", "wrong_method", "no_route"])
def test_a_refusal_that_needs_no_body_comes_before_any_100(keyed, case):
    path, key, length, ctype, status = {
        "bad_key": ("/v1/chat/completions", "nope", 100000, b"application/json", b"401"),
        "too_large": ("/v1/chat/completions", KEY, 10 << 20, b"application/json", b"413"),
        "not_json": ("/v1/chat/completions", KEY, 100000, b"text/plain", b"415"),
        "wrong_method": ("/v1/chat/completions", KEY, 100000, b"application/json", b"405"),
        "no_route": ("/v1/nothing", KEY, 100000, b"application/json", b"404"),
    }[case]
    data = head(keyed, path, key=key, length=length, content_type=ctype)
    if case == "wrong_method":
        data = b"PUT" + data[4:]
    with connect(keyed) as s:
        s.sendall(data)          # the head only: the body waits for a 100 that must not come
        answer = read_all(s)
    assert answer.split(b"\r\n", 1)[0].startswith(b"HTTP/1.1 " + status), answer[:200]
    assert b"HTTP/1.1 100" not in answer
    assert b"\r\nconnection: close\r\n" in answer.lower()


def test_a_served_request_gets_its_100_then_its_answer(keyed):
    with connect(keyed) as s:
        s.sendall(head(keyed, "/v1/chat/completions", key=KEY, length=len(BODY)))
        first = b""
        while b"\r\n\r\n" not in first:
            first += s.recv(65536)
        assert first.startswith(b"HTTP/1.1 100 "), first[:200]      # hypercorn writes no reason phrase
        s.sendall(BODY)
        rest = first.split(b"\r\n\r\n", 1)[1]
        while b"\r\n\r\n" not in rest:
            rest += s.recv(65536)
        head_, body = rest.split(b"\r\n\r\n", 1)
        assert head_.startswith(b"HTTP/1.1 200 "), head_
        length = int(next(line.split(b":", 1)[1] for line in head_.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        while len(body) < length:
            body += s.recv(65536)
        assert json.loads(body)["choices"][0]["message"]["role"] == "assistant"
