"""The SSE splitters a relayed stream goes through cost work in proportion to the bytes fed, however long one line
is: a line that arrives in many reads is scanned once, not again at every read (which made a 20 MB line cost
seconds of CPU and a 70 MB one pass the request's deadline). Counted, never timed: each splitter's searches are
wrapped and the bytes they were given summed."""
from __future__ import annotations

import re

from vsr_fast.protocol import sse
from vsr_fast.protocol.translate import _sse
from vsr_fast.protocol.translate._sse import SSEParser

PIECE = b"B" * 1024
READS = 5000        # 5 MB in 1 KB reads, no newline among them


class _CountingEOL:
    """A line-end regex whose searches sum the bytes each may look at (from ``pos`` to the end)."""

    def __init__(self, regex: re.Pattern) -> None:
        self.regex, self.scanned = regex, 0

    def search(self, buf: bytes, pos: int = 0) -> re.Match | None:
        self.scanned += len(buf) - pos
        return self.regex.search(buf, pos)


def test_the_sse_parser_scans_a_long_line_once(monkeypatch):
    counting = _CountingEOL(_sse._EOL)
    monkeypatch.setattr(_sse, "_EOL", counting)
    parser = SSEParser()
    assert parser.feed(b"data: ") == []
    for _ in range(READS):
        assert parser.feed(PIECE) == []
    assert parser.feed(b"\n\n") == [(None, PIECE * READS)]
    total = 6 + READS * len(PIECE) + 2
    # Every byte is looked at, at most twice: in its read, and once more when its line ends.
    assert total <= counting.scanned <= 2 * total, counting.scanned


MIXED = (b"data: a\r\n\r\ndata: b\rdata: c\r\r: comment\nevent: e\ndata: d\n\ndata: " + b"x" * 50
         + b"\r\n\r\ndata: {\"k\": 1}\ndata: 2\n\ndata: [DONE]\n")


def test_the_sse_parser_reads_a_stream_cut_anywhere_as_it_reads_it_whole():
    whole = SSEParser()
    expected = whole.feed(MIXED) + whole.close()
    assert [data for _, data in expected] == [b"a", b"b\nc", b"d", b"x" * 50, b'{"k": 1}\n2', b"[DONE]"]
    for size in range(1, 9):
        parser = SSEParser()
        got = [ev for i in range(0, len(MIXED), size) for ev in parser.feed(MIXED[i:i + size])]
        assert got + parser.close() == expected, size


class _Read(bytes):
    """A read whose concatenations (``carried + read``) sum the bytes they copy in ``COPIED``."""

    def __radd__(self, other: bytes) -> bytes:
        COPIED.append(len(other) + len(self))
        return bytes(other) + bytes(self)


COPIED: list[int] = []


def test_the_event_cutter_scans_and_copies_a_long_event_once(monkeypatch):
    scanned: list[int] = []
    last = getattr(sse, "_last_boundary", None)

    def counting(data: bytes) -> int:
        scanned.append(len(data))
        return last(data)

    monkeypatch.setattr(sse, "_last_boundary", counting, raising=False)
    COPIED.clear()
    cutter = sse.EventCutter()
    assert cutter.feed(_Read(b"data: ")) == b""
    for _ in range(READS):
        assert cutter.feed(_Read(PIECE)) == b""
    assert cutter.feed(_Read(b"\n\ndata: next")) == b"data: " + PIECE * READS + b"\n\n"
    assert cutter.flush() == b"data: next"
    total = 6 + READS * len(PIECE) + 12
    # Each read is searched, and copied, with at most the 3 carried bytes a boundary may straddle before it.
    assert sum(COPIED) <= total + 3 * (READS + 2), sum(COPIED)
    assert total <= sum(scanned) <= total + 3 * (READS + 2), sum(scanned)


def test_the_event_cutter_finds_a_boundary_split_between_reads():
    for stream in (b"data: a\n\ndata: b\n\n", b"data: a\r\n\r\ndata: b\r\n\r\n"):
        for size in (1, 2, 3, 5):
            cutter = sse.EventCutter()
            out = [cutter.feed(stream[i:i + size]) for i in range(0, len(stream), size)]
            assert b"".join(out) == stream and cutter.flush() == b"", (stream, size)
            assert all(piece.endswith((b"\n\n", b"\r\n\r\n")) for piece in out if piece), out
