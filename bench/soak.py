"""The soak (issue 13): 60,000 requests through the quickstart configuration, zero errors, flat memory.

``python -m bench.soak --workers 1`` (and ``--workers 2``) starts the mock upstream and the router on
config/quickstart.yaml (its endpoints pointed at the mock; the configuration and each worker's embedded
event journal in a temporary directory, removed at the end), then sends ``--requests`` requests in phases
of ``--phase``: four keep-alive connections at once, each with its own kind of request (Chat whole, Chat
streamed, Messages whole, Responses whole), with sr-bench's client. After each phase it reads the resident
memory of the router's processes (the sum over workers). It prints one line per phase and a summary:
errors, and the RSS growth per 10,000 requests after ``--warmup`` requests (the slope of a least-squares
line through the samples, and the last sample minus the first). Not part of ``make test``: it takes
minutes, and memory figures are for bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import msgspec
import trio

from ._procs import ROOT, Proc, children
from .sr_bench import Budget, RunResult, Target, request_bytes, resolve, worker

QUESTION = "How do I reverse a linked list in Python? Show the iterative version and explain each step."
KINDS = {
    "chat": ("/v1/chat/completions", {"model": "vsr/auto", "messages": [{"role": "user", "content": QUESTION}]},
             False),
    "chat-stream": ("/v1/chat/completions",
                    {"model": "vsr/auto", "messages": [{"role": "user", "content": QUESTION}], "stream": True},
                    True),
    "messages": ("/v1/messages", {"model": "vsr/auto", "max_tokens": 256,
                                  "messages": [{"role": "user", "content": QUESTION}]}, False),
    "responses": ("/v1/responses", {"model": "vsr/auto", "input": QUESTION, "store": False}, False),
}


def soak_config(mock_url: str, directory: str) -> str:
    """config/quickstart.yaml with its endpoints at ``mock_url``, written into ``directory``."""
    path = os.path.join(directory, "soak.yaml")
    with open(path, "w") as f:
        f.write((ROOT / "config" / "quickstart.yaml").read_text().replace("http://127.0.0.1:8001", mock_url))
    return path


def rss_kib(pids: list[int]) -> int:
    """The summed VmRSS of ``pids`` in KiB."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of (requests, KiB) points, in KiB per request."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


async def phase(targets: list[tuple[Target, bytes, bool]], conns: list, per_kind: int, result: RunResult) -> None:
    async def one(i: int) -> None:
        target, payload, stream = targets[i]
        budget = Budget(per_kind, time.perf_counter() + 600)
        conns[i] = await worker(target, payload, stream, budget, result, 60.0, conns[i])

    async with trio.open_nursery() as nursery:
        for i in range(len(targets)):
            nursery.start_soon(one, i)


async def drive(url: str, pids: list[int], total: int, per_phase: int, warmup: int) -> dict:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    targets = []
    for path, body, stream in KINDS.values():
        target = Target(path, url, host, int(port), path)
        await resolve(target)
        targets.append((target, request_bytes(target, msgspec.json.encode(body), stream, []), stream))
    conns: list = [None] * len(targets)
    result = RunResult()
    samples: list[tuple[int, int]] = [(0, rss_kib(pids))]
    done = 0
    started = time.monotonic()
    print(f"soak: {total} requests, phases of {per_phase}, router pids {pids}, RSS {samples[0][1] / 1024:.1f} MiB",
          flush=True)
    while done < total:
        await phase(targets, conns, per_phase // len(targets), result)
        done += per_phase // len(targets) * len(targets)
        samples.append((done, rss_kib(pids)))
        errors = result.http_errors + result.conn_errors
        print(f"soak: {done:>6} requests  RSS {samples[-1][1] / 1024:7.1f} MiB  errors {errors} "
              f"{dict(result.error_kinds) or ''}  {time.monotonic() - started:6.1f} s", flush=True)
    for conn in conns:
        if conn is not None:
            conn.close()
    after = [(n, kib) for n, kib in samples if n >= warmup]
    return {"requests": done, "errors": result.http_errors + result.conn_errors,
            "error_kinds": dict(result.error_kinds), "seconds": time.monotonic() - started,
            "rss_start_mib": samples[0][1] / 1024, "rss_warm_mib": after[0][1] / 1024,
            "rss_end_mib": samples[-1][1] / 1024,
            "slope_mib_per_10k": slope(after) * 10_000 / 1024,
            "end_minus_warm_mib_per_10k": (after[-1][1] - after[0][1]) / 1024 / ((after[-1][0] - after[0][0]) / 10_000)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--requests", type=int, default=60_000)
    parser.add_argument("--phase", type=int, default=5_000)
    parser.add_argument("--warmup", type=int, default=10_000)
    args = parser.parse_args()
    # The configuration and every worker's event journal ($VSR_STATE_DIR/events/<port>-w<i>), removed after.
    work = tempfile.mkdtemp(prefix="vsr-soak-")
    with Proc(["-m", "bench.mock_upstream", "--host", "127.0.0.1", "--port", "0"], "listening") as mock:
        config = soak_config(mock.url, work)
        ready = "supervisor of" if args.workers > 1 else "vsr-fast: serving on"
        router = Proc(["-m", "vsr_fast", "serve", "--config", config, "--port", "0" if args.workers == 1 else
                       str(_free_port()), "--workers", str(args.workers)], ready,
                      env={"VSR_STATE_DIR": work}).start(timeout=60)
        try:
            deadline = time.monotonic() + 60
            while sum("vsr-fast: serving on" in line for line in router.lines) < args.workers:
                assert time.monotonic() < deadline, router.lines
                time.sleep(0.05)
            assert router.popen is not None
            pids = children(router.popen.pid) if args.workers > 1 else [router.popen.pid]
            url = router.url
            out = trio.run(drive, url, pids, args.requests, args.phase, args.warmup)
        finally:
            router.stop()
            shutil.rmtree(work, ignore_errors=True)
    print(f"soak: workers {args.workers}: {out['requests']} requests in {out['seconds']:.0f} s, "
          f"errors {out['errors']} {out['error_kinds'] or ''}; RSS {out['rss_start_mib']:.1f} MiB at start, "
          f"{out['rss_warm_mib']:.1f} after {args.warmup} (warm-up), {out['rss_end_mib']:.1f} at the end; growth after "
          f"warm-up {out['slope_mib_per_10k']:+.2f} MiB per 10,000 requests (least squares), "
          f"{out['end_minus_warm_mib_per_10k']:+.2f} (last minus first)", flush=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    main()
