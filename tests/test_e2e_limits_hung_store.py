"""A Redis that hangs (SIGSTOP: it accepts bytes and answers nothing) costs the requests of one key at most one
store timeout between them: real routers, a redis-server of our own, the bench mock.

Requests waiting for the same scope's lease share that one call's outcome instead of each asking the hung store
in turn (each ask held the limiter's single worker thread for a socket timeout, so 8 parallel requests took 1, 2
... 8 s); once a call timed out the router decides locally until a background probe answers, so no later request
asks the hung store either. Counted by the router's own word: it says "deciding locally" each time a call to the
store timed out after the store had been marked up again.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import redis

from .procs import router, wait_until, write_config
from .test_e2e_auth import auth_doc, sha
from .test_events_fixtures import own_redis  # noqa: F401

KEY = "vsk-hung-" + "h" * 32
BODY = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}


def test_a_hung_store_is_asked_once_for_requests_of_one_key(mock, tmp_path, own_redis):
    store = {"backend": "redis", "url": own_redis.url, "prefix": "vsr-test-hung:"}
    doc = auth_doc(mock.url, store=store, keys=[{"id": "hung", "sha256": sha(KEY),
                                                  "limits": {"rpm": 40, "concurrent": 10}}])
    with router(write_config(doc, str(tmp_path))) as proc:
        def send(_: int = 0) -> int:
            return httpx.post(f"{proc.url}/v1/chat/completions", json=BODY,
                              headers={"authorization": f"Bearer {KEY}"}, timeout=60).status_code

        assert send() == 200
        r = redis.Redis.from_url(own_redis.url)
        wait_until(lambda: r.zcard("vsr-test-hung:limit:key:hung:inflight") == 0, "the idle place to go back")
        own_redis.pause()
        try:
            with ThreadPoolExecutor(8) as pool:
                parallel = list(pool.map(send, range(8)))
            sequential = [send() for _ in range(10)]
        finally:
            own_redis.resume()
        assert parallel == [200] * 8 and sequential == [200] * 10, "decided locally, under the limits"
        # One timed-out call (the first request's, which the other seven waited for), none after it: no request
        # asks the store until a probe found it again.
        assert sum("deciding locally" in line for line in proc.lines) == 1, proc.lines
        wait_until(lambda: any("answers again" in line for line in proc.lines), "the probe to find the store")
        assert send() == 200
        r.close()


BUDGET_KEY = "vsk-lost-" + "l" * 32


def test_a_budget_spent_before_redis_lost_its_data_is_spent_after(mock, tmp_path, own_redis):
    """Redis restarts empty (no RDB, no AOF): the router that charged the budget this period puts its share back,
    so the budget is not admitted a second time."""
    prefix = "vsr-test-lost:"
    store = {"backend": "redis", "url": own_redis.url, "prefix": prefix}
    doc = auth_doc(mock.url, store=store, keys=[{"id": "lost", "sha256": sha(BUDGET_KEY),
                                                  "limits": {"budget": {"tokens": 100_000, "period": "day"}}}])
    with router(write_config(doc, str(tmp_path))) as proc:
        def send() -> httpx.Response:
            return httpx.post(f"{proc.url}/v1/chat/completions", json=BODY,
                              headers={"authorization": f"Bearer {BUDGET_KEY}"}, timeout=60)

        spent = sum(send().json()["usage"]["total_tokens"] for _ in range(3))

        def used() -> int:
            r = redis.Redis.from_url(own_redis.url)
            try:
                return sum(int(v) for k in r.scan_iter(match=f"{prefix}limit:key:lost:spent:*") for v in r.hvals(k))
            except redis.ConnectionError:
                return -1
            finally:
                r.close()

        wait_until(lambda: used() == spent, "the budget's tokens to reach Redis")
        own_redis.kill()
        own_redis.start()           # the same port, nothing kept
        assert used() == 0
        wait_until(lambda: used() == spent, "the router to put its share of the budget back")
        more = send().json()["usage"]["total_tokens"]
        wait_until(lambda: used() == spent + more, "new charges on top of it")
