"""How close to its deadline a request is cut: a silent backend (whole and streamed) and a trickling one.

Starts two mock upstreams (one that never answers, one that sends a stream event
a second) and a router per client API with ``request_timeout_ms`` set, sends
each shape several times and prints the time to the client's 504 (or to the
stream's error event) over the deadline. The goal is 1.00 ± 0.10.

    python -m bench.deadline [--deadline-ms 2000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import httpx
import yaml

from ._procs import Proc

SHAPES = {
    "chat": ("openai", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hello"}]}),
    "messages": ("anthropic", "/v1/messages", {"max_tokens": 64, "messages": [{"role": "user", "content": "hello"}]}),
    "responses": ("responses", "/v1/responses", {"input": "hello"}),
}


def _config(upstream: str, api_format: str, deadline_ms: int) -> str:
    doc = {"version": "v0.5", "global": {"router": {"limits": {"request_timeout_ms": deadline_ms}},
                                         "stores": {"event_stream": {"backend": "none"}}},
           "providers": {"models": [{"name": "m", "api_format": api_format,
                                     "backend_refs": [{"endpoint": f"{upstream}/v1"}]}]},
           "recipes": [{"name": "default", "decisions": [
               {"name": "d", "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "m"}]}]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(doc, f)
    return f.name


def _time_to_end(url: str, body: dict) -> tuple[float, int]:
    started = time.perf_counter()
    with httpx.stream("POST", url, json=body, timeout=120) as r:
        for _ in r.iter_bytes():
            pass
    return time.perf_counter() - started, r.status_code


def main(argv: list[str] | None = None) -> int:
    """Print one row per (backend, API, stream): the time to the cut over the deadline."""
    p = argparse.ArgumentParser(prog="python -m bench.deadline", description=__doc__.splitlines()[0])
    p.add_argument("--deadline-ms", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    deadline = args.deadline_ms / 1000
    print("| backend | api | stream | status | time to cut / deadline (median, min-max) |")
    print("|---|---|---|---|---|")
    with Proc(["-m", "bench.mock_upstream", "--port", "0", "--latency-ms", "600000"], "listening") as silent, \
            Proc(["-m", "bench.mock_upstream", "--port", "0", "--chunks", "600", "--chunk-interval-ms", "1000"],
                 "listening") as trickle:
        for backend, upstream, streams in (("silent", silent, (False, True)), ("trickle", trickle, (True,))):
            for api, (fmt, path, body) in SHAPES.items():
                with Proc(["-m", "vsr_fast", "serve", "--config", _config(upstream.url, fmt, args.deadline_ms),
                           "--port", "0"], "vsr-fast: serving on") as router:
                    for stream in streams:
                        runs = [_time_to_end(f"{router.url}{path}", {"model": "m", **body, "stream": stream})
                                for _ in range(args.repeat)]
                        ratios = [t / deadline for t, _ in runs]
                        print(f"| {backend} | {api} | {'on' if stream else 'off'} | {runs[0][1]} | "
                              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
