"""How fast a request past a backend's ``max_pending`` is refused (issue 13's circuit breaker).

``python -m bench.breaker``: a router whose only backend (a mock that answers after a minute) allows one
pending request; one request is held there, then ``--n`` more are sent one after another on a kept-alive
connection and each one's time to its 503 is measured on the client.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time

import httpx
import yaml

from ._procs import Proc

BODY = {"model": "held", "messages": [{"role": "user", "content": "hello"}]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args()
    with Proc(["-m", "bench.mock_upstream", "--host", "127.0.0.1", "--port", "0", "--latency-ms", "60000"],
              "listening") as stalled:
        doc = {"version": "v0.5",
               "providers": {"models": [{"name": "held", "backend_refs": [
                   {"endpoint": f"{stalled.url}/v1", "max_pending": 1}]}]},
               "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "held"}]}]}],
               "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "r", "default": True}],
               "global": {"router": {"limits": {"request_timeout_ms": 120_000}}}}
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(doc, f)
        with Proc(["-m", "vsr_fast", "serve", "--config", f.name, "--port", "0"], "vsr-fast: serving on") as proc:
            def hold() -> None:
                try:
                    httpx.post(f"{proc.url}/v1/chat/completions", json=BODY, timeout=120)
                except httpx.HTTPError:
                    pass        # the router stops under it at the end of the run

            held = threading.Thread(target=hold, daemon=True)
            held.start()
            deadline = time.monotonic() + 20
            while httpx.get(f"{stalled.url}/_mock/stats").json()["requests"] < 1:
                assert time.monotonic() < deadline, "the held request never reached the backend"
                time.sleep(0.01)
            samples = []
            with httpx.Client() as client:
                for _ in range(args.n):
                    started = time.perf_counter()
                    r = client.post(f"{proc.url}/v1/chat/completions", json=BODY)
                    samples.append((time.perf_counter() - started) * 1000)
                    assert r.status_code == 503, r.text
            samples.sort()
            p99 = samples[int(len(samples) * 0.99) - 1]
            print(f"503 past max_pending: n={args.n} p50 {statistics.median(samples):.2f} ms "
                  f"p99 {p99:.2f} ms max {samples[-1]:.2f} ms")


if __name__ == "__main__":
    main()
