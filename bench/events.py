"""The event stream: what ``record()`` costs the request path, and how many events/s reach the store.

    .venv/bin/python -m bench.events [--redis redis://127.0.0.1:6379/0] [--events 300000]

Prints a Markdown table. Enqueue rows time each ``record()`` call alone
(``perf_counter_ns`` around it; the clock's own cost, ~60 ns here, is
included) while the writer thread drains to Redis, so the figures include the
GIL hand-offs a real router sees. "record()" is what the request path calls:
encode once (msgpack) and append; "record_encoded()" is the append alone.
Throughput rows record as fast as one thread can and count events/s until
the store holds the last one (queue bound raised so nothing spills). Goals:
p99 < 5 µs per record(), ≥ 50,000 events/s to Redis. Takes about 20 s and
deletes its stream afterwards.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
import uuid

import redis

from vsr_fast.events.embedded import EmbeddedLog
from vsr_fast.events.redis_stream import RedisTransport
from vsr_fast.events.types import (
    AnswerCompleted,
    DecisionChosen,
    DecisionVerdict,
    SignalReading,
    SignalsEvaluated,
    Usage,
    encode_event,
    new_replay_id,
)
from vsr_fast.events.writer import EventSink

GOAL_P99_NS = 5_000
GOAL_RATE = 50_000


def sample_events(n: int) -> list:
    """A realistic mix: per request, its signals, its decision and its answer."""
    out = []
    for i in range(n // 3 + 1):
        common = {"replay_id": new_replay_id(), "request_id": f"req-{i}", "session_id": None, "recipe": "default",
                  "config_version": "3f2a9c1d0b7e6a55", "ts_ms": 1_760_000_000_000 + i}
        out.append(SignalsEvaluated(**common, seq=1, readings=[
            SignalReading(type="keyword", name="code", matched=True, value=2.0),
            SignalReading(type="context", name="long", matched=False, value=812.0)],
            timings_us={"keyword": 41.5, "context": 3.1}, total_us=44.6))
        out.append(DecisionChosen(**common, seq=2, decision="code", model="code-model",
                                  candidates=["code-model", "general-model"], why="highest priority 20 of 2 matching",
                                  verdicts=[DecisionVerdict(name="code", value=True, matched=True, priority=20),
                                            DecisionVerdict(name="general", value=True, matched=True)]))
        out.append(AnswerCompleted(**common, seq=3, status=200, model="code-model", finish_reason="stop",
                                   usage=Usage(prompt_tokens=412, completion_tokens=188, total_tokens=600),
                                   duration_ms=812.5, ttfb_ms=95.1))
    return out[:n]


def percentile(sorted_ns: list[int], q: float) -> int:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))]


def time_calls(fn, items: list, pace_every: int = 64, pace_s: float = 0.0) -> list[int]:
    """ns per call of ``fn(item)``, each timed alone."""
    clock = time.perf_counter_ns
    out = [0] * len(items)
    gc.disable()
    try:
        for i, item in enumerate(items):
            t0 = clock()
            fn(item)
            out[i] = clock() - t0
            if pace_s and i % pace_every == pace_every - 1:
                time.sleep(pace_s)     # a server's pace, so the writer keeps up and nothing spills
    finally:
        gc.enable()
    return sorted(out)


def throughput(sink: EventSink, payloads: list[bytes]) -> float:
    started = time.perf_counter()
    for p in payloads:
        sink.record_encoded(p)
    if not sink.wait_drained(120):
        raise RuntimeError("the writer did not drain within 120 s")
    return len(payloads) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--events", type=int, default=300_000, help="events per throughput run")
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args(argv)
    stream = f"vsrbench:events:{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(args.redis)
    client.ping()
    events = sample_events(100_000)
    payloads = [encode_event(e) for e in events]
    rows = []
    try:
        with tempfile.TemporaryDirectory() as spill:
            sink = EventSink(RedisTransport(args.redis, stream, maxlen=None), spill, queue=1 << 22,
                             batch=args.batch).start()
            time_calls(sink.record, events[:20_000])                       # warm-up
            sink.wait_drained(60)
            for name, fn, items in (("record() (encode + enqueue)", sink.record, events),
                                    ("record_encoded() (enqueue only)", sink.record_encoded, payloads)):
                ns = time_calls(fn, items, pace_s=0.0005)
                rows.append((f"enqueue: {name}, writer draining to Redis", percentile(ns, 0.5),
                             percentile(ns, 0.99), percentile(ns, 0.999), None))
                sink.wait_drained(60)
            many = (payloads * (args.events // len(payloads) + 1))[:args.events]
            rate = throughput(sink, many)
            rows.append((f"throughput to Redis ({len(many):,} events, batch {args.batch})", None, None, None, rate))
            spilled = sink.stats.spilled
            sink.close()
            assert spilled == 0 and sum(sink.stats.lost.values()) == 0
        with tempfile.TemporaryDirectory() as d:
            log = EmbeddedLog(os.path.join(d, "stream"))
            sink = EventSink(log, os.path.join(d, "spill"), queue=1 << 22, batch=args.batch).start()
            rate = throughput(sink, many)
            rows.append((f"throughput to the embedded journal ({len(many):,} events)", None, None, None, rate))
            sink.close()
        on_stream = client.xlen(stream)
    finally:
        keys = list(client.scan_iter(f"{stream}*"))
        if keys:
            client.delete(*keys)
    print(f"Event stream, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
          f"{on_stream:,} events on the Redis stream, each once\n")
    print("| measure | p50 ns | p99 ns | p99.9 ns | events/s | goal |")
    print("|---|---:|---:|---:|---:|---|")
    for name, p50, p99, p999, rate in rows:
        if rate is None:
            goal = f"p99 < {GOAL_P99_NS:,} ns: {'met' if p99 < GOAL_P99_NS else 'MISSED'}"
            print(f"| {name} | {p50:,} | {p99:,} | {p999:,} | | {goal} |")
        else:
            goal = (f"≥ {GOAL_RATE:,}/s: {'met' if rate >= GOAL_RATE else 'MISSED'}" if "Redis" in name else "")
            print(f"| {name} | | | | {rate:,.0f} | {goal} |")
    print(f"\nmedian of per-call clock reads: {statistics.median(time_calls(lambda _: None, [0] * 10_000))} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
