"""What a large request body costs the event loop (issue 13: "a 48 MB message stalls the loop 0.8 s").

``python -m bench.big_body``: for Chat bodies of growing size (one long user turn, and the same size in
200-byte turns), the decode's time and the trio loop's longest gap while it runs on the loop and while it
runs in a worker thread (``trio.to_thread``), then the route stage on config/quickstart.yaml (signals, the
embedded decision model, its scan windows) with its own longest gap. A ticker task sleeping 1 ms measures
the gaps: what every other request on the loop waits.

The question it answers: above what size is a worker thread worth it for the decode? The answer it found
(bench/RESULTS.md): at none, since msgspec holds the GIL for the whole decode, so the loop waits as long
either way; what stalls the loop for a large body is the route stage.
"""
from __future__ import annotations

import json
import time

import trio

from vsr_fast.config.stores import ResponsesStore
from vsr_fast.protocol.adapters import make_adapters
from vsr_fast.routing import load_file
from vsr_fast.routing.open_systemone import open_systemone
from vsr_fast.server.response_store import response_store
from vsr_fast.signals.base import ANONYMOUS

from ._procs import ROOT

SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 48 << 20]
SENTENCE = "How do I reverse a linked list in Python? "


def bodies(size: int) -> dict[str, bytes]:
    one = {"model": "vsr/auto", "messages": [{"role": "user", "content": SENTENCE * (size // len(SENTENCE))}]}
    turns = [{"role": ("user", "assistant")[i % 2], "content": SENTENCE * 4} for i in range(size // 200)]
    return {"one turn": json.dumps(one).encode(), "200 B turns": json.dumps({"model": "vsr/auto",
                                                                            "messages": turns}).encode()}


async def longest_gap(work) -> tuple[float, float]:
    """``(seconds work took, the loop's longest gap meanwhile)``."""
    gaps: list[float] = []
    done = False

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await trio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        await trio.sleep(0.01)
        started = time.perf_counter()
        await work()
        took = time.perf_counter() - started
        await trio.sleep(0.005)
        done = True
    return took, max(gaps)


async def main() -> None:
    loaded = load_file(str(ROOT / "config" / "quickstart.yaml"))
    chat = make_adapters(response_store(ResponsesStore()))["chat"]
    async with open_systemone(loaded) as client:
        asker = loaded.table.asker(client)
        warm = chat.decode(bodies(1 << 10)["one turn"])
        await loaded.table.route("vsr/auto", lambda: chat.canonical(warm, ANONYMOUS), asker)
        print("| body | shape | decode ms | loop gap, decode on the loop | loop gap, decode in a thread | "
              "route ms | loop gap, route |")
        print("|---|---|---|---|---|---|---|")
        for size in SIZES:
            for shape, raw in bodies(size).items():
                async def inline() -> None:
                    chat.decode(raw)

                async def threaded() -> None:
                    await trio.to_thread.run_sync(chat.decode, raw)

                req = chat.decode(raw)

                async def route() -> None:
                    await loaded.table.route("vsr/auto", lambda: chat.canonical(req, ANONYMOUS), asker)

                took, gap_inline = await longest_gap(inline)
                _, gap_thread = await longest_gap(threaded)
                routed, gap_route = await longest_gap(route)
                print(f"| {len(raw) / 2**20:.2f} MiB | {shape} | {took * 1e3:.1f} | {gap_inline * 1e3:.1f} | "
                      f"{gap_thread * 1e3:.1f} | {routed * 1e3:.0f} | {gap_route * 1e3:.0f} |", flush=True)


if __name__ == "__main__":
    trio.run(main)
