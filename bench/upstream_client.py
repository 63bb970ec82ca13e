"""The upstream call's own CPU: httpx's ``AsyncClient`` vs httpcore's pool, the same requests, one run.

``python -m bench.upstream_client [--requests 3000]`` starts the mock upstream and, in this
process under trio, sends the same Chat Completions body sequentially on one keep-alive
connection, first through ``httpx.AsyncClient.send(build_request(...))`` (what the router did
until issue 14), then through ``vsr_fast.upstream.transport.send`` on an httpcore pool (what it
does now), and prints this process's CPU per request for each, alternating rounds so drift on
the machine hits both alike.
"""
from __future__ import annotations

import argparse
import resource
import sys

import httpx
import trio

from vsr_fast.upstream import transport

from ._procs import Proc
from .sr_bench import chat_body

HEADERS = [("content-type", "application/json"), ("accept-encoding", "identity")]


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def with_httpx(client: httpx.AsyncClient, url: str, body: bytes, n: int) -> None:
    for _ in range(n):
        resp = await client.send(client.build_request("POST", url, content=body, headers=HEADERS), stream=True)
        await resp.aread()
        await resp.aclose()


async def with_httpcore(pool, origin: transport.Origin, body: bytes, n: int) -> None:
    headers = [(k.encode(), v.encode()) for k, v in HEADERS]
    timeouts = {"connect": 5.0, "read": 30.0, "write": 30.0, "pool": 30.0}
    for _ in range(n):
        resp = await transport.send(pool, origin, "/chat/completions", body, headers, timeouts, "bench")
        b"".join([chunk async for chunk in resp.chunks()])
        await resp.aclose()


async def measure(base: str, requests: int, rounds: int) -> dict[str, float]:
    body = chat_body("mock", False, 1024, None)
    client = httpx.AsyncClient(trust_env=False, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
    pool = transport.new_pool(1, transport.ssl_context())
    origin = transport.Origin(base)
    runs = {"httpx": lambda n: with_httpx(client, base + "/chat/completions", body, n),
            "httpcore": lambda n: with_httpcore(pool, origin, body, n)}
    spent = dict.fromkeys(runs, 0.0)
    async with client, pool:
        for run in runs.values():
            await run(200)                      # connect and warm up
        for _ in range(rounds):
            for name, run in runs.items():
                started = cpu_s()
                await run(requests // rounds)
                spent[name] += cpu_s() - started
    return {name: s / (requests // rounds * rounds) * 1e6 for name, s in spent.items()}


def main(argv: list[str] | None = None) -> int:
    """Print CPU µs per request of each client and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m bench.upstream_client", description=__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    with Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        us = trio.run(measure, mock.url + "/v1", args.requests, args.rounds)
    print("| client | CPU µs per request |")
    print("|---|---|")
    for name, value in us.items():
        print(f"| {name} | {value:.0f} |")
    print(f"httpcore saves {us['httpx'] - us['httpcore']:.0f} µs a request ({us['httpcore'] / us['httpx']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
