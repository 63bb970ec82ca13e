"""The event journal's small files (consumer offsets, marks, the spill offset, the journal rewritten at close)
when the disk is full or the directory was removed: no crash; what is kept in memory is written later, what
could not be kept is counted lost."""
from __future__ import annotations

import json
import logging
import os
import shutil

import httpx

from vsr_fast.events.embedded import EmbeddedLog
from vsr_fast.events.writer import EventSink

from .procs import config, router, wait_until, write_config
from .test_events_writer import MemorySwitch, numbered


def _full(path) -> None:
    """Make the next write_atomic of ``path`` meet ENOSPC: its temporary file is /dev/full."""
    path.with_name(path.name + ".tmp").symlink_to("/dev/full")


def _items(n: int, start: int = 1):
    space = b"s" * 16
    return [(space, i, p) for i, p in enumerate(numbered(n), start=start)]


def test_an_offset_the_disk_cannot_take_stays_in_memory_and_is_written_once_it_can(tmp_path):
    log = EmbeddedLog(tmp_path)
    log.ensure_group("g")
    offset = tmp_path / "groups" / "g.offset"
    log.send(_items(6))
    _full(offset)
    first = log.read("g", "c", 3, 0)
    log.ack("g", [e.id for e in first])                 # ENOSPC: kept in memory, not raised
    assert json.loads(offset.read_text())["committed"] == 0
    rest = log.read("g", "c", 10, 0)
    assert len(rest) == 3 and not {e.id for e in rest} & {e.id for e in first}     # no re-delivery here
    assert log.offset_failures >= 1
    # An operator sees it: the sink over this log counts it in /metrics.
    sink = EventSink(log, tmp_path / "spill")
    failures = [line for line in sink.prometheus_lines() if line.startswith("vsr_events_offset_write_failures_total ")]
    assert failures == [f"vsr_events_offset_write_failures_total {log.offset_failures}"]
    offset.with_name("g.offset.tmp").unlink()           # room again
    log.ack("g", [e.id for e in rest])
    assert json.loads(offset.read_text())["committed"] == log.journal.end
    log.close()


def test_a_removed_journal_directory_does_not_stop_the_consumers(tmp_path):
    log = EmbeddedLog(tmp_path / "events")
    log.ensure_group("g")
    log.send(_items(4))
    shutil.rmtree(tmp_path / "events")                  # rm -rf .vsr/events while serving
    got = log.read("g", "c", 10, 0)
    log.ack("g", [e.id for e in got])                   # recreates groups/ for its offset
    assert json.loads((tmp_path / "events" / "groups" / "g.offset").read_text())["committed"] == log.journal.end
    log.send(_items(2, start=5))                        # and the marks file in it, once a second: no raise
    log.close()


def test_marks_the_disk_cannot_take_do_not_fail_an_append(tmp_path):
    log = EmbeddedLog(tmp_path)
    _full(tmp_path / "stream.marks")
    assert log.send(_items(3)) == 3                     # the append landed; only the scan shortcut is stale
    log.close()
    assert EmbeddedLog(tmp_path).send(_items(3)) == 0   # marks rebuilt from the frames on open


def test_a_spill_offset_the_disk_cannot_take_does_not_stop_the_writer(tmp_path):
    switch = MemorySwitch()
    switch.down()
    sink = EventSink(switch.transport(), tmp_path, queue=4, batch=2, close_timeout_s=0.2).start()
    payloads = numbered(40)
    for p in payloads:
        sink.record_encoded(p)
    wait_until(lambda: sink.stats.spilled > 0, "events spilled")
    _full(tmp_path / "spill.offset")
    switch.up()
    assert sink.wait_drained(30)                         # the writer re-sent the journal, offset or not
    assert switch.entries() == payloads and sum(sink.stats.lost.values()) == 0
    sink.close()


def test_events_a_full_disk_cannot_keep_at_close_are_counted_lost_and_logged(tmp_path, caplog):
    switch = MemorySwitch()
    switch.down()
    sink = EventSink(switch.transport(), tmp_path, queue=100, batch=8, close_timeout_s=0.2).start()
    for p in numbered(30):
        sink.record_encoded(p)
    wait_until(lambda: sink.stats.failures >= 1, "the writer to fail and keep its batch")
    _full(tmp_path / "spill.journal")
    with caplog.at_level(logging.ERROR, logger="vsr_fast.events"):
        sink.close()                                     # ENOSPC rewriting the journal: not raised
    assert sink.stats.lost["spill_error"] == 30
    assert 'vsr_events_lost_total{reason="spill_error"} 30' in sink.prometheus_lines()
    assert any("30 event(s)" in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)
    assert not os.path.exists(tmp_path / "spill.journal.tmp") or os.path.islink(tmp_path / "spill.journal.tmp")


def test_the_router_serves_on_when_its_event_journal_directory_is_removed(tmp_path, mock):
    """``rm -rf .vsr/events`` while serving, with the replay recorder acknowledging what it stores."""
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1", "name": "only"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {}}]}
    with router(write_config(doc, str(tmp_path))) as proc:
        chat = {"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{proc.url}/v1/chat/completions", json=chat, timeout=20).status_code == 200
        # The router's writer may put a file in while rmtree walks (ENOTEMPTY): whatever it wrote stays, the rest
        # of the directory goes, which is the removal under test.
        shutil.rmtree(os.path.join(proc.env["VSR_STATE_DIR"], "events"), ignore_errors=True)
        for _ in range(5):
            assert httpx.post(f"{proc.url}/v1/chat/completions", json=chat, timeout=20).status_code == 200
        wait_until(lambda: any("consumer offset" in x and "saved again" in x for x in proc.lines)
                   or os.path.exists(os.path.join(proc.env["VSR_STATE_DIR"], "events")), "the offset written again")
        assert httpx.get(f"{proc.url}/health").status_code == 200 and proc.popen.poll() is None
    assert not any("Traceback" in x for x in proc.lines), "\n".join(proc.lines)


def test_retention_after_the_journal_directory_was_removed_does_not_stop_the_consumers(tmp_path):
    log = EmbeddedLog(tmp_path / "events", maxlen=16)    # a segment every 2 events
    log.ensure_group("g")
    for i in range(10):
        log.send(_items(2, start=1 + 2 * i))
    shutil.rmtree(tmp_path / "events")
    got = log.read("g", "c", 100, 0)
    log.ack("g", [e.id for e in got])                   # trims segments whose files are gone: no raise
    assert len(got) == 20
    log.close()
