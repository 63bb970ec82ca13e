"""The stream's keys vanish under a running router (DEL, FLUSHDB): every consumer starts over, serving never stops."""
from __future__ import annotations

import httpx
import redis

from .procs import mock_upstream, router, wait_until, write_config
from .test_events_fixtures import own_redis  # noqa: F401

def test_deleting_the_stream_or_flushing_its_redis_never_stops_the_router(mock, tmp_path, own_redis):
    url = f"redis://127.0.0.1:{own_redis.port}/0"
    stream = "X:events"
    with mock_upstream() as cand:
        doc = {
            "version": "v0.5",
            "providers": {"models": [
                {"name": "live", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
                {"name": "cand", "backend_refs": [{"endpoint": f"{cand.url}/v1"}]}]},
            "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "live"}]}]}],
            "global": {"plugins": [{"type": "router_replay", "configuration": {"shadow": {"model": "cand",
                                                                                          "sample_rate": 1.0}}},
                                   {"type": "response_cache", "configuration": {"ttl_seconds": 60}}],
                       "stores": {"event_stream": {"backend": "redis", "url": url, "stream": stream},
                                  "response_cache": {"backend_type": "redis", "url": url, "prefix": "X:cache:"}}},
        }
        r = redis.Redis(port=own_redis.port)
        with router(write_config(doc, str(tmp_path))) as proc, httpx.Client(timeout=20) as client:
            def served_and_recorded(text: str) -> None:
                resp = client.post(f"{proc.url}/v1/chat/completions",
                                   json={"model": "auto", "messages": [{"role": "user", "content": text}]})
                assert resp.status_code == 200
                rid = resp.headers["x-vsr-replay-id"]
                wait_until(lambda: client.get(f"{proc.url}/api/v1/replay/{rid}").status_code == 200,
                           f"the recorder recording {text!r}")

            served_and_recorded("first")
            wait_until(lambda: httpx.get(f"{cand.url}/_mock/stats").json()["requests"] >= 1, "the shadow copy")
            def recreated() -> int:
                return sum("created again" in line for line in list(proc.lines))

            for wipe in (lambda: r.delete(stream), r.flushdb):
                seen = recreated()
                wipe()
                # The readers blocked on the stream come back with an error and create their groups again.
                wait_until(lambda: recreated() > seen, "a consumer group created again")
                assert proc.popen.poll() is None, "the router is still running:\n" + "\n".join(proc.lines[-30:])
                before = httpx.get(f"{cand.url}/_mock/stats").json()["requests"]
                served_and_recorded(f"after the wipe {wipe}")
                wait_until(lambda: httpx.get(f"{cand.url}/_mock/stats").json()["requests"] > before,
                           "the shadow dispatcher reading the new stream")
            assert proc.popen.poll() is None
        r.close()
