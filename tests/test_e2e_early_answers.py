"""An answer given before the request body is read (a 404 or 405 decided from the head alone) keeps the keep-alive
connection usable: the unread body is discarded (nginx's lingering close) and the next request on that connection is
served, as after a 401. A client's SDK that reuses its connection must never see a connection it was not told would
close (trial 10b: openai's embeddings.create, a 404, then chat failed with APIConnectionError)."""
from __future__ import annotations

import socket

import openai
import pytest

from .test_e2e_chat import CHAT

BODY = b'{"model":"vsr/auto","messages":[{"role":"user","content":"' + b"hi " * 3000 + b'"}]}'


def _response(s: socket.socket, buf: bytes) -> tuple[bytes, bytes, bytes]:
    """One whole response (head, body) read from ``s``, and what followed it."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        assert chunk, f"the router closed the connection before answering: {buf!r}"
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")))
    while len(rest) < length:
        chunk = s.recv(65536)
        assert chunk, "the router closed the connection inside a response"
        rest += chunk
    return head, rest[:length], rest[length:]


@pytest.mark.parametrize("method, path, status", [
    ("POST", "/v1/zz", b"404"), ("POST", "/v1/embeddings", b"404"), ("POST", "/health", b"405"),
    ("PUT", "/v1/chat/completions", b"405")])
def test_an_answer_before_the_body_keeps_the_connection(routed, method, path, status):
    with socket.create_connection(("127.0.0.1", routed.port), timeout=20) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(BODY)}\r\n\r\n".encode())
        head, _, rest = _response(s, b"")
        assert head.split(b" ")[1] == status, head
        if b"\r\nconnection: close" in head.lower():
            return      # told: a client opens a new connection
        s.sendall(BODY)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        # At once, not after the router's lingering bound (10 s): quart's own reader taking the body last must
        # end the discard as surely as the discard's own read does.
        s.settimeout(5)
        head, body, _ = _response(s, rest)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b'"ok"' in body


def test_the_sdk_reuses_its_connection_after_a_404(routed):
    client = openai.OpenAI(base_url=f"{routed.url}/v1", api_key="x", max_retries=0)
    for _ in range(30):
        with pytest.raises(openai.NotFoundError):
            client.embeddings.create(model="vsr/auto", input="hello " * 500)
        assert client.chat.completions.create(model="vsr/auto", messages=CHAT).choices
