"""A mock OpenAI-compatible upstream for end-to-end tests and benchmarks.

Run it as ``python -m bench.mock_upstream --host 127.0.0.1 --port 0`` and read the port
from the ``mock_upstream: listening on http://HOST:PORT`` line it prints to stderr.

It shares the machine's two cores with the router under test, so it is a hand-written
HTTP/1.1 server on raw trio sockets rather than hypercorn (which costs ~1.2 ms of CPU per
request here). Every response, and every chunk of a stream, leaves in one send() on a
TCP_NODELAY socket, so Nagle and delayed ACKs never add their 40 ms to a measurement.

Why trio and not asyncio: measured here with sr-bench (20,000 whole answers), this server
costs ~85 µs of CPU per request at concurrency 1 and ~30 µs at 16; an asyncio Protocol
version of the same code costs ~45 and ~20 µs. The difference is 1-4% of the 1.1-2.2 ms
the floor proxy (hypercorn-trio + httpx) spends per request here, so the stack-consistent
trio code won, with disconnect detection as a plain sibling task, not callback bookkeeping.

Counters (``GET /_mock/stats``), for chat requests only: ``requests`` = received;
``completed`` = successful answers written in full; ``cancelled`` = answers whose client
went away first (during --latency-ms or mid-stream); ``failures_injected``; so at rest
requests = completed + cancelled + failures_injected + malformed requests.
"""
from __future__ import annotations

import argparse
import itertools
import random
import signal
import sys
import time
from typing import Annotated, Literal

import msgspec
import trio

from bench._http import (
    PeerClosed,
    ProtocolError,
    Reader,
    abort,
    chunk,
    parse_head,
    reason,
    send_all,
    set_nodelay,
)

JSON = b"application/json"
SSE = b"text/event-stream"
MODEL_ID = "mock-model"
MIDSTREAM_CHUNKS = 2


class MockConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The knobs, settable from the command line and from ``POST /_mock/config``."""

    latency_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    chunks: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 8
    chunk_interval_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    fail_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    fail_status: Annotated[int, msgspec.Meta(ge=400, le=599)] = 500
    fail_mode: Literal["status", "reset", "midstream"] = "status"
    content: str = "Hello! This is a canned answer from the mock upstream."
    seed: int | None = None


class StreamOptions(msgspec.Struct):
    """The request's stream_options; only include_usage changes the answer."""

    include_usage: bool = False


class ChatRequest(msgspec.Struct):
    """The few request fields the mock looks at; everything else is skipped unparsed."""

    model: str = MODEL_ID
    stream: bool = False
    stream_options: StreamOptions | None = None


class Request(msgspec.Struct):
    """One parsed HTTP request, body read in full."""

    method: bytes
    path: bytes
    headers: dict[bytes, bytes]
    body: bytes
    keep_alive: bool


class Stats:
    """Counters served by ``/_mock/stats``; the last request is kept raw and decoded on demand."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter and forget the last request."""
        self.requests = self.completed = self.cancelled = 0
        self.streams_started = self.failures_injected = 0
        self.last_headers: dict[bytes, bytes] | None = None
        self.last_body = b""

    def as_json(self) -> bytes:
        """The counters and the last chat request as a JSON document."""
        last = None
        if self.last_headers is not None:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in self.last_headers.items()}
            try:
                body = msgspec.json.decode(self.last_body)
            except msgspec.DecodeError:
                body = self.last_body.decode("utf-8", "replace")
            last = {"headers": headers, "body": body}
        return msgspec.json.encode(
            {
                "requests": self.requests,
                "completed": self.completed,
                "cancelled": self.cancelled,
                "streams_started": self.streams_started,
                "failures_injected": self.failures_injected,
                "last_request": last,
            }
        )


def split_even(text: str, parts: int) -> list[str]:
    """Cut text into `parts` consecutive pieces of near-equal length (some may be empty)."""
    size, extra = divmod(len(text), parts)
    pieces, pos = [], 0
    for i in range(parts):
        end = pos + size + (1 if i < extra else 0)
        pieces.append(text[pos:end])
        pos = end
    return pieces


