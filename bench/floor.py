"""The floor: a bare pass-through proxy on the router's own server and client stack.

``python -m bench.floor --port 8081 --upstream http://127.0.0.1:8001`` serves a raw ASGI
app (no Quart) with hypercorn's trio worker and forwards every request, unchanged, to the
upstream through shared httpcore connection pools (what the router's dispatcher drives,
below httpx's ``Client``), in the router's default shape: ``--shards`` small pools, each
request on the one with the most connections free (``vsr_fast.upstream.lease``). It does no
routing work at all, so
router minus floor is what routing costs, and floor minus the direct mock is what the
hypercorn-trio + httpcore stack costs.

The request path is appended verbatim to --upstream: give the upstream's origin, e.g.
``http://127.0.0.1:8001``, not a ``.../v1`` base URL.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
from functools import partial

import httpcore
import hypercorn.trio
import msgspec
import trio
from hypercorn.config import Config

from vsr_fast.config.schema import BackendRef
from vsr_fast.upstream.lease import Shards
from vsr_fast.upstream.transport import new_pool

# Hop-by-hop headers describe one connection, not the message; h11 on both sides frames
# each side themselves, so Content-Length is recomputed too on the way up.
HOP_BY_HOP = frozenset((
    b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te",
    b"trailer", b"upgrade", b"host", b"content-length",
))
RESPONSE_HOP_BY_HOP = HOP_BY_HOP - {b"content-length"}
UPSTREAM_ERRORS = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError)


def error_json(status: int, message: str) -> bytes:
    """An OpenAI-style error document."""
    return msgspec.json.encode(
        {"error": {"message": message, "type": "upstream_error", "param": None, "code": status}}
    )


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


async def read_request_body(receive) -> bytes:
    """The whole request body from ASGI http.request messages."""
    parts = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone()
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def watch_disconnect(receive, scope: trio.CancelScope) -> None:
    """Cancel the relay when the client goes away.

    hypercorn-trio lets send() keep succeeding after the client left, so without this the
    upstream would go on generating (and billing) a stream nobody reads.
    """
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


class FloorApp:
    """The ASGI application: forward, relay, nothing else."""

    def __init__(self, pools: list[httpcore.AsyncConnectionPool], size: int, upstream: str, timeout: float) -> None:
        self.pools = pools
        self.shards = Shards(len(pools), size)
        self.upstream = upstream.rstrip("/").encode("ascii")
        self.host = self.upstream.split(b"://", 1)[-1].split(b"/", 1)[0]
        self.timeouts = {"connect": 10.0, "read": timeout, "write": timeout, "pool": None}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
        elif scope["type"] == "http":
            await self.http(scope, receive, send)

    async def http(self, scope, receive, send) -> None:
        """Proxy one request, cancelling the upstream call if the client leaves."""
        try:
            body = await read_request_body(receive)
        except ClientGone:
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
            await self.relay(scope, body, send)
            nursery.cancel_scope.cancel()

    async def relay(self, scope, body: bytes, send) -> None:
        """Forward the request and relay status, headers and raw body bytes back."""
        url = self.upstream + scope["raw_path"]
        if scope["query_string"]:
            url += b"?" + scope["query_string"]
        headers = [(b"host", self.host), *((k, v) for k, v in scope["headers"] if k not in HOP_BY_HOP),
                   (b"content-length", b"%d" % len(body))]
        request = httpcore.Request(scope["method"].encode("ascii"), url, headers=headers, content=body,
                                   extensions={"timeout": self.timeouts})
        shard = self.shards.take()
        if shard < 0:
            shard = await self.shards.wait(math.inf)
        try:
            response = await self.pools[shard].handle_async_request(request)
        except UPSTREAM_ERRORS as exc:
            self.shards.give_back(shard)
            await send_error(send, 502, f"upstream unreachable: {exc!r}")
            return
        except BaseException:
            self.shards.give_back(shard)
            raise
        try:
            out_headers = [(k.lower(), v) for k, v in response.headers if k.lower() not in RESPONSE_HOP_BY_HOP]
            await send({"type": "http.response.start", "status": response.status, "headers": out_headers})
            if any(k == b"content-length" for k, _ in out_headers):
                await send_whole(response, send)
            else:
                await send_stream(response, send)
        except UPSTREAM_ERRORS:
            # The upstream broke after the head went out: returning without the end of the
            # body makes hypercorn close the connection, so the client sees the truncation.
            return
        finally:
            try:
                await response.aclose()
            finally:
                self.shards.give_back(shard)


async def send_whole(response: httpcore.Response, send) -> None:
    """Relay a length-delimited body in one message (raw bytes: no re-encoding)."""
    body = b"".join([piece async for piece in response.stream])
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_stream(response: httpcore.Response, send) -> None:
    """Relay a streamed body piece by piece as the upstream produces it."""
    async for piece in response.stream:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_error(send, status: int, message: str) -> None:
    """Answer with an OpenAI-style error."""
    body = error_json(status, message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def lifespan(receive, send) -> None:
    """Acknowledge startup and shutdown; the client lives outside the app."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def make_pool(size: int) -> httpcore.AsyncConnectionPool:
    """One shared upstream pool, small: httpcore's per-request work grows with it. The router's kind, whose
    connections take their locks without a scheduler pass when free, so the floor moves with the router."""
    return new_pool(size)


def make_config(host: str, port: int) -> Config:
    """hypercorn settings: defaults, minus access logs and the startup banner."""
    config = Config()
    shown = f"[{host}]" if ":" in host else host
    config.bind = [f"{shown}:{port}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = 2.0
    return config


async def run(host: str, port: int, upstream: str, pool: int, shards: int, timeout: float) -> None:
    """Serve until SIGTERM or SIGINT, then drain gracefully."""
    # The receiver exists before the readiness line, so an early SIGTERM still drains.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        stop = trio.Event()
        size = max(1, pool // shards)
        pools = [make_pool(size) for _ in range(shards)]
        async with contextlib.AsyncExitStack() as stack, trio.open_nursery() as nursery:
            for p in pools:
                await stack.enter_async_context(p)
            app = FloorApp(pools, size, upstream, timeout)

            async def serve(task_status=trio.TASK_STATUS_IGNORED) -> None:
                await hypercorn.trio.serve(app, make_config(host, port), shutdown_trigger=stop.wait,
                                           task_status=task_status)
                nursery.cancel_scope.cancel()

            binds = await nursery.start(serve)
            print(f"floor: listening on {binds[0]}", file=sys.stderr, flush=True)
            async for _ in signals:
                stop.set()
                break


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="python -m bench.floor",
        description="A bare hypercorn-trio + httpcore pass-through proxy: the floor the router is compared against.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=8081, help="port to bind; 0 picks a free one (default %(default)s)")
    p.add_argument("--upstream", required=True, help="upstream origin, e.g. http://127.0.0.1:8001")
    # The router's default backend shape (config/schema.BackendRef), so the two queue alike at any concurrency.
    ref = BackendRef(endpoint="")
    p.add_argument("--pool", type=int, default=ref.max_connections * ref.pool_shards,
                   help="upstream connections in all (and keep-alive pool size); more requests queue (default %(default)s)")
    p.add_argument("--shards", type=int, default=ref.pool_shards,
                   help="pools the connections are split into, as the router's default "
                        "(default %(default)s)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="upstream read/write timeout in seconds (default %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.floor``."""
    args = build_parser().parse_args(argv)
    trio.run(partial(run, args.host, args.port, args.upstream, args.pool, args.shards, args.timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
