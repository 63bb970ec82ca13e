"""The router's added cost per System One call: merge, encode, decode, outcomes.

Two figures, measured in one run against the fake System One at zero latency:
- in process: the client's work for one request-stage call (plan the merged
  call, encode the body, decode the answer bytes, map answers to outcomes),
  with the network replaced by pre-encoded answer bytes;
- over HTTP: the whole request stage through the client against the fake,
  minus a bare httpx POST of the same body to the same fake (the wire floor).
"""
from __future__ import annotations

import statistics
import time

import httpx
import trio

from bench.fake_systemone import process as fake_process
from vsr_fast.routing import load_raw
from vsr_fast.protocol import systemone as wire
from vsr_fast.protocol.chat import Message
from vsr_fast.signals.base import CanonicalRequest
from vsr_fast.systemone.client import SystemOneClient
from vsr_fast.systemone.deployments import Remote, _decode

TEXT = "Prove that the square root of 2 is irrational, and explain each step for a student. " * 20


def config(url: str) -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9"}]}]},
        "global": {"model_catalog": {"deployments": {"s1": {
            "provider": "systemone", "endpoint": f"{url}/v1/systemone", "timeout_ms": 5000,
            "capabilities": {"question_types": ["choice", "noul", "score", "set", "span"]}}},
            "system": {"decision_model": {"deployment": "s1"}}}},
        "recipes": [{"name": "r", "signals": {
            "domains": [{"name": "math"}], "jailbreak": [{"name": "attack"}], "complexity": [{"name": "difficulty"}],
            "systemone": [{"name": "needs_tools", "question": {"type": "noul", "instructions": "Needs a tool?"}}]},
            "decisions": [{"name": "d", "modelRefs": [{"model": "m"}], "rules": {"operator": "AND", "conditions": [
                {"type": "domain", "name": "math"}, {"type": "jailbreak", "name": "attack"},
                {"type": "complexity", "name": "difficulty", "label": "hard"}, {"type": "systemone", "name": "needs_tools"}]}}],
            "fallback": {"modelRefs": [{"model": "m"}]}}],
    }


class Canned:
    """A runner whose 'network' returns fixed answer bytes: what is left is the client's own work."""

    kind, local = "remote", False

    def __init__(self, answer_bytes: bytes) -> None:
        self.answer_bytes = answer_bytes

    async def call(self, body):
        wire.ENCODER.encode(body)
        return await _decode("canned", body, self.answer_bytes, False)

    async def aclose(self):
        return None


def pct(samples: list[float], q: int) -> float:
    return statistics.quantiles(sorted(samples), n=100)[q - 1]


async def main() -> None:
    with fake_process() as fake:
        loaded = load_raw(config(fake.url))
        table = loaded.table
        request = CanonicalRequest([Message(role="user", content=TEXT)])
        remote = Remote("s1", table.deployments["s1"])
        http_client = SystemOneClient({"s1": remote}, "bench")
        http_asker = table.asker(http_client)
        # One real answer, to can it.
        route = await table.route("x", lambda: request, http_asker)
        asked = table.recipes["r"].learned.asked()
        body = wire.StandardRequest(state=wire.State(request=TEXT), questions={s.wire_id: q for s, q in asked.items()})
        payload = wire.ENCODER.encode(body)
        answer_bytes = httpx.post(f"{fake.url}/v1/systemone", content=payload).content
        canned = table.asker(SystemOneClient({"s1": Canned(answer_bytes)}, "bench"))

        n = 3000
        inproc, via_http, bare = [], [], []
        for i in range(n):
            canned.client.caches["s1"]._items.clear()
            t = time.perf_counter_ns()
            await table.route("x", lambda: request, canned)
            inproc.append((time.perf_counter_ns() - t) / 1000)
        raw_client = httpx.AsyncClient(trust_env=False)
        for i in range(n // 3):
            http_client.caches["s1"]._items.clear()
            t = time.perf_counter_ns()
            await table.route("x", lambda: request, http_asker)
            via_http.append((time.perf_counter_ns() - t) / 1000)
            t = time.perf_counter_ns()
            r = await raw_client.post(remote.url, content=payload, headers={"content-type": "application/json"})
            r.content
            bare.append((time.perf_counter_ns() - t) / 1000)
        await raw_client.aclose()
        await http_client.aclose()
        print(f"request stage of 4 rules (domain, jailbreak, complexity, systemone) on a {len(TEXT)} B turn; "
              f"route: {route.decision}\n")
        print("| what | p50 µs | p90 µs | p99 µs |")
        print("|---|---|---|---|")
        print(f"| in process: signals + merge + encode + decode + outcomes + decision | {pct(inproc, 50):.1f} | {pct(inproc, 90):.1f} | {pct(inproc, 99):.1f} |")
        print(f"| over HTTP to the fake (whole request stage) | {pct(via_http, 50):.1f} | {pct(via_http, 90):.1f} | {pct(via_http, 99):.1f} |")
        print(f"| bare httpx POST of the same body (the floor) | {pct(bare, 50):.1f} | {pct(bare, 90):.1f} | {pct(bare, 99):.1f} |")
        print(f"| added by the router over HTTP (p50 difference) | {pct(via_http, 50) - pct(bare, 50):.1f} | | |")


if __name__ == "__main__":
    trio.run(main)
