"""The response cache's Redis hung or gone: each lookup is a miss within the store's lookup_timeout_ms, and after
a few in a row the cache stops asking until a cool-down passes (a breaker), so a hung Redis costs requests
nothing more than a miss."""
from __future__ import annotations

import msgspec
import pytest

from vsr_fast.config.stores import ResponseCacheStore
from vsr_fast.events.cache_store import ResponseCache
from vsr_fast.plugins.response_cache import CachedAnswer

from .test_events_fixtures import own_redis  # noqa: F401

ANSWER = CachedAnswer(status=200, content_type="application/json", body=b"{}", streamed=False, model="m",
                      guard="passed", stored_ms=0)


def test_a_hung_redis_is_a_bounded_miss_then_skipped_until_it_answers(own_redis):
    store = ResponseCacheStore(backend_type="redis", url=own_redis.url, prefix="vsr-test:outage:",
                               lookup_timeout_ms=100)
    cache = ResponseCache(store)
    try:
        cache.put_many_sync([("k", ANSWER, 60)])
        assert cache.get_sync("k") == ANSWER
        own_redis.pause()
        assert [cache.get_sync("k") for _ in range(10)] == [None] * 10
        # Three lookups waited (each 0.1 s, the configured bound, not the old fixed 2 s), then the breaker
        # answered the other seven without asking.
        assert (cache.breaker.failures_in_a_row, cache.breaker.skipped) == (3, 7)
        assert cache.lookup_client.connection_pool.connection_kwargs["socket_timeout"] == 0.1
        own_redis.resume()
        cache.breaker.open_until = 0.0          # the cool-down over: the next lookup asks again
        assert cache.get_sync("k") == ANSWER
        assert cache.breaker.failures_in_a_row == 0
    finally:
        own_redis.resume()
        cache.close()


def test_lookup_timeout_is_bounded_in_the_config():
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"lookup_timeout_ms": 0}, ResponseCacheStore)
    assert msgspec.convert({}, ResponseCacheStore).lookup_timeout_ms == 250
