"""A hostile upstream for the reliability tests: a real HTTP server whose answers a router must not trust.

``python -m tests.hostile_upstream`` prints ``hostile_upstream: listening on http://HOST:PORT``. The first
path segment picks the misbehaviour, so one server plays every backend (``endpoint: URL/<mode>/v1``):

- ``ok``: a normal chat completion;
- ``invalid-json``, ``wrong-shape``: 200 with a body that is not JSON, or JSON without ``choices``;
- ``bad-choice``: 200 with ``choices`` whose message content is a number (its top level is an answer's);
- ``status999``, ``redirect``: HTTP 999, or a 307 with no Location;
- ``huge``, ``huge-sse``: 100 MB of JSON or of SSE events, chunked, with no Content-Length;
- ``echo-key``: 401 whose message quotes the credential the request carried;
- ``long-error``: 400 with a 1 MiB error body that also quotes it;
- ``sse-ok``: a well-formed stream (Chat's chunks, or Messages' events under ``/messages``);
- ``sse-html``: 200 ``text/event-stream`` whose body is an HTML page; ``sse-not-json``: events whose data is
  not JSON; ``sse-empty``: an event stream with no event; ``sse-no-field``: JSON lines without ``data:``;
- ``sse-broken-later``: two good events, then one whose data is not JSON, then more good ones;
- ``sse-truncated``: two good events, then half of one, and the connection closes;
- ``cookie``: a chat completion that sets a cookie, whose content is the Cookie header it received
  (``no cookie`` when none);
- ``gzip``, ``brotli``: a chat completion in a content coding the router did not ask for (gzip
  compressed for real; ``br`` as bytes that are not brotli);
- ``extra-answer``: a chat completion saying ``answer for <the last message>``, then, unasked, a second whole
  answer saying ``SMUGGLED after <it>`` on the same connection; ``trailing-crlf``: the same first answer, then
  ``\r\n`` past its Content-Length;
- ``gzip-bomb``: a chat completion's head, then 256 MiB of zeros, gzip compressed to 256 KiB and sent as
  ``content-encoding: gzip`` although the router asked for ``identity``;
- ``one-per-connection``: answers a connection's first request; its next one is read and the connection closed
  with no answer (a keep-alive connection the server dropped as the request arrived);
- ``idle-close``: answers, then closes the connection 0.3 s later, reading nothing more (a keep-alive timeout
  shorter than the router's: a request sent in between is never answered);
- ``poison``: a chat completion, except that a request whose last message is ``poison`` is read and its
  connection closed unanswered (a backend worker that dies on it), counted; ``warm`` waits until four such
  requests are in (four pooled connections); ``count`` answers how many ``poison`` requests arrived.
"""
from __future__ import annotations

import functools
import gzip
import json
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HUGE = 100 * 1000 * 1000
PIECE = 1 << 20
CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "hostile",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
EVENT = b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"hostile","choices":[{"index":0,' \
        b'"delta":{"content":"x"},"finish_reason":null}]}\n\n'


MESSAGES_EVENTS = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":'
    b'"assistant","model":"hostile","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text",'
    b'"text":""}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
    b'"text":"x"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":1}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]
CHAT_EVENTS = [EVENT, EVENT, EVENT, b"data: [DONE]\n\n"]
NOT_JSON = b"data: {this is not json\n\n"


