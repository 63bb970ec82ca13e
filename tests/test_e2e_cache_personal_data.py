"""End to end, a real router, real Redis and the mock upstream: the response cache under router_replay's
``capture_personal_data: false`` (spec 5.7 router_replay, response_cache).

Under that setting neither the event stream nor the cache store holds the request's text: the cache keeps the
answer under its hashed key, written by the router itself (never through the stream), and no semantic entry, so
the same request is still served from the cache and a paraphrase is not. Where capture is allowed the semantic
cache keeps the text and serves the paraphrase: the same check finds it there.
"""
from __future__ import annotations

import uuid

import httpx
import pytest
import redis

from .procs import REDIS_URL, redis_prefix, router, wait_until, write_config
from .test_e2e_semantic_cache import ask, metric

SECRET = "alice.private@example.com"
ASKED = f"How do I reverse a list in Python? My email is {SECRET}"
PARAPHRASE = f"How can I reverse a list in python? My email is {SECRET}"


def config(mock_url: str, *, prefix: str, stream: str | None, capture: bool) -> dict:
    replay = {"capture_request_body": True, "capture_response_body": True}
    if not capture:
        replay["capture_personal_data"] = False
    return {
        "version": "v0.5",
        "listeners": [{"name": "main", "identity": {"trust_headers": True}}],
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}],
                                                 "plugins": [{"type": "router_replay", "configuration": replay}]}]}],
        "global": {"plugins": [{"type": "response_cache",
                                "configuration": {"mode": "exact_then_semantic", "ttl_seconds": 300}}],
                   "stores": {"event_stream": {"backend": "redis", "stream": stream} if stream else {"backend": "none"},
                              "response_cache": {"backend_type": "redis", "prefix": prefix}}},
    }


def held(r: redis.Redis, pattern: str) -> bytes:
    """Every byte Redis holds under the keys ``pattern`` matches: stream entries, hashes, strings, sets."""
    out = []
    for key in r.scan_iter(match=pattern):
        kind = r.type(key)
        if kind == b"stream":
            out += [k + v for _, fields in r.xrange(key) for k, v in fields.items()]
        elif kind == b"hash":
            out += [k + v for k, v in r.hgetall(key).items()]
        elif kind == b"string":
            out.append(r.get(key) or b"")
        elif kind == b"zset":
            out += [m for m, _ in r.zrange(key, 0, -1, withscores=True)]
        elif kind in (b"set", b"list"):
            out += list(r.smembers(key) if kind == b"set" else r.lrange(key, 0, -1))
        out.append(key)
    return b"\n".join(out)


@pytest.mark.parametrize("events", [True, False], ids=["redis_stream", "no_stream"])
@pytest.mark.parametrize("capture", [False, True], ids=["personal_data_refused", "capture_allowed"])
def test_the_stream_and_the_cache_store_hold_no_request_text_under_capture_personal_data_false(
        mock, tmp_path, events, capture):
    stream = f"vsr-test:{uuid.uuid4().hex}:events" if events else None
    r = redis.Redis.from_url(REDIS_URL)
    with redis_prefix("cache-pd") as prefix, \
            router(write_config(config(mock.url, prefix=prefix, stream=stream, capture=capture),
                                str(tmp_path))) as proc:
        try:
            first = ask(proc.url, ASKED)
            assert first["x-vsr-response-path"] == "upstream"
            wait_until(lambda: metric(proc.url, "llm_cache_writes_total") >= 1, "the answer stored")
            assert ask(proc.url, ASKED)["x-vsr-response-path"] == "cache", "the same request: an exact hit"
            assert ask(proc.url, PARAPHRASE)["x-vsr-response-path"] == ("cache" if capture else "upstream")
            if events:
                # The first request's record is whole (its answer and the cache writer's note): the stream has
                # carried every event of it.
                def written() -> bool:
                    got = httpx.get(f"{proc.url}/api/v1/replay/{first['x-vsr-replay-id']}")
                    return got.status_code == 200 and (got.json().get("cache") or {}).get("stored") is True
                wait_until(written, "the first request's record, with its cache write")
            stored = held(r, f"{prefix}*")
            streamed = held(r, f"{stream}*") if events else b""
            assert stored, "the cache store holds the answer"
            assert (SECRET.encode() in stored) is capture, "the semantic entry keeps the text only where allowed"
            if events:
                assert (SECRET.encode() in streamed) is capture
        finally:
            if stream:
                for key in r.scan_iter(match=f"{stream}*"):
                    r.delete(key)
    r.close()
