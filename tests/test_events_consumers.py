"""Consumers on both backends: resuming after a kill, the replay recorder, the cache writer, the shadow."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis
import trio

from replay.sources import EmbeddedJournal, RedisStream
from vsr_fast.config.stores import ResponseCacheStore, Stores
from vsr_fast.events.cache_writer import CacheWriter
from vsr_fast.events.capture import AnswerCapture
from vsr_fast.events.consumers import Acks, ConsumerStats, run_consumer
from vsr_fast.events.recorder import ReplayRecorder
from vsr_fast.events.records import MemoryRecords, RedisRecords, ReplayRecords
from vsr_fast.events.request import RequestEvents
from vsr_fast.events.service import open_event_services, open_event_stream
from vsr_fast.events.shadow import ShadowDispatcher
from vsr_fast.events.source import Entry
from vsr_fast.events.types import (
    AnswerCompleted,
    CacheIntent,
    DecisionChosen,
    RequestReceived,
    ShadowAnswered,
    ShadowCopy,
    now_ms,
)
from vsr_fast.events.cache_store import ResponseCache
from vsr_fast.plugins.router_replay import ReplayPolicy, ShadowPolicy

from .procs import ROOT
from .test_events_fixtures import (  # noqa: F401
    REDIS_URL,
    r,
    request_events,
    stream_config,
    stream_name,
    wait_for,
)


class Counting:
    """Processes by remembering ids; ``hold`` ids it finishes but never acknowledges."""

    group = "counting"

    def __init__(self, hold: set[str] = frozenset()) -> None:
        self.seen: list[str] = []
        self.hold = hold

    async def handle(self, entries: list[Entry], acks: Acks) -> None:
        for e in entries:
            key = f"{e.event.replay_id}/{e.event.seq}"
            self.seen.append(key)
            if key not in self.hold:
                acks.done(e.id)


def record_requests(sink, names, n=2) -> None:
    for name in names:
        for ev in request_events(name, n):
            sink.record(ev)


async def drained(sink) -> None:
    await wait_for(sink.drained, what="the writer to drain")


async def test_a_consumer_resumes_after_cancel_without_redoing_acknowledged_work(stream_config):
    async with open_event_stream(stream_config) as stream:
        record_requests(stream.sink, [f"a{i}" for i in range(25)])
        await drained(stream.sink)
        first = Counting(hold={"a3/1", "a7/0"})          # finished, never acknowledged
        first_stats = ConsumerStats("counting")
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: run_consumer(stream.source, first, name="c1", stats=first_stats,
                                                                 task_status=task_status))
            await wait_for(lambda: len(first.seen) == 50, what="the first 50")
            await wait_for(lambda: first_stats.acked == 48, what="its 48 acks to reach the store")
            nursery.cancel_scope.cancel()
        record_requests(stream.sink, [f"b{i}" for i in range(15)])
        await drained(stream.sink)
        again = Counting()
        stats = ConsumerStats("counting")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: run_consumer(stream.source, again, name="c1", stats=stats))
            await wait_for(lambda: len(again.seen) == 32 and stats.acked == 32, what="the rest, acknowledged")
            nursery.cancel_scope.cancel()
    assert sorted(again.seen) == sorted(["a3/1", "a7/0"] + [f"b{i}/{s}" for i in range(15) for s in (0, 1)])
    # Redis: the two held entries come back as pending, and so may what the cancelled run's
    # abandoned read took after the cancel; each is processed once either way.
    assert stats.redelivered >= 2 if stream_config.backend == "redis" else stats.redelivered == 0


# A consumer process; with STOP_AT > 0 it stops dead after that many entries, in the middle of
# a batch (its acks for the batch not yet sent), and waits there to be killed.
CHILD = textwrap.dedent("""
    import sys, trio
    from vsr_fast.events.consumers import run_consumer
    from vsr_fast.events.embedded import EmbeddedLog
    from vsr_fast.events.redis_stream import RedisSource

    backend, url, stream, path, log, stop_at = sys.argv[1:7]
    source = RedisSource(url, stream) if backend == "redis" else EmbeddedLog(path)
    done = 0

    class Slow:
        group = "slow"
        async def handle(self, entries, acks):
            global done
            with open(log, "a") as f:
                for e in entries:
                    f.write(f"{e.event.replay_id}/{e.event.seq}\\n")
                    f.flush()
                    acks.done(e.id)
                    done += 1
                    if done == int(stop_at):
                        await trio.sleep_forever()

    trio.run(lambda: run_consumer(source, Slow(), name="worker-1", batch=8, block_ms=100))