def sse_body(mode: str, messages: bool) -> tuple[bytes, bool]:
    """The body of an SSE mode, and whether the connection then closes with it unfinished."""
    good = MESSAGES_EVENTS if messages else CHAT_EVENTS
    if mode == "sse-ok":
        return b"".join(good), False
    if mode == "sse-html":
        return b"<html><body><h1>502 Bad Gateway</h1></body></html>\n", False
    if mode == "sse-not-json":
        return NOT_JSON * 3, False
    if mode == "sse-empty":
        return b": keep-alive\n\n", False
    if mode == "sse-no-field":
        return b"".join(good).replace(b"data: ", b""), False
    if mode == "sse-broken-later":
        return b"".join(good[:2]) + NOT_JSON + b"".join(good[2:]), False
    if mode == "sse-truncated":
        return b"".join(good[:2]) + good[2][:len(good[2]) // 2], True
    raise KeyError(mode)


@functools.cache
def _bomb(mib: int = 256) -> bytes:
    """A gzip member of ``mib`` MiB (a JSON head, then zeros) in about a thousandth of that: each MiB of zeros
    compressed once after a full flush is the same bytes, repeated. Its CRC is not the content's: nobody
    reads that far."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(b'{"choices": [') + deflate.flush(zlib.Z_FULL_FLUSH)
    mebibyte = deflate.compress(bytes(PIECE)) + deflate.flush(zlib.Z_FULL_FLUSH)
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + head + mebibyte * mib + deflate.flush()
            + (0).to_bytes(4, "little") + (mib * PIECE % (1 << 32)).to_bytes(4, "little"))


_POISONED = [0]
_POISONED_LOCK = threading.Lock()
_WARM = threading.Barrier(4, timeout=20)


def _said(content: str) -> bytes:
    """A chat completion whose answer is ``content``."""
    return json.dumps(dict(CHAT, choices=[{**CHAT["choices"][0], "message": {
        "role": "assistant", "content": content}}])).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        mode = self.path.strip("/").split("/")[0]
        key = (self.headers.get("authorization", "").removeprefix("Bearer ") or self.headers.get("x-api-key", ""))
        if mode == "ok":
            self.whole(200, json.dumps(CHAT).encode())
        elif mode == "invalid-json":
            self.whole(200, b'{"choices": [ this is not json')
        elif mode == "wrong-shape":
            self.whole(200, json.dumps({"id": "x", "object": "chat.completion"}).encode())
        elif mode == "bad-choice":
            self.whole(200, json.dumps({**CHAT, "choices": [{"index": 0, "message": {"content": 7}}]}).encode())
        elif mode == "status999":
            self.whole(999, json.dumps(CHAT).encode())
        elif mode == "redirect":
            self.whole(307, b"")
        elif mode == "huge":
            self.chunked("application/json", b'{"choices": [' + b" " * (PIECE - 13))
        elif mode == "huge-sse":
            self.chunked("text/event-stream", EVENT * (PIECE // len(EVENT)))
        elif mode == "echo-key":
            error = {"message": f"Incorrect API key provided: {key}.", "type": "invalid_request_error",
                     "code": "invalid_api_key"}
            self.whole(401, json.dumps({"error": error}).encode())
        elif mode == "long-error":
            error = {"message": f"bad request from {key}: " + "x" * PIECE, "type": "invalid_request_error"}
            self.whole(400, json.dumps({"error": error}).encode())
        elif mode.startswith("sse-"):
            body, cut = sse_body(mode, self.path.endswith("/messages"))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            if cut:      # no framing: the stream ends when the connection does
                self.send_header("connection", "close")
                self.close_connection = True
            else:
                self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif mode == "cookie":
            self.whole(200, _said(self.headers.get("cookie", "no cookie")), [("set-cookie", "session=alice; Path=/")])
        elif mode == "gzip":
            self.whole(200, gzip.compress(json.dumps(CHAT).encode()), [("content-encoding", "gzip")])
        elif mode == "brotli":
            self.whole(200, b"\x1b\x00not brotli", [("content-encoding", "br")])
        elif mode in ("extra-answer", "trailing-crlf"):
            said = json.loads(body)["messages"][-1]["content"]
            self.whole(200, _said(f"answer for {said}"))
            self.wfile.write(b"\r\n" if mode == "trailing-crlf" else
                             b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(smuggled := _said(f"SMUGGLED after {said}")), smuggled))
        elif mode == "gzip-bomb":
            self.whole(200, _bomb(), [("content-encoding", "gzip")])
        elif mode == "idle-close":
            self.whole(200, json.dumps(CHAT).encode())
            self.wfile.flush()
            time.sleep(0.3)
            self.close_connection = True
        elif mode == "poison":
            said = json.loads(body)["messages"][-1]["content"]
            if said == "poison":
                with _POISONED_LOCK:
                    _POISONED[0] += 1
                self.close_connection = True        # read, never answered
                return
            if said == "warm":
                _WARM.wait()
            self.whole(200, _said(str(_POISONED[0]) if said == "count" else "fine"))
        elif mode == "one-per-connection":
            if getattr(self, "answered", False):
                self.close_connection = True        # read, never answered
                return
            self.answered = True
            self.whole(200, json.dumps(CHAT).encode())
        else:
            self.whole(404, b'{"error": {"message": "unknown mode"}}')

    def whole(self, status: int, body: bytes, headers: list[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def sse(self, events, cut: bool = False) -> None:
        """A 200 event stream of ``events`` (each a whole SSE event), one chunk each, flushed as written; ``cut``,
        the connection then closes without the last chunk, the stream unfinished."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events:
            self.wfile.write(b"%x\r\n" % len(event) + event + b"\r\n")
            self.wfile.flush()
        if cut:
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")

    def chunked(self, content_type: str, piece: bytes) -> None:
        """About HUGE bytes of ``piece`` repeated, until the client stops reading."""
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        try:
            for _ in range(HUGE // len(piece)):
                self.wfile.write(frame)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class Bodies:
    """The request bodies a scripted handler got, in order: its threads (one per connection) keep them here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: list[dict] = []

    def keep(self, body: dict) -> None:
        with self._lock:
            self._bodies.append(body)

    def last(self) -> dict:
        with self._lock:
            return self._bodies[-1]


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served in this process by a thread per connection; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"hostile_upstream: listening on http://{host}:{port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
