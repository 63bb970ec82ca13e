"""What knowing the caller costs a request: the key check, the limits, the usage count (issue 15).

Runs the router's own code in one process, as a request runs it: read the key
from the headers and look it up (``Authenticator.identify``), admit against a
key's and a team's limits (requests and tokens per minute, requests in flight)
shared through Redis, count the answer's usage, release. CPU per request is the
process's CPU time (the Redis worker thread's included) over the requests.

Also: how long the key lookup takes for wrong keys that share 0, half or all but
one of their characters with the real key (it compares SHA-256 digests, so the
prefix should not matter).

    python -m bench.auth_cost [--requests 20000] [--redis URL]
"""
from __future__ import annotations

import argparse
import hashlib
import statistics
import time
import uuid

import redis
import trio

from vsr_fast.auth.limits import Limiter
from vsr_fast.auth.source import Authenticator
from vsr_fast.auth.usage import UsageMeter
from vsr_fast.config.schema import RouterConfig, convert

KEY = "vsk-" + "b" * 43
ANSWER = (b'{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":'
          b'{"role":"assistant","content":"Hello! This is a canned answer."},"finish_reason":"stop"}],'
          b'"usage":{"prompt_tokens":17,"completion_tokens":13,"total_tokens":30}}')
HEADERS = [(b"host", b"127.0.0.1:8080"), (b"user-agent", b"OpenAI/Python 1.0"), (b"content-type", b"application/json"),
           (b"accept", b"application/json"), (b"authorization", f"Bearer {KEY}".encode()),
           (b"x-stainless-lang", b"python"), (b"content-length", b"2048")]


def config(redis_url: str, prefix: str, limits: bool) -> RouterConfig:
    key = {"id": "bench", "sha256": hashlib.sha256(KEY.encode()).hexdigest(), "team": "bench"}
    if limits:
        key["limits"] = {"rpm": 10**9, "tpm": 10**12, "concurrent": 10**6}
    router = {"auth": {"enabled": True, "keys": [key], "store": {"backend": "redis", "url": redis_url,
                                                                "prefix": prefix}}}
    if limits:
        router["rate_limits"] = {"teams": {"bench": {"rpm": 10**9}}}
    return convert({"version": "v0.5", "global": {"router": router}}, RouterConfig)


async def _run(cfg: RouterConfig, n: int, limits: bool) -> float:
    auth = Authenticator(cfg)
    r = cfg.global_.router
    limiter = Limiter(r.rate_limits, r.auth.store, keys_have_limits=limits)
    limiter.start()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(limiter.run)
        await trio.sleep(0.3)

        async def one() -> None:
            scope = {"headers": HEADERS}
            identity = auth.identify(scope, "chat")
            if limiter.active:
                ticket = await limiter.admit(identity, "chat")
                meter = UsageMeter(2048)
                meter.whole(ANSWER)
                limiter.done(ticket, meter.tokens())

        for _ in range(500):
            await one()
        cpu = time.process_time()
        for _ in range(n):
            await one()
        spent = time.process_time() - cpu
        nursery.cancel_scope.cancel()
    limiter.stop()
    return spent / n * 1e6


def lookup_ns(prefix_len: int, n: int) -> float:
    auth = Authenticator(config("redis://127.0.0.1:1/0", "x:", False))
    wrong = (KEY[:prefix_len] + "z" * (len(KEY) - prefix_len)).encode()
    lookup = auth.keyring.lookup
    samples = []
    for _ in range(25):
        t = time.perf_counter_ns()
        for _ in range(n):
            lookup(wrong)
        samples.append((time.perf_counter_ns() - t) / n)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.auth_cost", description=__doc__)
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = p.parse_args(argv)
    prefix = f"vsr-bench-auth-{uuid.uuid4().hex[:8]}:"
    try:
        key_only = trio.run(_run, config(args.redis, prefix, False), args.requests, False)
        full = trio.run(_run, config(args.redis, prefix, True), args.requests, True)
    finally:
        r = redis.Redis.from_url(args.redis)
        for k in r.scan_iter(match=prefix + "*"):
            r.delete(k)
    print("| what | CPU µs/request |\n|---|---|")
    print(f"| key check (headers, SHA-256, lookup) | {key_only:.1f} |")
    print(f"| key check + key and team limits (rpm, tpm, in flight) in Redis + usage count | {full:.1f} |")
    print()
    print("| wrong key sharing a prefix with the real one | lookup ns (median of 25) |\n|---|---|")
    for n in (0, len(KEY) // 2, len(KEY) - 1):
        print(f"| {n} of {len(KEY)} characters | {lookup_ns(n, 20_000):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