""")


def _acknowledged(backend: str, r: redis.Redis, stream: str, path: Path, entry_ids: list[str]) -> set[str]:
    """The entry ids the group ``slow`` has acknowledged, as the store itself says."""
    if backend == "redis":
        pending = {e["message_id"].decode() for e in r.xpending_range(stream, "slow", "-", "+", 10_000)}
        last = r.xinfo_groups(stream)[0]["last-delivered-id"].decode()
        return {i.decode() for i, _ in r.xrange(stream, "-", last)} - pending
    doc = json.loads((path / "groups" / "slow.offset").read_text())
    return {i for i in entry_ids if int(i) < doc["committed"]} | {str(a) for a in doc["acked"]}


def test_a_killed_consumer_process_resumes_without_redoing_acknowledged_work(stream_config, r, tmp_path):
    """SIGKILL mid-batch, restart: what the store had acknowledged is never processed again."""
    backend = stream_config.backend
    path = Path(stream_config.path) / "stream"

    async def fill() -> None:
        async with open_event_stream(stream_config) as stream:
            record_requests(stream.sink, [f"k{i}" for i in range(150)])
            await drained(stream.sink)
    trio.run(fill)
    reader = RedisStream(REDIS_URL, stream_config.stream) if backend == "redis" else EmbeddedJournal(str(path))
    keys = {entry_id: f"{ev.replay_id}/{ev.seq}" for entry_id, ev in reader}   # entry id -> the work it names
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / "processed.txt"
    args = [sys.executable, str(script), backend, REDIS_URL, stream_config.stream, str(path), str(log)]
    child = subprocess.Popen([*args, "124"], cwd=ROOT)     # 124: the middle of its 16th batch of 8
    try:
        end = time.monotonic() + 30
        while (len(log.read_text().splitlines()) if log.exists() else 0) < 124:
            assert time.monotonic() < end and child.poll() is None, "the consumer never reached its stop"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    before = log.read_text().splitlines()
    assert len(before) == 124
    acked = {keys[i] for i in _acknowledged(backend, r, stream_config.stream, path, list(keys))}
    assert acked == set(before[:120]), "the 15 whole batches, not the one it died in"

    child = subprocess.Popen([*args, "0"], cwd=ROOT)
    try:
        # Until the store says every entry is acknowledged: from then on nothing can be delivered again.
        end = time.monotonic() + 30
        while _acknowledged(backend, r, stream_config.stream, path, list(keys)) != set(keys):
            assert time.monotonic() < end, "the restarted consumer never acknowledged everything"
            time.sleep(0.01)
    finally:
        child.kill()
        child.wait(10)
    after = log.read_text().splitlines()[len(before):]
    assert set(before) | set(after) == set(keys.values())           # everything, in the end
    assert not acked & set(after)                                    # acknowledged work never again
    assert len(after) == len(set(after))


# --- the replay recorder --------------------------------------------------------------


async def _recorded(stream_config, policy, run) -> ReplayRecords:
    """Run the recorder over what ``run(sink)`` records, and return its records."""
    if stream_config.backend == "redis":
        records = ReplayRecords(RedisRecords(REDIS_URL, f"{stream_config.stream}:replay:",
                                             max_records=policy.max_records, ttl_seconds=policy.ttl_seconds))
    else:
        records = ReplayRecords(MemoryRecords(max_records=policy.max_records, ttl_seconds=policy.ttl_seconds))
    async with open_event_stream(stream_config) as stream:
        stats = ConsumerStats("replay-recorder")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: run_consumer(stream.source, ReplayRecorder(records), name="r1", stats=stats))
            n = run(stream.sink)
            await wait_for(lambda: stats.acked >= n, what="the recorder")
            nursery.cancel_scope.cancel()
    return records


def _route_events(sink, policy, i: int, decision: str, model: str, recipe: str, ts: int) -> int:
    ev = RequestEvents(sink, config_version="v1", request_id=f"q{i}", policy=policy, replay_id=f"rec{i:03d}")
    ev.started_ms = ts
    ev.recipe = recipe
    raw = json.dumps({"model": "vsr/auto", "messages": [{"role": "user", "content": f"question {i}"}]}).encode()
    from vsr_fast.server.route import decode_chat

    ev.received(raw, decode_chat(raw))
    sink.record(DecisionChosen(**ev._common(), decision=decision, model=model, candidates=[model]))
    cap = AnswerCapture(1 << 16)
    cap.feed(b'{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}')
    ev.answer(status=200, response_path="upstream", model=model, streamed=False, captured=cap)
    return 3


async def test_the_recorder_keeps_records_to_get_and_list_by_filter(stream_config):
    policy = ReplayPolicy(capture_request_body=True, capture_response_body=True, max_records=1000)
    base = now_ms() - 60_000
    plan = [(i, ("code", "code-model", "r1") if i % 3 == 0 else ("general", "general-model", "r2"), base + i)
            for i in range(30)]

    def run(sink) -> int:
        off = RequestEvents(sink, config_version="v1")       # router_replay off: not recorded
        off.received(b"{}", None)
        return 1 + sum(_route_events(sink, policy, i, *route, ts) for i, route, ts in plan)

    records = await _recorded(stream_config, policy, run)
    rec = await records.get_record("rec003")
    assert (rec.decision, rec.model, rec.recipe, rec.status, rec.finish_reason) == ("code", "code-model", "r1", 200,
                                                                                    "stop")
    assert "question 3" in rec.request_body and rec.response_body.startswith('{"choices"')
    assert await records.get_record("nope") is None
    listed = await records.list_records(decision="code", limit=100)
    assert [s.id for s in listed] == [f"rec{i:03d}" for i in range(27, -1, -3)]
    assert [s.id for s in await records.list_records(model="general-model", recipe="r2", limit=2)] == [
        "rec029", "rec028"]
    window = await records.list_records(since_ms=base + 10, until_ms=base + 14)
    assert [s.id for s in window] == [f"rec{i:03d}" for i in range(14, 9, -1)]
    assert len(await records.list_records(limit=1000)) == 30
    records.close()


async def test_the_recorder_bounds_its_records(stream_config):
    policy = ReplayPolicy(max_records=5)

    def run(sink) -> int:
        base = now_ms() - 60_000
        return sum(_route_events(sink, policy, i, "general", "m", "r", base + i) for i in range(12))

    records = await _recorded(stream_config, policy, run)
    listed = await records.list_records(limit=100)
    assert [s.id for s in listed] == [f"rec{i:03d}" for i in range(11, 6, -1)]
    assert await records.get_record("rec000") is None and await records.get_record("rec011") is not None
    if stream_config.backend == "redis":
        # Retention bounds Redis, not only the listing: the per-field indexes trim with the primary one.
        r = redis.Redis.from_url(REDIS_URL)
        prefix = f"{stream_config.stream}:replay:"
        for index in ("i", "i:decision:general", "i:model:m", "i:recipe:r"):
            assert r.zrange(prefix + index, 0, -1) == [f"rec{i:03d}".encode() for i in range(7, 12)], index
        r.close()
    records.close()


# --- the cache writer -------------------------------------------------------------------

GOOD = b'{"id":"x","choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}]}'


def _answer(key: str, **kw) -> AnswerCompleted:
    body = kw.pop("body", GOOD)
    return AnswerCompleted(replay_id=f"rid-{key}", seq=5, status=kw.pop("status", 200), body=body,
                           body_bytes=len(body), content_type="application/json",
                           cache=CacheIntent(key=key, ttl_seconds=60), **kw)


@pytest.mark.parametrize("cache_backend", ["memory", "redis"])
async def test_the_cache_writer_stores_only_released_complete_answers(stream_config, cache_backend, r):
    prefix = f"{stream_config.stream}:cache:"
    cache = ResponseCache(ResponseCacheStore(backend_type=cache_backend, url=REDIS_URL, prefix=prefix))
    answers = {
        "ok": _answer("ok", guard="passed"),
        "noted": _answer("noted", guard="noted"),
        "blocked": _answer("blocked", guard="blocked"),
        "flagged": _answer("flagged", guard="flagged"),
        "over": _answer("over", guard="over_limit", streamed=True, held=True),
        "nofinish": _answer("nofinish", body=GOOD.replace(b',"finish_reason":"stop"', b"")),
        "cut": _answer("cut", streamed=True, body=b'data: {"choices":[]}\n\n'),
        "length": _answer("length", body=GOOD.replace(b"stop", b"length")),
        "error": _answer("error", status=502),
    }
    async with open_event_stream(stream_config) as stream:
        writer = CacheWriter(cache, stream.sink)
        async with trio.open_nursery() as nursery:
            stats = ConsumerStats(writer.group)
            nursery.start_soon(lambda: run_consumer(stream.source, writer, name="w1", stats=stats))
            for ev in answers.values():
                stream.sink.record(ev)
            stream.sink.record(AnswerCompleted(replay_id="no-intent", body=GOOD, body_bytes=len(GOOD)))
            await wait_for(lambda: stats.acked >= 10 + 9, what="the writer and its notes")
            nursery.cancel_scope.cancel()
    stored = {k for k in answers if await cache.lookup(k) is not None}
    assert stored == {"ok", "noted"}
    hit = await cache.lookup("ok")
    assert (hit.status, hit.body, hit.streamed) == (200, GOOD, False)
    assert writer.skipped == {"blocked": 1, "flagged": 1, "over_limit": 1, "incomplete": 2, "truncated": 1,
                              "error": 1}
    assert 'llm_cache_write_skipped_total{reason="incomplete"} 2' in writer.prometheus_lines()
    cache.close()


# --- the shadow dispatcher ---------------------------------------------------------------


async def test_the_shadow_sends_copies_records_answers_and_waits_for_a_slot(stream_config):
    """A copy that finds every slot busy waits for one (backpressure on the group), never skipped."""
    sent: list[tuple[str, bytes]] = []
    release = trio.Event()

    async def send(copy: ShadowCopy, recipe: str | None) -> tuple[int, bytes]:
        model, body = copy.model, copy.body
        sent.append((model, body))
        if b"slow" in body:
            await release.wait()
        if b"hang" in body:
            await trio.sleep_forever()
        return 200, b'{"choices":[{"index":0,"message":{"content":"shadow says hi"},"finish_reason":"stop"}]}'

    def request(i: int, text: str, **copy) -> RequestReceived:
        body = json.dumps({"model": "vsr/auto", "stream": True, "stream_options": {"include_usage": True},
                           "messages": [{"role": "user", "content": text}]}).encode()
        shadow = ShadowCopy(model="cand", body=body, live_model="live", max_concurrency=2, timeout_seconds=0.3,
                            max_body_bytes=12, **copy)
        return RequestReceived(replay_id=f"s{i}", seq=0, shadow=shadow)

    async with open_event_stream(stream_config) as stream, trio.open_nursery() as nursery:
        shadow = ShadowDispatcher(send, stream.sink, nursery)
        stats = ConsumerStats(shadow.group)
        nursery.start_soon(lambda: run_consumer(stream.source, shadow, name="s1", stats=stats))
        stream.sink.record(request(0, "slow one"))
        stream.sink.record(request(1, "slow two"))
        await wait_for(lambda: len(sent) == 2, what="two copies in flight")
        stream.sink.record(request(2, "third: both slots busy"))
        await wait_for(lambda: stats.delivered >= 3, what="the third copy read while both slots are busy")
        release.set()
        stream.sink.record(request(3, "hang"))
        stream.sink.record(RequestReceived(replay_id="plain", seq=0))
        await wait_for(lambda: stats.acked >= 5 + 4, what="answers recorded and acknowledged")
        nursery.cancel_scope.cancel()
        answers = [e.event for e in stream.source.range(None, None, 100) if isinstance(e.event, ShadowAnswered)]
    by_id = {a.replay_id: a for a in answers}
    assert set(by_id) == {"s0", "s1", "s2", "s3"}, "the third copy waited for a slot"
    assert (by_id["s0"].status, by_id["s0"].finish_reason, by_id["s0"].body) == (200, "stop", b'{"choices":[')
    assert by_id["s0"].live_model == "live" and by_id["s0"].body_truncated
    assert by_id["s3"].error == "timeout"
    model, body = sent[0]
    doc = json.loads(body)
    assert model == "cand" and doc["stream"] is False and "stream_options" not in doc   # a whole answer
    assert set(doc) == {"model", "stream", "messages"}                                  # the body, nothing else


async def test_services_wire_recorder_cache_and_shadow_together(stream_config):
    """What the server runs: a sampled request recorded with its shadow answer and its cache write."""
    policy = ReplayPolicy(capture_request_body=True, capture_response_body=True,
                          shadow=ShadowPolicy(model="cand", sample_rate=1.0, timeout_seconds=5))
    sent = []

    async def send(copy: ShadowCopy, recipe: str | None):
        sent.append(copy.model)
        return 200, GOOD

    stores = Stores(event_stream=stream_config,
                    response_cache=ResponseCacheStore(prefix=f"{stream_config.stream}:cache:"))
    async with open_event_services(stores, replay=policy, send_shadow=send, consumer_name="t") as svc:
        ev = RequestEvents(svc.sink, config_version="v", policy=policy)
        raw = b'{"model":"vsr/auto","messages":[{"role":"user","content":"hi"}]}'
        from vsr_fast.server.route import decode_chat

        ev.received(raw, decode_chat(raw))
        ev.shadowed("live", "openai", raw)      # single-model dispatch: the request the live model was sent
        cap = ev.capture(CacheIntent(key="k1", ttl_seconds=30), svc.cache.max_entry_bytes)
        cap.feed(GOOD)
        ev.answer(status=200, response_path="upstream", model="live", streamed=False, captured=cap,
                  content_type="application/json", cache=CacheIntent(key="k1", ttl_seconds=30))

        async def complete() -> bool:
            rec = await svc.records.get_record(ev.replay_id)
            return bool(rec and rec.shadow and rec.cache and rec.cache.stored)

        with trio.fail_after(10):
            while not await complete():
                await trio.sleep(0.02)
        rec = await svc.records.get_record(ev.replay_id)
        assert rec.shadow[0].model == "cand" and rec.shadow[0].status == 200 and sent == ["cand"]
        assert rec.cache.stored and (await svc.cache.lookup("k1")).body == GOOD
        lines = "\n".join(svc.prometheus_lines())
        assert 'vsr_shadow_requests_total{outcome="answered"} 1' in lines
        assert 'vsr_events_consumer_acked_total{group="replay-recorder"}' in lines
