"""The writer: order, exactly once, spilling when the store is down, re-sending when it returns."""
from __future__ import annotations

import os
import threading
import zlib

import msgspec
import pytest
import redis

from vsr_fast.events.embedded import EmbeddedLog
from vsr_fast.events.journal import Journal, pack, pack_many
from vsr_fast.events.redis_stream import RedisTransport
from vsr_fast.events.types import AnswerCompleted, decode_event, encode_event
from vsr_fast.events import writer
from vsr_fast.events.writer import EventSink, TransportDown

from .procs import wait_until
from .test_events_fixtures import REDIS_URL, own_redis, r, request_events, stream_name  # noqa: F401


def stream_events(client: redis.Redis, name: str) -> list:
    return [decode_event(fields[b"e"]) for _, fields in client.xrange(name)]


class FakeStore:
    """A transport with the store's contract (marks per space), that can be switched off."""

    def __init__(self) -> None:
        self.up = True
        self.entries: list[bytes] = []
        self.marks: dict[bytes, int] = {}
        self.calls = 0

    def send(self, items):
        self.calls += 1
        if not self.up:
            raise TransportDown("switched off")
        added = 0
        for space, index, payload in items:
            if index > self.marks.get(space, 0):
                self.entries.append(payload)
                self.marks[space] = index
                added += 1
        return added

    def close(self) -> None:
        pass


class MemorySwitch:
    """A FakeStore the test switches off and on: every transport is the same store."""

    def __init__(self) -> None:
        self.store = FakeStore()

    def transport(self) -> FakeStore:
        return self.store

    def down(self) -> None:
        self.store.up = False

    def up(self) -> None:
        self.store.up = True

    def entries(self) -> list[bytes]:
        return self.store.entries


class RedisSwitch:
    """A redis-server of our own, shut down and started again: the real store behind the same switch."""

    stream = "vsrtest:switch"

    def __init__(self, server) -> None:
        self.server = server

    def transport(self) -> RedisTransport:
        """A new transport, as a restarted router makes; short timeouts so a down store is seen at once."""
        return RedisTransport(f"{self.server.url}?socket_timeout=0.5&socket_connect_timeout=0.5", self.stream)

    def down(self) -> None:
        self.server.shutdown_saving()

    def up(self) -> None:
        self.server.start()

    def entries(self) -> list[bytes]:
        client = redis.Redis(port=self.server.port)
        try:
            return [fields[b"e"] for _, fields in client.xrange(self.stream)]
        finally:
            client.close()


@pytest.fixture(params=["memory", "redis"])
def switch(request):
    """A store to switch off and on: FakeStore in memory (fast), and a real redis-server."""
    if request.param == "memory":
        return MemorySwitch()
    return RedisSwitch(request.getfixturevalue("own_redis"))


def numbered(n: int, start: int = 0) -> list[bytes]:
    return [encode_event(AnswerCompleted(replay_id="r", seq=i)) for i in range(start, start + n)]


def test_the_events_of_each_request_arrive_in_order(r, stream_name, tmp_path):
    sink = EventSink(RedisTransport(REDIS_URL, stream_name), tmp_path, batch=64).start()
    requests = [request_events(f"req{i}", 5) for i in range(200)]
    for step in range(5):                       # interleaved, as concurrent requests record them
        for evs in requests:
            sink.record(evs[step])
    assert sink.wait_drained(10)
    sink.close()
    got = stream_events(r, stream_name)
    assert len(got) == 1000
    seqs: dict[str, list[int]] = {}
    for ev in got:
        seqs.setdefault(ev.replay_id, []).append(ev.seq)
    assert all(s == [0, 1, 2, 3, 4] for s in seqs.values()) and len(seqs) == 200
    assert (sink.stats.queued, sink.stats.sent, sink.stats.spilled, dict(sink.stats.lost)) == (1000, 1000, 0, {})
    assert "vsr_events_sent_total 1000" in sink.prometheus_lines()


def test_a_batch_sent_twice_lands_once(r, stream_name):
    transport = RedisTransport(REDIS_URL, stream_name)
    space = os.urandom(16)
    items = [(space, i, p) for i, p in enumerate(numbered(10), start=1)]
    assert transport.send(items) == 10
    assert transport.send(items) == 0             # the reply was lost: the same batch again
    assert transport.send(items[5:] + [(space, 11, numbered(1, 10)[0])]) == 1
    assert r.xlen(stream_name) == 11
    r.script_flush()                              # a restarted Redis forgets scripts: reloaded, not lost
    assert transport.send([(space, 12, numbered(1, 11)[0])]) == 1
    transport.close()


