"""Fault test: the Redis behind the event stream stops mid-load and comes back.

Every request is answered meanwhile, and every event of every request reaches
the stream exactly once (the writer spills while Redis is down and re-sends).
"""
from __future__ import annotations

import time
from collections import Counter

import httpx
import redis

from vsr_fast.events.types import decode_event

from .procs import router, write_config
from .test_events_fixtures import own_redis  # noqa: F401


def test_redis_down_mid_load_loses_and_duplicates_nothing(mock, tmp_path, own_redis):
    # own_redis fails the test when redis-server is missing: make test guarantees one, so never a skip.
    port = own_redis.port
    stream = "vsr-fault:events"
    doc = {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"stores": {"event_stream": {"backend": "redis", "url": f"redis://127.0.0.1:{port}/0?socket_timeout=0.5",
                                               "stream": stream, "queue": 64, "batch": 16}}},
    }
    statuses: list[int] = []
    with router(write_config(doc, str(tmp_path))) as proc, httpx.Client(timeout=10) as client:
        def burst(n: int) -> None:
            for i in range(n):
                r = client.post(f"{proc.url}/v1/chat/completions",
                                json={"model": "auto", "messages": [{"role": "user", "content": f"hello {i}"}]})
                statuses.append(r.status_code)

        burst(60)
        own_redis.shutdown_saving()   # Redis goes away mid-load
        burst(80)                     # more events than the queue holds: they spill
        own_redis.start()
        burst(60)
        total = 200
        r = redis.Redis(port=port)
        deadline = time.monotonic() + 20
        events = []
        while time.monotonic() < deadline:
            events = [decode_event(fields[b"e"]) if b"e" in fields else decode_event(next(iter(fields.values())))
                      for _, fields in r.xrange(stream)]
            if len({e.replay_id for e in events}) >= total and len(events) >= total * 5:
                break
            time.sleep(0.2)
        metrics = httpx.get(f"{proc.url}/metrics").text
    assert statuses == [200] * 200, "the router answered every request while Redis was down"
    per_request = Counter(e.replay_id for e in events)
    assert len(per_request) == 200, "\n".join(line for line in metrics.splitlines() if line.startswith("vsr_events"))
    assert set(per_request.values()) == {5}, "five events a request"
    keys = Counter((e.replay_id, e.seq) for e in events)
    assert max(keys.values()) == 1, "no event twice"
    assert "vsr_events_spilled_total" in metrics
    spilled = next(line for line in metrics.splitlines() if line.startswith("vsr_events_spilled_total"))
    assert float(spilled.split()[-1]) > 0, "the outage made the writer spill"
