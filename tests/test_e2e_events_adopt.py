"""A restart on fewer workers loses nothing an earlier worker left (trial 7a, finding 3).

Redis: two workers spill while Redis is down, each into its own slot; the one
worker started after Redis is back sends its own slot and adopts the other.
Embedded: a worker's journal that its consumers had not read is read by the
process started after it on fewer workers.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import redis

from vsr_fast.events.embedded import EmbeddedLog
from vsr_fast.events.journal import Journal, pack_many
from vsr_fast.events.types import decode_event

from .procs import free_port, replay_record, router, wait_until, write_config
from .test_events_fixtures import own_redis  # noqa: F401


def _spilled(slot) -> int:
    journal = Journal(slot / "spill.journal")
    try:
        return len(journal.read(0, 1 << 20))
    finally:
        journal.close()


def _free(slot) -> bool:
    """Whether no process holds ``slot`` (an adopter lets it go once it re-sent it, after closing its writer)."""
    fd = os.open(slot / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_one_worker_resends_the_slots_of_two(mock, tmp_path, own_redis):
    own_redis.kill()                      # down while the two workers serve: they spill
    stream = "vsr-adopt:events"
    spill = tmp_path / "spill"
    doc = {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"stores": {"event_stream": {
            "backend": "redis", "url": f"{own_redis.url}?socket_timeout=0.2", "stream": stream,
            "path": str(spill), "queue": 16, "batch": 16}}},
    }
    config = write_config(doc, str(tmp_path))
    slots = [spill / "vsr-adopt_events" / f"spill-{n}" for n in (0, 1)]
    sent = 0
    with router(config, "--workers", "2") as proc:
        def ask(i: int) -> int:
            return httpx.post(f"{proc.url}/v1/chat/completions", timeout=10,
                              json={"model": "auto", "messages": [{"role": "user", "content": f"hello {i}"}]}).status_code

        with ThreadPoolExecutor(8) as pool:
            # Until both workers spilled (the kernel picks the worker of each connection): at most 400 requests.
            while sent < 400 and not all((s / "spill.journal").exists() and (s / "spill.journal").stat().st_size
                                         for s in slots):
                assert list(pool.map(ask, range(sent, sent + 16))) == [200] * 16
                sent += 16
        proc.signal()                     # SIGTERM, waited for: the workers keep their unsent events on disk
        assert proc.wait(60) == 0
    left = [_spilled(s) for s in slots]
    assert all(left), f"both workers spilled: {left}"
    assert sum(left) == 5 * sent, "five events a request, all on disk"

    own_redis.start()
    r = redis.Redis(port=own_redis.port)
    with router(config) as proc:
        wait_until(lambda: r.xlen(stream) >= 5 * sent, "every spilled event on the stream")
        wait_until(lambda: not any(_spilled(s) for s in slots), "both slots emptied")
        adopted = [line for line in proc.lines if "adopted spill slot" in line and "to re-send" in line]
    events = [decode_event(fields[b"e"]) for _, fields in r.xrange(stream)]
    assert len(events) == 5 * sent
    assert max(Counter((e.replay_id, e.seq) for e in events).values()) == 1, "no event twice"
    assert len(adopted) == 1 and str(slots[1]) in adopted[0], proc.lines
    assert re.search(rf"\b{left[1]} event\(s\) to re-send", adopted[0]), adopted[0]


def _embedded(mock, tmp_path) -> tuple[int, dict[str, str], str]:
    """A port, a state directory and a configuration recording replays: the embedded stream at a known path."""
    doc = {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}]},
        "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
        "global": {"plugins": [{"type": "router_replay", "configuration": {}}]},
    }
    return free_port(), {"VSR_STATE_DIR": str(tmp_path / "state")}, write_config(doc, str(tmp_path))


def test_one_process_reads_the_embedded_journal_a_worker_left(mock, tmp_path):
    port, env, config = _embedded(mock, tmp_path)
    with router(config, "--port", str(port), env=env) as proc:
        ids = [httpx.post(f"{proc.url}/v1/chat/completions", timeout=10, json={
            "model": "auto", "messages": [{"role": "user", "content": f"hello {i}"}]}).headers["x-vsr-replay-id"]
            for i in range(3)]
    # Made worker 1's journal as a worker stopped before its consumers read it leaves it: no group has read it.
    left = tmp_path / "state" / "events" / f"{port}-w1"
    (tmp_path / "state" / "events" / str(port)).rename(left)
    for offset in (left / "stream" / "groups").iterdir():
        offset.unlink()
    journal = EmbeddedLog(left / "stream")
    held = journal.length()
    journal.close()
    with router(config, "--port", str(port), env=env) as proc:
        assert all(replay_record(proc, i)["id"] == i for i in ids)
        adopted = [line for line in proc.lines if "adopted" in line and str(left) in line]
    assert len(adopted) == 1 and f"{held} unread event(s)" in adopted[0], proc.lines


def test_an_adopted_embedded_spill_slot_leaves_the_router_its_stream(mock, tmp_path):
    # The adopted slot's writer sends into the router's own embedded log: letting the slot go must not close it.
    port, env, config = _embedded(mock, tmp_path)

    def ask(proc) -> str:
        return httpx.post(f"{proc.url}/v1/chat/completions", timeout=10, json={
            "model": "auto", "messages": [{"role": "user", "content": "hello"}]}).headers["x-vsr-replay-id"]

    with router(config, "--port", str(port), env=env) as proc:
        old = [ask(proc) for _ in range(2)]
        for replay_id in old:
            replay_record(proc, replay_id)
    # Those events as a process that could not send them leaves them: in a spill slot of its own, not on the stream.
    events = tmp_path / "state" / "events" / str(port)
    stream = EmbeddedLog(events / "stream")
    payloads = [e.payload for e in stream.range(None, None, 1000)]
    stream.close()
    shutil.rmtree(events / "stream")
    slot = events / "spill-1"
    slot.mkdir()
    journal = Journal(slot / "spill.journal")
    space = os.urandom(16)
    journal.append(pack_many((space, i + 1, p) for i, p in enumerate(payloads)))
    journal.close()
    with router(config, "--port", str(port), env=env) as proc:
        assert all(replay_record(proc, i)["id"] == i for i in old)
        wait_until(lambda: _free(slot), "the adopted slot re-sent and let go")
        assert not _spilled(slot)
        new = ask(proc)
        assert replay_record(proc, new)["id"] == new