def test_past_the_queue_events_spill_and_are_resent_in_order_once(switch, tmp_path):
    sink = EventSink(switch.transport(), tmp_path, queue=16, batch=8, close_timeout_s=0.2).start()
    payloads = numbered(300)
    sink.record_encoded(payloads[0])
    assert sink.wait_drained(10)
    switch.down()
    for p in payloads[1:200]:
        sink.record_encoded(p)
    wait_until(lambda: sink.stats.failures >= 1, "the writer to fail and keep its batch")
    # The deque holds 16 and the writer's failing batch 8: the rest spilled.
    assert sink.stats.spilled >= 200 - 1 - 16 - 8
    switch.up()
    for p in payloads[200:]:                      # behind the spilled ones, even once the queue has room
        sink.record_encoded(p)
    assert sink.wait_drained(30)
    assert switch.entries() == payloads
    assert sink.stats.resent >= sink.stats.spilled and sum(sink.stats.lost.values()) == 0
    assert os.path.getsize(tmp_path / "spill.journal") == 0   # emptied once everything was re-sent
    switch.down()
    sink.record_encoded(payloads[0])
    sink.close()


def test_what_a_stopped_router_could_not_send_goes_first_at_the_next_start(switch, tmp_path):
    switch.down()
    first = EventSink(switch.transport(), tmp_path, queue=20, batch=8, close_timeout_s=0.2).start()
    payloads = numbered(100)
    for p in payloads[:50]:
        first.record_encoded(p)
    first.close()                                 # the queue and the batch in flight go to disk, in front
    first.record_encoded(payloads[0])
    assert first.stats.lost["closed"] == 1
    switch.up()
    second = EventSink(switch.transport(), tmp_path, queue=20, batch=8)
    for p in payloads[50:]:
        second.record_encoded(p)                  # recorded before the writer runs: queued behind the journal
    second.start()
    assert second.wait_drained(30)
    assert switch.entries() == payloads
    second.close()


def test_spill_max_bytes_bounds_the_journal_and_counts_what_it_refuses(switch, tmp_path):
    switch.down()
    payloads = [encode_event(AnswerCompleted(replay_id="r", seq=i, body=b"x" * 4000)) for i in range(600)]
    sink = EventSink(switch.transport(), tmp_path, queue=4, batch=2, spill_max_bytes=1 << 20,
                     close_timeout_s=0.2).start()
    for p in payloads:
        sink.record_encoded(p)
    lost = sink.stats.lost["spill_full"]
    # 600 events of ~4 KB: the deque and the failing batch take 6, the 1 MiB journal about 250; the
    # rest are lost, and counted.
    assert lost > 0 and sink.stats.queued + sink.stats.spilled + lost == len(payloads)
    assert os.path.getsize(tmp_path / "spill.journal") <= 1 << 20
    assert f'vsr_events_lost_total{{reason="spill_full"}} {lost}' in sink.prometheus_lines()
    switch.up()
    assert sink.wait_drained(30)
    sink.close()
    # Once full, every later event was lost: what reached the store is the head, in order.
    assert switch.entries() == payloads[:len(payloads) - lost]


def test_a_journal_resent_from_a_stale_offset_lands_once(r, stream_name, tmp_path):
    space = os.urandom(16)
    payloads = numbered(40)
    journal = Journal(tmp_path / "spill.journal")
    journal.append(b"".join(pack(space, i, p) for i, p in enumerate(payloads, start=1)))
    journal.close()
    transport = RedisTransport(REDIS_URL, stream_name)
    assert transport.send([(space, i, p) for i, p in enumerate(payloads[:25], start=1)]) == 25
    # ...and the process died before it saved the journal offset: the next start re-sends from 0.
    sink = EventSink(transport, tmp_path).start()
    assert sink.wait_drained(10)
    sink.close()
    assert [e.seq for e in stream_events(r, stream_name)] == list(range(40))
    assert (sink.stats.sent, sink.stats.deduplicated) == (15, 25)


def test_the_embedded_store_dedups_across_a_crash_between_append_and_marks(tmp_path):
    log = EmbeddedLog(tmp_path)
    space = os.urandom(16)
    items = [(space, i, p) for i, p in enumerate(numbered(10), start=1)]
    assert log.send(items[:6]) == 6 and log.send(items[:6]) == 0
    log.journal.append(b"".join(pack(*it) for it in items[6:8]))   # appended; marks never saved
    log.close()
    again = EmbeddedLog(tmp_path)
    assert again.send(items) == 2                                   # 7 and 8 were found on open
    assert [decode_event(e.payload).seq for e in again.range(None, None, 100)] == list(range(10))
    with open(again.journal.live.path, "ab") as f:
        f.write(b"\x10\x00\x00")                                     # a torn tail
    again.close()
    assert len(EmbeddedLog(tmp_path).range(None, None, 100)) == 10


