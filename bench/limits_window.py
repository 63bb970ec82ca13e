"""Requests and tokens per minute held across two routers sharing Redis, at concurrency 32 for one window.

Starts the mock upstream and two routers on one configuration (a key with an
``rpm`` limit, another with a ``tpm`` limit, both kept in one Redis), drives each
key through both routers from 32 client threads for ``--seconds`` (60: one
whole window, so nothing leaves it), and prints what was let through against
the limit. Requests must never pass the limit (the shared log grants no more);
tokens are counted after each answer, so routers may pass it by the tokens
answered while their view was up to 100 ms old.

    python -m bench.limits_window [--rpm 1200] [--tpm 24000] [--seconds 60]
"""
from __future__ import annotations

import argparse
import hashlib
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import redis
import yaml

from ._procs import Proc

RPM_KEY, TPM_KEY = "vsk-bench-rpm", "vsk-bench-tpm"


def _doc(mock_url: str, redis_url: str, prefix: str, rpm: int, tpm: int) -> dict:
    def key(name: str, secret: str, limits: dict) -> dict:
        return {"id": name, "sha256": hashlib.sha256(secret.encode()).hexdigest(), "limits": limits}

    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "recipes": [{"name": "default", "decisions": [{"name": "all", "modelRefs": [{"model": "m"}]}]}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True}],
        "global": {"stores": {"event_stream": {"backend": "none"}},
                   "router": {"auth": {"enabled": True, "store": {"backend": "redis", "url": redis_url,
                                                                  "prefix": prefix},
                                       "keys": [key("rpm", RPM_KEY, {"rpm": rpm}), key("tpm", TPM_KEY, {"tpm": tpm})]}}},
    }


def drive(urls: list[str], secret: str, seconds: float, concurrency: int = 32) -> tuple[int, int, int]:
    """(admitted, refused, tokens answered) over ``seconds`` from ``concurrency`` threads across ``urls``."""
    body = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}
    end = time.monotonic() + seconds
    counts = [0, 0, 0]
    lock = threading.Lock()

    def worker(i: int) -> None:
        with httpx.Client(base_url=urls[i % len(urls)], timeout=30,
                          headers={"authorization": f"Bearer {secret}"}) as client:
            while time.monotonic() < end:
                r = client.post("/v1/chat/completions", json=body)
                with lock:
                    if r.status_code == 200:
                        counts[0] += 1
                        counts[2] += r.json()["usage"]["total_tokens"]
                    elif r.status_code == 429:
                        counts[1] += 1

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    return counts[0], counts[1], counts[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.limits_window", description=__doc__)
    p.add_argument("--rpm", type=int, default=1200)
    p.add_argument("--tpm", type=int, default=24_000)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = p.parse_args(argv)
    prefix = f"vsr-bench-window-{uuid.uuid4().hex[:8]}:"
    try:
        with Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                yaml.safe_dump(_doc(mock.url, args.redis, prefix, args.rpm, args.tpm), f)
            argv_ = ["-m", "vsr_fast", "serve", "--config", f.name, "--port", "0"]
            with Proc(argv_, "vsr-fast: serving on") as a, Proc(argv_, "vsr-fast: serving on") as b:
                urls = [a.url, b.url]
                ok, refused, _ = drive(urls, RPM_KEY, args.seconds)
                print(f"| rpm {args.rpm}, 2 routers, concurrency 32, {args.seconds:g} s | admitted {ok} "
                      f"({ok / args.rpm:.3f} of the limit), refused {refused} |")
                ok, refused, tokens = drive(urls, TPM_KEY, args.seconds)
                print(f"| tpm {args.tpm}, 2 routers, concurrency 32, {args.seconds:g} s | {tokens} tokens answered "
                      f"({tokens / args.tpm:.3f} of the limit) in {ok} requests, refused {refused} |")
    finally:
        r = redis.Redis.from_url(args.redis)
        for k in r.scan_iter(match=prefix + "*"):
            r.delete(k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
