"""The Redis stream's consumer groups after a loss: a lost group does not replay the stream; a bad command shows."""
from __future__ import annotations

import logging

import pytest
import redis

from vsr_fast.events.redis_stream import RedisSource
from vsr_fast.events.source import StoreUnavailable

from .test_events_fixtures import REDIS_URL, r, stream_name  # noqa: F401


def _add(r: redis.Redis, stream: str, n: int, first: int = 0) -> list[str]:
    return [r.xadd(stream, {"e": f"event {first + i}"}).decode() for i in range(n)]


def _drain(source: RedisSource, group: str = "g") -> list[str]:
    got: list[str] = []
    while entries := source.read(group, "c", 100, 0):
        source.ack(group, [e.id for e in entries])
        got += [e.id for e in entries]
    return got


def test_a_destroyed_group_on_a_stream_that_still_holds_events_resumes_after_what_it_delivered(r, stream_name):
    source = RedisSource(REDIS_URL, stream_name)
    ids = _add(r, stream_name, 5)
    source.ensure_group("g")
    assert _drain(source) == ids
    r.xgroup_destroy(stream_name, "g")
    later = _add(r, stream_name, 3, first=5)
    assert source.read("g", "c", 100, 0) == [], "the read that met NOGROUP creates the group again"
    assert _drain(source) == later, "the days of events it had delivered are not sent again"
    source.close()


def test_a_destroyed_group_a_fresh_consumer_never_read_from_starts_at_the_streams_end(r, stream_name):
    _add(r, stream_name, 5)
    RedisSource(REDIS_URL, stream_name).ensure_group("g")
    r.xgroup_destroy(stream_name, "g")
    source = RedisSource(REDIS_URL, stream_name)
    assert source.read("g", "c", 100, 0) == []
    later = _add(r, stream_name, 2, first=5)
    assert _drain(source) == later
    source.close()


def test_a_deleted_stream_starts_over_from_its_first_new_event(r, stream_name):
    source = RedisSource(REDIS_URL, stream_name)
    source.ensure_group("g")
    _add(r, stream_name, 3)
    _drain(source)
    r.delete(stream_name)
    assert source.read("g", "c", 100, 0) == []
    fresh = _add(r, stream_name, 2, first=3)
    assert _drain(source) == fresh
    source.close()


def test_a_refused_command_is_logged_with_redis_words_and_a_store_away_is_not(r, stream_name, caplog):
    source = RedisSource(REDIS_URL, stream_name)
    source.ensure_group("g")
    with caplog.at_level(logging.ERROR, "vsr_fast.events"):
        for _ in range(3):
            with pytest.raises(StoreUnavailable):       # retried, as a background worker must not stop
                source.ack("g", ["not-an-id"])          # a bad argument: a bug of ours, not Redis being away
    refused = [rec.getMessage() for rec in caplog.records if "refused" in rec.getMessage()]
    assert len(refused) == 1 and "Invalid stream ID" in refused[0], refused
    caplog.clear()
    r.delete(stream_name)
    r.set(stream_name, "a string")
    with caplog.at_level(logging.ERROR, "vsr_fast.events"), pytest.raises(StoreUnavailable, match="WRONGTYPE"):
        source.read("g", "c", 10, 0)         # another key under the stream's name: an operator's fix, waited for
    assert not [rec for rec in caplog.records if "refused" in rec.getMessage()]
    source.close()
