"""The journal's batch framing (C kernel) against journal.py's Python definition of the format, byte for byte."""
from __future__ import annotations

import os
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsr_fast._ext import framing
from vsr_fast.events import journal
from vsr_fast.events.journal import Journal

from .stubs import assert_surface_is_the_stub

SPACES = [os.urandom(16) for _ in range(3)] + [b"\x00" * 16, b"\xff" * 16]
items_st = st.lists(st.tuples(st.sampled_from(SPACES), st.integers(0, 2**64 - 1),
                              st.binary(max_size=600) | st.just(b"")), max_size=40)


def by_the_docstring(space: bytes, index: int, payload: bytes) -> bytes:
    # journal.py's module docstring, spelled out without its code: the on-disk format old journals hold.
    crc = zlib.crc32(space + index.to_bytes(8, "little") + payload)
    return len(payload).to_bytes(4, "little") + crc.to_bytes(4, "little") + index.to_bytes(8, "little") + space + payload


@settings(max_examples=500, deadline=None)
@given(items_st)
def test_batches_equal_the_python_format(items):
    expected = b"".join(by_the_docstring(*it) for it in items)
    assert journal.pack_many(items) == expected
    assert framing.pack_many(items) == expected
    assert framing.pack_many(iter(items)) == expected            # any iterable, as the Python one takes


@settings(max_examples=500, deadline=None)
@given(items_st, st.dictionaries(st.sampled_from(SPACES), st.integers(0, 2**64 - 1), max_size=5))
def test_fresh_items_and_marks_equal_the_python_rule(items, marks):
    before = dict(marks)
    assert framing.pack_fresh(items, marks) == journal.pack_fresh(items, marks)
    assert marks == before


def test_runs_of_one_space_as_the_writer_sends_them():
    # The writer's batches: one space, increasing indexes, some already appended (a re-sent batch), with
    # empty and large payloads (past the size framed without the GIL) among them.
    rng = random.Random(14)
    space, other = os.urandom(16), os.urandom(16)
    for n in (0, 1, 3, 128, 1000):
        first = rng.randrange(1, 1 << 40)
        items = [(space, first + i, rng.randbytes(rng.choice((0, 0, 40, 300, 5000, 70_000)))) for i in range(n)]
        if n > 3:
            items[n // 2] = (other, 7, b"")
        assert framing.pack_many(items) == journal.pack_many(items)
        marks = {space: first + n // 3, other: 6}
        data, count, advanced = framing.pack_fresh(items, marks)
        assert (data, count, advanced) == journal.pack_fresh(items, marks)
        # Indexes past first + n // 3 are fresh; the other space's one (7 over 6) replaced one of them.
        assert count == max(0, n - 1 - n // 3) and len(data) == sum(32 + len(it[2]) for it in items
                                                                   if it[1] > marks[it[0]])


def test_one_frame_of_a_large_payload_reads_back(tmp_path):
    space, payload = os.urandom(16), os.urandom(3 << 20)          # framed without the GIL; one pread too small
    j = Journal(tmp_path / "j")
    j.append(framing.pack_many([(space, 1, b""), (space, 2, payload), (space, 3, b"z")]))
    assert [(f.index, f.payload) for f in j.read(0, 10)] == [(1, b""), (2, payload), (3, b"z")]
    j.close()


def test_payloads_in_other_buffers_frame_as_their_bytes():
    space = os.urandom(16)
    items = [(space, 1, bytearray(b"abc")), (space, 2, memoryview(b"defg"))]
    assert framing.pack_many(items) == journal.pack_many(items) == journal.pack_many([(space, 1, b"abc"),
                                                                                      (space, 2, b"defg")])


@pytest.mark.parametrize(("item", "error"), [
    ((b"short", 1, b"x"), ValueError),                 # a space that is not 16 bytes: no frame the reader reads
    ((os.urandom(16), -1, b"x"), OverflowError),
    ((os.urandom(16), 2**64, b"x"), OverflowError),
])
def test_items_that_fit_no_frame_are_refused(item, error):
    with pytest.raises(error):
        framing.pack_many([item])
    with pytest.raises(error):
        framing.pack_fresh([item], {})


def test_surface_is_the_stub():
    assert_surface_is_the_stub(framing)
