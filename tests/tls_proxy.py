"""A TLS-terminating TCP proxy, for tests of HTTPS clients against the plain-HTTP fakes.

    python -m tests.tls_proxy --cert CERT --key KEY --target HOST:PORT

Accepts TLS on a free port of 127.0.0.1 and pipes the decrypted bytes both ways to the
target. Once listening it prints ``tls_proxy: listening (TLS) on http://127.0.0.1:PORT``
to stderr (``bench._procs.Proc`` reads the port from the ``http://`` form; connect with
``https://``). A handshake the client refuses ends that connection only.
"""
from __future__ import annotations

import argparse
import ssl
import sys

import trio


async def _pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _proxy(client: trio.SSLStream, host: str, port: int) -> None:
    try:
        await client.do_handshake()
    except (trio.BrokenResourceError, ssl.SSLError):
        return                       # the client did not trust us: nothing to forward
    async with await trio.open_tcp_stream(host, port) as upstream:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pipe, client, upstream)
            await _pipe(upstream, client)
            nursery.cancel_scope.cancel()


async def serve(cert: str, key: str, host: str, port: int) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    listeners = await trio.open_ssl_over_tcp_listeners(0, context, host="127.0.0.1")
    bound = listeners[0].transport_listener.socket.getsockname()[1]
    print(f"tls_proxy: listening (TLS) on http://127.0.0.1:{bound}", file=sys.stderr, flush=True)
    await trio.serve_listeners(lambda stream: _proxy(stream, host, port), listeners)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--target", required=True, help="HOST:PORT of the plain-HTTP server behind")
    args = parser.parse_args()
    host, port = args.target.rsplit(":", 1)
    trio.run(serve, args.cert, args.key, host, int(port))


if __name__ == "__main__":
    main()
