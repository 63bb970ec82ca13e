"""The embedded stream's journal read past a corrupt stretch: consumer groups move on, the scan stays linear."""
from __future__ import annotations

import os

from vsr_fast.events import journal as journal_module
from vsr_fast.events.embedded import EmbeddedLog
from vsr_fast.events.journal import HEADER
from vsr_fast.events.segments import segment_paths

SPACE = b"s" * 16


def _filled(directory, n: int, payload: bytes = b"x" * 100) -> None:
    log = EmbeddedLog(directory, maxlen=80)      # ten events a segment
    for i in range(1, n + 1):
        log.send([(SPACE, i, payload)])
    log.close()


def _overwrite(path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _read_all(log: EmbeddedLog, group: str = "g") -> list[str]:
    got: list[str] = []
    for _ in range(10_000):
        entries = log.read(group, "c", 100, 0)
        log.ack(group, [e.id for e in entries])
        got += [e.id for e in entries]
        if not entries and log.caught_up([group]):
            return got
    raise AssertionError("the group never caught up")


def _frame(payload: int = 100) -> int:
    return HEADER.size + payload


def _assert_moves_on_and_trims(directory, corrupt) -> None:
    _filled(directory, 30)
    (_, first), *_ = segment_paths(directory)
    corrupt(first)
    log = EmbeddedLog(directory, maxlen=80)
    log.ensure_group("g")
    got = _read_all(log)
    assert len(got) == 29 and log.journal.unreadable
    g = log._groups["g"]
    assert g.committed == log.journal.end and not g.acked and log.unread("g") == 0
    for i in range(31, 400):
        log.send([(SPACE, i, b"x" * 100)])
        log.ack("g", [e.id for e in log.read("g", "c", 100, 0)])
    stats = log.stats()
    assert stats["segments"] <= 10 and stats["events"] <= 100, stats
    assert g.committed == log.journal.end and not g.acked
    log.close()


def test_a_corrupt_stretch_inside_a_closed_segment_is_passed_by_every_group_and_trimmed(tmp_path):
    _assert_moves_on_and_trims(tmp_path / "s", lambda path: _overwrite(path, 2 * _frame() + 40, b"\xff" * 10))


def test_a_corrupt_stretch_to_a_closed_segments_end_is_passed_and_trimmed(tmp_path):
    _assert_moves_on_and_trims(tmp_path / "s", lambda path: _overwrite(path, 9 * _frame() + 40, b"\xff" * 10))


def test_a_scan_in_budgeted_pieces_still_reaches_the_next_frame(tmp_path, monkeypatch):
    # Each read scans at most this much, then lets the log's lock go; the group resumes from where it stopped.
    monkeypatch.setattr(journal_module, "SCAN_BUDGET", 256)
    directory = tmp_path / "s"
    _filled(directory, 30)
    (_, first), *_ = segment_paths(directory)
    _overwrite(first, 2 * _frame(), bytes(4 * _frame()))        # four frames of zeros
    log = EmbeddedLog(directory, maxlen=80)
    log.ensure_group("g")
    assert len(_read_all(log)) == 26
    assert list(log.journal.unreadable.values()) == [4 * _frame()], "one stretch, logged once"
    assert log._groups["g"].committed == log.journal.end
    log.close()
    reopened = EmbeddedLog(directory, maxlen=80)
    reopened.ensure_group("g")
    assert reopened.caught_up(["g"]) and reopened.read("g", "c", 100, 0) == []
    reopened.close()


def test_the_resync_scan_reads_each_corrupt_byte_a_bounded_number_of_times(tmp_path, monkeypatch):
    """Garbage whose length fields name frames that fit the file: each candidate is checked in the chunk at hand,
    not read again from disk."""
    directory = tmp_path / "s"
    _filled(directory, 30, payload=b"y" * 3000)
    (_, first), *_ = segment_paths(directory)
    stretch = b"\x00\x10\x00\x00" * 2048        # length fields of 4096 at every fourth byte
    _overwrite(first, _frame(3000) + 100, stretch)
    read = {"bytes": 0}
    real = os.pread

    def counting(fd, n, at):
        data = real(fd, n, at)
        read["bytes"] += len(data)
        return data

    log = EmbeddedLog(directory, maxlen=80)
    log.ensure_group("g")
    monkeypatch.setattr(journal_module.os, "pread", counting)
    got = _read_all(log)
    monkeypatch.undo()
    assert len(got) == 27 and log._groups["g"].committed == log.journal.end
    size = sum(os.path.getsize(p) for _, p in segment_paths(directory))
    assert read["bytes"] < 16 * size, (read, size)
    log.close()


def test_a_range_from_an_offset_inside_a_frame_reads_nothing_and_reports_nothing(tmp_path):
    directory = tmp_path / "s"
    _filled(directory, 30)
    log = EmbeddedLog(directory, maxlen=80)
    assert log.range(str(_frame() + 7), None, 10) == []
    assert log.journal.unreadable == {}
    assert [e.id for e in log.range(str(_frame()), None, 2)] == [str(2 * _frame()), str(3 * _frame())]
    log.close()