def test_frames_packed_in_a_batch_keep_the_journal_format_and_read_back(tmp_path):
    # The format as journal.py's docstring states it, spelled out here: journals written before
    # batch packing must stay readable, and what is written now must read in older routers.
    def by_the_docstring(space: bytes, index: int, payload: bytes) -> bytes:
        crc = zlib.crc32(space + index.to_bytes(8, "little") + payload)
        return (len(payload).to_bytes(4, "little") + crc.to_bytes(4, "little") + index.to_bytes(8, "little")
                + space + payload)

    a, b = os.urandom(16), os.urandom(16)
    items = [(a, 1, b"x"), (a, 2, b""), (b, 7, os.urandom(300)), (a, 3, b"y" * 70_000)]
    expected = b"".join(by_the_docstring(*it) for it in items)
    assert pack_many(items) == expected and b"".join(pack(*it) for it in items) == expected
    journal = Journal(tmp_path / "j")
    journal.append(pack_many(items))
    assert [(f.space, f.index, f.payload) for f in journal.read(0, 10)] == items
    journal.close()


def test_redis_stopped_and_restarted_mid_load_every_event_once_producer_never_waits(own_redis, tmp_path):
    """Our own redis-server: paused (answers nothing), then shut down and restarted, under load.

    The producer records each phase's events on its own thread while the test holds Redis
    stalled or down, and must finish them all before Redis comes back: so record() never
    waited on the store. No clock is read: the order of the phases is the proof.
    """
    stream = "vsrtest:fault"
    url = f"{own_redis.url}?socket_timeout=0.3&socket_connect_timeout=0.3"
    sink = EventSink(RedisTransport(url, stream, maxlen=None), tmp_path / "spill", queue=2_000, batch=128,
                     close_timeout_s=10).start()
    per_request = 5
    events = [e for i in range(6_000) for e in request_events(f"r{i:05d}", per_request)]
    phases = iter([events[:5_000], events[5_000:15_000], events[15_000:25_000], events[25_000:]])

    def produce_phase() -> None:
        """Record the next phase's events on a thread of their own; they must all be recorded within 30 s."""
        batch = next(phases)
        producer = threading.Thread(target=lambda: [sink.record(ev) for ev in batch])
        producer.start()
        producer.join(30)
        assert not producer.is_alive(), "record() waited on the store"

    produce_phase()                                # Redis up
    own_redis.pause()                              # slow: connections accepted, nothing answered
    produce_phase()
    wait_until(lambda: sink.stats.failures >= 1, "the writer to time out on the stalled Redis")
    failures = sink.stats.failures
    own_redis.resume()
    own_redis.shutdown_saving()                    # down: refused connections
    produce_phase()
    wait_until(lambda: sink.stats.failures > failures, "the writer to find Redis down")
    own_redis.start()
    produce_phase()
    assert sink.wait_drained(60), sink.prometheus_lines()
    sink.close()

    client = redis.Redis(port=own_redis.port)
    got = [decode_event(f[b"e"]) for _, f in client.xrange(stream)]
    client.close()
    keys = [(e.replay_id, e.seq) for e in got]
    assert len(keys) == len(events) and len(set(keys)) == len(events)   # every event, exactly once
    last: dict[str, int] = {}
    for rid, seq in keys:                                           # and each request's in order
        assert seq == last.get(rid, -1) + 1
        last[rid] = seq
    st = sink.stats
    assert st.failures > 0 and st.spilled > 0 and st.resent > 0 and sum(st.lost.values()) == 0
    print(f"\nfault test: spilled {st.spilled}, resent {st.resent}, deduplicated {st.deduplicated}, "
          f"failures {st.failures}")


def test_json_lines_are_what_the_stream_carries(r, stream_name, tmp_path):
    sink = EventSink(RedisTransport(REDIS_URL, stream_name), tmp_path).start()
    ev = request_events("x", 1)[0]
    sink.record(ev)
    assert sink.wait_drained(5)
    sink.close()
    assert stream_events(r, stream_name) == [ev]
    assert msgspec.msgpack.decode(r.xrange(stream_name)[0][1][b"e"])["kind"] == "request_received"


def test_an_idle_writer_is_woken_by_the_doorbell_alone(monkeypatch, tmp_path):
    # With its safety-net wake pushed out of reach, only record()'s ring (and close()'s) can wake the
    # sleeping writer: an event lost between its last look and its sleep would never arrive.
    monkeypatch.setattr(writer, "IDLE_CHECK_S", 3600.0)
    monkeypatch.setattr(writer, "IDLE_POLLS", 1)
    store = FakeStore()
    sink = EventSink(store, tmp_path / "spill", close_timeout_s=1.0).start()
    for n in range(1, 4):
        wait_until(lambda: sink._idle, "the writer asleep", timeout=30)
        sink.record_encoded(b"e%d" % n)
        assert sink.wait_drained(30)
    assert store.entries == [b"e1", b"e2", b"e3"]
    wait_until(lambda: sink._idle, "the writer asleep", timeout=30)
    sink.close()
    assert not sink._thread.is_alive()