def stream_deltas(content: str, chunks: int) -> list[bytes]:
    """The encoded `"delta":...,"finish_reason":...` tail of each stream chunk.

    Deltas concatenate to exactly `content`: a role chunk, content chunks, a stop chunk,
    folded together when fewer than three chunks are asked for.
    """
    enc = msgspec.json.encode
    pieces = split_even(content, max(chunks - 2, 1))
    if chunks == 1:
        deltas = [({"role": "assistant", "content": content}, "stop")]
    elif chunks == 2:
        deltas = [({"role": "assistant", "content": content}, None), ({}, "stop")]
    else:
        deltas = [({"role": "assistant", "content": ""}, None)]
        deltas += [({"content": p}, None) for p in pieces]
        deltas.append(({}, "stop"))
    return [
        b'"delta":%s,"logprobs":null,"finish_reason":%s}]}' % (enc(d), enc(f)) for d, f in deltas
    ]


def error_body(message: str, status: int) -> bytes:
    """An OpenAI-style error document."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return msgspec.json.encode(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}
    )


def response_bytes(status: int, body: bytes, keep_alive: bool, content_type: bytes = JSON) -> bytes:
    """A whole response, head and body, ready for a single send()."""
    close = b"" if keep_alive else b"Connection: close\r\n"
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status, reason(status), content_type, len(body), close, body
    )


def stream_head(keep_alive: bool) -> bytes:
    """The head of a chunked SSE response."""
    close = b"" if keep_alive else b"Connection: close\r\n"
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n%s\r\n" % close
    )


def usage(prompt_bytes: int, content: str) -> dict[str, int]:
    """Token counts of a rough 4-bytes-per-token estimate; clients only need them consistent."""
    prompt = max(1, prompt_bytes // 4)
    completion = max(1, len(content) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def read_request(sock: trio.socket.SocketType, reader: Reader) -> Request | None:
    """The next request on the connection, or None when the client closed it cleanly."""
    head = await reader.read_head()
    if head is None:
        return None
    line, headers = parse_head(head)
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise ProtocolError(f"bad request line {line[:80]!r}")
    method, target, version = parts
    if headers.get(b"expect", b"").lower() == b"100-continue":
        await send_all(sock, b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await reader.read_body(headers)
    connection = headers.get(b"connection", b"").lower()
    keep_alive = b"close" not in connection if version == b"HTTP/1.1" else b"keep-alive" in connection
    return Request(method, target.split(b"?", 1)[0], headers, body, keep_alive)


class MockUpstream:
    """The server: one trio task per connection, requests answered in order."""

    def __init__(self, config: MockConfig) -> None:
        self.stats = Stats()
        self.ids = itertools.count(1)
        self.apply(config)

    def apply(self, config: MockConfig) -> None:
        """Install a configuration; a seed restarts the failure sequence."""
        self.config = config
        self.rng = random.Random(config.seed)
        self.deltas = stream_deltas(config.content, config.chunks)
        self.content_json = msgspec.json.encode(config.content)

    async def serve(self, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; reports the bound port through task_status."""
        family = trio.socket.AF_INET6 if ":" in host else trio.socket.AF_INET
        listener = trio.socket.socket(family, trio.socket.SOCK_STREAM)
        with listener:
            listener.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
            await listener.bind((host, port))
            listener.listen(1024)
            task_status.started(listener.getsockname()[1])
            async with trio.open_nursery() as nursery:
                while True:
                    try:
                        sock, _ = await listener.accept()
                    except OSError:
                        # Out of descriptors or an aborted handshake: back off, keep serving.
                        await trio.sleep(0.01)
                        continue
                    nursery.start_soon(self.connection, sock)

    async def connection(self, sock: trio.socket.SocketType) -> None:
        """Serve one keep-alive connection until either side closes it."""
        set_nodelay(sock)
        reader = Reader(sock)
        try:
            while True:
                try:
                    request = await read_request(sock, reader)
                except PeerClosed:
                    return
                except ProtocolError as exc:
                    await send_all(sock, response_bytes(400, error_body(str(exc), 400), False))
                    return
                if request is None or not await self.dispatch(sock, reader, request):
                    return
        except OSError:
            return  # the client reset the connection; nothing left to answer
        finally:
            sock.close()

    async def dispatch(self, sock: trio.socket.SocketType, reader: Reader, req: Request) -> bool:
        """Answer one request; returns whether the connection stays open."""
        if req.method == b"POST" and req.path in (b"/v1/chat/completions", b"/chat/completions"):
            return await self.chat(sock, reader, req)
        if req.method == b"GET" and req.path in (b"/v1/models", b"/models"):
            body = msgspec.json.encode(
                {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "mock"}]}
            )
            status = 200
        elif req.path.startswith(b"/_mock/"):
            status, body = self.admin(req)
        else:
            status, body = 404, error_body(f"no route for {req.method.decode()} {req.path.decode()}", 404)
        await send_all(sock, response_bytes(status, body, req.keep_alive))
        return req.keep_alive

    def admin(self, req: Request) -> tuple[int, bytes]:
        """The test-only routes under /_mock/."""
        if req.path == b"/_mock/stats" and req.method == b"GET":
            return 200, self.stats.as_json()
        if req.path == b"/_mock/reset" and req.method == b"POST":
            self.stats.reset()
            return 200, b'{"ok":true}'
        if req.path == b"/_mock/config":
            if req.method == b"POST":
                try:
                    self.apply(self.updated_config(req.body))
                except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
                    return 400, error_body(f"bad config: {exc}", 400)
            return 200, msgspec.json.encode(self.config)
        return 404, error_body(f"no admin route {req.path.decode()}", 404)

    def updated_config(self, body: bytes) -> MockConfig:
        """The current config with the keys of a JSON object (dashes or underscores) replaced."""
        changes = msgspec.json.decode(body or b"{}")
        if not isinstance(changes, dict):
            raise TypeError("config must be a JSON object")
        merged = msgspec.structs.asdict(self.config)
        merged.update({key.replace("-", "_"): value for key, value in changes.items()})
        return msgspec.convert(merged, MockConfig)

    async def chat(self, sock: trio.socket.SocketType, reader: Reader, req: Request) -> bool:
        """Answer a Chat Completions request: whole, streamed, or an injected failure."""
        stats = self.stats
        stats.requests += 1
        stats.last_headers, stats.last_body = req.headers, req.body
        try:
            chat = msgspec.json.decode(req.body, type=ChatRequest)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            await send_all(sock, response_bytes(400, error_body(f"bad request body: {exc}", 400), req.keep_alive))
            return req.keep_alive
        config = self.config
        failing = config.fail_rate > 0 and self.rng.random() < config.fail_rate
        if failing:
            stats.failures_injected += 1
            return await self.fail(sock, req, chat, config)
        if config.latency_ms <= 0 and not chat.stream:
            await send_all(sock, response_bytes(200, self.whole_body(req, chat, config), req.keep_alive))
            stats.completed += 1
            return req.keep_alive
        finished = await self.guarded(reader, self.answer(sock, req, chat, config))
        if finished:
            stats.completed += 1
        else:
            stats.cancelled += 1
        return finished and req.keep_alive

    async def guarded(self, reader: Reader, work) -> bool:
        """Run work while watching for the client leaving; False if it left before work finished.

        The write failing alone is not reliable: writes into the kernel buffer keep
        succeeding for a while after the peer closed, so a sibling task waits for its EOF.
        """
        finished = False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_peer, reader, nursery.cancel_scope)
            try:
                await work
                finished = True
            except OSError:
                pass
            nursery.cancel_scope.cancel()
        return finished

    async def answer(self, sock: trio.socket.SocketType, req: Request, chat: ChatRequest, config: MockConfig) -> None:
        """The successful answer, after the configured latency."""
        if config.latency_ms > 0:
            await trio.sleep(config.latency_ms / 1000)
        if not chat.stream:
            await send_all(sock, response_bytes(200, self.whole_body(req, chat, config), req.keep_alive))
            return
        self.stats.streams_started += 1
        events = self.stream_events(req, chat, config)
        await send_all(sock, stream_head(req.keep_alive) + events[0])
        interval = config.chunk_interval_ms / 1000
        for event in events[1:]:
            if interval > 0:
                await trio.sleep(interval)
            await send_all(sock, event)

    def whole_body(self, req: Request, chat: ChatRequest, config: MockConfig) -> bytes:
        """The body of a non-streamed chat.completion response."""
        return b"".join((
            b'{"id":"chatcmpl-mock-%d","object":"chat.completion","created":%d,"model":%s,'
            % (next(self.ids), int(time.time()), msgspec.json.encode(chat.model)),
            b'"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},'
            % self.content_json,
            b'"logprobs":null,"finish_reason":"stop"}],"usage":%s}'
            % msgspec.json.encode(usage(len(req.body), config.content)),
        ))

    def stream_events(self, req: Request, chat: ChatRequest, config: MockConfig) -> list[bytes]:
        """Every write of a stream after the head, each a framed chunk; the last ends the body."""
        prefix = b'data: {"id":"chatcmpl-mock-%d","object":"chat.completion.chunk","created":%d,"model":%s,' % (
            next(self.ids), int(time.time()), msgspec.json.encode(chat.model)
        )
        events = [chunk(prefix + b'"choices":[{"index":0,' + delta + b"\n\n") for delta in self.deltas]
        if chat.stream_options is not None and chat.stream_options.include_usage:
            tail = b'"choices":[],"usage":%s}\n\n' % msgspec.json.encode(usage(len(req.body), config.content))
            events.append(chunk(prefix + tail))
        events.append(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        return events

    async def fail(self, sock: trio.socket.SocketType, req: Request, chat: ChatRequest, config: MockConfig) -> bool:
        """Inject the configured failure; returns whether the connection stays open."""
        if config.latency_ms > 0:
            await trio.sleep(config.latency_ms / 1000)
        if config.fail_mode == "reset":
            abort(sock)
            return False
        if config.fail_mode == "midstream":
            await self.fail_midstream(sock, req, chat, config)
            return False
        status = config.fail_status
        body = error_body(f"injected failure (status {status})", status)
        await send_all(sock, response_bytes(status, body, req.keep_alive))
        return req.keep_alive

    async def fail_midstream(self, sock: trio.socket.SocketType, req: Request, chat: ChatRequest, config: MockConfig) -> None:
        """Start the answer, then drop the connection: two chunks of a stream, half a whole body."""
        if not chat.stream:
            body = self.whole_body(req, chat, config)
            await send_all(sock, response_bytes(200, body, req.keep_alive)[: -(len(body) // 2)])
            return
        self.stats.streams_started += 1
        events = self.stream_events(req, chat, config)[:MIDSTREAM_CHUNKS]
        await send_all(sock, stream_head(req.keep_alive) + events[0])
        for event in events[1:]:
            await send_all(sock, event)


async def watch_peer(reader: Reader, scope: trio.CancelScope) -> None:
    """Cancel scope once the client closes or resets the connection; pipelined bytes are kept."""
    try:
        while await reader.fill():
            pass
    except OSError:
        pass
    scope.cancel()


async def run(host: str, port: int, config: MockConfig) -> None:
    """Serve until SIGTERM or SIGINT."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            server = MockUpstream(config)
            bound = await nursery.start(server.serve, host, port)
            shown = f"[{host}]" if ":" in host else host
            print(f"mock_upstream: listening on http://{shown}:{bound}", file=sys.stderr, flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def build_parser() -> argparse.ArgumentParser:
    """The command line; every knob can also be changed later through POST /_mock/config."""
    d = MockConfig()
    p = argparse.ArgumentParser(
        prog="python -m bench.mock_upstream",
        description="A cheap mock OpenAI Chat Completions upstream for tests and benchmarks.",
        epilog="Routes: POST /v1/chat/completions (and /chat/completions), GET /v1/models; for tests "
        "GET /_mock/stats, POST /_mock/reset (zero the counters), POST /_mock/config with a JSON "
        "object of any knob above, e.g. {\"fail_rate\": 1, \"fail_status\": 429}.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=8001, help="port to bind; 0 picks a free one (default %(default)s)")
    p.add_argument("--latency-ms", type=float, default=d.latency_ms, help="delay before the response head")
    p.add_argument("--chunks", type=int, default=d.chunks, help="chat.completion.chunk events per stream (default %(default)s)")
    p.add_argument("--chunk-interval-ms", type=float, default=d.chunk_interval_ms, help="pause between stream chunks")
    p.add_argument("--fail-rate", type=float, default=d.fail_rate, help="probability 0..1 of an injected failure")
    p.add_argument("--fail-status", type=int, default=d.fail_status, help="status of injected failures (default %(default)s)")
    p.add_argument(
        "--fail-mode", choices=["status", "reset", "midstream"], default=d.fail_mode,
        help="status: an OpenAI error JSON; reset: RST without answering; midstream: drop the connection "
        "after 2 stream chunks (after half the body of a whole answer)",
    )
    p.add_argument("--content", default=d.content, help="the fixed completion text")
    p.add_argument("--seed", type=int, default=None, help="seed for deterministic failure injection")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.mock_upstream``."""
    args = build_parser().parse_args(argv)
    try:
        config = msgspec.convert(
            {k: getattr(args, k) for k in MockConfig.__struct_fields__}, MockConfig
        )
    except msgspec.ValidationError as exc:
        print(f"mock_upstream: {exc}", file=sys.stderr)
        return 2
    trio.run(run, args.host, args.port, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
