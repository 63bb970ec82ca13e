"""The routing cost alone: signals plus decision for a 2 KB request on the 12-decision example recipe.

Runs the same code as ``POST /api/v1/routing/preview`` and the hot path
(decode, canonical request, every read signal, projections, decisions) in
process, so the figure excludes HTTP. Prints p50/p90/p99 in microseconds per
request shape.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import msgspec
import trio

from vsr_fast.routing import load_file
from vsr_fast.server.route import decode_chat, route_chat
from vsr_fast.signals.base import ANONYMOUS

ROOT = Path(__file__).resolve().parent.parent
FILLER = ("The deployment pipeline builds each service, runs its checks and publishes an image; "
          "operators then promote the image through staging to production. ")


def body(text: str, **extra) -> bytes:
    """A Chat Completions body of about 2 KB around ``text``."""
    pad = (FILLER * (2048 // len(FILLER) + 1))[: max(0, 2048 - len(text))]
    return msgspec.json.encode({"model": "vsr/auto", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": pad + " " + text}], **extra})


SHAPES = {
    "english, no match (fallback)": body("Write a short poem about the sea."),
    "code keywords": body("Please refactor this python function and debug the stack trace."),
    "chinese": msgspec.json.encode({"model": "vsr/auto", "messages": [
        {"role": "user", "content": "请帮我写一首关于秋天的诗，描写落叶和夕阳的景色。" * 30}]}),
    "many questions": body("Why? How? When? Where?"),
}


async def measure(table, raw: bytes, n: int) -> list[float]:
    """Microseconds per decode + route, n times."""
    out = []
    for _ in range(n):
        started = time.perf_counter_ns()
        request = decode_chat(raw)
        await route_chat(table, request, lambda: ANONYMOUS)
        out.append((time.perf_counter_ns() - started) / 1000)
    return out


async def run(table, n: int) -> None:
    print("| request | route | p50 µs | p90 µs | p99 µs |")
    print("|---|---|---|---|---|")
    for label, raw in SHAPES.items():
        await measure(table, raw, 200)  # warm caches and the language model
        samples = sorted(await measure(table, raw, n))
        route = await route_chat(table, decode_chat(raw), lambda: ANONYMOUS)
        q = statistics.quantiles(samples, n=100)
        print(f"| {label} ({len(raw)} B) | {route.decision or 'fallback'} | {q[49]:.1f} | {q[89]:.1f} | {q[98]:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.routing", description=__doc__)
    parser.add_argument("--config", default=str(ROOT / "config" / "examples" / "heuristics.yaml"))
    parser.add_argument("-n", type=int, default=5000)
    args = parser.parse_args(argv)
    loaded = load_file(args.config)
    table = loaded.table
    decisions = len(next(iter(table.recipes.values())).recipe.decisions)
    print(f"{decisions} decisions, {args.n} requests per shape, bodies of ~2 KB\n")
    trio.run(run, table, args.n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
