"""What embedding costs the recall features (spec 5.5): the embedded static embedding against a remote
``openai_embeddings`` deployment (the mock upstream's ``/v1/embeddings``, on this machine).

    python -m bench.embeddings [--calls 2000]

Prints the p50 and p99 of one call embedding one text, and of one call embedding 32, warm (the first call,
which loads the model or opens the connection, is reported apart).
"""
from __future__ import annotations

import argparse
import time

import msgspec
import numpy as np

from bench._procs import Proc
from vsr_fast.config.catalog import Deployment
from vsr_fast.embeddings import RemoteEmbedder, vela

TEXT = "How do I reverse a list in Python without copying it?"


def timed(fn, calls: int) -> tuple[float, float]:
    """p50 and p99 of ``fn()``, in microseconds."""
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1e6)
    return float(np.percentile(out, 50)), float(np.percentile(out, 99))


def measure(name: str, embedder, calls: int) -> None:
    started = time.perf_counter()
    embedder.encode([TEXT])
    print(f"{name}: first call (start) {1e3 * (time.perf_counter() - started):.1f} ms")
    for batch in (1, 32):
        texts = [f"{TEXT} ({i})" for i in range(batch)]
        p50, p99 = timed(lambda: embedder.encode(texts), calls if batch == 1 else max(calls // 8, 10))
        print(f"{name}: {batch} text(s) a call: p50 {p50:.0f} µs, p99 {p99:.0f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    measure("vela-embedding (static, 256 wide)", vela(), args.calls)
    with Proc(["-m", "bench.mock_upstream", "--host", "127.0.0.1", "--port", "0"], "listening") as mock:
        dep = msgspec.convert({"provider": "openai_embeddings", "endpoint": f"{mock.url}/v1",
                               "capabilities": {"dimensions": 64}}, Deployment)
        remote = RemoteEmbedder("remote", dep)
        try:
            measure("openai_embeddings (mock upstream, 64 wide)", remote, args.calls)
        finally:
            remote.close()


if __name__ == "__main__":
    main()
